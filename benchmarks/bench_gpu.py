"""GPU mode: dipu on the CUDA vendor against native PyTorch CUDA, in one process.

    DIPU_VENDOR=cuda python benchmarks/bench_gpu.py [--quick]

Each case builds the same model twice (native on ``cuda``, dipu on ``dipu``,
identical initial weights), then times them in interleaved rounds so clock and
thermal drift hit both alike. Times come from wall-clock around whole steps with
a device synchronize at the end of each round; peak memory from each side's own
allocator (``torch.cuda.max_memory_allocated`` sees only native tensors: the
CUDA vendor takes dipu memory straight from cudaMalloc, counted by
``torch.dipu.max_memory_allocated``).

Targets (issue 5): training throughput >= 0.97 of native, ResNet-18 batch-1
inference >= 0.85, peak memory <= 1.05.
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import models  # noqa: E402

import dipu  # noqa: E402


def sync(device: str) -> None:
    (torch.cuda if device == "cuda" else torch.dipu).synchronize()


def classifier_training(model, optimizer, amp_dtype=None):
    def step(images, labels):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(images.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    return step


def lm_training(model, optimizer, amp_dtype=None):
    def step(tokens, targets):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(tokens.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            _, loss = model(tokens, targets)
        loss.backward()
        optimizer.step()
    return step


def inference(model):
    model.eval()

    def step(images):
        with torch.no_grad():
            model(images)
    return step


GPT2_SMALL = models.GPTConfig(vocab_size=50304, seq_len=512, n_layer=12, n_head=12, d_model=768, dropout=0.0)


def cases(quick: bool) -> list[tuple[str, callable, callable, float]]:
    batch = 16 if quick else 64

    def resnet50(device, template):
        model = copy.deepcopy(template).to(device)
        return classifier_training(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))

    def resnet50_batch(device, gen):
        return (torch.randn(batch, 3, 224, 224, generator=gen).to(device),
                torch.randint(0, 1000, (batch,), generator=gen).to(device))

    def gpt(amp):
        def build(device, template):
            model = copy.deepcopy(template).to(device)
            return lm_training(model, torch.optim.AdamW(model.parameters(), lr=3e-4), amp)
        return build

    def gpt_batch(device, gen):
        tokens = torch.randint(0, GPT2_SMALL.vocab_size, (8, GPT2_SMALL.seq_len + 1), generator=gen)
        return tokens[:, :-1].to(device), tokens[:, 1:].to(device)

    def resnet18(device, template):
        return inference(copy.deepcopy(template).to(device))

    def resnet18_batch(device, gen):
        return (torch.randn(1, 3, 224, 224, generator=gen).to(device),)

    torch.manual_seed(0)
    r50 = models.resnet50_like(1000)
    gpt2 = models.GPT(GPT2_SMALL)
    r18 = models.resnet18_like(1000)
    return [
        (f"resnet50 train b{batch} fp32", lambda d: resnet50(d, r50), resnet50_batch, 0.97),
        ("gpt2-small train b8 s512 fp32", lambda d: gpt(None)(d, gpt2), gpt_batch, 0.97),
        ("gpt2-small train b8 s512 bf16", lambda d: gpt(torch.bfloat16)(d, gpt2), gpt_batch, 0.97),
        ("resnet18 infer b1", lambda d: resnet18(d, r18), resnet18_batch, 0.85),
    ]


def measure(build, make_batch, rounds: int, steps: int) -> dict[str, float]:
    runs = {}
    for device in ("cuda", "dipu"):
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        else:
            torch.dipu.reset_peak_memory_stats()
        step = build(device)
        batch = make_batch(device, torch.Generator().manual_seed(0))
        for _ in range(3):
            step(*batch)
        sync(device)
        runs[device] = (step, batch)
    times = {"cuda": [], "dipu": []}
    for _ in range(rounds):
        for device, (step, batch) in runs.items():
            start = time.perf_counter()
            for _ in range(steps):
                step(*batch)
            sync(device)
            times[device].append((time.perf_counter() - start) / steps * 1e3)
    return {
        "cuda_ms": statistics.median(times["cuda"]),
        "dipu_ms": statistics.median(times["dipu"]),
        "cuda_peak": torch.cuda.max_memory_allocated(),
        "dipu_peak": torch.dipu.max_memory_allocated(),
    }


def tiny_add(reps: int = 20000) -> tuple[float, float]:
    results = {}
    for device in ("cuda", "dipu"):
        a = torch.randn(4, device=device)
        for _ in range(100):
            a + a
        sync(device)
        start = time.perf_counter()
        for _ in range(reps):
            a + a
        sync(device)
        results[device] = (time.perf_counter() - start) / reps * 1e6
    return results["cuda"], results["dipu"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller ResNet-50 batch, fewer rounds")
    args = parser.parse_args()
    if not torch.cuda.is_available() or dipu.vendor().name != "cuda":
        sys.exit("bench_gpu needs an NVIDIA GPU and DIPU_VENDOR=cuda")
    rounds, steps = (3, 3) if args.quick else (5, 10)
    print(f"dipu(cuda) vs native CUDA on {torch.cuda.get_device_name()} (torch {torch.__version__})")
    print(f"{'case':<34}{'native ms':>10}{'dipu ms':>10}{'thru ratio':>11}{'mem ratio':>10}  targets")
    for name, build, make_batch, target in cases(args.quick):
        r = measure(build, make_batch, rounds, steps)
        ratio = r["cuda_ms"] / r["dipu_ms"]
        memory = r["dipu_peak"] / max(r["cuda_peak"], 1)
        ok = "ok" if ratio >= target and memory <= 1.05 else "MISSED"
        print(f"{name:<34}{r['cuda_ms']:>10.2f}{r['dipu_ms']:>10.2f}{ratio:>11.3f}{memory:>10.3f}"
              f"  >= {target} / <= 1.05 {ok}")
        torch.cuda.empty_cache()
        torch.dipu.empty_cache()
    native, ours = tiny_add()
    print(f"{'tiny add (4 elements), us':<34}{native:>10.2f}{ours:>10.2f}{native / ours:>11.3f}")
    print(f"CPU fallbacks: {sum(dipu.fallback_counts().values())}")


if __name__ == "__main__":
    main()
