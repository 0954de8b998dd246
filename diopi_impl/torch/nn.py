"""Neural-network functions: softmax, losses, normalization, convolution, pooling."""

import torch

from dipu import _C
from dipu.diopi import SUCCESS
from diopi_impl.torch import library

alias = _C.alias
aten = torch.ops.aten


def _optional(tensor, d):
    return None if tensor is None else alias(tensor, d)


def _write(outputs, results, d) -> None:
    """Copy ATen's results into the outputs DIOPI was given (None: not wanted)."""
    for out, result in zip(outputs, results):
        if out is not None:
            alias(out, d).copy_(result)


@library.register
def diopiSoftmax(ctx, out, input, dim):
    d = ctx.device
    aten._softmax.out(alias(input, d), dim, False, out=alias(out, d))
    return SUCCESS


@library.register
def diopiSoftmaxBackward(ctx, grad_input, grad_output, output, dim):
    d = ctx.device
    gi = alias(grad_input, d)
    aten._softmax_backward_data.out(alias(grad_output, d), alias(output, d), dim, gi.dtype, grad_input=gi)
    return SUCCESS


@library.register
def diopiLogSoftmax(ctx, out, input, dim):
    d = ctx.device
    aten._log_softmax.out(alias(input, d), dim, False, out=alias(out, d))
    return SUCCESS


@library.register
def diopiLogSoftmaxBackward(ctx, grad_input, grad_output, output, dim):
    d = ctx.device
    gi = alias(grad_input, d)
    aten._log_softmax_backward_data.out(alias(grad_output, d), alias(output, d), dim, gi.dtype, out=gi)
    return SUCCESS


@library.register
def diopiNLLLossV2(ctx, out, total_weight, input, target, weight, reduction, ignore_index):
    d = ctx.device
    x = alias(input, d)
    forward = aten.nll_loss2d_forward if x.dim() == 4 else aten.nll_loss_forward  # (N, C, H, W): nll_loss2d
    forward.output(x, alias(target, d), _optional(weight, d), reduction,
                   ignore_index, output=alias(out, d), total_weight=alias(total_weight, d))
    return SUCCESS


@library.register
def diopiNLLLossV2Backward(ctx, grad_input, grad_output, input, target, weight, total_weight, reduction,
                           ignore_index):
    d = ctx.device
    x = alias(input, d)
    backward = aten.nll_loss2d_backward if x.dim() == 4 else aten.nll_loss_backward
    backward.grad_input(
        alias(grad_output, d), x, alias(target, d), _optional(weight, d), reduction, ignore_index,
        alias(total_weight, d), grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiMSELoss(ctx, out, input, target, reduction):
    d = ctx.device
    # ATen's mse_loss.out uses `out` as scratch space of the input's size, which an alias cannot grow to
    alias(out, d).copy_(aten.mse_loss(alias(input, d), alias(target, d), reduction))
    return SUCCESS


@library.register
def diopiMSELossBackward(ctx, grad_input, grad_output, input, target, reduction):
    d = ctx.device
    aten.mse_loss_backward.grad_input(alias(grad_output, d), alias(input, d), alias(target, d), reduction,
                                      grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiLayerNorm(ctx, out, save_mean, save_invstd, input, weight, bias, normalized_shape, eps):
    d = ctx.device
    results = aten.native_layer_norm(alias(input, d), normalized_shape, _optional(weight, d),
                                     _optional(bias, d), eps)
    _write((out, save_mean, save_invstd), results, d)
    return SUCCESS


@library.register
def diopiLayerNormBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, bias, mean,
                           rstd, normalized_shape):
    d = ctx.device
    outputs = (grad_input, grad_weight, grad_bias)
    results = aten.native_layer_norm_backward(
        alias(grad_output, d), alias(input, d), normalized_shape, alias(mean, d), alias(rstd, d),
        _optional(weight, d), _optional(bias, d), [o is not None for o in outputs])
    _write(outputs, results, d)
    return SUCCESS


@library.register
def diopiBatchNorm(ctx, out, save_mean, save_invstd, input, weight, bias, running_mean, running_var, training,
                   momentum, eps):
    d = ctx.device
    results = aten.native_batch_norm(alias(input, d), _optional(weight, d), _optional(bias, d),
                                     _optional(running_mean, d), _optional(running_var, d), training, momentum, eps)
    # Evaluation saves no statistics: the outputs are empty, whatever ATen's CPU kernel hands back.
    _write((out, save_mean, save_invstd) if training else (out,), results, d)
    return SUCCESS


@library.register
def diopiBatchNormBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, running_mean,
                           running_var, save_mean, save_invstd, training, eps):
    d = ctx.device
    outputs = (grad_input, grad_weight, grad_bias)
    results = aten.native_batch_norm_backward(
        alias(grad_output, d), alias(input, d), _optional(weight, d), _optional(running_mean, d),
        _optional(running_var, d), _optional(save_mean, d), _optional(save_invstd, d), training, eps,
        [o is not None for o in outputs])
    _write(outputs, results, d)
    return SUCCESS


@library.register
def diopiConvolution2d(ctx, out, input, weight, bias, stride, padding, dilation, groups):
    d = ctx.device
    x = alias(input, d)
    result = aten.convolution(x, alias(weight, d), _optional(bias, d), stride, padding, dilation, False,
                              [0] * (x.dim() - 2), groups)
    alias(out, d).copy_(result)
    return SUCCESS


@library.register
def diopiConvolution2dBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, stride,
                               padding, dilation, groups):
    d = ctx.device
    x, w = alias(input, d), alias(weight, d)
    outputs = (grad_input, grad_weight, grad_bias)
    results = aten.convolution_backward(
        alias(grad_output, d), x, w, None if grad_bias is None else [w.shape[0]], stride, padding, dilation,
        False, [0] * (x.dim() - 2), groups, [o is not None for o in outputs])
    _write(outputs, results, d)
    return SUCCESS


