"""Side-by-side timing helpers shared by the benchmarks (medians, one process)."""

from __future__ import annotations

import statistics
import time


def median_us(fn, reps: int = 2000, rounds: int = 7) -> float:
    """Median over `rounds` of the mean per-call time of `fn` in microseconds."""
    for _ in range(min(reps, 200)):
        fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - start) / reps * 1e6)
    return statistics.median(samples)


def interleaved(pairs: dict[str, tuple], reps: int = 2000, rounds: int = 7) -> dict[str, tuple[float, float]]:
    """Times each (dipu_fn, cpu_fn) pair alternately so machine noise hits both alike."""
    results = {}
    for name, (dipu_fn, cpu_fn) in pairs.items():
        d, c = [], []
        for _ in range(rounds):
            d.append(median_us(dipu_fn, reps, 1))
            c.append(median_us(cpu_fn, reps, 1))
        results[name] = (statistics.median(d), statistics.median(c))
    return results


def print_table(title: str, results: dict[str, tuple[float, float]], targets: dict[str, float]) -> None:
    print(title)
    print(f"{'case':<28}{'dipu us':>10}{'cpu us':>10}{'ratio':>8}  target")
    for name, (d, c) in results.items():
        target = targets.get(name)
        verdict = "" if target is None else f"<= {target:g}x  {'ok' if d / c <= target else 'MISSED'}"
        print(f"{name:<28}{d:>10.2f}{c:>10.2f}{d / c:>8.2f}  {verdict}")
