"""Making and rearranging tensors: ranges and eye; cat and stack; flip, roll, repeat, triangles, channel
shuffle."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._library import library
from ._table import copy_function, out_function

aten = torch.ops.aten

# ---- one overload each (Note [Table-made functions] in _table.py): creation, triangles -------------------
for _name, _overload in (
        ("diopiArange", aten.arange.start_out), ("diopiLinspace", aten.linspace.out),
        ("diopiLogspace", aten.logspace.out), ("diopiEye", aten.eye.m_out),
        ("diopiTril", aten.tril.out), ("diopiTriu", aten.triu.out)):
    out_function(_name, _overload)


# ---- joining and rearranging -----------------------------------------------------------------------------


@library.register(aten=aten.cat.out)
def diopiCat(ctx, out, tensors, dim):
    d = ctx.device
    torch.cat([alias(t, d) for t in tensors], dim, out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.stack.out, direct=True)
def diopiStack(ctx, out, tensors, dim):
    d = ctx.device
    torch.stack([alias(t, d) for t in tensors], dim, out=alias(out, d))
    return SUCCESS


copy_function("diopiFlip", aten.flip.default)
copy_function("diopiRoll", aten.roll.default)
copy_function("diopiRepeat", aten.repeat.default)
copy_function("diopiChannelShuffle", aten.native_channel_shuffle.default)
