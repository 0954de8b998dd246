"""Comparing dipu with the CPU on PyTorch's test databases: OpInfo samples (forward and backward), ModuleInfo
inputs (forward and backward, train and eval) and OptimizerInfo configurations (a few steps).

Shared by ``python -m dipu conformance`` (dipu/conformance/suites.py) and dipu's own suite
(tests/test_opinfo.py; tests/test_module_info.py through suites.module_verdict). Each comparison raises on a
difference; ``classify`` turns what it raised into a verdict (Note [The conformance certificate] in
dipu/conformance/__init__.py).
"""

from __future__ import annotations

import copy
import os
import re

import torch
from torch.utils._pytree import tree_flatten, tree_map


class DipuError(Exception):
    """The dipu side raised where the CPU side did not (or raised another error)."""

    def __init__(self, dipu_error: BaseException, cpu_error: BaseException | None):
        self.dipu_error, self.cpu_error = dipu_error, cpu_error
        cpu = f"{type(cpu_error).__name__}" if cpu_error is not None else "no error"
        super().__init__(f"dipu raised {type(dipu_error).__name__} ({summary(dipu_error, 200)}); the CPU: {cpu}")


def op_key(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


#: Decorators of an OpInfo under which PyTorch's device-generic tests never run it on a PrivateUse1 device.
NOT_ON_PRIVATEUSE1 = {"onlyCUDA", "onlyCPU", "slowTest"}


def not_on_dipu(op) -> str | None:
    """Why PyTorch's device-generic tests (so tests/test_opinfo.py) never run ``op`` on dipu: a decorator of
    NOT_ON_PRIVATEUSE1 on all its tests (``slowTest`` only without PYTORCH_TEST_WITH_SLOW=1); else None."""
    for decorator in op.decorators:
        if hasattr(decorator, "cls_name"):  # a DecorateInfo: only one for every test, device and dtype counts
            if decorator.cls_name or decorator.test_name or decorator.device_type or decorator.dtypes:
                continue
            names = {getattr(d, "__name__", "") for d in decorator.decorators}
        else:
            names = {getattr(decorator, "__name__", "")}
        if os.environ.get("PYTORCH_TEST_WITH_SLOW") == "1":
            names.discard("slowTest")
        if names & NOT_ON_PRIVATEUSE1:
            return f"the OpInfo's tests are {', '.join(sorted(names & NOT_ON_PRIVATEUSE1))}"
    return None


def to_cpu(x):
    """A CPU leaf copy (same requires_grad); anything else (numbers, dtypes) unchanged."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu").requires_grad_(x.requires_grad)
    return x


def grad_inputs(sample):
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def forward(op, sample):
    result = op(sample.input, *sample.args, **sample.kwargs)
    return sample.output_process_fn_grad(result)


def _both(dipu_call, cpu_call):
    """Runs both sides; a dipu error is a DipuError unless the CPU raised the same type (then None, None)."""
    try:
        actual = dipu_call()
    except Exception as dipu_error:  # noqa: BLE001
        try:
            cpu_call()
        except Exception as cpu_error:  # noqa: BLE001
            if type(cpu_error) is type(dipu_error):
                return None, None  # both refuse: agreement
            raise DipuError(dipu_error, cpu_error) from None
        raise DipuError(dipu_error, None) from None
    return actual, cpu_call()


def compare_forward(test, op, sample):
    cpu_sample = sample.transform(to_cpu)
    actual, expected = _both(lambda: forward(op, sample), lambda: forward(op, cpu_sample))
    test.assertEqual(actual, expected)


def compare_backward(test, op, sample):
    """Gradients of every differentiable input for the same random grad_outputs on both devices; False
    when the sample has nothing differentiable."""
    cpu_sample = sample.transform(to_cpu)
    return _compare_gradients(test, (forward(op, sample), grad_inputs(sample)),
                              (forward(op, cpu_sample), grad_inputs(cpu_sample)))


def _compare_gradients(test, dipu_side, cpu_side) -> bool:
    """Each side is (output, leaves): the gradients of the leaves for the same random grad_outputs over the
    output's differentiable tensors, dipu's compared with the CPU's; False when a side has nothing to
    differentiate (the OpInfo and ModuleInfo backward passes both end here)."""
    results = []
    for output, leaves in (dipu_side, cpu_side):
        outputs = [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        if not outputs or not leaves:
            return False
        gen = torch.Generator().manual_seed(0)
        grads = [torch.randn(t.shape, dtype=t.dtype, generator=gen).to(t.device) for t in outputs]
        results.append(torch.autograd.grad(outputs, leaves, grads, allow_unused=True))
    test.assertEqual(results[0], results[1])
    return True


def _module_pair(module_info, module_input, dtype, training):
    torch.manual_seed(0)
    args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
    cpu_module = module_info.module_cls(*args, **kwargs).to(dtype=dtype)
    dipu_module = copy.deepcopy(cpu_module).to("dipu")
    cpu_module.train(training)
    dipu_module.train(training)
    return dipu_module, cpu_module


def compare_module(test, module_info, module_input, dtype, training: bool, backward: bool):
    """One ModuleInfo input: the module built on the CPU and copied to dipu, the same inputs on both;
    forward outputs, and with ``backward`` the gradients of the parameters and inputs for the same
    random grad_outputs. False when there is nothing to compare (no forward input, nothing differentiable)."""
    if module_input.forward_input is None:
        return False
    dipu_module, cpu_module = _module_pair(module_info, module_input, dtype, training)
    fin = module_input.forward_input

    def to_dipu(x):
        return x.detach().to("dipu").requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x

    cpu_args, cpu_kwargs = tree_map(to_cpu, (fin.args, fin.kwargs))
    dipu_args, dipu_kwargs = tree_map(to_dipu, (cpu_args, cpu_kwargs))
    actual, expected = _both(lambda: dipu_module(*dipu_args, **dipu_kwargs),
                             lambda: cpu_module(*cpu_args, **cpu_kwargs))
    if not backward:
        test.assertEqual(actual, expected)
        return True

    def leaves(module, inputs):
        found = [t for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        return found + [p for p in module.parameters() if p.requires_grad]

    return _compare_gradients(test, (actual, leaves(dipu_module, (dipu_args, dipu_kwargs))),
                              (expected, leaves(cpu_module, (cpu_args, cpu_kwargs))))


def compare_optimizer(test, optim_info, optim_input, dtype, impl: str | None, steps: int = 3):
    """One OptimizerInfo configuration (``impl``: None, "foreach" or "fused"): the same parameters and
    gradients on both devices, ``steps`` steps, the parameters and the optimizer state compared."""
    kwargs = dict(optim_input.kwargs)
    if impl is not None:
        kwargs[impl] = True
    torch.manual_seed(0)
    shapes = [(4, 3), (3,), (2, 2, 2)]
    cpu_params = [torch.randn(s, dtype=dtype).requires_grad_() for s in shapes]
    dipu_params = [p.detach().to("dipu").requires_grad_() for p in cpu_params]

    def make(params):
        return optim_info.optim_cls(params, **kwargs)  # tensor options (lr) stay on the CPU

    dipu_optimizer, cpu_optimizer = _both(lambda: make(dipu_params), lambda: make(cpu_params))
    if dipu_optimizer is None:
        return True
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        grads = [torch.randn(p.shape, dtype=dtype, generator=gen) for p in cpu_params]
        for p, g in zip(cpu_params, grads):
            p.grad = g.clone()
        for p, g in zip(dipu_params, grads):
            p.grad = g.to("dipu")
        closure = (lambda: torch.tensor(1.0)) if optim_info.step_requires_closure else None
        _both(lambda c=closure: dipu_optimizer.step(c), lambda c=closure: cpu_optimizer.step(c))
    test.assertEqual([p.detach() for p in dipu_params], [p.detach() for p in cpu_params])
    return True


_GREATEST = re.compile(r"Greatest (absolute|relative) difference: (\S+) at index .*?\(up to (\S+) allowed\)")


def summary(error: BaseException, limit: int = 400) -> str:
    """The error on one line: type, first line and, for mismatches, the greatest differences."""
    lines = [line.strip() for line in f"{type(error).__name__}: {error}".splitlines() if line.strip()]
    keep = lines[:1] + [line for line in lines[1:] if line.startswith(("Mismatched", "Greatest"))]
    return " | ".join(keep)[:limit]


def classify(error: BaseException | None) -> dict:
    """A verdict from what a comparison raised: agrees, mismatch (with the largest errors and their
    tolerances) or error (the error types on dipu and on the CPU)."""
    if error is None:
        return {"verdict": "agrees"}
    if isinstance(error, DipuError):
        return {"verdict": "error", "dipu_error": type(error.dipu_error).__name__,
                "cpu_error": type(error.cpu_error).__name__ if error.cpu_error is not None else None,
                "detail": summary(error.dipu_error)}
    if isinstance(error, AssertionError):
        found = {kind: (float(value), float(allowed))
                 for kind, value, allowed in _GREATEST.findall(str(error)) if _is_number(value)}
        verdict: dict[str, object] = {"verdict": "mismatch", "detail": summary(error)}
        if found:
            verdict["max_error"] = {kind: value for kind, (value, _) in found.items()}
            verdict["tolerance"] = {kind: allowed for kind, (_, allowed) in found.items()}
        return verdict
    # the comparison itself failed after both sides ran (a result dipu cannot copy, a dtype assertEqual refuses)
    return {"verdict": "error", "dipu_error": type(error).__name__, "cpu_error": None, "detail": summary(error)}


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False
