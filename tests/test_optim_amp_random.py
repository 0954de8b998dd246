"""Optimizers (foreach and fused), GradScaler and random ops run on dipu with no CPU fallback and match CPU."""

import itertools

import pytest
import torch

import dipu

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
SHAPES = ((3, 5), (), (0,), (2, 3, 4), (7,))


@pytest.fixture
def no_fallback():
    dipu.reset_fallback_counts()
    yield
    assert dipu.fallback_counts() == {}


def _lists(dtype, low=-3.0, high=3.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    cpu = [(torch.rand(s, generator=gen, dtype=torch.float64) * (high - low) + low).to(dtype) for s in SHAPES]
    cpu[0] = cpu[0].t()  # one non-contiguous tensor
    return cpu, [t.to("dipu") for t in cpu]


def _assert_lists_equal(dev, cpu):
    assert len(dev) == len(cpu)
    for d, c in zip(dev, cpu):
        assert d.device.type == "dipu"
        torch.testing.assert_close(d.cpu(), c, equal_nan=True)


# ---- every in-place and functional _foreach_ overload, through torch ---------------------------------------
def _second(kind, dtype, cpu, seed=1):
    if kind == "List":
        return _lists(dtype, 0.5, 2.0, seed)
    if kind == "Scalar":
        return 1.5, 1.5
    if kind == "ScalarList":
        values = [0.5 + i for i in range(len(cpu))]
        return values, values
    value = torch.tensor(1.5, dtype=dtype)  # Tensor: a 0-dim tensor
    return value, value.to("dipu")


BINARY = [(op, kind) for op, kinds in {
    "add": ("List", "Scalar", "ScalarList", "Tensor"), "sub": ("List", "Scalar", "ScalarList"),
    "mul": ("List", "Scalar", "ScalarList", "Tensor"), "div": ("List", "Scalar", "ScalarList", "Tensor"),
    "maximum": ("List", "Scalar", "ScalarList"), "minimum": ("List", "Scalar", "ScalarList"),
    "clamp_min": ("List", "Scalar", "ScalarList"), "clamp_max": ("List", "Scalar", "ScalarList"),
    "pow": ("List", "Scalar", "ScalarList"),
}.items() for kind in kinds]


@pytest.mark.parametrize("op, kind", BINARY)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_foreach_binary(no_fallback, op, kind, dtype):
    cpu, dev = _lists(dtype, 0.5, 2.0)
    other_cpu, other_dev = _second(kind, dtype, cpu)
    functional, inplace = getattr(torch, f"_foreach_{op}"), getattr(torch, f"_foreach_{op}_")
    _assert_lists_equal(functional(dev, other_dev), functional(cpu, other_cpu))
    inplace(dev, other_dev)
    inplace(cpu, other_cpu)
    _assert_lists_equal(dev, cpu)


@pytest.mark.parametrize("op, kind", [("add", "List"), ("add", "Tensor"), ("sub", "List")])
def test_foreach_alpha(no_fallback, op, kind):
    cpu, dev = _lists(torch.float32)
    other_cpu, other_dev = _second(kind, torch.float32, cpu)
    _assert_lists_equal(getattr(torch, f"_foreach_{op}")(dev, other_dev, alpha=-0.5),
                        getattr(torch, f"_foreach_{op}")(cpu, other_cpu, alpha=-0.5))
    getattr(torch, f"_foreach_{op}_")(dev, other_dev, alpha=3)
    getattr(torch, f"_foreach_{op}_")(cpu, other_cpu, alpha=3)
    _assert_lists_equal(dev, cpu)


@pytest.mark.parametrize("op", ("addcmul", "addcdiv"))
@pytest.mark.parametrize("kind", ("Scalar", "ScalarList", "Tensor"))
def test_foreach_addcmul_addcdiv(no_fallback, op, kind):
    cpu, dev = _lists(torch.float32)
    t1_cpu, t1_dev = _lists(torch.float32, seed=1)
    t2_cpu, t2_dev = _lists(torch.float32, 0.5, 2.0, seed=2)
    scalars = {"Scalar": 0.5, "ScalarList": [0.5, -1.0, 2.0, 0.25, 3.0],
               "Tensor": torch.tensor([0.5, -1.0, 2.0, 0.25, 3.0])}[kind]
    _assert_lists_equal(getattr(torch, f"_foreach_{op}")(dev, t1_dev, t2_dev, scalars),
                        getattr(torch, f"_foreach_{op}")(cpu, t1_cpu, t2_cpu, scalars))
    getattr(torch, f"_foreach_{op}_")(dev, t1_dev, t2_dev, scalars)
    getattr(torch, f"_foreach_{op}_")(cpu, t1_cpu, t2_cpu, scalars)
    _assert_lists_equal(dev, cpu)


@pytest.mark.parametrize("kind", ("List", "Scalar", "ScalarList"))
def test_foreach_lerp(no_fallback, kind):
    cpu, dev = _lists(torch.float32)
    end_cpu, end_dev = _lists(torch.float32, seed=1)
    weight_cpu, weight_dev = {"List": _lists(torch.float32, 0, 1, seed=2), "Scalar": (0.3, 0.3),
                              "ScalarList": ([0.1, 0.2, 0.3, 0.4, 0.9],) * 2}[kind]
    _assert_lists_equal(torch._foreach_lerp(dev, end_dev, weight_dev), torch._foreach_lerp(cpu, end_cpu, weight_cpu))
    torch._foreach_lerp_(dev, end_dev, weight_dev)
    torch._foreach_lerp_(cpu, end_cpu, weight_cpu)
    _assert_lists_equal(dev, cpu)


UNARY = ("abs", "neg", "sqrt", "rsqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "reciprocal", "sign",
         "sigmoid", "tanh", "sin", "cos", "erf", "ceil", "floor", "round", "trunc", "frac", "acos", "asin", "atan",
         "tan", "sinh", "cosh", "erfc", "lgamma")


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", FLOATS)
def test_foreach_unary(no_fallback, op, dtype):
    cpu, dev = _lists(dtype, 0.1, 3.0)
    _assert_lists_equal(getattr(torch, f"_foreach_{op}")(dev), getattr(torch, f"_foreach_{op}")(cpu))
    getattr(torch, f"_foreach_{op}_")(dev)
    getattr(torch, f"_foreach_{op}_")(cpu)
    _assert_lists_equal(dev, cpu)


def test_foreach_integer_lists(no_fallback):
    gen = torch.Generator().manual_seed(0)
    cpu = [torch.randint(-5, 5, s, generator=gen) for s in ((4,), (2, 3), ())]
    dev = [t.to("dipu") for t in cpu]
    for op, args in (("add_", (3,)), ("mul_", ([1, 2, 3],)), ("abs_", ()), ("neg_", ()), ("maximum_", (0,))):
        getattr(torch, f"_foreach_{op}")(dev, *args)
        getattr(torch, f"_foreach_{op}")(cpu, *args)
    _assert_lists_equal(dev, cpu)
    _assert_lists_equal(torch._foreach_sqrt(dev), torch._foreach_sqrt(cpu))  # integers give floats
    _assert_lists_equal(torch._foreach_div(dev, 2), torch._foreach_div(cpu, 2))


def test_foreach_norm_zero_copy(no_fallback):
    cpu, dev = _lists(torch.float32)
    for ord in (1, 2, 3):
        _assert_lists_equal(torch._foreach_norm(dev, ord), torch._foreach_norm(cpu, ord))
    _assert_lists_equal(torch._foreach_norm(dev, 2, dtype=torch.float64),
                        torch._foreach_norm(cpu, 2, dtype=torch.float64))
    src_cpu, src_dev = _lists(torch.float32, seed=3)
    torch._foreach_copy_(dev, src_dev)
    _assert_lists_equal(dev, src_cpu)
    torch._foreach_zero_(dev)
    _assert_lists_equal(dev, [torch.zeros_like(t) for t in cpu])


def test_foreach_reductions_clone_and_scalar_base(no_fallback):
    cpu, dev = _lists(torch.float32, 0.1, 3.0)
    nonempty = [i for i, t in enumerate(cpu) if t.numel()]
    _assert_lists_equal(torch._foreach_max([dev[i] for i in nonempty]), torch._foreach_max([cpu[i] for i in nonempty]))
    _assert_lists_equal(torch._foreach_powsum(dev, 3), torch._foreach_powsum(cpu, 3))
    _assert_lists_equal(torch._foreach_pow(0.9, dev), torch._foreach_pow(0.9, cpu))
    if hasattr(torch, "_foreach_clone"):  # torch 2.12 and later
        clones = torch._foreach_clone(dev)
        _assert_lists_equal(clones, cpu)
        assert all(c.data_ptr() != d.data_ptr() for c, d in zip(clones, dev) if d.numel())


@pytest.mark.parametrize("norm_type", (2.0, float("inf")))
def test_clip_grad_norm_with_foreach(no_fallback, norm_type):
    torch.manual_seed(0)
    cpu = torch.nn.Linear(6, 3)
    dev = torch.nn.Linear(6, 3).dipu()
    dev.load_state_dict(cpu.state_dict())
    x = torch.randn(5, 6)
    for model, inp in ((cpu, x), (dev, x.to("dipu"))):
        model(inp).square().sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1, norm_type=norm_type, foreach=True)
    _assert_lists_equal([p.grad for p in dev.parameters()], [p.grad for p in cpu.parameters()])


