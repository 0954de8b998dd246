"""Random functions. They draw from the native generator that shares the dipu generator's state
(``native_generator``), so a seed set on dipu reproduces the same numbers."""

import torch

from dipu.diopi import SUCCESS, native_generator
from dipu.diopi import native_alias as alias
from ._library import library
from ._table import copy_function, inplace_function, out_function

aten = torch.ops.aten

# ---- one overload each (Note [Table-made functions] in _table.py: a Generator passes as the native one) ------
for _name, _overload in (
        # in place: fill a tensor with draws
        ("diopiUniformInp", aten.uniform_.default), ("diopiNormalInp", aten.normal_.default),
        ("diopiExponentialInp", aten.exponential_.default), ("diopiGeometricInp", aten.geometric_.default),
        ("diopiCauchyInp", aten.cauchy_.default), ("diopiLogNormalInp", aten.log_normal_.default),
        ("diopiBernoulliScalar", aten.bernoulli_.float), ("diopiBernoulliTensor", aten.bernoulli_.Tensor)):
    inplace_function(_name, _overload)
for _name, _overload, _outs in (
        ("diopiBernoulli", aten.bernoulli.out, ()),
        ("diopiNormalTensorScalar", aten.normal.Tensor_float_out, ()),
        ("diopiNormalScalarTensor", aten.normal.float_Tensor_out, ()),
        ("diopiNormalTensor", aten.normal.Tensor_Tensor_out, ()),
        ("diopiRandperm", aten.randperm.generator_out, ()),
        ("diopiMultinomial", aten.multinomial.out, ()),
        ("diopiStandardGammaGrad", aten._standard_gamma_grad.out, ("out",)),
        ("diopiDirichletGrad", aten._dirichlet_grad.out, ("out",)),
        ("diopiDropoutBackward", aten.native_dropout_backward.out, ("out",))):
    out_function(_name, _overload, _outs)


# ---- written out: a choice of call, or a copy from the functional op -----------------------------------------


@library.register(aten=getattr(aten.random_, "from"))
def diopiRandomInp(ctx, inout, from_, to, generator):
    d = ctx.device
    gen = native_generator(generator, d)
    if from_ == 0 and to is None:  # random_(): the same range, drawn as the CPU's random_() draws it
        alias(inout, d).random_(generator=gen)
    else:
        alias(inout, d).random_(from_, to, generator=gen)
    return SUCCESS


copy_function("diopiPoisson", aten.poisson.default)
copy_function("diopiBinomial", aten.binomial.default)
copy_function("diopiStandardGamma", aten._standard_gamma.default)
copy_function("diopiSampleDirichlet", aten._sample_dirichlet.default)


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


