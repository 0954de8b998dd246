"""The suites of ``python -m dipu conformance``: what each names as an item, and running one item in a
worker (dipu/conformance/worker.py), one verdict per dtype and pass (Note [The conformance certificate]
in dipu/conformance/__init__.py).

- ``cases``: dipu's own conformance cases (tests/conformance, Note [What a case checks] there), per DIOPI
  function the active op library implements, per dtype of its cases; they are in dipu's source tree.
- ``opinfo``: PyTorch's OpInfo database (``op_db``), forward and, where the op supports autograd, backward.
- ``modules``: ModuleInfo (``module_db``), forward and backward, in training and (where they differ) in
  evaluation mode.
- ``optim``: OptimizerInfo (``optim_db``), every configuration the database lists, with the default,
  foreach and fused implementations the optimizer supports; three steps each.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import time
import warnings
from pathlib import Path

import torch

SUITES = ("cases", "opinfo", "modules", "optim")
DEFAULT_DTYPES = (torch.float32,)
#: dipu's conformance cases, where dipu runs from its source tree.
CASES_DIR = Path(__file__).resolve().parents[2] / "tests"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@functools.lru_cache(None)
def _op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    from dipu.conformance.compare import op_key
    return {op_key(op): op for op in op_db}


@functools.lru_cache(None)
def _module_db():
    from torch.testing._internal.common_modules import module_db

    return {info.name: info for info in module_db}


@functools.lru_cache(None)
def _optim_db():
    from torch.testing._internal.common_optimizers import optim_db

    return {info.optim_cls.__name__: info for info in optim_db}


@functools.lru_cache(None)
def _cases():
    if not (CASES_DIR / "conformance" / "runner.py").is_file():
        return None
    sys.path.insert(0, str(CASES_DIR))
    from conformance.runner import load_cases  # type: ignore[import-not-found]  # tests/, on sys.path above

    return load_cases()


@functools.lru_cache(None)
def _own_lists() -> dict:
    """The expected failures and skips of dipu's own suite (tests/opinfo_expected_failures.py,
    tests/module_info_expected_failures.py), where dipu runs from its source tree; empty where installed."""
    lists: dict = {}
    for suite, name in (("opinfo", "opinfo_expected_failures"), ("modules", "module_info_expected_failures")):
        path = CASES_DIR / f"{name}.py"
        if not path.is_file():
            continue
        spec = importlib.util.spec_from_file_location(f"_dipu_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        lists[suite] = module
    return lists


def expected_failures() -> dict[str, tuple[str, int]]:
    """The failures dipu's own suite expects, keyed as ``certificate.expected_key`` keys them: their reasons and
    the index of the first input that fails."""
    from dipu.conformance.certificate import expected_key

    expected = {}
    for suite, lists in _own_lists().items():
        for (name, dtype, what), (reason, first) in lists.EXPECTED_FAILURES.items():
            expected[expected_key(suite, name, dtype, what)] = (lists.REASONS.get(reason, reason), first)
        for name, reason in getattr(lists, "CRASHES", {}).items():
            expected[expected_key(suite, name)] = (f"kills the process: {reason}", 0)
    return expected


def not_compared(suite: str, name: str) -> str | None:
    """Why dipu's own suite does not compare the item at all (values that differ by design), or None."""
    lists = _own_lists().get(suite)
    return getattr(lists, "SKIPS", {}).get(name) if lists is not None else None


def _library():
    from dipu.kernels.registry import registration

    return registration.library


def names(suite: str) -> tuple[list[str], str | None]:
    """The items of ``suite`` and, when it has none here, why."""
    if suite == "opinfo":
        return list(_op_db()), None
    if suite == "modules":
        return list(_module_db()), None
    if suite == "optim":
        return list(_optim_db()), None
    cases = _cases()
    if cases is None:
        return [], f"dipu's conformance cases are in its source tree ({CASES_DIR / 'conformance'}), not installed"
    library = _library()
    if library is None:
        return [], "no op library: every op runs on the CPU fallback"
    implemented = set()
    layer = library
    while layer is not None:
        implemented |= set(layer.functions)
        layer = layer.base
    return sorted(implemented & set(cases) | (implemented - set(cases))), None


