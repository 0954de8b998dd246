"""``python -m dipu conformance`` (dipu/conformance, Note [The conformance certificate]): a vendor library with a
wrong kernel and a crashing one gets a certificate naming each, every other op agreeing; a resumed run with a
baseline says what regressed in its exit status; dipu's own expected failures are reported as such."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from dipu.conformance import certificate as certificates
from dipu.conformance import suites
from dipu.conformance.compare import not_on_dipu, op_key
from test_report import REPO, SLOW_WRONG, library_env, needs_chromium, screenshot

ARGS = ["--suites", "opinfo,modules,optim", "--ops", "abs,add,exp,mul,nn.Linear,SGD", "--samples", "2"]


def conformance(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dipu", "conformance", *args], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=600, cwd=REPO)


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    """The certificate of the library with a wrong diopiExp and a diopiAbs that aborts: (run, env, directory)."""
    tmp = tmp_path_factory.mktemp("certificate")
    env = {**library_env(tmp, "slow_wrong", SLOW_WRONG), "DIPU_REPORT": ""}
    result = conformance([*ARGS, "-o", str(tmp / "cert")], env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result, env, tmp / "cert"


def test_the_certificate_names_the_wrong_kernel_and_the_crashing_one(certified):
    result, _, out = certified
    certificate = json.loads((out / "certificate.json").read_text())
    verdicts = {(r["suite"], r["name"], r["pass"]): r for r in certificate["verdicts"]}
    assert verdicts["opinfo", "abs", "*"]["verdict"] == "crash"
    assert "the worker died" in verdicts["opinfo", "abs", "*"]["detail"]
    wrong = verdicts["opinfo", "exp", "forward"]
    assert wrong["verdict"] == "mismatch" and wrong["max_error"]["absolute"] > wrong["tolerance"]["absolute"]
    others = {key: r["verdict"] for key, r in verdicts.items() if key[1] not in ("abs", "exp")}
    assert set(others.values()) == {"agrees"}, others
    assert {("opinfo", "mul", "backward"), ("modules", "nn.Linear", "backward train"),
            ("optim", "SGD", "foreach"), ("optim", "SGD", "fused")} <= others.keys()
    assert "dipu conformance certificate" in result.stdout and "crash: opinfo abs" in result.stdout
    html = (out / "certificate.html").read_text()
    assert "crash" in html and "vendor: sim" in html


def test_a_resumed_run_against_a_baseline_says_what_regressed(certified, tmp_path):
    """Resumed, nothing runs again; against a baseline in which exp and abs agreed pass by pass, exp's mismatch
    and abs's crash (a verdict about the whole op) regressed, and the exit status is 1."""
    _, env, out = certified
    certificate = json.loads((out / "certificate.json").read_text())
    agreeing = [dict(r, verdict="agrees") for r in certificate["verdicts"] if r["name"] == "exp"]
    agreeing += [dict(r, name="abs", verdict="agrees") for r in agreeing]
    baseline = dict(certificate, verdicts=[r for r in certificate["verdicts"] if r["name"] not in ("abs", "exp")]
                    + agreeing)
    (tmp_path / "baseline.json").write_text(json.dumps(baseline))
    again = conformance([*ARGS, "-o", str(out), "--baseline", str(tmp_path / "baseline.json")], env)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "regressed: opinfo:exp:float32:forward: agrees -> mismatch" in again.stdout
    assert "regressed: opinfo:abs:float32:backward: agrees -> crash" in again.stdout
    assert "against the baseline: 4 regressed, 0 improved" in again.stdout
    assert json.loads((out / "certificate.json").read_text())["wall_s"] < 30  # resumed from the journal


def test_a_baseline_that_is_not_a_certificate_is_refused_before_the_run(tmp_path):
    (tmp_path / "report.json").write_text(json.dumps({"kind": "report"}))
    for name, message in (("report.json", "is not a dipu conformance certificate"), ("missing.json", "cannot read")):
        result = conformance(["--suites", "optim", "--ops", "SGD", "-o", str(tmp_path / "cert"),
                              "--baseline", str(tmp_path / name)], {})
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert not (tmp_path / "cert" / "journal.jsonl").exists()  # refused before running anything


def _record(name: str, verdict: str, what: str = "forward") -> dict:
    return {"suite": "opinfo", "name": name, "dtype": "float32", "pass": what, "verdict": verdict, "samples": 1,
            "agreed": int(verdict == "agrees")}


