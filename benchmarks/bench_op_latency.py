"""Per-op latency on small tensors, dipu vs native CPU, for the ops that dominate the training
steps of examples/models.py (ResNet-18-like CNN and GPT).

    python benchmarks/bench_op_latency.py [--quick] [--report] [--c-library PATH | --no-c-library]

Each op runs on tensors of a few hundred elements, so the time is the per-call overhead of the
path (dispatch, wrapper, DIOPI call, allocation) rather than arithmetic. The sim vendor runs
synchronously, so no per-call synchronize is needed. dipu and CPU calls are timed alternately
(benchmarks/_timing.py); each op gets as many calls per round as fit a small time budget, so an
op that is still slow on dipu does not stretch the run. Target, on the default vendor and op library (the
torch library in C++ behind the C++ wrappers): each tiny op within 1.5x of CPU, the 4-element add within
1.3x. The cases whose op calls did not all take the C++ wrappers, and the ops that still go through the CPU
fallback, are listed after the table.

The C path columns: the same cases in a second process with a C op library (DIPU_DIOPI_IMPL), timed
against the CPU there too, and the share of the case's op calls the generated C++ wrappers served
(Note [Generated C++ wrappers] in scripts/autogen/dest/cpp_wrappers.py; the rest took the Python wrapper
through the library's trampoline, or the Python library the C library is laid over). The library is
--c-library PATH (or a name DIPU_DIOPI_IMPL accepts), else $DIPU_BENCH_C_LIBRARY, else the reference C
op library (ref_c, diopi_impl/ref_c) when installed, else benchmarks/c_library/bench_diopi.c compiled
here (float32 elementwise and matmul ops only). Target: a
case the C++ wrappers serve whole within 1.5x of CPU, the 4-element add within 1.3x.

--report: the same cases in two more processes with the run report on (DIPU_REPORT), host times and signatures
only (DIPU_REPORT_DEVICE_TIME=off) and with each call's device time as well (auto), beside the run with it off:
the per-call cost of collecting the report and of its device timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

import dipu
from _timing import interleaved, print_table

TINY_OP_TARGET = 1.5
ADD4_TARGET = 1.3
C_PATH_TARGET = 1.5  # a case the C++ wrappers serve whole
C_PATH_ADD4_TARGET = 1.3
BENCH_LIBRARY = Path(__file__).parent / "c_library" / "bench_diopi.c"
warnings.filterwarnings("ignore", message="dipu: .* runs on the CPU through the fallback")  # listed after the table


def make_inputs(device: str) -> dict:
    """Small inputs, identical on both devices (same CPU-generated values)."""
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(shape, generator=generator).to(device)

    return {
        "a4": randn(4), "b4": randn(4),
        "a": randn(16, 16), "b": randn(16, 16), "scratch": randn(16, 16), "vector": randn(16),
        "batch_a": randn(4, 16, 16), "batch_b": randn(4, 16, 16),
        "image": randn(2, 4, 8, 8), "kernel": randn(4, 4, 3, 3),
        "bn_weight": randn(4), "bn_bias": randn(4), "running_mean": randn(4), "running_var": randn(4).abs(),
        "ln_weight": randn(16), "ln_bias": randn(16),
        "table": randn(64, 16), "indices": torch.randint(64, (8,), generator=generator).to(device),
        "labels": torch.randint(16, (16,), generator=generator).to(device),
        "mask": (torch.rand(16, 16, generator=generator) > 0.5).to(device),
        "params": [randn(16, 16) for _ in range(4)], "grads": [randn(16, 16) for _ in range(4)],
    }


def op_cases(x: dict) -> dict:
    """name -> zero-argument callable running one op on the tensors in `x`."""
    a, b = x["a"], x["b"]
    return {
        "add (4 elements)": lambda: x["a4"] + x["b4"],
        "add": lambda: a + b,
        "add_ (alpha)": lambda: x["scratch"].add_(b, alpha=0.1),
        "mul": lambda: a * b,
        "mul_ (scalar)": lambda: x["scratch"].mul_(0.9),
        "div": lambda: a / b,
        "addmm": lambda: torch.addmm(x["vector"], a, b),
        "mm": lambda: a @ b,
        "bmm": lambda: torch.bmm(x["batch_a"], x["batch_b"]),
        "relu": lambda: F.relu(a),
        "gelu": lambda: F.gelu(a),
        "softmax": lambda: torch.softmax(a, dim=-1),
        "layer_norm": lambda: F.layer_norm(a, (16,), x["ln_weight"], x["ln_bias"]),
        "conv2d 3x3": lambda: F.conv2d(x["image"], x["kernel"], padding=1),
        "batch_norm (train)": lambda: F.batch_norm(x["image"], x["running_mean"], x["running_var"],
                                                   x["bn_weight"], x["bn_bias"], training=True),
        "max_pool2d": lambda: F.max_pool2d(x["image"], 2),
        "adaptive_avg_pool2d 2x2": lambda: F.adaptive_avg_pool2d(x["image"], 2),
        "sum": lambda: a.sum(),
        "mean (dim)": lambda: a.mean(dim=0),
        "view": lambda: a.view(-1),
        "reshape (copies)": lambda: a.t().reshape(-1),
        "cat": lambda: torch.cat([a, b]),
        "index_select": lambda: x["table"].index_select(0, x["indices"]),
        "embedding": lambda: F.embedding(x["indices"], x["table"]),
        "copy_": lambda: x["scratch"].copy_(b),
        "fill_": lambda: x["scratch"].fill_(1.5),
        "zero_": lambda: x["scratch"].zero_(),
        "masked_fill": lambda: a.masked_fill(x["mask"], float("-inf")),
        # one case per op family outside the models' hot paths (issue 43): reductions with dims, Scalar bounds,
        # where, stacking, comparisons
        "amax (dim)": lambda: a.amax(1),
        "max (dim)": lambda: a.max(1),
        "argmax (dim)": lambda: a.argmax(1),
        "cumsum": lambda: a.cumsum(1),
        "any": lambda: x["mask"].any(),
        "clamp (Scalar bounds)": lambda: a.clamp(-1, 1),
        "where": lambda: torch.where(x["mask"], a, b),
        "stack": lambda: torch.stack([a, b]),
        "eq": lambda: a == b,
        "gt (Scalar)": lambda: a > 0,
        "cross_entropy": lambda: F.cross_entropy(a, x["labels"]),
        "sqrt": lambda: b.abs().sqrt(),
        # ... and of the layers and statistics of models beyond ResNet and GPT
        "group_norm": lambda: F.group_norm(x["image"], 2, x["bn_weight"], x["bn_bias"]),
        "pad (reflect)": lambda: F.pad(x["image"], (1, 1, 1, 1), mode="reflect"),
        "var (dim)": lambda: a.var(1),
        "sort (dim)": lambda: a.sort(1),
        "~ (mask)": lambda: ~x["mask"],
        "_foreach_add_ (4 tensors)": lambda: torch._foreach_add_(x["params"], x["grads"], alpha=1e-3),
    }


def falling_back(dipu_cases: dict) -> dict[str, list[str]]:
    """case name -> the ops it sent through the CPU fallback."""
    found = {}
    for name, fn in dipu_cases.items():
        dipu.reset_fallback_counts()
        fn()
        if dipu.fallback_counts():
            found[name] = sorted(dipu.fallback_counts())
    return found


def calls_per_round(dipu_fn, cpu_fn, max_calls: int, round_seconds: float) -> int:
    """Enough calls to fill about `round_seconds` per side, so slow ops do not dominate the run."""
    start = time.perf_counter()
    for _ in range(3):
        dipu_fn()
        cpu_fn()
    per_call = (time.perf_counter() - start) / 6
    return max(5, min(max_calls, int(round_seconds / per_call)))


def served_by_cpp(dipu_cases: dict) -> dict[str, float]:
    """case name -> the share of its op calls the C++ wrappers served (Note [Generated C++ wrappers])."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from dipu.kernels import cpp_wrappers

    class Count(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.calls += 1
            return func(*args, **(kwargs or {}))

    shares = {}
    for name, fn in dipu_cases.items():
        Count.calls = 0
        with Count():
            fn()
        cpp_wrappers.reset_fast_calls()
        fn()
        shares[name] = sum(cpp_wrappers.fast_calls().values()) / max(Count.calls, 1)
    return shares


def measure(quick: bool) -> tuple[dict, dict]:
    """case -> (dipu us, cpu us), and case -> the ops it sent through the CPU fallback."""
    # Tiny ops measure per-call overhead; a second intra-op thread adds only scheduler stalls on a
    # busy machine (a parallel region waiting on a descheduled worker), on both sides alike.
    torch.set_num_threads(1)
    max_calls, rounds, round_seconds = (200, 3, 0.01) if quick else (1000, 5, 0.05)
    dipu_cases, cpu_cases = op_cases(make_inputs("dipu")), op_cases(make_inputs("cpu"))
    fallbacks = falling_back(dipu_cases)
    results = {}
    for name in dipu_cases:
        pair = (dipu_cases[name], cpu_cases[name])
        calls = calls_per_round(*pair, max_calls, round_seconds)
        results.update(interleaved({name: pair}, reps=calls, rounds=rounds))
    return results, fallbacks


def bench_library() -> Path:
    """benchmarks/c_library/bench_diopi.c, compiled into dipu's cache (once per source)."""
    import hashlib

    from dipu import _native

    source = BENCH_LIBRARY.read_bytes()
    target = _native.cache_root() / f"bench-diopi-{hashlib.sha256(source).hexdigest()[:12]}" / "libbench_diopi.so"
    include = Path(dipu.__file__).parent / "include"

    def build(path: Path) -> None:
        compiler = os.environ.get("CC") or shutil.which("cc") or "gcc"
        temporary = path.with_suffix(".tmp")
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-std=c11", f"-I{include}", str(BENCH_LIBRARY),
                        "-o", str(temporary), "-lm"], check=True)
        os.replace(temporary, path)

    return _native.ensure_built(target, build)


