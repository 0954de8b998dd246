"""The docs hold together: every Note cited is defined once and docs/architecture.md indexes them all, every
relative link resolves, and every shell command of the README and docs/ runs (docs/bring-up.md's have their
own test, tests/test_bring_up_guide.py).

Note [Defining and citing a Note]
A design decision is explained once, in a Note, and other places refer to it by title. A Note is *defined*
by a heading line that holds nothing but ``Note [Title]``, after an optional comment marker (``#``,
``#:``, ``//``, ``/*``, ``*``) or a docstring's opening quotes, with the explanation starting on the very
next line: in the same comment (that line carries the same marker and text after it) or in the same
docstring or block comment (a line that is not blank and does not close it). Every other ``Note [Title]``
is a *citation*: ``see Note [Title]``, ``(Note [Title] in dipu/_core.py)``, a heading-like line followed by
code (``// Note [Memory history]`` above the members it explains elsewhere), or ``Note [Title]: ...`` with
the text on the same line. A citation may name the file of the definition, or not; titles are unique
across the repository, so the title alone finds it.

The scan covers the repository's source and documentation (the suffixes in ``SCANNED``, and ``.ci/run``),
not virtual environments, build output or caches. The generated kernels are not in the repository (their
Note text is the templates', scanned here, repeated once per kernel).

Note [The docs' commands are tests]
Every fenced block of a shell language (``bash``, ``sh``, ``shell``, ``console``) in the documents of
``DOCUMENTS`` runs, in the order of its document, in a scratch directory holding copies of what the commands
use (as Note [The guide is a test] does for the bring-up guide; no scratch venv: nothing is installed). A
``bash`` block runs as one script under ``set -eo pipefail`` and must exit 0; a ``console`` block holds
``$ `` commands each followed by the output to expect, checked as the guide's are. A block that cannot run
in CI is marked by the line right above its fence, ``<!-- not run: REASON -->`` (a GPU, the network, a
long run, a file that stands for the reader's own), and the reason is required. A block of any language
preceded by ``<!-- file: NAME -->`` is written to NAME in the scratch directory first, so an example's
source and the commands building it stay one text.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = {".py", ".pyi", ".c", ".cpp", ".h", ".j2", ".md", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".supp",
           ".txt"}
EXTRA_FILES = (".ci/run",)
#: Directories never scanned: generated text (see the module's Note), caches and build output.
SKIPPED_DIRS = {"__pycache__", "build", "dist", "node_modules", ".pytest_cache"}
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: The title the docs use to show the form (``Note [Title]``), never a Note's.
PLACEHOLDER = "Title"
_NOTE = re.compile(r"Note \[([^\]\n]+)\]")
_HEADING = re.compile(r'^\s*(#:|#|//|/\*|\*|""")?\s*Note \[([^\]\n]+)\]\s*$')


def source_files(root: Path = ROOT) -> list[Path]:
    """Every scanned file under ``root`` (Note [Defining and citing a Note])."""
    found = [root / name for name in EXTRA_FILES if (root / name).is_file()]
    for directory, subdirectories, files in os.walk(root):
        here = Path(directory)
        subdirectories[:] = sorted(
            name for name in subdirectories
            if not name.startswith(".") and name not in SKIPPED_DIRS and not name.endswith(".egg-info")
            and not (here / name / "pyvenv.cfg").exists())
        found += [here / name for name in sorted(files) if Path(name).suffix in SCANNED]
    return found


def _explains(marker: str, following: str) -> bool:
    """Whether ``following``, the line after a line that could head a Note, starts its explanation."""
    text = following.strip()
    if marker in ("#", "#:", "//"):
        return text.startswith(marker) and bool(text[len(marker):].strip())
    return bool(text) and not text.startswith(("*/", '"""'))


