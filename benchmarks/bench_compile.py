"""torch.compile vs eager on dipu, on examples/train.py's two models, side by side in one process.

    python benchmarks/bench_compile.py                  # both models, 20 timed steps each
    python benchmarks/bench_compile.py --model cnn --steps 10 --device cpu

For each model: a fresh model and optimizer per mode (same seed), one training step at a time
(forward, loss, backward, optimizer step, ``loss.item()``), the two modes alternating step by step.
Reported: the first step (for ``compile``, this includes dynamo tracing and inductor's code generation and
C++ build), the median steady-state step after 3 warm-up steps, and the largest difference of the losses of the
two modes over the run (dropout is off, so the two modes compute the same function). Then the trained
model in inference (``eval()``, no grad, which dynamo compiles as a graph of its own): the median
inference step after a warm-up one, and the largest difference of the two modes' inference losses.
Inductor's on-disk caches are disabled so the first step measures a cold compile.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from models import GPT, GPTConfig, SmallCNN  # noqa: E402


def cnn_case(device):
    torch.manual_seed(0)
    model = SmallCNN(in_channels=3, num_classes=10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    batches = [(torch.randn(64, 3, 16, 16, generator=generator).to(device),
                torch.randint(10, (64,), generator=generator).to(device)) for _ in range(4)]
    return model, optimizer, lambda m, i: F.cross_entropy(m(batches[i % 4][0]), batches[i % 4][1])


def gpt_case(device):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=65, seq_len=64, n_layer=2, n_head=4, d_model=64, dropout=0.0)
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    generator = torch.Generator().manual_seed(1)
    batches = [torch.randint(65, (32, 65), generator=generator).to(device) for _ in range(4)]
    return model, optimizer, lambda m, i: m(batches[i % 4][:, :-1], batches[i % 4][:, 1:])[1]


class Mode:
    """One model and optimizer of a case, run eagerly or compiled, recording each step's time."""

    def __init__(self, case, device, compiled: bool):
        self.model, self.optimizer, self.loss_of = case(device)
        self.forward = torch.compile(self.model) if compiled else self.model
        self.train_times, self.losses, self.infer_times, self.inference = [], [], [], None

    def train_step(self, step: int) -> None:
        start = time.perf_counter()
        loss = self.loss_of(self.forward, step)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.losses.append(loss.item())
        self.train_times.append(time.perf_counter() - start)

    def infer_step(self) -> None:
        start = time.perf_counter()
        with torch.no_grad():
            self.inference = self.loss_of(self.forward, 0).item()
        self.infer_times.append(time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["cnn", "gpt", "all"], default="all")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="dipu")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as examples/train.py
    device = torch.device(args.device)
    cases = {"cnn": cnn_case, "gpt": gpt_case}
    names = list(cases) if args.model == "all" else [args.model]
    print(f"{'model':<6}{'mode':<9}{'first step s':>13}{'train ms':>10}{'speedup':>9}{'max |loss diff|':>17}"
          f"{'infer ms':>10}{'speedup':>9}{'infer diff':>12}")
    for name in names:
        eager, compiled = modes = (Mode(cases[name], device, False), Mode(cases[name], device, True))
        for step in range(args.steps):  # alternating, so machine noise hits both modes alike
            for mode in modes:
                mode.train_step(step)
        for mode in modes:
            mode.model.eval()
        for _ in range(args.steps // 2 + 1):
            for mode in modes:
                mode.infer_step()
        eager_ms, comp_ms = (statistics.median(m.train_times[3:]) * 1e3 for m in modes)
        eager_ims, comp_ims = (statistics.median(m.infer_times[1:]) * 1e3 for m in modes)
        diff = max(abs(a - b) for a, b in zip(eager.losses, compiled.losses))
        print(f"{name:<6}{'eager':<9}{eager.train_times[0]:>13.2f}{eager_ms:>10.2f}{'':>26}{eager_ims:>10.2f}")
        print(f"{name:<6}{'compile':<9}{compiled.train_times[0]:>13.2f}{comp_ms:>10.2f}{eager_ms / comp_ms:>8.2f}x"
              f"{diff:>17.2e}{comp_ims:>10.2f}{eager_ims / comp_ims:>8.2f}x"
              f"{abs(eager.inference - compiled.inference):>12.2e}")


if __name__ == "__main__":
    main()
