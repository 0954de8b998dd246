"""The report's files: the per-process records, the lock that serializes merges, report.json and report.html
(Note [One file per process] in dipu/report/collect.py)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from pathlib import Path

from dipu.report import html, merge


def load_json(path: Path, *, kind: str, option: str, what: str) -> dict:
    """The JSON object in ``path`` whose ``kind`` is ``kind``; else a ValueError naming ``option`` that says
    whether the file could not be read, is not JSON, or is not ``what``. Loads a run report for ``--compare``
    and a conformance certificate for ``--baseline``."""
    try:
        loaded = json.loads(Path(path).read_text())
    except OSError as error:
        raise ValueError(f"{option}: cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise ValueError(f"{option}: {path} is not JSON: {error}") from None
    if not isinstance(loaded, dict) or loaded.get("kind") != kind:
        raise ValueError(f"{option}: {path} is not {what}")
    return loaded


def writable_directory(directory: Path, what: str) -> Path:
    """``directory``, created if missing, after checking a file can be written there; else a ValueError
    naming ``what`` (the variable or option that gave it)."""
    directory = directory.expanduser().absolute()
    try:
        (directory / "processes").mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory / "processes", prefix=".probe-"):
            pass
    except OSError as error:
        raise ValueError(f"{what}: cannot write the run report in {directory}: "
                         f"{error.strerror or error}") from None
    return directory


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(handle, "w") as file:
        file.write(text)
    os.replace(temporary, path)


def write_process_file(directory: Path, record: dict) -> Path:
    path = directory / "processes" / f"{record['host']}-{record['pid']}.json"
    _write_atomically(path, json.dumps(record, indent=1, sort_keys=True))
    return path


def read_process_files(directory: Path) -> list[dict]:
    records = []
    for path in sorted((directory / "processes").glob("*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # a file being replaced right now is read at the next merge
    return records


@contextlib.contextmanager
def _locked(directory: Path):
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def merge_directory(directory: Path) -> dict:
    """Merge ``directory``'s process files and (re)write report.json and report.html there."""
    with _locked(directory):
        report = merge.merge(read_process_files(directory))
        _write_atomically(directory / "report.json", json.dumps(report, indent=1, sort_keys=True))
        _write_atomically(directory / "report.html", html.render(report))
    return report
