"""The toy vendor's runtime: devices whose memory is an arena the vendor owns, at addresses the host cannot use.

A real accelerator hands dipu device addresses that mean nothing on the host. This runtime does the same:
each device's memory is a block of host memory (an anonymous ``mmap``) that the runtime hands out at
addresses of its own, ``ARENA_BASE + device * ARENA_STRIDE + offset``. Those addresses are non-canonical
on x86-64 and arm64 (bits above 47 set, top bit clear), so anything that dereferenced one, instead of
going through this runtime's copies, would crash at once rather than corrupt memory. dipu never does: it
copies with :meth:`memcpy_h2d` and friends, and the op library (``dipu_toy.ops``) translates addresses
with :meth:`ToyRuntime.host_address`, as a vendor's kernels reach device memory.

Environment:
- ``DIPU_TOY_DEVICE_COUNT``: number of devices (default 2).
- ``DIPU_TOY_MEMORY``: arena size of each device (default 1G; 512M, 2G, ...). Pages are touched only
  when used.
- ``DIPU_TOY_RUNTIME_ONLY=1``: the runtime without its op library (every op on dipu's CPU fallback):
  where a vendor's bring-up starts.
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import os
import threading

from dipu.runtime import MAX_DEVICES, DeviceProperties, DeviceRuntime, env_int, parse_size

#: Device addresses of device ``d`` start at ``ARENA_BASE + d * ARENA_STRIDE``.
ARENA_BASE = 0x4D1B << 48
ARENA_STRIDE = 1 << 40
#: malloc's alignment (the contract asks for at least 64 bytes).
ALIGNMENT = 64


class Arena:
    """One device's memory: host bytes handed out as device addresses, first fit, freed blocks merged."""

    def __init__(self, index: int, capacity: int):
        self.index = index
        self.base = ARENA_BASE + index * ARENA_STRIDE
        self.capacity = capacity
        self.memory = mmap.mmap(-1, capacity)  # anonymous: pages are mapped on first touch
        self.host_base = ctypes.addressof(ctypes.c_char.from_buffer(self.memory))
        self.used = 0
        self._free = [(0, capacity)]  # (offset, size), sorted by offset, never two adjacent
        self._starts: list[int] = []  # offsets of live blocks, sorted
        self._sizes: dict[int, int] = {}  # live block offset -> size
        self._lock = threading.Lock()  # dipu calls free from whichever thread drops a tensor

    def allocate(self, nbytes: int) -> int:
        size = (nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        with self._lock:
            for i, (offset, free_size) in enumerate(self._free):
                if free_size >= size:
                    if free_size == size:
                        del self._free[i]
                    else:
                        self._free[i] = (offset + size, free_size - size)
                    bisect.insort(self._starts, offset)
                    self._sizes[offset] = size
                    self.used += size
                    return self.base + offset
        return 0  # out of memory: dipu empties its cache, retries once, then raises OutOfMemoryError

    def release(self, address: int) -> None:
        offset = address - self.base
        with self._lock:
            size = self._sizes.pop(offset, None)
            if size is None:
                raise ValueError(f"toy vendor: free of {address:#x}, which is not a live allocation on device "
                                 f"{self.index}")
            del self._starts[bisect.bisect_left(self._starts, offset)]
            self.used -= size
            i = bisect.bisect_left(self._free, (offset, 0))
            self._free.insert(i, (offset, size))
            if i + 1 < len(self._free) and offset + size == self._free[i + 1][0]:  # merge with the next
                self._free[i] = (offset, size + self._free.pop(i + 1)[1])
            if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == offset:  # and with the previous
                previous = self._free.pop(i - 1)
                self._free[i - 1] = (previous[0], previous[1] + self._free[i - 1][1])

    def host_address(self, address: int, nbytes: int) -> int:
        """The host address of ``nbytes`` at device ``address``, which must lie in one live block."""
        offset = address - self.base
        with self._lock:
            i = bisect.bisect_right(self._starts, offset) - 1
            start = self._starts[i] if i >= 0 else None
            if start is None or offset + nbytes > start + self._sizes[start]:
                raise ValueError(f"toy vendor: {nbytes} bytes at {address:#x} are not inside a live allocation "
                                 f"of device {self.index}")
        return self.host_base + offset


class ToyRuntime(DeviceRuntime):
    """The toy vendor. Synchronous (every copy is done when it returns), so it writes no stream or event
    method: the contract's defaults serve it. No ``native_device_type``: its memory is opaque to torch."""

    diopi_impl = "toy"  # the op library: entry point 'toy' in dipu.diopi_impls (dipu_toy.ops)
    #: The runtime of this process once initialized; the op library reaches device memory through it.
    active: ToyRuntime | None = None

    def __init__(self):
        self.count = env_int("DIPU_TOY_DEVICE_COUNT", 2, minimum=1, maximum=MAX_DEVICES)
        self.capacity = parse_size("DIPU_TOY_MEMORY", os.environ.get("DIPU_TOY_MEMORY", "1G"))
        runtime_only = os.environ.get("DIPU_TOY_RUNTIME_ONLY", "0").strip()
        if runtime_only not in ("0", "1"):
            raise ValueError(f"DIPU_TOY_RUNTIME_ONLY={runtime_only!r} must be 0 or 1")
        if runtime_only == "1":
            self.diopi_impl = None  # no op library: dipu runs every op through its CPU fallback
        self.arenas: list[Arena] = []
        self._thread = threading.local()

    def initialize(self) -> None:
        """dipu calls this at the first device use (not at import): the arenas are made then."""
        self.arenas = [Arena(index, self.capacity) for index in range(self.count)]
        ToyRuntime.active = self

    # ---- devices ---------------------------------------------------------------
    def device_count(self) -> int:
        return self.count

    def set_device(self, index: int) -> None:
        self._thread.device = index

    def synchronize_device(self, index: int) -> None:
        pass  # every call has finished when it returns

    def device_properties(self, index: int) -> DeviceProperties:
        return DeviceProperties(name="toy device", total_memory=self.capacity)

    def mem_get_info(self, index: int) -> tuple[int, int]:
        return self.capacity - self.arenas[index].used, self.capacity

    # ---- memory ------------------------------------------------------------------
    def malloc(self, index: int, nbytes: int) -> int:
        return self.arenas[index].allocate(nbytes)

    def free(self, index: int, ptr: int) -> None:
        self.arenas[index].release(ptr)

    def host_address(self, index: int, address: int, nbytes: int) -> int:
        """Not a contract method: where device memory lies on the host, for this vendor's copies and kernels."""
        return self.arenas[index].host_address(address, nbytes)

    def memcpy_h2d(self, index: int, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(self.host_address(index, dst, nbytes), src, nbytes)

    def memcpy_d2h(self, index: int, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, self.host_address(index, src, nbytes), nbytes)

    def memcpy_d2d(self, dst_index: int, dst: int, src_index: int, src: int, nbytes: int) -> None:
        ctypes.memmove(self.host_address(dst_index, dst, nbytes), self.host_address(src_index, src, nbytes), nbytes)
