"""Normalization: layer, batch, group and weight norm with their backwards, and renorm.

The forwards and backwards apply ATen's native_* kernels, which return their results (and take the sizes or
masks the proto derives from its tensors), so they copy them into the outputs with ``write_results`` and
do not line up with one ATen overload."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import fast_aten, optional_alias, write_results
from ._library import library
from ._table import out_function

aten = torch.ops.aten


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
                                          optional_alias(running_mean, d), optional_alias(running_var, d), training,
                                          momentum, eps)
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
def diopiGroupNormBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, mean, rstd,
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


@library.register(aten=aten._weight_norm_interface.out)
def diopiWeightNorm(ctx, out, norm, v, g, dim):
    d = ctx.device
    # ATen's fused CPU kernel reads its tensors as contiguous
    results = fast_aten._weight_norm_interface(alias(v, d).contiguous(), alias(g, d).contiguous(), dim)
    write_results((out, norm), results, d)
    return SUCCESS


@library.register(aten=aten._weight_norm_interface_backward.out)
def diopiWeightNormBackward(ctx, grad_v, grad_g, grad_w, saved_v, saved_g, saved_norms, dim):
    d = ctx.device
    results = fast_aten._weight_norm_interface_backward(alias(grad_w, d).contiguous(), alias(saved_v, d).contiguous(),
                                                   alias(saved_g, d).contiguous(), alias(saved_norms, d).contiguous(),
                                                   dim)
    write_results((grad_v, grad_g), results, d)
    return SUCCESS


out_function("diopiRenorm", aten.renorm.out)  # Note [Table-made functions] in _table.py