def scan_text(text: str, where: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(definitions, citations) of ``text``: title -> ["<where>:<line>", ...]."""
    definitions: dict[str, list[str]] = collections.defaultdict(list)
    citations: dict[str, list[str]] = collections.defaultdict(list)
    lines = text.splitlines()
    for index, line in enumerate(lines):
        heading = _HEADING.match(line)
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if heading and _explains(heading.group(1) or "", following):
            definitions[heading.group(2)].append(f"{where}:{index + 1}")
            continue
        for title in _NOTE.findall(line):
            if title != PLACEHOLDER:
                citations[title].append(f"{where}:{index + 1}")
    return definitions, citations


def scan(root: Path = ROOT) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    definitions: dict[str, list[str]] = collections.defaultdict(list)
    citations: dict[str, list[str]] = collections.defaultdict(list)
    for path in source_files(root):
        found = scan_text(path.read_text(encoding="utf-8", errors="replace"), path.relative_to(root).as_posix())
        for total, part in zip((definitions, citations), found):
            for title, places in part.items():
                total[title] += places
    return definitions, citations


DEFINITIONS, CITATIONS = scan()


def test_the_reader_tells_definitions_from_citations():
    """What the rule relies on, on made-up text: a heading with its explanation defines; anything else cites."""
    note = "Note"  # spelled apart, so that the scan of this file does not take these for the repository's
    text = "\n".join(line.replace("N[", f"{note} [") for line in [
        '"""Module.', "", "N[In a docstring]", "Explained here.", '"""',
        "# N[In a comment]", "# explained here, see N[In a docstring].",
        "#: N[An attribute's]", "#: explained here.",
        "  // N[Cited above code]", "  int member;",
        "/* N[Closed at once] */",
        "x = 1  # N[Inline]",
        '"""N[With text]: on the same line."""',
        "# N[Heading without text]", "#",
        "the form: N[Title]",
    ])
    definitions, citations = scan_text(text, "f")
    assert sorted(definitions) == ["An attribute's", "In a comment", "In a docstring"]
    assert sorted(citations) == ["Cited above code", "Closed at once", "Heading without text", "In a docstring",
                                 "Inline", "With text"]


def test_the_scan_sees_the_repository():
    """So that a scan finding nothing cannot pass."""
    files = {path.relative_to(ROOT).as_posix() for path in source_files()}
    assert {"dipu/_core.py", "dipu/csrc/allocator.cpp", "scripts/autogen/templates/wrappers.py.j2",
            "pyproject.toml", "README.md", ".ci/run"} <= files
    assert len(DEFINITIONS) >= 100 and len(CITATIONS) >= 100


def test_every_cited_note_is_defined():
    dangling = {title: places for title, places in CITATIONS.items() if title not in DEFINITIONS}
    assert dangling == {}, "cited but defined nowhere (Note [Defining and citing a Note] in tests/test_docs.py)"


def test_every_note_is_defined_once():
    twice = {title: places for title, places in DEFINITIONS.items() if len(places) > 1}
    assert twice == {}, "defined more than once: keep one definition and cite it from the other places"


def _index_rows() -> dict[str, str]:
    """The Notes index of docs/architecture.md: title -> file, from its ``| Note [Title] | `file` |`` rows."""
    rows = re.findall(r"^\| Note \[([^\]\n]+)\] \| `([^`]+)` \|$", ARCHITECTURE.read_text(encoding="utf-8"), re.M)
    return dict(rows)


def index_table() -> str:
    """The rows the Notes index of docs/architecture.md should have: by file, then by line."""
    rows = sorted((place.rsplit(":", 1)[0], int(place.rsplit(":", 1)[1]), title)
                  for title, (place, *_) in DEFINITIONS.items())
    note = "Note"  # spelled apart, so that the scan of this file does not take the pattern for a citation
    return "".join(f"| {note} [{title}] | `{file}` |\n" for file, _, title in rows)


def test_the_architecture_indexes_every_note_where_it_is_defined():
    index = _index_rows()
    defined = {title: places[0].rsplit(":", 1)[0] for title, places in DEFINITIONS.items()}
    wrong = {t: f for t, f in defined.items() if index.get(t) != f} | {t: None for t in set(index) - set(defined)}
    assert wrong == {}, f"the Notes index of docs/architecture.md is out of date; its rows should be:\n{index_table()}"


# ---- links ---------------------------------------------------------------------------------------------------

#: The documents whose links are checked and whose shell blocks run (Note [The docs' commands are tests]).
DOCUMENTS = ("README.md", "docs/user-guide.md", "docs/vendor-guide.md", "docs/op-library-guide.md",
             "docs/reference.md", "docs/architecture.md")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_anchors_are_githubs():
    assert anchor("On an NVIDIA GPU (`DIPU_VENDOR=cuda`)") == "on-an-nvidia-gpu-dipu_vendorcuda"
    assert anchor("dipu beside CUDA (or another accelerator of torch's own)") == \
        "dipu-beside-cuda-or-another-accelerator-of-torchs-own"
    assert anchor("The torch op library in C++") == "the-torch-op-library-in-c"


@pytest.mark.parametrize("document", DOCUMENTS + ("docs/bring-up.md",))
def test_every_relative_link_resolves(document):
    path = ROOT / document
    broken = []
    for target in _LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT) if ROOT in linked.parents else linked}")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == []


# ---- commands ------------------------------------------------------------------------------------------------

SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
_MARKER = re.compile(r"^<!-- (not run|file):(.*?)-->$")
#: A bound per block; the slowest, compiling and loading a C library, take about 15 s on a busy 2-core machine.
BLOCK_TIMEOUT_S = 240


@dataclasses.dataclass
class Block:
    document: str
    line: int  # of the opening fence
    language: str
    text: str
    not_run: str | None = None  # the reason
    file: str | None = None  # written to this name in the scratch directory

    @property
    def shell(self) -> bool:
        return self.language in SHELL_LANGUAGES


def fenced_blocks(text: str, document: str) -> list[Block]:
    """Every fenced block of ``text`` with its marker (Note [The docs' commands are tests])."""
    blocks: list[Block] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        marker = _MARKER.match(line)
        if marker and not (index + 1 < len(lines) and lines[index + 1].startswith("```")):
            raise ValueError(f"{document}:{index + 1}: a marker must be the line right above a fence")
        if line.startswith("```"):
            language = line[3:].strip().split(" ")[0]
            end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith("```")), None)
            if end is None:
                raise ValueError(f"{document}:{index + 1}: a fenced block is not closed")
            block = Block(document, index + 1, language, "\n".join(lines[index + 1:end]) + "\n")
            above = _MARKER.match(lines[index - 1]) if index else None
            if above and above.group(1) == "not run":
                block.not_run = above.group(2).strip()
            elif above:
                block.file = above.group(2).strip()
            blocks.append(block)
            index = end
        index += 1
    return blocks


def _blocks(document: str) -> list[Block]:
    return fenced_blocks((ROOT / document).read_text(encoding="utf-8"), document)


def test_the_block_reader_sees_markers_and_languages():
    text = ("```bash\necho a\n```\n<!-- not run: needs a GPU -->\n```bash\nnvidia-smi\n```\n"
            "<!-- file: x.c -->\n```c\nint x;\n```\n```python\nprint(1)\n```\n")
    blocks = fenced_blocks(text, "d")
    assert [(b.language, b.not_run, b.file, b.shell) for b in blocks] == [
        ("bash", None, None, True), ("bash", "needs a GPU", None, True), ("c", None, "x.c", False),
        ("python", None, None, False)]
    with pytest.raises(ValueError, match="d:1: a marker must be the line right above a fence"):
        fenced_blocks("<!-- not run: why -->\n\n```bash\ntrue\n```\n", "d")


def test_every_shell_block_runs_or_says_why_not():
    blocks = [block for document in DOCUMENTS for block in _blocks(document) if block.shell]
    assert all(block.not_run != "" for block in blocks)
    running = [block for block in blocks if block.not_run is None]
    assert len(running) >= 5, "the docs lost their runnable commands"


def _run(script: str, cwd: Path, env: dict) -> tuple[int, str]:
    process = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return -1, output.decode(errors="replace") + f"\n[killed after {BLOCK_TIMEOUT_S} s]"
    return process.returncode, output.decode(errors="replace")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory with copies of what the commands use, and their environment (as the guide's test makes)."""
    from test_bring_up_guide import copy_checkout

    work = tmp_path_factory.mktemp("docs")
    copy_checkout(work)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DIPU_") and k != "PYTHONPATH" or k == "DIPU_CACHE_DIR"}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    return work, env


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_command_of_the_document(document, scratch):
    from test_bring_up_guide import mismatch_report, output_matches, parse_console_blocks

    blocks = _blocks(document)
    if any(block.file or block.language == "console" for block in blocks) and shutil.which("cc") is None:
        pytest.skip("the document's examples need a C compiler (cc)")
    work, env = scratch
    timings = []
    for block in blocks:
        if block.file:
            (work / block.file).write_text(block.text)
        if not block.shell or block.not_run is not None:
            continue
        start = time.perf_counter()
        where = f"{document}:{block.line}"
        if block.language == "console":
            for step in parse_console_blocks(f"```console\n{block.text}```\n"):
                status, output = _run(step.command, work, env)
                assert status == 0, f"{where}: `{step.command}` exited with {status}:\n{output[-4000:]}"
                assert output_matches(step.expected, output), f"{where}\n" + mismatch_report(step, output)
        else:
            status, output = _run("set -eo pipefail\n" + block.text, work, env)
            assert status == 0, f"{where}: exited with {status}:\n{block.text}\n{output[-4000:]}"
        timings.append((round(time.perf_counter() - start, 1), block.line))
    print(f"{document}: blocks run (s, line):", timings)
