"""Compare dipu's proto with DeepLink's C proto (``proto/include/diopi/functions.h`` of DeepLink-org/DIOPI).

    python -m dipugen.deeplink PATH     # PATH: that functions.h, a DIOPI checkout, or its bare git directory

prints one row per function both protos name (letter case aside) and a summary. A library compiled
against DeepLink's header is called by position with dipu's C form of the proto (Note [The C form of a
proto function] in dipu/diopi/c_form.py), so a shared name agrees when both take the same C types in the same
order; the verdicts say what a library would see otherwise:

- ``agree``: same C types and parameter names, in the same order;
- ``names``: same C types in the same order, some parameters named otherwise (harmless by position);
- ``order``: same C types, but a parameter sits where the other proto has another of the same name
  (silently wrong if called by position);
- ``optional by value``: dipu passes an optional value by pointer where DeepLink passes it by value;
- ``kind``: as many parameters, some of another C type;
- ``count``: another number of parameters;
- ``case``: the names differ in letter case only (also compared as above).

Nothing is read from the network; the header is parsed with a regular expression over its prototypes
(``DIOPI_API diopiError_t name(...);``), which is all that file declares.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

from .proto import FUNCTIONS, c_parameters

HEADER_IN_REPOSITORY = "proto/include/diopi/functions.h"
_PROTOTYPE = re.compile(r"DIOPI_API\s+diopiError_t\s+(\w+)\s*\(([^)]*)\)\s*;")
_PARAMETER = re.compile(r"^(.*?)\s*(\w+)$")


def read_header(path: Path) -> str:
    """The text of DeepLink's functions.h from the file itself, a checkout, or a bare git directory."""
    if path.is_file():
        return path.read_text()
    if (path / HEADER_IN_REPOSITORY).is_file():
        return (path / HEADER_IN_REPOSITORY).read_text()
    if (path / "HEAD").is_file():
        return subprocess.run(["git", "--git-dir", str(path), "show", f"HEAD:{HEADER_IN_REPOSITORY}"],
                              check=True, capture_output=True, text=True).stdout
    raise FileNotFoundError(f"{path}: neither DeepLink's functions.h, a DIOPI checkout nor its git directory")


def parse(text: str) -> dict[str, list[tuple[str, str]]]:
    """Function name -> its (C type, parameter name) pairs, the context included."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    functions = {}
    for match in _PROTOTYPE.finditer(text):
        params = []
        for raw in match.group(2).split(","):
            found = _PARAMETER.match(" ".join(raw.split()))
            if found is None:
                raise ValueError(f"cannot read parameter {raw.strip()!r} of {match.group(1)}")
            params.append((_normal_type(found.group(1)), found.group(2)))
        functions[match.group(1)] = params
    return functions


def _normal_type(c_type: str) -> str:
    """``const diopiConstTensorHandle_t`` is the handle itself (a const copy); ``T *`` is ``T*``."""
    c_type = c_type.replace(" *", "*").strip()
    return c_type.removeprefix("const ") if c_type.startswith("const diopi") and "*" not in c_type else c_type


@dataclasses.dataclass(frozen=True)
class Row:
    dipu: str
    deeplink: str
    verdict: str
    detail: str


def _name(name: str) -> str:  # dipu's from_ is C's from
    return name.rstrip("_")


def compare(deeplink: dict[str, list[tuple[str, str]]]) -> list[Row]:
    """One row per dipu function whose name DeepLink's proto has, letter case aside."""
    by_lower = {name.lower(): name for name in deeplink}
    rows = []
    for name in sorted(FUNCTIONS):
        other = name if name in deeplink else by_lower.get(name.lower())
        if other is None:
            continue
        ours = [(p.type, _name(p.name), p.param is None) for p in c_parameters(FUNCTIONS[name])]
        theirs = [(t, _name(n)) for t, n in deeplink[other]]
        verdict, detail = _verdict(ours, theirs)
        if other != name:
            verdict, detail = "case", f"DeepLink spells it {other}; " + (detail or verdict)
        rows.append(Row(name, other, verdict, detail))
    return rows


def _verdict(ours, theirs) -> tuple[str, str]:
    if len(ours) != len(theirs):
        extra = [n for _, n, is_length in ours if not is_length and n not in {m for _, m in theirs}]
        missing = [m for _, m in theirs if m not in {n for _, n, _ in ours}]
        return "count", (f"{len(ours) - 1} parameters vs {len(theirs) - 1}"
                         + (f"; only dipu: {', '.join(extra)}" if extra else "")
                         + (f"; only DeepLink: {', '.join(missing)}" if missing else ""))
    kinds = [(n, t, u, m) for (t, n, _), (u, m) in zip(ours, theirs) if t != u]
    if kinds:
        by_value = all(t == f"const {u}*" for _, t, u, _ in kinds)
        return ("optional by value" if by_value else "kind",
                "; ".join(f"{n}: dipu {t}, DeepLink {u}" + (f" ({m})" if m != n else "") for n, t, u, m in kinds))
    their_names = [m for _, m in theirs]
    moved = [n for i, (_, n, is_length) in enumerate(ours)
             if not is_length and n != their_names[i] and n in their_names]
    if moved:
        return "order", f"dipu's order {', '.join(moved)}; DeepLink's " + ", ".join(
            m for m in their_names if m in moved)
    renamed = [f"{n}/{m}" for (_, n, is_length), m in zip(ours, their_names) if n != m and not is_length]
    return ("names", "dipu/DeepLink: " + ", ".join(renamed)) if renamed else ("agree", "")


def table(rows: list[Row]) -> str:
    """The comparison as a Markdown table (the rows that do not agree) and a summary line per verdict."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.verdict] = counts.get(row.verdict, 0) + 1
    lines = [f"{len(FUNCTIONS)} dipu functions, {len(rows)} shared with DeepLink's functions.h: "
             + ", ".join(f"{verdict} {count}" for verdict, count in sorted(counts.items(), key=lambda kv: -kv[1])),
             "", "| function | verdict | why |", "|---|---|---|"]
    lines += [f"| `{r.dipu}` | {r.verdict} | {r.detail} |" for r in rows if r.verdict != "agree"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dipugen.deeplink", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="DeepLink's functions.h, a DIOPI checkout, or its git directory")
    args = parser.parse_args(argv)
    print(table(compare(parse(read_header(args.path)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
