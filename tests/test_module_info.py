"""PyTorch's own ModuleInfo database on the dipu device, beside OpInfo (tests/test_opinfo.py) and OptimizerInfo
(tests/test_optim_info.py): every module of ``module_db`` built on the CPU and copied to dipu, the same inputs on
both, the outputs compared (forward) and the gradients of the inputs and of every parameter for the same random
grad_outputs (backward), in training mode and, where the module's evaluation mode differs, in evaluation mode.
The comparison is dipu/conformance/compare.py's, which ``python -m dipu conformance`` runs too (Note [The
conformance certificate]); one test is one (module, dtype, pass), the verdict of the inputs it compares.

What runs:
- CI (default): every module, float32, every pass, the first ``DIPU_MODULE_INFO_SAMPLES`` (default 1) inputs
  of each: the quick slice cuts inputs, never modules, so a module missing from dipu's kernels still fails.
- ``DIPU_OPINFO_FULL=1`` (the switch of the OpInfo full run): every input, float32 and float64.
- ``DIPU_MODULE_INFO_MODULES=nn.Linear,nn.Conv2d`` narrows either mode to the named modules.

Expected failures live in tests/module_info_expected_failures.py, each with its reason, and are strict: a listed
(module, dtype, pass) whose compared inputs all agree fails the test.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch
from torch.testing._internal.common_modules import module_db

import dipu  # noqa: F401  (registers the device)
from dipu.conformance.suites import dtype_name, module_passes, module_verdict

sys.path.insert(0, os.path.dirname(__file__))
from module_info_expected_failures import EXPECTED_FAILURES, REASONS  # noqa: E402

FULL = os.environ.get("DIPU_OPINFO_FULL") == "1"
SAMPLE_CAP = None if FULL else int(os.environ.get("DIPU_MODULE_INFO_SAMPLES", "1"))
DTYPES = (torch.float32, torch.float64) if FULL else (torch.float32,)
SELECTED = {name for name in os.environ.get("DIPU_MODULE_INFO_MODULES", "").split(",") if name}
MODULES = [info for info in module_db if not SELECTED or info.name in SELECTED]
_UNKNOWN = SELECTED - {info.name for info in MODULES}
if _UNKNOWN:
    raise ValueError(f"DIPU_MODULE_INFO_MODULES names modules that module_db lacks: {sorted(_UNKNOWN)}")


STATS: dict[str, list[int]] = {}  # "float32 forward train" -> [inputs compared, inputs agreeing]


@pytest.fixture(scope="module", autouse=True)
def _agreement_summary(request):
    """The inputs agreeing per dtype and pass, as tests/test_opinfo.py and the certificate count them."""
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        for name, (compared, agreed) in sorted(STATS.items()):
            if compared:
                reporter.write_line(f"modules {name}: {agreed} of {compared} samples agree with the CPU "
                                    f"({100 * agreed / compared:.2f}%)")


def _cases():
    for info in MODULES:
        for dtype in DTYPES:
            if dtype not in info.supported_dtypes("cpu"):
                continue
            for what, training, backward in module_passes(info):
                yield pytest.param(info, dtype, what, training, backward,
                                   id=f"{info.name}-{dtype_name(dtype)}-{what.replace(' ', '-')}")


def judge(verdict: dict, expected: tuple[str, int] | None, sample_cap: int | None) -> tuple[str, str]:
    """("pass" | "xfail" | "fail", why) for one pass's verdict against its entry of the expected failures."""
    compared = f"{verdict.get('agreed', 0)} of {verdict.get('samples', 0)} inputs agree"
    failed = verdict["verdict"] not in ("agrees", "fallback")
    if expected is None:
        if verdict["verdict"] == "skipped":
            return "fail", f"compared nothing: {verdict.get('reason')}"
        return ("fail", f"{verdict['verdict']} ({compared}): {verdict.get('detail')}") if failed else ("pass", "")
    reason = REASONS.get(expected[0], expected[0])
    if failed:
        return "xfail", f"{reason} ({compared}; {verdict['verdict']}: {verdict.get('detail')})"
    if sample_cap is not None and expected[1] >= sample_cap:
        return "pass", ""  # the failing input is beyond the quick slice
    return "fail", (f"expected failure ({reason}) now passes: {compared}; remove it from "
                    f"tests/module_info_expected_failures.py")


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("info,dtype,what,training,backward", list(_cases()))
def test_module_agrees_with_the_cpu(info, dtype, what, training, backward):
    verdict = module_verdict(info, dtype, training, backward, SAMPLE_CAP)
    totals = STATS.setdefault(f"{dtype_name(dtype)} {what}", [0, 0])
    totals[0] += verdict.get("samples", 0)
    totals[1] += verdict.get("agreed", 0)
    outcome, why = judge(verdict, EXPECTED_FAILURES.get((info.name, dtype_name(dtype), what)), SAMPLE_CAP)
    if outcome == "xfail":
        pytest.xfail(why)
    if outcome == "fail":
        pytest.fail(why)


def test_the_expected_failures_are_strict_and_name_real_passes():
    """An entry names a module, dtype and pass the database has, with a known reason; a listed pass that agrees
    fails, one that fails is an expected failure, an unlisted failure fails."""
    passes = {(info.name, dtype_name(dtype), what) for info in module_db for dtype in (torch.float32, torch.float64)
              for what, _, _ in module_passes(info)}
    assert set(EXPECTED_FAILURES) <= passes, set(EXPECTED_FAILURES) - passes
    assert {reason for reason, _ in EXPECTED_FAILURES.values()} <= set(REASONS)
    agrees = {"verdict": "agrees", "samples": 2, "agreed": 2}
    mismatch = {"verdict": "mismatch", "samples": 2, "agreed": 1, "detail": "AssertionError: not close"}
    assert judge(agrees, None, 1)[0] == "pass"
    assert judge(mismatch, None, 1)[0] == "fail"
    assert judge({"verdict": "skipped", "reason": "no sample"}, None, 1)[0] == "fail"
    assert judge(mismatch, ("reason", 0), 1)[0] == "xfail"
    assert judge(agrees, ("reason", 0), 1) == ("fail", "expected failure (reason) now passes: 2 of 2 inputs "
                                                       "agree; remove it from tests/module_info_expected_failures.py")
    assert judge(agrees, ("reason", 3), 1)[0] == "pass"  # beyond the slice
    assert judge(agrees, ("reason", 3), None)[0] == "fail"


def test_the_quick_slice_covers_every_module():
    """The slice cuts inputs, not modules: every module of the database with a float32 CPU kernel has cases."""
    if SELECTED:
        pytest.skip("narrowed by DIPU_MODULE_INFO_MODULES")
    named = {p.values[0].name for p in _cases()}
    assert named == {info.name for info in module_db if torch.float32 in info.supported_dtypes("cpu")}
    assert len(named) > 100
