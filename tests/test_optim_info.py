"""PyTorch's own OptimizerInfo database on the dipu device: every configuration against the CPU.

Each optimizer of `optim_db`, with every configuration its `optim_inputs_func` lists, once with each of
the implementations it supports (the for-loop, `foreach=True`, `fused=True`, `differentiable=True`, made as
PyTorch's own `TestOptimRenewed` makes them), takes three steps on a weight and a bias on dipu and the same
three on the CPU, each step through a closure that recomputes the loss and its gradients. The parameters and
every tensor of the optimizer's state must then agree with the CPU's (`TestCase.assertEqual`, torch's
per-dtype tolerances; on the sim and refc vendors they are ATen's CPU kernels on the same memory, so they
agree bit for bit).

This is the differential test of the op libraries' optimizer kernels (the fused and foreach functions of
`diopi_impl/torch_cpp/` and `diopi_impl/torch/`, and the trampoline that hands them their lists): a twin
that diverges from the CPU fails here. The configurations include a tensor learning rate beside a float one
and momentum on and off; `fused=True` with a CPU tensor lr and no momentum once moved nothing (a run of
lists passed its last, empty list's length; Note [The C form of a proto function]).

`DIPU_OPTIM_INFO_DTYPES=float32,float64,bfloat16` widens the dtypes (CI: float32).
"""

import copy
import os

import pytest
import torch
from torch.testing._internal.common_optimizers import optim_db
from torch.testing._internal.common_utils import TestCase

import dipu  # noqa: F401  (registers the device)

DTYPES = tuple(getattr(torch, name) for name in os.environ.get("DIPU_OPTIM_INFO_DTYPES", "float32").split(","))
STEPS = 3

#: Optimizers this test cannot drive as it drives the rest, each with its reason.
SKIPPED = {"SparseAdam": "takes sparse gradients only; its kernels are covered by tests/test_sparse.py"}


def _configs(info):
    """Every configuration of ``info`` with each implementation flag it supports set alone, beside the for-loop
    with all of them off, as `_get_optim_inputs_including_global_cliquey_kwargs` makes them for a device that
    has both foreach and fused kernels: dipu has foreach kernels, and fused ones wherever the CPU has (its
    fused functions run the CPU's). The helper itself drops foreach for the CPU, so the variants are made here."""
    flags = [f for f in info.supported_impls if f != "fused" or "cpu" in info.supports_fused_on]
    configs = []
    for config in info.optim_inputs_func("cpu"):
        base = {**config.kwargs, **dict.fromkeys(flags, False)}
        configs += [base] + [{**base, flag: True} for flag in flags]
    return configs


def _cases():
    for info in optim_db:
        name = info.optim_cls.__name__
        for dtype in DTYPES:
            if name in SKIPPED:
                yield pytest.param(info, None, dtype, id=f"{name}-{dtype}",
                                   marks=pytest.mark.skip(reason=SKIPPED[name]))
                continue
            for k, config in enumerate(_configs(info)):
                flags = "-".join(f for f in ("foreach", "fused", "differentiable") if config.get(f))
                case = f"{name}-{k}-{flags or 'loop'}-{dtype}".replace("torch.", "")
                yield pytest.param(info, config, dtype, id=case)


def _steps(info, kwargs, device, dtype):
    """The parameters and the optimizer's state after STEPS closure steps on ``device``."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(4, 3, generator=generator, dtype=dtype)
    bias = torch.randn(3, generator=generator, dtype=dtype)
    inputs = torch.randn(5, 4, generator=generator, dtype=dtype)
    target = torch.randn(5, 3, generator=generator, dtype=dtype)
    params = [weight.to(device).requires_grad_(), bias.to(device).requires_grad_()]
    inputs, target = inputs.to(device), target.to(device)
    kwargs = copy.deepcopy(kwargs)  # a tensor lr or betas stay on the CPU, as a user passes them
    optimizer = info.optim_cls(params, **kwargs)

    def closure():
        optimizer.zero_grad()
        loss = (inputs @ params[0] + params[1] - target).square().mean()
        loss.backward()
        return loss

    for _ in range(STEPS):
        optimizer.step(closure)
    state = [(key, value) for p in params for key, value in sorted(optimizer.state[p].items())
             if isinstance(value, torch.Tensor)]
    return [p.detach().cpu() for p in params], [(key, value.cpu()) for key, value in state]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("info,config,dtype", list(_cases()))
def test_optimizer_configuration_agrees_with_the_cpu(info, config, dtype):
    try:
        expected_params, expected_state = _steps(info, config, "cpu", dtype)
    except Exception as error:  # differentiable=True on leaf parameters: dipu refuses it as the CPU does
        with pytest.raises(type(error)):
            _steps(info, config, "dipu", dtype)
        return
    params, state = _steps(info, config, "dipu", dtype)
    check = TestCase()
    check.assertEqual(params, expected_params, msg=f"{info.optim_cls.__name__}({config}): parameters")
    assert [key for key, _ in state] == [key for key, _ in expected_state]
    for (key, value), (_, expected) in zip(state, expected_state):
        check.assertEqual(value, expected, msg=f"{info.optim_cls.__name__}({config}): state {key!r}")


def test_every_optimizer_of_the_database_is_compared():
    """The database is not silently empty or filtered away: every optimizer but the skipped has cases, and the
    fused variants with a tensor lr and without momentum (the configuration that once diverged) are among them."""
    cases = [p.values for p in _cases() if not p.marks]
    names = {info.optim_cls.__name__ for info, _, _ in cases}
    assert names == {info.optim_cls.__name__ for info in optim_db} - set(SKIPPED)
    assert any(info.optim_cls is torch.optim.SGD and config.get("fused")
               and isinstance(config.get("lr"), torch.Tensor) and not config.get("momentum")
               for info, config, _ in cases)
