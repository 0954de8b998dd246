"""Current device per thread; concurrent work on several devices."""

import os
import subprocess
import sys
import threading
from pathlib import Path

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


# The allocator's thread safety: tests/allocator_stress.py's workload, each run in its own process
# (a race aborts or crashes the process rather than failing an assert). DIPU_STRESS_RUNS and
# DIPU_STRESS_SECONDS lengthen it for a run by hand; the defaults keep it within ~30 s.
STRESS = Path(__file__).with_name("allocator_stress.py")


def test_allocator_survives_threads_freeing_while_the_cache_is_emptied():
    runs = int(os.environ.get("DIPU_STRESS_RUNS", "3"))
    seconds = float(os.environ.get("DIPU_STRESS_SECONDS", "6"))
    for run in range(runs):
        # -X faulthandler: a crash prints every thread's Python stack into the assertion's message
        proc = subprocess.run([sys.executable, "-X", "faulthandler", str(STRESS), str(seconds)],
                              capture_output=True, text=True, timeout=seconds + 120)
        assert proc.returncode == 0 and "clean:" in proc.stdout, (
            f"stress run {run + 1}/{runs} failed with exit status {proc.returncode}:\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
