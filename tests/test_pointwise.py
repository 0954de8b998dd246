"""Pointwise math, logical/bitwise, clamping and activations run on dipu through the public torch API.

Each test runs ops with no CPU fallback (dipu.fallback_counts() stays empty) and compares with CPU.
"""

import pytest
import torch
import torch.nn.functional as F

import dipu

DEV = "dipu"


@pytest.fixture
def no_fallback():
    dipu.reset_fallback_counts()
    yield
    assert dipu.fallback_counts() == {}


def _same(cpu_fn, *tensors, atol=1e-6):
    expected = cpu_fn(*(t.clone() for t in tensors))
    actual = cpu_fn(*(t.to(DEV) for t in tensors))
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    actual = actual if isinstance(actual, (tuple, list)) else (actual,)
    for e, a in zip(expected, actual):
        assert a.device.type == "dipu"
        assert a.dtype == e.dtype
        torch.testing.assert_close(a.cpu(), e, atol=atol, rtol=1e-5, equal_nan=True)


X = torch.randn(4, 5)
Y = torch.randn(4, 5)
I = torch.randint(-8, 8, (4, 5))  # noqa: E741  (integers, beside X and Y)
J = torch.randint(1, 6, (4, 5))

UNARY = ["exp2", "expm1", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
         "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "reciprocal", "lgamma", "digamma", "i0", "sinc",
         "floor", "ceil", "round", "trunc", "frac", "sign", "sgn"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_functional_inplace_out(op, no_fallback):
    _same(getattr(torch, op), X)
    _same(lambda t: getattr(t, op + "_")(), X)
    _same(lambda t: getattr(torch, op)(t.t(), out=torch.empty(0, device=t.device)), X)


def test_unary_on_integers_promotes(no_fallback):
    _same(torch.sin, I)
    _same(torch.sqrt, J)
    _same(torch.reciprocal, J)
    _same(torch.floor, I)


def test_predicates_and_nan_to_num(no_fallback):
    special = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -0.0, 2.5])
    for fn in (torch.isnan, torch.isinf, torch.isposinf, torch.isneginf, torch.signbit, torch.isfinite,
               lambda t: torch.nan_to_num(t), lambda t: torch.nan_to_num(t, nan=0.5, posinf=9.0, neginf=-9.0),
               lambda t: t.nan_to_num_(nan=1.0), lambda t: torch.round(t * 123.456, decimals=1)):
        _same(fn, special)


def test_binary_math(no_fallback):
    for fn in (torch.atan2, torch.fmod, torch.remainder, torch.maximum, torch.minimum, torch.fmax, torch.fmin,
               torch.hypot, torch.copysign, torch.logaddexp, torch.logaddexp2, torch.nextafter, torch.xlogy,
               torch.floor_divide, lambda a, b: a.atan2_(b), lambda a, b: a.hypot_(b), lambda a, b: a.fmod_(b),
               lambda a, b: a % 2.5, lambda a, b: a.remainder_(-1.5), lambda a, b: torch.fmod(a, 2),
               lambda a, b: torch.maximum(a, b[0]), lambda a, b: a.copysign(-1.0), lambda a, b: a.abs() ** b,
               lambda a, b: a ** 2, lambda a, b: 2 ** b, lambda a, b: a.abs().pow_(0.5), lambda a, b: a.pow_(b.round()),
               lambda a, b: torch.lerp(a, b, b.sigmoid()), lambda a, b: a.lerp_(b, b.sigmoid())):
        _same(fn, X, Y)


def test_integer_logical_and_bitwise(no_fallback):
    for fn in (torch.gcd, torch.lcm, torch.heaviside, torch.logical_and, torch.logical_or, torch.logical_xor,
               torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor, torch.bitwise_left_shift,
               torch.bitwise_right_shift, lambda a, b: a & b, lambda a, b: a | 3, lambda a, b: a ^ b,
               lambda a, b: ~a, lambda a, b: a << 2, lambda a, b: a >> b, lambda a, b: a.__ilshift__(b),
               lambda a, b: a.bitwise_and_(5), lambda a, b: a.logical_or_(b), lambda a, b: a // b,
               lambda a, b: a.floor_divide_(b), lambda a, b: torch.logical_not(a), lambda a, b: a.logical_not_(),
               lambda a, b: a.gcd_(b), lambda a, b: a.bitwise_not_()):
        _same(fn, I, J)
    _same(lambda a, b: (a > 0) & (b > 2), I, J)
    _same(lambda a, b: (a > 0).logical_xor_(b > 2), I, J)


def test_clamp_family(no_fallback):
    lo, hi = -torch.rand(4, 5), torch.rand(5)
    for fn in (lambda t: t.clamp(-0.5, 0.5), lambda t: t.clamp(min=0.1), lambda t: t.clamp(max=-0.1),
               lambda t: t.clamp_(-1, 1), lambda t: t.clamp_min(0.2), lambda t: t.clamp_max_(0.3),
               lambda t: torch.clip(t, -0.2, 0.2), lambda t: t.clamp(lo.to(t.device), hi.to(t.device)),
               lambda t: t.clamp_(min=lo.to(t.device)), lambda t: torch.clamp_max(t, hi.to(t.device)),
               lambda t: t.clamp_min_(lo.to(t.device))):
        _same(fn, X)
    _same(lambda t: t.clamp(min=0.5), I)  # integer input, float bound: promotes like CPU


