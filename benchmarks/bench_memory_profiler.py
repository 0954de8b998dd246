"""What memory history and the profiler's device timeline cost, side by side in one process.

    python benchmarks/bench_memory_profiler.py

(a) allocate-and-free of a small dipu tensor with memory history off, "state" (a stack per live
block) and "all" (stacks plus the event trace); (b) a tiny dipu add with no profiler, a CPU-only
profiler and a CPU + PrivateUse1 profiler (the device timeline times each op with vendor events).
Medians of per-call means in microseconds; nothing here is asserted.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import median_us  # noqa: E402


def allocation_costs(reps: int = 2000) -> dict[str, float]:
    def alloc_free():
        torch.empty(256, device="dipu")

    results = {}
    for label, enabled in (("history off", None), ("history state", "state"), ("history all", "all")):
        torch.dipu.memory._record_memory_history(enabled=enabled, max_entries=100000)
        results[label] = median_us(alloc_free, reps, 5)
    torch.dipu.memory._record_memory_history(enabled=None)
    return results


def profiler_costs(reps: int = 500, rounds: int = 5) -> dict[str, float]:
    x = torch.ones(4, device="dipu")

    def add():
        x + x

    def under(activities):
        samples = []
        for _ in range(rounds):
            if activities is None:
                samples.append(median_us(add, reps, 1))
            else:
                with profile(activities=activities):
                    samples.append(median_us(add, reps, 1))
        return statistics.median(samples)

    return {
        "no profiler": under(None),
        "profiler CPU": under([ProfilerActivity.CPU]),
        "profiler CPU+PrivateUse1": under([ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]),
    }


def main() -> None:
    print("allocate + free torch.empty(256) on dipu (us)")
    for label, us in allocation_costs().items():
        print(f"  {label:<26}{us:>8.2f}")
    print("tiny dipu add, x + x with 4 elements (us)")
    for label, us in profiler_costs().items():
        print(f"  {label:<26}{us:>8.2f}")


if __name__ == "__main__":
    main()
