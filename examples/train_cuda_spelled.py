"""examples/train.py's training loops as a CUDA user writes them, run unchanged on dipu.

    DIPU_MOCK_CUDA=1 python examples/train_cuda_spelled.py            # both models, on dipu
    DIPU_MOCK_CUDA=1 python examples/train_cuda_spelled.py --model cnn --epochs 1 --amp

Nothing here names dipu: ``import torch`` loads dipu through PyTorch's backend autoload, and
``DIPU_MOCK_CUDA=1`` makes ``.cuda()``, ``device="cuda"``, ``torch.cuda.*`` and
``torch.autocast("cuda")`` mean the dipu device (docs/user-guide.md: "Running CUDA scripts unchanged"). The
data, seeds and update rules are those of examples/train.py, so each epoch's loss matches
``python examples/train.py --device dipu`` (without ``--amp``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from models import GPT, GPTConfig, SmallCNN

CORPUS = Path(__file__).parent / "data" / "corpus.txt"


def synthetic_images(count: int, generator: torch.Generator, size: int = 16, classes: int = 10):
    """examples/train.py's image set: per-class random templates, shifted, plus noise."""
    templates = torch.randn(classes, 3, size // 4, size // 4, generator=generator)
    templates = F.interpolate(templates, size=size, mode="bilinear", align_corners=False)
    labels = torch.randint(classes, (count,), generator=generator)
    shifts = torch.randint(-2, 3, (count, 2), generator=generator).tolist()
    images = torch.stack([templates[label].roll(shift, dims=(1, 2)) for label, shift in zip(labels, shifts)])
    return images + 1.5 * torch.randn(images.shape, generator=generator), labels


def train_cnn(epochs: int, seed: int, amp: bool, batch_size: int = 64) -> None:
    data_generator = torch.Generator().manual_seed(seed)
    images, labels = synthetic_images(2048, data_generator)
    images, labels = images.cuda(), labels.to("cuda")
    torch.manual_seed(seed)
    model = SmallCNN(in_channels=3, num_classes=10).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    steps = len(labels) // batch_size
    for epoch in range(1, epochs + 1):
        order = torch.randperm(len(labels), generator=data_generator).to(torch.device("cuda"))
        total_loss, correct = 0.0, 0
        for step in range(steps):
            batch = order[step * batch_size:(step + 1) * batch_size]
            with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
                logits = model(images[batch])
                loss = F.cross_entropy(logits, labels[batch])
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            total_loss += loss.item()
            correct += int((logits.argmax(1) == labels[batch]).sum().item())
        print(f"cnn epoch {epoch}/{epochs}  loss {total_loss / steps:.4f}  "
              f"accuracy {correct / (steps * batch_size):.3f}")


def train_gpt(epochs: int, seed: int, amp: bool, batch_size: int = 32) -> None:
    text = CORPUS.read_text(encoding="ascii")
    alphabet = sorted(set(text))
    encoded = torch.tensor([alphabet.index(char) for char in text])
    config = GPTConfig(vocab_size=len(alphabet), seq_len=64, n_layer=2, n_head=4, d_model=64, dropout=0.1)
    window = config.seq_len + 1
    data_generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = GPT(config).to("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    steps = (len(encoded) - window) // (window * batch_size)
    for epoch in range(1, epochs + 1):
        offset = int(torch.randint(window, (1,), generator=data_generator))
        windows = encoded[offset:offset + steps * batch_size * window].view(-1, window)
        windows = windows[torch.randperm(len(windows), generator=data_generator)].cuda(non_blocking=True)
        total_loss = 0.0
        for step in range(steps):
            batch = windows[step * batch_size:(step + 1) * batch_size]
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                _, loss = model(batch[:, :-1], batch[:, 1:])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
        print(f"gpt epoch {epoch}/{epochs}  loss {total_loss / steps:.4f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=None, help="epochs per model (default: cnn 4, gpt 6)")
    parser.add_argument("--model", choices=["cnn", "gpt", "all"], default="all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--amp", action="store_true", help="autocast('cuda') and a GradScaler")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with DIPU_MOCK_CUDA=1 to train on dipu")
    torch.set_num_threads(1)  # as examples/train.py: these models are too small for intra-op threads
    torch.cuda.manual_seed_all(args.seed)
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    if args.model in ("cnn", "all"):
        train_cnn(args.epochs or 4, args.seed, args.amp)
    if args.model in ("gpt", "all"):
        train_gpt(args.epochs or 6, args.seed, args.amp)
    torch.cuda.synchronize()
    print(f"done on {torch.cuda.get_device_name()} in {time.perf_counter() - start:.1f} s; "
          f"peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
