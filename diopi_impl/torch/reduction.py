"""Reductions. DIOPI passes no keepdim: the output's rank says whether dims are kept."""

import torch

from dipu import _C
from dipu.diopi import SUCCESS
from diopi_impl.torch import library

alias = _C.alias


def _keepdim(out, input) -> bool:
    return out.dim() == input.dim() and input.dim() > 0


@library.register
def diopiSum(ctx, out, input, dim):
    d = ctx.device
    x, o = alias(input, d), alias(out, d)
    torch.sum(x, dim or None, keepdim=_keepdim(o, x), dtype=o.dtype, out=o)
    return SUCCESS


@library.register
def diopiMean(ctx, out, input, dim):
    d = ctx.device
    x, o = alias(input, d), alias(out, d)
    torch.mean(x, dim or None, keepdim=_keepdim(o, x), dtype=o.dtype, out=o)
    return SUCCESS


@library.register
def diopiMax(ctx, max, max_indices, input, dim):
    d = ctx.device
    x, values = alias(input, d), alias(max, d)
    torch.max(x, dim, keepdim=_keepdim(values, x), out=(values, alias(max_indices, d)))
    return SUCCESS


@library.register
def diopiMaxAll(ctx, max, input):
    d = ctx.device
    alias(max, d).copy_(torch.max(alias(input, d)))
    return SUCCESS