# ---- optimizers ---------------------------------------------------------------------------------------------
OPTIMIZERS = [
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, foreach=True)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, fused=True)),
    (torch.optim.Adam, dict(lr=0.01, foreach=True)),
    (torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1, foreach=True)),
    (torch.optim.Adam, dict(lr=0.01, fused=True)),
    (torch.optim.Adam, dict(lr=0.01, amsgrad=True, maximize=True, fused=True)),
    (torch.optim.Adam, dict(lr=torch.tensor(0.01), fused=True)),
    (torch.optim.AdamW, dict(lr=0.01, foreach=True)),
    (torch.optim.AdamW, dict(lr=0.01, fused=True)),
    (torch.optim.RMSprop, dict(lr=0.01, momentum=0.5, foreach=True)),
    (torch.optim.Adagrad, dict(lr=0.1, foreach=True)),
    (torch.optim.Adagrad, dict(lr=0.1, fused=True)),
    (torch.optim.Adam, dict(lr=0.01, foreach=True, capturable=True)),
    (torch.optim.AdamW, dict(lr=0.01, foreach=True, capturable=True, amsgrad=True)),
]


def _train(device, optimizer, kwargs, steps=3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).to(device)
    opt = optimizer(model.parameters(), **kwargs)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(8, 5, generator=gen).to(device)
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("optimizer, kwargs", OPTIMIZERS, ids=lambda v: getattr(v, "__name__", None) or str(v))
def test_optimizer_step_matches_cpu(no_fallback, optimizer, kwargs):
    # CPU cannot run capturable steps (they keep the step counts on the device); compare with the plain ones
    expected = _train("cpu", optimizer, {k: v for k, v in kwargs.items() if k != "capturable"})
    dipu.reset_fallback_counts()
    actual = _train("dipu", optimizer, kwargs)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-6)


