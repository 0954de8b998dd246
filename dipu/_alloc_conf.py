"""The caching allocator's settings, spelled as PyTorch users write them: ``PYTORCH_ALLOC_CONF``.

Note [Allocator settings]
``PYTORCH_ALLOC_CONF`` (the device-generic variable torch's own accelerators read) holds comma-separated
``key:value`` pairs; ``PYTORCH_DIPU_ALLOC_CONF``, read after it, overrides it key by key for dipu alone
(so one process can give CUDA and dipu different settings). ``DIPU_ALLOCATOR`` (``caching`` or ``raw``),
the older spelling of ``backend``, is read first. The keys:

- ``backend``: ``caching`` (dipu's caching allocator; ``native``, torch's name for its own, means the same)
  or ``raw`` (every allocation a vendor malloc). Chosen at start-up only.
- ``max_split_size_mb``: blocks of at least this many MiB are never split (more than 20, as CUDA requires;
  Note [Oversize blocks] in dipu/csrc/allocator.cpp).
- ``garbage_collection_threshold``: a share of the memory cap (between 0 and 1, exclusive) above which the
  oldest wholly free segments are returned before a new one is allocated; acts only with
  ``set_per_process_memory_fraction``, as in CUDA.
- ``roundup_power2_divisions``: ``N`` (a power of two) for every size, or ``[1:4,256:2,>:8]``: from each
  size in MiB (rounded up to a power of two) up to the next, requests round up to one of N divisions of
  their power-of-two interval (Note [Block sizes]).
- ``expandable_segments``: ``True`` or ``False`` (the default): one segment per stream and pool that grows
  and shrinks by mapping memory at its end (Note [Expandable segments] in dipu/csrc/allocator.cpp). It needs
  the vendor's virtual-memory methods (``vm_*`` in dipu/runtime.py; a C plug-in's ``DipuInitVirtualMemory``);
  on a vendor without them ``True`` warns once, naming the vendor, and segments stay plain. Turned on or off
  at run time, it governs the segments made from then on.

An unknown key, a value that does not parse, or one out of range raises ``ValueError`` naming the variable
(or ``_set_allocator_settings``) and the key. ``torch.dipu.memory._set_allocator_settings`` takes the same
text at run time (``torch.cuda.memory._set_allocator_settings`` under ``DIPU_MOCK_CUDA=1``); what it does
not name keeps its value.
"""

from __future__ import annotations

from typing import Any

import dataclasses
import os
import warnings

__all__ = ["AllocatorSettings", "KEYS", "from_environment", "parse"]

KEYS = ("backend", "expandable_segments", "garbage_collection_threshold", "max_split_size_mb",
        "roundup_power2_divisions")
#: roundup_power2_divisions' intervals: index i holds requests up to 2**i MiB, the last one everything above.
INTERVALS = 16


@dataclasses.dataclass(frozen=True)
class AllocatorSettings:
    backend: str = "caching"
    expandable_segments: bool = False
    garbage_collection_threshold: float = 0.0
    max_split_size_mb: int | None = None  # None: no oversize blocks
    roundup_power2_divisions: tuple[int, ...] = (0,) * INTERVALS

    def max_split_size(self) -> int:
        """In bytes, as torch.cuda.memory_stats's ``max_split_size`` reports it (-1: none)."""
        return -1 if self.max_split_size_mb is None else self.max_split_size_mb << 20


