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
    """DIOPI's ``diopiError_t``, with its values: a C library returns them as they are."""

    SUCCESS = 0
    ERROR_OCCURRED = 1
    NOT_INITED = 2
    NO_REGISTERED_STREAM_CREATE_FUNCTION = 3
    NO_REGISTERED_STREAM_DESTROY_FUNCTION = 4
    NO_REGISTERED_STREAM_SYNC_FUNCTION = 5
    NO_REGISTERED_DEVICE_MEMORY_MALLOC_FUNCTION = 6
    NO_REGISTERED_DEVICE_MEMORY_FREE_FUNCTION = 7
    NO_REGISTERED_DEVICE_TO_DEVICE_MEMORY_COPY_FUNCTION = 8
    NO_REGISTERED_DEVICE_TO_HOST_MEMORY_COPY_FUNCTION = 9
    NO_REGISTERED_HOST_TO_DEVICE_MEMORY_COPY_FUNCTION = 10
    NO_REGISTERED_GET_LAST_ERROR_FUNCTION = 11
    FIVE_D_NOT_SUPPORTED = 12
    NOT_IMPLEMENTED = 13
    FORCE_FALLBACK = 14
    DTYPE_NOT_SUPPORTED = 1000

    @property
    def text(self) -> str:
        """The C enumerator's name, as DIOPI's diopirt.h spells it."""
        return _STATUS_TEXT[self]


_STATUS_TEXT = {
    Status.SUCCESS: "diopiSuccess",
    Status.ERROR_OCCURRED: "diopiErrorOccurred",
    Status.NOT_INITED: "diopiNotInited",
    Status.NO_REGISTERED_STREAM_CREATE_FUNCTION: "diopiNoRegisteredStreamCreateFunction",
    Status.NO_REGISTERED_STREAM_DESTROY_FUNCTION: "diopiNoRegisteredStreamDestoryFunction",  # DIOPI's spelling
    Status.NO_REGISTERED_STREAM_SYNC_FUNCTION: "diopiNoRegisteredStreamSyncFunction",
    Status.NO_REGISTERED_DEVICE_MEMORY_MALLOC_FUNCTION: "diopiNoRegisteredDeviceMemoryMallocFunction",
    Status.NO_REGISTERED_DEVICE_MEMORY_FREE_FUNCTION: "diopiNoRegisteredDeviceMemoryFreeFunction",
    Status.NO_REGISTERED_DEVICE_TO_DEVICE_MEMORY_COPY_FUNCTION: "diopiNoRegisteredDevice2DdeviceMemoryCopyFunction",
    Status.NO_REGISTERED_DEVICE_TO_HOST_MEMORY_COPY_FUNCTION: "diopiNoRegisteredDevice2HostMemoryCopyFunction",
    Status.NO_REGISTERED_HOST_TO_DEVICE_MEMORY_COPY_FUNCTION: "diopiNoRegisteredHost2DeviceMemoryCopyFunction",
    Status.NO_REGISTERED_GET_LAST_ERROR_FUNCTION: "diopiNoRegisteredGetLastErrorFunction",
    Status.FIVE_D_NOT_SUPPORTED: "diopi5DNotSupported",
    Status.NOT_IMPLEMENTED: "diopiNoImplement",
    Status.FORCE_FALLBACK: "diopiForceFallbackToCPU",
    Status.DTYPE_NOT_SUPPORTED: "diopiDtypeNotSupported",
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


def is_host_scalar(tensor) -> bool:
    """Whether a tensor argument is a 0-dim CPU tensor, which torch allows beside any device's tensors: the one
    exception to "Expected all tensors to be on the same device"."""
    return tensor.device.type == "cpu" and tensor.dim() == 0


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
