"""The boxed CPU fallback for aten ops without a dipu kernel.

The ops used here (lgamma, cummax, searchsorted, ...) are ones dipu's op
library does not implement, so they exercise the fallback itself.
"""

import pytest
import torch

import dipu


def test_functional_op_result_lands_on_the_input_device():
    x = torch.rand(3, 4) + 0.5
    for index in (0, 1):
        out = torch.lgamma(x.to(f"dipu:{index}"))
        assert out.device == torch.device(f"dipu:{index}")
        assert torch.allclose(out.cpu(), torch.lgamma(x))


def test_inplace_through_a_view_writes_back_into_the_base():
    x = torch.rand(3, 4) + 0.5
    base = x.to("dipu")
    ptr = base.data_ptr()
    base[1].lgamma_()
    expected = x.clone()
    expected[1].lgamma_()
    assert base.data_ptr() == ptr
    assert torch.allclose(base.cpu(), expected)


def test_out_argument_is_written_in_place():
    x = torch.rand(5) + 0.5
    out = torch.empty(5, device="dipu:1")
    ptr = out.data_ptr()
    result = torch.lgamma(x.to("dipu:1"), out=out)
    assert result is out and out.data_ptr() == ptr
    assert torch.allclose(out.cpu(), torch.lgamma(x))


def test_multiple_outputs_lists_and_optional_tensors():
    x = torch.rand(3, 4)
    values, indices = torch.cummax(x.to("dipu"), 1)
    ref_values, ref_indices = torch.cummax(x, 1)
    assert values.device.type == indices.device.type == "dipu"
    assert torch.equal(values.cpu(), ref_values) and torch.equal(indices.cpu(), ref_indices)
    outs = torch._foreach_lgamma([x.to("dipu") + 1, x.to("dipu") + 2])
    assert [o.device.type for o in outs] == ["dipu", "dipu"]
    assert torch.allclose(outs[1].cpu(), torch.lgamma(x + 2))
    sorted_seq = torch.tensor([4.0, 3.0, 2.0, 1.0])
    sorter = torch.tensor([3, 2, 1, 0])
    found = torch.searchsorted(sorted_seq.to("dipu"), torch.tensor([2.5]).to("dipu"),
                               sorter=sorter.to("dipu"))
    assert found.device.type == "dipu" and found.cpu().tolist() == [2]


def test_factory_ops_with_device_argument():
    assert torch.randperm(6, device="dipu:1").device == torch.device("dipu:1")
    assert sorted(torch.randperm(6, device="dipu").cpu().tolist()) == list(range(6))


def test_fallback_is_counted_and_warns_once_per_op():
    dipu.reset_fallback_counts()
    x = torch.rand(4, device="dipu") + 0.5
    with pytest.warns(UserWarning, match="dipu: polygamma.out has no dipu kernel"):
        torch.polygamma(1, x)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.polygamma(1, x)  # the second call is silent
    assert dipu.fallback_counts()["polygamma.out"] == 2


def test_log_every_call(python):
    code = """
        import torch
        x = torch.rand(4, device="dipu") + 0.5
        for _ in range(3):
            torch.lgamma(x)
    """
    err = python(code, env={"DIPU_LOG_FALLBACK_INFO": "1"}).stderr
    assert err.count("dipu: fallback to cpu: lgamma.out") == 3


def test_view_ops_are_never_run_by_the_fallback():
    z = torch.zeros(2, dtype=torch.complex64, device="dipu")
    with pytest.raises(RuntimeError, match="aten::view_as_real appears to be a view operator"):
        torch.view_as_real(z)


def test_python_entry_runs_an_op_through_the_fallback():
    x = torch.rand(3, device="dipu:1") + 0.5
    out = dipu._C.cpu_fallback("lgamma", (x,), {})
    assert out.device == torch.device("dipu:1")
    assert torch.allclose(out.cpu(), torch.lgamma(x.cpu()))
