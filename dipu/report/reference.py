"""The reference device: the run's most expensive kernel signatures replayed on the CPU (or native CUDA).

Note [The reference device]
For the top N signatures by device time (``DIPU_REPORT_TOP``, default 10; ``python -m dipu.report --top``),
among the ops dipu's kernels or the CPU fallback ran (categories ``native``, ``refused``, ``fallback``,
``forced fallback``: the core's copies and views and the composite ops are not kernels), the exiting
process calls the same aten overload on the reference device with the arguments its first call of that
signature had (Note [Device time per kernel] in dipu/csrc/op_stats.cpp): the same numbers, lists and
flags, and tensors of the same shape, strides and dtype, filled fresh before each call (normal values
for floating and complex dtypes, zeros for integers and booleans, so an index is always in range; an
op whose values matter more than that may fail, which the report says). The reference is
``DIPU_REPORT_REFERENCE``: ``cpu``, ``cuda`` (only where the vendor's memory is CUDA memory,
``native_device_type == "cuda"``: only then is the comparison one of the same hardware) or ``auto``
(the default: ``cuda`` where that holds and CUDA is available, else ``cpu``); ``off`` replays nothing.
It is timed the way dipu's calls were: CUDA events around the call on the current stream, or on the
CPU the host time of the call (a synchronous device); after one warm-up call, until 20 ms or 50 calls,
the median. The ranking, "slower than the reference", is by the time dipu would save at the
reference's speed: calls x (dipu's device time per call - the reference's); the ratio is dipu's time per
call over the reference's. The replay runs at exit, after collection stopped, so it is not in the
report's own times.
"""

from __future__ import annotations

import os
import statistics
import time

import torch

#: The categories whose ops ran a kernel (dipu's or the CPU fallback's): what the reference replays.
KERNEL_CATEGORIES = ("native", "refused", "fallback", "forced fallback")
DEFAULT_TOP = 10
_BUDGET_S, _MAX_CALLS = 0.02, 50


def top_n() -> int:
    try:
        return max(int(os.environ.get("DIPU_REPORT_TOP", DEFAULT_TOP)), 0)
    except ValueError:
        return DEFAULT_TOP


def choose_reference(native_device_type: str | None) -> tuple[str | None, str | None]:
    """(reference device, why none) from DIPU_REPORT_REFERENCE and the vendor's memory."""
    asked = os.environ.get("DIPU_REPORT_REFERENCE", "auto").strip() or "auto"
    cuda_memory = native_device_type == "cuda"
    if asked == "off":
        return None, "DIPU_REPORT_REFERENCE=off"
    if asked == "cuda":
        if not cuda_memory:
            return None, "--reference cuda needs a vendor whose memory is CUDA memory"
        return ("cuda", None) if torch.cuda.is_available() else (None, "--reference cuda: CUDA is not available")
    if asked == "auto":
        return ("cuda" if cuda_memory and torch.cuda.is_available() else "cpu"), None
    if asked == "cpu":
        return "cpu", None
    return None, f"DIPU_REPORT_REFERENCE={asked!r}: expected auto, cpu, cuda or off"


def resolve(op_name: str):
    """The OpOverload of a report's op name (``add.Tensor``, ``mm``, ``ns::op.overload``)."""
    namespace, _, rest = op_name.rpartition("::")
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace or "aten"), name)
    return getattr(packet, overload or "default")


def _fill(meta: torch.Tensor, device: str) -> torch.Tensor:
    if any(size == 0 for size in meta.shape):
        return torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype, device=device)
    span = 1 + sum((size - 1) * stride for size, stride in zip(meta.shape, meta.stride()))
    base = torch.empty(span, dtype=meta.dtype, device=device)
    if meta.dtype.is_floating_point or meta.dtype.is_complex:
        base.normal_()
    else:
        base.zero_()
    return base.as_strided(meta.shape, meta.stride())


def materialize(value, device: str):
    """``value`` with meta tensors made real on ``device`` and dipu devices replaced by it."""
    if isinstance(value, torch.Tensor):
        return _fill(value, device) if value.device.type == "meta" else value
    if isinstance(value, torch.device) and value.type == "dipu":
        return torch.device(device)
    if isinstance(value, (list, tuple)):
        return type(value)(materialize(v, device) for v in value)
    return value


def _call_args(overload, args: list) -> tuple[list, dict]:
    positional, keywords = [], {}
    for argument, value in zip(overload._schema.arguments, args):
        if argument.kwarg_only:
            keywords[argument.name] = value
        else:
            positional.append(value)
    return positional, keywords


def time_replay(op_name: str, args: list, device: str) -> float:
    """The median time per call, in ns, of ``op_name`` with ``args`` on ``device`` (Note [The reference
    device])."""
    from dipu.kernels.fallback import CPU_SUBSTITUTES

    overload = resolve(op_name)
    # a placeholder no backend but a vendor's implements (convolution_overrideable) runs as the op it stands for
    call = CPU_SUBSTITUTES.get(op_name, overload)
    cuda = device == "cuda"
    samples: list[float] = []
    spent = 0.0
    for index in range(_MAX_CALLS + 1):
        positional, keywords = _call_args(overload, materialize(args, device))
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            call(*positional, **keywords)
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end) * 1e6
        else:
            began = time.perf_counter_ns()
            call(*positional, **keywords)
            elapsed = time.perf_counter_ns() - began
        if index:  # the first call warms up
            samples.append(elapsed)
            spent += elapsed / 1e9
            if spent >= _BUDGET_S and len(samples) >= 3:
                break
    return statistics.median(samples)


def compare(signatures: list[dict], ops: dict, paths: dict, native_device_type: str | None) -> dict:
    """The reference section of a process record: the top signatures, each with its reference time."""
    device, why_not = choose_reference(native_device_type)
    wanted = top_n()
    kernels = [s for s in signatures if ops.get(s["op"], {}).get("category") in KERNEL_CATEGORIES]
    kernels.sort(key=lambda s: (-(s["device_ns"] or s["host_ns"]), s["signature"]))
    entries = []
    for signature in kernels[:wanted] if device is not None else []:
        entry = {key: signature[key] for key in ("op", "signature", "calls", "device_calls", "device_ns",
                                                 "host_ns")}
        entry["path"] = paths.get(signature["op"])
        try:
            entry["reference_ns_per_call"] = time_replay(signature["op"], signature["args"], device)  # type: ignore[arg-type]  # not None: the loop runs only with a device
            entry["error"] = None
        except Exception as error:  # noqa: BLE001  (the report says why the replay failed)
            entry["reference_ns_per_call"] = None
            entry["error"] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]
        entries.append(entry)
    return {"device": device, "why_not": why_not, "top": wanted, "signatures": entries}

