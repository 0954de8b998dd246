"""Devices: count, the current device, device context managers, synchronization and properties.

Device arguments follow torch.cuda's: None (the current device), an index, ``"dipu:1"`` or a
``torch.device``; :func:`_get_device_index` turns them into an index.
"""

from __future__ import annotations

import torch
from torch._utils import _get_device_index as _torch_get_device_index

from dipu._core import _C, vendor
from dipu.device._initialization import _lazy_init

_TYPE = "dipu"

#: Device types a device argument may name dipu by; DIPU_MOCK_CUDA adds "cuda" (Note [Mock CUDA]), so
#: every function that parses its device here (torch.cuda's names, which mock CUDA maps to these)
#: takes ``torch.device("cuda:1")``, ``"cuda"`` and indices as torch.cuda does.
_device_types = {_TYPE}


def _accept_device_type(device_type: str) -> None:
    """Let device arguments of type ``device_type`` name the dipu device of the same index."""
    _device_types.add(device_type)


def _get_device_index(device=None, optional: bool = False) -> int:
    """The index of a dipu device given as None, an int, "dipu:1" or a torch.device, as torch.cuda's helper.

    None and an index-less "dipu" mean the current device, or -1 ("leave the device as it is") when
    ``optional``. An index must name an existing device (-1 passes when ``optional``).
    """
    if device is None:
        return -1 if optional else _C.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type not in _device_types:
            raise ValueError(f"Expected a dipu device, but got: {device}")
        if device.index is None:
            return -1 if optional else _C.current_device()
        device = device.index
    elif not isinstance(device, int):
        raise TypeError(f"Expected a dipu device index, torch.device or str, got {device!r}")
    index = _torch_get_device_index(device)
    if index == -1 and optional:
        return -1
    _C.check_device_index(index)
    return index


def is_available() -> bool:
    return _C.device_count() > 0


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    _lazy_init()
    return _C.current_device()


def set_device(device) -> None:
    index = _get_device_index(device, optional=True)
    if index >= 0:
        _lazy_init()
        _C.set_device(index)


class device:
    """Context manager that makes ``device`` current (None or -1: no change)."""

    def __init__(self, device):
        self.index = _get_device_index(device, optional=True)
        self.previous = -1

    def __enter__(self):
        if self.index >= 0:
            self.previous = _C.exchange_device(self.index)

    def __exit__(self, *exc):
        if self.index >= 0:
            _C.exchange_device(self.previous)
        return False


class device_of(device):
    """Context manager making the device of tensor ``obj`` current (no-op off dipu)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == _TYPE else -1)


def synchronize(device=None) -> None:
    _lazy_init()
    _C.synchronize(_get_device_index(device))


def get_device_properties(device=None):
    _lazy_init()
    return vendor().device_properties(_get_device_index(device))


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    props = get_device_properties(device)
    return props.major, props.minor
