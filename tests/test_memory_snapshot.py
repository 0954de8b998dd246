"""Memory history and snapshots in torch.cuda.memory._snapshot()'s format, memory_summary, and the
per-process memory fraction, all on the simulated vendor."""

import gc
import pickle
import subprocess
import sys

import pytest
import torch
import torch.cuda._memory_viz as memory_viz

MiB = 1 << 20


@pytest.fixture
def history():
    # Python frames only: torch's C++ symbolizer depends on every library loaded in the process
    torch.dipu.memory._record_memory_history(max_entries=10000, stacks="python")
    yield
    torch.dipu.memory._record_memory_history(enabled=None)


def allocate_in_a_named_function():
    return torch.empty(5 * MiB + 100, dtype=torch.uint8, device="dipu:1")  # a block of 5 MiB + 512 B


@pytest.fixture
def fresh_stream():
    """A stream of dipu:1 whose pool holds no cached block: the next allocation makes a segment."""
    gc.collect()
    torch.dipu.empty_cache()
    with torch.dipu.stream(torch.dipu.Stream(device=1)):
        yield


def test_snapshot_has_torch_cuda_format_with_python_frames(history, fresh_stream):
    x = allocate_in_a_named_function()
    snapshot = torch.dipu.memory._snapshot()
    assert set(snapshot) >= {"segments", "device_traces"}
    assert len(snapshot["device_traces"]) == torch.dipu.device_count()
    segment = next(s for s in snapshot["segments"] if s["address"] == x.data_ptr())
    # A 20 MiB segment, split: the block and the rest (Note [Splitting blocks] in dipu/csrc/allocator.cpp).
    assert segment["device"] == 1 and segment["total_size"] == 20 * MiB and segment["segment_type"] == "large"
    block, rest = segment["blocks"]
    assert rest["state"] == "inactive" and rest["size"] == 15 * MiB - 512
    assert block["state"] == "active_allocated" and block["size"] == 5 * MiB + 512
    assert block["requested_size"] == 5 * MiB + 100
    assert any(f["name"] == "allocate_in_a_named_function" and f["filename"] == __file__
               for f in block["frames"])
    actions = [(e["action"], e["addr"]) for e in snapshot["device_traces"][1]]
    assert ("segment_alloc", x.data_ptr()) in actions and ("alloc", x.data_ptr()) in actions
    alloc = next(e for e in snapshot["device_traces"][1] if e["action"] == "alloc" and e["addr"] == x.data_ptr())
    assert set(alloc) >= {"action", "addr", "size", "stream", "time_us", "frames"}
    assert any(f["name"] == "allocate_in_a_named_function" for f in alloc["frames"])
    address = x.data_ptr()
    del x
    after = torch.dipu.memory._snapshot()
    assert [e["action"] for e in after["device_traces"][1] if e["addr"] == address][-2:] == \
        ["free_requested", "free_completed"]
    cached = next(s for s in after["segments"] if s["address"] == address)
    assert cached["blocks"][0]["state"] == "inactive" and cached["allocated_size"] == 0


def test_history_off_records_nothing_and_max_entries_bounds_it():
    torch.dipu.memory._record_memory_history(enabled=None)
    x = torch.ones(10, device="dipu")
    assert all(trace == [] for trace in torch.dipu.memory._snapshot()["device_traces"])
    torch.dipu.memory._record_memory_history(max_entries=3)
    try:
        tensors = [torch.ones(10 + i, device="dipu") for i in range(5)]
        assert len(torch.dipu.memory._snapshot()["device_traces"][0]) == 3
    finally:
        torch.dipu.memory._record_memory_history(enabled=None)
    del x, tensors


