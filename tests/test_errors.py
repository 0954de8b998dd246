"""The errors users get, asserted by message."""

import pytest
import torch

from conftest import sim_only


def test_mixing_dipu_with_a_cpu_tensor():
    with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device, but found "
                                           r"at least two devices, dipu:0 and cpu!"):
        torch.lgamma(torch.ones(2, device="dipu")).add_(torch.ones(2))


def test_mixing_two_dipu_devices():
    with pytest.raises(RuntimeError, match=r"found at least two devices, dipu:0 and dipu:1!"):
        torch.polygamma(1, torch.ones(2, device="dipu")).mul_(torch.ones(2, device="dipu:1"))


def test_cpu_scalar_tensors_may_mix():
    out = torch.ones(2, device="dipu") * torch.tensor(3.0)
    assert out.device.type == "dipu" and out.cpu().tolist() == [3.0, 3.0]


def test_device_index_out_of_range():
    count = torch.dipu.device_count()  # 2 on sim; on a one-GPU machine "1 dipu device is available"
    message = (rf"Invalid device dipu:7: {count} dipu device{' is' if count == 1 else 's are'} available "
               rf"\(valid indices: 0..{count - 1}\)")
    with pytest.raises(RuntimeError, match=message):
        torch.empty(2, device="dipu:7")
    with pytest.raises(RuntimeError, match=message):
        torch.dipu.set_device(7)
    with pytest.raises(RuntimeError, match=message):
        torch.ones(2).to("dipu:7")


def test_bad_sim_memory_is_rejected_at_import(python):
    proc = python("import dipu", env={"DIPU_SIM_MEMORY": "lots"}, check=False)
    assert proc.returncode != 0
    assert "DIPU_SIM_MEMORY='lots' is not a size" in proc.stderr


def test_bad_vendor_is_rejected_at_import_listing_installed_ones(python):
    proc = python("import dipu", env={"DIPU_VENDOR": "nosuch", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
                  check=False)
    assert proc.returncode != 0
    assert "DIPU_VENDOR='nosuch' names no installed dipu vendor; installed: cuda, refc, sim" in proc.stderr


def test_bad_device_count_and_allocator_mode(python):
    proc = python("import dipu", env={"DIPU_SIM_DEVICE_COUNT": "two"}, check=False)
    assert "DIPU_SIM_DEVICE_COUNT='two' is not an integer" in proc.stderr
    proc = python("import dipu", env={"DIPU_SIM_DEVICE_COUNT": "200"}, check=False)
    assert "DIPU_SIM_DEVICE_COUNT='200' must be at most 127" in proc.stderr
    proc = python("import dipu", env={"DIPU_ALLOCATOR": "fancy"}, check=False)
    assert "DIPU_ALLOCATOR='fancy' is not one of: caching, raw" in proc.stderr


def test_incomplete_vendor_fails_naming_every_missing_method():
    from dipu.runtime import DeviceRuntime, check_runtime_class

    class Half(DeviceRuntime):
        def device_count(self):
            return 1

    with pytest.raises(TypeError) as info:
        check_runtime_class("half", Half)
    message = str(info.value)
    assert message.startswith("dipu vendor 'half' (test_errors.")
    assert ".Half) does not implement the required runtime methods: device_properties, free, malloc, " in message
    for method in ("malloc", "free", "memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "synchronize_device",
                   "device_properties", "set_device"):
        assert method in message
    assert "device_count" not in message


def test_missing_compiler_says_what_to_install(monkeypatch):
    from dipu import _native

    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(RuntimeError, match="building the native core needs a C\\+\\+17 compiler, and "
                                           "'no-such-compiler-xyz' was not found. Install one \\(Debian/Ubuntu: "
                                           "apt install g\\+\\+"):
        _native.compiler("C++17", "building the native core")
    monkeypatch.setenv("CC", "no-such-c-compiler")
    from dipu.diopi import c_build

    with pytest.raises(RuntimeError, match="building a C library needs a C compiler, and 'no-such-c-compiler' "
                                           "was not found.*point CC at it"):
        c_build.compiler()


@sim_only
def test_vendor_failure_names_vendor_and_method(monkeypatch):
    import dipu

    def broken(index, nbytes):
        raise OSError("device lost")

    monkeypatch.setattr(dipu.vendor(), "malloc", broken)
    with pytest.raises(RuntimeError, match="dipu: vendor 'sim' failed in malloc: OSError: device lost"):
        torch.empty(3 << 30, dtype=torch.uint8, device="dipu")
