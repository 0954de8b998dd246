"""Making and rearranging tensors: ranges and eye; cat and stack; flip, roll, repeat, triangles, channel
shuffle."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import fast_aten
from ._library import library
from ._table import out_function

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


@library.register(aten=aten.flip.out)
def diopiFlip(ctx, out, input, dims):
    d = ctx.device
    alias(out, d).copy_(torch.flip(alias(input, d), dims))
    return SUCCESS


@library.register(aten=aten.roll.out)
def diopiRoll(ctx, out, input, shifts, dims):
    d = ctx.device
    alias(out, d).copy_(torch.roll(alias(input, d), shifts, dims))
    return SUCCESS


@library.register(aten=aten.repeat.out)
def diopiRepeat(ctx, out, input, repeats_size):
    d = ctx.device
    alias(out, d).copy_(alias(input, d).repeat(repeats_size))
    return SUCCESS


@library.register(aten=aten.channel_shuffle.out)
def diopiChannelShuffle(ctx, out, input, groups):
    d = ctx.device
    alias(out, d).copy_(fast_aten.native_channel_shuffle(alias(input, d), groups))
    return SUCCESS
