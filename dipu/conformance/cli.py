"""``python -m dipu conformance``: the conformance certificate of the active vendor and op library
(Note [The conformance certificate] in dipu/conformance/__init__.py)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dipu.conformance import certificate as certificates
from dipu.conformance.suites import SUITES

DEFAULT_BUDGET_S = 780
DEFAULT_SAMPLES = 3
CHUNK = 60


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dipu conformance",
        description="Run dipu's conformance cases and PyTorch's OpInfo, ModuleInfo and OptimizerInfo databases "
                    "against the active vendor and op library, each compared with the CPU, and write a certificate.",
        epilog="examples: python -m dipu conformance --suites opinfo --ops add,mul,nn.functional.relu\n"
               "          python -m dipu conformance -o cert --baseline old/certificate.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", type=Path, default=Path("conformance"),
                        help="the certificate's directory (default ./conformance): certificate.json, "
                             "certificate.html, and journal.jsonl, from which a new run resumes")
    parser.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated, of {', '.join(SUITES)}")
    parser.add_argument("--ops", default="", help="comma-separated item names (OpInfo names such as add or "
                        "nn.functional.relu, module names such as nn.Linear, optimizer classes such as SGD, DIOPI "
                        "functions for the cases); default: all")
    parser.add_argument("--dtypes", default="", help="comma-separated torch dtypes (default float32; the cases: "
                        "every dtype they have)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                        help=f"seconds; items not started by then are skipped (default {DEFAULT_BUDGET_S})")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                        help=f"samples (inputs) per op, dtype and pass; 0: all (default {DEFAULT_SAMPLES})")
    parser.add_argument("--baseline", type=Path, help="an earlier certificate.json: compare with it, and exit 1 "
                        "if any verdict regressed")
    parser.add_argument("--fresh", action="store_true", help="start over instead of resuming from the journal")
    return parser


def _read_journal(path: Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a crash
    return records


class _Progress:
    def __init__(self, total: int, budget: float):
        self.total, self.budget, self.started = total, budget, time.time()
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def show(self, suite: str, done: int, counts: dict, final: bool = False) -> None:
        now = time.time()
        if not final and not self.tty and now - self.last < 10:
            return
        self.last = now
        width = 24
        filled = int(width * done / self.total) if self.total else width
        verdicts = " ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        line = (f"conformance [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} items ({suite}) "
                f"{verdicts} | {now - self.started:.0f}/{self.budget:.0f} s")
        print(("\r" + line) if self.tty else line, end="\n" if final or not self.tty else "", file=sys.stderr,
              flush=True)


def _run_batch(suite, batch, args, dtypes, journal: Path, deadline: float, log: Path, progress, state) -> list[str]:
    """Runs ``batch`` in one worker; returns the items it did not start (after a crash, or the deadline)."""
    before = len(_read_journal(journal))
    task = {"suite": suite, "names": batch, "dtypes": dtypes, "samples": args.samples or None,
            "journal": str(journal), "deadline": deadline}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as task_file:
        json.dump(task, task_file)
    with open(log, "a") as log_file:
        worker = subprocess.Popen([sys.executable, "-m", "dipu.conformance.worker", task_file.name],
                                  stdout=log_file, stderr=subprocess.STDOUT)
        killed = False
        while worker.poll() is None:
            time.sleep(0.5)
            new = _read_journal(journal)[before:]
            progress.show(suite, state["done"] + sum(r.get("event") == "end" for r in new), state["counts"])
            if time.time() > deadline + 120:  # an item that overran the budget by two minutes
                worker.kill()
                killed = True
        worker.wait()
    os.unlink(task_file.name)
    new = _read_journal(journal)[before:]
    started = [r["name"] for r in new if r.get("event") == "start"]
    ended = {r["name"] for r in new if r.get("event") == "end"}
    for record in new:
        if "verdict" in record:
            state["counts"][record["verdict"]] = state["counts"].get(record["verdict"], 0) + 1
    state["done"] += len(ended)
    unfinished = [name for name in started if name not in ended]
    if unfinished:
        last_lines = log.read_text()[-600:].strip().splitlines()[-3:] if log.exists() else []
        why = ("killed: it ran past the budget" if killed else
               f"the worker died (exit status {worker.returncode}): {' | '.join(last_lines)[:300]}")
        with open(journal, "a") as file:
            file.write(json.dumps({"suite": suite, "name": unfinished[0], "dtype": "*", "pass": "*",
                                   "verdict": "crash", "detail": why}) + "\n")
            file.write(json.dumps({"event": "crash", "suite": suite, "name": unfinished[0]}) + "\n")
        state["counts"]["crash"] = state["counts"].get("crash", 0) + 1
        state["done"] += 1
    elif worker.returncode and not started:
        tail = log.read_text()[-600:] if log.exists() else ""
        raise RuntimeError(f"a conformance worker failed before running anything (exit status "
                           f"{worker.returncode}):\n{tail}")
    finished = set(started)
    return [name for name in batch if name not in finished]


def main(argv: list[str], environment: list[str]) -> int:
    args = _parser().parse_args(argv)
    suites_wanted = [s for s in args.suites.split(",") if s]
    unknown = [s for s in suites_wanted if s not in SUITES]
    if unknown:
        print(f"python -m dipu conformance: unknown suites {unknown}; the suites are {', '.join(SUITES)}",
              file=sys.stderr)
        return 2
    import torch

    from dipu.conformance import suites

    dtype_names = [d for d in args.dtypes.split(",") if d]
    for name in dtype_names:
        if not isinstance(getattr(torch, name, None), torch.dtype):
            print(f"python -m dipu conformance: {name!r} is not a torch dtype", file=sys.stderr)
            return 2
    baseline = None
    if args.baseline:  # before the run, which a bad path would otherwise cost
        try:
            baseline = certificates.load(args.baseline)
        except ValueError as error:
            print(f"python -m dipu conformance: {error}", file=sys.stderr)
            return 2
    selected = {name for name in args.ops.split(",") if name}
    directory = args.output.expanduser().absolute()
    directory.mkdir(parents=True, exist_ok=True)
    journal, log = directory / "journal.jsonl", directory / "workers.log"
    if args.fresh:
        for path in (journal, log):
            path.unlink(missing_ok=True)
    settings = {"suites": suites_wanted, "ops": sorted(selected), "dtypes": dtype_names or ["float32"],
                "samples": args.samples, "budget_s": args.budget}
    done = {(r["suite"], r["name"]) for r in _read_journal(journal) if r.get("event") in ("end", "crash")}
    plan, not_here = {}, {}
    for suite in suites_wanted:
        names, why = suites.names(suite)
        if why:
            not_here[suite] = why
        plan[suite] = [n for n in names if not selected or n in selected]
    known = {n for names in plan.values() for n in names}
    missing = selected - known
    if missing:
        print(f"python -m dipu conformance: --ops names no item of {', '.join(suites_wanted)}: "
              f"{', '.join(sorted(missing))}", file=sys.stderr)
        return 2
    total = sum(len(names) for names in plan.values())
    resumed = sum((s, n) in done for s, names in plan.items() for n in names)
    progress = _Progress(total, args.budget)
    state: dict = {"done": resumed, "counts": {}}
    started = time.time()
    deadline = started + args.budget
    skipped = []
    for suite, names in plan.items():
        pending = [n for n in names if (suite, n) not in done]
        if suite == "cases":
            dtypes = dtype_names or None
        else:
            dtypes = dtype_names or ["float32"]
        while pending:
            if time.time() > deadline:
                skipped += [{"suite": suite, "name": n, "dtype": "*", "pass": "*", "verdict": "skipped",
                             "reason": f"the budget ({args.budget:.0f} s) ran out; run again to resume"}
                            for n in pending]
                break
            batch, rest = pending[:CHUNK], pending[CHUNK:]
            pending = _run_batch(suite, batch, args, dtypes, journal, deadline, log, progress, state) + rest
    progress.show("done", state["done"], state["counts"], final=True)
    records = [r for r in _read_journal(journal) if "verdict" in r and (r["suite"], r["name"]) in
               {(s, n) for s, names in plan.items() for n in names}]
    certificate = certificates.build(records + skipped, settings=settings, environment=environment,
                                     not_here=not_here, baseline=baseline, expected=suites.expected_failures(),
                                     finished=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                     wall_s=time.time() - started)
    certificates.write(directory, certificate)
    print("\n".join(certificates.summary_lines(certificate)))
    print(f"  certificate: {directory / 'certificate.html'} (and certificate.json)")
    comparison = certificate.get("comparison")
    return 1 if comparison and comparison["regressed"] else 0
