"""docs/bring-up.md runs as written: every command of its console blocks, in order, with the output it shows.

Note [The guide is a test]
A console block (```console) holds commands (``$ `` lines, continued by ``> `` lines as bash's second prompt
shows them) each followed by the output to expect, abridged with ``...`` (doctest's ELLIPSIS; whitespace is
normalized). The commands run in order, each in a fresh ``bash -c`` bounded in time, in a scratch directory
holding copies of what they use (examples/, tests/, vendor/, pyproject.toml), so nothing they write lands in
the checkout. ``export NAME=VALUE`` carries to the commands after it, as in a shell. The example vendor is
installed as the guide says, into a scratch venv layered over the one running the tests (a ``.pth`` adds
its site-packages), so the test venv is never touched. Output is stdout and stderr interleaved, as a
terminal shows it: what a line redraws after a carriage return replaces what it drew before (the progress
bars of examples/train.py). A command must exit 0.
"""

from __future__ import annotations

import dataclasses
import doctest
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "bring-up.md"
#: What the commands of the guide use, copied into the scratch directory.
COPIED = ("examples", "tests", "vendor", "pyproject.toml")
#: A bound per command: the slowest (the memory snapshot, the DDP run) take about 20 s on a busy 2-core machine.
COMMAND_TIMEOUT_S = 240
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclasses.dataclass
class Step:
    line: int  # of the guide, where the command starts
    command: str
    expected: str


def parse_console_blocks(text: str) -> list[Step]:
    """The commands of every ```console block, with the output each expects (Note [The guide is a test])."""
    steps: list[Step] = []
    in_block = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            in_block = not in_block and line.strip() == "```console"
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            steps.append(Step(number, line[2:], ""))
        elif not steps:
            raise ValueError(f"{GUIDE.name}:{number}: a console block must start with a '$ ' command")
        elif line.startswith("> ") and not steps[-1].expected:
            steps[-1].command += "\n" + line[2:]
        else:
            steps[-1].expected += line + "\n"
    if in_block:
        raise ValueError(f"{GUIDE.name}: a console block is not closed")
    return steps


def as_terminal_shows(output: str) -> str:
    """Each line as it is left on a terminal: text after the last carriage return, trailing blanks dropped."""
    return "\n".join(line.rsplit("\r", 1)[-1].rstrip() for line in output.split("\n"))


def output_matches(expected: str, actual: str) -> bool:
    return CHECKER.check_output(expected, as_terminal_shows(actual), FLAGS)


def mismatch_report(step: Step, actual: str) -> str:
    example = doctest.Example(step.command, step.expected)
    return (f"{GUIDE.name}:{step.line}: `{step.command}`\n"
            + CHECKER.output_difference(example, as_terminal_shows(actual), FLAGS))


def copy_checkout(work: Path) -> None:
    """Copies into ``work`` of what the commands read (COPIED), without build outputs or caches."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".pytest_cache", "*.so")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=ignore)
        else:
            shutil.copy2(source, work / name)


def _scratch_venv(path: Path) -> Path:
    """A venv over the running one (Note [The guide is a test]); returns its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site_packages = next(path.glob("lib/python*/site-packages"))
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (site_packages / "_parent_env.pth").write_text(
        f"import site; {'; '.join(f'site.addsitedir({p!r})' for p in parents)}\n")
    bin_dir = path / "bin"
    # torchrun's own script runs the interpreter it was installed with, which lacks the example vendor.
    torchrun = bin_dir / "torchrun"
    torchrun.write_text(f"#!/bin/sh\nexec {bin_dir / 'python'} -m torch.distributed.run \"$@\"\n")
    torchrun.chmod(0o755)
    return bin_dir


