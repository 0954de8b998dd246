"""Pooling: max, average and adaptive pooling in 2-d and 3-d with their backwards, and max unpooling."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._library import library

aten = torch.ops.aten

# ---- 2-d -------------------------------------------------------------------------------------------------


@library.register(aten=aten.max_pool2d_with_indices.out, direct=True)
def diopiMaxPool2dWithIndices(ctx, out, indices, input, kernel_size, stride, padding, dilation, ceil_mode):
    d = ctx.device
    torch._C._nn.max_pool2d_with_indices(alias(input, d), kernel_size, stride, padding, dilation, ceil_mode,
                                         out=(alias(out, d), alias(indices, d)))
    return SUCCESS


@library.register(aten=aten.max_pool2d_with_indices_backward.grad_input, direct=True)
def diopiMaxPool2dBackward(ctx, grad_input, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode,
                           indices):
    d = ctx.device
    aten.max_pool2d_with_indices_backward.grad_input(
        alias(grad_output, d), alias(input, d), kernel_size, stride, padding, dilation, ceil_mode,
        alias(indices, d), grad_input=alias(grad_input, d))
    return SUCCESS


@library.register(aten=aten.avg_pool2d.out, direct=True)
def diopiAvgPool2d(ctx, out, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    d = ctx.device
    torch._C._nn.avg_pool2d(alias(input, d), kernel_size, stride, padding, ceil_mode, count_include_pad,
                            divisor_override, out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.avg_pool2d_backward.grad_input, direct=True)
def diopiAvgPool2dBackward(ctx, grad_input, grad_output, input, kernel_size, stride, padding, ceil_mode,
                           count_include_pad, divisor_override):
    d = ctx.device
    aten.avg_pool2d_backward.grad_input(
        alias(grad_output, d), alias(input, d), kernel_size, stride, padding, ceil_mode, count_include_pad,
        divisor_override, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register(aten=aten._adaptive_avg_pool2d.out)  # in C++ by hand: diopi_impl/torch_cpp/handwritten.cpp
def diopiAdaptiveAvgPool2d(ctx, out, input, output_size):
    d = ctx.device
    aten._adaptive_avg_pool2d.out(alias(input, d), output_size, out=alias(out, d))
    return SUCCESS


@library.register(aten=aten._adaptive_avg_pool2d_backward.out, direct=True)
def diopiAdaptiveAvgPool2dBackward(ctx, grad_input, grad_output, input):
    d = ctx.device
    aten._adaptive_avg_pool2d_backward.out(alias(grad_output, d), alias(input, d), out=alias(grad_input, d))
    return SUCCESS


@library.register(aten=aten.adaptive_max_pool2d.out, direct=True)
def diopiAdaptiveMaxPool2dWithIndices(ctx, out, indices, input, output_size):
    d = ctx.device
    torch._C._nn.adaptive_max_pool2d(alias(input, d), output_size, out=(alias(out, d), alias(indices, d)))
    return SUCCESS


@library.register(aten=aten.adaptive_max_pool2d_backward.grad_input, direct=True)
def diopiAdaptiveMaxPool2dBackward(ctx, grad_input, grad_output, input, indices):
    d = ctx.device
    aten.adaptive_max_pool2d_backward.grad_input(alias(grad_output, d), alias(input, d), alias(indices, d),
                                                 grad_input=alias(grad_input, d))
    return SUCCESS


@library.register(aten=aten.max_unpool2d.out)
def diopiMaxUnpool2d(ctx, out, input, indices, output_size):
    d = ctx.device
    # ATen's out= kernel restrides ``out`` to the input's memory format, which an alias cannot pass on
    alias(out, d).copy_(aten.max_unpool2d(alias(input, d), alias(indices, d), output_size))
    return SUCCESS


# ---- 3-d -------------------------------------------------------------------------------------------------


@library.register(aten=aten.max_pool3d_with_indices.out, direct=True)
def diopiMaxPool3dWithIndices(ctx, out, indices, input, kernel_size, stride, padding, dilation, ceil_mode):
    d = ctx.device
    aten.max_pool3d_with_indices.out(alias(input, d), kernel_size, stride, padding, dilation, ceil_mode,
                                     out=alias(out, d), indices=alias(indices, d))
    return SUCCESS


@library.register(aten=aten.max_pool3d_with_indices_backward.grad_input, direct=True)
def diopiMaxPool3dBackward(ctx, grad_input, grad_output, input, kernel_size, stride, padding, dilation, ceil_mode,
                           indices):
    d = ctx.device
    aten.max_pool3d_with_indices_backward.grad_input(
        alias(grad_output, d), alias(input, d), kernel_size, stride, padding, dilation, ceil_mode,
        alias(indices, d), grad_input=alias(grad_input, d))
    return SUCCESS


@library.register(aten=aten.avg_pool3d.out, direct=True)
def diopiAvgPool3d(ctx, out, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    d = ctx.device
    aten.avg_pool3d.out(alias(input, d), kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override, out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.avg_pool3d_backward.grad_input, direct=True)
def diopiAvgPool3dBackward(ctx, grad_input, grad_output, input, kernel_size, stride, padding, ceil_mode,
                           count_include_pad, divisor_override):
    d = ctx.device
    aten.avg_pool3d_backward.grad_input(
        alias(grad_output, d), alias(input, d), kernel_size, stride, padding, ceil_mode, count_include_pad,
        divisor_override, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register(aten=aten._adaptive_avg_pool3d.out, direct=True)
def diopiAdaptiveAvgPool3d(ctx, out, input, output_size):
    d = ctx.device
    aten._adaptive_avg_pool3d.out(alias(input, d), output_size, out=alias(out, d))
    return SUCCESS


@library.register(aten=aten._adaptive_avg_pool3d_backward.out, direct=True)
def diopiAdaptiveAvgPool3dBackward(ctx, grad_input, grad_output, input):
    d = ctx.device
    aten._adaptive_avg_pool3d_backward.out(alias(grad_output, d), alias(input, d), out=alias(grad_input, d))
    return SUCCESS


@library.register(aten=aten.adaptive_max_pool3d.out, direct=True)
def diopiAdaptiveMaxPool3dWithIndices(ctx, out, indices, input, output_size):
    d = ctx.device
    aten.adaptive_max_pool3d.out(alias(input, d), output_size, out=alias(out, d), indices=alias(indices, d))
    return SUCCESS


@library.register(aten=aten.adaptive_max_pool3d_backward.grad_input, direct=True)
def diopiAdaptiveMaxPool3dBackward(ctx, grad_input, grad_output, input, indices):
    d = ctx.device
    aten.adaptive_max_pool3d_backward.grad_input(alias(grad_output, d), alias(input, d), alias(indices, d),
                                                 grad_input=alias(grad_input, d))
    return SUCCESS