def default_c_library() -> str:
    """The reference C op library (its entry point's name) when installed, else bench_diopi.c built."""
    import importlib.util

    return "ref_c" if importlib.util.find_spec("dipu.diopi_impl.ref_c") is not None else str(bench_library())


def in_process(what: str, env: dict, quick: bool) -> dict:
    """The cases measured (each against the CPU beside it) in a second process with ``env`` added."""
    command = [sys.executable, __file__, "--json"] + (["--quick"] if quick else [])
    proc = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the {what} run failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_report_table(off: dict, quick: bool) -> None:
    """The same cases with the run report collecting (Note [Device time per kernel] in dipu/csrc/op_stats.cpp),
    host times and signatures only and with device times too, each in a process of its own beside the CPU."""
    runs = {}
    with tempfile.TemporaryDirectory() as directory:
        for mode in ("off", "auto"):
            runs[mode] = in_process(f"report (device time {mode})", {"DIPU_REPORT": f"{directory}/{mode}",
                                                                     "DIPU_REPORT_DEVICE_TIME": mode}, quick)
    print("\nthe same cases with the run report on (DIPU_REPORT): host times and signatures only (device time off), "
          "and with each call's device time (auto); median us per call, each process against the CPU beside it")
    print(f"{'case':<28}{'off us':>8}{'cpu us':>8}{'sig us':>8}{'cpu us':>8}{'+dev us':>8}{'cpu us':>8}{'dev-sig':>8}")
    extra = []
    for name, (d, cpu) in off.items():
        (sig, sig_cpu), (dev, dev_cpu) = runs["off"]["results"][name], runs["auto"]["results"][name]
        extra.append(dev - sig)
        print(f"{name:<28}{d:>8.2f}{cpu:>8.2f}{sig:>8.2f}{sig_cpu:>8.2f}{dev:>8.2f}{dev_cpu:>8.2f}{dev - sig:>8.2f}")
    extra.sort()
    print(f"device timing costs a median of {extra[len(extra) // 2]:.2f} us per call over the report's host times "
          "and signatures")


