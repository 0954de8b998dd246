"""Collecting the run report in a dipu process: switched on at import by ``DIPU_REPORT=DIR``.

Note [One file per process]
Every dipu process of a run (each torchrun rank, each spawned worker) writes its own
``DIR/processes/<host>-<pid>.json`` at exit, through atexit, which also runs when the program raised;
then, holding a lock on the directory, it merges all process files there into ``DIR/report.json`` and
``DIR/report.html`` (dipu/report/files.py). So the report is whole after the last process exits, whether
or not ``python -m dipu.report`` started the run; the CLI merges once more at the end. A process that
ends with ``os._exit`` (or a signal) runs no atexit handler and writes nothing.
The process file holds everything only the live process knows: the per-op host times of the native core
(Note [Op statistics] in dipu/csrc/op_stats.cpp), the device times per signature (Note [Device time per
kernel] there) and their replay on the reference device (Note [The reference device] in
dipu/report/reference.py), each op's category (needs the registration and the
dispatcher), the fallback counts, the proto coverage of the active library and autocompare's results.
"""

from __future__ import annotations

import atexit
import datetime
import os
import socket
import sys
import time
from pathlib import Path

import torch

from dipu._core import _C, vendor
from dipu.kernels import fallback
from dipu.kernels.registry import registration
from dipu.kernels.switches import force_fallback_patterns
from dipu.report import coverage, files, merge, reference

REPORT_VAR = "DIPU_REPORT"
#: How device time is measured: auto (events where the vendor times them), events, synchronize or off.
DEVICE_TIME_VAR = "DIPU_REPORT_DEVICE_TIME"

_state: dict = {}


def requested_directory() -> Path | None:
    """The directory ``DIPU_REPORT`` names (None when unset or empty); a value that cannot be a
    writable directory is an error naming the variable."""
    text = os.environ.get(REPORT_VAR, "").strip()
    if not text:
        return None
    return files.writable_directory(Path(text), f"{REPORT_VAR}={text!r}")


def _is_the_report_cli() -> bool:
    """``python -m dipu.report`` imports dipu too (its parent package); it reports nothing itself."""
    argv = getattr(sys, "orig_argv", [])
    return any(a == "-m" and b in ("dipu.report", "dipu.report.__main__") for a, b in zip(argv, argv[1:]))


def start() -> None:
    """Start collecting, and write this process's file at exit (Note [One file per process])."""
    directory = requested_directory()
    if directory is None or _is_the_report_cli() or _state:
        return
    _state.update(directory=directory, started=time.time())
    _C.op_stats_reset()
    _C.op_stats_enable(os.environ.get(DEVICE_TIME_VAR, "auto").strip() or "auto")
    atexit.register(_write_at_exit)


def stop() -> None:
    """Stop collecting and read the device times still in the rings back: at exit, before dipu stops the
    vendor (dipu/__init__.py's _shutdown, which atexit runs before _write_at_exit)."""
    if _state and _C.op_stats_enabled():
        _C.op_stats_disable()
        try:
            _C.op_stats_drain()
        except RuntimeError as error:
            _state["drain_error"] = f"{type(error).__name__}: {error}"


def _write_at_exit() -> None:
    try:
        stop()
        record = process_record()
        if not record["ops"] and not record["autocompare"]:
            return  # a process that ran no dipu op (torchrun's launcher, through torch's autoload) adds nothing
        directory = _state["directory"]
        files.write_process_file(directory, record)
        files.merge_directory(directory)
    except Exception as error:  # never turn a finished program into a failing one
        print(f"dipu: {REPORT_VAR}: could not write the run report: {type(error).__name__}: {error}",
              file=sys.stderr, flush=True)


def _fallback_calls() -> dict[str, int]:
    """Calls through the CPU fallback: since import, when collection started (or since the program last
    reset the counts, as examples/train.py does; an op that fell back only before such a reset then looks
    native, its kernel registered, or as another category)."""
    return {name: count for name, count in fallback.fallback_counts().items() if count}


def _has_kernel(name: str, key: str) -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}" if "::" not in name else name, key)
    except RuntimeError:  # not an operator the dispatcher knows (a name of another namespace)
        return False


def categorize(name: str, calls: int, fallback_calls: int, specs: dict, forced) -> str:
    """How op ``name`` ran on dipu (the categories of dipu/report/__init__.py). A registered kernel that
    refused only some calls (BatchNorm's int64 ``num_batches_tracked.add_(1)`` among float adds) is native;
    its ``fallback_calls`` say how many it refused."""
    registered = name in registration.kernels
    if registered:
        return "refused" if fallback_calls and fallback_calls >= calls else "native"
    if fallback_calls:
        op = specs.get(name)
        if op is not None and op.fallback and (forced.matches(name) or op.entry and forced.matches(op.entry)):
            return "forced fallback"
        return "fallback"
    if _has_kernel(name, "PrivateUse1"):
        return "core"
    if _has_kernel(name, "CompositeImplicitAutograd"):
        return "composite"
    if _has_kernel(name, "CompositeExplicitAutograd") or _has_kernel(name, "CompositeExplicitAutogradNonFunctional"):
        return "composite"
    return "other"


