"""Where one model step spends its host time: dipu against native, op by op, each side in its own process.

    python benchmarks/profile_step.py [--case NAME] [--steps N] [--rows N]

Each side builds a case of benchmarks/bench_gpu.py (the same models and seeds), warms up, times --steps steps,
then profiles --steps more with torch.profiler on the CPU alone. Native runs on CUDA where torch has a GPU, else
on the CPU, in a process where dipu never loads (Note [Native and dipu in separate processes] in bench_gpu.py);
dipu runs on the vendor DIPU_VENDOR names (``cuda`` where torch has a GPU and none is named). The table joins
both sides' self CPU time per step by op name, the ops where dipu spends the most extra first: with the GPU's
kernels queued asynchronously, that host time is what a step of many short kernels waits for.

A profile of the CPU alone keeps dipu's ops on their C++ path (Note [Hooks on the C++ path] in
dipu/kernels/cpp/wrapper_support.h), so it measures what runs unprofiled; the profiler's own cost per recorded
op lands on both sides alike. dipu's rows include the ATen calls its kernels make on native aliases (an
``aten::add`` inside dipu's ``aten::add``), each with its own self time.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
import bench_gpu  # noqa: E402  (the cases)

SIDES = ("native", "dipu")


def worker(side: str, case: str, steps: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    if side == "dipu":
        import dipu  # noqa: F401
        device, module = "dipu", torch.dipu
    else:
        device, module = ("cuda", torch.cuda) if torch.cuda.is_available() else ("cpu", None)
    step, batch, _, _ = bench_gpu._build(case, device, quick=True)

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            step(*batch)
        if module is not None:
            module.synchronize()
        return (time.perf_counter() - start) / n * 1e3

    run(3)
    ms = run(steps)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run(steps)
    ops = {e.key: [e.self_cpu_time_total / steps, e.count / steps] for e in prof.key_averages()}
    print(json.dumps({"device": device, "ms": ms, "ops": ops}))


def measure(side: str, case: str, steps: int, env: dict[str, str]) -> dict:
    command = [sys.executable, str(HERE), "--worker", side, "--case", case, "--steps", str(steps)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the {side} side failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(case: str, results: dict, rows: int) -> str:
    native, dipu = results["native"], results["dipu"]
    names = set(native["ops"]) | set(dipu["ops"])

    def us(side, name):
        return side["ops"].get(name, [0.0, 0.0])

    order = sorted(names, key=lambda n: us(dipu, n)[0] - us(native, n)[0], reverse=True)
    lines = [f"{case}: a step takes {native['ms']:.3f} ms native ({native['device']}), {dipu['ms']:.3f} ms on dipu",
             f"{'op (self CPU time per step)':<52}{'native us':>11}{'calls':>7}{'dipu us':>11}{'calls':>7}"
             f"{'dipu - native':>15}"]
    for name in order[:rows]:
        (n_us, n_calls), (d_us, d_calls) = us(native, name), us(dipu, name)
        lines.append(f"{name[:51]:<52}{n_us:>11.1f}{n_calls:>7.0f}{d_us:>11.1f}{d_calls:>7.0f}{d_us - n_us:>15.1f}")
    total = [sum(v[0] for v in side["ops"].values()) for side in (native, dipu)]
    lines.append(f"{'all ops':<52}{total[0]:>11.1f}{'':>7}{total[1]:>11.1f}{'':>7}{total[1] - total[0]:>15.1f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="resnet18-infer-b1", choices=list(bench_gpu.CASES))
    parser.add_argument("--steps", type=int, default=5, help="steps timed, then steps profiled (default 5)")
    parser.add_argument("--rows", type=int, default=25, help="ops shown (default 25)")
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.case, args.steps)
        return 0
    native = measure("native", args.case, args.steps, bench_gpu._environment("native"))
    env = dict(os.environ)
    if native["device"] == "cuda":  # beside a GPU, dipu runs on the CUDA vendor unless DIPU_VENDOR names another
        env.setdefault("DIPU_VENDOR", "cuda")
    dipu = measure("dipu", args.case, args.steps, env)
    print(table(args.case, {"native": native, "dipu": dipu}, args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
