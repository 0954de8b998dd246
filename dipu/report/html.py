"""The run report as one self-contained HTML page: inline CSS, charts as inline SVG drawn here, and a
few lines of inline script that sort a table when its header is clicked. Nothing is fetched from the
network (no CDN scripts, no web fonts), so the file opens anywhere, offline."""

from __future__ import annotations

from html import escape

from dipu.report.merge import CATEGORIES, summary_lines

COLORS = {"native": "#2e7d32", "refused": "#ef6c00", "fallback": "#c62828", "forced fallback": "#8e24aa",
          "core": "#1565c0", "composite": "#00838f", "other": "#757575"}
IMPLEMENTED, MISSING = "#2e7d32", "#e0e0e0"

CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #212121; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; }
pre.summary { background: #f5f5f5; padding: 12px; white-space: pre-wrap; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #fafafa; cursor: pointer; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #ffebee; } tr.first td { background: #ffcdd2; font-weight: bold; }
.tag { display: inline-block; padding: 0 6px; border-radius: 3px; color: #fff; font-size: 12px; }
.charts { display: flex; gap: 32px; flex-wrap: wrap; }
details { margin: 2px 0; } summary { cursor: pointer; }
.muted { color: #757575; }
"""

# Sorts a table by the clicked column: numbers by value, text alphabetically; a second click reverses.
SORT_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach((th, column) => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0];
  const key = row => { const t = row.cells[column].dataset.v ?? row.cells[column].textContent;
                       const n = parseFloat(t); return isNaN(n) ? t : n; };
  const order = th.dataset.order = th.dataset.order === "1" ? "-1" : "1";
  [...body.rows].sort((a, b) => (key(a) > key(b) ? 1 : key(a) < key(b) ? -1 : 0) * order)
    .forEach(row => body.appendChild(row));
}));
"""


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


def _tag(category: str) -> str:
    return f'<span class="tag" style="background:{COLORS.get(category, "#757575")}">{escape(category)}</span>'


def _table(headers: list[str], rows: list[str], sortable: bool = True) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return (f'<table class="{"sortable" if sortable else ""}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _cells(*values, classes: str = "") -> str:
    cells = []
    for value in values:
        if isinstance(value, tuple):  # (html, sort key)
            cells.append(f'<td data-v="{escape(str(value[1]))}">{value[0]}</td>')
        elif isinstance(value, (int, float)):
            cells.append(f'<td class="n">{value}</td>')
        else:
            cells.append(f"<td>{value}</td>")
    return f'<tr class="{classes}">{"".join(cells)}</tr>'


# ---- charts ----------------------------------------------------------------------------------------


def _svg_head(title: str, width: int, height: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            f'aria-label="{escape(title)}"><text x="0" y="16" font-weight="bold" font-size="14">'
            f'{escape(title)}</text>')


def bar_chart(title: str, bars: list[tuple[str, float, str, str]], width: int = 520) -> str:
    """Horizontal bars: (label, value, color, value text) each, scaled to the largest."""
    row, label_width, top = 24, 150, 28
    largest = max((value for _, value, _, _ in bars), default=0) or 1
    height = top + row * max(len(bars), 1) + 8
    parts = [_svg_head(title, width, height)]
    span = width - label_width - 110
    for index, (label, value, color, text) in enumerate(bars):
        y = top + index * row
        length = max(span * value / largest, 1 if value else 0)
        parts.append(f'<text x="{label_width - 6}" y="{y + 15}" text-anchor="end" font-size="12">{escape(label)}</text>'
                     f'<rect x="{label_width}" y="{y + 3}" width="{length:.1f}" height="16" fill="{color}"/>'
                     f'<text x="{label_width + length + 6:.1f}" y="{y + 15}" font-size="12">{escape(text)}</text>')
    if not bars:
        parts.append(f'<text x="0" y="{top + 15}" font-size="12" fill="#757575">nothing to show</text>')
    parts.append("</svg>")
    return "".join(parts)


def stacked_chart(title: str, rows: list[tuple[str, int, int]], width: int = 560) -> str:
    """One bar per row, the implemented part green and the rest grey: (label, implemented, total) each."""
    row, label_width, top = 22, 170, 28
    height = top + row * max(len(rows), 1) + 8
    span = width - label_width - 90
    parts = [_svg_head(title, width, height)]
    for index, (label, done, total) in enumerate(rows):
        y = top + index * row
        filled = span * done / total if total else 0
        parts.append(f'<text x="{label_width - 6}" y="{y + 14}" text-anchor="end" font-size="12">{escape(label)}</text>'
                     f'<rect x="{label_width}" y="{y + 3}" width="{span}" height="14" fill="{MISSING}"/>'
                     f'<rect x="{label_width}" y="{y + 3}" width="{filled:.1f}" height="14" fill="{IMPLEMENTED}"/>'
                     f'<text x="{label_width + span + 6}" y="{y + 14}" font-size="12">{done}/{total}</text>')
    parts.append("</svg>")
    return "".join(parts)


# ---- sections --------------------------------------------------------------------------------------


def _ops_section(report: dict) -> str:
    compared = (report.get("autocompare") or {}).get("ops", {})
    rows = []
    for name, op in sorted(report["ops"].items(), key=lambda item: -item[1]["self_ns"]):
        verdict = compared.get(name)
        check = "" if verdict is None else (f'{verdict["mismatches"]} of {verdict["calls"]} differ'
                                           if verdict["mismatches"] else f'{verdict["calls"]} agree')
        kind = f' <span class="muted">{op["kernel"]}</span>' if op.get("kernel") else ""
        per_call = op["self_ns"] / op["calls"] / 1e3 if op["calls"] else 0
        device_per_call = op.get("device_ns", 0) / op["device_calls"] / 1e3 if op.get("device_calls") else 0
        rows.append(_cells(escape(name), (_tag(op["category"]) + kind, op["category"]), op["calls"],
                           op["fallback_calls"], float(_ms(op["self_ns"])), float(_ms(op["inclusive_ns"])),
                           round(per_call, 1), float(_ms(op.get("device_self_ns", 0))),
                           float(_ms(op.get("device_ns", 0))), round(device_per_call, 1),
                           escape(op.get("path") or ""), escape(op.get("diopi") or ""), escape(check),
                           classes="bad" if verdict and verdict["mismatches"] else ""))
    return ("<h2>Ops</h2><p class='muted'>Every aten op that touched dipu. Self time excludes the dipu ops it "
            "called; a fallback's CPU work is in its self time, its copies to and from the device are the "
            "copy ops' own. Device time: " + escape(report.get("device_time", "")) + ".</p>" +
            _table(["op", "how it ran", "calls", "fallback calls", "self ms", "inclusive ms", "self µs/call",
                    "device self ms", "device ms", "device µs/call", "path", "DIOPI function", "autocompare"], rows))


def _reference_section(report: dict) -> str:
    section = report.get("reference") or {}
    head = "<h2>Slower than the reference</h2>"
    if not section.get("device"):
        return head + f"<p>No reference device: {escape(section.get('why_not') or 'nothing was replayed')}.</p>"
    rows = []
    for index, row in enumerate(section["signatures"]):
        slower = row.get("saving_ns") is not None and row["saving_ns"] > 0

        def us(ns):
            return round(ns / 1e3, 1) if ns is not None else ""

        rows.append(_cells(index + 1, escape(row["signature"]), row["device_calls"], us(row.get("device_ns_per_call")),
                           us(row.get("reference_ns_per_call")),
                           round(row["ratio"], 2) if row.get("ratio") is not None else "",
                           float(_ms(row["saving_ns"])) if row.get("saving_ns") is not None else "",
                           f"{row['share']:.1%}" if row.get("share") is not None else "",
                           escape(row.get("path") or ""), escape(row.get("error") or ""),
                           classes="bad" if slower else ""))
    return (head + f"<p class='muted'>The signatures of most device time, replayed on <b>{escape(section['device'])}"
            "</b> with the same shapes, strides, dtypes and arguments and timed the same way; ranked by the time "
            "dipu would save at the reference's speed, calls x (dipu - reference).</p>" +
            _table(["#", "signature", "calls", "dipu µs/call", "reference µs/call", "ratio", "would save ms",
                    "share of device time", "path", "replay error"], rows))


def _signatures_section(report: dict, top: int = 50) -> str:
    signatures = report.get("signatures") or []
    rows = [_cells(escape(s["signature"]), s["calls"], float(_ms(s["host_self_ns"])), float(_ms(s["device_self_ns"])),
                   float(_ms(s["device_ns"])),
                   round(s["device_ns"] / s["device_calls"] / 1e3, 1) if s["device_calls"] else "")
            for s in signatures[:top]]
    return (f"<h2>Signatures</h2><p class='muted'>The {min(top, len(signatures))} of {len(signatures)} (op, shapes, "
            "dtypes, arguments) signatures of most device self time.</p>" +
            _table(["signature", "calls", "host self ms", "device self ms", "device ms", "device µs/call"], rows))


def _coverage_section(coverage: dict | None) -> str:
    if not coverage:
        return "<h2>Proto coverage</h2><p>No op library: every op runs through the CPU fallback.</p>"
    by_family: dict[str, list] = {}
    for name, function in coverage["functions"].items():
        by_family.setdefault(function["family"], []).append((name, function))
    library = (f"Op library <b>{escape(coverage['library'])}</b> (layers: {escape(' over '.join(coverage['layers']))})"
               if coverage["library"] else "No op library (a runtime-only vendor)")
    parts = [f"<h2>Proto coverage</h2><p>{library} implements {coverage['implemented']} of "
             f"{coverage['total']} DIOPI functions.</p>"]
    for family, functions in sorted(by_family.items(), key=lambda item: item[0]):
        done = sum(f["implemented"] for _, f in functions)
        rows = [_cells(escape(name), "yes" if f["implemented"] else "<b>no</b>", escape(f["layer"] or ""),
                       escape(", ".join(f["ops"]) or "(no op in the spec)"), classes="" if f["implemented"] else "bad")
                for name, f in functions]
        parts.append(f"<details><summary>{escape(family)}: {done} of {len(functions)} implemented</summary>"
                     + _table(["DIOPI function", "implemented", "by", "ops that need it"], rows) + "</details>")
    return "".join(parts)


def _write_next_section(items: list[dict]) -> str:
    if not items:
        return "<h2>Write these next</h2><p>Nothing ran on the CPU fallback.</p>"
    rows = [_cells(index + 1, escape(item["name"]), escape(item["action"]), float(_ms(item["time_ns"])),
                   item["fallback_calls"], escape(", ".join(item["ops"])), escape(item.get("family") or ""))
            for index, item in enumerate(items)]
    return ("<h2>Write these next</h2><p class='muted'>Ranked by the host time their ops spent on the CPU "
            "fallback.</p>" + _table(["#", "what", "action", "fallback ms", "fallback calls", "ops", "family"], rows))


def _autocompare_section(compared: dict | None) -> str:
    if not compared:
        return "<h2>Autocompare</h2><p>Autocompare was off (DIPU_AUTOCOMPARE_OPS_LIST).</p>"
    first = compared.get("first_mismatch")
    rows = []
    for name, op in sorted(compared["ops"].items()):
        mismatch = op.get("first_mismatch")
        is_first = bool(first and mismatch and mismatch["call"] == first["call"])
        rows.append(_cells(escape(name), escape(op.get("diopi") or ""), op["calls"], op["mismatches"],
                           escape(mismatch["text"] if mismatch else ""),
                           classes="first" if is_first else "bad" if op["mismatches"] else ""))
    head = (f"<h2>Autocompare</h2><p>{len(compared['ops'])} ops compared in {compared['calls']} calls, "
            f"<b>{compared['mismatches']} mismatches</b>.")
    if first:
        head += f" First mismatch (highlighted): <b>{escape(first['text'])}</b>."
    head += "</p>"
    if compared.get("never_ran"):
        head += (f"<p>Functions of op library '{escape(str(compared.get('library')))}' that never ran under "
                 f"autocompare: {escape(', '.join(compared['never_ran']))}</p>")
    if compared.get("reference_failures"):
        head += "<p>No CPU reference for: " + escape(", ".join(sorted(compared["reference_failures"]))) + "</p>"
    return head + _table(["op", "DIOPI function", "compared calls", "mismatches", "first mismatch"], rows)


def _processes_section(processes: list[dict]) -> str:
    rows = [_cells(escape(p["label"]), escape(" ".join(p.get("argv") or [])), p["calls"], float(_ms(p["self_ns"])),
                   p["fallback_calls"], round(p.get("wall_s") or 0, 2), escape(p.get("error") or ""))
            for p in processes]
    return "<h2>Processes</h2>" + _table(["process", "command", "calls", "self ms", "fallback calls", "wall s",
                                          "error"], rows)


def render(report: dict) -> str:
    categories = report["categories"]
    total = sum(c["self_ns"] for c in categories.values())
    time_bars = [(category, c["self_ns"], COLORS[category], f"{c['self_ns'] / 1e6:.1f} ms ({c['time_share']:.0%})")
                 for category, c in categories.items() if c["ops"]]
    coverage = report.get("coverage")
    family_rows = [(family, f["implemented"], f["total"])
                   for family, f in sorted((coverage or {}).get("families", {}).items(), key=lambda i: -i[1]["total"])]
    charts = bar_chart(f"Host time by category ({total / 1e6:.1f} ms)", time_bars)
    if family_rows:
        charts += stacked_chart("Proto coverage by family", family_rows)
    summary = "\n".join(summary_lines(report))
    legend = " ".join(_tag(c) for c in CATEGORIES)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>dipu run report</title>"
            f"<style>{CSS}</style></head><body><h1>dipu run report</h1>"
            f"<pre class='summary'>{escape(summary)}</pre><p>{legend}</p><div class='charts'>{charts}</div>"
            f"{_write_next_section(report['write_next'])}{_reference_section(report)}{_ops_section(report)}"
            f"{_signatures_section(report)}"
            f"{_autocompare_section(report.get('autocompare'))}{_coverage_section(coverage)}"
            f"{_processes_section(report['processes'])}"
            f"<p class='muted'>report schema {report['schema']}</p><script>{SORT_SCRIPT}</script></body></html>")
