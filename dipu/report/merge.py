"""Merging the process records of a run into one report, and the report's short text summary.

Needs no live dipu state and touches no file (dipu/report/files.py reads and writes them).
"""

from __future__ import annotations


#: The report's format version. Bump it when a field changes meaning; --compare says what it cannot
#: compare across versions (dipu/report/compare.py).
SCHEMA = 2  # 2: device times per op and signature, the reference device

#: The categories, in the order the report shows them (what each means: dipu/report/__init__.py).
CATEGORIES = ("native", "refused", "fallback", "forced fallback", "core", "composite", "other")
#: The categories whose ops ran (at least partly) on the CPU through the fallback.
ON_CPU = ("refused", "fallback", "forced fallback")


# ---- merging ---------------------------------------------------------------------------------------


def _rank_label(record: dict) -> str:
    rank = record.get("rank")
    return f"rank {rank}" if rank is not None else f"{record.get('host')}:{record.get('pid')}"


def merge(records: list[dict]) -> dict:
    """One report from the process records of a run: ops summed over processes (each process's totals
    kept), the coverage of the first process's library, autocompare's results summed."""
    records = sorted(records, key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r.get("started", "")))
    ops: dict[str, dict] = {}
    for record in records:
        label = _rank_label(record)
        for name, op in record.get("ops", {}).items():
            merged = ops.setdefault(name, {"calls": 0, "inclusive_ns": 0, "self_ns": 0, "fallback_calls": 0,
                                           "device_calls": 0, "device_ns": 0, "device_self_ns": 0,
                                           "path": op.get("path"),
                                           "category": op["category"], "kernel": op.get("kernel"),
                                           "diopi": op.get("diopi"), "functions": op.get("functions", []),
                                           "in_spec": op.get("in_spec", False), "categories": {}})
            for key in ("calls", "inclusive_ns", "self_ns", "fallback_calls", "device_calls", "device_ns",
                        "device_self_ns"):
                merged[key] += op.get(key, 0)
            merged["categories"][op["category"]] = merged["categories"].get(op["category"], 0) + op["calls"]
            merged.setdefault("per_process", {})[label] = op["calls"]
    for op in ops.values():  # the category of most calls (processes of one run normally agree)
        op["category"] = max(op["categories"].items(), key=lambda item: item[1])[0]
    first = records[0] if records else {}
    report = {
        "schema": SCHEMA,
        "kind": "report",
        "processes": [_process_summary(r) for r in records],
        "vendor": first.get("vendor"),
        "op_library": first.get("op_library"),
        "torch": first.get("torch"),
        "argv": first.get("argv"),
        "device_time": _device_time(records),
        "forced_fallback_patterns": first.get("forced_fallback_patterns", []),
        "ops": ops,
        "coverage": _coverage(first.get("coverage")),
        "autocompare": _merge_autocompare([r.get("autocompare") for r in records]),
    }
    report["categories"] = _categories(ops)
    report["write_next"] = write_next(ops, report["coverage"])
    report["signatures"] = _merge_signatures(records)
    report["reference"] = _merge_reference(records, sum(op["device_self_ns"] for op in ops.values()))
    return report


def ranked(entries: list[dict], total_device_ns: int) -> list[dict]:
    """The replayed signatures with ratio, saving and share, slowest against the reference first."""
    rows = []
    for entry in entries:
        per_call = entry["device_ns"] / entry["device_calls"] if entry.get("device_calls") else None
        reference = entry.get("reference_ns_per_call")
        row = {**entry, "device_ns_per_call": per_call,
               "share": entry["device_ns"] / total_device_ns if total_device_ns else None}
        if per_call is not None and reference:
            row["ratio"] = per_call / reference
            row["saving_ns"] = entry["device_calls"] * (per_call - reference)
        else:
            row["ratio"] = row["saving_ns"] = None
        rows.append(row)
    return sorted(rows, key=lambda r: (r["saving_ns"] is None, -(r["saving_ns"] or 0), r["signature"]))


#: What each method of Note [Device time per kernel] (dipu/csrc/op_stats.cpp) means, for the report.
DEVICE_TIME_METHODS = {
    "events": "device time from the vendor's timing events around each call, read back in batches",
    "synchronize": "the vendor has no timing events: host time of each call between two device synchronizes",
    "off": "not measured (DIPU_REPORT_DEVICE_TIME=off): host time per op only",
}


def _device_time(records: list[dict]) -> str:
    methods = sorted({r.get("device_time") or "not measured" for r in records})
    return "; ".join(DEVICE_TIME_METHODS.get(m, m) for m in methods) if methods else "not measured"


