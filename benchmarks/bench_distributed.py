"""torch.distributed on dipu, measured side by side.

    python benchmarks/bench_distributed.py                # all_reduce bandwidth, then DDP step time
    python benchmarks/bench_distributed.py --skip-ddp
    DIPU_SIM_NATIVE_ALIAS=0 python benchmarks/bench_distributed.py --skip-ddp   # host-copy path

(1) all_reduce (SUM, float32) at 2 ranks on 127.0.0.1 for 1 KiB to 64 MiB: dipu tensors through
the dicl backend vs CPU tensors through gloo, timed alternately in the same process group;
bandwidth is bytes per rank / time. (2) DDP step time of examples/train_ddp.py (the GPT, global
batch 32) with torchrun at 1 rank and at 2 ranks. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rounds: int) -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    torch.dipu.set_device(rank)
    dist.init_process_group()
    rows = []
    for nbytes in SIZES:
        numel = nbytes // 4
        on_cpu = torch.ones(numel)
        on_dipu = torch.ones(numel, device="dipu")
        reps = max(3, min(200, (64 << 20) // nbytes // 4))
        times = {"dipu": [], "cpu": []}
        for tensor in (on_cpu, on_dipu):  # warm up: connections, communicator, pages
            dist.all_reduce(tensor)
        for _ in range(rounds):
            for name, tensor in (("dipu", on_dipu), ("cpu", on_cpu)):
                dist.barrier()
                start = time.perf_counter()
                for _ in range(reps):
                    dist.all_reduce(tensor)
                torch.dipu.synchronize()
                times[name].append((time.perf_counter() - start) / reps)
        rows.append((nbytes, statistics.median(times["dipu"]), statistics.median(times["cpu"])))
    if rank == 0:
        path = "host copies (no vendor library)" if os.environ.get("DIPU_SIM_NATIVE_ALIAS") == "0" else \
            "vendor library"
        print(f"all_reduce SUM float32, 2 ranks on 127.0.0.1; dipu via dicl ({path}) vs gloo on CPU tensors")
        print(f"{'size':>8}{'dipu us':>11}{'cpu us':>11}{'dipu GB/s':>11}{'cpu GB/s':>10}{'time ratio':>12}")
        for nbytes, d, c in rows:
            size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"
            print(f"{size:>8}{d * 1e6:>11.1f}{c * 1e6:>11.1f}{nbytes / d / 1e9:>11.3f}{nbytes / c / 1e9:>10.3f}"
                  f"{d / c:>12.2f}")
    dist.destroy_process_group()


def bandwidth(rounds: int) -> None:
    port = _free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank-main", "--rounds", str(rounds)], env=env))
    for proc in procs:
        if proc.wait(timeout=900):
            raise SystemExit(f"a rank failed ({proc.returncode})")


def ddp_step_times(steps: int) -> None:
    results = {}
    for world in (1, 2):
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
                   "--master-port", str(_free_port()), str(ROOT / "examples" / "train_ddp.py"),
                   "--epochs", "1", "--steps", str(steps)]
        out = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT / "examples")
        match = re.search(r"mean step ([\d.]+) ms", out.stdout)
        if not match:
            raise SystemExit(f"train_ddp.py at {world} rank(s) failed:\n{out.stdout}\n{out.stderr[-3000:]}")
        results[world] = float(match.group(1))
    print(f"DDP step (GPT, global batch 32, {steps - 1} timed steps): 1 rank {results[1]:.1f} ms, "
          f"2 ranks {results[2]:.1f} ms, ratio {results[2] / results[1]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ddp-steps", type=int, default=11)
    parser.add_argument("--skip-ddp", action="store_true")
    args = parser.parse_args()
    if args.rank_main:
        rank_main(args.rounds)
        return
    bandwidth(args.rounds)
    if not args.skip_ddp:
        ddp_step_times(args.ddp_steps)


if __name__ == "__main__":
    main()