def print_c_table(python: dict, c: dict) -> None:
    print(f"\nthe same cases with the C op library {c['library']}: Python path (the default library's Python "
          "wrappers) vs C path (C++ wrappers -> C), each vs CPU measured beside it")
    print(f"{'case':<28}{'py us':>8}{'ratio':>7}{'C us':>8}{'cpu us':>8}{'ratio':>7}{'C++':>6}  target")
    met = considered = 0
    for name, (d, cpu) in c["results"].items():
        share = c["served"][name]
        target = C_PATH_ADD4_TARGET if name == "add (4 elements)" else C_PATH_TARGET
        whole = share >= 1.0 and name not in c["fallbacks"]
        verdict = ""
        if whole:
            considered += 1
            met += d / cpu <= target
            verdict = f"<= {target:g}x  {'ok' if d / cpu <= target else 'MISSED'}"
        py_d, py_cpu = python[name]
        print(f"{name:<28}{py_d:>8.2f}{py_d / py_cpu:>7.2f}{d:>8.2f}{cpu:>8.2f}{d / cpu:>7.2f}{share:>6.0%}  {verdict}")
    print(f"{met}/{considered} cases the C++ wrappers serve whole within their target")
    if c["fallbacks"]:
        print("C path CPU fallbacks: " + "; ".join(f"{name}: {', '.join(ops)}" for name, ops in c["fallbacks"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per measurement")
    parser.add_argument("--c-library", default=os.environ.get("DIPU_BENCH_C_LIBRARY"),
                        help="the C op library of the C path columns (default: benchmarks/c_library/bench_diopi.c)")
    parser.add_argument("--no-c-library", action="store_true", help="skip the C path columns")
    parser.add_argument("--report", action="store_true",
                        help="also measure the cases with the run report on: host times only, and with device times")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a second process's results
    args = parser.parse_args()
    if args.json:
        results, fallbacks = measure(args.quick)
        served = served_by_cpp(op_cases(make_inputs("dipu")))
        print(json.dumps({"library": os.environ.get("DIPU_DIOPI_IMPL"), "results": results, "fallbacks": fallbacks,
                          "served": served}))
        return
    if os.environ.get("DIPU_DIOPI_IMPL"):
        print(f"note: DIPU_DIOPI_IMPL={os.environ['DIPU_DIOPI_IMPL']} is set: the first table measures that library")
    results, fallbacks = measure(args.quick)
    max_calls, rounds = (200, 3) if args.quick else (1000, 5)
    targets = {name: ADD4_TARGET if name == "add (4 elements)" else TINY_OP_TARGET for name in results}
    print_table(f"tiny-op latency, dipu vs CPU (median us per call; up to {max_calls} calls x {rounds} rounds)",
                results, targets)
    missed = sum(d / c > targets[name] for name, (d, c) in results.items())
    print(f"{len(results) - missed}/{len(results)} ops within their target ({TINY_OP_TARGET:g}x of CPU, the 4-element "
          f"add {ADD4_TARGET:g}x)")
    served = served_by_cpp(op_cases(make_inputs("dipu")))
    partly = {name: share for name, share in served.items() if share < 1.0}
    print("cases the C++ wrappers did not serve whole: " +
          (", ".join(f"{name} ({share:.0%})" for name, share in partly.items()) or "none"))
    if fallbacks:
        print("CPU fallbacks: " + "; ".join(f"{name}: {', '.join(ops)}" for name, ops in fallbacks.items()))
    else:
        print("CPU fallbacks: none")
    if args.report:
        print_report_table(results, args.quick)
    if not args.no_c_library:
        library = args.c_library or default_c_library()
        print_c_table(results, in_process("C path", {"DIPU_DIOPI_IMPL": library}, args.quick))


if __name__ == "__main__":
    main()