def kernel_path(record: dict, library) -> str | None:
    """How an op's calls reached their kernel: ``C++ wrapper`` or ``Python wrapper``, then the layer of
    the op library that implements its DIOPI function and whether it is a ``C library``; or the
    ``CPU fallback``."""
    if record["category"] in ("fallback", "forced fallback", "refused"):
        return "CPU fallback"
    if record["kernel"] is None:
        return None
    wrapper = "C++ wrapper" if record["kernel"] == "C++" else "Python wrapper"
    function = record["diopi"] and library is not None and _implementation(library, record["diopi"])
    if not function:
        return wrapper
    layer, implementation = function
    from dipu.diopi import c_library

    kind = "C library" if getattr(implementation, "__module__", None) == c_library.__name__ else "Python library"
    return f"{wrapper} -> {layer if layer.startswith(kind) else f'{kind} {layer}'}"  # "C library /path.so" is named so


def _implementation(library, name: str):
    while library is not None:
        if name in library.functions:
            return library.name, library.functions[name]
        library = library.base
    return None


def signature_records() -> list[dict]:
    """Per (op, shapes, dtypes, arguments) signature: calls, host and device times, the first call's
    arguments (meta tensors; only the live process can replay them)."""
    return list(_C.op_stats_signatures())


def op_records(signatures: list[dict] | None = None) -> dict[str, dict]:
    """Per op that touched dipu: calls, host and device times, fallback calls, category, kernel kind,
    DIOPI functions."""
    stats = _C.op_stats()
    device: dict[str, list[int]] = {}
    for signature in signatures or ():
        totals = device.setdefault(signature["op"], [0, 0, 0])
        totals[0] += signature["device_calls"]
        totals[1] += signature["device_ns"]
        totals[2] += signature["device_self_ns"]
    fallback_calls = _fallback_calls()
    specs = {op.name: op for op in coverage.generated_ops()}
    forced = force_fallback_patterns()
    cpp = set(registration.cpp_kernels)
    records = {}
    for name in sorted(set(stats) | set(fallback_calls)):
        calls, inclusive, self_ns = stats.get(name, (fallback_calls.get(name, 0), 0, 0))
        falls = fallback_calls.get(name, 0)
        category = categorize(name, calls, falls, specs, forced)
        op = specs.get(name)
        records[name] = {
            "calls": calls, "inclusive_ns": inclusive, "self_ns": self_ns, "fallback_calls": falls,
            "category": category,
            "kernel": ("C++" if name in cpp else "Python") if name in registration.kernels else None,
            "diopi": op.diopi if op is not None else None,
            "functions": list(op.functions) if op is not None else [],
            "in_spec": op is not None,
        }
        device_calls, device_ns, device_self_ns = device.get(name, (0, 0, 0))
        records[name].update(device_calls=device_calls, device_ns=device_ns, device_self_ns=device_self_ns)
    return records


def _autocompare_record() -> dict | None:
    from dipu import autocompare

    results = autocompare.results()
    if not results.calls and not autocompare.switched_on():
        return None
    return autocompare.as_record(results)


def process_record() -> dict:
    """Everything this process contributes to the report (Note [One file per process])."""
    library = coverage.active_library()
    error = getattr(sys, "last_value", None)  # set when the program ended with an uncaught exception
    started = _state.get("started", time.time())
    signatures = signature_records()
    ops = op_records(signatures)
    paths = {name: kernel_path(op, library) for name, op in ops.items()}
    for name, path in paths.items():
        ops[name]["path"] = path
    return {
        "schema": merge.SCHEMA,
        "kind": "process",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "rank": _env_int("RANK"),
        "world_size": _env_int("WORLD_SIZE"),
        "argv": list(sys.argv),
        "started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(),
        "wall_s": time.time() - started,
        "error": f"{type(error).__name__}: {error}" if error is not None else None,
        "torch": torch.__version__,
        "vendor": vendor().name,
        "op_library": library.name if library is not None else None,
        "device_time": _C.op_stats_device_timing(),
        "forced_fallback_patterns": [regex.pattern for regex in force_fallback_patterns().regexes],
        "ops": ops,
        "signatures": [{k: v for k, v in s.items() if k != "args"} for s in signatures],
        "reference": reference.compare(signatures, ops, paths, vendor().native_device_type),
        "coverage": coverage.proto_coverage(library),
        "autocompare": _autocompare_record(),
    }


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None