def test_fused_is_offered_for_dipu():
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    assert "dipu" in _get_fused_kernels_supported_devices()


# ---- AMP -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer, kwargs", [
    (torch.optim.SGD, dict(lr=0.05, momentum=0.9, foreach=True)),
    (torch.optim.Adam, dict(lr=0.01, fused=True)),  # fused steps take grad_scale and found_inf
    (torch.optim.AdamW, dict(lr=0.01, foreach=True)),
])
def test_grad_scaler_matches_cpu(no_fallback, optimizer, kwargs):
    def train(device):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2).to(device)
        opt = optimizer(model.parameters(), **kwargs)
        scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 8, growth_interval=2)
        gen = torch.Generator().manual_seed(2)
        for step in range(5):
            x = torch.randn(6, 4, generator=gen).to(device)
            if step == 2:
                x[0, 0] = float("inf")  # a step the scaler skips, backing off the scale
            opt.zero_grad()
            scaler.scale(model(x).square().mean()).backward()
            scaler.step(opt)
            scaler.update()
        return [p.detach().cpu() for p in model.parameters()], scaler.get_scale()

    (expected, expected_scale), (actual, actual_scale) = train("cpu"), train("dipu")
    assert actual_scale == expected_scale
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6)


def test_unscale_and_update_scale_kernels(no_fallback):
    grads = [torch.tensor([1.0, 2.0], device="dipu"), torch.tensor([[4.0]], device="dipu")]
    found_inf = torch.zeros((), device="dipu")
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch.tensor(0.5, device="dipu"))
    assert found_inf.item() == 0 and grads[0].tolist() == [0.5, 1.0] and grads[1].item() == 2.0
    grads[1].fill_(float("nan"))
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch.tensor(0.5, device="dipu"))
    assert found_inf.item() == 1
    scale, tracker = torch.tensor(8.0, device="dipu"), torch.tensor(0, dtype=torch.int32, device="dipu")
    returned = torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 1)
    assert returned is scale and scale.item() == 4.0 and tracker.item() == 0
    torch._amp_update_scale_(scale, tracker, torch.zeros((), device="dipu"), 2.0, 0.5, 1)
    assert scale.item() == 8.0