def _merge_signatures(records: list[dict]) -> list[dict]:
    found: dict[str, dict] = {}
    for record in records:
        for signature in record.get("signatures", []):
            merged = found.setdefault(signature["signature"], {
                "op": signature["op"], "signature": signature["signature"], "calls": 0, "host_ns": 0,
                "host_self_ns": 0, "device_calls": 0, "device_ns": 0, "device_self_ns": 0})
            for key in ("calls", "host_ns", "host_self_ns", "device_calls", "device_ns", "device_self_ns"):
                merged[key] += signature.get(key, 0)
    return sorted(found.values(), key=lambda s: (-s["device_self_ns"], -s["host_self_ns"], s["signature"]))


def _merge_reference(records: list[dict], total_device_ns: int) -> dict:
    """The replayed signatures of every process, summed per signature (the first replay's time kept), ranked
    by the time dipu would save at the reference's speed (Note [The reference device] in
    dipu/report/reference.py)."""
    found: dict[str, dict] = {}
    device = why_not = None
    for record in records:
        section = record.get("reference") or {}
        device = device or section.get("device")
        why_not = why_not or section.get("why_not")
        for entry in section.get("signatures", []):
            merged = found.get(entry["signature"])
            if merged is None:
                found[entry["signature"]] = dict(entry)
                continue
            for key in ("calls", "device_calls", "device_ns", "host_ns"):
                merged[key] += entry.get(key, 0)
            if merged.get("reference_ns_per_call") is None:
                merged["reference_ns_per_call"] = entry.get("reference_ns_per_call")
                merged["error"] = entry.get("error")
    return {"device": device, "why_not": why_not, "signatures": ranked(list(found.values()), total_device_ns)}


def _process_summary(record: dict) -> dict:
    ops = record.get("ops", {}).values()
    return {"label": _rank_label(record), "host": record.get("host"), "pid": record.get("pid"),
            "rank": record.get("rank"), "argv": record.get("argv"), "wall_s": record.get("wall_s"),
            "error": record.get("error"), "calls": sum(op["calls"] for op in ops),
            "self_ns": sum(op["self_ns"] for op in ops),
            "fallback_calls": sum(op["fallback_calls"] for op in ops)}


def _categories(ops: dict) -> dict:
    total = sum(op["self_ns"] for op in ops.values()) or 1
    found = {}
    for category in CATEGORIES:
        members = [op for op in ops.values() if op["category"] == category]
        self_ns = sum(op["self_ns"] for op in members)
        found[category] = {"ops": len(members), "calls": sum(op["calls"] for op in members), "self_ns": self_ns,
                           "time_share": self_ns / total}
    return found


def _coverage(coverage: dict | None) -> dict | None:
    if not coverage:
        return None
    families: dict[str, dict] = {}
    for function in coverage["functions"].values():
        family = families.setdefault(function["family"], {"implemented": 0, "total": 0})
        family["total"] += 1
        family["implemented"] += function["implemented"]
    implemented = sum(f["implemented"] for f in coverage["functions"].values())
    return {**coverage, "families": families, "implemented": implemented, "total": len(coverage["functions"])}


def _merge_autocompare(records: list) -> dict | None:
    records = [r for r in records if r]
    if not records:
        return None
    ops: dict[str, dict] = {}
    for record in records:
        for name, op in record["ops"].items():
            merged = ops.setdefault(name, {"calls": 0, "mismatches": 0, "diopi": op.get("diopi"),
                                           "first_mismatch": None})
            merged["calls"] += op["calls"]
            merged["mismatches"] += op["mismatches"]
            merged["first_mismatch"] = merged["first_mismatch"] or op.get("first_mismatch")
    first = next((r["first_mismatch"] for r in records if r.get("first_mismatch")), None)
    never_ran = sorted(set().union(*(r.get("never_ran", []) for r in records)) -
                       set().union(*(r.get("ran", []) for r in records)))
    return {"calls": sum(r["calls"] for r in records), "mismatches": sum(r["mismatches"] for r in records),
            "ops": ops, "first_mismatch": first, "never_ran": never_ran,
            "reference_failures": {k: v for r in records for k, v in r.get("reference_failures", {}).items()},
            "library": records[0].get("library")}


