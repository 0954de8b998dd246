"""Making and rearranging tensors: ranges and eye; cat and stack; flip, roll, repeat, triangles, channel
shuffle."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import fast_aten
from ._library import library

aten = torch.ops.aten

# ---- creation --------------------------------------------------------------------------------------------


@library.register(aten=aten.arange.start_out, direct=True)
def diopiArange(ctx, out, start, end, step):
    torch.arange(start, end, step, out=alias(out, ctx.device))
    return SUCCESS


@library.register(aten=aten.linspace.out, direct=True)
def diopiLinspace(ctx, out, start, end, steps):
    torch.linspace(start, end, steps, out=alias(out, ctx.device))
    return SUCCESS


@library.register(aten=aten.logspace.out, direct=True)
def diopiLogspace(ctx, out, start, end, steps, base):
    torch.logspace(start, end, steps, base, out=alias(out, ctx.device))
    return SUCCESS


@library.register(aten=aten.eye.m_out, direct=True)
def diopiEye(ctx, out, n, m):
    torch.eye(n, m, out=alias(out, ctx.device))
    return SUCCESS


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


@library.register(aten=aten.tril.out, direct=True)
def diopiTril(ctx, out, input, diagonal):
    d = ctx.device
    torch.tril(alias(input, d), diagonal, out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.triu.out, direct=True)
def diopiTriu(ctx, out, input, diagonal):
    d = ctx.device
    torch.triu(alias(input, d), diagonal, out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.channel_shuffle.out)
def diopiChannelShuffle(ctx, out, input, groups):
    d = ctx.device
    alias(out, d).copy_(fast_aten.native_channel_shuffle(alias(input, d), groups))
    return SUCCESS
