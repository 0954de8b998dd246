"""The CUDA vendor (DIPU_VENDOR=cuda). GPU checks skip without a GPU."""

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
