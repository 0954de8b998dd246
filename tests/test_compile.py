"""torch.compile on dipu: dynamo's device interface and inductor's backend (dipu/compile/backend.py).

Compiled results are compared with eager dipu and with the CPU; graphs are kept small, since each
inductor compile (with its C++ build) takes seconds on a small machine.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch._dynamo
from torch._inductor.utils import run_and_get_code

import dipu

needs_cpp = pytest.mark.skipif(dipu.vendor().compiler_backend != "cpp",
                               reason="runs inductor's C++ kernels, which need a host-memory vendor (sim)")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@needs_cpp
def test_registered_with_dynamo_and_inductor():
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.codegen.common import get_device_op_overrides, get_scheduling_for_device

    assert torch.dipu.Scheduling  # what inductor reads first; it registers all (Note [How torch.compile finds dipu])
    interface = get_interface_for_device("dipu")
    assert interface.device_count() == torch.dipu.device_count()
    assert interface.exchange_device(1) == 0 and interface.exchange_device(0) == 1
    assert not interface.is_triton_capable()
    assert get_interface_for_device("dipu:1") is interface
    assert get_device_op_overrides("dipu").device_guard(1) == "torch.dipu.device(1)"
    assert get_scheduling_for_device("dipu").__name__ == "DipuCppScheduling"


@needs_cpp
def test_fused_cpp_kernel_matches_cpu():
    def f(x, y):
        return (x.sin() + y * 2).relu().sum(1) / x.shape[1]

    x, y = torch.randn(8, 33), torch.randn(8, 33)
    result, (code,) = run_and_get_code(torch.compile(f), x.to("dipu"), y.to("dipu"))
    assert "cpp_fused_" in code and "device='dipu:0'" in code  # one C++ kernel, output on dipu
    assert result.device == torch.device("dipu", 0)
    torch.testing.assert_close(result.cpu(), f(x, y))


@needs_cpp
def test_training_on_second_device_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 4)).to("dipu:1")
    compiled_model = torch.nn.Sequential(*(m for m in model))  # shares the parameters
    compiled = torch.compile(compiled_model)
    inputs = torch.randn(8, 16, device="dipu:1")

    model(inputs).square().mean().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    out = compiled(inputs)
    out.square().mean().backward()

    assert out.device == torch.device("dipu", 1)
    for grad, eager in zip((p.grad for p in model.parameters()), eager_grads):
        assert grad.device == torch.device("dipu", 1)
        torch.testing.assert_close(grad, eager, rtol=1e-4, atol=1e-5)


@needs_cpp
def test_extern_ops_run_through_dipu_kernels():
    """Ops inductor does not generate (here mm, bmm) are extern calls into dipu's kernels."""
    def f(x, w, batch):
        return (x @ w).relu().sum() + torch.bmm(batch, batch).tanh().mean()

    args = (torch.randn(6, 7), torch.randn(7, 5), torch.randn(2, 3, 3))
    result, (code,) = run_and_get_code(torch.compile(f), *(a.to("dipu") for a in args))
    assert "extern_kernels.mm" in code and "extern_kernels.bmm" in code
    torch.testing.assert_close(result.cpu(), f(*args), rtol=1e-4, atol=1e-4)


@needs_cpp
@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
def test_convolution_in_compiled_graph(channels_last):
    """Inductor makes conv inputs channels_last; the layout it plans must be the one dipu's kernel returns."""
    def f(image, weight):
        return torch.nn.functional.conv2d(image, weight, padding=1).relu()

    args = (torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3))
    if channels_last:
        args = tuple(a.to(memory_format=torch.channels_last) for a in args)
    with torch.no_grad():
        result = torch.compile(f)(*(a.to("dipu") for a in args))
    torch.testing.assert_close(result.cpu(), f(*args), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "conv_transpose"])
