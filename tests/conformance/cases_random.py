"""Conformance cases: random functions (diopi_impl/torch/random.py).

The runner seeds CPU and dipu alike with ``torch.manual_seed(case.seed)``, and
the dipu kernels draw through native generators sharing the dipu generator's
state, so every result must equal ATen's CPU result exactly.
"""

import itertools

import torch

from conformance.spec import FLOAT, INT, SHAPES, Case, T

aten = torch.ops.aten
LAYOUTS_BY_RANK = {0: ("contiguous",), 1: ("contiguous", "sliced")}
SEEDS = (0, 7)


def _filled(function, reference, dtypes=FLOAT, attrs=(), name="inout"):
    """In-place fill ``function(inout, *attrs)`` over shapes x layouts x dtypes x attribute sets x seeds.

    No sliced views of several dims: the runner's reference copy of one is contiguous, and ATen's
    normal_ fills contiguous tensors of 16 or more elements in another order than strided ones.
    """
    cases = []
    for dtype, shape, values, seed in itertools.product(dtypes, SHAPES, attrs or ({},), SEEDS):
        for layout in LAYOUTS_BY_RANK.get(len(shape), ("contiguous", "transposed")):
            cases.append(Case(function, {name: T(shape, layout=layout), **values}, reference, dtype=dtype,
                              seed=seed))
    return cases


CASES = []

CASES += _filled("diopiUniformInp", lambda inout, from_, to: inout.uniform_(from_, to),
                 attrs=({"from_": 0.0, "to": 1.0}, {"from_": -2.0, "to": 5.0}))
CASES += _filled("diopiNormalInp", lambda inout, mean, std: inout.normal_(mean, std),
                 attrs=({"mean": 0.0, "std": 1.0}, {"mean": 3.0, "std": 0.5}))
CASES += _filled("diopiBernoulliScalar", lambda out, p: out.bernoulli_(p),
                 FLOAT + (torch.int64, torch.uint8, torch.bool),
                 attrs=({"p": 0.5}, {"p": 0.0}, {"p": 0.9}), name="out")
CASES += _filled("diopiExponentialInp", lambda inout, lambd: inout.exponential_(lambd),
                 attrs=({"lambd": 1.0}, {"lambd": 3.5}))
CASES += _filled("diopiGeometricInp", lambda inout, p: inout.geometric_(p), FLOAT + (torch.int64, torch.int32),
                 attrs=({"p": 0.3}, {"p": 0.9}))
CASES += _filled("diopiCauchyInp", lambda inout, median, sigma: inout.cauchy_(median, sigma),
                 attrs=({"median": 0.0, "sigma": 1.0}, {"median": -1.0, "sigma": 2.0}))
CASES += _filled("diopiLogNormalInp", lambda inout, mean, std: inout.log_normal_(mean, std),
                 attrs=({"mean": 1.0, "std": 2.0}, {"mean": 0.0, "std": 0.25}))


def _random(inout, from_, to=None):
    return inout.random_() if from_ == 0 and to is None else inout.random_(from_, to)


CASES += _filled("diopiRandomInp", _random, FLOAT + INT,
                 attrs=({"from_": 0}, {"from_": 0, "to": 7}, {"from_": 2, "to": 9}, {"from_": -3, "to": None}))
CASES = [c for c in CASES if not (c.function == "diopiRandomInp" and c.args.get("from_") == -3
                                  and c.dtype in (torch.uint8,))]  # a negative start is out of uint8's range
CASES += _filled("diopiRandomInp", _random, (torch.bool,), attrs=({"from_": 0}, {"from_": 0, "to": 2}))

# normal with tensor mean and/or std (broadcast), and each alone
for dtype, (mean_shape, std_shape), seed in itertools.product(
        FLOAT, (((), ()), ((6,), (6,)), ((3, 5), (3, 5)), ((3, 5), (5,)), ((2, 1, 4), (3, 1)), ((0, 3), (3,))),
        SEEDS):
    CASES.append(Case("diopiNormalTensor", {"mean": T(mean_shape), "std": T(std_shape, low=0.1, high=2)},
                      lambda mean, std: torch.normal(mean, std), dtype=dtype, seed=seed))
for dtype, shape, seed in itertools.product(FLOAT, SHAPES, SEEDS):
    layout = "transposed" if len(shape) >= 2 else "contiguous"
    CASES.append(Case("diopiNormalTensorScalar", {"mean": T(shape, layout=layout), "std": 0.5},
                      lambda mean, std: torch.normal(mean, std), dtype=dtype, seed=seed))
    CASES.append(Case("diopiNormalScalarTensor", {"mean": -1.0, "std": T(shape, layout=layout, low=0.1, high=2)},
                      lambda mean, std: torch.normal(mean, std), dtype=dtype, seed=seed))

# bernoulli: probabilities from a tensor, into a tensor of the same shape
for dtype, shape, seed in itertools.product(FLOAT, SHAPES, SEEDS):
    for layout in LAYOUTS_BY_RANK.get(len(shape), ("contiguous", "transposed", "sliced")):
        CASES.append(Case("diopiBernoulli", {"input": T(shape, layout=layout, low=0, high=1)},
                          lambda input: torch.bernoulli(input), dtype=dtype, seed=seed))
        CASES.append(Case("diopiBernoulliTensor", {"p": T(shape, layout=layout, low=0, high=1)},
                          lambda p: torch.empty(p.shape, dtype=p.dtype).bernoulli_(p), dtype=dtype, seed=seed))

