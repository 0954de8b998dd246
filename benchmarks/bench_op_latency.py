"""Per-op latency on small tensors, dipu vs native CPU, for the ops that dominate the training
steps of examples/models.py (ResNet-18-like CNN and GPT).

    python benchmarks/bench_op_latency.py [--quick]

Each op runs on tensors of a few hundred elements, so the time is the per-call overhead of the
path (dispatch, wrapper, DIOPI call, allocation) rather than arithmetic. The sim vendor runs
synchronously, so no per-call synchronize is needed. dipu and CPU calls are timed alternately
(benchmarks/_timing.py); each op gets as many calls per round as fit a small time budget, so an
op that is still slow on dipu does not stretch the run. Target: each tiny op within 4x of CPU. Ops that still go through the CPU
fallback are listed after the table.
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch
import torch.nn.functional as F

import dipu
from _timing import interleaved, print_table

TINY_OP_TARGET = 4.0
warnings.filterwarnings("ignore", message="dipu: .* has no dipu kernel")  # listed after the table


def make_inputs(device: str) -> dict:
    """Small inputs, identical on both devices (same CPU-generated values)."""
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(shape, generator=generator).to(device)

    return {
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
        "cross_entropy": lambda: F.cross_entropy(a, x["labels"]),
        "sqrt": lambda: b.abs().sqrt(),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per measurement")
    args = parser.parse_args()
    # Tiny ops measure per-call overhead; a second intra-op thread adds only scheduler stalls on a
    # busy machine (a parallel region waiting on a descheduled worker), on both sides alike.
    torch.set_num_threads(1)
    max_calls, rounds, round_seconds = (200, 3, 0.01) if args.quick else (1000, 5, 0.05)

    dipu_cases, cpu_cases = op_cases(make_inputs("dipu")), op_cases(make_inputs("cpu"))
    fallbacks = falling_back(dipu_cases)
    results = {}
    for name in dipu_cases:
        pair = (dipu_cases[name], cpu_cases[name])
        calls = calls_per_round(*pair, max_calls, round_seconds)
        results.update(interleaved({name: pair}, reps=calls, rounds=rounds))
    print_table(f"tiny-op latency, dipu vs CPU (median us per call; up to {max_calls} calls x {rounds} rounds)",
                results, {name: TINY_OP_TARGET for name in results})
    missed = sum(d / c > TINY_OP_TARGET for d, c in results.values())
    print(f"{len(results) - missed}/{len(results)} ops within {TINY_OP_TARGET:g}x of CPU")
    if fallbacks:
        print("CPU fallbacks: " + "; ".join(f"{name}: {', '.join(ops)}" for name, ops in fallbacks.items()))
    else:
        print("CPU fallbacks: none")


if __name__ == "__main__":
    main()