class _Checker:
    """What the comparisons call ``assertEqual`` on: torch's TestCase, with its per-dtype tolerances."""

    @functools.cached_property
    def test(self):
        from torch.testing._internal.common_utils import TestCase

        return TestCase()


CHECK = _Checker()


def _fallback_snapshot() -> dict:
    from dipu.kernels.fallback import fallback_counts

    return dict(fallback_counts())


def _fell_back(before: dict) -> list[str]:
    from dipu.kernels.fallback import fallback_counts

    return sorted(op for op, count in fallback_counts().items() if count > before.get(op, 0))


def _verdict_of(runs, *, samples_cap: int | None) -> dict:
    """Runs the comparisons ``runs`` yields (callables returning False when there was nothing to compare),
    up to ``samples_cap``; the verdict of the first that failed, else agrees (or fallback)."""
    from dipu.conformance.compare import classify

    before = _fallback_snapshot()
    ran = agreed = 0
    first = None
    index = 0
    iterator = iter(runs)
    while samples_cap is None or index < samples_cap:
        try:
            run = next(iterator)
        except StopIteration:
            break
        except Exception as error:  # noqa: BLE001  (making the inputs is part of the check)
            first = first or {**classify(error), "detail": f"making sample {index}: {classify(error).get('detail')}"}
            ran += 1
            break
        try:
            counted = run()
        except Exception as error:  # noqa: BLE001
            counted = True
            if first is None:
                first = {**classify(error), "sample": index}
        else:
            if counted is not False:
                agreed += 1
        if counted is not False:
            ran += 1
        index += 1
    verdict = first or ({"verdict": "agrees"} if ran else {"verdict": "skipped", "reason": "no sample to compare"})
    fell_back = _fell_back(before)
    if fell_back:
        verdict["fallback_ops"] = fell_back
        if verdict["verdict"] == "agrees":
            verdict["verdict"] = "fallback"
    return {**verdict, "samples": ran, "agreed": agreed}


def run_item(suite: str, name: str, dtypes, samples_cap: int | None):
    """Yields one verdict record per dtype and pass of item ``name``."""
    warnings.simplefilter("ignore")
    runner = {"opinfo": _run_opinfo, "modules": _run_module, "optim": _run_optimizer, "cases": _run_cases}[suite]
    reason = not_compared(suite, name)
    if reason:
        yield {"suite": suite, "name": name, **_skipped("*", "*", f"not compared (as in dipu's own suite): {reason}")}
        return
    for record in runner(name, dtypes, samples_cap):
        yield {"suite": suite, "name": name, **record}


def _skipped(dtype, what: str, reason: str) -> dict:
    return {"dtype": dtype_name(dtype) if isinstance(dtype, torch.dtype) else dtype, "pass": what,
            "verdict": "skipped", "reason": reason}


def _run_opinfo(name, dtypes, samples_cap):
    from dipu.conformance.compare import compare_backward, compare_forward, not_on_dipu

    op = _op_db()[name]
    why_not = not_on_dipu(op)
    if why_not:
        yield _skipped("*", "*", f"{why_not}: PyTorch's tests (and dipu's) do not run it on a PrivateUse1 device")
        return
    supported = op.supported_dtypes("cpu")
    for dtype in dtypes:
        if dtype not in supported:
            yield _skipped(dtype, "forward", f"the OpInfo declares no CPU support for {dtype_name(dtype)}")
            continue
        passes = ["forward"] + (["backward"] if op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")
                                else [])
        for what in passes:
            compare = compare_forward if what == "forward" else compare_backward
            started = time.perf_counter()
            samples = op.sample_inputs("dipu:0", dtype, requires_grad=what == "backward")
            runs = (functools.partial(compare, CHECK.test, op, sample) for sample in samples)
            yield {"dtype": dtype_name(dtype), "pass": what, **_verdict_of(runs, samples_cap=samples_cap),
                   "seconds": round(time.perf_counter() - started, 3)}


