"""``python -m dipu.report -o DIR -- <command ...>`` and ``python -m dipu.report --compare OLD.json NEW.json``.

The first runs the command (any program; ``torchrun ...`` included) with ``DIPU_REPORT=DIR``, so every dipu
process it starts reports (Note [One file per process] in dipu/report/collect.py), merges what they wrote
into DIR/report.json and DIR/report.html, prints the report's top lines and exits with the command's status.
"""

from __future__ import annotations

import argparse
import atexit
import os
import subprocess
import sys
from pathlib import Path

from dipu import autocompare
from dipu.report import compare, files, merge

REPORT_VAR = "DIPU_REPORT"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dipu.report",
        description="Run a command with the dipu run report on, or compare two reports.",
        epilog="examples: python -m dipu.report -o report -- python examples/train.py --epochs 1\n"
               "          python -m dipu.report --compare old/report.json report/report.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", type=Path, help="the report's directory (created if missing)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD.json", "NEW.json"),
                        help="compare two report.json files")
    parser.add_argument("--top", type=int, metavar="N",
                        help="replay the N signatures of most device time on the reference device (default 10; "
                             "DIPU_REPORT_TOP)")
    parser.add_argument("--reference", choices=("auto", "cpu", "cuda", "off"),
                        help="the reference device (default auto: cuda where the vendor's memory is CUDA memory, "
                             "else cpu; DIPU_REPORT_REFERENCE)")
    parser.add_argument("--device-time", choices=("auto", "events", "synchronize", "off"),
                        help="how device time is measured (default auto: the vendor's timing events where it has "
                             "them; DIPU_REPORT_DEVICE_TIME)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    return parser


def run(output: Path, command: list[str], settings: dict[str, str] | None = None) -> int:
    try:
        directory = files.writable_directory(output, "-o")
    except ValueError as error:
        print(f"python -m dipu.report: {error}", file=sys.stderr)
        return 2
    for stale in (directory / "processes").glob("*.json"):  # a new run: earlier runs' processes do not count
        stale.unlink()
    env = {**os.environ, **(settings or {}), REPORT_VAR: str(directory)}
    try:
        status = subprocess.call(command, env=env)
    except OSError as error:
        print(f"python -m dipu.report: cannot run {command[0]!r}: {error.strerror or error}", file=sys.stderr)
        return 127
    except KeyboardInterrupt:
        status = 130
    report = files.merge_directory(directory)
    if not report["processes"]:
        print(f"dipu run report: no process ran a dipu op (did the command import dipu or torch?); "
              f"{directory / 'report.html'} is empty", file=sys.stderr)
    else:
        print("\n".join(merge.summary_lines(report)))
        print(f"  full report: {directory / 'report.html'} (and report.json)")
    return status if status >= 0 else 128 - status  # killed by a signal: the shell's convention


def main(argv: list[str] | None = None) -> int:
    # This process imported dipu only as the package around dipu.report: it runs no op, so the switches
    # the command is run with say nothing about it (no autocompare summary of its own).
    atexit.unregister(autocompare.print_summary)
    parser = _parser()
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.compare:
        if args.output or command or args.top is not None or args.reference or args.device_time:
            parser.error("--compare takes two report.json files and nothing else")
        try:
            old, new = (compare.load(path) for path in args.compare)
        except ValueError as error:
            print(f"python -m dipu.report: {error}", file=sys.stderr)
            return 2
        print("\n".join(compare.compare(old, new)))
        return 0
    if args.output is None or not command:
        parser.error("give -o DIR -- <command ...> (or --compare OLD.json NEW.json)")
    given = (("DIPU_REPORT_TOP", args.top), ("DIPU_REPORT_REFERENCE", args.reference),
             ("DIPU_REPORT_DEVICE_TIME", args.device_time))
    settings = {name: str(value) for name, value in given if value is not None}
    return run(args.output, command, settings)


if __name__ == "__main__":
    sys.exit(main())