ACTIVATIONS = [F.silu, F.hardswish, F.hardsigmoid, F.mish, F.relu6, F.selu, F.celu, F.elu, F.softplus,
               F.logsigmoid, F.softshrink, F.hardshrink, lambda t: F.glu(t, 0), F.tanh, F.sigmoid, F.gelu,
               lambda t: F.hardtanh(t, -0.3, 0.7), lambda t: F.leaky_relu(t, 0.2),
               lambda t: F.elu(t, 0.5), lambda t: F.softplus(t, 2.0, 1.0), lambda t: F.threshold(t, 0.1, -2.0),
               lambda t: torch.logit(t.sigmoid(), 1e-3)]


@pytest.mark.parametrize("index", range(len(ACTIVATIONS)))
def test_activation_forward_and_backward(index, no_fallback):
    fn = ACTIVATIONS[index]
    results = []
    for device in ("cpu", DEV):
        x = X.to(device).clone().detach().requires_grad_()
        y = fn(x)
        y.backward(torch.ones_like(y) * 0.5)
        results.append((y.detach().cpu(), x.grad.cpu()))
    torch.testing.assert_close(results[1], results[0], atol=1e-6, rtol=1e-5)


def test_inplace_activations(no_fallback):
    for fn in (lambda t: F.silu(t, inplace=True), lambda t: F.hardswish(t, inplace=True),
               lambda t: F.hardsigmoid(t, inplace=True), lambda t: F.mish(t, inplace=True),
               lambda t: F.relu6(t, inplace=True), lambda t: F.leaky_relu(t, 0.1, inplace=True),
               lambda t: F.elu(t, inplace=True), lambda t: F.hardtanh(t, inplace=True),
               lambda t: F.threshold(t, 0.0, 1.0, inplace=True)):
        _same(fn, X)


def test_inplace_activation_backward_uses_result(no_fallback):
    results = []
    for device in ("cpu", DEV):
        x = X.to(device).clone().detach().requires_grad_()
        y = F.elu(x * 1.0, inplace=True) + F.leaky_relu(x * 2.0, 0.1, inplace=True)
        y.sum().backward()
        results.append(x.grad.cpu())
    torch.testing.assert_close(results[1], results[0])


def test_in_place_type_error_matches_cpu():
    with pytest.raises(RuntimeError):
        torch.arange(4).sin_()
    with pytest.raises(RuntimeError):
        torch.arange(4, device=DEV).sin_()


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_to_real_results_match_cpu(dtype):
    """abs, angle and norms of complex tensors are real; sgn stays complex; abs_ refuses as on CPU."""
    c = torch.randn(3, 4, dtype=dtype, generator=torch.Generator().manual_seed(0))
    _same(lambda t: (torch.abs(t), t.abs().sum(), torch.angle(t), torch.sgn(t), torch.linalg.norm(t),
                     torch.linalg.vector_norm(t, 1, dim=1), F.l1_loss(t, t * 2)), c, atol=1e-5)
    _same(lambda t: torch.abs(t, out=torch.empty(0, dtype=dtype, device=t.device)), c)  # out= keeps its dtype
    for device in ("cpu", DEV):
        with pytest.raises(RuntimeError, match="In-place abs is not supported for complex tensors"):
            c.to(device).abs_()


# Note [Output strides] (dipu/ops/meta_rules.py): functional outputs take the strides the CPU kernels give them
_FORMATS = {"channels_last": (torch.channels_last, (2, 3, 4, 5)), "channels_last_3d": (torch.channels_last_3d,
                                                                                    (2, 3, 2, 4, 5))}
_STRIDED_CASES = {
    "gelu": F.gelu, "silu": F.silu, "sigmoid": torch.sigmoid, "hardtanh": F.hardtanh, "leaky_relu": F.leaky_relu,
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "isnan": torch.isnan, "sub scalar": lambda x: x - 2,
    "add contiguous": lambda x: x + x.contiguous(), "contiguous mul": lambda x: x.contiguous() * x,
    "add broadcast bias": lambda x: x + torch.arange(3.0, device=x.device).view(3, *[1] * (x.dim() - 2)),
    "bias div": lambda x: torch.arange(1.0, 4.0, device=x.device).view(3, *[1] * (x.dim() - 2)) / x,
    "mul 0-dim": lambda x: x * torch.tensor(2.0, device=x.device), "gt": lambda x: x > 0,
    "where": lambda x: torch.where(x > 0, x, x.contiguous()),
    "where broadcast": lambda x: torch.where(x > 0, x, torch.zeros(x.shape[-1], device=x.device)),
    "addcmul": lambda x: torch.addcmul(x.contiguous(), x, x),
    "clamp": lambda x: torch.clamp(x, -0.5, 0.5),
}


@pytest.mark.parametrize("fmt", list(_FORMATS))
@pytest.mark.parametrize("name", list(_STRIDED_CASES))
def test_pointwise_outputs_keep_the_cpu_memory_format(name, fmt, no_fallback):
    memory_format, shape = _FORMATS[fmt]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).contiguous(memory_format=memory_format)
    expected = _STRIDED_CASES[name](x)
    actual = _STRIDED_CASES[name](x.to(DEV))
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected)


def test_pointwise_outputs_of_transposed_and_expanded_inputs_keep_the_cpu_strides(no_fallback):
    x = torch.randn(5, 6).t()
    ones = torch.ones(()).expand(6, 5)
    for fn in (torch.exp, lambda t: t + torch.linspace(0, 1, 30, device=t.device).view(6, 5),
               lambda t: torch.ones((), device=t.device).expand(6, 5) * t, lambda t: torch.where(t > 0, t, 0.0)):
        expected, actual = fn(x), fn(x.to(DEV))
        assert actual.stride() == expected.stride()
        torch.testing.assert_close(actual.cpu(), expected)
    assert (torch.exp(ones.to(DEV)).stride(), torch.exp(ones).stride()) == ((5, 1), (5, 1))
