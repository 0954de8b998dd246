"""``torch.dipu.memory``: allocator statistics, limits, history and snapshots, as ``torch.cuda.memory``.

The numbers come from the native caching allocator (Note [Caching allocator] in
dipu/csrc/allocator.cpp), which is also the ``c10::DeviceAllocator`` that
``torch.accelerator.memory_*`` query, so both report the same values.
Snapshots follow ``torch.cuda.memory._snapshot()``'s format (Note [Memory
history]), so ``python -m torch.cuda._memory_viz trace_plot|segment_plot`` renders them.
"""

from __future__ import annotations

import collections
import os
import pickle
import sys
from typing import cast

from dipu import _alloc_conf
from dipu._core import _C, caching_allocator, vendor, virtual_memory
from dipu.device._devices import _get_device_index, get_device_name
from dipu.device._initialization import _lazy_init

__all__ = [
    "empty_cache", "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated",
    "memory_reserved", "memory_snapshot", "memory_stats", "memory_summary", "reset_accumulated_memory_stats",
    "reset_peak_memory_stats", "set_per_process_memory_fraction", "get_per_process_memory_fraction",
    "get_allocator_backend",
]

# dipu's allocator never synchronizes every stream to free memory (a block used on other streams waits
# for their events instead; Note [Caching allocator]), so this statistic of torch.cuda's stays zero.
_ALWAYS_ZERO = {"num_sync_all_streams": 0}

# The levels of c10::CachingDeviceAllocator::RecordContext.
_CONTEXT_LEVELS = {None: 0, "state": 1, "alloc": 2, "all": 3}

_fractions: dict[int, float] = {}


def memory_stats(device=None) -> collections.OrderedDict:
    """The allocator's statistics for ``device``, under torch.cuda.memory_stats's keys, sorted."""
    stats = {**_C.memory_stats(_get_device_index(device)), **_ALWAYS_ZERO}
    return collections.OrderedDict(sorted(stats.items()))