def test_clear_history_and_skip_actions_as_torch_cuda():
    torch.dipu.memory._record_memory_history(stacks="python", skip_actions=["free_requested", "segment_alloc"])
    try:
        x = torch.ones(64, device="dipu")
        address = x.data_ptr()
        del x
        actions = [e["action"] for e in torch.dipu.memory._snapshot()["device_traces"][0] if e["addr"] == address]
        assert "alloc" in actions and "free_completed" in actions
        assert "free_requested" not in actions and "segment_alloc" not in actions
        torch.dipu.memory._record_memory_history(stacks="python", clear_history=True)
        assert torch.dipu.memory._snapshot()["device_traces"][0] == []
        y = torch.ones(64, device="dipu")
        assert [e["action"] for e in torch.dipu.memory._snapshot()["device_traces"][0]][-1] == "alloc"
        del y
    finally:
        torch.dipu.memory._record_memory_history(enabled=None)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="enabled='yes'"):
        torch.dipu.memory._record_memory_history(enabled="yes")
    with pytest.raises(ValueError, match="stacks='cpp'"):
        torch.dipu.memory._record_memory_history(stacks="cpp")
    with pytest.raises(ValueError, match="skip_actions names 'malloc', which is not an allocator action"):
        torch.dipu.memory._record_memory_history(skip_actions=["malloc"])
    with pytest.raises(NotImplementedError, match="compile_context=True is not supported on dipu"):
        torch.dipu.memory._record_memory_history(compile_context=True)


def test_pytorch_memory_viz_reads_the_snapshot(history, fresh_stream, tmp_path):
    x = allocate_in_a_named_function()
    y = torch.ones(1000, device="dipu:1")
    del x
    path = tmp_path / "snap.pickle"
    torch.dipu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    assert "segments: " in memory_viz.segsum(snapshot)
    text = memory_viz.trace(snapshot)
    assert "cudaMalloc" in text and "del " in text  # the viz names every segment allocation cudaMalloc
    for plot in ("trace_plot", "segment_plot"):
        out = tmp_path / f"{plot}.html"
        subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", plot, str(path), "-o", str(out)],
                       check=True, capture_output=True, timeout=120)
        assert out.stat().st_size > 1000 and "<html" in out.read_text().lower()
    del y


def test_memory_summary_reports_the_stats():
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
    summary = torch.dipu.memory_summary()
    stats = torch.dipu.memory_stats()
    assert "dipu memory summary, device ID 0" in summary
    assert "Allocated memory" in summary and "from large pool" in summary
    assert f"| device allocs: {stats['num_device_alloc']}" in summary
    assert "from large pool" not in torch.dipu.memory_summary(abbreviated=True)
    del x


def test_memory_fraction_is_enforced(python):
    code = """
        import torch
        torch.dipu.set_per_process_memory_fraction(0.25, 1)    # 256 MiB of 1 GiB
        assert torch.dipu.get_per_process_memory_fraction(1) == 0.25
        x = torch.empty(200 << 20, dtype=torch.uint8, device="dipu:1")
        try:
            torch.empty(100 << 20, dtype=torch.uint8, device="dipu:1")
        except torch.OutOfMemoryError as e:
            print("OOM:", e)
        y = torch.empty(100 << 20, dtype=torch.uint8, device="dipu:0")  # another device: no cap
        del x
        z = torch.empty(100 << 20, dtype=torch.uint8, device="dipu:1")    # room again
        torch.dipu.set_per_process_memory_fraction(1.0, 1)
        w = torch.empty(600 << 20, dtype=torch.uint8, device="dipu:1")    # cap removed
        print("ok", torch.dipu.memory_stats(1)["num_ooms"])
    """
    out = python(code, env={"DIPU_SIM_MEMORY": "1G"}).stdout
    assert "OOM: dipu out of memory on sim device dipu:1: tried to allocate 100.00 MiB. The device has" in out
    assert "and this process may reserve at most 256.00 MiB of it (torch.dipu.set_per_process_memory_fraction)" in out
    assert "ok 1" in out


def test_memory_fraction_rejects_bad_values():
    with pytest.raises(ValueError, match="Invalid fraction value: 1.5. Allowed range: 0~1"):
        torch.dipu.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError, match="must be `float`"):
        torch.dipu.set_per_process_memory_fraction(1)


def test_snapshot_of_a_gpt_training_step_renders(tmp_path, python):
    """examples/memory_snapshot.py: one step of examples/train.py's GPT, rendered by torch's viz tool."""
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "examples" / "memory_snapshot.py"
    out = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "gpt")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "trace_plot:" in out.stdout and "segment_plot:" in out.stdout
    with open(tmp_path / "gpt.pickle", "rb") as f:
        snapshot = pickle.load(f)
    trace = snapshot["device_traces"][0]
    assert sum(e["action"] == "alloc" for e in trace) > 100  # activations, gradients, optimizer state
    assert any(f["name"] == "one_training_step" for e in trace for f in e["frames"])
    assert (tmp_path / "gpt_trace.html").stat().st_size > 10000