def _run(command: str, cwd: Path, env: dict) -> tuple[int, str]:
    process = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:  # bytes: text mode would turn the carriage returns into newlines
        output, _ = process.communicate(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # torchrun's workers too
        output, _ = process.communicate()
        return -1, output.decode(errors="replace") + f"\n[killed after {COMMAND_TIMEOUT_S} s]"
    return process.returncode, output.decode(errors="replace")


#: DIPU_GUIDE_RECORD=<file>: record every command's output there instead of checking it (for updating the guide).
RECORD = os.environ.get("DIPU_GUIDE_RECORD")
_EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(\S*)$")


def test_toy_arena_allocates_frees_and_checks_bounds(monkeypatch):
    """The example vendor's allocator, which the guide's runs lean on: first fit, freed blocks merged, no
    address outside a live block translated, 0 when full."""
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "vendor_toy"))
    from dipu_toy.runtime import ALIGNMENT, ARENA_BASE, Arena

    arena = Arena(index=1, capacity=4 * ALIGNMENT)
    a, b, c = (arena.allocate(ALIGNMENT) for _ in range(3))
    assert a == ARENA_BASE + (1 << 40) and (b - a, c - b) == (ALIGNMENT, ALIGNMENT)
    assert arena.allocate(2 * ALIGNMENT) == 0  # one block left
    arena.release(a)
    arena.release(b)  # merged with a's block: two blocks fit again
    assert arena.allocate(2 * ALIGNMENT) == a
    assert arena.host_address(c + 8, ALIGNMENT - 8) == arena.host_base + (c - a) + 8
    with pytest.raises(ValueError, match="not inside a live allocation"):
        arena.host_address(c + 8, ALIGNMENT)
    with pytest.raises(ValueError, match="not a live allocation"):
        arena.release(c + ALIGNMENT)
    arena.release(c)
    assert arena.used == 2 * ALIGNMENT


def test_parser_and_matcher_catch_changes():
    """What the guide test relies on, checked without running anything: a changed line fails the match."""
    steps = parse_console_blocks("text\n```console\n$ echo a \\\n> b\na b\n$ true\n```\n```bash\n$ not run\n```\n")
    assert [(s.command, s.expected) for s in steps] == [("echo a \\\nb", "a b\n"), ("true", "")]
    assert output_matches("loss 1.07...\ndone: ... samples/s\n", "bar 1/3\r       \rloss 1.0779\ndone: 9 samples/s\n")
    assert not output_matches("loss 1.07...\ndone: ... samples/s\n", "loss 1.0779\ndone: 9 tokens/s\n")
    assert not output_matches("...\nCPU fallbacks: 832\n", "a\nCPU fallbacks: 833\n")


@pytest.mark.skipif(shutil.which("cc") is None, reason="the guide's C steps need a C compiler (cc)")
def test_every_command_of_the_guide(tmp_path):
    steps = parse_console_blocks(GUIDE.read_text(encoding="utf-8"))
    assert len(steps) >= 10, "the guide lost its console blocks"
    work = tmp_path / "work"
    work.mkdir()
    copy_checkout(work)
    bin_dir = _scratch_venv(tmp_path / "venv")
    # The guide sets the DIPU_* variables it needs; the cache of the native core is kept (a rebuild takes minutes).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DIPU_") and k != "PYTHONPATH" or k == "DIPU_CACHE_DIR"}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    timings = []
    for step in steps:
        export = _EXPORT.match(step.command)
        if export:
            env[export.group(1)] = export.group(2)
            continue
        start = time.perf_counter()
        status, output = _run(step.command, work, env)
        timings.append((time.perf_counter() - start, step.line))
        if RECORD:  # updating the guide: every step's output, matched or not, and no stop
            with open(RECORD, "a") as record:
                matched = status == 0 and output_matches(step.expected, output)
                record.write(f"==== {GUIDE.name}:{step.line} status {status} {'ok' if matched else 'DIFFERS'}\n"
                             f"$ {step.command}\n{output}\n")
            continue
        assert status == 0, f"{GUIDE.name}:{step.line}: `{step.command}` exited with {status}:\n{output[-4000:]}"
        assert output_matches(step.expected, output), mismatch_report(step, output)
    print("slowest guide commands (s, line):", sorted(timings, reverse=True)[:5])
