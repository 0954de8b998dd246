"""Padding and resampling: pad, nearest/linear/cubic up-sampling in 1-3 d, grid sampling, with backwards."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import fast_aten, write_results
from ._library import library
from ._table import copy_function, out_function

aten = torch.ops.aten

# ---- padding: one DIOPI function for ATen's per-mode, per-rank ops ----------------------------------------

_PADS = {
    ("reflect", 1): aten.reflection_pad1d, ("reflect", 2): aten.reflection_pad2d, ("reflect", 3): aten.reflection_pad3d,
    ("replicate", 1): aten.replication_pad1d, ("replicate", 2): aten.replication_pad2d,
    ("replicate", 3): aten.replication_pad3d,
}


_PAD_BACKWARDS = {
    ("reflect", 1): aten.reflection_pad1d_backward, ("reflect", 2): aten.reflection_pad2d_backward,
    ("reflect", 3): aten.reflection_pad3d_backward, ("replicate", 1): aten.replication_pad1d_backward,
    ("replicate", 2): aten.replication_pad2d_backward, ("replicate", 3): aten.replication_pad3d_backward,
}


@library.register
def diopiPad(ctx, out, input, pad, mode, value):
    """mode: "constant" (value, None meaning 0), "reflect" or "replicate"; pad as ATen orders it."""
    d = ctx.device
    x, o = alias(input, d), alias(out, d)
    if mode == "constant":
        o.copy_(fast_aten.constant_pad_nd(x, pad, 0 if value is None else value))
    else:
        _PADS[mode, len(pad) // 2].out(x, pad, out=o)
    return SUCCESS


@library.register
def diopiPadBackward(ctx, grad_input, grad_output, input, pad, mode):
    d = ctx.device
    _PAD_BACKWARDS[mode, len(pad) // 2].grad_input(alias(grad_output, d), alias(input, d), pad,
                                                   grad_input=alias(grad_input, d))
    return SUCCESS


# ---- up-sampling: diopiUpsampleX(out, input, size, ...) and diopiUpsampleXBackward(grad_input, grad_output,
# out_size, in_size, ...) (Note [Table-made functions] in _table.py) ------------------------------------------
for _suffix, _op in (("Nearest1d", "upsample_nearest1d"), ("Nearest2d", "upsample_nearest2d"),
                     ("NearestExact2d", "_upsample_nearest_exact2d"), ("Nearest3d", "upsample_nearest3d"),
                     ("Linear1d", "upsample_linear1d"), ("Bilinear2d", "upsample_bilinear2d"),
                     ("Bicubic2d", "upsample_bicubic2d"), ("Trilinear3d", "upsample_trilinear3d")):
    out_function("diopiUpsample" + _suffix, getattr(aten, _op).out, ("out",))
    out_function(f"diopiUpsample{_suffix}Backward", getattr(aten, _op + "_backward").grad_input, ("grad_input",))


# ---- grid sampling ---------------------------------------------------------------------------------------


copy_function("diopiGridSampler", aten.grid_sampler_2d.default)


@library.register
def diopiGridSamplerBackward(ctx, grad_input, grad_grid, grad_output, input, grid, interpolation_mode, padding_mode,
                            align_corners):
    d = ctx.device
    outputs = (grad_input, grad_grid)
    results = fast_aten.grid_sampler_2d_backward(alias(grad_output, d), alias(input, d), alias(grid, d),
                                            interpolation_mode, padding_mode, align_corners,
                                            [o is not None for o in outputs])
    write_results(outputs, results, d)
    return SUCCESS
