"""Neural-network functions: softmax, losses, normalization, convolution, pooling."""

import torch

from dipu._core import _C
from dipu.diopi import SUCCESS
from dipu.diopi.context import Status
from . import library
from ._aten import fast_aten, optional_alias, write_results

alias = _C.alias
aten = torch.ops.aten


@library.register
def diopiSoftmax(ctx, out, input, dim):
    d = ctx.device
    torch._softmax(alias(input, d), dim, False, out=alias(out, d))
    return SUCCESS


@library.register
def diopiSoftmaxBackward(ctx, grad_input, grad_output, output, dim):
    d = ctx.device
    gi = alias(grad_input, d)
    torch._softmax_backward_data(alias(grad_output, d), alias(output, d), dim, gi.dtype, grad_input=gi)
    return SUCCESS


@library.register
def diopiLogSoftmax(ctx, out, input, dim):
    d = ctx.device
    torch._log_softmax(alias(input, d), dim, False, out=alias(out, d))
    return SUCCESS


@library.register
def diopiLogSoftmaxBackward(ctx, grad_input, grad_output, output, dim):
    d = ctx.device
    gi = alias(grad_input, d)
    torch._log_softmax_backward_data(alias(grad_output, d), alias(output, d), dim, gi.dtype, out=gi)
    return SUCCESS


@library.register
def diopiNLLLossV2(ctx, out, total_weight, input, target, weight, reduction, ignore_index):
    d = ctx.device
    x = alias(input, d)
    forward = aten.nll_loss2d_forward if x.dim() == 4 else aten.nll_loss_forward  # (N, C, H, W): nll_loss2d
    forward.output(x, alias(target, d), optional_alias(weight, d), reduction,
                   ignore_index, output=alias(out, d), total_weight=alias(total_weight, d))
    return SUCCESS


@library.register
def diopiNLLLossV2Backward(ctx, grad_input, grad_output, input, target, weight, total_weight, reduction,
                           ignore_index):
    d = ctx.device
    x = alias(input, d)
    backward = aten.nll_loss2d_backward if x.dim() == 4 else aten.nll_loss_backward
    backward.grad_input(
        alias(grad_output, d), x, alias(target, d), optional_alias(weight, d), reduction, ignore_index,
        alias(total_weight, d), grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiMSELoss(ctx, out, input, target, reduction):
    d = ctx.device
    # ATen's mse_loss.out uses `out` as scratch space of the input's size, which an alias cannot grow to
    alias(out, d).copy_(fast_aten.mse_loss(alias(input, d), alias(target, d), reduction))
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
    results = fast_aten.native_layer_norm(alias(input, d), normalized_shape, optional_alias(weight, d),
                                     optional_alias(bias, d), eps)
    write_results((out, save_mean, save_invstd), results, d)
    return SUCCESS


@library.register
def diopiLayerNormBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, bias, mean,
                           rstd, normalized_shape):
    d = ctx.device
    outputs = (grad_input, grad_weight, grad_bias)
    results = fast_aten.native_layer_norm_backward(
        alias(grad_output, d), alias(input, d), normalized_shape, alias(mean, d), alias(rstd, d),
        optional_alias(weight, d), optional_alias(bias, d), [o is not None for o in outputs])
    write_results(outputs, results, d)
    return SUCCESS


@library.register
def diopiBatchNorm(ctx, out, save_mean, save_invstd, input, weight, bias, running_mean, running_var, training,
                   momentum, eps):
    d = ctx.device
    results = fast_aten.native_batch_norm(alias(input, d), optional_alias(weight, d), optional_alias(bias, d),
                                     optional_alias(running_mean, d), optional_alias(running_var, d), training, momentum, eps)
    # Evaluation saves no statistics: the outputs are empty, whatever ATen's CPU kernel hands back.
    write_results((out, save_mean, save_invstd) if training else (out,), results, d)
    return SUCCESS


@library.register
def diopiBatchNormBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, running_mean,
                           running_var, save_mean, save_invstd, training, eps):
    d = ctx.device
    outputs = (grad_input, grad_weight, grad_bias)
    results = fast_aten.native_batch_norm_backward(
        alias(grad_output, d), alias(input, d), optional_alias(weight, d), optional_alias(running_mean, d),
        optional_alias(running_var, d), optional_alias(save_mean, d), optional_alias(save_invstd, d), training, eps,
        [o is not None for o in outputs])
    write_results(outputs, results, d)
    return SUCCESS


