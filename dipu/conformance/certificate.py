"""The conformance certificate: verdicts gathered into certificate.json and a self-contained
certificate.html, its summary lines, and the comparison with an earlier certificate."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from dipu.report.files import load_json

SCHEMA = 1
VERDICTS = ("agrees", "fallback", "expected failure", "mismatch", "error", "crash", "skipped")
#: A verdict that was one of GOOD and is now one of BAD regressed.
GOOD, BAD = ("agrees", "fallback"), ("mismatch", "error", "crash")
COLORS = {"agrees": "#2e7d32", "fallback": "#ef6c00", "expected failure": "#5d4037", "mismatch": "#c62828",
          "error": "#8e24aa", "crash": "#000000", "skipped": "#9e9e9e"}
#: The dtype and pass of a verdict about a whole item (a crash, inputs that could not be made, the budget), and
#: of an expected failure listed for every dtype and pass of an item.
WHOLE = "*"


def _key(record: dict) -> str:
    return f"{record['suite']}:{record['name']}:{record['dtype']}:{record['pass']}"


def expected_key(suite: str, name: str, dtype: str = WHOLE, what: str = WHOLE) -> str:
    """The key of an entry of the expected failures ``build`` applies."""
    return f"{suite}:{name}:{dtype}:{what}"


def _apply_expected(record: dict, expected: dict[str, tuple[str, int]]) -> dict:
    """A failing record the expected failures list becomes an ``expected failure`` (what it was kept); an agreeing
    one that compared the input listed as the first to fail is marked as listed."""
    entry = expected.get(_key(record)) or expected.get(expected_key(record["suite"], record["name"]))
    if entry is None:
        return record
    reason, first_failing = entry
    if record["verdict"] in BAD:
        return {**record, "verdict": "expected failure", "was": record["verdict"], "expected": reason}
    if record["verdict"] in GOOD and record.get("samples", 0) > first_failing:
        return {**record, "expected": reason}
    return record


def build(records: list[dict], *, settings: dict, environment: list[str], not_here: dict, baseline: dict | None,
          finished: str, wall_s: float, expected: dict[str, tuple[str, int]] | None = None) -> dict:
    """The certificate of ``records``; ``expected`` maps the keys of failures dipu's own suite expects (see
    ``expected_key``) to their reasons and the index of the first input that fails."""
    verdicts: dict[str, dict] = {}
    for record in records:  # a resumed item's later verdict replaces the earlier one
        if record.get("verdict") == "crash":
            for key in [k for k, v in verdicts.items() if (v["suite"], v["name"]) == (record["suite"], record["name"])]:
                del verdicts[key]  # the item's verdicts before it crashed are incomplete
        verdicts[_key(record)] = _apply_expected(record, expected or {})
    summary: dict[str, dict[str, int]] = {}
    agreement: dict[str, dict[str, int]] = {}
    for record in verdicts.values():
        counts = summary.setdefault(record["suite"], dict.fromkeys(VERDICTS, 0))
        counts[record["verdict"]] += 1
        if "samples" in record:
            totals = agreement.setdefault(f"{record['suite']} {record['dtype']} {record['pass']}",
                                          {"samples": 0, "agreed": 0})
            totals["samples"] += record["samples"]
            totals["agreed"] += record.get("agreed", 0)
    certificate = {"schema": SCHEMA, "kind": "conformance certificate", "finished": finished,
                   "wall_s": round(wall_s, 1), "settings": settings, "environment": environment,
                   "not_here": not_here, "summary": summary, "agreement": agreement,
                   "verdicts": sorted(verdicts.values(), key=lambda r: (r["suite"], r["name"], r["dtype"], r["pass"]))}
    certificate["fallback_ops"] = sorted({op for r in verdicts.values() for op in r.get("fallback_ops", [])})
    if baseline is not None:
        certificate["comparison"] = compare(baseline, certificate)
    return certificate


def load(path: Path) -> dict:
    return load_json(path, kind="conformance certificate", option="--baseline",
                     what="a dipu conformance certificate (certificate.json)")


def _widen(verdicts: dict[str, dict], keys) -> dict[str, dict]:
    """``verdicts`` with each whole-item verdict (a crash, the budget) standing for every key of ``keys`` of the
    same item that it lacks, so that an item that agreed per pass and now crashes is compared pass by pass."""
    whole = {(r["suite"], r["name"]): r for r in verdicts.values() if (r["dtype"], r["pass"]) == (WHOLE, WHOLE)}
    widened = dict(verdicts)
    for key in keys:
        suite, name = key.split(":", 2)[:2]
        if key not in widened and (suite, name) in whole:
            widened[key] = whole[suite, name]
    return widened


def compare(old: dict, new: dict) -> dict:
    """Per (suite, item, dtype, pass) both certificates judged: what regressed (good -> bad), what improved."""
    before = {_key(r): r for r in old.get("verdicts", [])}
    after = {_key(r): r for r in new.get("verdicts", [])}
    before, after = _widen(before, after), _widen(after, before)
    regressed: list[dict] = []
    improved: list[dict] = []
    changed: list[dict] = []
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key]["verdict"], after[key]["verdict"]
        if a == b:
            continue
        row = {"key": key, "old": a, "new": b, "detail": after[key].get("detail") or after[key].get("reason")}
        (regressed if a in GOOD and b in BAD else improved if a in BAD and b in GOOD else changed).append(row)
    settings = old.get("settings") or {}, new.get("settings") or {}
    differ = sorted(k for k in ("suites", "dtypes", "samples") if settings[0].get(k) != settings[1].get(k))
    return {"regressed": regressed, "improved": improved, "changed": changed, "settings_differ": differ,
            "only_old": len(before.keys() - after.keys()), "only_new": len(after.keys() - before.keys())}


def summary_lines(certificate: dict) -> list[str]:
    lines = [f"dipu conformance certificate ({certificate['wall_s']:.0f} s): " +
             "; ".join(f"{suite}: " + ", ".join(f"{v} {n}" for v, n in counts.items() if n)
                       for suite, counts in certificate["summary"].items())]
    for name, totals in sorted(certificate["agreement"].items()):
        if totals["samples"]:
            lines.append(f"  {name}: {totals['agreed']} of {totals['samples']} samples agree with the CPU "
                         f"({100 * totals['agreed'] / totals['samples']:.2f}%)")
    for suite, why in certificate.get("not_here", {}).items():
        lines.append(f"  {suite}: not run: {why}")
    bad = [r for r in certificate["verdicts"] if r["verdict"] in BAD]
    for record in bad[:10]:
        lines.append(f"  {record['verdict']}: {record['suite']} {record['name']} {record['dtype']} {record['pass']}: "
                     f"{(record.get('detail') or '')[:160]}")
    if len(bad) > 10:
        lines.append(f"  ... {len(bad) - 10} more in the certificate")
    if certificate["fallback_ops"]:
        lines.append(f"  ops that ran on the CPU fallback: {', '.join(certificate['fallback_ops'])}")
    listed = [r for r in certificate["verdicts"] if r.get("expected")]
    if listed:
        passing = [f"{r['suite']} {r['name']} {r['dtype']} {r['pass']}" for r in listed
                   if r["verdict"] != "expected failure"]
        lines.append(f"  expected failures (dipu's own lists, not regressions): {len(listed) - len(passing)}"
                     + (f"; listed but agreeing now: {', '.join(passing[:10])}" if passing else ""))
    comparison = certificate.get("comparison")
    if comparison:
        lines.append(f"  against the baseline: {len(comparison['regressed'])} regressed, "
                     f"{len(comparison['improved'])} improved, {len(comparison['changed'])} changed otherwise")
        lines += [f"    regressed: {row['key']}: {row['old']} -> {row['new']}" for row in comparison["regressed"][:10]]
        if comparison.get("settings_differ"):
            lines.append(f"    the baseline ran with other {', '.join(comparison['settings_differ'])}: only the "
                         f"verdicts both judged are compared")
    return lines


def _tag(verdict: str) -> str:
    return (f'<span style="background:{COLORS.get(verdict, "#757575")};color:#fff;padding:0 6px;'
            f'border-radius:3px">{escape(verdict)}</span>')


def _detail(record: dict) -> str:
    parts = []
    if record["verdict"] == "mismatch" and record.get("max_error"):
        parts.append("largest error " + ", ".join(f"{k} {v:.3g} (tolerance {record['tolerance'][k]:.3g})"
                                                   for k, v in record["max_error"].items()))
    if record["verdict"] == "error":
        parts.append(f"dipu: {record.get('dipu_error')}, CPU: {record.get('cpu_error') or 'no error'}")
    if record.get("fallback_ops"):
        parts.append("on the CPU fallback: " + ", ".join(record["fallback_ops"]))
    if record.get("expected"):
        parts.append(f"expected ({record.get('was', 'listed, yet agreeing')}): {record['expected']}")
    text = record.get("detail") or record.get("reason") or ""
    return escape("; ".join(parts)) + (f"<br><span class='muted'>{escape(text)}</span>" if text else "")


def render(certificate: dict) -> str:
    from dipu.report.html import CSS, SORT_SCRIPT, _table

    rows = [f"<tr><td>{escape(suite)}</td>" + "".join(f'<td class="n">{counts[v]}</td>' for v in VERDICTS) + "</tr>"
            for suite, counts in certificate["summary"].items()]
    summary = _table(["suite", *VERDICTS], rows)
    agreement = _table(["suite dtype pass", "samples", "agree", "%"], [
        f"<tr><td>{escape(name)}</td><td class='n'>{t['samples']}</td><td class='n'>{t['agreed']}</td>"
        f"<td class='n'>{100 * t['agreed'] / t['samples']:.2f}</td></tr>"
        for name, t in sorted(certificate["agreement"].items()) if t["samples"]])
    verdict_rows = [f"<tr class=\"{'bad' if r['verdict'] in BAD else ''}\"><td>{escape(r['suite'])}</td>"
                    f"<td>{escape(r['name'])}</td><td>{escape(r['dtype'])}</td><td>{escape(r['pass'])}</td>"
                    f"<td data-v=\"{escape(r['verdict'])}\">{_tag(r['verdict'])}</td>"
                    f"<td class='n'>{r.get('samples', '')}</td><td>{_detail(r)}</td></tr>"
                    for r in sorted(certificate["verdicts"], key=lambda r: (r["verdict"] in GOOD,
                                                                            r["suite"], r["name"]))]
    comparison = certificate.get("comparison")
    compared = ""
    if comparison:
        rows = [f"<tr class=\"{'bad' if row in comparison['regressed'] else ''}\"><td>{escape(row['key'])}</td>"
                f"<td>{_tag(row['old'])}</td><td>{_tag(row['new'])}</td><td>{escape(row.get('detail') or '')}</td></tr>"
                for row in comparison["regressed"] + comparison["improved"] + comparison["changed"]]
        compared = (f"<h2>Against the baseline</h2><p>{len(comparison['regressed'])} regressed, "
                    f"{len(comparison['improved'])} improved, {len(comparison['changed'])} changed otherwise.</p>"
                    + _table(["item", "was", "now", "detail"], rows))
    environment = escape("\n".join(certificate["environment"]))
    settings = escape(json.dumps(certificate["settings"]))
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>dipu conformance certificate"
            f"</title><style>{CSS}</style></head><body><h1>dipu conformance certificate</h1>"
            f"<pre class='summary'>{escape(chr(10).join(summary_lines(certificate)))}</pre>"
            f"<h2>Summary</h2>{summary}<h2>Samples agreeing with the CPU</h2>{agreement}{compared}"
            f"<h2>Verdicts</h2><p class='muted'>Per item, dtype and pass; problems first.</p>"
            f"{_table(['suite', 'item', 'dtype', 'pass', 'verdict', 'samples', 'detail'], verdict_rows)}"
            f"<h2>Environment</h2><pre class='summary'>{environment}</pre><p class='muted'>settings: {settings}; "
            f"finished {escape(certificate['finished'])}; schema {certificate['schema']}</p>"
            f"<script>{SORT_SCRIPT}</script></body></html>")


def write(directory: Path, certificate: dict) -> None:
    (directory / "certificate.json").write_text(json.dumps(certificate, indent=1, sort_keys=True))
    (directory / "certificate.html").write_text(render(certificate))
