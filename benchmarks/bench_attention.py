"""F.scaled_dot_product_attention on dipu: the fused kernel vs PyTorch's math path, time and peak memory.

    python benchmarks/bench_attention.py [--batch 4] [--heads 12] [--length 1024] [--dim 64] [--reps 5] [--dropout P]

Input: GPT-2-small attention (12 heads of 64, 1024 tokens), causal, float32, batch 4 by default. Three ways,
in one process, alternating rounds so machine noise hits all alike, each reporting its median:
- ``dipu fused``: the default on dipu, the overrideable SDPA backend (dipu/ops/attention.py);
- ``dipu math``: the same call under ``sdpa_kernel(SDPBackend.MATH)``, the decomposition dipu ran before;
- ``cpu native``: the same call on CPU tensors (PyTorch's own CPU choice, its flash kernel), for reference.
A training step is forward + backward of ``out.sum()``; an inference step is the forward under no_grad.
``--dropout P`` applies attention dropout in training steps (dipu's fused kernel then runs its blockwise
algorithm, drawing the mask from the dipu generator and redrawing it in backward).

Peak memory is ``torch.dipu.max_memory_allocated`` above what was allocated before the step (inputs, and
their gradients from the previous step freed). It counts dipu device memory only: kernels of the torch op
library computing on host aliases may use host scratch memory the dipu allocator does not see. For the
fused CPU kernel that is its result buffers before they are copied into the dipu outputs (the size of the
output and logsumexp, plus repeated key/value heads for grouped-query inputs) and its per-thread tiles;
never an L x S matrix.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import dipu  # noqa: F401


def _step(q, k, v, train: bool, dropout: float = 0.0):
    if train:
        F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout).sum().backward()
        for t in (q, k, v):
            t.grad = None
    else:
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    if torch.dipu.is_initialized():
        torch.dipu.synchronize()
    return time.perf_counter() - start


def _peak_mib(fn) -> float:
    torch.dipu.synchronize()
    torch.dipu.reset_peak_memory_stats()
    base = torch.dipu.memory_allocated()
    fn()
    return (torch.dipu.max_memory_allocated() - base) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dropout", type=float, default=0.0)
    args = parser.parse_args()
    shape = (args.batch, args.heads, args.length, args.dim)
    torch.manual_seed(0)
    host = [torch.randn(shape) for _ in range(3)]
    on_dipu = [t.to("dipu").requires_grad_() for t in host]
    on_cpu = [t.clone().requires_grad_() for t in host]

    def fused(train):
        return lambda: _step(*on_dipu, train, args.dropout)

    def math(train):
        def run():
            with sdpa_kernel(SDPBackend.MATH):
                _step(*on_dipu, train, args.dropout)
        return run

    def native(train):
        return lambda: _step(*on_cpu, train, args.dropout)

    scores_mib = args.batch * args.heads * args.length ** 2 * 4 / 2**20
    print(f"SDPA causal float32, dropout {args.dropout} in training, (batch, heads, length, head dim) = {shape}; "
          f"one L x S score matrix is "
          f"{scores_mib:.0f} MiB; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'step':<10}{'way':<12}{'median ms':>11}{'peak dipu MiB':>15}")
    for train in (False, True):
        ways = {"dipu fused": fused(train), "dipu math": math(train), "cpu native": native(train)}
        for fn in ways.values():
            fn()  # warm up
        times = {name: [] for name in ways}
        for _ in range(args.reps):
            for name, fn in ways.items():
                times[name].append(_timed(fn))
        for name, fn in ways.items():
            peak = f"{_peak_mib(fn):15.1f}" if name.startswith("dipu") else f"{'-':>15}"
            print(f"{'training' if train else 'inference':<10}{name:<12}{statistics.median(times[name]) * 1e3:>11.1f}"
                  f"{peak}")


if __name__ == "__main__":
    main()
