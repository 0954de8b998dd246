"""The CUDA vendor (DIPU_VENDOR=cuda). GPU checks skip without a GPU."""

import ast

import pytest
import torch

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU and CUDA torch")
CUDA = {"DIPU_VENDOR": "cuda"}


def test_is_installed_as_a_vendor():
    from dipu.runtime import installed_vendors

    assert {"sim", "cuda"} <= set(installed_vendors())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without a GPU")
def test_without_gpu_import_fails_clearly(python):
    proc = python("import dipu", env={**CUDA, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, check=False)
    assert proc.returncode != 0
    assert "DIPU_VENDOR='cuda' needs an NVIDIA GPU and a CUDA build of torch" in proc.stderr


@needs_gpu
def test_tensors_ops_and_copies_match_native_cuda(python):
    out = python("""
        import torch
        x = torch.randn(64, 32)
        d = x.to("dipu")
        assert torch.equal(d.cpu(), x)
        assert torch.allclose((d @ d.t()).cpu(), x @ x.t(), atol=1e-4)
        assert torch.equal(d.t().contiguous().cpu(), x.t().contiguous())
        print("ok", torch.dipu.get_device_name())
    """, env=CUDA).stdout
    assert out.startswith("ok")


@needs_gpu
def test_kernels_launch_on_the_selected_dipu_stream(python):
    python("""
        import torch, dipu
        s = torch.dipu.Stream()
        handle = dipu._C.stream_handle(s.stream_id, s.device_index)
        with torch.dipu.stream(s):
            assert torch.cuda.current_stream() == handle
            start, end = torch.dipu.Event(enable_timing=True), torch.dipu.Event(enable_timing=True)
            start.record()
            y = torch.randn(1024, 1024, device="dipu") @ torch.randn(1024, 1024, device="dipu")
            end.record()
        assert torch.cuda.current_stream() == torch.cuda.default_stream()
        end.synchronize()
        assert start.elapsed_time(end) > 0
        y.record_stream(s)
    """, env=CUDA)


@needs_gpu
def test_convolution_and_batch_norm_write_their_results_into_the_outputs_without_copies(python):
    # Note [cuDNN into the output on CUDA] in diopi_impl/torch_cpp/handwritten.cpp (forward, evaluation batch
    # norm) and Note [Taken results] in dipu/csrc/allocator.cpp (the backwards): native CUDA's numbers, and no
    # copy of a functional result anywhere.
    python("""
        import copy, torch
        from torch.profiler import ProfilerActivity, profile
        torch.backends.cudnn.allow_tf32 = False
        torch.manual_seed(0)
        conv = torch.nn.Conv2d(8, 16, 3, padding=1).cuda()
        bn = torch.nn.BatchNorm2d(16).cuda()
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        for layout in (torch.contiguous_format, torch.channels_last):
            x = torch.randn(2, 8, 16, 16, device="cuda").to(memory_format=layout)
            native = torch.nn.Sequential(copy.deepcopy(conv), copy.deepcopy(bn)).to(memory_format=layout)
            on_dipu = copy.deepcopy(native).to("dipu")
            for training in (False, True):
                native.train(training)
                on_dipu.train(training)
                xn, xd = x.clone().requires_grad_(), x.to("dipu").requires_grad_()
                expected = native(xn)
                expected.square().sum().backward()
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    got = on_dipu(xd)
                    got.square().sum().backward()
                names = {e.key for e in prof.key_averages()}
                assert "aten::cudnn_convolution" in names, sorted(names)
                assert training or "aten::cudnn_batch_norm" in names, sorted(names)
                assert "aten::copy_" not in names, (training, sorted(names))
                assert got.is_contiguous(memory_format=layout)
                torch.testing.assert_close(got.cpu(), expected.cpu(), rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(xd.grad.cpu(), xn.grad.cpu(), rtol=1e-4, atol=1e-4)
                for a, b in zip(on_dipu.parameters(), native.parameters()):
                    torch.testing.assert_close(a.grad.cpu(), b.grad.cpu(), rtol=1e-4, atol=1e-4)
                    a.grad = b.grad = None
    """, env=CUDA)


@needs_gpu
def test_memory_stats_and_out_of_memory(python):
    python("""
        import torch
        base = torch.dipu.memory_allocated()
        x = torch.empty(1 << 20, device="dipu")
        assert torch.dipu.memory_allocated() - base >= 4 << 20
        del x
        assert torch.dipu.memory_allocated() == base
        total = torch.dipu.get_device_properties().total_memory
        try:
            torch.empty(2 * total, dtype=torch.uint8, device="dipu")
            raise AssertionError("expected OOM")
        except torch.OutOfMemoryError as e:
            assert "dipu out of memory on cuda device dipu:0" in str(e)
        assert torch.ones(10, device="dipu").sum().item() == 10
    """, env=CUDA)


def test_the_native_cuda_runtime_binds_the_cuda_runtime_torch_loaded_or_says_why_not():
    # Note [The CUDA runtime in the core] in dipu/csrc/vendor_cuda.cpp: making it touches no device, so this runs
    # on any machine; on pip's CUDA builds of torch (CI's oldest) it binds the real libcudart
    import ctypes.util

    import dipu

    if torch.version.cuda is None:
        with pytest.raises(RuntimeError, match="this torch has no CUDA device guard .it is not a CUDA build"):
            dipu._C.check_cuda_runtime()
        return
    assert dipu._C.check_cuda_runtime() == "loaded by torch"
    with pytest.raises(RuntimeError, match="cannot open the CUDA runtime library /no/libcudart.so"):
        dipu._C.check_cuda_runtime("/no/libcudart.so")
    with pytest.raises(RuntimeError, match=r"lacks cudaMalloc cudaFree cudaMemcpy .*cudaGetErrorString"):
        dipu._C.check_cuda_runtime(ctypes.util.find_library("m"))


@needs_gpu
def test_the_core_serves_the_cuda_vendor_without_python_unless_asked(python):
    # The vendor's Python methods are the reference (DIPU_CUDA_RUNTIME=python); the core does not call them.
    code = """
        import os, torch, dipu
        calls = []
        for name in ("malloc", "memcpy_h2d", "create_stream", "record_event"):
            method = getattr(dipu.vendor(), name)
            setattr(dipu.vendor(), name, lambda *a, _n=name, _m=method: calls.append(_n) or _m(*a))
        x = torch.arange(6.0).to("dipu")
        s, e = torch.dipu.Stream(), torch.dipu.Event()
        with torch.dipu.stream(s):
            y = (x * 2).cpu()
            e.record()
        e.synchronize()
        assert y.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        print(sorted(set(calls)))
    """
    assert python(code, env=CUDA).stdout.strip() == "[]"
    out = python(code, env={**CUDA, "DIPU_CUDA_RUNTIME": "python"}).stdout.strip()
    assert {"create_stream", "malloc", "record_event"} <= set(ast.literal_eval(out))
    proc = python("import dipu", env={**CUDA, "DIPU_CUDA_RUNTIME": "ctypes"}, check=False)
    assert "DIPU_CUDA_RUNTIME='ctypes' is not one of: native, python" in proc.stderr


# ---- the GPU check and the GPU benchmark (benchmarks/): what runs without a GPU -----------------------------
REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_gpu_check_script_parses_and_explains_itself():
    import subprocess

    script = REPO / "benchmarks" / "gpu_check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    out = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("The GPU check:") and "summary.txt" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skip on machines without a GPU")
