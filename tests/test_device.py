"""The dipu device: registration, tensors, views, and the torch.dipu module."""

import torch

import dipu

from conftest import sim_only


def test_device_is_registered():
    assert torch._C._get_privateuse1_backend_name() == "dipu"
    assert torch.dipu.is_available()
    assert torch.dipu.device_count() == dipu.vendor().device_count()  # sim: 2 (DIPU_SIM_DEVICE_COUNT)
    assert torch.accelerator.current_accelerator() == torch.device("dipu")
    assert torch.accelerator.device_count() == torch.dipu.device_count()


def test_round_trip_is_exact():
    x = torch.randn(3, 4)
    y = x.to("dipu")
    assert y.device == torch.device("dipu:0") and y.is_dipu
    assert torch.equal(y.cpu(), x)
    for dtype in (torch.float64, torch.int32, torch.bool, torch.bfloat16, torch.uint8):
        t = torch.arange(12).reshape(3, 4).to(dtype)
        assert torch.equal(t.to("dipu:1").cpu(), t)


def test_views_alias_with_strides_and_offsets():
    for index in (0, 1):
        base = torch.arange(24.0).reshape(4, 6).to(f"dipu:{index}")
        t = base.t()
        assert t.stride() == (1, 6) and not t.is_contiguous()
        s = base[1:, 2:5]
        assert s.storage_offset() == 8 and s.stride() == (6, 1)
        assert s.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
        assert torch.equal(s.cpu(), torch.arange(24.0).reshape(4, 6)[1:, 2:5])
        assert torch.equal(t.contiguous().cpu(), torch.arange(24.0).reshape(4, 6).t())
        v = base.view(-1)
        assert v.data_ptr() == base.data_ptr() and v.device.index == index


def test_inplace_through_view_updates_base():
    base = torch.zeros(3, 4, device="dipu:1")
    base[1].fill_(5)
    base[:, 2].zero_()
    column = base[:, 0]
    column.copy_(torch.tensor([7.0, 8.0, 9.0]))
    expected = torch.zeros(3, 4)
    expected[1] = 5
    expected[:, 2] = 0
    expected[:, 0] = torch.tensor([7.0, 8.0, 9.0])
    assert torch.equal(base.cpu(), expected)


def test_copies_between_devices_and_dtypes():
    x = torch.randn(5, 3)
    a = x.to("dipu:0")
    b = a.to("dipu:1")
    assert b.device.index == 1 and torch.equal(b.cpu(), x)
    assert torch.equal(a.to(torch.float64).cpu(), x.double())
    out = torch.empty(3, 5, device="dipu:1")
    out.copy_(a.t())
    assert torch.equal(out.cpu(), x.t())
    assert a.sum().item() == x.sum().item()
    row = torch.empty(4, 3, device="dipu")
    row.copy_(torch.arange(3.0))  # copy_ broadcasts its source
    assert torch.equal(row.cpu(), torch.arange(3.0).expand(4, 3))
    row.copy_(torch.tensor([1.0, 2.0, 3.0], device="dipu:1").to("dipu:0")[None])
    assert torch.equal(row.cpu(), torch.tensor([1.0, 2.0, 3.0]).expand(4, 3))


def test_current_device_and_context_manager():
    assert torch.dipu.current_device() == 0
    with torch.dipu.device(1):
        assert torch.dipu.current_device() == 1
        assert torch.empty(2, device="dipu").device.index == 1
    assert torch.dipu.current_device() == 0
    t = torch.empty(1, device="dipu:1")
    with torch.dipu.device_of(t):
        assert torch.dipu.current_device() == 1
    torch.dipu.set_device("dipu:1")
    try:
        assert torch.dipu.current_device() == 1
        if dipu.vendor().name == "sim":  # the sim vendor records what it was told
            assert dipu.vendor().current_device() == 1
    finally:
        torch.dipu.set_device(0)


@sim_only
def test_properties():
    props = torch.dipu.get_device_properties(1)
    assert props.total_memory == 8 << 30
    assert torch.dipu.get_device_name() == "dipu simulated device"
    free, total = torch.dipu.mem_get_info(0)
    assert total == 8 << 30 and 0 < free <= total


def test_module_and_tensor_methods():
    model = torch.nn.Linear(3, 2).dipu(1)
    assert all(p.device == torch.device("dipu:1") for p in model.parameters())
    assert torch.ones(2).dipu().device == torch.device("dipu:0")
    assert not torch.ones(2).is_dipu


def test_autoload_and_opt_out(python):
    out = python("import torch; print(torch.dipu.device_count(), torch.ones(1, device='dipu').device)")
    assert out.stdout.split() == [str(torch.dipu.device_count()), "dipu:0"]
    out = python("import torch; print(hasattr(torch, 'dipu'))", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out.stdout.strip() == "False"


def test_device_count_from_env(python):
    out = python("import torch; print(torch.dipu.device_count())", env={"DIPU_SIM_DEVICE_COUNT": "3"})
    assert out.stdout.strip() == "3"


def test_legacy_typed_tensor_classes_as_torch_cuda_has_them():
    """torch.dipu.FloatTensor and its siblings: isinstance, x.type(cls or name), the legacy constructor."""
    import pickle

    import pytest

    names = {"Double": torch.float64, "Float": torch.float32, "Half": torch.float16, "BFloat16": torch.bfloat16,
             "Long": torch.int64, "Int": torch.int32, "Short": torch.int16, "Char": torch.int8,
             "Byte": torch.uint8, "Bool": torch.bool}
    x = torch.ones(2, 3, device="dipu")
    for name, dtype in names.items():
        cls = getattr(torch.dipu, f"{name}Tensor")
        assert cls.dtype == dtype and cls.layout == torch.strided and not cls.is_cuda and not cls.is_sparse
        assert repr(cls) == f"<class 'torch.dipu.{name}Tensor'>" and cls in torch._tensor_classes
        for converted in (x.type(cls), x.type(f"torch.dipu.{name}Tensor"), x.cpu().type(cls)):
            assert converted.device == torch.device("dipu:0") and converted.dtype == dtype
            assert converted.type() == f"torch.dipu.{name}Tensor" and isinstance(converted, cls)
            assert not isinstance(converted.cpu(), cls)
            assert isinstance(converted, torch.dipu.FloatTensor) == (dtype == torch.float32)
        made = cls(2, 3)
        assert (made.shape, made.dtype, made.device) == ((2, 3), dtype, torch.device("dipu:0"))
    assert pickle.loads(pickle.dumps(torch.dipu.FloatTensor)) is torch.dipu.FloatTensor
    assert x.type(torch.FloatTensor).device.type == "cpu"
    assert isinstance(torch.nn.Parameter(x), torch.dipu.FloatTensor)

    # the legacy constructor, as torch.FloatTensor(...) on the CPU
    assert torch.equal(torch.dipu.LongTensor([1, 2]).cpu(), torch.LongTensor([1, 2]))
    assert torch.dipu.FloatTensor().shape == (0,) and torch.dipu.FloatTensor(torch.Size([4])).shape == (4,)
    assert torch.dipu.FloatTensor(2, device="dipu:1").device == torch.device("dipu:1")
    assert torch.dipu.FloatTensor(x).data_ptr() == x.data_ptr()
    with pytest.raises(TypeError, match=r"expected torch.dipu.FloatTensor \(got torch.dipu.DoubleTensor\)"):
        torch.dipu.FloatTensor(x.double())
    with pytest.raises(RuntimeError, match="expects device type: dipu but device type: cpu"):
        torch.dipu.FloatTensor(2, device="cpu")
