"""dipu on the CUDA vendor against native PyTorch CUDA, each side in its own process.

    python benchmarks/bench_gpu.py [--quick] [--cases NAME,...] [--json PATH]

Note [Native and dipu in separate processes]
A process where dipu is active is not a native CUDA process any more: PyTorch takes dipu for its one
accelerator, and a native CUDA backward cannot run there (Note [CUDA backward beside dipu] in
dipu/integrations/coexistence.py). So every case runs in two worker processes, started side by side: a native one
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, no dipu variable: dipu never loads) and a dipu one
(``DIPU_VENDOR=cuda``). Each builds the same model from the same seed and warms up; then the parent
asks them for timed rounds in turn, the side that goes first alternating, so clock and thermal drift
hit both alike and only one side uses the GPU at a time. Times are wall-clock around whole steps with a
device synchronize at the end of each round (the median round is reported); peak memory is each side's
own allocator's (``torch.cuda`` or ``torch.dipu.max_memory_allocated``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve()
SIDES = ("native", "dipu")
#: case -> (what it runs, throughput target of dipu relative to native)
CASES = {
    "tiny-add": ("a + a on 4 elements, per op", None),
    "resnet18-infer-b1": ("ResNet-18 inference, batch 1", 0.85),
    "resnet50-train-b64": ("ResNet-50 training, batch 64 (16 with --quick)", 0.97),
    "gpt2-train-fp32": ("GPT-2-small training, batch 8 x 512 tokens, fp32", 0.97),
    "gpt2-train-bf16": ("GPT-2-small training, batch 8 x 512 tokens, bf16 autocast", 0.97),
}


# ---- the worker: one side of one case ------------------------------------------------------------------


def _build(case: str, device: str, quick: bool):
    """(step, batch, steps per round) of ``case`` on ``device``."""
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(HERE.parents[1] / "examples"))
    import models

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    if case == "tiny-add":
        a = torch.randn(4, generator=gen).to(device)
        reps = 2000

        def step(a):
            for _ in range(reps):
                a + a
        return step, (a,), 5, reps  # per-op time: divide by reps
    if case == "resnet18-infer-b1":
        model = models.resnet18_like(1000).to(device).eval()

        def step(images):
            with torch.no_grad():
                model(images)
        return step, (torch.randn(1, 3, 224, 224, generator=gen).to(device),), 20, 1
    amp = torch.bfloat16 if case.endswith("bf16") else None
    if case.startswith("resnet50"):
        batch = 16 if quick else 64
        model = models.resnet50_like(1000).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        data = (torch.randn(batch, 3, 224, 224, generator=gen).to(device),
                torch.randint(0, 1000, (batch,), generator=gen).to(device))

        def loss_of(images, labels):
            return F.cross_entropy(model(images), labels)
    else:
        config = models.GPTConfig(vocab_size=50304, seq_len=512, n_layer=12, n_head=12, d_model=768, dropout=0.0)
        model = models.GPT(config).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        tokens = torch.randint(0, config.vocab_size, (8, config.seq_len + 1), generator=gen)
        data = (tokens[:, :-1].to(device), tokens[:, 1:].to(device))

        def loss_of(inputs, targets):
            return model(inputs, targets)[1]

    def step(*batch):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.split(":")[0], dtype=amp, enabled=amp is not None):
            loss = loss_of(*batch)
        loss.backward()
        optimizer.step()
    return step, data, 3 if quick else 10, 1


def worker(side: str, case: str, quick: bool) -> None:
    """Serve the parent: build and warm up, then one timed round per ``round`` line on stdin."""
    import torch

    device = "cuda" if side == "native" else "dipu"
    if side == "dipu":
        import dipu

        assert dipu.vendor().name == "cuda", "the dipu worker runs with DIPU_VENDOR=cuda"
    module = torch.cuda if side == "native" else torch.dipu
    step, batch, steps, per = _build(case, device, quick)
    for _ in range(3):
        step(*batch)
    module.synchronize()
    module.reset_peak_memory_stats()
    step(*batch)
    module.synchronize()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        start = time.perf_counter()
        for _ in range(steps):
            step(*batch)
        module.synchronize()
        elapsed = (time.perf_counter() - start) / steps / per
        print(json.dumps({"ms": elapsed * 1e3, "peak": module.max_memory_allocated()}), flush=True)


# ---- the parent ------------------------------------------------------------------------------------------------


def _environment(side: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIPU_")}
    if side == "native":  # Note [Native and dipu in separate processes]
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    else:
        env.update({k: v for k, v in os.environ.items() if k.startswith("DIPU_")}, DIPU_VENDOR="cuda")
    return env


class Worker:
    def __init__(self, side: str, case: str, quick: bool):
        self.side = side
        command = [sys.executable, str(HERE), "--worker", side, "--cases", case] + (["--quick"] if quick else [])
        self.proc = subprocess.Popen(command, env=_environment(side), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.side} worker exited ({self.proc.wait()}) before answering")
        return json.loads(line)

    def round(self) -> dict:
        self.proc.stdin.write("round\n")
        self.proc.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def run_case(case: str, rounds: int, quick: bool) -> dict:
    workers = {side: Worker(side, case, quick) for side in SIDES}
    try:
        for w in workers.values():
            w.answer()  # ready
        results = {side: [] for side in SIDES}
        for r in range(rounds):
            for side in SIDES if r % 2 == 0 else reversed(SIDES):
                results[side].append(workers[side].round())
    finally:
        for w in workers.values():
            try:
                w.close()
            except Exception:
                w.proc.kill()
    row = {"case": case}
    for side in SIDES:
        row[f"{side}_ms"] = statistics.median(r["ms"] for r in results[side])
        row[f"{side}_peak"] = max(r["peak"] for r in results[side])
    row["ratio"] = row["native_ms"] / row["dipu_ms"]  # throughput of dipu relative to native
    row["memory_ratio"] = row["dipu_peak"] / max(row["native_peak"], 1)
    return row


def table(rows: list[dict]) -> str:
    lines = [f"{'case':<22}{'native':>12}{'dipu':>12}{'dipu/native thru':>18}{'native peak':>13}{'dipu peak':>11}"
             f"{'mem ratio':>11}  target"]
    for row in rows:
        if "error" in row:  # a side that crashed or raised: the other cases still run
            lines.append(f"{row['case']:<22}FAILED: {row['error']}")
            continue
        unit = "us" if row["case"] == "tiny-add" else "ms"
        scale = 1e3 if unit == "us" else 1.0
        target = CASES[row["case"]][1]
        verdict = "" if target is None else f">= {target} {'ok' if row['ratio'] >= target else 'MISSED'}"
        lines.append(f"{row['case']:<22}{row['native_ms'] * scale:>9.2f} {unit}{row['dipu_ms'] * scale:>9.2f} {unit}"
                     f"{row['ratio']:>18.3f}{row['native_peak'] / 2**20:>10.0f}MiB{row['dipu_peak'] / 2**20:>8.0f}MiB"
                     f"{row['memory_ratio']:>11.3f}  {verdict}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="cases: " + "; ".join(f"{k}: {v[0]}" for k, v in CASES.items()))
    parser.add_argument("--quick", action="store_true", help="ResNet-50 batch 16, 3 rounds, fewer steps")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases (default: all)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per side (default 5; 3 with --quick)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the rows to this file")
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    if args.worker:
        worker(args.worker, cases[0], args.quick)
        return 0
    import torch  # the parent only asks whether there is a GPU; it loads no dipu

    if not torch.cuda.is_available():
        print("bench_gpu: skipped: needs an NVIDIA GPU and a CUDA build of torch "
              f"(torch {torch.__version__}, torch.cuda.is_available() is False)")
        return 0
    rounds = args.rounds or (3 if args.quick else 5)
    print(f"dipu(cuda) vs native CUDA on {torch.cuda.get_device_name()} (torch {torch.__version__}), "
          f"separate processes, {rounds} alternating rounds", flush=True)
    rows = []
    for case in cases:
        try:
            rows.append(run_case(case, rounds, args.quick))
        except (RuntimeError, OSError, ValueError) as error:  # a worker died or answered nonsense
            rows.append({"case": case, "error": str(error)})
        print(table(rows).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "rows": rows}, indent=1))
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
