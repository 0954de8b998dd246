import collections
import inspect
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import dipu  # noqa: F401  (registers the device even with autoload disabled)


#: For tests of the sim vendor itself (its name, its capacity, its methods) while the suite runs
#: on another vendor (DIPU_VENDOR=refc pytest).
sim_only = pytest.mark.skipif(dipu.vendor().name != "sim",
                              reason="checks the sim vendor itself (its name, capacity or test methods)")


#: The torch device whose kernels and generator compute dipu's numbers ("cpu" on the sim and refc vendors,
#: "cuda" on the CUDA vendor): a test that checks dipu against the CPU bit for bit holds only where it is "cpu".
NATIVE_DEVICE = dipu.vendor().native_device_type or "cpu"


#: Note [Tests on a vendor with one device]
#: The suite is written for the sim vendor's two devices. Where the vendor has one (DIPU_VENDOR=cuda on a
#: one-GPU machine, or DIPU_SIM_DEVICE_COUNT=1), a test whose code names a second device is skipped with
#: that reason instead of failing on the index: its code is searched for these spellings of device 1.
SECOND_DEVICE = re.compile(
    r'dipu:1\b|"dipu", 1\b|device_index=1\b|for (index|device|d|i) in \(0, 1\)|'
    r'\b(dipu|device|set_device|synchronize|get_device_properties|get_device_name|get_device_capability|Stream|'
    r'default_stream|current_stream|mem_get_info|memory_\w+|max_memory_\w+|reset_\w+|empty_cache|'
    r'get_rng_state|set_rng_state|default_generator|exchange_device)\(1\)')


def pytest_collection_modifyitems(config, items):
    count = torch.dipu.device_count()
    if count >= 2:
        return
    skip = pytest.mark.skip(reason=f"needs a second dipu device; vendor '{dipu.vendor().name}' has {count} here "
                                   "(Note [Tests on a vendor with one device])")
    for item in items:
        function = getattr(item, "function", None)
        try:
            source = inspect.getsource(function) if function is not None else ""
        except (OSError, TypeError):
            continue
        if SECOND_DEVICE.search(source):
            item.add_marker(skip)


def run_python(code: str, env: dict | None = None, cwd=None, check: bool = True):
    """Run `code` in a fresh interpreter; returns the CompletedProcess.

    A child given a sim switch (DIPU_SIM_*) and no vendor runs on sim, whatever vendor the suite
    runs on: the switch is what it tests. On a machine where torch has a GPU, a child of a suite run
    without DIPU_VENDOR gets DIPU_VENDOR=sim, so that plain `import torch` loads dipu there as elsewhere.
    """
    env = dict(env or {})
    if any(name.startswith("DIPU_SIM_") for name in env):
        env.setdefault("DIPU_VENDOR", "sim")
    if torch.cuda.is_available() and not os.environ.get("DIPU_VENDOR"):
        # where torch has a GPU, plain `import torch` activates dipu only when asked (Note [Who activates dipu])
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


#: Conformance totals the pytest-xdist workers sent (pyproject.toml runs the suite under it).
_WORKER_CONFORMANCE: collections.Counter = collections.Counter()


def _conformance_stats() -> collections.Counter:
    runner = sys.modules.get("conformance.runner")
    return collections.Counter(runner.STATS) if runner is not None else collections.Counter()


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # an xdist worker: hand the totals to the controller
        session.config.workeroutput["conformance"] = dict(_conformance_stats())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _WORKER_CONFORMANCE.update(getattr(node, "workeroutput", {}).get("conformance", {}))


def pytest_terminal_summary(terminalreporter):
    """Conformance totals (tests/test_conformance.py), when that suite ran: in this process, or in xdist's
    workers."""
    s = _conformance_stats() or _WORKER_CONFORMANCE
    if not s:
        return
    terminalreporter.write_line(
        f"conformance: {s['functions']} functions, {s['cases']} cases, {s['passed']} passed, "
        f"{s['failed']} failed, {s['skipped cases']} cases skipped (undeclared dtypes), "
        f"{s['skipped functions']} functions skipped (tests/conformance/skips.py)")
