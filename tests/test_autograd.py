"""Autograd and training on dipu devices."""

import threading

import torch


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def train(device: str, steps: int = 5) -> list[float]:
    model = make_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(32, 8, generator=gen).to(device)
    y = torch.randn(32, 1, generator=gen).to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_module_trains_on_second_device_with_cpu_identical_losses():
    cpu = train("cpu")
    dev = train("dipu:1")
    assert cpu[-1] < cpu[0]
    assert dev == cpu


def test_gradients_land_on_the_parameter_device():
    w = torch.randn(3, 3, device="dipu:1", requires_grad=True)
    (w * w).sum().backward()
    assert w.grad.device == torch.device("dipu:1")
    assert torch.allclose(w.grad.cpu(), 2 * w.detach().cpu())


def test_backward_through_views_and_copies_between_devices():
    a = torch.randn(4, 4, requires_grad=True)
    b = a.to("dipu:0")
    c = b.t()[1:].to("dipu:1")
    c.sum().backward()
    expected = torch.zeros(4, 4)
    expected[:, 1:] = 1
    assert torch.equal(a.grad, expected)


def _backward_seen_from_inside() -> dict:
    """Runs a backward on dipu from the current thread; what its hook saw: its thread and intra-op thread count."""
    seen = {"caller": threading.get_ident()}
    x = torch.randn(3, device="dipu", requires_grad=True)
    y = x * 2
    y.register_hook(lambda grad: seen.update(thread=threading.get_ident(), threads=torch.get_num_threads()))
    y.sum().backward()
    assert torch.equal(x.grad.cpu(), torch.full((3,), 2.0))
    return seen


def test_backward_runs_on_the_thread_that_calls_it_as_on_the_cpu():
    # Note [Backward on the caller's thread] in dipu/csrc/allocator.cpp: the default vendor computes on the host
    seen = _backward_seen_from_inside()
    assert seen["thread"] == seen["caller"]
    assert not torch.autograd.is_multithreading_enabled()

    from_thread = {}
    worker = threading.Thread(target=lambda: from_thread.update(_backward_seen_from_inside()))
    worker.start()
    worker.join(timeout=60)
    assert from_thread["thread"] == from_thread["caller"] != seen["caller"]

    # an intra-op thread count set after backward first ran reaches the next backward
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if threads > 1 else 2)
        assert _backward_seen_from_inside()["threads"] == torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)

    # the thread may still ask for autograd's worker threads
    with torch.autograd.set_multithreading_enabled(True):
        assert _backward_seen_from_inside()["thread"] != threading.get_ident()
