"""Runs conformance cases against an op library; see Note [What a case checks]."""

from __future__ import annotations

import collections
import importlib
import pathlib

import torch

from conformance.spec import Case, T
from dipu.diopi.proto import FUNCTIONS, Kind
from dipu.diopi import SUCCESS, Status
from dipu.kernels.support import contexts

DEVICE = 0
#: Totals printed at the end of the pytest session (tests/conftest.py).
STATS = collections.Counter()


def load_cases() -> dict[str, list[Case]]:
    """Every case from tests/conformance/cases_*.py, by DIOPI function."""
    by_function: dict[str, list[Case]] = collections.defaultdict(list)
    for path in sorted(pathlib.Path(__file__).parent.glob("cases_*.py")):
        module = importlib.import_module(f"conformance.{path.stem}")
        for case in module.CASES:
            if case.function not in FUNCTIONS:
                raise ValueError(f"{path.name}: {case.function} is not declared in the DIOPI proto")
            by_function[case.function].append(case)
    return dict(by_function)


def _build(value, dtype, gen):
    """(cpu value, dipu value) for one argument."""
    if isinstance(value, T):
        base, view = value.base_and_view(dtype, gen)
        return view(base), view(base.to(f"dipu:{DEVICE}"))
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, T) for v in value):
        pairs = [_build(v, dtype, gen) for v in value]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return value, value


def _clone(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
        return [v.clone() for v in value]
    return value


def _tolerances(case: Case, dtype: torch.dtype) -> dict:
    if case.rtol is None and case.atol is None:
        return {}
    return {"rtol": case.rtol or 0.0, "atol": case.atol or 0.0}


def _compare(what: str, actual, expected, case: Case) -> None:
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), f"{what}: length differs"
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(f"{what}[{i}]", a, e, case)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected, f"{what}: {actual!r} != {expected!r}"
        return
    assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual).__name__}"
    assert actual.device.type == "dipu", f"{what}: result is on {actual.device}, not dipu"
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, msg=lambda m: f"{what}: {m}",
                               **_tolerances(case, expected.dtype))


def _expect_refusal(function, case: Case, declared, dev: dict, reference_error: Exception) -> None:
    """The CPU reference refused these inputs: the function must refuse them too."""
    call = [dev.get(p.name, [None] if p.kind.is_allocated else None) for p in declared.params]
    try:
        status = function(contexts[DEVICE], *call)
    except Exception:  # noqa: BLE001  (refused, as the reference was)
        return
    assert status != SUCCESS, f"succeeded where the CPU reference raised {type(reference_error).__name__}: " \
                              f"{reference_error}"


FALLBACK = "left to the CPU fallback"


def run_case(function, case: Case) -> str | None:
    """Call `function` (from an op library) for `case`; raises AssertionError on any mismatch. Returns
    FALLBACK where a C library answered that the CPU fallback should run the case."""
    declared = FUNCTIONS[case.function]
    gen = torch.Generator().manual_seed(case.seed)
    built = {name: _build(value, case.dtype, gen) for name, value in case.args.items()}
    cpu = {name: pair[0] for name, pair in built.items()}
    dev = {name: pair[1] for name, pair in built.items()}
    reference_args = {name: _clone(value) for name, value in cpu.items()}
    torch.manual_seed(case.seed)
    try:
        expected = case.reference(**reference_args)
    except Exception as error:  # noqa: BLE001  (a case may expect the call to be refused)
        _expect_refusal(function, case, declared, dev, error)
        return None

    missing_outputs = [p for p in declared.params if p.kind.is_output and p.name not in case.args]
    expected_by_name = {}
    if missing_outputs:  # the reference's results, in proto order (in-place ones are compared below)
        if len(missing_outputs) == 1 and not isinstance(expected, (tuple, list)):
            expected = (expected,)
        assert isinstance(expected, (tuple, list)) and len(expected) == len(missing_outputs), (
            f"case error: the reference must return {len(missing_outputs)} output(s) "
            f"({', '.join(p.name for p in missing_outputs)})")
        expected_by_name = dict(zip((p.name for p in missing_outputs), expected))

    call = []
    for param in declared.params:
        if param.name in dev:
            call.append(dev[param.name])
        elif param.kind.is_allocated:
            call.append([None])
        elif param.kind == Kind.TENSOR_OUT:
            want = expected_by_name[param.name]
            call.append(None if want is None else
                        torch.empty(want.shape, dtype=want.dtype, device=f"dipu:{DEVICE}"))
        elif param.optional:
            call.append(None)
        else:
            raise AssertionError(f"case error: no value for required parameter {param.name}")
    torch.manual_seed(case.seed)
    status = function(contexts[DEVICE], *call)
    if status == Status.FORCE_FALLBACK and hasattr(function, "c_address"):
        # A C library declares no dtypes (Note [Declared dtypes]): it answers the CPU fallback for the
        # inputs it does not take (dtype, layout), which is the fallback's to get right, not its own.
        STATS["skipped cases"] += 1
        return FALLBACK
    assert status == SUCCESS, f"returned {Status(status).text if status in Status._value2member_map_ else status}"

    for param, value in zip(declared.params, call):
        if param.name in expected_by_name:
            if expected_by_name[param.name] is not None:
                actual = value[0] if param.kind.is_allocated else value
                _compare(f"output {param.name}", actual, expected_by_name[param.name], case)
        elif param.kind.is_output:
            _compare(f"in-place {param.name}", value, reference_args[param.name], case)
        elif param.kind.is_tensor and isinstance(cpu.get(param.name), (torch.Tensor, list)):
            original = cpu[param.name]
            actual = value.cpu() if isinstance(value, torch.Tensor) else [v.cpu() for v in value]
            torch.testing.assert_close(actual, original, rtol=0, atol=0, equal_nan=True,
                                       msg=lambda m: f"input {param.name} was modified: {m}")
    return None
