"""The simulated accelerator: dipu's default vendor, needing no hardware.

Device memory is host memory that this vendor allocates and owns (not the CPU
allocator's), with a per-device capacity, so out-of-memory and pointer-to-device
behave as on a real device. Work executes synchronously, so the contract's
default streams and events serve it (events record host timestamps).

Environment:
- ``DIPU_SIM_DEVICE_COUNT``: number of devices (default 2).
- ``DIPU_SIM_MEMORY``: capacity of each device (default 8G; accepts 512M, 2G, ...).
- ``DIPU_SIM_NATIVE_ALIAS=0``: hide the host-memory alias, so the core copies
  through this vendor's memcpy functions (exercises the contract path; ops then
  all run through the CPU fallback, and collectives through gloo on host copies).
- ``DIPU_SIM_VIRTUAL_MEMORY=0``: hide the virtual-memory methods (as a vendor without them:
  ``expandable_segments:True`` then warns and segments stay plain). With them (the default), a range is
  reserved with ``mmap(PROT_NONE)`` and memory mapped into it with ``MAP_FIXED``, counted in the capacity.
- ``DIPU_SIM_EVENTS=manual``: a test mode whose streams and events complete only when the test
  runs them (vendor/sim/manual_events.py, Note [Manual events]); ``synchronous`` (the default)
  is the contract's default streams and events.
"""

from __future__ import annotations

import ctypes
import os
import threading

from dipu.runtime import MAX_DEVICES, VIRTUAL_MEMORY_METHODS, DeviceProperties, DeviceRuntime, env_int, parse_size

from .collectives import SimCommunicator
from .manual_events import ManualEvents

_libc = ctypes.CDLL(None)
_libc.aligned_alloc.restype = ctypes.c_void_p
_libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_ALIGN = 64
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
# Linux's values.
_PROT_NONE, _PROT_READ_WRITE = 0, 3
_MAP_PRIVATE, _MAP_FIXED, _MAP_ANONYMOUS, _MAP_NORESERVE = 0x02, 0x10, 0x20, 0x4000
_MAP_FAILED = ctypes.c_void_p(-1).value
_GRANULARITY = 2 << 20


