"""torch.distributed on dipu, measured side by side.

    python benchmarks/bench_distributed.py                  # refc: its xccl vs gloo vs the host path; DDP 1/2/4
    python benchmarks/bench_distributed.py --skip-ddp
    python benchmarks/bench_distributed.py --vendor sim     # another vendor: its communicator vs gloo

(1) all_reduce (SUM, float32) at 2 ranks on 127.0.0.1 for 1 KiB to 64 MiB: dipu tensors through
the dicl backend vs CPU tensors through gloo, timed alternately in the same process group;
bandwidth is bytes per rank / time. On refc it runs twice: on the plug-in's own collectives
(Note [A plug-in's collectives]) and with DIPU_XCCL=0 (gloo on host copies, dicl's host path).
(2) DDP step time of examples/train_ddp.py (the GPT, global batch 32 split across the ranks) with
torchrun at 1, 2 and 4 ranks, each rank one thread (OMP_NUM_THREADS=1); efficiency is
t(1) / (n x t(n)). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
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
        communicator = type(dist.group.WORLD._communicator).__name__
        print("ROWS " + json.dumps({"communicator": communicator, "rows": rows}), flush=True)
    dist.destroy_process_group()


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def _run_ranks(rounds: int, env: dict) -> dict:
    port = _free_port()
    procs = []
    for rank in range(2):
        rank_env = {**os.environ, **env, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank-main", "--rounds", str(rounds)],
                                      env=rank_env, stdout=subprocess.PIPE, text=True))
    outputs = [proc.communicate(timeout=900)[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        raise SystemExit(f"a rank failed ({[proc.returncode for proc in procs]})")
    line = next(line for line in outputs[0].splitlines() if line.startswith("ROWS "))
    return json.loads(line[5:])


def bandwidth(rounds: int, vendor: str) -> None:
    env = {"DIPU_VENDOR": vendor}
    print(f"all_reduce SUM float32, 2 ranks on 127.0.0.1, one thread each; DIPU_VENDOR={vendor}")
    device = _run_ranks(rounds, env)
    if device["communicator"] != "XcclCommunicator":
        print(f"dipu tensors via dicl ({device['communicator']}) vs CPU tensors via gloo")
        print(f"{'size':>8}{'dipu us':>11}{'gloo us':>11}{'dipu GB/s':>11}{'gloo GB/s':>11}{'dipu/gloo BW':>14}")
        for nbytes, d, c in device["rows"]:
            print(f"{_size(nbytes):>8}{d * 1e6:>11.1f}{c * 1e6:>11.1f}{nbytes / d / 1e9:>11.3f}"
                  f"{nbytes / c / 1e9:>11.3f}{c / d:>14.2f}")
        return
    host = _run_ranks(rounds, {**env, "DIPU_XCCL": "0"})
    print("xccl: the plug-in's collectives; host path: dicl with DIPU_XCCL=0 (gloo on host copies); "
          "gloo: CPU tensors")
    print(f"{'size':>8}{'xccl us':>11}{'host us':>11}{'gloo us':>11}{'xccl GB/s':>11}{'gloo GB/s':>11}"
          f"{'xccl/gloo BW':>14}{'host/gloo BW':>14}")
    for (nbytes, x, c), (_, h, c2) in zip(device["rows"], host["rows"]):
        print(f"{_size(nbytes):>8}{x * 1e6:>11.1f}{h * 1e6:>11.1f}{c * 1e6:>11.1f}{nbytes / x / 1e9:>11.3f}"
              f"{nbytes / c / 1e9:>11.3f}{c / x:>14.2f}{c2 / h:>14.2f}")


def ddp_step_times(steps: int, vendor: str) -> None:
    results = {}
    env = {**os.environ, "DIPU_VENDOR": vendor, "OMP_NUM_THREADS": "1", "DIPU_REFC_DEVICE_COUNT": "4"}
    for world in (1, 2, 4):
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
                   "--master-port", str(_free_port()), str(ROOT / "examples" / "train_ddp.py"),
                   "--epochs", "1", "--steps", str(steps)]
        out = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT / "examples", env=env)
        match = re.search(r"mean step ([\d.]+) ms", out.stdout)
        if not match:
            raise SystemExit(f"train_ddp.py at {world} rank(s) failed:\n{out.stdout}\n{out.stderr[-3000:]}")
        results[world] = float(match.group(1))
    print(f"DDP step (GPT, global batch 32 split across the ranks, {steps - 1} timed steps, DIPU_VENDOR={vendor})")
    for world, ms in results.items():
        print(f"  {world} rank(s): {ms:7.1f} ms   efficiency t(1)/(n t(n)) {results[1] / (world * ms):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ddp-steps", type=int, default=11)
    parser.add_argument("--skip-ddp", action="store_true")
    parser.add_argument("--vendor", default="refc", help="DIPU_VENDOR of the ranks (default: refc)")
    args = parser.parse_args()
    if args.rank_main:
        rank_main(args.rounds)
        return
    bandwidth(args.rounds, args.vendor)
    if not args.skip_ddp:
        ddp_step_times(args.ddp_steps, args.vendor)


if __name__ == "__main__":
    main()
