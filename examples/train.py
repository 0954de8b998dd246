"""Train two small models on dipu end to end (or on the CPU, to compare).

    python examples/train.py                      # both models on dipu
    python examples/train.py --device cpu         # the same run on native CPU
    python examples/train.py --model gpt --epochs 3 --seed 1
    python examples/train.py --compile            # the models under torch.compile (inductor)

(a) ``cnn``: ``SmallCNN`` with SGD + momentum on a synthetic 10-class image set (16x16, each class a
fixed random pattern, shifted and noised per sample). (b) ``gpt``: a character-level ``GPT`` with
AdamW on ``examples/data/corpus.txt``. Each epoch prints its loss; the last line gives throughput
and how many ops ran through dipu's CPU fallback. Deterministic for a given ``--seed``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

import dipu
from models import GPT, GPTConfig, SmallCNN

CORPUS = Path(__file__).parent / "data" / "corpus.txt"

# Every fallback is counted and reported in the final line; the per-op warnings are noise here.
warnings.filterwarnings("ignore", message="dipu: .* runs on the CPU through the fallback")


class ProgressBar:
    """A single-line progress bar redrawn in place on stderr."""

    def __init__(self, label: str, total: int, width: int = 30):
        self.label, self.total, self.width = label, total, width

    def update(self, done: int, loss: float) -> None:
        filled = self.width * done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {done}/{self.total} loss {loss:.3f}")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\r" + " " * (len(self.label) + self.width + 30) + "\r")
        sys.stderr.flush()


def synthetic_images(count: int, generator: torch.Generator, size: int = 16, classes: int = 10):
    """Images of class-dependent patterns: a per-class random template, randomly shifted, plus noise."""
    templates = torch.randn(classes, 3, size // 4, size // 4, generator=generator)
    templates = F.interpolate(templates, size=size, mode="bilinear", align_corners=False)
    labels = torch.randint(classes, (count,), generator=generator)
    shifts = torch.randint(-2, 3, (count, 2), generator=generator).tolist()
    images = torch.stack([templates[label].roll(shift, dims=(1, 2)) for label, shift in zip(labels, shifts)])
    return images + 1.5 * torch.randn(images.shape, generator=generator), labels


def train_cnn(device: torch.device, epochs: int, seed: int, batch_size: int = 64,
              compile: bool = False) -> tuple[int, float]:
    """Returns (samples trained, seconds spent training)."""
    data_generator = torch.Generator().manual_seed(seed)
    images, labels = synthetic_images(2048, data_generator)
    images, labels = images.to(device), labels.to(device)
    torch.manual_seed(seed)
    model = SmallCNN(in_channels=3, num_classes=10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model = torch.compile(model) if compile else model
    steps = len(labels) // batch_size
    seconds = 0.0
    for epoch in range(1, epochs + 1):
        order = torch.randperm(len(labels), generator=data_generator).to(device)
        bar = ProgressBar(f"cnn epoch {epoch}/{epochs}", steps)
        total_loss, correct, start = 0.0, 0, time.perf_counter()
        for step in range(steps):
            batch = order[step * batch_size:(step + 1) * batch_size]
            logits = model(images[batch])
            loss = F.cross_entropy(logits, labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
            correct += int((logits.argmax(1) == labels[batch]).sum().item())
            bar.update(step + 1, total_loss / (step + 1))
        seconds += time.perf_counter() - start
        bar.close()
        print(f"cnn epoch {epoch}/{epochs}  loss {total_loss / steps:.4f}  "
              f"accuracy {correct / (steps * batch_size):.3f}")
    return epochs * steps * batch_size, seconds


def train_gpt(device: torch.device, epochs: int, seed: int, batch_size: int = 32,
              compile: bool = False) -> tuple[int, float]:
    """Returns (tokens trained, seconds spent training)."""
    text = CORPUS.read_text(encoding="ascii")
    alphabet = sorted(set(text))
    encoded = torch.tensor([alphabet.index(char) for char in text])
    config = GPTConfig(vocab_size=len(alphabet), seq_len=64, n_layer=2, n_head=4, d_model=64, dropout=0.1)
    window = config.seq_len + 1
    data_generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    model = torch.compile(model) if compile else model
    steps = (len(encoded) - window) // (window * batch_size)
    seconds = 0.0
    for epoch in range(1, epochs + 1):
        # Each epoch cuts the corpus into windows at a fresh offset and visits them in random order.
        offset = int(torch.randint(window, (1,), generator=data_generator))
        windows = encoded[offset:offset + steps * batch_size * window].view(-1, window)
        windows = windows[torch.randperm(len(windows), generator=data_generator)].to(device)
        bar = ProgressBar(f"gpt epoch {epoch}/{epochs}", steps)
        total_loss, start = 0.0, time.perf_counter()
        for step in range(steps):
            batch = windows[step * batch_size:(step + 1) * batch_size]
            _, loss = model(batch[:, :-1], batch[:, 1:])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
            bar.update(step + 1, total_loss / (step + 1))
        seconds += time.perf_counter() - start
        bar.close()
        print(f"gpt epoch {epoch}/{epochs}  loss {total_loss / steps:.4f}")
    return epochs * steps * batch_size * config.seq_len, seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="dipu", help="dipu (default), dipu:1, cpu, ...")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per model (default: cnn 4, gpt 6)")
    parser.add_argument("--model", choices=["cnn", "gpt", "all"], default="all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the models (the first step of each includes compiling)")
    parser.add_argument("--threads", type=int, default=1, help="CPU intra-op threads (default 1)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    # These models are too small to gain from intra-op threads, and on a busy machine OpenMP workers
    # waiting on a descheduled peer cost far more: the CPU run took 10 s with 1 thread, 67 s with 2
    # (2 cores, load average 3). The sim vendor's kernels run on these same CPU threads.
    torch.set_num_threads(args.threads)

    dipu.reset_fallback_counts()
    throughput = []
    if args.model in ("cnn", "all"):
        samples, seconds = train_cnn(device, args.epochs or 4, args.seed, compile=args.compile)
        throughput.append(f"cnn {samples / seconds:.0f} samples/s")
    if args.model in ("gpt", "all"):
        tokens, seconds = train_gpt(device, args.epochs or 6, args.seed, compile=args.compile)
        throughput.append(f"gpt {tokens / seconds:.0f} tokens/s")
    fallbacks = dipu.fallback_counts() if device.type == "dipu" else {}
    if fallbacks:
        busiest = sorted(fallbacks.items(), key=lambda item: -item[1])
        print("ops that ran on the CPU fallback: " + ", ".join(f"{op} x{count}" for op, count in busiest))
    print(f"done on {device}: {', '.join(throughput)}; CPU fallbacks: {sum(fallbacks.values())}")


if __name__ == "__main__":
    main()