def write_next(ops: dict, coverage: dict | None) -> list[dict]:
    """What to implement next, ranked by the host time the ops spent on the CPU because of it: DIOPI
    functions the library lacks (their ops' fallback time), functions that answered FORCE_FALLBACK (for
    some calls or all: only the refused share of an op's time counts), and
    ops the spec does not cover ("add a spec entry")."""
    functions = coverage["functions"] if coverage else {}
    items: dict[str, dict] = {}
    for name, op in ops.items():
        refused = op["category"] == "refused" or op["category"] == "native" and op["fallback_calls"]
        if op["category"] != "fallback" and not refused:
            continue
        share = op["fallback_calls"] / op["calls"] if op["calls"] else 1.0
        time_ns = int(op["self_ns"] * share)
        if not op["in_spec"]:
            key, what, action = f"op:{name}", name, "add a spec entry (diopi_functions.yaml) and a DIOPI function"
        elif refused:
            key, what = f"fn:{op['diopi']}", op["diopi"]
            action = "implemented, but answered FORCE_FALLBACK (e.g. a dtype it does not declare)"
        else:
            missing = [f for f in op["functions"] if not functions.get(f, {}).get("implemented")]
            if not missing:
                key, what, action = f"op:{name}", name, "the library has its functions, yet the op was not registered"
            else:
                key, what, action = f"fn:{missing[0]}", missing[0], "implement"
        item = items.setdefault(key, {"name": what, "action": action, "time_ns": 0, "fallback_calls": 0, "ops": [],
                                      "family": functions.get(what, {}).get("family")})
        item["time_ns"] += time_ns
        item["fallback_calls"] += op["fallback_calls"]
        item["ops"].append(name)
    return sorted(items.values(), key=lambda item: (-item["time_ns"], -item["fallback_calls"], item["name"]))


# ---- the text summary ------------------------------------------------------------------------------


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.1f} ms"


def summary_lines(report: dict, top: int = 5) -> list[str]:
    """The report's top lines, as ``python -m dipu.report`` prints them."""
    ops = report["ops"]
    processes = report["processes"]
    lines = [f"dipu run report: {len(ops)} ops touched dipu in {len(processes)} process(es), "
             f"{sum(op['calls'] for op in ops.values())} calls, "
             f"{_ms(sum(op['self_ns'] for op in ops.values()))} host time in dipu ops, "
             f"{_ms(sum(op.get('device_self_ns', 0) for op in ops.values()))} device time "
             f"(vendor {report.get('vendor')}, op library {report.get('op_library') or 'none'}; "
             f"{report.get('device_time')})"]
    parts = [f"{category} {c['ops']} ops / {c['calls']} calls / {c['time_share']:.0%} of the time"
             for category, c in report["categories"].items() if c["ops"]]
    lines.append("  by category: " + "; ".join(parts) if parts else "  by category: no dipu op ran")
    coverage = report.get("coverage")
    if coverage:
        library = (f"op library {coverage['library']}" if coverage["library"]
                   else "no op library (a runtime-only vendor)")
        lines.append(f"  proto coverage: {library} implements {coverage['implemented']} of "
                     f"{coverage['total']} DIOPI functions")
    nexts = report["write_next"][:top]
    if nexts:
        lines.append("  write these next:")
        for item in nexts:
            lines.append(f"    {item['name']}: {_ms(item['time_ns'])} on the CPU, {item['fallback_calls']} calls "
                         f"({', '.join(item['ops'][:4])}{', ...' if len(item['ops']) > 4 else ''}): {item['action']}")
    else:
        lines.append("  write these next: nothing ran on the CPU fallback")
    lines += reference_lines(report, top)
    compared = report.get("autocompare")
    if compared:
        verdict = (f"  autocompare: {len(compared['ops'])} ops compared in {compared['calls']} calls, "
                   f"{compared['mismatches']} mismatches")
        if compared.get("first_mismatch"):
            verdict += f"; first mismatch: {compared['first_mismatch']['text']}"
        lines.append(verdict)
        if compared.get("never_ran"):
            lines.append(f"  autocompare never ran these functions of {compared.get('library')}: "
                         f"{', '.join(compared['never_ran'])}")
    for process in processes:
        if process.get("error"):
            lines.append(f"  {process['label']} ended with {process['error']}")
    return lines


def reference_lines(report: dict, top: int = 5) -> list[str]:
    """"Slower than the reference" (Note [The reference device] in dipu/report/reference.py)."""
    section = report.get("reference") or {}
    if not section.get("device"):
        return [f"  reference device: none ({section.get('why_not') or 'not replayed'})"] if section else []
    rows = section.get("signatures", [])
    slower = [r for r in rows if r.get("saving_ns") is not None and r["saving_ns"] > 0]
    lines = [f"  slower than the reference ({section['device']}): {len(slower)} of {len(rows)} replayed signatures"]
    for row in slower[:top]:
        lines.append(f"    {row['signature']}: {row['device_ns_per_call'] / 1e3:.1f} vs "
                     f"{row['reference_ns_per_call'] / 1e3:.1f} us per call (x{row['ratio']:.2f}), "
                     f"{row['device_calls']} calls, would save {_ms(row['saving_ns'])} "
                     f"({row['share']:.0%} of device time; {row.get('path') or 'no kernel'})")
    failed = [r for r in rows if r.get("error")]
    if failed:
        lines.append(f"    not replayed: {len(failed)} ({failed[0]['signature']}: {failed[0]['error']}"
                     f"{', ...' if len(failed) > 1 else ''})")
    return lines