def memory_allocated(device=None) -> int:
    return _C.memory_stats(_get_device_index(device))["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    return _C.memory_stats(_get_device_index(device))["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    return _C.memory_stats(_get_device_index(device))["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return _C.memory_stats(_get_device_index(device))["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    _C.reset_peak_memory_stats(_get_device_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    _C.reset_accumulated_memory_stats(_get_device_index(device))


def empty_cache() -> None:
    _C.empty_cache()


def mem_get_info(device=None) -> tuple[int, int]:
    _lazy_init()  # asks the vendor: Note [Lazy initialization]
    # cast: the vendor contract's (free, total), which tuple() keeps (a vendor may give a list)
    return cast(tuple[int, int], tuple(vendor().mem_get_info(_get_device_index(device))))


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    """Let this process reserve at most ``fraction`` of ``device``'s total memory (Note [Memory fraction]).

    An allocation that would pass the cap raises ``torch.OutOfMemoryError``. 1.0 removes the cap.
    """

    index = _get_device_index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _lazy_init()
    total = vendor().device_properties(index).total_memory
    _C.set_memory_limit(index, 0 if fraction == 1 else max(1, int(total * fraction)))
    _fractions[index] = fraction


def get_per_process_memory_fraction(device=None) -> float:
    return _fractions.get(_get_device_index(device), 1.0)


def _record_memory_history(enabled: str | None = "all", context: str | None = "all", stacks: str = "all",
                           max_entries: int = sys.maxsize, device=None, clear_history: bool = False,
                           compile_context: bool = False, global_record_annotations: bool = False,
                           skip_actions: list[str] | None = None) -> None:
    """Record allocation stacks and allocator events for :func:`_snapshot`, as torch.cuda's function.

    ``enabled``: ``None`` stops recording (and drops the history), ``"state"`` keeps the stack of each
    live allocation, ``"all"`` also records every alloc/free event (at most ``max_entries`` per device).
    ``context``: which stacks to keep: ``None``, ``"state"``, ``"alloc"`` or ``"all"`` (frees too).
    ``stacks``: ``"python"`` for Python frames only, ``"all"`` for C++ frames as well.
    ``clear_history``: drop the events recorded so far. ``skip_actions``: actions not to record
    (``"alloc"``, ``"free_requested"``, ``"free_completed"``, ``"segment_alloc"``, ``"segment_free"``, ``"oom"``).
    ``compile_context`` and ``global_record_annotations`` (torch.compile frames and ``record_function``
    names in the trace) are not recorded on dipu: True raises.
    The history covers every dipu device; ``device`` is accepted for torch.cuda's signature.
    """
    if enabled not in (None, "state", "all"):
        raise ValueError(f"_record_memory_history: enabled={enabled!r} is not one of None, 'state', 'all'")
    if context not in _CONTEXT_LEVELS:
        raise ValueError(f"_record_memory_history: context={context!r} is not one of None, 'state', 'alloc', 'all'")
    if stacks not in ("python", "all"):
        raise ValueError(f"_record_memory_history: stacks={stacks!r} is not one of 'python', 'all'")
    if not isinstance(max_entries, int) or max_entries < 1:
        raise ValueError(f"_record_memory_history: max_entries={max_entries!r} must be a positive int")
    for name, value in (("compile_context", compile_context), ("global_record_annotations", global_record_annotations)):
        if value:
            raise NotImplementedError(f"_record_memory_history: {name}=True is not supported on dipu (the trace "
                                      "records stacks, not torch.compile contexts or record_function annotations)")
    if isinstance(skip_actions, str):
        raise ValueError(f"_record_memory_history: skip_actions={skip_actions!r} must be a list of action names")
    if device is not None:
        _get_device_index(device)
    level = 0 if enabled is None else _CONTEXT_LEVELS[context]
    _C.record_memory_history(trace=enabled == "all", when=level, cpp_frames=stacks == "all",
                             max_entries=min(max_entries, sys.maxsize), clear_history=bool(clear_history),
                             skip_actions=list(skip_actions or ()))


def _snapshot(device=None) -> dict:
    """The allocator's state in torch.cuda.memory._snapshot()'s format.

    ``segments`` (every reserved segment of every device, with its block), ``device_traces``
    (one list of recorded events per device) and ``allocator_settings``.
    """
    snapshot = _C.memory_snapshot()
    snapshot["allocator_settings"] = _allocator_settings()
    return snapshot


def _allocator_settings() -> dict:
    settings = _alloc_conf.current
    return {
        "PYTORCH_ALLOC_CONF": os.environ.get("PYTORCH_ALLOC_CONF", ""),
        "PYTORCH_DIPU_ALLOC_CONF": os.environ.get("PYTORCH_DIPU_ALLOC_CONF", ""),
        "backend": "caching" if caching_allocator else "raw",
        "max_split_size": settings.max_split_size(),
        "garbage_collection_threshold": settings.garbage_collection_threshold,
        "expandable_segments": settings.expandable_segments,
        "roundup_power2_divisions": {1 << i: n for i, n in enumerate(settings.roundup_power2_divisions)},
    }


def _set_allocator_settings(env: str) -> None:
    """Change the caching allocator's settings at run time, as ``torch.cuda.memory._set_allocator_settings``.

    ``env`` is ``PYTORCH_ALLOC_CONF``'s syntax (``"max_split_size_mb:64,garbage_collection_threshold:0.8"``);
    keys it does not name keep their value (Note [Allocator settings] in dipu/_alloc_conf.py). The
    ``backend`` is chosen at start-up and cannot change.
    """
    settings = _alloc_conf.parse(env, "_set_allocator_settings", _alloc_conf.current)
    if settings.backend != _alloc_conf.current.backend:
        raise ValueError(f"_set_allocator_settings: backend: the allocator backend is chosen at start-up "
                         f"(PYTORCH_ALLOC_CONF); it is {_alloc_conf.current.backend!r} and cannot become "
                         f"{settings.backend!r} now")
    _alloc_conf.apply(_C, _alloc_conf.effective(settings, vendor().name, virtual_memory))


def get_allocator_backend() -> str:
    """``"caching"`` or ``"raw"``: the ``backend`` of ``PYTORCH_ALLOC_CONF`` (torch.cuda's function's name)."""
    return _alloc_conf.current.backend


def memory_snapshot() -> list:
    """The segments of every device (torch.cuda.memory_snapshot)."""
    return _snapshot()["segments"]


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickle :func:`_snapshot` to ``filename`` for ``python -m torch.cuda._memory_viz`` or pytorch.org/memory_viz."""
    snapshot = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)


def _format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return ""


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A table of :func:`memory_stats` for ``device``, laid out like torch.cuda.memory_summary."""
    index = _get_device_index(device)
    stats = memory_stats(index)
    rows = [("allocated_bytes", "Allocated memory", True), ("active_bytes", "Active memory", True),
            ("requested_bytes", "Requested memory", True), ("reserved_bytes", "Device reserved memory", True),
            ("allocation", "Allocations", False), ("active", "Active allocs", False),
            ("segment", "Device reserved segments", False)]
    pools = [("all", "")] if abbreviated else [("all", ""), ("large_pool", "  from large pool"),
                                                ("small_pool", "  from small pool")]
    width = 75
    lines = ["=" * width,
             f" dipu memory summary, device ID {index:<3d} ({get_device_name(index)})",
             "-" * width,
             f"  dipu OOMs: {stats['num_ooms']:<12d}| device allocs: {stats['num_device_alloc']:<10d}"
             f"| alloc retries: {stats['num_alloc_retries']}",
             "=" * width,
             f" {'Metric':<26}| {'Cur Usage':>10} | {'Peak Usage':>10} | {'Tot Alloc':>10} | {'Tot Freed':>10}",
             "-" * width]
    for key, title, in_bytes in rows:
        show = _format_bytes if in_bytes else str
        for pool, suffix in pools:
            values = [stats[f"{key}.{pool}.{field}"] for field in ("current", "peak", "allocated", "freed")]
            label = title if pool == "all" else suffix
            lines.append(f" {label:<26}| " + " | ".join(f"{show(v):>10}" for v in values))
        lines.append("-" * width)
    lines.append("=" * width)
    return "\n".join(lines) + "\n"
