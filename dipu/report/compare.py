"""``python -m dipu.report --compare OLD.json NEW.json``: what changed between two runs."""

from __future__ import annotations

from pathlib import Path

from dipu.report.files import load_json
from dipu.report.merge import ON_CPU, SCHEMA

#: A change of host time per call smaller than this ratio, or than ``MIN_DELTA_NS``, is noise.
RATIO = 1.25
MIN_DELTA_NS = 2_000


def load(path: Path) -> dict:
    return load_json(path, kind="report", option="--compare", what="a dipu run report (report.json)")


def _per_call(op: dict) -> float:
    return op["self_ns"] / op["calls"] if op.get("calls") else 0.0


def compare(old: dict, new: dict) -> list[str]:
    """The lines of the comparison; what a schema difference prevents is said first."""
    lines = []
    versions = (old.get("schema"), new.get("schema"))
    if versions[0] != versions[1]:
        lines.append(f"the reports have different schema versions ({versions[0]} and {versions[1]}; this dipu "
                     f"writes {SCHEMA}): only the ops' categories, calls and host times are compared")
    old_ops, new_ops = old.get("ops"), new.get("ops")
    if not isinstance(old_ops, dict) or not isinstance(new_ops, dict):
        lines.append("cannot compare the ops: a report has no 'ops' table")
        return lines
    needed = ("category", "calls", "self_ns")
    usable = {name for name in old_ops.keys() & new_ops.keys()
              if all(key in old_ops[name] and key in new_ops[name] for key in needed)}
    skipped = sorted((old_ops.keys() & new_ops.keys()) - usable)
    if skipped:
        lines.append(f"cannot compare {len(skipped)} ops whose entries lack {', '.join(needed)}: {', '.join(skipped)}")
    moved_native = [n for n in sorted(usable)
                    if old_ops[n]["category"] in ON_CPU and new_ops[n]["category"] not in ON_CPU]
    moved_back = [n for n in sorted(usable)
                  if old_ops[n]["category"] not in ON_CPU and new_ops[n]["category"] in ON_CPU]
    moved_other = [n for n in sorted(usable) if n not in moved_native and n not in moved_back
                   and old_ops[n]["category"] != new_ops[n]["category"]]
    for title, names in (("moved from the CPU fallback to dipu", moved_native),
                         ("moved back to the CPU fallback", moved_back),
                         ("changed category", moved_other)):
        lines.append(f"{title}: {len(names)}")
        lines += [f"  {n}: {old_ops[n]['category']} -> {new_ops[n]['category']}" for n in names]
    slower, faster = [], []
    for name in sorted(usable):
        before, after = _per_call(old_ops[name]), _per_call(new_ops[name])
        if not before or not after or abs(after - before) < MIN_DELTA_NS:
            continue
        line = f"  {name}: {before / 1e3:.1f} -> {after / 1e3:.1f} µs per call (x{after / before:.2f})"
        if after > before * RATIO:
            slower.append((after / before, line))
        elif before > after * RATIO:
            faster.append((before / after, line))
    for title, found in (("slower (host time per call)", slower), ("faster (host time per call)", faster)):
        lines.append(f"{title}: {len(found)}")
        lines += [line for _, line in sorted(found, reverse=True)]
    lines += _signature_lines(old, new)
    appeared = sorted(new_ops.keys() - old_ops.keys())
    vanished = sorted(old_ops.keys() - new_ops.keys())
    lines.append(f"new ops: {len(appeared)}" + (f" ({', '.join(appeared)})" if appeared else ""))
    lines.append(f"vanished ops: {len(vanished)}" + (f" ({', '.join(vanished)})" if vanished else ""))
    old_cov, new_cov = old.get("coverage"), new.get("coverage")
    if versions[0] == versions[1] and old_cov and new_cov:
        lines.append(f"proto coverage: {old_cov.get('implemented')} -> {new_cov.get('implemented')} of "
                     f"{new_cov.get('total')} functions")
    elif versions[0] != versions[1]:
        lines.append("not compared across schema versions: proto coverage, write these next, autocompare")
    return lines


def _device_per_call(signature: dict) -> float:
    return signature["device_ns"] / signature["device_calls"] if signature.get("device_calls") else 0.0


def _signature_lines(old: dict, new: dict) -> list[str]:
    """Device time per call of each signature both reports timed, and each replayed one's ratio to the
    reference (Note [The reference device] in dipu/report/reference.py)."""
    before = {s["signature"]: s for s in old.get("signatures") or [] if s.get("device_calls")}
    after = {s["signature"]: s for s in new.get("signatures") or [] if s.get("device_calls")}
    if not before or not after:
        return ["per signature: not compared (a report has no device times per signature)"]
    changed = []
    for text in sorted(before.keys() & after.keys()):
        a, b = _device_per_call(before[text]), _device_per_call(after[text])
        if not a or not b or abs(b - a) < MIN_DELTA_NS or max(a, b) < min(a, b) * RATIO:
            continue
        changed.append((b / a, f"  {text}: {a / 1e3:.1f} -> {b / 1e3:.1f} µs per call (x{b / a:.2f})"))
    lines = [f"device time per call changed (per signature): {len(changed)} of {len(before.keys() & after.keys())}"]
    lines += [line for _, line in sorted(changed, reverse=True)]
    ratios: dict[str, dict] = {}
    for which, report in (("old", old), ("new", new)):
        for row in (report.get("reference") or {}).get("signatures", []):
            if row.get("ratio"):
                ratios.setdefault(row["signature"], {})[which] = row["ratio"]
    both = {text: r for text, r in ratios.items() if len(r) == 2}
    if both:
        lines.append(f"against the reference (dipu / reference per call), {len(both)} signatures replayed in both:")
        lines += [f"  {text}: x{r['old']:.2f} -> x{r['new']:.2f}" for text, r in sorted(both.items())]
    return lines