# randperm (small n takes ATen's other algorithm) and multinomial
for n, dtype, seed in itertools.product((0, 1, 2, 5, 31, 300), (torch.int64, torch.int32, torch.float32), SEEDS):
    CASES.append(Case("diopiRandperm", {"n": n}, lambda n, dt=dtype: torch.randperm(n, dtype=dt), dtype=dtype,
                      seed=seed))
for dtype, shape, (samples, replacement), seed in itertools.product(
        (torch.float32, torch.float64), ((5,), (3, 6), (2, 1)), ((1, False), (1, True), (4, True)), SEEDS):
    if not replacement and samples > shape[-1]:
        continue
    CASES.append(Case("diopiMultinomial", {"input": T(shape, low=0.05, high=1), "num_samples": samples,
                                           "replacement": replacement},
                      lambda input, num_samples, replacement: torch.multinomial(input, num_samples, replacement),
                      dtype=dtype, seed=seed))
for shape, seed in itertools.product(((6,), (3, 6)), SEEDS):
    CASES.append(Case("diopiMultinomial", {"input": T(shape, layout="sliced", low=0.05, high=1),
                                           "num_samples": 3, "replacement": False},
                      lambda input, num_samples, replacement: torch.multinomial(input, num_samples, replacement),
                      seed=seed, note="sliced"))

# dropout: outputs and masks as ATen's native_dropout; evaluation and p at its ends keep or drop everything
for dtype, shape, (p, train), seed in itertools.product(
        FLOAT, SHAPES, ((0.5, True), (0.2, True), (0.0, True), (1.0, True), (0.5, False), (1.0, False)), SEEDS):
    CASES.append(Case("diopiDropout", {"input": T(shape), "p": p, "train": train},
                      lambda input, p, train: aten.native_dropout(input, p, train), dtype=dtype, seed=seed))
for dtype, shape, scale in itertools.product(FLOAT, SHAPES, (2.0, 1.25)):
    layout = "transposed" if len(shape) >= 2 else "contiguous"
    CASES.append(Case("diopiDropoutBackward", {"grad_output": T(shape, layout=layout), "mask": T(shape, torch.bool),
                                               "scale": scale},
                      lambda grad_output, mask, scale: aten.native_dropout_backward(grad_output, mask, scale),
                      dtype=dtype))

# distributions: poisson, binomial, gamma and dirichlet samples, and the gradients of their samples
for dtype, shape, seed in itertools.product((torch.float32, torch.float64), SHAPES, SEEDS):
    layout = "transposed" if len(shape) >= 2 else "contiguous"
    CASES.append(Case("diopiPoisson", {"input": T(shape, layout=layout, low=0, high=8)},
                      lambda input: torch.poisson(input), dtype=dtype, seed=seed))
    CASES.append(Case("diopiBinomial", {"count": T(shape, low=0, high=20),
                                        "prob": T(shape, layout=layout, low=0, high=1)},
                      lambda count, prob: torch.binomial(count, prob),
                      dtype=dtype, seed=seed))
    CASES.append(Case("diopiStandardGamma", {"input": T(shape, layout=layout, low=0.2, high=4)},
                      lambda input: torch._standard_gamma(input), dtype=dtype, seed=seed))
    CASES.append(Case("diopiStandardGammaGrad", {"input": T(shape, low=0.2, high=4),
                                                 "output": T(shape, layout=layout, low=0.1, high=3)},
                      lambda input, output: aten._standard_gamma_grad(input, output), dtype=dtype))
    CASES.append(Case("diopiDirichletGrad", {"x": T(shape, low=0.05, high=0.95), "alpha": T(shape, low=0.3, high=3),
                                             "total": T(shape, layout=layout, low=3, high=6)},
                      lambda x, alpha, total: aten._dirichlet_grad(x, alpha, total), dtype=dtype))
for dtype, shape, seed in itertools.product((torch.float32, torch.float64), ((3,), (2, 4), (3, 1), (2, 3, 5)), SEEDS):
    CASES.append(Case("diopiSampleDirichlet", {"input": T(shape, low=0.3, high=3)},
                      lambda input: torch._sample_dirichlet(input), dtype=dtype, seed=seed))
    CASES.append(Case("diopiSampleDirichlet", {"input": T(shape, low=0.3, high=3, layout="sliced")},
                      lambda input: torch._sample_dirichlet(input), dtype=dtype, seed=seed, note="sliced"))

# rrelu: random slopes for negative inputs while training (written to noise), the mean slope otherwise
for dtype, shape, (lower, upper), training, seed in itertools.product(
        FLOAT, SHAPES, ((0.125, 1 / 3), (0.1, 0.5)), (True, False), (0,)):
    if training and dtype == torch.float16:
        continue  # ATen's CPU kernel draws no float16 noise
    layout = "transposed" if len(shape) >= 2 else "contiguous"
    CASES.append(Case("diopiRreluWithNoise", {"noise": T(shape), "input": T(shape, layout=layout), "lower": lower,
                                              "upper": upper, "training": training},
                      lambda noise, input, lower, upper, training:
                      aten.rrelu_with_noise(input, noise, lower, upper, training), dtype=dtype, seed=seed))
    CASES.append(Case("diopiRreluWithNoiseBackward", {
        "grad_output": T(shape, layout=layout), "input": T(shape), "noise": T(shape, low=0.1, high=0.3),
        "lower": lower, "upper": upper, "training": training, "self_is_result": False},
        lambda grad_output, input, noise, lower, upper, training, self_is_result:
        aten.rrelu_with_noise_backward(grad_output, input, noise, lower, upper, training, self_is_result),
        dtype=dtype))
