import os
import subprocess
import sys
import textwrap

import pytest

import dipu  # noqa: F401  (registers the device even with autoload disabled)


#: For tests of the sim vendor itself (its name, its capacity, its methods) while the suite runs
#: on another vendor (DIPU_VENDOR=refc pytest).
sim_only = pytest.mark.skipif(dipu.vendor().name != "sim",
                              reason="checks the sim vendor itself (its name, capacity or test methods)")


def run_python(code: str, env: dict | None = None, cwd=None, check: bool = True):
    """Run `code` in a fresh interpreter; returns the CompletedProcess.

    A child given a sim switch (DIPU_SIM_*) and no vendor runs on sim, whatever vendor the suite
    runs on: the switch is what it tests.
    """
    env = dict(env or {})
    if any(name.startswith("DIPU_SIM_") for name in env):
        env.setdefault("DIPU_VENDOR", "sim")
    full_env = {**os.environ, **env}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def python():
    return run_python


def pytest_terminal_summary(terminalreporter):
    """Conformance totals (tests/test_conformance.py), when that suite ran."""
    import sys

    runner = sys.modules.get("conformance.runner")
    if runner is None or not runner.STATS:
        return
    s = runner.STATS
    terminalreporter.write_line(
        f"conformance: {s['functions']} functions, {s['cases']} cases, {s['passed']} passed, "
        f"{s['failed']} failed, {s['skipped cases']} cases skipped (undeclared dtypes), "
        f"{s['skipped functions']} functions skipped (tests/conformance/skips.py)")
