"""DIPU_MOCK_CUDA=1: a script's cuda spellings mean dipu (dipu/integrations/mock_cuda.py, Note [Mock CUDA]).

Each test runs a fresh interpreter: the mock is decided once, at import.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MOCK = {"DIPU_MOCK_CUDA": "1"}
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks run where torch has no real CUDA device")


def test_tensors_and_modules(python):
    python("""
        import torch
        def on(t, index):
            assert t.device == torch.device("dipu", index), t.device
            assert t.is_cuda
        on(torch.randn(3, 4, device="cuda"), 0)
        on(torch.ones(2, device="cuda:1"), 1)
        on(torch.zeros(2, device=torch.device("cuda")), 0)
        on(torch.full((2,), 7.0, device=torch.device("cuda", 1)), 1)
        on(torch.tensor([1, 2], device="cuda"), 0)
        on(torch.arange(4).cuda(), 0)
        on(torch.arange(4).cuda(1), 1)
        on(torch.arange(4).cuda("cuda:1"), 1)
        on(torch.ones(2).to("cuda"), 0)
        on(torch.ones(2).to(torch.device("cuda:1")), 1)
        on(torch.ones(2).to(device="cuda", dtype=torch.float64), 0)
        on(torch.empty_like(torch.ones(2), device="cuda"), 0)
        on(torch.ones(2).new_zeros(3, device="cuda:1"), 1)
        linear = torch.nn.Linear(4, 2).cuda()
        on(linear.weight, 0)
        on(torch.nn.Linear(4, 2).to("cuda:1").bias, 1)
        x = torch.randn(5, 4)
        torch.testing.assert_close(linear(x.cuda()).cpu(), linear.cpu()(x))
        assert not torch.ones(1).is_cuda
        assert torch.ones(1, device="cuda").cpu().device.type == "cpu"
    """, env=MOCK)


def test_torch_cuda_is_answered_by_dipu(python):
    python("""
        import torch
        assert torch.cuda.is_available() and not torch.cuda.is_initialized()  # lazy, as torch.cuda
        assert torch.cuda.device_count() == torch.dipu.device_count() == 2
        assert torch.cuda.get_device_name() == torch.dipu.get_device_name()
        torch.cuda.set_device(1)
        assert torch.cuda.current_device() == 1 and torch.ones(1, device="cuda").device.index == 1
        torch.cuda.set_device(0)
        x = torch.empty(1024, device="cuda")
        assert torch.cuda.is_initialized()
        assert torch.cuda.memory_allocated() == torch.dipu.memory_allocated() >= 4096
        torch.cuda.manual_seed(3); a = torch.rand(4, device="cuda")
        torch.cuda.manual_seed(3); b = torch.rand(4, device="cuda")
        assert torch.equal(a, b)
        stream = torch.cuda.Stream()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            assert torch.cuda.current_stream() == stream
            assert not torch.cuda.is_current_stream_capturing()  # torch 2.11's optimizers ask
            start.record(); y = x * 2; end.record()
        end.synchronize(); torch.cuda.synchronize()
        assert start.elapsed_time(end) >= 0 and isinstance(stream, torch.dipu.Stream)
        with torch.cuda.device(1):
            assert torch.cuda.current_device() == 1
    """, env=MOCK)


def test_autocast_and_grad_scaler(python):
    python("""
        import torch
        model = torch.nn.Linear(8, 4).cuda()
        x = torch.randn(2, 8, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert model(x).dtype == torch.bfloat16
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            half = model(x)
        with torch.autocast("dipu", dtype=torch.float16):
            reference = model(x)
        assert half.dtype == torch.float16 and torch.equal(half, reference)
        with torch.cuda.amp.autocast(dtype=torch.bfloat16):
            assert model(x).dtype == torch.bfloat16
        for scaler in (torch.amp.GradScaler("cuda"), torch.cuda.amp.GradScaler(), torch.amp.GradScaler()):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            before = model.weight.detach().clone()
            scaler.scale(model(x).sum()).backward()
            scaler.step(optimizer); scaler.update()
            assert scaler.get_scale() > 0 and not torch.equal(model.weight, before)
            optimizer.zero_grad()
    """, env=MOCK)


DDP_SCRIPT = """
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.parallel import DistributedDataParallel

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
assert dist.is_nccl_available()
dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
world = dist.get_world_size()

torch.manual_seed(0)
reference = torch.nn.Linear(4, 2)
model = DistributedDataParallel(torch.nn.Linear(4, 2).cuda(), device_ids=[local_rank])
model.module.load_state_dict(reference.state_dict())
inputs = torch.randn(8, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(inputs.chunk(world)[dist.get_rank()].cuda()).square().mean().backward()
optimizer.step()
reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
reference(inputs).square().mean().backward()
reference_optimizer.step()
torch.testing.assert_close(model.module.weight.cpu(), reference.weight)

group = dist.new_group(list(range(world)), backend="cpu:gloo,cuda:nccl")
total = torch.full((2,), float(dist.get_rank() + 1), device="cuda")
dist.all_reduce(total, group=group)
assert total.is_cuda and total.tolist() == [world * (world + 1) / 2] * 2
assert init_device_mesh("cuda", (world,)).device_type == "dipu"
print(f"RANK {dist.get_rank()} OK backend={dist.get_backend()} device={total.device}")
dist.destroy_process_group()
"""


def test_nccl_script_under_torchrun(tmp_path):
    """A CUDA DDP script (nccl, device_id, .cuda(), device_ids, new_group, init_device_mesh) runs unchanged
    under torchrun on 2 ranks of dipu's dicl backend."""
    import os
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "ddp_cuda.py"
    script.write_text(DDP_SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
                           "--master-addr", "127.0.0.1", "--master-port", str(port), str(script)],
                          env={**os.environ, **MOCK}, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]
    for rank in (0, 1):
        assert f"RANK {rank} OK backend=dicl device=dipu:{rank}" in proc.stdout


def test_off_by_default(python):
    proc = python("""
        import torch
        assert not torch.cuda.is_available()
        assert not torch.ones(1, device="dipu").is_cuda
        torch.ones(1, device="cuda")
    """, check=False)
    # a CPU build of torch says it has no CUDA; a CUDA build on a machine without a GPU finds no driver
    assert proc.returncode != 0 and ("Torch not compiled with CUDA enabled" in proc.stderr
                                     or "Found no NVIDIA driver" in proc.stderr), proc.stderr[-2000:]


def test_invalid_value_is_named(python):
    proc = python("import dipu", env={"DIPU_MOCK_CUDA": "yes"}, check=False)
    assert "DIPU_MOCK_CUDA='yes' must be 0 or False (off, the default) or 1 or True" in proc.stderr


@pytest.mark.parametrize("value, on", [("True", True), ("true", True), (" TRUE ", True), ("1", True),
                                       ("False", False), ("false", False), ("0", False), ("", False)])
def test_dipu_spellings_of_the_switch(python, value, on):
    """DIPU's own scripts write DIPU_MOCK_CUDA=True/False; ours 1/0 (case-insensitive)."""
    python(f"""
        import torch, dipu
        assert dipu.integrations.mock_cuda.installed() is {on} and torch.cuda.is_available() is {on}
    """, env={"DIPU_MOCK_CUDA": value})


def test_a_cuda_users_script_runs_unchanged(python):
    """What Hugging Face's and Lightning's Trainers call while setting up, spelled with CUDA's devices."""
    python("""
        import torch
        torch.cuda.set_device(torch.device("cuda:1"))
        assert torch.cuda.current_device() == 1
        torch.cuda.set_device("cuda:0")
        assert torch.cuda.current_device() == 0
        torch.cuda.set_device(torch.device("cuda"))  # no index: the device stays as it is
        assert torch.cuda.current_device() == 0
        assert torch.cuda.get_device_capability("cuda") == torch.dipu.get_device_capability(0)
        assert torch.cuda.get_device_name(torch.device("cuda", 1)) == torch.dipu.get_device_name(1)
        with torch.cuda.device(torch.device("cuda:1")):
            assert torch.cuda.current_device() == 1
            x = torch.ones(1024, device="cuda")
            assert x.device == torch.device("dipu", 1)
            assert torch.cuda.memory_allocated(torch.device("cuda")) >= 4096  # the current device: 1
        assert torch.cuda.current_device() == 0
        assert torch.cuda.memory_allocated(torch.device("cuda")) == torch.dipu.memory_allocated(0)
        assert torch.cuda.memory_allocated("cuda:1") == torch.dipu.memory_allocated(1) >= 4096
        stream = torch.cuda.Stream(device=torch.device("cuda:1"))
        assert stream.device_index == 1
        assert torch.cuda.current_stream("cuda:1").device_index == 1
        torch.cuda.synchronize(torch.device("cuda:1"))
        with torch.cuda.device_of(x):
            assert torch.cuda.current_device() == 1
        try:
            torch.cuda.set_device("cpu")
        except ValueError as error:
            assert "Expected a dipu device, but got: cpu" in str(error)
        else:
            raise AssertionError("a cpu device was taken for a dipu one")
    """, env=MOCK)


def test_every_mapped_function_takes_every_device_spelling(python):
    """Every torch.cuda function that mock CUDA maps and that takes a ``device`` answers the same for
    1, "cuda:1", torch.device("cuda", 1) and dipu's own spellings (and "cuda" as the current device)."""
    python("""
        import inspect
        import torch

        def comparable(value):
            if isinstance(value, torch.Tensor):
                return ("tensor", value.shape, value.dtype)
            if isinstance(value, dict):
                return {k: v for k, v in value.items() if "requested_bytes" not in k and "num_" not in k}
            return value if isinstance(value, (int, float, str, tuple, type(None))) else type(value)

        checked = []
        for name in sorted(dir(torch.dipu)):
            function = getattr(torch.cuda, name, None)
            if name.startswith("_") or function is not getattr(torch.dipu, name) or inspect.isclass(function):
                continue
            try:
                parameters = inspect.signature(function).parameters
            except (TypeError, ValueError):
                continue
            required = [p for n, p in parameters.items() if n != "device" and p.default is p.empty
                        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if "device" not in parameters or required:
                continue
            results = {repr(spelling): comparable(function(device=spelling))
                       for spelling in (1, "cuda:1", torch.device("cuda", 1), "dipu:1", torch.device("dipu", 1))}
            assert len(set(map(repr, results.values()))) == 1, (name, results)
            torch.cuda.set_device(1)
            assert repr(comparable(function(device="cuda"))) == repr(comparable(function(device=1))), name
            torch.cuda.set_device(0)
            checked.append(name)
        assert {"get_device_properties", "get_device_capability", "memory_allocated", "synchronize",
                "get_rng_state", "current_stream", "mem_get_info", "memory_stats"} <= set(checked), checked
        for cls in (torch.cuda.device, torch.cuda.Stream):
            for spelling in (1, "cuda:1", torch.device("cuda", 1)):
                with torch.cuda.device(spelling) if cls is torch.cuda.device else torch.cuda.stream(cls(spelling)):
                    assert torch.cuda.current_device() == 1, (cls, spelling)
        print("checked", checked)
    """, env=MOCK)


def test_data_parallel_splits_the_batch_over_dipu_devices(python):
    """nn.DataParallel over dipu:0 and dipu:1 (Note [DataParallel over dipu devices]): each replica gets
    its half of the batch on its own device, and outputs and gradients equal one CPU module's."""
    python("""
        import torch
        torch.manual_seed(0)
        cpu = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
        seen = []
        class Recording(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner
            def forward(self, x):
                seen.append((x.device, x.shape[0]))
                return self.inner(x)
        import copy
        parallel = torch.nn.DataParallel(Recording(copy.deepcopy(cpu)).cuda())
        assert parallel.device_ids == [0, 1]
        x = torch.randn(6, 4)
        out = parallel(x.cuda())
        assert out.device == torch.device("dipu", 0), out.device
        assert sorted(seen, key=str) == [(torch.device("dipu", 0), 3), (torch.device("dipu", 1), 3)], seen
        out.square().sum().backward()
        expected = cpu(x)
        expected.square().sum().backward()
        torch.testing.assert_close(out.cpu(), expected)
        for mine, theirs in zip(parallel.module.inner.parameters(), cpu.parameters()):
            assert mine.grad.device == torch.device("dipu", 0)
            torch.testing.assert_close(mine.grad.cpu(), theirs.grad)
        # the replicas run in threads, under the autocast state the caller's torch.autocast("cuda") set
        with torch.autocast("cuda", dtype=torch.bfloat16):
            seen.clear()
            assert parallel(x.cuda()).dtype != torch.float32 and len(seen) == 2
        # an input still on the CPU is scattered from the host; output_device=-1 gathers on the CPU
        host = torch.nn.DataParallel(copy.deepcopy(cpu).cuda(), output_device=-1)(x)
        assert host.device.type == "cpu"
        torch.testing.assert_close(host, expected.detach())
    """, env=MOCK)


def test_cuda_spelled_example_trains_as_train_py(python):
    """examples/train_cuda_spelled.py (unmodified CUDA code) gives train.py's losses on dipu."""
    import subprocess

    def losses(script, env):
        proc = subprocess.run([sys.executable, str(EXAMPLES / script), "--model", "cnn", "--epochs", "1"],
                              env={**__import__("os").environ, **env}, capture_output=True, text=True,
                              timeout=300, cwd=EXAMPLES)
        assert proc.returncode == 0, proc.stderr
        return re.findall(r"cnn epoch \d+/\d+  loss [\d.]+  accuracy [\d.]+", proc.stdout), proc.stdout

    spelled, stdout = losses("train_cuda_spelled.py", MOCK)
    reference, _ = losses("train.py", {})
    assert spelled and spelled == reference
    assert f"done on {torch.dipu.get_device_name()}" in stdout
