"""What dipu adds to `import torch`, with Python's bytecode cache off, measured side by side; and, with --cold,
the first import on an empty cache.

    python benchmarks/bench_import.py [--runs N] [--cold N]

Each run is a fresh interpreter with PYTHONDONTWRITEBYTECODE=1 (so Python recompiles every module it
has no .pyc for, as on read-only installs); runs with dipu autoloaded and without alternate. Target:
at most 0.2 s over `import torch`. The first import after a change of the native core, the
spec or the torch version also builds or generates; run once before measuring.

--cold N: N times, `import torch` and one dipu op with a new, empty DIPU_CACHE_DIR, so that everything the
default vendor needs is built (Note [Builds side by side] in dipu/_native.py): the wall time, the CPU time of
the process and its compilers, and each part's time from its progress line (Note [Build progress]); the
medians at the end. Target: under 60 s and under 120 s of CPU on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_SECONDS = 0.2
COLD_TARGET_SECONDS, COLD_TARGET_CPU_SECONDS = 60.0, 120.0


def one_run(autoload: bool) -> float:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TORCH_DEVICE_BACKEND_AUTOLOAD="1" if autoload else "0")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True)
    return time.perf_counter() - start


def cold_run() -> tuple[float, float, dict[str, float]]:
    """One first import on an empty cache: (wall seconds, CPU seconds, built part -> its seconds)."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, DIPU_CACHE_DIR=cache)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", "import torch; print(torch.ones(3, device='dipu') + 1)"],
                              env=env, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    parts = {m.group(1): float(m.group(2)) for m in re.finditer(r"^dipu: built (.+) in ([0-9.]+) s$", done.stderr,
                                                                 re.MULTILINE)}
    return wall, cpu, parts


def cold(runs: int) -> None:
    results = []
    for number in range(1, runs + 1):
        results.append(cold_run())
        wall, cpu, parts = results[-1]
        print(f"cold import {number}/{runs}: {wall:.1f} s, {cpu:.1f} s of CPU; "
              + ", ".join(f"{what} {seconds:.1f} s" for what, seconds in parts.items()), flush=True)
    wall, cpu = statistics.median(r[0] for r in results), statistics.median(r[1] for r in results)
    ok = wall < COLD_TARGET_SECONDS and cpu < COLD_TARGET_CPU_SECONDS
    print(f"cold import (median of {runs}): {wall:.1f} s, {cpu:.1f} s of CPU (target < {COLD_TARGET_SECONDS:.0f} s "
          f"and < {COLD_TARGET_CPU_SECONDS:.0f} s of CPU: {'ok' if ok else 'MISSED'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cold", type=int, default=0, metavar="N", help="N first imports on an empty cache")
    args = parser.parse_args()
    if args.cold:
        cold(args.cold)
        return
    one_run(True)  # builds/generates if needed, warms the page cache
    plain, with_dipu = [], []
    for _ in range(args.runs):
        plain.append(one_run(False))
        with_dipu.append(one_run(True))
    base, total = statistics.median(plain), statistics.median(with_dipu)
    added = total - base
    print(f"import torch: {base:.2f} s; with dipu: {total:.2f} s; dipu adds {added:.2f} s "
          f"(median of {args.runs}; target <= {TARGET_SECONDS} s: {'ok' if added <= TARGET_SECONDS else 'MISSED'})")


if __name__ == "__main__":
    main()
