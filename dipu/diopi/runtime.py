"""The DIOPI runtime an op library sees: status codes and the per-device context.

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

import torch

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


#: One context per device index; filled by :func:`init_contexts` before kernels run.
contexts: list[Context] = []


def init_contexts() -> None:
    contexts[:] = [Context(index) for index in range(_C.device_count())]


# ---- helpers of the generated wrappers (see Note [Generated wrappers] in scripts/autogen) ----------


def allocate(specs, device: int) -> tuple:
    """New outputs from a shape rule's ``(shape, dtype)`` specs; ``None`` stays None (not wanted)."""
    return tuple(None if spec is None else _C.empty(list(spec[0]), spec[1], device) for spec in specs)


_devices: dict[int, torch.device] = {}


def empty_strided(shape, dtype, device: int, stride) -> torch.Tensor:
    """A new output with ``stride`` (None: contiguous; or a memory format), as a stride rule answers; see
    Note [Output strides] in dipu/ops/shapes.py."""
    if stride is None:
        return _C.empty(list(shape), dtype, device)
    where = _devices.get(device)
    if where is None:
        where = _devices[device] = torch.device("dipu", device)
    if isinstance(stride, torch.memory_format):
        if stride is torch.contiguous_format or len(shape) != (4 if stride is torch.channels_last else 5):
            return _C.empty(list(shape), dtype, device)
        return torch.empty(shape, dtype=dtype, device=where, memory_format=stride)
    if not _dense(shape, stride):
        return _C.empty(list(shape), dtype, device)
    return torch.empty_strided(shape, stride, dtype=dtype, device=where)


def _dense(shape, stride) -> bool:
    """Whether ``stride`` lays out ``shape`` without gaps or overlaps (a stride rule answers for the shape its
    meta kernel saw, which a named shape rule may have decided differently)."""
    if len(stride) != len(shape):
        return False
    expected = 1
    for step, size in sorted((step, size) for size, step in zip(shape, stride) if size != 1):
        if step != expected:
            return False
        expected *= size
    return True


def allocate_strided(specs, strides, device: int) -> tuple:
    """As :func:`allocate`, each output with its strides from a stride rule (None: all contiguous; outputs past
    the end of ``strides`` contiguous)."""
    if strides is None:
        return allocate(specs, device)
    strides = tuple(strides) + (None,) * (len(specs) - len(strides))
    return tuple(None if spec is None else empty_strided(spec[0], spec[1], device, stride)
                 for spec, stride in zip(specs, strides))


def all_contiguous(tensors) -> bool:
    """Whether every tensor of a Tensor[] argument is contiguous (None entries of Tensor?[] count as such)."""
    for tensor in tensors:
        if tensor is not None and not tensor.is_contiguous():
            return False
    return True


def resize_outputs(outputs, specs) -> None:
    """Resize ``out=`` tensors whose shape differs from what the op produces, as ATen does."""
    for out, spec in zip(outputs, specs):
        if out is not None and spec is not None and out.shape != spec[0]:
            out.resize_(spec[0])


def check_inplace_shape(op, self, shape) -> None:
    raise RuntimeError(
        f"{op.name}: output with shape {list(self.shape)} doesn't match the broadcast shape {list(shape)}")