@library.register
def diopiMaxPool2dWithIndices(ctx, out, indices, input, kernel_size, stride, padding, dilation, ceil_mode):
    d = ctx.device
    aten.max_pool2d_with_indices.out(alias(input, d), kernel_size, stride, padding, dilation, ceil_mode,
                                     out=alias(out, d), indices=alias(indices, d))
    return SUCCESS


@library.register
def diopiMaxPool2dBackward(ctx, grad_input, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode,
                           indices):
    d = ctx.device
    aten.max_pool2d_with_indices_backward.grad_input(
        alias(grad_output, d), alias(input, d), kernel_size, stride, padding, dilation, ceil_mode,
        alias(indices, d), grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiAvgPool2d(ctx, out, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    d = ctx.device
    aten.avg_pool2d.out(alias(input, d), kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override, out=alias(out, d))
    return SUCCESS


@library.register
def diopiAvgPool2dBackward(ctx, grad_input, grad_output, input, kernel_size, stride, padding, ceil_mode,
                           count_include_pad, divisor_override):
    d = ctx.device
    aten.avg_pool2d_backward.grad_input(
        alias(grad_output, d), alias(input, d), kernel_size, stride, padding, ceil_mode, count_include_pad,
        divisor_override, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiAdaptiveAvgPool2d(ctx, out, input, output_size):
    d = ctx.device
    aten._adaptive_avg_pool2d.out(alias(input, d), output_size, out=alias(out, d))
    return SUCCESS


@library.register
def diopiAdaptiveAvgPool2dBackward(ctx, grad_input, grad_output, input):
    d = ctx.device
    aten._adaptive_avg_pool2d_backward.out(alias(grad_output, d), alias(input, d), out=alias(grad_input, d))
    return SUCCESS


# ---- coverage: group norm, adaptive max pooling, losses ------------------------------------------


def _group_norm_sizes(x):
    n, c = x.shape[0], x.shape[1]
    hxw = 1
    for size in x.shape[2:]:
        hxw *= size
    return n, c, hxw


@library.register
def diopiGroupNorm(ctx, out, save_mean, save_invstd, input, weight, bias, num_groups, eps):
    d = ctx.device
    x = alias(input, d).contiguous()  # ATen's CPU kernel reads the input as contiguous
    results = aten.native_group_norm(x, _optional(weight, d), _optional(bias, d), *_group_norm_sizes(x),
                                     num_groups, eps)
    _write((out, save_mean, save_invstd), results, d)
    return SUCCESS


@library.register
def diopiGroupNormBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, mean, rstd, weight,
                           num_groups):
    d = ctx.device
    x = alias(input, d).contiguous()
    outputs = (grad_input, grad_weight, grad_bias)
    results = aten.native_group_norm_backward(
        alias(grad_output, d).contiguous(), x, alias(mean, d), alias(rstd, d), _optional(weight, d), *_group_norm_sizes(x),
        num_groups, [o is not None for o in outputs])
    _write(outputs, results, d)
    return SUCCESS


@library.register
def diopiAdaptiveMaxPool2d(ctx, out, indices, input, output_size):
    d = ctx.device
    aten.adaptive_max_pool2d.out(alias(input, d), output_size, out=alias(out, d), indices=alias(indices, d))
    return SUCCESS


@library.register
def diopiAdaptiveMaxPool2dBackward(ctx, grad_input, grad_output, input, indices):
    d = ctx.device
    aten.adaptive_max_pool2d_backward.grad_input(alias(grad_output, d), alias(input, d), alias(indices, d),
                                                 grad_input=alias(grad_input, d))
    return SUCCESS


# The loss forwards copy ATen's result: like mse_loss.out (see diopiMSELoss), their out= kernels may
# use `out` as scratch space of the input's size.


@library.register
def diopiSmoothL1Loss(ctx, out, input, target, reduction, beta):
    d = ctx.device
    alias(out, d).copy_(aten.smooth_l1_loss(alias(input, d), alias(target, d), reduction, beta))
    return SUCCESS


@library.register
def diopiSmoothL1LossBackward(ctx, grad_input, grad_output, input, target, reduction, beta):
    d = ctx.device
    aten.smooth_l1_loss_backward.grad_input(alias(grad_output, d), alias(input, d), alias(target, d), reduction,
                                            beta, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiHuberLoss(ctx, out, input, target, reduction, delta):
    d = ctx.device
    alias(out, d).copy_(aten.huber_loss(alias(input, d), alias(target, d), reduction, delta))
    return SUCCESS


@library.register
def diopiHuberLossBackward(ctx, grad_input, grad_output, input, target, reduction, delta):
    d = ctx.device
    aten.huber_loss_backward.out(alias(grad_output, d), alias(input, d), alias(target, d), reduction, delta,
                                 grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiBCELoss(ctx, out, input, target, weight, reduction):
    d = ctx.device
    alias(out, d).copy_(aten.binary_cross_entropy(alias(input, d), alias(target, d), _optional(weight, d),
                                                  reduction))
    return SUCCESS


@library.register
def diopiBCELossBackward(ctx, grad_input, grad_output, input, target, weight, reduction):
    d = ctx.device
    aten.binary_cross_entropy_backward.grad_input(alias(grad_output, d), alias(input, d), alias(target, d),
                                                  _optional(weight, d), reduction, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiBCEWithLogits(ctx, out, input, target, weight, pos_weight, reduction):
    d = ctx.device
    alias(out, d).copy_(aten.binary_cross_entropy_with_logits(
        alias(input, d), alias(target, d), _optional(weight, d), _optional(pos_weight, d), reduction))
    return SUCCESS
