"""Random functions. They draw from the native generator that shares the dipu generator's state
(``native_generator``), so a seed set on dipu reproduces the same numbers."""

import torch

from dipu.diopi import SUCCESS, native_generator
from dipu.diopi import native_alias as alias
from ._library import library

aten = torch.ops.aten

# ---- in place: fill a tensor with draws --------------------------------------------------------------------


@library.register(aten=aten.uniform_.default, direct=True)
def diopiUniformInp(ctx, inout, from_, to, generator):
    d = ctx.device
    alias(inout, d).uniform_(from_, to, generator=native_generator(generator, d))
    return SUCCESS


@library.register(aten=aten.normal_.default, direct=True)
def diopiNormalInp(ctx, inout, mean, std, generator):
    d = ctx.device
    alias(inout, d).normal_(mean, std, generator=native_generator(generator, d))
    return SUCCESS


@library.register(aten=getattr(aten.random_, "from"))
def diopiRandomInp(ctx, inout, from_, to, generator):
    d = ctx.device
    gen = native_generator(generator, d)
    if from_ == 0 and to is None:  # random_(): the same range, drawn as the CPU's random_() draws it
        alias(inout, d).random_(generator=gen)
    else:
        alias(inout, d).random_(from_, to, generator=gen)
    return SUCCESS


@library.register(aten=aten.exponential_.default, direct=True)
def diopiExponentialInp(ctx, inout, lambd, generator):
    d = ctx.device
    alias(inout, d).exponential_(lambd, generator=native_generator(generator, d))
    return SUCCESS


@library.register(aten=aten.geometric_.default, direct=True)
def diopiGeometricInp(ctx, inout, p, generator):
    d = ctx.device
    alias(inout, d).geometric_(p, generator=native_generator(generator, d))
    return SUCCESS


@library.register(aten=aten.cauchy_.default, direct=True)
def diopiCauchyInp(ctx, inout, median, sigma, generator):
    d = ctx.device
    alias(inout, d).cauchy_(median, sigma, generator=native_generator(generator, d))
    return SUCCESS


@library.register(aten=aten.log_normal_.default, direct=True)
def diopiLogNormalInp(ctx, inout, mean, std, generator):
    d = ctx.device
    alias(inout, d).log_normal_(mean, std, generator=native_generator(generator, d))
    return SUCCESS


@library.register(aten=aten.bernoulli_.float, direct=True)
def diopiBernoulliScalar(ctx, out, p, generator):
    d = ctx.device
    alias(out, d).bernoulli_(p, generator=native_generator(generator, d))
    return SUCCESS


@library.register(aten=aten.bernoulli_.Tensor, direct=True)
def diopiBernoulliTensor(ctx, out, p, generator):
    d = ctx.device
    alias(out, d).bernoulli_(alias(p, d), generator=native_generator(generator, d))
    return SUCCESS


# ---- out= ------------------------------------------------------------------------------------------------


@library.register(aten=aten.bernoulli.out, direct=True)
def diopiBernoulli(ctx, out, input, generator):
    d = ctx.device
    torch.bernoulli(alias(input, d), generator=native_generator(generator, d), out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.normal.Tensor_float_out, direct=True)
def diopiNormalTensorScalar(ctx, out, mean, std, generator):
    d = ctx.device
    torch.normal(alias(mean, d), std, generator=native_generator(generator, d), out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.normal.float_Tensor_out, direct=True)
def diopiNormalScalarTensor(ctx, out, mean, std, generator):
    d = ctx.device
    torch.normal(mean, alias(std, d), generator=native_generator(generator, d), out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.normal.Tensor_Tensor_out, direct=True)
def diopiNormalTensor(ctx, out, mean, std, generator):
    d = ctx.device
    torch.normal(alias(mean, d), alias(std, d), generator=native_generator(generator, d), out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.randperm.generator_out, direct=True)
def diopiRandperm(ctx, out, n, generator):
    d = ctx.device
    torch.randperm(n, generator=native_generator(generator, d), out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.multinomial.out, direct=True)
def diopiMultinomial(ctx, out, input, num_samples, replacement, generator):
    d = ctx.device
    torch.multinomial(alias(input, d), num_samples, replacement, generator=native_generator(generator, d),
                      out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.poisson.out)
def diopiPoisson(ctx, out, input, generator):
    d = ctx.device
    alias(out, d).copy_(torch.poisson(alias(input, d), generator=native_generator(generator, d)))
    return SUCCESS


@library.register(aten=aten.binomial.out)
def diopiBinomial(ctx, out, count, prob, generator):
    d = ctx.device
    alias(out, d).copy_(torch.binomial(alias(count, d), alias(prob, d), generator=native_generator(generator, d)))
    return SUCCESS


@library.register(aten=aten._standard_gamma.out)
def diopiStandardGamma(ctx, out, input, generator):
    d = ctx.device
    alias(out, d).copy_(torch._standard_gamma(alias(input, d), generator=native_generator(generator, d)))
    return SUCCESS


@library.register(aten=aten._standard_gamma_grad.out, direct=True)
def diopiStandardGammaGrad(ctx, grad_input, input, output):
    d = ctx.device
    torch.ops.aten._standard_gamma_grad.out(alias(input, d), alias(output, d), out=alias(grad_input, d))
    return SUCCESS


@library.register(aten=aten._sample_dirichlet.out)
def diopiSampleDirichlet(ctx, out, input, generator):
    d = ctx.device
    alias(out, d).copy_(torch._sample_dirichlet(alias(input, d), generator=native_generator(generator, d)))
    return SUCCESS


@library.register(aten=aten._dirichlet_grad.out, direct=True)
def diopiDirichletGrad(ctx, grad_input, x, alpha, total):
    d = ctx.device
    torch.ops.aten._dirichlet_grad.out(alias(x, d), alias(alpha, d), alias(total, d), out=alias(grad_input, d))
    return SUCCESS


# ---- dropout ---------------------------------------------------------------------------------------------


@library.register
def diopiDropout(ctx, out, mask, input, p, train, generator):
    # As ATen's CPU dropout: keep each element with probability 1 - p and scale by 1 / (1 - p),
    # drawing the mask as a float bernoulli of the input's shape so the random stream matches.
    d = ctx.device
    x, o, m = alias(input, d), alias(out, d), alias(mask, d)
    if not train or p == 0 or p == 1:  # evaluation keeps everything, whatever p
        keep = not train or p != 1
        torch.mul(x, float(keep), out=o)
        m.fill_(keep)
        return SUCCESS
    keep = torch.empty_like(x).bernoulli_(1 - p, generator=native_generator(generator, d))
    m.copy_(keep)
    torch.mul(x, keep.div_(1 - p), out=o)
    return SUCCESS


@library.register(aten=aten.native_dropout_backward.out, direct=True)
def diopiDropoutBackward(ctx, grad_input, grad_output, mask, scale):
    d = ctx.device
    torch.ops.aten.native_dropout_backward.out(alias(grad_output, d), alias(mask, d), scale, out=alias(grad_input, d))
    return SUCCESS
