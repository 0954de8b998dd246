"""Pooling: max, average and adaptive pooling in 2-d and 3-d with their backwards, and max unpooling."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._library import library
from ._table import copy_function, out_function

aten = torch.ops.aten

# One overload each (Note [Table-made functions] in _table.py): the out= names, where a row gives them, are the
# overload's (``grad_input`` for most backwards).
for _name, _overload, _outs in (
        # ---- 2-d
        ("diopiMaxPool2dWithIndices", aten.max_pool2d_with_indices.out, ("out", "indices")),
        ("diopiMaxPool2dBackward", aten.max_pool2d_with_indices_backward.grad_input, ("grad_input",)),
        ("diopiAvgPool2d", aten.avg_pool2d.out, ()),
        ("diopiAvgPool2dBackward", aten.avg_pool2d_backward.grad_input, ("grad_input",)),
        ("diopiAdaptiveAvgPool2dBackward", aten._adaptive_avg_pool2d_backward.out, ("out",)),
        ("diopiAdaptiveMaxPool2dWithIndices", aten.adaptive_max_pool2d.out, ("out", "indices")),
        ("diopiAdaptiveMaxPool2dBackward", aten.adaptive_max_pool2d_backward.grad_input, ("grad_input",)),
        # ---- 3-d
        ("diopiMaxPool3dWithIndices", aten.max_pool3d_with_indices.out, ("out", "indices")),
        ("diopiMaxPool3dBackward", aten.max_pool3d_with_indices_backward.grad_input, ("grad_input",)),
        ("diopiAvgPool3d", aten.avg_pool3d.out, ("out",)),
        ("diopiAvgPool3dBackward", aten.avg_pool3d_backward.grad_input, ("grad_input",)),
        ("diopiAdaptiveAvgPool3d", aten._adaptive_avg_pool3d.out, ("out",)),
        ("diopiAdaptiveAvgPool3dBackward", aten._adaptive_avg_pool3d_backward.out, ("out",)),
        ("diopiAdaptiveMaxPool3dWithIndices", aten.adaptive_max_pool3d.out, ("out", "indices")),
        ("diopiAdaptiveMaxPool3dBackward", aten.adaptive_max_pool3d_backward.grad_input, ("grad_input",))):
    out_function(_name, _overload, _outs)


@library.register(aten=aten._adaptive_avg_pool2d.out)  # in C++ by hand: diopi_impl/torch_cpp/handwritten.cpp
def diopiAdaptiveAvgPool2d(ctx, out, input, output_size):
    d = ctx.device
    aten._adaptive_avg_pool2d.out(alias(input, d), output_size, out=alias(out, d))
    return SUCCESS


# ATen's out= kernel restrides ``out`` to the input's memory format, which an alias cannot pass on
copy_function("diopiMaxUnpool2d", aten.max_unpool2d.default)
