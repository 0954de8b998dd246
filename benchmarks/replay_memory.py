"""Replay a workload's allocations through a model of the expandable segments, to compare placement rules.

    python benchmarks/replay_memory.py record CASE OUT.json [--steps N] [--seed N] [--tokens N] [--fixed-steps N]
    python benchmarks/replay_memory.py replay TRACE.json [TRACE.json ...] [--rules best,dipu,top-small]

``record`` runs one case of benchmarks/bench_memory.py (varlen, decode, resnet, gpt; the same options) on dipu
with ``expandable_segments:True`` and writes the allocator's trace (``torch.dipu.memory._record_memory_history``):
each block allocated and freed, its size, and where each step ended. The sizes and their order are what the
workload asks for, whatever the allocator does with them.

``replay`` feeds such a trace to a model of Note [Expandable segments], Note [Borrowing between pools] and Note
[Placement in expandable segments] in dipu/csrc/allocator.cpp (one stream; a small and a large segment, each
mapped from its start in 2 MiB granules; blocks split from 512 B up and merged when freed; a request looks in its
own pool, then borrows from the other, then maps at the end of its own pool's segment; memory taken from ATen's
results counts as allocated and reserved, outside the pools) under each placement rule:

- ``best``: best fit, the lowest address among equal sizes (the allocator before Note [Placement in expandable
  segments]);
- ``dipu``: the allocator's rules now (first fit for large requests, best fit but the segment's end last for small
  ones, a borrowed block at the top of its free block);
- ``top-small``: best fit for small requests, each cut from the top of its free block, first fit for large ones.

It prints reserved / peak allocated and maps per step after the warm-up, as bench_memory.py counts them. On
the traces of bench_memory.py's cases the model gives what the allocator measures (``best`` and ``dipu``,
reserved and maps alike); it is a model, and the allocator is what counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MiB = 1 << 20
GRANULE = 2 * MiB
SMALL = MiB
ROUND = 512


def record(args) -> None:
    import torch

    import dipu  # noqa: F401

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_memory as bm

    torch.dipu.memory._set_allocator_settings("expandable_segments:True")
    torch.dipu.empty_cache()
    torch.dipu.memory._record_memory_history(context=None, max_entries=10**8, skip_actions=["free_requested"])
    rec = bm.Recorder("dipu")
    ends: list[int] = []
    step_done = rec.step_done

    def step_and_mark() -> None:
        step_done()
        ends.append(len(torch.dipu.memory._snapshot()["device_traces"][0]))

    rec.step_done = step_and_mark
    runs = {
        "varlen": lambda: bm.varlen_run("dipu", args.steps, rec, args.seed),
        "decode": lambda: bm.decode_run("dipu", args.tokens, rec),
        "resnet": lambda: bm.fixed_run(bm.resnet_case, "dipu", args.fixed_steps, rec),
        "gpt": lambda: bm.fixed_run(bm.gpt_case, "dipu", args.fixed_steps, rec),
    }
    runs[args.case]()
    trace = torch.dipu.memory._snapshot()["device_traces"][0]
    torch.dipu.memory._record_memory_history(None)
    events = [[e["action"], e["addr"], e["size"]] for e in trace
              if e["action"] in ("alloc", "free_completed", "segment_alloc")]
    # Step ends as positions in `events`, which leaves out the actions the model does not need.
    kept, position, step_ends = 0, 0, []
    for end in ends:
        while position < end:
            kept += trace[position]["action"] in ("alloc", "free_completed", "segment_alloc")
            position += 1
        step_ends.append(kept)
    Path(args.out).write_text(json.dumps({"case": args.case, "events": events, "step_ends": step_ends}))
    print(f"{args.out}: {len(events)} events, {len(step_ends)} steps")


class Segment:
    def __init__(self, small: bool):
        self.small = small
        self.blocks: list[list] = []  # [offset, size, allocated], by address
        self.mapped = 0


def replay(trace: dict, rule: str) -> dict:
    segments = {True: Segment(True), False: Segment(False)}
    taken: set[int] = set()
    live: dict[int, tuple] = {}
    allocated = reserved = peak_allocated = peak_reserved = 0
    maps: list[int] = []

    def choose(request_small: bool, size: int):
        for own in (True, False):
            seg = segments[request_small if own else not request_small]
            last = len(seg.blocks) - 1
            best_fit = rule == "best" or (rule == "top-small" and request_small)
            fits = []
            for i, (offset, free, used) in enumerate(seg.blocks):
                if used or free < size:
                    continue
                if best_fit:
                    fits.append(((free, offset), i))
                elif request_small:  # dipu: best fit, the segment's end last
                    fits.append(((i == last, free, offset), i))
                else:  # first fit
                    fits.append(((offset,), i))
            if not fits:
                continue
            i = min(fits)[1]
            top = i != last and ((rule == "dipu" and not own) or (rule == "top-small" and request_small))
            return seg, i, top
        return None

    for position, (action, address, size) in enumerate(trace["events"]):
        if action == "segment_alloc":  # memory taken from ATen's result: its own segment, outside the pools
            taken.add(address)
            continue
        if action == "alloc":
            if address in taken:
                live[address] = (None, 0, size)
                reserved += size
            else:
                small = size <= SMALL
                found = choose(small, size)
                if found is None:  # map at the end of the request's own pool's segment
                    seg = segments[small]
                    tail = seg.blocks[-1][1] if seg.blocks and not seg.blocks[-1][2] else 0
                    more = -(-(size - tail) // GRANULE) * GRANULE
                    if tail:
                        seg.blocks[-1][1] += more
                    else:
                        seg.blocks.append([seg.mapped, more, False])
                    seg.mapped += more
                    reserved += more
                    maps.append(position)
                    found = (seg, len(seg.blocks) - 1, False)
                seg, i, top = found
                block = seg.blocks[i]
                if block[1] - size >= ROUND:
                    if top:
                        block[1] -= size
                        seg.blocks.insert(i + 1, [block[0] + block[1], size, False])
                        i += 1
                    else:
                        seg.blocks.insert(i + 1, [block[0] + size, block[1] - size, False])
                        block[1] = size
                seg.blocks[i][2] = True
                live[address] = (seg, seg.blocks[i][0], size)
            allocated += size
            peak_allocated = max(peak_allocated, allocated)
            peak_reserved = max(peak_reserved, reserved)
        elif action == "free_completed":
            seg, offset, size = live.pop(address)
            allocated -= size
            if seg is None:
                reserved -= size
                taken.discard(address)
                continue
            i = next(k for k, b in enumerate(seg.blocks) if b[0] == offset)
            seg.blocks[i][2] = False
            if i + 1 < len(seg.blocks) and not seg.blocks[i + 1][2]:
                seg.blocks[i][1] += seg.blocks.pop(i + 1)[1]
            if i > 0 and not seg.blocks[i - 1][2]:
                seg.blocks[i - 1][1] += seg.blocks.pop(i)[1]
    ends = trace["step_ends"]
    warm = 10 if len(ends) >= 30 else max(1, len(ends) // 3)
    after = sum(1 for m in maps if m >= ends[warm - 1])
    return {"peak_allocated": peak_allocated / MiB, "peak_reserved": peak_reserved / MiB,
            "ratio": peak_reserved / max(peak_allocated, 1), "maps": len(maps),
            "maps_per_step": after / max(len(ends) - warm, 1), "warm": warm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record a bench_memory.py case's allocations")
    rec.add_argument("case", choices=["varlen", "decode", "resnet", "gpt"])
    rec.add_argument("out")
    rec.add_argument("--steps", type=int, default=60)
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--tokens", type=int, default=300)
    rec.add_argument("--fixed-steps", type=int, default=10)
    rep = sub.add_parser("replay", help="replay recorded allocations under placement rules")
    rep.add_argument("traces", nargs="+")
    rep.add_argument("--rules", default="best,dipu,top-small")
    args = parser.parse_args()
    if args.command == "record":
        record(args)
        return
    print(f"{'trace':<28}{'rules':>10}{'peak alloc MiB':>16}{'reserved MiB':>14}{'res/peak':>10}{'maps':>6}"
          f"{'maps/step':>11}")
    for path in args.traces:
        trace = json.loads(Path(path).read_text())
        for rule in args.rules.split(","):
            r = replay(trace, rule)
            print(f"{Path(path).name:<28}{rule:>10}{r['peak_allocated']:>16.1f}{r['peak_reserved']:>14.1f}"
                  f"{r['ratio']:>10.3f}{r['maps']:>6}{r['maps_per_step']:>11.2f}")


if __name__ == "__main__":
    main()
