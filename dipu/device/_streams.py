"""Streams and events, as ``torch.cuda.Stream`` / ``torch.cuda.Event`` and their context managers."""

from __future__ import annotations

import torch

from dipu._core import _C
from dipu.device import _devices
from dipu.device._devices import _TYPE, _get_device_index

# Note [Stream priorities]
# The core's stream pool (dipu/csrc/guard.cpp) hands out its slots round-robin and creates each
# slot's vendor stream once, so a priority asked of a slot created earlier would not be honoured.
# dipu therefore supports a single priority, 0 (torch.cuda's default): priority_range() is (0, 0)
# in torch.cuda's (least, greatest) order. Like torch.cuda, a priority outside the range is mapped
# to the nearest one (FSDP2 asks for priority -1 on every device), so the stream reports 0.
_LEAST_PRIORITY = _GREATEST_PRIORITY = 0


class Stream(torch.Stream):
    """A dipu stream. ``Stream()`` takes one from the current device's pool."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if kwargs:  # wrapping an existing stream: stream_id, device_index, device_type
            return super().__new__(cls, **kwargs)
        if not isinstance(priority, int):
            raise TypeError(f"torch.dipu.Stream: priority must be an int, got {type(priority).__name__}")
        priority = min(max(priority, _GREATEST_PRIORITY), _LEAST_PRIORITY)  # Note [Stream priorities]
        with _devices.device(device):
            return super().__new__(cls, device=torch.device(_TYPE, _C.current_device()),
                                   priority=priority)

    def __init__(self, *args, **kwargs):
        pass

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """``(least, greatest)`` priority, as ``torch.cuda.Stream.priority_range``; see Note [Stream priorities]."""
        return _LEAST_PRIORITY, _GREATEST_PRIORITY

    @property
    def priority(self) -> int:
        """The stream's priority: every dipu stream has priority 0 (Note [Stream priorities])."""
        return _LEAST_PRIORITY

    # as torch.cuda.Stream's, it takes and returns its own Event class (no torch.Event subclass)
    def record_event(self, event: Event | None = None) -> Event:  # type: ignore[override]
        event = event if event is not None else Event()
        event.record(self)
        return event

    def wait_event(self, event) -> None:
        super().wait_event(_unwrap(event))


class Event:
    """A dipu event; ``enable_timing=True`` allows ``elapsed_time``.

    Wraps a ``torch.Event`` rather than subclassing it: torch's event methods
    accept only exact ``torch.Event`` arguments.
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        self.event = torch.Event(device=torch.device(_TYPE, _C.current_device()),
                                 enable_timing=enable_timing, blocking=blocking,
                                 interprocess=interprocess)

    @property
    def device(self) -> torch.device:
        return self.event.device

    def record(self, stream: torch.Stream | None = None) -> None:
        self.event.record(stream)

    def wait(self, stream: torch.Stream | None = None) -> None:
        self.event.wait(stream)

    def query(self) -> bool:
        return self.event.query()

    def synchronize(self) -> None:
        self.event.synchronize()

    def elapsed_time(self, end: Event) -> float:
        return self.event.elapsed_time(_unwrap(end))

    def __repr__(self) -> str:
        return f"torch.dipu.Event({self.event!r})"


def _unwrap(event):
    return event.event if isinstance(event, Event) else event


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                  device_type=stream.device_type)


def current_stream(device=None) -> Stream:
    index = _get_device_index(device)
    return _wrap(torch.accelerator.current_stream(index))


def default_stream(device=None) -> Stream:
    index = _get_device_index(device)
    return Stream(stream_id=0, device_index=index, device_type=current_stream(index).device_type)


def set_stream(stream: torch.Stream | None) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes ``stream`` current on its device (None: no-op)."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.previous = None

    def __enter__(self):
        if self.stream is None:
            return
        self.previous_device = _C.exchange_device(self.stream.device_index)
        self.previous = current_stream(self.stream.device_index)
        set_stream(self.stream)

    def __exit__(self, *exc):
        if self.stream is not None:
            set_stream(self.previous)
            _C.exchange_device(self.previous_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)


def is_current_stream_capturing() -> bool:
    """False: dipu has no graph capture. torch.cuda's question, for code written against it (torch 2.11's
    optimizers ask torch.cuda whenever it is available, as it is under the CUDA mock)."""
    return False
