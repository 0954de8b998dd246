"""``python -m dipu conformance`` (dipu/conformance, Note [The conformance certificate]): a vendor library with a
wrong kernel and a crashing one gets a certificate naming each, every other op agreeing; a resumed run with a
baseline says what regressed in its exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from test_report import REPO, SLOW_WRONG, library_env


def conformance(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dipu", "conformance", *args], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=600, cwd=REPO)


def test_the_certificate_names_the_wrong_kernel_and_the_crashing_one(tmp_path):
    env = {**library_env(tmp_path, "slow_wrong", SLOW_WRONG), "DIPU_REPORT": ""}
    out = tmp_path / "cert"
    args = ["--suites", "opinfo,modules,optim", "--ops", "abs,add,exp,mul,nn.Linear,SGD", "--samples", "2",
            "-o", str(out)]
    result = conformance(args, env)
    assert result.returncode == 0, result.stdout + result.stderr
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

    # resumed: nothing runs again; against a baseline in which exp agreed, exp regressed (exit status 1)
    baseline = dict(certificate, verdicts=[dict(r, verdict="agrees") if r["name"] == "exp" else r
                                           for r in certificate["verdicts"]])
    (tmp_path / "baseline.json").write_text(json.dumps(baseline))
    again = conformance([*args, "--baseline", str(tmp_path / "baseline.json")], env)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "regressed: opinfo:exp:float32:forward: agrees -> mismatch" in again.stdout
    assert json.loads((out / "certificate.json").read_text())["wall_s"] < 30  # resumed from the journal