class SimRuntime(DeviceRuntime):
    native_device_type = "cpu"
    collectives = SimCommunicator
    compiler_backend = "cpp"  # device memory is host memory: inductor's C++ kernels run on it

    def __init__(self):
        self.count = env_int("DIPU_SIM_DEVICE_COUNT", 2, minimum=1, maximum=MAX_DEVICES)
        self.capacity = parse_size("DIPU_SIM_MEMORY", os.environ.get("DIPU_SIM_MEMORY", "8G"))
        alias = os.environ.get("DIPU_SIM_NATIVE_ALIAS", "1").strip()
        if alias not in ("0", "1"):
            raise ValueError(f"DIPU_SIM_NATIVE_ALIAS={alias!r} must be 0 or 1")
        if alias == "0":
            self.native_device_type = None
            self.diopi_impl = None
            self.collectives = None  # no alias to run gloo on: dipu's host-copy path
            self.compiler_backend = None  # opaque memory: no kernels but the vendor's own
        self._lock = threading.Lock()
        self._used = [0] * self.count
        self._blocks: list[dict[int, int]] = [{} for _ in range(self.count)]
        self._pinned: dict[int, int] = {}
        self._ranges: list[dict[int, int]] = [{} for _ in range(self.count)]  # vm_reserve's: start -> size
        self._thread = threading.local()
        #: Whether initialize() ran. The contract allows only device_count() before it, and this vendor
        #: refuses the rest, so a core that reaches it too early fails loudly (Note [Lazy initialization]).
        self.initialized = False

    def initialize(self) -> None:
        self.initialized = True

    def _started(self, method: str) -> None:
        if not self.initialized:
            raise RuntimeError(f"sim vendor: {method}() called before initialize()")

    # ---- devices -------------------------------------------------------------
    def device_count(self) -> int:
        return self.count

    def set_device(self, index: int) -> None:
        self._started("set_device")
        self._thread.device = index

    def current_device(self) -> int:
        """Not a contract method: the device ``set_device`` last made current on this thread,
        for tests to see that ``torch.dipu.set_device`` reaches the vendor."""
        return getattr(self._thread, "device", 0)

    def synchronize_device(self, index: int) -> None:
        pass  # execution is synchronous

    def device_properties(self, index: int) -> DeviceProperties:
        return DeviceProperties(name="dipu simulated device", total_memory=self.capacity)

    # ---- memory ----------------------------------------------------------------
    def malloc(self, index: int, nbytes: int) -> int:
        self._started("malloc")
        with self._lock:
            if self._used[index] + nbytes > self.capacity:
                return 0
            self._used[index] += nbytes
        ptr = _libc.aligned_alloc(_ALIGN, (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN)
        if not ptr:
            with self._lock:
                self._used[index] -= nbytes
            return 0
        with self._lock:
            self._blocks[index][ptr] = nbytes
        return ptr

    def free(self, index: int, ptr: int) -> None:
        with self._lock:
            nbytes = self._blocks[index].pop(ptr, None)
            if nbytes is None:
                raise ValueError(f"free of {ptr:#x}, which is not a live allocation on sim device {index}")
            self._used[index] -= nbytes
        _libc.free(ptr)

    def memcpy_h2d(self, index: int, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def memcpy_d2h(self, index: int, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def memcpy_d2d(self, dst_index: int, dst: int, src_index: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def mem_get_info(self, index: int) -> tuple[int, int]:
        with self._lock:
            return self.capacity - self._used[index], self.capacity

    # ---- virtual memory: host address space, memory mapped into it ----------------------
    def vm_granularity(self, index: int) -> int:
        return _GRANULARITY

    def vm_reserve(self, index: int, nbytes: int) -> int:
        self._started("vm_reserve")
        ptr = _libc.mmap(None, nbytes, _PROT_NONE, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
        if ptr in (None, _MAP_FAILED):
            return 0
        with self._lock:
            self._ranges[index][ptr] = nbytes
        return ptr

    def _check_range(self, index: int, ptr: int, nbytes: int, method: str) -> None:
        if ptr % _GRANULARITY or nbytes % _GRANULARITY or nbytes <= 0:
            raise ValueError(f"{method}({ptr:#x}, {nbytes}): address and size must be positive multiples of "
                             f"{_GRANULARITY} bytes on sim device {index}")
        with self._lock:
            if not any(start <= ptr and ptr + nbytes <= start + size for start, size in self._ranges[index].items()):
                raise ValueError(f"{method}({ptr:#x}, {nbytes}) is outside every range reserved on sim device {index}")

    def vm_map(self, index: int, ptr: int, nbytes: int) -> bool:
        self._check_range(index, ptr, nbytes, "vm_map")
        with self._lock:
            if self._used[index] + nbytes > self.capacity:
                return False
            self._used[index] += nbytes
        if _libc.mmap(ptr, nbytes, _PROT_READ_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_FIXED, -1, 0) != ptr:
            with self._lock:
                self._used[index] -= nbytes
            return False
        return True

    def vm_unmap(self, index: int, ptr: int, nbytes: int) -> None:
        self._check_range(index, ptr, nbytes, "vm_unmap")
        # A fresh inaccessible mapping over the old one: its pages go back to the system.
        flags = _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_FIXED | _MAP_NORESERVE
        if _libc.mmap(ptr, nbytes, _PROT_NONE, flags, -1, 0) != ptr:
            raise OSError(ctypes.get_errno(), f"sim vendor: vm_unmap({ptr:#x}, {nbytes}) failed")
        with self._lock:
            self._used[index] -= nbytes

    def vm_release(self, index: int, ptr: int, nbytes: int) -> None:
        with self._lock:
            if self._ranges[index].get(ptr) != nbytes:
                raise ValueError(f"vm_release({ptr:#x}, {nbytes}) is not a range reserved on sim device {index}")
            del self._ranges[index][ptr]
        _libc.munmap(ptr, nbytes)

    def host_malloc(self, nbytes: int) -> int:
        self._started("host_malloc")
        ptr = _libc.aligned_alloc(_ALIGN, (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN) or 0
        if ptr:
            with self._lock:
                self._pinned[ptr] = nbytes
        return ptr

    def host_free(self, ptr: int) -> None:
        with self._lock:
            self._pinned.pop(ptr)
        _libc.free(ptr)


def _events_mode() -> str:
    mode = os.environ.get("DIPU_SIM_EVENTS", "").strip() or "synchronous"
    if mode not in ("synchronous", "manual"):
        raise ValueError(f"DIPU_SIM_EVENTS={mode!r} must be 'synchronous' or 'manual'")
    return mode


class ManualEventsSimRuntime(ManualEvents, SimRuntime):
    """The sim vendor in the test mode DIPU_SIM_EVENTS=manual (Note [Manual events])."""


# The entry point names SimRuntime; in the manual-events test mode that name is the subclass with
# queued streams and events, so DIPU_VENDOR stays "sim".
if _events_mode() == "manual":
    SimRuntime = ManualEventsSimRuntime  # noqa: F811


def _virtual_memory() -> bool:
    value = os.environ.get("DIPU_SIM_VIRTUAL_MEMORY", "").strip() or "1"
    if value not in ("0", "1"):
        raise ValueError(f"DIPU_SIM_VIRTUAL_MEMORY={value!r} must be 0 or 1")
    return value == "1"


# DIPU_SIM_VIRTUAL_MEMORY=0: the contract's defaults again, so the sim is a vendor without virtual memory.
if not _virtual_memory():
    SimRuntime = type("SimRuntime", (SimRuntime,), {m: getattr(DeviceRuntime, m) for m in VIRTUAL_MEMORY_METHODS})