@library.register
def diopiConvolution2d(ctx, out, input, weight, bias, stride, padding, dilation, groups):
    d = ctx.device
    x = alias(input, d)
    result = fast_aten.convolution(x, alias(weight, d), optional_alias(bias, d), stride, padding, dilation, False,
                              [0] * (x.dim() - 2), groups)
    alias(out, d).copy_(result)
    return SUCCESS


@library.register
def diopiConvolution2dBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, stride,
                               padding, dilation, groups):
    d = ctx.device
    x, w = alias(input, d), alias(weight, d)
    outputs = (grad_input, grad_weight, grad_bias)
    results = fast_aten.convolution_backward(
        alias(grad_output, d), x, w, None if grad_bias is None else [w.shape[0]], stride, padding, dilation,
        False, [0] * (x.dim() - 2), groups, [o is not None for o in outputs])
    write_results(outputs, results, d)
    return SUCCESS


@library.register
def diopiMaxPool2dWithIndices(ctx, out, indices, input, kernel_size, stride, padding, dilation, ceil_mode):
    d = ctx.device
    torch._C._nn.max_pool2d_with_indices(alias(input, d), kernel_size, stride, padding, dilation, ceil_mode,
                                         out=(alias(out, d), alias(indices, d)))
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
    torch._C._nn.avg_pool2d(alias(input, d), kernel_size, stride, padding, ceil_mode, count_include_pad,
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
    results = fast_aten.native_group_norm(x, optional_alias(weight, d), optional_alias(bias, d), *_group_norm_sizes(x),
                                     num_groups, eps)
    write_results((out, save_mean, save_invstd), results, d)
    return SUCCESS


@library.register
def diopiGroupNormBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, mean, rstd, weight,
                           num_groups):
    d = ctx.device
    x = alias(input, d).contiguous()
    outputs = (grad_input, grad_weight, grad_bias)
    results = fast_aten.native_group_norm_backward(
        alias(grad_output, d).contiguous(), x, alias(mean, d), alias(rstd, d), optional_alias(weight, d),
        *_group_norm_sizes(x),
        num_groups, [o is not None for o in outputs])
    write_results(outputs, results, d)
    return SUCCESS


@library.register
def diopiAdaptiveMaxPool2d(ctx, out, indices, input, output_size):
    d = ctx.device
    torch._C._nn.adaptive_max_pool2d(alias(input, d), output_size, out=(alias(out, d), alias(indices, d)))
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
    alias(out, d).copy_(fast_aten.smooth_l1_loss(alias(input, d), alias(target, d), reduction, beta))
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
    alias(out, d).copy_(fast_aten.huber_loss(alias(input, d), alias(target, d), reduction, delta))
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
    alias(out, d).copy_(fast_aten.binary_cross_entropy(alias(input, d), alias(target, d), optional_alias(weight, d),
                                                  reduction))
    return SUCCESS


@library.register
def diopiBCELossBackward(ctx, grad_input, grad_output, input, target, weight, reduction):
    d = ctx.device
    aten.binary_cross_entropy_backward.grad_input(alias(grad_output, d), alias(input, d), alias(target, d),
                                                  optional_alias(weight, d), reduction, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiBCEWithLogits(ctx, out, input, target, weight, pos_weight, reduction):
    d = ctx.device
    alias(out, d).copy_(fast_aten.binary_cross_entropy_with_logits(
        alias(input, d), alias(target, d), optional_alias(weight, d), optional_alias(pos_weight, d), reduction))
    return SUCCESS


@library.register
def diopiConvTranspose2d(ctx, out, input, weight, bias, stride, padding, output_padding, groups, dilation):
    d = ctx.device
    result = fast_aten.convolution(alias(input, d), alias(weight, d), optional_alias(bias, d), stride, padding, dilation, True,
                              output_padding, groups)
    alias(out, d).copy_(result)
    return SUCCESS


@library.register
def diopiConvTranspose2dBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, stride,
                                 padding, dilation, output_padding, groups):
    d = ctx.device
    w = alias(weight, d)
    outputs = (grad_input, grad_weight, grad_bias)
    results = fast_aten.convolution_backward(
        alias(grad_output, d), alias(input, d), w, None if grad_bias is None else [w.shape[1] * groups], stride,
        padding, dilation, True, output_padding, groups, [o is not None for o in outputs])
    write_results(outputs, results, d)
    return SUCCESS


