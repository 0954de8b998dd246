"""Train the character-level GPT on several dipu devices with DDP (or FSDP2), launched by torchrun.

    torchrun --nproc-per-node 2 examples/train_ddp.py            # DDP, rank r on dipu:r
    torchrun --nproc-per-node 2 examples/train_ddp.py --fsdp     # FSDP2: fully_shard per block
    torchrun --nproc-per-node 1 examples/train_ddp.py            # one rank, the same global batch

Every rank trains on its share of each global batch of ``--batch-size`` windows of
``examples/data/corpus.txt``; ``dist.init_process_group()`` names no backend and gets dipu's
``dicl`` (gloo for CPU tensors). Rank 0 prints the loss per epoch and the mean step time.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import dipu  # noqa: F401  (plain `import torch` loads it too, unless autoload is off)
from models import GPT, GPTConfig

CORPUS = Path(__file__).parent / "data" / "corpus.txt"
warnings.filterwarnings("ignore", message="dipu: .* runs on the CPU through the fallback")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fsdp", action="store_true", help="shard with FSDP2 (fully_shard) instead of DDP")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=0, help="stop each epoch after this many steps (0: all)")
    parser.add_argument("--batch-size", type=int, default=32, help="global batch, split across ranks")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.dipu.set_device(local_rank)
    device = torch.device("dipu", local_rank)
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} is not divisible by the world size {world}")
    per_rank = args.batch_size // world

    text = CORPUS.read_text(encoding="ascii")
    alphabet = sorted(set(text))
    encoded = torch.tensor([alphabet.index(char) for char in text])
    config = GPTConfig(vocab_size=len(alphabet), seq_len=64, n_layer=2, n_head=4, d_model=64, dropout=0.0)
    window = config.seq_len + 1

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = GPT(config).to(device)
    if args.fsdp:
        from torch.distributed.fsdp import fully_shard

        for block in model.modules():
            if type(block).__name__ == "Block":
                fully_shard(block)
        fully_shard(model)
        wrapped = model
    else:
        wrapped = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(wrapped.parameters(), lr=3e-3, weight_decay=0.01)

    data_generator = torch.Generator().manual_seed(args.seed)  # the same batches on every rank
    steps = (len(encoded) - window) // (window * args.batch_size)
    if args.steps:
        steps = min(steps, args.steps)
    step_seconds = []
    for epoch in range(1, args.epochs + 1):
        offset = int(torch.randint(window, (1,), generator=data_generator))
        windows = encoded[offset:offset + steps * args.batch_size * window].view(-1, window)
        windows = windows[torch.randperm(len(windows), generator=data_generator)]
        total_loss = torch.zeros((), device=device)
        for step in range(steps):
            batch = windows[step * args.batch_size:(step + 1) * args.batch_size]
            mine = batch[rank * per_rank:(rank + 1) * per_rank].to(device)
            start = time.perf_counter()
            _, loss = wrapped(mine[:, :-1], mine[:, 1:])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            torch.dipu.synchronize()
            step_seconds.append(time.perf_counter() - start)
            total_loss += loss.detach()
        dist.all_reduce(total_loss, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"{'fsdp2' if args.fsdp else 'ddp'} world {world} epoch {epoch}/{args.epochs}  "
                  f"loss {total_loss.item() / steps:.4f}", flush=True)
    if rank == 0:
        timed = step_seconds[1:] or step_seconds  # the first step builds buckets/shards
        print(f"mean step {1000 * sum(timed) / len(timed):.1f} ms over {len(timed)} steps, "
              f"global batch {args.batch_size}, {world} rank(s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