@pytest.mark.parametrize("layouts", ["contiguous", "input_channels_last", "weight_channels_last"])
def test_fake_convolution_layout_is_the_kernels(layouts, transposed):
    """Note [Convolution layouts under fake tensors]: what fake tensors promise, the kernels return."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    image = torch.randn(2, 3, 5, 5, device="dipu")
    weight = torch.randn(*((3, 4) if transposed else (4, 3)), 3, 3, device="dipu")
    if layouts == "input_channels_last":
        image = image.to(memory_format=torch.channels_last)
    elif layouts == "weight_channels_last":
        weight = weight.to(memory_format=torch.channels_last)
    image.requires_grad_()
    weight.requires_grad_()
    conv = torch.nn.functional.conv_transpose2d if transposed else torch.nn.functional.conv2d

    def strides(image, weight):
        out = conv(image, weight, padding=1)
        grad_image, grad_weight = torch.autograd.grad(out.sum(), (image, weight))
        return out.stride(), grad_image.stride(), grad_weight.stride()

    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake = strides(mode.from_tensor(image).requires_grad_(), mode.from_tensor(weight).requires_grad_())
    assert fake == strides(image, weight)


@needs_cpp
def test_channels_last_cnn_training_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 5)).to("dipu")
    model = model.to(memory_format=torch.channels_last)
    compiled = torch.compile(torch.nn.Sequential(*model))  # shares the parameters
    images = torch.randn(4, 3, 8, 8, device="dipu").to(memory_format=torch.channels_last)

    model(images).logsumexp(1).mean().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled(images).logsumexp(1).mean().backward()
    for param, eager in zip(model.parameters(), eager_grads):
        torch.testing.assert_close(param.grad, eager, rtol=1e-4, atol=1e-5)


@needs_cpp
def test_invalid_compiler_backend_is_named(monkeypatch):
    from dipu.compile import backend as dipu_compile

    monkeypatch.setattr(dipu.vendor(), "compiler_backend", "ptx")
    with pytest.raises(ValueError, match=r"compiler_backend='ptx' is not one of 'cpp', 'triton', None"):
        dipu_compile.compiler_backend()


@needs_cpp
def test_vendor_without_compiler_runs_graphs_through_dipu_kernels(python):
    """Note [torch.compile without a compiler]: the sim vendor as a runtime only (opaque memory) declares no
    compiler backend; torch.compile's default backend then runs dipu graphs as aot_eager, and CPU graphs still
    go to inductor."""
    proc = python("""
        import copy
        import warnings
        import torch
        import dipu
        assert dipu.vendor().compiler_backend is None
        f = lambda x: (x.cos() * 3).sum(0)
        x = torch.randn(4, 5)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = torch.compile(f)(x.to("dipu"))
        torch.testing.assert_close(y.cpu(), f(x))
        print("WARNED", [str(w.message) for w in caught if "compiler backend" in str(w.message)])

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        reference = copy.deepcopy(model)
        model.to("dipu")
        torch.compile(model)(x.to("dipu")).square().sum().backward()
        reference(x).square().sum().backward()
        for param, expected in zip(model.parameters(), reference.parameters()):
            assert param.grad.device.type == "dipu"
            torch.testing.assert_close(param.grad.cpu(), expected.grad)

        from torch._inductor.utils import run_and_get_code
        _, (code,) = run_and_get_code(torch.compile(lambda t: t.sin() + 1), x)
        print("CPU GRAPH", "cpp_fused" in code)
    """, env={"DIPU_SIM_NATIVE_ALIAS": "0"})
    assert "has no compiler backend (its DeviceRuntime.compiler_backend is None)" in proc.stdout
    assert 'torch.compile runs graphs on dipu as backend="aot_eager" does' in proc.stdout
    assert "CPU GRAPH True" in proc.stdout


@pytest.mark.skipif(not torch.cuda.is_available() or os.environ.get("DIPU_VENDOR") != "cuda",
                    reason="the Triton path needs an NVIDIA GPU and DIPU_VENDOR=cuda")
def test_triton_kernels_on_cuda_vendor():  # pragma: no cover - no GPU where this was written
    def f(x):
        return (x.sin() * 2).relu()

    x = torch.randn(1024, device="dipu")
    result, (code,) = run_and_get_code(torch.compile(f), x)
    assert "triton" in code
    torch.testing.assert_close(result.cpu(), f(x.cpu()))


# ---- Note [Triton kernels on dipu(cuda)]: what can be checked without a GPU ------------------------------------


def test_triton_kernels_for_dipu_name_cuda_as_their_target():
    from dipu.compile import backend as dipu_compile

    source = ("@triton_heuristics.pointwise(size_hints={'x': 8}, triton_meta={'signature': {}, 'device': "
              "DeviceProperties(type='dipu', index=0, multi_processor_count=132, cc=90, major=9), "
              "'constants': {}})")
    rewritten = dipu_compile.for_triton(source)
    assert "DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90" in rewritten
    assert rewritten.replace("type='cuda'", "type='dipu'") == source
    assert dipu_compile.for_triton("DeviceProperties(type='cpu', index=None)") == \
        "DeviceProperties(type='cpu', index=None)"


def test_the_triton_scheduling_makes_dipu_kernels_cuda_kernels(monkeypatch):
    pytest.importorskip("triton", reason="needs the triton package (CUDA builds of torch ship it)")
    from torch._inductor import utils as inductor_utils
    from torch._inductor.codegen.triton import TritonKernel, TritonScheduling

    from dipu.compile import backend as dipu_compile

    scheduling = dipu_compile._triton_scheduling()
    assert issubclass(scheduling, TritonScheduling) and issubclass(scheduling.kernel_type, TritonKernel)
    monkeypatch.setattr(inductor_utils, "GPU_TYPES", list(inductor_utils.GPU_TYPES))
    dipu_compile._register_gpu_type()
    dipu_compile._register_gpu_type()
    assert inductor_utils.GPU_TYPES.count("dipu") == 1 and inductor_utils.is_gpu("dipu")
    assert inductor_utils.get_gpu_type() == "cuda"  # cached before dipu was listed
