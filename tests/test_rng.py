"""Generators: one default per device, reproducibility, state."""

import torch

from conftest import NATIVE_DEVICE


def test_manual_seed_makes_dipu_random_ops_reproducible():
    torch.manual_seed(0)
    a = torch.randn(5, device="dipu")
    b = torch.rand(5, device="dipu:1")
    torch.manual_seed(0)
    assert torch.equal(torch.randn(5, device="dipu").cpu(), a.cpu())
    assert torch.equal(torch.rand(5, device="dipu:1").cpu(), b.cpu())


def test_dipu_stream_of_numbers_matches_the_native_device_s_for_the_same_seed():
    torch.manual_seed(42)  # seeds every device: the CPU's generator on the sim vendor, CUDA's on the CUDA one
    native = torch.randn(8, device=NATIVE_DEVICE).cpu()
    torch.manual_seed(42)
    assert torch.equal(torch.randn(8, device="dipu").cpu(), native)


def test_device_generators_are_independent_of_cpu():
    torch.dipu.manual_seed_all(1)
    torch.manual_seed(5)  # reseeds dipu too...
    torch.dipu.manual_seed(7)  # ...and this reseeds only the current dipu device
    a = torch.randn(4, device="dipu")
    torch.randn(100)  # advancing the CPU generator must not affect dipu
    torch.dipu.manual_seed(7)
    torch.randn(3)
    assert torch.equal(torch.randn(4, device="dipu").cpu(), a.cpu())


def test_explicit_generator_on_second_device():
    g = torch.Generator(device="dipu:1")
    assert g.device == torch.device("dipu:1")
    g.manual_seed(3)
    a = torch.randn(4, device="dipu:1", generator=g)
    g.manual_seed(3)
    b = torch.randn(4, device="dipu:1", generator=g)
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.dipu.default_generators[1].device == torch.device("dipu:1")


def test_rng_state_round_trip():
    torch.dipu.manual_seed(11)
    state = torch.dipu.get_rng_state()
    a = torch.rand(6, device="dipu")
    torch.dipu.set_rng_state(state)
    assert torch.equal(torch.rand(6, device="dipu").cpu(), a.cpu())
    states = torch.dipu.get_rng_state_all()
    assert len(states) == 2
    b = torch.rand(3, device="dipu:1")
    torch.dipu.set_rng_state_all(states)
    assert torch.equal(torch.rand(3, device="dipu:1").cpu(), b.cpu())


def test_seed_and_initial_seed():
    torch.dipu.manual_seed(1234)
    assert torch.dipu.initial_seed() == 1234
    torch.dipu.seed()
    assert torch.dipu.initial_seed() != 1234


def test_dropout_and_bernoulli_reproducible():
    x = torch.ones(100, device="dipu")
    torch.manual_seed(3)
    a = torch.nn.functional.dropout(x, 0.5)
    torch.manual_seed(3)
    b = torch.nn.functional.dropout(x, 0.5)
    assert torch.equal(a.cpu(), b.cpu())
    assert 0 < int((a.cpu() == 0).sum()) < 100


def test_manual_seed_seeds_the_current_device_only():
    """As torch.cuda.manual_seed: the current device's generator, not dipu:0's."""
    torch.dipu.manual_seed_all(100)
    states = torch.dipu.get_rng_state_all()
    torch.dipu.set_device(1)
    try:
        torch.dipu.manual_seed(5)
        assert torch.dipu.initial_seed() == 5
        assert not torch.equal(torch.dipu.get_rng_state(1), states[1])
        assert torch.equal(torch.dipu.get_rng_state(0), states[0])
        on_one = torch.randn(6, device="dipu")  # the current device: dipu:1
        assert on_one.device == torch.device("dipu:1")
        torch.dipu.seed()  # also the current device's
        assert torch.equal(torch.dipu.get_rng_state(0), states[0])
    finally:
        torch.dipu.set_device(0)
    torch.dipu.manual_seed(5)
    assert torch.dipu.default_generators[1].initial_seed() != 5  # seed() above reseeded dipu:1
    assert torch.equal(torch.randn(6, device="dipu:0").cpu(), on_one.cpu())