@library.register
def diopiMaxPool3dWithIndices(ctx, out, indices, input, kernel_size, stride, padding, dilation, ceil_mode):
    d = ctx.device
    aten.max_pool3d_with_indices.out(alias(input, d), kernel_size, stride, padding, dilation, ceil_mode,
                                     out=alias(out, d), indices=alias(indices, d))
    return SUCCESS


@library.register
def diopiMaxPool3dBackward(ctx, grad_input, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode,
                           indices):
    d = ctx.device
    aten.max_pool3d_with_indices_backward.grad_input(
        alias(grad_output, d), alias(input, d), kernel_size, stride, padding, dilation, ceil_mode,
        alias(indices, d), grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiAvgPool3d(ctx, out, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    d = ctx.device
    aten.avg_pool3d.out(alias(input, d), kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override, out=alias(out, d))
    return SUCCESS


@library.register
def diopiAvgPool3dBackward(ctx, grad_input, grad_output, input, kernel_size, stride, padding, ceil_mode,
                           count_include_pad, divisor_override):
    d = ctx.device
    aten.avg_pool3d_backward.grad_input(
        alias(grad_output, d), alias(input, d), kernel_size, stride, padding, ceil_mode, count_include_pad,
        divisor_override, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiAdaptiveAvgPool3d(ctx, out, input, output_size):
    d = ctx.device
    aten._adaptive_avg_pool3d.out(alias(input, d), output_size, out=alias(out, d))
    return SUCCESS


@library.register
def diopiAdaptiveAvgPool3dBackward(ctx, grad_input, grad_output, input):
    d = ctx.device
    aten._adaptive_avg_pool3d_backward.out(alias(grad_output, d), alias(input, d), out=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiGridSample(ctx, out, input, grid, interpolation_mode, padding_mode, align_corners):
    d = ctx.device
    alias(out, d).copy_(fast_aten.grid_sampler_2d(alias(input, d), alias(grid, d), interpolation_mode, padding_mode,
                                             align_corners))
    return SUCCESS


@library.register
def diopiGridSampleBackward(ctx, grad_input, grad_grid, grad_output, input, grid, interpolation_mode, padding_mode,
                            align_corners):
    d = ctx.device
    outputs = (grad_input, grad_grid)
    results = fast_aten.grid_sampler_2d_backward(alias(grad_output, d), alias(input, d), alias(grid, d),
                                            interpolation_mode, padding_mode, align_corners,
                                            [o is not None for o in outputs])
    write_results(outputs, results, d)
    return SUCCESS


@library.register
def diopiEmbeddingBag(ctx, out, offset2bag, bag_size, max_indices, weight, indices, offsets, scale_grad_by_freq,
                      mode, sparse, per_sample_weights, include_last_offset, padding_idx):
    d = ctx.device
    results = fast_aten._embedding_bag(alias(weight, d), alias(indices, d), alias(offsets, d), scale_grad_by_freq, mode,
                                  sparse, optional_alias(per_sample_weights, d), include_last_offset, padding_idx)
    # ATen's CPU kernel leaves the bookkeeping outputs it does not need for `mode` empty, unlike its meta kernel
    for output, result in zip((out, offset2bag, bag_size, max_indices), results):
        if output.shape != result.shape:
            output.resize_(result.shape)
        alias(output, d).copy_(result)
    return SUCCESS


@library.register
def diopiEmbeddingBagBackward(ctx, grad_weight, grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                              num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx):
    if sparse:  # a sparse gradient is no dense output to write
        return Status.FORCE_FALLBACK
    d = ctx.device
    alias(grad_weight, d).copy_(fast_aten._embedding_bag_backward(
        alias(grad, d), alias(indices, d), alias(offsets, d), alias(offset2bag, d), alias(bag_size, d),
        alias(maximum_indices, d), num_weights, scale_grad_by_freq, mode, False, optional_alias(per_sample_weights, d),
        padding_idx))
    return SUCCESS


@library.register
def diopiMultiMarginLoss(ctx, out, input, target, p, margin, weight, reduction):
    d = ctx.device
    alias(out, d).copy_(fast_aten.multi_margin_loss(alias(input, d), alias(target, d), p, margin, optional_alias(weight, d),
                                               reduction))
    return SUCCESS


@library.register
def diopiMultiMarginLossBackward(ctx, grad_input, grad_output, input, target, p, margin, weight, reduction):
    d = ctx.device
    aten.multi_margin_loss_backward.grad_input(alias(grad_output, d), alias(input, d), alias(target, d), p, margin,
                                               optional_alias(weight, d), reduction, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiMaxUnpool2d(ctx, out, input, indices, output_size):
    d = ctx.device
    # ATen's out= kernel restrides ``out`` to the input's memory format, which an alias cannot pass on
    alias(out, d).copy_(aten.max_unpool2d(alias(input, d), alias(indices, d), output_size))
    return SUCCESS


@library.register
def diopiWeightNorm(ctx, out, norm, v, g, dim):
    d = ctx.device
    # ATen's fused CPU kernel reads its tensors as contiguous
    write_results((out, norm), fast_aten._weight_norm_interface(alias(v, d).contiguous(), alias(g, d).contiguous(), dim), d)
    return SUCCESS


@library.register
def diopiWeightNormBackward(ctx, grad_v, grad_g, grad_w, saved_v, saved_g, saved_norms, dim):
    d = ctx.device
    results = fast_aten._weight_norm_interface_backward(alias(grad_w, d).contiguous(), alias(saved_v, d).contiguous(),
                                                   alias(saved_g, d).contiguous(), alias(saved_norms, d).contiguous(),
                                                   dim)
    write_results((grad_v, grad_g), results, d)
    return SUCCESS


@library.register
def diopiEmbeddingRenormInp(ctx, inout, indices, max_norm, norm_type):
    d = ctx.device
    fast_aten.embedding_renorm_(alias(inout, d), alias(indices, d), max_norm, norm_type)
    return SUCCESS


@library.register
def diopiMultilabelMarginLoss(ctx, out, is_target, input, target, reduction):
    d = ctx.device
    aten.multilabel_margin_loss_forward.output(alias(input, d), alias(target, d), reduction, output=alias(out, d),
                                               is_target=alias(is_target, d))
    return SUCCESS


@library.register
def diopiMultilabelMarginLossBackward(ctx, grad_input, grad_output, input, target, reduction, is_target):
    d = ctx.device
    aten.multilabel_margin_loss_backward.grad_input(alias(grad_output, d), alias(input, d), alias(target, d),
                                                    reduction, alias(is_target, d), grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiCTCLoss(ctx, out, log_alpha, log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    d = ctx.device
    results = fast_aten._ctc_loss(alias(log_probs, d), alias(targets, d), input_lengths, target_lengths, blank,
                             zero_infinity)
    for output, result in zip((out, log_alpha), results):
        if output.shape != result.shape:  # CPU sizes log_alpha from the lengths, meta from the tensors
            output.resize_(result.shape)
        alias(output, d).copy_(result)
    return SUCCESS


@library.register
def diopiCTCLossBackward(ctx, grad_input, grad_output, log_probs, targets, input_lengths, target_lengths,
                         neg_log_likelihood, log_alpha, blank, zero_infinity):
    d = ctx.device
    alias(grad_input, d).copy_(fast_aten._ctc_loss_backward(
        alias(grad_output, d), alias(log_probs, d), alias(targets, d), input_lengths, target_lengths,
        alias(neg_log_likelihood, d), alias(log_alpha, d), blank, zero_infinity))
    return SUCCESS


@library.register
def diopiEmbeddingBagPerSampleWeightsBackward(ctx, out, grad, weight, indices, offsets, offset2bag, mode,
                                              padding_idx):
    d = ctx.device
    alias(out, d).copy_(fast_aten._embedding_bag_per_sample_weights_backward(
        alias(grad, d), alias(weight, d), alias(indices, d), alias(offsets, d), alias(offset2bag, d), mode,
        padding_idx))
    return SUCCESS


@library.register
def diopiAdaptiveMaxPool3d(ctx, out, indices, input, output_size):
    d = ctx.device
    aten.adaptive_max_pool3d.out(alias(input, d), output_size, out=alias(out, d), indices=alias(indices, d))
    return SUCCESS


@library.register
def diopiAdaptiveMaxPool3dBackward(ctx, grad_input, grad_output, input, indices):
    d = ctx.device
    aten.adaptive_max_pool3d_backward.grad_input(alias(grad_output, d), alias(input, d), alias(indices, d),
                                                 grad_input=alias(grad_input, d))
    return SUCCESS


# Note [Fused recurrent cells]
# ATen's LSTM and GRU run their cells through _thnn_fused_lstm_cell / _thnn_fused_gru_cell on every device but
# the CPU, which has no such kernels (so no CPU fallback either). These compute what the CUDA kernels do, with
# ATen math on the aliases: gates in (input, forget, cell, output) order for the LSTM and (reset, input, new) for
# the GRU, and the same workspace layout, so the backward functions can read what the forwards saved.


def _gates(input_gates, hidden_gates, input_bias, hidden_bias, d):
    gates = alias(input_gates, d) + alias(hidden_gates, d)
    if input_bias is not None:
        gates = gates + alias(input_bias, d) + alias(hidden_bias, d)
    return gates


@library.register
def diopiLstmCell(ctx, hy, cy, workspace, input_gates, hidden_gates, cx, input_bias, hidden_bias):
    d = ctx.device
    i, f, g, o = _gates(input_gates, hidden_gates, input_bias, hidden_bias, d).chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c = alias(cy, d)
    torch.addcmul(f * alias(cx, d), i, g, out=c)
    torch.mul(o, c.tanh(), out=alias(hy, d))
    torch.cat((i, f, g, o), 1, out=alias(workspace, d))
    return SUCCESS


@library.register
def diopiLstmCellBackward(ctx, grad_gates, grad_cx, grad_bias, grad_hy, grad_cy, cx, cy, workspace, has_bias):
    d = ctx.device
    i, f, g, o = alias(workspace, d).chunk(4, 1)
    tanh_cy = alias(cy, d).tanh()
    d_cy = torch.zeros_like(tanh_cy) if grad_cy is None else alias(grad_cy, d).clone()
    if grad_hy is not None:
        ghy = alias(grad_hy, d)
        d_cy += ghy * o * (1 - tanh_cy * tanh_cy)
        d_o = ghy * tanh_cy * o * (1 - o)
    else:
        d_o = torch.zeros_like(o)
    gates = alias(grad_gates, d)
    torch.cat((d_cy * g * i * (1 - i), d_cy * alias(cx, d) * f * (1 - f), d_cy * i * (1 - g * g), d_o), 1, out=gates)
    torch.mul(d_cy, f, out=alias(grad_cx, d))
    if grad_bias is not None:
        torch.sum(gates, 0, out=alias(grad_bias, d))
    return SUCCESS


@library.register
def diopiGruCell(ctx, hy, workspace, input_gates, hidden_gates, hx, input_bias, hidden_bias):
    d = ctx.device
    ig, hg = alias(input_gates, d), alias(hidden_gates, d)
    if input_bias is not None:
        ig, hg = ig + alias(input_bias, d), hg + alias(hidden_bias, d)
    ir, ii, in_ = ig.chunk(3, 1)
    hr, hi, hn = hg.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (ii + hi).sigmoid()
    n = torch.addcmul(in_, r, hn).tanh()
    h_minus_n = alias(hx, d) - n
    torch.addcmul(n, z, h_minus_n, out=alias(hy, d))
    torch.cat((r, z, n, hn, h_minus_n), 1, out=alias(workspace, d))
    return SUCCESS


@library.register
def diopiGruCellBackward(ctx, grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias,
                              grad_hy, workspace, has_bias):
    d = ctx.device
    r, z, n, hn, h_minus_n = alias(workspace, d).chunk(5, 1)
    go = alias(grad_hy, d)
    d_n = go * (1 - z) * (1 - n * n)
    d_r = d_n * hn * r * (1 - r)
    d_z = go * h_minus_n * z * (1 - z)
    gi, gh = alias(grad_input_gates, d), alias(grad_hidden_gates, d)
    torch.cat((d_r, d_z, d_n), 1, out=gi)
    torch.cat((d_r, d_z, d_n * r), 1, out=gh)
    torch.mul(go, z, out=alias(grad_hx, d))
    if grad_input_bias is not None:
        torch.sum(gi, 0, out=alias(grad_input_bias, d))
    if grad_hidden_bias is not None:
        torch.sum(gh, 0, out=alias(grad_hidden_bias, d))
    return SUCCESS


@library.register
def diopiChannelShuffle(ctx, out, input, groups):
    d = ctx.device
    alias(out, d).copy_(fast_aten.native_channel_shuffle(alias(input, d), groups))
    return SUCCESS