# ---- random --------------------------------------------------------------------------------------------------
def _probabilities(*shape):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(9)) + 0.05


RANDOM = {
    "rand": lambda d: torch.rand(3, 4, device=d),
    "rand_f64": lambda d: torch.rand(5, dtype=torch.float64, device=d),
    "randn": lambda d: torch.randn(20, device=d),
    "randn_like": lambda d: torch.randn_like(torch.ones(4, 4, device=d)),
    "randint": lambda d: torch.randint(0, 10, (6,), device=d),
    "randint_high": lambda d: torch.randint(10, (2, 3), device=d),
    "randperm": lambda d: torch.randperm(10, device=d),
    "randperm_large": lambda d: torch.randperm(500, device=d),
    "multinomial": lambda d: torch.multinomial(_probabilities(3, 5).to(d), 3),
    "multinomial_replacement": lambda d: torch.multinomial(_probabilities(5).to(d), 8, replacement=True),
    "normal_tensor_tensor": lambda d: torch.normal(torch.zeros(3, 1, device=d), torch.ones(4, device=d)),
    "normal_tensor_float": lambda d: torch.normal(torch.zeros(3, device=d), 2.0),
    "normal_float_tensor": lambda d: torch.normal(1.0, torch.ones(3, device=d)),
    "normal_float_float": lambda d: torch.normal(1.0, 2.0, (3, 2), device=d),
    "normal_out": lambda d: torch.normal(torch.zeros(4, device=d), 1.0, out=torch.empty(4, device=d)),
    "normal_": lambda d: torch.empty(3, 3, device=d).normal_(2.0, 0.5),
    "uniform_": lambda d: torch.empty(3, 3, device=d).uniform_(-1, 1),
    "bernoulli": lambda d: torch.bernoulli(_probabilities(10).clamp(max=1).to(d)),
    "bernoulli_p": lambda d: torch.bernoulli(torch.ones(10, device=d), 0.3),
    "bernoulli_tensor_": lambda d: torch.empty(10, device=d).bernoulli_(_probabilities(10).clamp(max=1).to(d)),
    "bernoulli_float_": lambda d: torch.empty(10, device=d).bernoulli_(0.25),
    "random_": lambda d: torch.empty(10, device=d).random_(),
    "random_to": lambda d: torch.empty(10, dtype=torch.int64, device=d).random_(7),
    "random_from_to": lambda d: torch.empty(10, device=d).random_(3, 9),
    "random_int8": lambda d: torch.empty(10, dtype=torch.int8, device=d).random_(),
    "exponential_": lambda d: torch.empty(10, device=d).exponential_(2.0),
    "geometric_": lambda d: torch.empty(10, device=d).geometric_(0.3),
    "cauchy_": lambda d: torch.empty(10, device=d).cauchy_(),
    "log_normal_": lambda d: torch.empty(10, device=d).log_normal_(),
    "dropout": lambda d: torch.nn.functional.dropout(torch.ones(20, device=d), 0.5),
    "dropout_eval": lambda d: torch.nn.functional.dropout(torch.ones(20, device=d), 0.5, training=False),
    "rrelu_free_ops": lambda d: torch.rand(2, 2, device=d) + torch.randn(2, 2, device=d),
}


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_matches_cpu_for_the_same_seed(no_fallback, name):
    make = RANDOM[name]
    torch.manual_seed(3)
    expected = make("cpu")
    torch.manual_seed(3)
    actual = make("dipu")
    assert actual.device.type == "dipu"
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


