"""The allocator under threads: a workload run in its own process by tests/test_threads.py.

Four threads allocate, compute and free on both dipu devices (some tensors record_stream'ed on
a stream of the other device, some moved across devices) while a fifth empties the cache and
reads the statistics every 2 ms, with the memory history on, and turns expandable segments on and
off every 20 rounds where the vendor has them (Note [Expandable segments]), so blocks are split
and merged in plain segments and in segments that grow and shrink, both at once. A race in the caching allocator
shows as a crash of this process (abort, segfault, or a sanitizer's report), not as an
exception: the parent only looks at the exit status and the final line.

Usage: python allocator_stress.py SECONDS
"""

import os
import sys
import threading
import time

import torch

MiB = 1 << 20


def worker(k: int, deadline: float, errors: list) -> None:
    try:
        device = k % 2
        other = 1 - device
        torch.dipu.set_device(device)
        here, there = torch.device("dipu", device), torch.device("dipu", other)
        side = torch.dipu.Stream(device=there)
        gen = torch.Generator().manual_seed(k)
        step = 0
        while time.monotonic() < deadline:
            step += 1
            # Sizes from 2 KiB to 12 MiB: the small and the large pool, cached and new segments.
            n = [512, 4096, 65536, 300_000, 786_432, 3_000_000][step % 6]
            a = torch.randn(n, generator=gen).to(here)
            b = (a * 2 + 1).relu()
            if step % 3 == 0:
                b.record_stream(side)  # a stream of the other device: freeing waits on its event
            if step % 4 == 0:
                c = b.to(there)  # across devices: a block of the other device, freed by this thread
                b = c.to(here)
                del c
            with torch.dipu.stream(torch.dipu.Stream(device=here)) if step % 5 == 0 else _nothing():
                d = torch.empty(n, device=here).copy_(b)
            del a, b, d
    except Exception as error:  # noqa: BLE001  (reported by the parent)
        errors.append(f"worker {k}: {type(error).__name__}: {error}")


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def housekeeper(deadline: float, errors: list, rounds: list) -> None:
    import dipu

    try:
        while time.monotonic() < deadline:
            if dipu._core.virtual_memory and rounds[0] % 20 == 0:
                on = rounds[0] % 40 == 0
                torch.dipu.memory._set_allocator_settings(f"expandable_segments:{on}")
            torch.dipu.empty_cache()
            for device in range(2):
                torch.dipu.memory_stats(device)
                torch.dipu.mem_get_info(device)
            rounds[0] += 1
            time.sleep(0.002)
    except Exception as error:  # noqa: BLE001
        errors.append(f"housekeeper: {type(error).__name__}: {error}")


def main() -> None:
    seconds = float(sys.argv[1])
    torch.dipu.init()
    # Python stacks by default. torch's C++ unwinder (stacks="all") faults under AddressSanitizer in
    # torch's own code (unwind_c), warns "addr not in range of known libraries" on every plain run,
    # and a plain run in CI once died of a segfault no later run reproduced (about 70 runs). That
    # unwinder is torch's, not what this workload tests; DIPU_STRESS_STACKS=all turns it on by hand.
    stacks = os.environ.get("DIPU_STRESS_STACKS", "python")
    torch.dipu.memory._record_memory_history(max_entries=1000, stacks=stacks)
    deadline = time.monotonic() + seconds
    errors, rounds = [], [0]
    threads = [threading.Thread(target=worker, args=(k, deadline, errors)) for k in range(4)]
    threads.append(threading.Thread(target=housekeeper, args=(deadline, errors, rounds)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.dipu.memory._record_memory_history(enabled=None)
    torch.dipu.synchronize()
    torch.dipu.empty_cache()
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    print(f"clean: {rounds[0]} empty_cache rounds, "
          f"{torch.dipu.memory_allocated(0) + torch.dipu.memory_allocated(1)} bytes still allocated")


if __name__ == "__main__":
    main()