def test_gpu_check_and_bench_skip_cleanly_without_a_gpu(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], env={**__import__("os").environ,
                          "OUT": str(tmp_path)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "summary.txt").read_text().startswith("gpu_check: skipped: torch sees no GPU")
    bench = [sys.executable, str(REPO / "benchmarks" / "bench_gpu.py")]
    out = subprocess.run(bench + ["--quick"], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.startswith("bench_gpu: skipped: needs an NVIDIA GPU")
    assert "resnet18-infer-b1" in subprocess.run(bench + ["--help"], capture_output=True, text=True,
                                                 check=True).stdout
    bad = subprocess.run(bench + ["--cases", "nosuch"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown case(s) nosuch; known: tiny-add," in bad.stderr


def test_bench_gpu_table():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_gpu", REPO / "benchmarks" / "bench_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = [{"case": "tiny-add", "native_ms": 0.008, "dipu_ms": 0.016, "native_peak": 0, "dipu_peak": 0},
            {"case": "resnet18-infer-b1", "native_ms": 1.5, "dipu_ms": 1.6, "native_peak": 2**20,
             "dipu_peak": 2**21}]
    for row in rows:
        row["ratio"] = row["native_ms"] / row["dipu_ms"]
        row["memory_ratio"] = row["dipu_peak"] / max(row["native_peak"], 1)
    rows.append({"case": "resnet50-train-b64", "error": "the dipu worker exited (-11) before answering"})
    lines = bench.table(rows).splitlines()
    assert lines[1].split()[:5] == ["tiny-add", "8.00", "us", "16.00", "us"]
    assert lines[2].endswith(">= 0.85 ok")
    assert lines[3].split() == ["resnet50-train-b64", "FAILED:", "the", "dipu", "worker", "exited", "(-11)", "before",
                                "answering"]
    assert bench._environment("native")["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0"
    assert bench._environment("dipu")["DIPU_VENDOR"] == "cuda"