def _items(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += {"[": 1, "]": -1}.get(c, 0)
        if c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _int(value: str, where: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{where}: {value!r} is not an integer") from None


def _backend(value: str, where: str) -> str:
    if value not in ("caching", "native", "raw"):
        raise ValueError(f"{where}: {value!r} is not one of caching, raw")
    return "raw" if value == "raw" else "caching"


def _expandable(value: str, where: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(f"{where}: {value!r} is not True or False")
    return value.lower() == "true"


def _threshold(value: str, where: str) -> float:
    try:
        threshold = float(value)
    except ValueError:
        raise ValueError(f"{where}: {value!r} is not a number") from None
    if not 0 < threshold < 1:
        raise ValueError(f"{where}: {value} is not between 0.0 and 1.0 (exclusive)")
    return threshold


def _max_split(value: str, where: str) -> int:
    mb = _int(value, where)
    if mb <= 20:
        raise ValueError(f"{where}: {mb} is too small; it must be more than 20 (MiB)")
    return mb


def _divisions(value: str, where: str) -> tuple[int, ...]:
    def checked(text: str) -> int:
        n = _int(text.strip(), where)
        if n != 0 and not _power_of_two(n):
            raise ValueError(f"{where}: {n} divisions: the number of divisions must be a power of two (or 0)")
        return n

    if not value.startswith("["):
        return (checked(value),) * INTERVALS
    if not value.endswith("]"):
        raise ValueError(f"{where}: {value!r} has no closing ']'")
    table, last = [0] * INTERVALS, -1
    for entry in _items(value[1:-1]):
        size, sep, count = entry.partition(":")
        if not sep:
            raise ValueError(f"{where}: {entry!r} is not <MiB>:<divisions> or >:<divisions>")
        n = checked(count)
        if size.strip() == ">":
            table[last + 1:] = [n] * (INTERVALS - last - 1)
            last = INTERVALS - 1
            continue
        mib = _int(size.strip(), where)
        if mib <= 0:
            raise ValueError(f"{where}: {mib} MiB is not a positive size")
        index = min((mib - 1).bit_length(), INTERVALS - 1)  # log2 of the power of two at or above
        if index <= last:
            raise ValueError(f"{where}: sizes must increase ({mib} MiB comes after a larger one)")
        if last == -1:
            table[:index] = [n] * index
        table[index] = n
        last = index
    return tuple(table)


_PARSERS = {"backend": _backend, "expandable_segments": _expandable, "garbage_collection_threshold": _threshold,
            "max_split_size_mb": _max_split, "roundup_power2_divisions": _divisions}


def parse(text: str, source: str, base: AllocatorSettings | None = None) -> AllocatorSettings:
    """``base`` with the keys ``text`` names; errors name ``source`` and the key."""
    changes: dict[str, Any] = {}  # each value of its key's type (_PARSERS)
    for item in _items(text):
        key, sep, value = (part.strip() for part in item.partition(":"))
        if key not in _PARSERS:
            raise ValueError(f"{source}: unknown key {key!r}; dipu's allocator takes {', '.join(KEYS)}")
        if not sep or not value:
            raise ValueError(f"{source}: key {key!r} has no value ({item!r} is not key:value)")
        changes[key] = _PARSERS[key](value, f"{source}: {key}")
    return dataclasses.replace(base or AllocatorSettings(), **changes)


def from_environment() -> AllocatorSettings:
    """The settings DIPU_ALLOCATOR, PYTORCH_ALLOC_CONF and PYTORCH_DIPU_ALLOC_CONF give, in that order."""
    settings = AllocatorSettings()
    legacy = os.environ.get("DIPU_ALLOCATOR", "").strip()
    if legacy:
        if legacy not in ("caching", "raw"):
            raise ValueError(f"DIPU_ALLOCATOR={legacy!r} is not one of: caching, raw")
        settings = dataclasses.replace(settings, backend=legacy)
    for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_DIPU_ALLOC_CONF"):
        settings = parse(os.environ.get(name, ""), name, settings)
    return settings


_warned_expandable = False


def effective(settings: AllocatorSettings, vendor: str, virtual_memory: bool) -> AllocatorSettings:
    """What the vendor named ``vendor`` can do of ``settings``: without virtual memory, expandable segments warn
    once and stay off (Note [Allocator settings])."""
    global _warned_expandable
    if not settings.expandable_segments or virtual_memory:
        return settings
    if not _warned_expandable:
        _warned_expandable = True
        warnings.warn(f"dipu: expandable_segments:True: the {vendor} vendor's runtime has no virtual-memory methods "
                      "(vm_granularity, vm_reserve, vm_map, vm_unmap, vm_release; for a C plug-in, "
                      "DipuInitVirtualMemory); the caching allocator keeps plain segments", stacklevel=3)
    return dataclasses.replace(settings, expandable_segments=False)


#: The settings the allocator has (set by :func:`apply`).
current = AllocatorSettings()


def apply(native, settings: AllocatorSettings) -> None:
    """Hands ``settings`` to the native core's allocator (``native``: dipu._C)."""
    global current
    current = settings
    native.set_allocator_settings((settings.max_split_size_mb or 0) << 20, settings.garbage_collection_threshold,
                                  list(settings.roundup_power2_divisions), settings.expandable_segments)
