"""The boxed CPU fallback for ops without a dipu kernel.

The ops here are defined by this test in its own namespace with CPU kernels
only, so they always exercise the fallback, however many aten ops dipu's op
library grows to cover.
"""

import pytest
import torch

import dipu

LIB = torch.library.Library("dipu_test", "DEF")
LIB.define("scale(Tensor x, float factor) -> Tensor")
LIB.define("scale_(Tensor(a!) x, float factor) -> Tensor(a!)")
LIB.define("scale.out(Tensor x, float factor, *, Tensor(a!) out) -> Tensor(a!)")
LIB.define("extrema(Tensor x) -> (Tensor, Tensor)")
LIB.define("total(Tensor[] xs, Tensor? bias=None) -> Tensor")
LIB.define("noise(Tensor x, *, Generator? generator=None) -> Tensor")
LIB.define("flat(Tensor(a) x) -> Tensor(a)")


def _scale_(x, factor):
    return x.mul_(factor)


LIB.impl("scale", lambda x, factor: x * factor, "CPU")
LIB.impl("scale_", _scale_, "CPU")
LIB.impl("scale.out", lambda x, factor, *, out: torch.mul(x, factor, out=out), "CPU")
LIB.impl("extrema", lambda x: (x.min().reshape(1), x.max().reshape(1)), "CPU")
LIB.impl("total", lambda xs, bias=None: sum(xs) + (0 if bias is None else bias), "CPU")
LIB.impl("noise", lambda x, *, generator=None: x + torch.randn(x.shape, generator=generator), "CPU")
LIB.impl("flat", lambda x: x.view(-1), "CPU")
ops = torch.ops.dipu_test


def test_functional_result_lands_on_the_input_device():
    x = torch.rand(3, 4)
    for index in (0, 1):
        out = ops.scale(x.to(f"dipu:{index}"), 2.0)
        assert out.device == torch.device(f"dipu:{index}")
        assert torch.equal(out.cpu(), x * 2)


def test_inplace_through_a_view_writes_back_into_the_base():
    x = torch.rand(3, 4)
    base = x.to("dipu")
    ptr = base.data_ptr()
    row = base[1]
    assert ops.scale_(row, 3.0) is row
    expected = x.clone()
    expected[1] *= 3
    assert base.data_ptr() == ptr
    assert torch.equal(base.cpu(), expected)


def test_out_argument_is_written_in_place():
    x = torch.rand(5)
    out = torch.empty(5, device="dipu:1")
    ptr = out.data_ptr()
    result = ops.scale.out(x.to("dipu:1"), 2.0, out=out)
    assert result is out and out.data_ptr() == ptr
    assert torch.equal(out.cpu(), x * 2)


def test_multiple_outputs_lists_and_optional_tensors():
    x = torch.rand(3, 4)
    low, high = ops.extrema(x.to("dipu:1"))
    assert low.device == high.device == torch.device("dipu:1")
    assert low.item() == x.min().item() and high.item() == x.max().item()
    parts = [x.to("dipu"), (x + 1).to("dipu")]
    assert torch.equal(ops.total(parts).cpu(), x + (x + 1))
    assert torch.equal(ops.total(parts, torch.ones(4, device="dipu")).cpu(), x + (x + 1) + 1)


def test_dipu_generators_drive_random_ops_on_the_cpu():
    x = torch.zeros(6, device="dipu:1")
    g = torch.Generator(device="dipu:1").manual_seed(7)
    a = ops.noise(x, generator=g)
    g.manual_seed(7)
    assert torch.equal(ops.noise(x, generator=g).cpu(), a.cpu())
    torch.dipu.manual_seed_all(3)
    b = ops.noise(x)  # no generator: the device's default dipu generator
    torch.dipu.manual_seed_all(3)
    assert torch.equal(ops.noise(x).cpu(), b.cpu())
    assert torch.equal(b.cpu(), torch.randn(6, generator=torch.Generator().manual_seed(3)))


def test_factory_ops_follow_their_device_argument():
    assert dipu._C.cpu_fallback("randperm", (6,), {"device": "dipu:1"}).device == torch.device("dipu:1")


def test_fallback_is_counted_and_warns_once_per_op(capfd):
    # A custom op is called without PyTorch's Python warning handler, so the
    # warning reaches stderr through the C++ one; aten ops raise a UserWarning.
    dipu.reset_fallback_counts()
    x = torch.rand(4, device="dipu")
    capfd.readouterr()
    ops.scale(x, 2.0)
    assert "dipu: dipu_test::scale has no dipu kernel; it runs on the CPU" in capfd.readouterr().err
    ops.scale(x, 2.0)
    assert "has no dipu kernel" not in capfd.readouterr().err  # the second call is silent
    assert dipu.fallback_counts() == {"dipu_test::scale": 2}


def test_log_every_call(python):
    code = """
        import torch
        lib = torch.library.Library("dipu_test", "DEF")
        lib.define("scale(Tensor x, float factor) -> Tensor")
        lib.impl("scale", lambda x, factor: x * factor, "CPU")
        x = torch.rand(4, device="dipu")
        for _ in range(3):
            torch.ops.dipu_test.scale(x, 2.0)
    """
    err = python(code, env={"DIPU_LOG_FALLBACK_INFO": "1"}).stderr
    assert err.count("dipu: fallback to cpu: dipu_test::scale") == 3


def test_view_ops_are_never_run_by_the_fallback():
    with pytest.raises(RuntimeError, match="dipu_test::flat appears to be a view operator"):
        ops.flat(torch.zeros(2, 2, device="dipu"))
    z = torch.zeros(2, dtype=torch.complex64, device="dipu")
    with pytest.raises(RuntimeError, match="aten::view_as_real appears to be a view operator"):
        torch.view_as_real(z)


def test_python_entry_runs_an_op_through_the_fallback():
    x = torch.rand(3, device="dipu:1") + 0.5
    out = dipu._C.cpu_fallback("lgamma", (x,), {})
    assert out.device == torch.device("dipu:1")
    assert torch.allclose(out.cpu(), torch.lgamma(x.cpu()))
    out = dipu._C.cpu_fallback("dipu_test::scale", (x, 2.0), {})
    assert torch.equal(out.cpu(), x.cpu() * 2)
