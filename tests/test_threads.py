"""Current device per thread; concurrent work on several devices."""

import threading

import torch


def test_current_device_is_per_thread():
    seen = {}

    def worker():
        seen["start"] = torch.dipu.current_device()
        torch.dipu.set_device(1)
        seen["after"] = torch.dipu.current_device()

    torch.dipu.set_device(0)
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"start": 0, "after": 1}
    assert torch.dipu.current_device() == 0


def test_four_threads_on_two_devices():
    errors, results = [], {}

    def worker(k):
        try:
            device = f"dipu:{k % 2}"
            gen = torch.Generator().manual_seed(k)
            a = torch.randn(64, 64, generator=gen)
            x = a.to(device)
            for _ in range(20):
                x = (x * 0.5 + 1).contiguous()
                y = x.t().clone()
                assert y.device == torch.device(device)
            ref = a
            for _ in range(20):
                ref = ref * 0.5 + 1
            results[k] = torch.allclose(x.cpu(), ref)
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert results == {0: True, 1: True, 2: True, 3: True}