def test_random_with_explicit_generators(no_fallback):
    gen = torch.Generator(device="dipu").manual_seed(11)
    first = torch.randn(5, device="dipu", generator=gen)
    gen.manual_seed(11)
    assert torch.equal(torch.randn(5, device="dipu", generator=gen).cpu(), first.cpu())
    cpu = torch.randn(5, generator=torch.Generator().manual_seed(11))
    assert torch.equal(first.cpu(), cpu)
    for draw in (lambda g: torch.randperm(7, device="dipu", generator=g),
                 lambda g: torch.empty(6, device="dipu").exponential_(generator=g),
                 lambda g: torch.multinomial(_probabilities(6).to("dipu"), 2, generator=g),
                 lambda g: torch.normal(torch.zeros(4, device="dipu"), 1.0, generator=g)):
        a = draw(torch.Generator(device="dipu").manual_seed(5))
        b = draw(torch.Generator(device="dipu").manual_seed(5))
        assert torch.equal(a.cpu(), b.cpu())


def test_default_generator_state_advances_and_restores(no_fallback):
    torch.manual_seed(0)
    state = torch.dipu.get_rng_state()
    a = torch.empty(8, device="dipu").cauchy_()
    b = torch.empty(8, device="dipu").cauchy_()
    assert not torch.equal(a.cpu(), b.cpu())
    torch.dipu.set_rng_state(state)
    assert torch.equal(torch.empty(8, device="dipu").cauchy_().cpu(), a.cpu())


def test_random_ops_on_the_second_device(no_fallback):
    torch.manual_seed(4)
    x = torch.empty(6, device="dipu:1").exponential_()
    assert x.device == torch.device("dipu:1")
    torch.manual_seed(4)
    assert torch.equal(x.cpu(), torch.empty(6).exponential_())


DISTRIBUTIONS = {
    "poisson": lambda d: torch.poisson(_probabilities(6).to(d) * 5),
    "binomial": lambda d: torch.binomial(torch.full((6,), 12.0, device=d), _probabilities(6).clamp(max=1).to(d)),
    "gamma": lambda d: torch.distributions.Gamma(_probabilities(5).to(d) * 3, torch.ones(5, device=d)).sample(),
    "beta": lambda d: torch.distributions.Beta(_probabilities(4).to(d) + 1, torch.ones(4, device=d)).sample(),
    "dirichlet": lambda d: torch.distributions.Dirichlet(_probabilities(2, 3).to(d) + 0.5).sample(),
    "rrelu_training": lambda d: torch.nn.functional.rrelu(_probabilities(8).to(d) - 0.6, training=True, inplace=True),
}


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_distributions_match_cpu(no_fallback, name):
    torch.manual_seed(5)
    expected = DISTRIBUTIONS[name]("cpu")
    torch.manual_seed(5)
    torch.testing.assert_close(DISTRIBUTIONS[name]("dipu").cpu(), expected)


def test_reparameterized_gamma_and_dirichlet_gradients(no_fallback):
    grads = []
    for device in ("cpu", "dipu"):
        torch.manual_seed(6)
        concentration = torch.tensor([0.7, 1.5, 3.0], device=device, requires_grad=True)
        (torch.distributions.Gamma(concentration, torch.ones(3, device=device)).rsample().sum()
         + torch.distributions.Dirichlet(concentration).rsample()[0]).backward()
        grads.append(concentration.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])


def test_dropout_backward(no_fallback):
    torch.manual_seed(0)
    x = torch.randn(4, 5, device="dipu", requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.4)
    y.sum().backward()
    kept = y.detach() != 0
    torch.testing.assert_close(x.grad, kept.float() / 0.6)


@pytest.mark.parametrize("dtype, shape", itertools.product(FLOATS, ((4, 4), (0,), ())))
def test_random_fills_keep_dtype_and_shape(no_fallback, dtype, shape):
    for fill in ("normal_", "uniform_", "exponential_", "cauchy_", "log_normal_", "random_"):
        t = getattr(torch.empty(shape, dtype=dtype, device="dipu"), fill)()
        assert t.dtype == dtype and t.shape == shape
