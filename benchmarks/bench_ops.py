"""dipu/CPU time ratios for a few ops, with every debug hook off (docs/architecture.md, "Where the time goes").

Runs each case on native CPU tensors and on dipu tensors side by side in one
process, interleaving the two so drift hits both, and reports medians of many
repetitions. Targets: a 4-element add within 3x of native CPU (tightened from 4x); a 1M-element
add and a 512x512 matmul within 1.05x. Never asserted in tests.

    python benchmarks/bench_ops.py [--reps N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _var in ("DIPU_DUMP_OP_ARGS", "DIPU_FORCE_FALLBACK_OPS_LIST", "DIPU_AUTOCOMPARE_OPS_LIST",
             "DIPU_SYNC_EXEC_MODE", "DIPU_CHECK_TENSOR_DEVICE"):
    os.environ.pop(_var, None)

import torch  # noqa: E402

import dipu  # noqa: E402,F401


def _time_per_call(fn, inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner


def measure(make_fn, device: str, inner: int) -> float:
    fn = make_fn(device)
    fn()
    return _time_per_call(fn, inner)


def compare(name: str, make_fn, reps: int, inner: int) -> tuple[str, float, float]:
    cpu, dev = [], []
    cpu_fn, dev_fn = make_fn("cpu"), make_fn("dipu")
    for fn in (cpu_fn, dev_fn):
        for _ in range(3):
            fn()
    for _ in range(reps):
        cpu.append(_time_per_call(cpu_fn, inner))
        dev.append(_time_per_call(dev_fn, inner))
    return name, statistics.median(cpu), statistics.median(dev)


def add(numel: int):
    def make(device):
        a = torch.randn(numel, device=device)
        b = torch.randn(numel, device=device)
        return lambda: a + b
    return make


def matmul(n: int):
    def make(device):
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        return lambda: a @ b
    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=51, help="repetitions; the median is reported")
    args = parser.parse_args()
    torch.set_num_threads(1)  # keeps the large cases comparable on a shared machine
    cases = [
        ("add 4 elements", add(4), 2000, 3.0),
        ("add 1M elements", add(1 << 20), 10, 1.05),
        ("matmul 512x512", matmul(512), 3, 1.05),
    ]
    print(f"{'case':<18}{'cpu us':>12}{'dipu us':>12}{'ratio':>9}{'target':>9}")
    for name, make, inner, target in cases:
        _, cpu, dev = compare(name, make, args.reps, inner)
        print(f"{name:<18}{cpu * 1e6:>12.2f}{dev * 1e6:>12.2f}{dev / cpu:>9.2f}{target:>9.2f}")
    counts = dipu.fallback_counts()
    if counts:
        print(f"note: CPU fallbacks during the run: {counts}")


if __name__ == "__main__":
    main()
