"""What dipu adds to `import torch`, with Python's bytecode cache off, measured side by side.

    python benchmarks/bench_import.py [--runs N]

Each run is a fresh interpreter with PYTHONDONTWRITEBYTECODE=1 (so Python recompiles every module it
has no .pyc for, as on read-only installs); runs with dipu autoloaded and without alternate. Target:
at most 0.3 s over `import torch`. The first import after a change of the native core, the
spec or the torch version also builds or generates; run once before measuring.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

TARGET_SECONDS = 0.3


def one_run(autoload: bool) -> float:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TORCH_DEVICE_BACKEND_AUTOLOAD="1" if autoload else "0")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
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
