"""Memory the caching allocator reserves for workloads whose shapes vary, and for fixed-shape steps.

    python benchmarks/bench_memory.py [--cases varlen,decode,resnet,gpt] [--segments plain,expandable]
                                      [--steps N] [--seed N] [--tokens N] [--fixed-steps N] [--no-cpu]
                                      [--threads N]

Cases (Note [Caching allocator] and Note [Block sizes] in dipu/csrc/allocator.cpp say what they measure):

- ``varlen``: a 2-layer Transformer encoder (d=256, 8 heads) with AdamW, batch 8, a sequence length drawn
  from 16..512 each step (dynamic padding, drawn with ``random.Random(--seed)``, default 0), ``--steps`` steps
  (default 60).
- ``decode``: greedy ``generate()`` of a small random GPT-2 from transformers (4 layers, d=512, batch 4,
  a 16-token prompt, ``--tokens`` new tokens, default 300): the KV cache grows by one token a step. Without
  transformers, a hand-written loop over the same kind of cache.
- ``resnet``, ``gpt``: the fixed-shape training steps of benchmarks/bench_models.py (ResNet-18-like batch 16,
  4-layer GPT), ``--fixed-steps`` steps (default 10).

Per case, from ``torch.dipu.memory_stats()`` after the whole run (the cache emptied and the statistics reset
before it): peak allocated, peak reserved and their ratio; device mallocs (``num_device_alloc``) per step
after the warm-up (the first 10 steps, or a third of them when fewer than 30); the median step time on
dipu and on the CPU (the same steps, same shapes, unless ``--no-cpu``). Each case runs once per kind of
segment in ``--segments`` (default both): ``plain`` and ``expandable`` (``expandable_segments:True``, Note
[Expandable segments]); the other allocator settings are whatever ``PYTORCH_ALLOC_CONF`` /
``PYTORCH_DIPU_ALLOC_CONF`` say.

Targets (the variable-shape ones from the allocator's design): reserved / peak <= 1.6 for ``varlen`` and
<= 1.3 for ``decode`` with plain segments, <= 1.15 and <= 1.1 with expandable segments, where ``varlen`` should
also need no device malloc after step 10.

Measured 2026-12-01, sim vendor, torch 2.13 CPU, 2 cores shared with two compiling processes (so the times
are noise; the memory columns are not), ``--fixed-steps 6``. Before splitting (a block served requests up
to 25% smaller than itself):

    case   steps peak alloc MiB reserved MiB res/peak mallocs mallocs/step
    varlen    60          164.8       1067.3     6.48     579         4.56
    decode   300           73.0       3133.0    42.94    2487         7.95
    resnet     6          152.3        178.9     1.17     275         0.00
    gpt        6          146.6        171.0     1.17     296         0.00

With splitting and merging (Note [Splitting blocks] in dipu/csrc/allocator.cpp), plain and expandable segments
(Note [Expandable segments]), measured 2026-12-02 on the same machine as loaded, ``--no-cpu`` (varlen and decode
with the defaults, resnet and gpt with ``--fixed-steps 6``):

    case     segments steps  peak alloc MiB  reserved MiB  res/peak  mallocs  mallocs/step
    varlen      plain    60           160.2         222.3      1.39       31          0.08
    varlen expandable    60           160.2         202.3      1.26       34          0.08
    decode      plain   300            73.0         100.0      1.37       14          0.02
    decode expandable   300            73.0          88.0      1.21       34          0.06
    resnet      plain     6           152.3         190.5      1.25       15          0.00
    resnet expandable     6           152.3         166.5      1.09       26          0.00
    gpt         plain     6           146.6         172.4      1.18       44          0.00
    gpt    expandable     6           146.6         164.4      1.12       58          0.00

With expandable segments a request that finds no block in its own pool now borrows a free block of the other
pool's segment before mapping more (Note [Borrowing between pools]); plain segments are unchanged. Measured
2026-12-02, same machine and flags, the same process order as above (plain and expandable of each case):

    case     segments steps  peak alloc MiB  reserved MiB  res/peak  mallocs  mallocs/step
    varlen      plain    60           160.2         222.3      1.39       31          0.08
    varlen expandable    60           160.2         188.3      1.18       21          0.04
    decode      plain   300            73.0          98.0      1.34       13          0.02
    decode expandable   300            73.0          80.0      1.10       30          0.04
    resnet      plain     6           152.3         190.5      1.25       15          0.00
    resnet expandable     6           152.3         166.5      1.09       25          0.25
    gpt         plain     6           146.6         172.4      1.18       44          0.00
    gpt    expandable     6           146.6         160.4      1.09       48          0.00

The plain rows vary from run to run (varlen 220.3-222.3 MiB, decode 98.0-100.0 MiB, with or without this change):
best fit breaks ties by address, and the sim vendor's segments lie where the host allocator puts them. The
expandable rows repeat exactly (their addresses are offsets in one reserved range).

Before the two changes below, decode plain missed <= 1.3 (1.34-1.37): with the pools apart and 20 MiB segments
for large requests under 10 MiB (as in CUDA), the large pool needs 4 segments (80 MiB) for its 68.1 MiB peak and
the small pool at least 14 MiB for its 13.8 MiB peak, so even perfect packing reserves 94 MiB, 1.29x. Varlen
expandable missed <= 1.15 (1.18) and 0 mallocs per step after step 10 (2 maps in 50 steps): holes between live
blocks of the large pool's segment (174 MiB mapped for a 153 MiB peak there).

Two changes since (Note [Borrowing between pools] and Note [Placement in expandable segments]): a small request
that finds no small block takes free space of a large segment, plain ones included (a stated departure from
CUDA); and within an expandable segment a large request takes the lowest free block that fits, a small one the
best fit other than the segment's free end, and a borrowed block the top of its free block. Measured 2026-12-02,
same machine and flags:

    case     segments steps  peak alloc MiB  reserved MiB  res/peak  mallocs  mallocs/step
    varlen      plain    60           160.2         206.3      1.29       17          0.00
    varlen expandable    60           160.2         172.3      1.08       20          0.00
    decode      plain   300            73.0          84.0      1.15        6          0.01
    decode expandable   300            73.0          80.0      1.10       30          0.04
    resnet      plain     6           152.3         176.5      1.16        8          0.00
    resnet expandable     6           152.3         166.5      1.09       25          0.25
    gpt         plain     6           146.6         172.4      1.18       26          0.00
    gpt    expandable     6           146.6         160.4      1.09       48          0.00

These rows repeated exactly in three runs, the plain ones too. With the default 10 fixed steps resnet expandable
maps nothing after its warm-up (0.00). Against the targets: all met (varlen plain <= 1.6, expandable <= 1.15 with
0 mallocs per step after step 10; decode plain <= 1.3, expandable <= 1.1, 1.097; the fixed-shape cases' peaks
unchanged and reserved the same or lower). The placement rules were chosen on these workloads' allocation
sequences: benchmarks/replay_memory.py replays a recorded sequence through a model of the expandable pools, and
for other variable-length seeds (``--seed``) and a shorter decode they are better in two cases and one 2 MiB
granule worse in one (figures in the Note).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import dipu  # noqa: F401  (activates the dipu device)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import TrainingCase, gpt_case, resnet_case  # noqa: E402

MiB = 2**20
warnings.filterwarnings("ignore", message="dipu: .* runs on the CPU through the fallback")


class Recorder:
    """Per-step wall times and device-malloc counts of one run on one device."""

    def __init__(self, device: str):
        self.device = device
        self.times: list[float] = []
        self.mallocs: list[int] = []
        self._last = time.perf_counter()

    def step_done(self) -> None:
        if self.device == "dipu":
            torch.dipu.synchronize()
            self.mallocs.append(torch.dipu.memory_stats()["num_device_alloc"])
        now = time.perf_counter()
        self.times.append((now - self._last) * 1e3)
        self._last = now


def varlen_run(device: str, steps: int, rec: Recorder, seed: int = 0) -> None:
    torch.manual_seed(0)
    lengths = random.Random(seed)
    layer = nn.TransformerEncoderLayer(256, 8, dim_feedforward=1024, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(device)
    head = nn.Linear(256, 256).to(device)
    optimizer = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-4)
    rec._last = time.perf_counter()
    for _ in range(steps):
        seq = lengths.randint(16, 512)
        x = torch.randn(8, seq, 256, device=device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(head(model(x)), x)
        loss.backward()
        optimizer.step()
        rec.step_done()


def decode_run(device: str, tokens: int, rec: Recorder) -> None:
    torch.manual_seed(0)
    prompt = torch.randint(1000, (4, 16))
    try:
        from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessor, LogitsProcessorList
    except ImportError:
        manual_decode(device, prompt, tokens, rec)
        return
    config = GPT2Config(vocab_size=1000, n_positions=tokens + 32, n_embd=512, n_layer=4, n_head=8,
                        bos_token_id=1, eos_token_id=2)
    model = GPT2LMHeadModel(config).eval().to(device)

    class EachToken(LogitsProcessor):
        def __call__(self, input_ids, scores):
            rec.step_done()
            return scores

    with torch.no_grad():
        rec._last = time.perf_counter()
        model.generate(prompt.to(device), max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                       pad_token_id=0, logits_processor=LogitsProcessorList([EachToken()]))


def manual_decode(device: str, prompt: torch.Tensor, tokens: int, rec: Recorder) -> None:
    """A KV-cache decode without transformers: 4 layers, d=512, the cache concatenated one token a step."""
    d, heads, layers = 512, 8, 4
    embed = nn.Embedding(1000, d).to(device)
    blocks = [nn.ModuleDict({"qkv": nn.Linear(d, 3 * d), "out": nn.Linear(d, d), "mlp": nn.Sequential(
        nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))}).to(device) for _ in range(layers)]
    head = nn.Linear(d, 1000).to(device)
    cache: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * layers
    ids = prompt.to(device)
    with torch.no_grad():
        x = ids
        rec._last = time.perf_counter()
        for _ in range(tokens):
            h = embed(x)
            for i, blk in enumerate(blocks):
                q, k, v = blk["qkv"](h).view(h.shape[0], h.shape[1], 3, heads, d // heads).unbind(2)
                q, k, v = (t.transpose(1, 2) for t in (q, k, v))
                if cache[i] is not None:
                    k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
                cache[i] = (k, v)
                a = F.scaled_dot_product_attention(q, k, v, is_causal=cache[i][0].shape[2] == q.shape[2])
                h = h + blk["out"](a.transpose(1, 2).reshape(h.shape))
                h = h + blk["mlp"](h)
            x = head(h[:, -1:]).argmax(-1)
            rec.step_done()


def fixed_run(make, device: str, steps: int, rec: Recorder) -> None:
    model, batch, loss_fn, make_optimizer = make()
    case = TrainingCase(model, batch, loss_fn, make_optimizer, device)
    rec._last = time.perf_counter()
    for _ in range(steps):
        case.step()
        rec.step_done()


def run_case(name: str, segments: str, args, fn) -> dict:
    gc.collect()
    torch.dipu.memory._set_allocator_settings(f"expandable_segments:{segments == 'expandable'}")
    torch.dipu.synchronize()
    torch.dipu.empty_cache()
    torch.dipu.reset_peak_memory_stats()
    torch.dipu.reset_accumulated_memory_stats()
    rec = Recorder("dipu")
    fn("dipu", rec)
    stats = torch.dipu.memory_stats()
    steps = len(rec.times)
    warm = 10 if steps >= 30 else max(1, steps // 3)
    mallocs_after = (rec.mallocs[-1] - rec.mallocs[warm - 1]) / max(steps - warm, 1)
    cpu_ms = float("nan")
    if not args.no_cpu:
        cpu_rec = Recorder("cpu")
        fn("cpu", cpu_rec)
        cpu_ms = statistics.median(cpu_rec.times[warm:] or cpu_rec.times)
    row = {
        "case": name, "segments": segments, "steps": steps,
        "peak_alloc": stats["allocated_bytes.all.peak"] / MiB,
        "peak_reserved": stats["reserved_bytes.all.peak"] / MiB,
        "mallocs": stats["num_device_alloc"],
        "mallocs_per_step": mallocs_after,
        "retries": stats["num_alloc_retries"],
        "dipu_ms": statistics.median(rec.times[warm:] or rec.times),
        "cpu_ms": cpu_ms,
    }
    row["ratio"] = row["peak_reserved"] / max(row["peak_alloc"], 1e-9)
    print(f"[{name}, {segments}] {steps} steps: peak allocated {row['peak_alloc']:.0f} MiB, "
          f"reserved {row['peak_reserved']:.0f} MiB "
          f"({row['ratio']:.2f}x), {row['mallocs_per_step']:.2f} device mallocs/step after step {warm}, "
          f"{row['dipu_ms']:.1f} ms/step (cpu {cpu_ms:.1f})", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="varlen,decode,resnet,gpt", help="comma-separated: varlen,decode,resnet,gpt")
    parser.add_argument("--segments", default="plain,expandable", help="comma-separated: plain,expandable")
    parser.add_argument("--steps", type=int, default=60, help="varlen training steps")
    parser.add_argument("--seed", type=int, default=0, help="varlen: seed of the sequence lengths")
    parser.add_argument("--tokens", type=int, default=300, help="decode: new tokens")
    parser.add_argument("--fixed-steps", type=int, default=10, help="resnet/gpt training steps")
    parser.add_argument("--no-cpu", action="store_true", help="skip the CPU runs (no step-time comparison)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cases = {
        "varlen": lambda device, rec: varlen_run(device, args.steps, rec, args.seed),
        "decode": lambda device, rec: decode_run(device, args.tokens, rec),
        "resnet": lambda device, rec: fixed_run(resnet_case, device, args.fixed_steps, rec),
        "gpt": lambda device, rec: fixed_run(gpt_case, device, args.fixed_steps, rec),
    }
    chosen = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in cases]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {list(cases)}")
    kinds = [k.strip() for k in args.segments.split(",") if k.strip()]
    if not kinds or any(k not in ("plain", "expandable") for k in kinds):
        parser.error(f"--segments {args.segments!r}: choose from plain, expandable")
    conf = {k: os.environ[k] for k in ("PYTORCH_ALLOC_CONF", "PYTORCH_DIPU_ALLOC_CONF") if k in os.environ}
    print(f"dipu allocator settings: {conf or 'defaults'}; torch threads {torch.get_num_threads()}", flush=True)
    rows = [run_case(name, kind, args, cases[name]) for name in chosen for kind in kinds]
    print(f"\n{'case':<8}{'segments':>11}{'steps':>6}{'peak alloc MiB':>16}{'reserved MiB':>14}{'res/peak':>10}"
          f"{'mallocs':>9}{'mallocs/step':>14}{'retries':>9}{'dipu ms':>9}{'cpu ms':>8}{'ratio':>7}")
    for r in rows:
        print(f"{r['case']:<8}{r['segments']:>11}{r['steps']:>6}{r['peak_alloc']:>16.1f}{r['peak_reserved']:>14.1f}{r['ratio']:>10.2f}"
              f"{r['mallocs']:>9}{r['mallocs_per_step']:>14.2f}{r['retries']:>9}{r['dipu_ms']:>9.1f}"
              f"{r['cpu_ms']:>8.1f}{r['dipu_ms'] / r['cpu_ms']:>7.2f}")


if __name__ == "__main__":
    main()
