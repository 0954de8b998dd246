"""Kernels whose outputs take the memory format of their input, as the CPU kernels' do.

Note [Memory formats of outputs]
Generated wrappers allocate outputs in the strides the CPU kernel would give them (Note [Output strides] in
dipu/ops/meta_rules.py: TensorIterator strides for pointwise ops, meta kernels for the rest). The CPU kernels
of convolution, batch norm and the 2d pools instead allocate in ``input.suggest_memory_format()``, so a
channels_last network stays channels_last from layer to layer (TensorIterator ops such as relu follow their
input's strides through the generated wrappers' stride rules). The functional schemas of those ops are
``impl:`` kernels here: they take their shapes from the op's shape rule (``dipu.ops.shape_rules``), allocate
each output in the input's memory format and call the DIOPI function with it. Contiguous inputs (the common
case) cost one ``is_contiguous`` more than a generated wrapper. out= variants keep the layout of the tensors
they are given, as in ATen.
"""

from __future__ import annotations

import torch

from dipu._core import _C
from dipu.ops import shape_rules as shapes
from dipu.ops.meta_rules import memory_format, meta

_channels_last = torch.channels_last
_channels_last_3d = torch.channels_last_3d
_contiguous = torch.contiguous_format


def empty(shape, dtype: torch.dtype, device: int, layout: torch.memory_format = _contiguous) -> torch.Tensor:
    """A dipu tensor in memory format ``layout`` (contiguous through the core's fast path)."""
    if layout is _contiguous or len(shape) != (4 if layout is _channels_last else 5):
        return _C.empty(list(shape), dtype, device)
    return torch.empty(shape, dtype=dtype, device=torch.device("dipu", device), memory_format=layout)


def _allocate(specs, device: int, layout) -> tuple:
    return tuple(None if spec is None else empty(spec[0], spec[1], device, layout) for spec in specs)


def _meta(op, several: bool):
    return meta(op, (), several)


# ---- normalization ------------------------------------------------------------------------------------


def native_batch_norm(diopi, ctx, input, weight, bias, running_mean, running_var, training, momentum, eps):
    (shape, dtype), saved_mean, saved_invstd = shapes.native_batch_norm(input, weight, bias, running_mean,
                                                                        running_var, training)
    d = ctx.device
    out = empty(shape, dtype, d, memory_format(input))
    save_mean, save_invstd = _C.empty(list(saved_mean[0]), saved_mean[1], d), \
        _C.empty(list(saved_invstd[0]), saved_invstd[1], d)
    status = diopi(ctx, out, save_mean, save_invstd, input, weight, bias, running_mean, running_var, training,
                   momentum, eps)
    return status, (out, save_mean, save_invstd)


_batch_norm_backward_rule = _meta(torch.ops.aten.native_batch_norm_backward.default, True)


def native_batch_norm_backward(diopi, ctx, grad_out, input, weight, running_mean, running_var, save_mean,
                               save_invstd, train, eps, output_mask):
    specs = _batch_norm_backward_rule(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
                                      train, eps, output_mask)
    d = ctx.device
    grad_input = empty(*specs[0], d, memory_format(input)) if specs[0] is not None else None
    grad_weight, grad_bias = _allocate(specs[1:], d, _contiguous)
    status = diopi(ctx, grad_input, grad_weight, grad_bias, grad_out, input, weight, running_mean, running_var,
                   save_mean, save_invstd, train, eps)
    return status, (grad_input, grad_weight, grad_bias)


# ---- pooling: outputs and gradients in the input's memory format ------------------------------------------
# Output shapes: Note [Pooling shapes without meta tensors] in dipu/ops/shape_rules.py.
_int64 = torch.int64

_max_pool2d_rule = _meta(torch.ops.aten.max_pool2d_with_indices.default, True)
_avg_pool2d_rule = _meta(torch.ops.aten.avg_pool2d.default, False)
_adaptive_avg_pool2d_rule = _meta(torch.ops.aten._adaptive_avg_pool2d.default, False)
_adaptive_max_pool2d_rule = _meta(torch.ops.aten.adaptive_max_pool2d.default, True)


def max_pool2d_with_indices(diopi, ctx, self, kernel_size, stride, padding, dilation, ceil_mode):
    shape = shapes.max_pool2d_size(self, kernel_size, stride, padding, dilation, ceil_mode)
    specs = ((shape, self.dtype), (shape, _int64)) if shape is not None else \
        _max_pool2d_rule(self, kernel_size, stride, padding, dilation, ceil_mode)
    out, indices = _allocate(specs, ctx.device, memory_format(self))
    return diopi(ctx, out, indices, self, kernel_size, stride, padding, dilation, ceil_mode), (out, indices)


def max_pool2d_with_indices_backward(diopi, ctx, grad_output, self, kernel_size, stride, padding, dilation,
                                     ceil_mode, indices):
    grad_input = empty(self.shape, self.dtype, ctx.device, memory_format(self))
    status = diopi(ctx, grad_input, grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
    return status, grad_input


def avg_pool2d(diopi, ctx, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    shape, dtype = shapes.max_pool2d_size(self, kernel_size, stride, padding, (1, 1), ceil_mode), self.dtype
    if shape is None or divisor_override == 0:
        shape, dtype = _avg_pool2d_rule(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                        divisor_override)
    out = empty(shape, dtype, ctx.device, memory_format(self))
    return diopi(ctx, out, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override), out


def avg_pool2d_backward(diopi, ctx, grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    grad_input = empty(self.shape, self.dtype, ctx.device, memory_format(self))
    status = diopi(ctx, grad_input, grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                   divisor_override)
    return status, grad_input


def adaptive_avg_pool2d(diopi, ctx, self, output_size):
    shape, dtype = shapes.adaptive_pool2d_size(self, output_size), self.dtype
    if shape is None:
        shape, dtype = _adaptive_avg_pool2d_rule(self, output_size)
    out = empty(shape, dtype, ctx.device, memory_format(self))
    return diopi(ctx, out, self, output_size), out


def adaptive_avg_pool2d_backward(diopi, ctx, grad_output, self):
    grad_input = empty(self.shape, self.dtype, ctx.device, memory_format(self))
    return diopi(ctx, grad_input, grad_output, self), grad_input


def adaptive_max_pool2d(diopi, ctx, self, output_size):
    shape = shapes.adaptive_pool2d_size(self, output_size)
    specs = (((shape, self.dtype), (shape, _int64)) if shape is not None
             else _adaptive_max_pool2d_rule(self, output_size))
    out, indices = _allocate(specs, ctx.device, memory_format(self))
    return diopi(ctx, out, indices, self, output_size), (out, indices)


def adaptive_max_pool2d_backward(diopi, ctx, grad_output, self, indices):
    grad_input = empty(self.shape, self.dtype, ctx.device, memory_format(self))
    return diopi(ctx, grad_input, grad_output, self, indices), grad_input
