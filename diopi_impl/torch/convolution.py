"""Convolution: 2-d convolution and transposed convolution with their backwards, im2col and col2im.

The convolutions apply ATen's ``convolution`` and ``convolution_backward``, which take the transposed flag
and output padding the proto folds into its function names, so they do not line up with one overload."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import fast_aten, optional_alias, write_results
from ._library import library
from ._table import out_function

aten = torch.ops.aten


@library.register
def diopiConvolution2d(ctx, out, input, weight, bias, stride, padding, dilation, groups):
    d = ctx.device
    x = alias(input, d)
    result = fast_aten.convolution(x, alias(weight, d), optional_alias(bias, d), stride, padding, dilation, False,
                              [0] * (x.dim() - 2), groups)
    alias(out, d).copy_(result)
    return SUCCESS


def _bias_sizes(bias_sizes, grad_bias, channels: int):
    """ATen needs the bias's shape exactly when it computes its gradient; DIOPI's caller may leave it out."""
    if grad_bias is None:
        return None
    return list(bias_sizes) if bias_sizes is not None else [channels]


@library.register
def diopiConvolution2dBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, bias_sizes,
                               stride, padding, dilation, groups):
    d = ctx.device
    x, w = alias(input, d), alias(weight, d)
    outputs = (grad_input, grad_weight, grad_bias)
    results = fast_aten.convolution_backward(
        alias(grad_output, d), x, w, _bias_sizes(bias_sizes, grad_bias, w.shape[0]), stride, padding, dilation,
        False, [0] * (x.dim() - 2), groups, [o is not None for o in outputs])
    write_results(outputs, results, d)
    return SUCCESS


@library.register
def diopiConvTranspose2d(ctx, out, input, weight, bias, stride, padding, output_padding, groups, dilation):
    d = ctx.device
    result = fast_aten.convolution(alias(input, d), alias(weight, d), optional_alias(bias, d), stride, padding,
                                   dilation, True, output_padding, groups)
    alias(out, d).copy_(result)
    return SUCCESS


@library.register
def diopiConvTranspose2dBackward(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight,
                                 bias_sizes, stride, padding, dilation, output_padding, groups):
    d = ctx.device
    w = alias(weight, d)
    outputs = (grad_input, grad_weight, grad_bias)
    results = fast_aten.convolution_backward(
        alias(grad_output, d), alias(input, d), w, _bias_sizes(bias_sizes, grad_bias, w.shape[1] * groups), stride,
        padding, dilation, True, output_padding, groups, [o is not None for o in outputs])
    write_results(outputs, results, d)
    return SUCCESS


# ---- im2col and col2im: one overload each (Note [Table-made functions] in _table.py) -----------------------
out_function("diopiIm2Col", aten.im2col.out, ("out",))
out_function("diopiCol2Im", aten.col2im.out, ("out",))