def test_an_expected_failure_is_reported_as_such_and_is_no_regression():
    expected = {certificates.expected_key("opinfo", "exp", "float32", "forward"): ("a known rounding", 0),
                certificates.expected_key("opinfo", "abs"): ("kills the process: a known bug", 0),
                certificates.expected_key("opinfo", "add", "float32", "forward"): ("was wrong once", 0),
                certificates.expected_key("opinfo", "mul", "float32", "forward"): ("fails from input 5 on", 5)}
    records = [_record("exp", "mismatch"), _record("exp", "mismatch", "backward"), _record("add", "agrees"),
               {**_record("abs", "crash"), "dtype": "*", "pass": "*"}, _record("mul", "agrees")]
    baseline = {"verdicts": [_record(name, "agrees", what) for name in ("exp", "abs")
                             for what in ("forward", "backward")]}
    certificate = certificates.build(records, settings={}, environment=[], not_here={}, baseline=baseline,
                                     finished="now", wall_s=1.0, expected=expected)
    verdicts = {(r["name"], r["pass"]): r for r in certificate["verdicts"]}
    assert verdicts["exp", "forward"]["verdict"] == "expected failure"
    assert (verdicts["exp", "forward"]["was"], verdicts["exp", "forward"]["expected"]) == ("mismatch",
                                                                                           "a known rounding")
    assert verdicts["abs", "*"]["verdict"] == "expected failure"  # an item-wide entry covers its crash
    assert verdicts["exp", "backward"]["verdict"] == "mismatch"  # not listed
    assert certificate["summary"]["opinfo"]["expected failure"] == 2
    assert [row["key"] for row in certificate["comparison"]["regressed"]] == ["opinfo:exp:float32:backward"]
    lines = "\n".join(certificates.summary_lines(certificate))
    # add compared the input listed as failing and agreed; mul did not reach it
    assert "expected failures (dipu's own lists, not regressions): 2; listed but agreeing now: opinfo add float32 " \
           "forward\n" in lines + "\n"


def test_the_certificate_reads_dipus_own_lists():
    """The entries of tests/opinfo_expected_failures.py and tests/module_info_expected_failures.py, and the
    OpInfo ops dipu's suite does not compare (uninitialized memory), which the certificate skips too."""
    sys.path.insert(0, str(REPO / "tests"))
    import module_info_expected_failures
    import opinfo_expected_failures

    expected = suites.expected_failures()
    for (name, dtype, what), (reason, first) in opinfo_expected_failures.EXPECTED_FAILURES.items():
        assert expected[certificates.expected_key("opinfo", name, dtype, what)] == \
            (opinfo_expected_failures.REASONS[reason], first)
    for name, dtype, what in module_info_expected_failures.EXPECTED_FAILURES:
        assert certificates.expected_key("modules", name, dtype, what) in expected
    assert "uninitialized memory" in suites.not_compared("opinfo", "empty")
    assert suites.not_compared("opinfo", "add") is None
    records = list(suites.run_item("opinfo", "empty_like", [torch.float32], 1))
    assert [(r["verdict"], r["dtype"], r["pass"]) for r in records] == [("skipped", "*", "*")]


def test_the_certificate_runs_the_opinfos_dipus_suite_runs():
    """OpInfos whose tests PyTorch runs on CUDA only, on the CPU only or as slow tests are not instantiated for
    dipu in tests/test_opinfo.py; the certificate skips them too, so that its figures are the suite's."""
    from torch.testing._internal.common_methods_invocations import op_db

    skipped = {op_key(op) for op in op_db if not_on_dipu(op)}
    present = {op_key(op) for op in op_db}  # bmm.triton_optimized is newer than torch 2.11
    expected = {"jiterator_unary", "bmm.triton_optimized", "sparse.mm.reduce", "linalg.pinv.singular"} & present
    assert len(expected) >= 3 and expected <= skipped
    assert not {"add", "aminmax", "roll", "nn.functional.conv2d"} & skipped
    records = list(suites.run_item("opinfo", "jiterator_unary", [torch.float32], 1))
    assert [(r["verdict"], r["dtype"]) for r in records] == [("skipped", "*")] and "onlyCUDA" in records[0]["reason"]


@needs_chromium
def test_the_certificate_opens_in_chromium(certified, tmp_path):
    data = screenshot(certified[2] / "certificate.html", "certificate.png", tmp_path, (1400, 1500))
    assert len(data) > 40_000  # a blank page is a few kB
