"""The vendor runtime's own cost: the C plug-in runtime (vendor/refc) against the Python sim vendor.

    python benchmarks/bench_runtime.py [--rounds N]

Both run runtime-only (sim with DIPU_SIM_NATIVE_ALIAS=0; refc loaded as a bare plug-in,
DIPU_VENDOR=<path of librefc.so>), so every copy goes through the vendor's memcpy functions.
One vendor per process: the script runs a worker process per vendor and per allocator mode,
alternating them for --rounds rounds, and reports the median of each case's per-call time.
Cases: tiny tensors with the caching allocator off (every allocation and free reaches the
vendor) and on (cache hits: the vendor is not called), host<->device copies of 4 KiB and
4 MiB, event record + synchronize on the current stream. The ratio is C / Python (below 1:
the C runtime is faster). refc's streams are real worker threads, so its event round trip
includes a thread hand-off that sim's synchronous events do not have.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

WORKER = r"""
import json, sys, torch, dipu
sys.path.insert(0, sys.argv[1])
from _timing import median_us
small = torch.randn(1024)                    # 4 KiB
large = torch.randn(1 << 20)                 # 4 MiB
small_dev, large_dev = small.to("dipu"), large.to("dipu")
event = torch.dipu.Event()
cases = {
    "tiny tensor torch.empty(4)": (lambda: torch.empty(4, device="dipu"), 2000),
    "copy h2d 4 KiB": (lambda: small_dev.copy_(small), 2000),
    "copy d2h 4 KiB": (lambda: small.copy_(small_dev), 2000),
    "copy h2d 4 MiB": (lambda: large_dev.copy_(large), 50),
    "copy d2h 4 MiB": (lambda: large.copy_(large_dev), 50),
    "event record + synchronize": (lambda: (event.record(), event.synchronize()), 2000),
}
print(json.dumps({name: median_us(fn, reps, 3) for name, (fn, reps) in cases.items()}))
"""


def measure(env: dict) -> dict:
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", WORKER, here], env={**os.environ, **env},
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from dipu.vendors.refc import library

    configs = {
        "sim": {"DIPU_VENDOR": "sim", "DIPU_SIM_NATIVE_ALIAS": "0"},
        "refc": {"DIPU_VENDOR": str(library())},
    }
    samples: dict[tuple, list] = {}
    for _ in range(args.rounds):
        for allocator in ("raw", "caching"):
            for vendor, env in configs.items():
                for case, us in measure({**env, "DIPU_ALLOCATOR": allocator}).items():
                    samples.setdefault((case, allocator, vendor), []).append(us)
    print("vendor runtime cost, C plug-in (refc) vs Python (sim), runtime-only; median us per call")
    print(f"{'case':<30}{'allocator':>10}{'C us':>10}{'Python us':>11}{'C/Python':>10}")
    for case, allocator, vendor in samples:
        if vendor != "refc":
            continue
        c = statistics.median(samples[(case, allocator, "refc")])
        p = statistics.median(samples[(case, allocator, "sim")])
        print(f"{case:<30}{allocator:>10}{c:>10.2f}{p:>11.2f}{c / p:>10.2f}")


if __name__ == "__main__":
    main()
