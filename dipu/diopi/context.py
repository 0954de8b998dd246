"""The DIOPI runtime an op library sees: status codes, the last error, and the per-device context.

Note [Status codes]
A DIOPI function returns a :class:`Status`; ``SUCCESS`` is 0, so a wrapper
tests ``if status:`` and pays nothing more on the fast path. Any other code is
reported as a ``RuntimeError`` naming the op, the function and the status,
except ``FORCE_FALLBACK``: a kernel that cannot handle its inputs (a dtype, a
layout, an attribute value) answers it and the wrapper runs the op on CPU
through the same boxed fallback as ops without any kernel. A function's
declared-dtype guard answers it too (Note [Declared dtypes]).
"""

from __future__ import annotations

import enum
import threading

from dipu._core import _C


class Status(enum.IntEnum):
    SUCCESS = 0
    ERROR_OCCURRED = 1
    NOT_IMPLEMENTED = 2
    DTYPE_NOT_SUPPORTED = 3
    FORCE_FALLBACK = 4

    @property
    def text(self) -> str:
        return _STATUS_TEXT[self]


_STATUS_TEXT = {
    Status.SUCCESS: "diopiSuccess",
    Status.ERROR_OCCURRED: "diopiErrorOccurred",
    Status.NOT_IMPLEMENTED: "diopiNoImplement",
    Status.DTYPE_NOT_SUPPORTED: "diopiDtypeNotSupported",
    Status.FORCE_FALLBACK: "diopiForceFallbackToCPU",
}

SUCCESS = Status.SUCCESS

_last_error = threading.local()


def set_last_error(message: str) -> None:
    """Record why the calling thread's last DIOPI call failed (diopiGetLastErrorString)."""
    _last_error.message = message


def get_last_error() -> str:
    return getattr(_last_error, "message", "")


def take_last_error() -> str:
    message = get_last_error()
    _last_error.message = ""
    return message


class Context:
    """What a DIOPI function gets as ``ctx``: one per device, shared by all calls.

    Immutable apart from what it reads on demand, so wrappers index a prebuilt
    list instead of building a context per call.
    """

    __slots__ = ("device",)

    def __init__(self, device: int):
        self.device = device

    @property
    def stream(self):
        """The vendor handle of the current stream on this device (None: default stream)."""
        return _C.current_stream_handle(self.device)

    def require_tensor(self, sizes, dtype):
        """A new contiguous dipu tensor on this device; see Note [Outputs a function allocates]."""
        return _C.empty(list(sizes), dtype, self.device)

    set_last_error = staticmethod(set_last_error)

    def __repr__(self) -> str:
        return f"Context(device={self.device})"