def module_passes(info) -> list[tuple[str, bool, bool]]:
    """The passes of a ModuleInfo: (name, training, backward); eval only where it differs from train."""
    modes = (True, False) if info.train_and_eval_differ else (True,)
    return [(f"{'backward' if backward else 'forward'} {'train' if training else 'eval'}", training, backward)
            for training in modes for backward in (False, True)]


def module_verdict(info, dtype, training: bool, backward: bool, samples_cap: int | None) -> dict:
    """The verdict of one pass of a ModuleInfo (tests/test_module_info.py shares it)."""
    from dipu.conformance.compare import compare_module

    inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=backward, training=training)
    runs = (functools.partial(compare_module, CHECK.test, info, module_input, dtype, training, backward)
            for module_input in inputs)
    return _verdict_of(runs, samples_cap=samples_cap)


def _run_module(name, dtypes, samples_cap):
    info = _module_db()[name]
    for dtype in dtypes:
        if dtype not in info.supported_dtypes("cpu"):
            yield _skipped(dtype, "forward", f"the ModuleInfo declares no CPU support for {dtype_name(dtype)}")
            continue
        for what, training, backward in module_passes(info):
            started = time.perf_counter()
            yield {"dtype": dtype_name(dtype), "pass": what,
                   **module_verdict(info, dtype, training, backward, samples_cap),
                   "seconds": round(time.perf_counter() - started, 3)}


def _run_optimizer(name, dtypes, samples_cap):
    from dipu.conformance.compare import compare_optimizer

    info = _optim_db()[name]
    for dtype in dtypes:
        impls = [None] + [impl for impl in ("foreach", "fused") if impl in info.supported_impls]
        for impl in impls:
            what = impl or "default"
            if info.only_supports_sparse_grads:
                yield _skipped(dtype, what, "takes sparse gradients only")
                continue
            started = time.perf_counter()
            configs = info.optim_inputs_func(device="cpu", dtype=dtype)
            runs = (functools.partial(compare_optimizer, CHECK.test, info, config, dtype, impl) for config in configs)
            yield {"dtype": dtype_name(dtype), "pass": what, **_verdict_of(runs, samples_cap=None),
                   "seconds": round(time.perf_counter() - started, 3)}


def _run_cases(name, dtypes, samples_cap):
    from conformance.runner import FALLBACK, run_case  # tests/, on sys.path by _cases
    from conformance.skips import SKIPS  # type: ignore[import-not-found]

    from dipu.conformance.compare import classify

    library = _library()
    reason = SKIPS.get(_layer_of(library, name), {}).get(name)
    cases = _cases().get(name, [])
    if reason or not cases:
        yield _skipped("*", "cases", reason or "no conformance case for it")
        return
    function = library.get(name)
    declared = library.supported_dtypes(name)
    wanted = {dtype_name(d) for d in dtypes} if dtypes else None
    by_dtype: dict[str, list] = {}
    for case in cases:
        by_dtype.setdefault(dtype_name(case.dtype), []).append(case)
    for dtype, group in sorted(by_dtype.items()):
        if wanted is not None and dtype not in wanted:
            continue
        if declared is not None and group[0].dtype not in declared:
            yield _skipped(dtype, "cases", f"the op library declares no {dtype} for {name}")
            continue
        started = time.perf_counter()
        first, agreed, fallbacks = None, 0, 0
        for case in group:
            try:
                if run_case(function, case) is FALLBACK:
                    fallbacks += 1
                agreed += 1
            except Exception as error:  # noqa: BLE001
                first = first or {**classify(error), "case": case.label}
        verdict = first or {"verdict": "fallback" if fallbacks == len(group) else "agrees"}
        if fallbacks:
            verdict["fallback_cases"] = fallbacks
        yield {"dtype": dtype, "pass": "cases", **verdict, "samples": len(group), "agreed": agreed,
               "seconds": round(time.perf_counter() - started, 3)}


def _layer_of(library, name: str) -> str | None:
    while library is not None:
        if name in library.functions:
            return library.name
        library = library.base
    return None
