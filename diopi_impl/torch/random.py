"""Random functions. They draw from the native generator that shares the dipu generator's
state (``_C.native_generator``), so a seed set on dipu reproduces the same numbers."""

import torch

from dipu import _C
from dipu.diopi import SUCCESS
from diopi_impl.torch import library

alias = _C.alias
native_generator = _C.native_generator


@library.register
def diopiBernoulliScalar(ctx, out, p, generator):
    d = ctx.device
    alias(out, d).bernoulli_(p, generator=native_generator(generator, d))
    return SUCCESS


@library.register
def diopiUniformInp(ctx, inout, from_, to, generator):
    d = ctx.device
    alias(inout, d).uniform_(from_, to, generator=native_generator(generator, d))
    return SUCCESS


@library.register
def diopiNormalInp(ctx, inout, mean, std, generator):
    d = ctx.device
    alias(inout, d).normal_(mean, std, generator=native_generator(generator, d))
    return SUCCESS


@library.register
def diopiDropout(ctx, out, mask, input, p, train, generator):
    # As ATen's CPU dropout: keep each element with probability 1 - p and scale by 1 / (1 - p),
    # drawing the mask as a float bernoulli of the input's shape so the random stream matches.
    d = ctx.device
    x, o, m = alias(input, d), alias(out, d), alias(mask, d)
    if train is False or p == 0 or p == 1:
        torch.mul(x, float(p != 1), out=o)
        m.fill_(p != 1)
        return SUCCESS
    keep = torch.empty_like(x).bernoulli_(1 - p, generator=native_generator(generator, d))
    m.copy_(keep)
    torch.mul(x, keep.div_(1 - p), out=o)
    return SUCCESS


@library.register
def diopiDropoutBackward(ctx, grad_input, grad_output, mask, scale):
    d = ctx.device
    torch.ops.aten.native_dropout_backward.out(alias(grad_output, d), alias(mask, d), scale, out=alias(grad_input, d))
    return SUCCESS
