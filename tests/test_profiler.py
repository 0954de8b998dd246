"""torch.profiler with the PrivateUse1 activity: a device timeline from the vendor's events, device
memory for profile_memory=True, kernels in the Chrome trace (Note [Device timeline])."""

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import dipu

pytestmark = pytest.mark.skipif(not dipu._C.has_device_timeline(),
                                reason="this torch's Kineto has no profiler plugin API (Note [Device timeline])")

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def run_profiled(**kwargs):
    a = torch.randn(128, 128, device="dipu")
    b = torch.randn(128, 128, device="dipu")
    with profile(activities=ACTIVITIES, **kwargs) as prof:
        for _ in range(3):
            c = a @ b
            d = (c + 1).relu()
    del c, d
    return prof


def test_mm_gets_device_time_from_vendor_events():
    prof = run_profiled()
    averages = {e.key: e for e in prof.key_averages()}
    mm = averages["aten::mm"]
    assert mm.count == 3
    assert mm.device_time_total > 0
    kernel = averages["dipu kernel: aten::mm"]
    assert kernel.count == 3 and kernel.device_type == torch.autograd.DeviceType.PrivateUse1
    # The kernel time is the op's device time: never more than the op took on the CPU
    # (the simulated vendor executes synchronously).
    assert 0 < kernel.device_time_total <= mm.cpu_time_total * 1.05 + 50
    assert averages["aten::matmul"].device_time_total >= mm.device_time_total  # children's kernels count
    assert averages["aten::relu"].device_time_total > 0


def test_cpu_only_ops_get_no_device_time():
    x = torch.randn(64, 64)
    with profile(activities=ACTIVITIES) as prof:
        torch.mm(x, x)
    assert all(e.device_time_total == 0 for e in prof.key_averages())
    assert not any(e.key.startswith("dipu kernel") for e in prof.key_averages())


def test_profile_memory_reports_dipu_device_memory():
    prof = run_profiled(profile_memory=True)
    mm = {e.key: e for e in prof.key_averages()}["aten::mm"]
    assert mm.self_device_memory_usage == 3 * 128 * 128 * 4  # three 64 KiB outputs
    assert mm.self_cpu_memory_usage == 0


def test_chrome_trace_contains_device_kernels(tmp_path):
    prof = run_profiled()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    ops = {e["args"]["External id"]: e for e in events
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    mm_kernels = [k for k in kernels if k["name"] == "dipu kernel: aten::mm"]
    assert len(mm_kernels) == 3
    mm_ops = [e for e in ops.values() if e["name"] == "aten::mm"]
    for kernel in mm_kernels:
        assert ops[kernel["args"]["External id"]]["name"] == "aten::mm" and kernel["dur"] > 0
        # on the timeline of the dipu aten::mm that launched it
        assert any(op["ts"] <= kernel["ts"] <= op["ts"] + op["dur"] for op in mm_ops)
    assert any(e.get("ph") == "M" and e.get("args", {}).get("name") == "dipu" for e in events)


@pytest.mark.skipif(dipu.runtime.plugin_of(dipu.vendor()) is not None,
                    reason="a C plug-in's tracing hooks are called by the core, not through Python "
                           "(tests/test_runtime_plugin.py covers them)")
def test_vendor_tracing_hooks_are_called(monkeypatch):
    calls = []
    vendor = dipu.vendor()
    monkeypatch.setattr(type(vendor), "start_tracing", lambda self: calls.append("start"), raising=False)
    monkeypatch.setattr(type(vendor), "stop_tracing", lambda self: calls.append("stop"), raising=False)
    run_profiled()
    assert calls == ["start", "stop"]


def test_second_profile_is_independent():
    first = {e.key: e.count for e in run_profiled().key_averages()}
    second = {e.key: e.count for e in run_profiled().key_averages()}
    assert first["dipu kernel: aten::mm"] == second["dipu kernel: aten::mm"] == 3


def test_profile_step_joins_both_sides_op_by_op():
    # benchmarks/profile_step.py: native (here the CPU, in a process without dipu) against dipu, one table of self
    # CPU time per step by op; a CPU-only profile, so dipu's ops stay on their C++ path.
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "profile_step.py"
    done = subprocess.run([sys.executable, str(script), "--case", "tiny-add", "--steps", "1", "--rows", "40"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("tiny-add: a step takes") and "native (cpu)" in lines[0], lines[0]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    native_us, native_calls, dipu_us, dipu_calls, _ = rows["aten::add"]
    assert float(native_calls) == 2000 and float(dipu_calls) >= 2000, rows["aten::add"]  # dipu's, and its alias call
    assert "all" in rows
