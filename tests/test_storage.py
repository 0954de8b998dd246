"""Storage methods and serialization."""

import io

import torch


def save_load(obj, **kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **kwargs)


def test_save_load_round_trip_keeps_device_and_views():
    x = torch.randn(4, 5)
    base = x.to("dipu:1")
    loaded = save_load({"base": base, "view": base[1:, 2:]})
    assert loaded["base"].device == torch.device("dipu:1")
    assert torch.equal(loaded["base"].cpu(), x)
    view = loaded["view"]
    assert view.storage_offset() == 7 and view.stride() == (5, 1)
    view.fill_(0)  # still a view of the loaded base
    assert float(loaded["base"][1:, 2:].abs().sum()) == 0


def test_load_with_map_location_cpu():
    x = torch.randn(3)
    loaded = save_load(x.to("dipu"), map_location="cpu")
    assert loaded.device.type == "cpu" and torch.equal(loaded, x)


def test_load_cpu_checkpoint_onto_dipu():
    model = torch.nn.Linear(4, 2)
    state = save_load(model.state_dict(), map_location="dipu:1")
    assert all(v.device == torch.device("dipu:1") for v in state.values())
    fresh = torch.nn.Linear(4, 2).dipu(1)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.weight.cpu(), model.weight)


def test_storage_methods():
    t = torch.arange(6, dtype=torch.float32, device="dipu")
    s = t.untyped_storage()
    assert s.device == torch.device("dipu:0") and s.nbytes() == 24
    assert s.is_dipu
    cpu = s.cpu()
    assert cpu.device.type == "cpu"
    assert torch.equal(torch.tensor([], dtype=torch.float32).set_(cpu), torch.arange(6.0))
    back = cpu.dipu(1)
    assert back.device == torch.device("dipu:1")
    moved = torch.empty(0, device="dipu:1").set_(back)
    assert torch.equal(moved.cpu(), torch.arange(6.0).view(torch.uint8).view(torch.float32))


def test_set_with_offset_size_and_stride():
    base = torch.arange(12.0, device="dipu")
    t = torch.empty(0, device="dipu").set_(base.untyped_storage(), 2, (2, 3), (3, 1))
    assert torch.equal(t.cpu(), torch.arange(12.0)[2:8].view(2, 3))
