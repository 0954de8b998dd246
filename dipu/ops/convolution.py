"""Convolution kernels: ``impl:`` logic for convolution_overrideable and its backward.

ATen routes convolutions on dipu to the ``*_overrideable`` ops with every
parameter already expanded to one value per spatial dim. DIOPI's functions
take no ``transposed`` flag, so transposed convolutions answer force-fallback
and run on CPU.
"""

from __future__ import annotations

from dipu import _C
from dipu.diopi.runtime import Status


def _output_size(input, weight, stride, padding, dilation) -> list[int]:
    spatial = [
        (size + 2 * pad - dil * (kernel - 1) - 1) // step + 1
        for size, kernel, step, pad, dil in zip(input.shape[2:], weight.shape[2:], stride, padding, dilation)
    ]
    return [input.shape[0], weight.shape[0], *spatial]


def convolution(diopi, ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed:
        return Status.FORCE_FALLBACK, None
    out = _C.empty(_output_size(input, weight, stride, padding, dilation), input.dtype, ctx.device)
    return diopi(ctx, out, input, weight, bias, stride, padding, dilation, groups), out


def convolution_backward(diopi, ctx, grad_output, input, weight, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    if transposed:
        return Status.FORCE_FALLBACK, None
    d = ctx.device
    grad_input = _C.empty(list(input.shape), input.dtype, d) if output_mask[0] else None
    grad_weight = _C.empty(list(weight.shape), weight.dtype, d) if output_mask[1] else None
    grad_bias = _C.empty([weight.shape[0]], weight.dtype, d) if output_mask[2] else None
    status = diopi(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, stride, padding,
                   dilation, groups)
    return status, (grad_input, grad_weight, grad_bias)
