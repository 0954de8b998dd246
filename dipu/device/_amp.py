"""Autocast: the device-module half of ``torch.autocast("dipu")``, as torch.cuda's."""

from __future__ import annotations

import torch

_TYPE = "dipu"


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled(_TYPE)


def set_autocast_enabled(enabled: bool) -> None:
    torch.set_autocast_enabled(_TYPE, enabled)


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype(_TYPE)


def set_autocast_dtype(dtype: torch.dtype) -> None:
    torch.set_autocast_dtype(_TYPE, dtype)
