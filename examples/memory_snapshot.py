"""Record the memory history of one training step of examples/train.py's GPT on dipu and render it
with PyTorch's own viewer, as one would on CUDA:

    python examples/memory_snapshot.py --out /tmp/gpt_step
    # writes gpt_step.pickle (open it at pytorch.org/memory_viz), gpt_step_trace.html and
    # gpt_step_segments.html (python -m torch.cuda._memory_viz trace_plot / segment_plot)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import GPT, GPTConfig  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "data" / "corpus.txt"


def one_training_step(device: str, batch_size: int = 32) -> float:
    """The GPT of examples/train.py, one AdamW step on a batch of the corpus; returns the loss."""
    text = CORPUS.read_text(encoding="ascii")
    alphabet = sorted(set(text))
    config = GPTConfig(vocab_size=len(alphabet), seq_len=64, n_layer=2, n_head=4, d_model=64, dropout=0.1)
    torch.manual_seed(0)
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    window = config.seq_len + 1
    tokens = torch.tensor([alphabet.index(c) for c in text[: batch_size * window]]).view(batch_size, window)
    batch = tokens.to(device)
    _, loss = model(batch[:, :-1], batch[:, 1:])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpt_step", help="path prefix of the files written")
    parser.add_argument("--device", default="dipu")
    args = parser.parse_args(argv)
    module = torch.dipu.memory
    module._record_memory_history(max_entries=100000)
    loss = one_training_step(args.device)
    snapshot = Path(f"{args.out}.pickle")
    module._dump_snapshot(str(snapshot))
    module._record_memory_history(enabled=None)
    print(f"loss {loss:.4f}; snapshot {snapshot}")
    for plot, suffix in (("trace_plot", "trace"), ("segment_plot", "segments")):
        html = f"{args.out}_{suffix}.html"
        subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", plot, str(snapshot), "-o", html],
                       check=True)
        print(f"{plot}: {html} ({Path(html).stat().st_size} bytes)")


if __name__ == "__main__":
    main()
