"""The vendor runtime contract, and how dipu finds the vendor to use.

A vendor fills in :class:`DeviceRuntime` under ``vendor/<name>/`` and names it in
the ``dipu.vendors`` entry-point group. The methods mirror PaddlePaddle's
``C_DeviceInterface`` and DIPU's ``deviceapis.h``, cut to what dipu calls: the
required ones are abstract (devices, memory, copies); the optional ones have
defaults, and those of streams and events are a synchronous runtime's, so a
runtime that finishes each call before returning writes no stream or event code.

Note [The vendor contract is what the core calls]
Every method here is one that dipu calls: the native core through its vendor
method table (Note [Vendor method table] in dipu/csrc/vendor_bridge.h), dipu's
Python through ``vendor().<method>``. tests/test_vendor_contract.py derives both
sets from the sources and checks that they equal the methods declared here and
that every required method is among them, so the contract cannot again grow
methods nobody calls, nor the core call a method a vendor need not have.

Conventions for every method:
- ``index`` is a device index in ``range(device_count())``; the core always
  passes it explicitly, so a vendor never depends on its "current" device.
- Pointers are Python ints. Streams and events are opaque handles created by
  the vendor; ``None`` as a stream means the device's default stream.
- Raising an exception reports a vendor failure; the core turns it into a
  ``RuntimeError`` naming the vendor and the method.

Note [Calls into the vendor are off the hot path]
The core caches device memory (see Note [Caching allocator]) and, when the
vendor declares ``native_device_type``, copies and computes on zero-copy native
aliases. So the vendor is called on cache misses, for stream and event work,
and for copies only when it has no native alias device.
"""

from __future__ import annotations

import abc
import dataclasses
import os
import re
import time
from importlib import metadata

VENDOR_GROUP = "dipu.vendors"
DEFAULT_VENDOR = "sim"
#: PyTorch indexes devices of one type with an int8 (c10::DeviceIndex).
MAX_DEVICES = 127


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """What ``torch.dipu.get_device_properties`` reports for one device."""

    name: str
    total_memory: int
    multi_processor_count: int = 1
    major: int = 1
    minor: int = 0


@dataclasses.dataclass(eq=False, slots=True)
class SynchronousStream:
    """A stream of the default stream methods: work runs as it is queued, so it holds no queue."""

    device: int
    priority: int


@dataclasses.dataclass(eq=False, slots=True)
class SynchronousEvent:
    """An event of the default event methods: the host time (``time.perf_counter``) of its last record."""

    device: int
    timing: bool
    timestamp: float | None = None


#: The optional methods whose defaults make and read :class:`SynchronousStream` and
#: :class:`SynchronousEvent` handles: a vendor with streams of its own overrides all of them
#: (checked when it loads), so no default ever meets a handle it did not make.
STREAM_AND_EVENT_METHODS = ("create_stream", "destroy_stream", "synchronize_stream", "stream_wait_event",
                            "create_event", "destroy_event", "record_event", "synchronize_event")
#: The optional virtual-memory methods, for the caching allocator's expandable segments (Note [Expandable
#: segments] in dipu/csrc/allocator.cpp): a vendor implements all of them or none (checked when it loads).
VIRTUAL_MEMORY_METHODS = ("vm_granularity", "vm_reserve", "vm_map", "vm_unmap", "vm_release")

#: The optional groups a vendor implements whole or not at all, and the rule their error states.
_WHOLE_GROUPS = {
    "stream and event": (STREAM_AND_EVENT_METHODS,
                         "a vendor with streams of its own implements all of them, one without none"),
    "virtual-memory": (VIRTUAL_MEMORY_METHODS, "all of them or none"),
}


class DeviceRuntime(abc.ABC):
    """The runtime a vendor implements. Instantiated once per process."""

    #: Short name (``DIPU_VENDOR`` value), set from the entry point.
    name: str = "?"
    #: A torch device type ("cpu", "cuda") through which device memory can be
    #: addressed directly; dipu then builds zero-copy native aliases of dipu
    #: tensors on it, and the torch op library computes on them. ``None`` means
    #: device memory is opaque: copies go through the memcpy methods.
    native_device_type: str | None = None
    #: The DIOPI op library (entry point in ``dipu.diopi_impls``, or a module) serving this vendor;
    #: ``None``: a runtime only, every op on the CPU fallback. Left at its default, it is the torch
    #: library in C++ (``torch_cpp``, laid over the Python ``torch`` library) where memory has a
    #: :attr:`native_device_type` to compute on, and ``None`` where it is opaque (see :func:`op_library_of`).
    diopi_impl: str | None = "torch_cpp"
    #: The vendor's communication library: a :class:`dipu.distributed.collectives.Communicator`
    #: subclass (see Note [Collective contract]), checked when the vendor loads.
    #: ``None``: ``torch.distributed`` still works on dipu tensors, through gloo
    #: on host copies.
    collectives: type | None = None
    #: What ``torch.compile``'s inductor generates kernels with for this vendor (see Note [Compiler
    #: backends] in dipu/compile/backend.py): ``"cpp"`` when device memory is host-addressable (inductor's
    #: C++/OpenMP kernels run on the data pointers), ``"triton"`` when it is CUDA memory, ``None``
    #: when the vendor has no compiler (``torch.compile`` then runs graphs on dipu as
    #: ``backend="aot_eager"`` does, through dipu's kernels, with a warning; see Note
    #: [torch.compile without a compiler] in dipu/compile/without_compiler.py).
    compiler_backend: str | None = None
    #: For a vendor of NVIDIA GPUs: the CUDA runtime library (``""``: the one torch loaded) through which
    #: the core's C++ CUDA runtime serves it (Note [The CUDA runtime in the core] in
    #: dipu/csrc/vendor_cuda.cpp), so its memory, copies, streams and events never run Python. ``None``:
    #: the core calls this object's methods.
    native_cuda_library: str | None = None

    # ---- required: devices -------------------------------------------------
    @abc.abstractmethod
    def device_count(self) -> int:
        """Number of devices. Called once at initialization; must not change."""

    @abc.abstractmethod
    def set_device(self, index: int) -> None:
        """Make ``index`` the calling thread's current device (torch.dipu.set_device)."""

    @abc.abstractmethod
    def synchronize_device(self, index: int) -> None:
        """Block until all work queued on every stream of device ``index`` is done."""

    @abc.abstractmethod
    def device_properties(self, index: int) -> DeviceProperties:
        """Name, total memory and capabilities of device ``index``."""

    # ---- required: memory ----------------------------------------------------
    @abc.abstractmethod
    def malloc(self, index: int, nbytes: int) -> int:
        """Allocate ``nbytes`` (> 0) of device memory on ``index``; return its address.

        Return 0 when the device is out of memory (the core then empties its
        cache, retries once, and raises ``torch.OutOfMemoryError``). The address
        must be aligned to at least 64 bytes.
        """

    @abc.abstractmethod
    def free(self, index: int, ptr: int) -> None:
        """Release memory returned by :meth:`malloc` on device ``index``."""

    @abc.abstractmethod
    def memcpy_h2d(self, index: int, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` from host address ``src`` to device address ``dst``; synchronous."""

    @abc.abstractmethod
    def memcpy_d2h(self, index: int, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` from device address ``src`` to host address ``dst``; synchronous."""

    @abc.abstractmethod
    def memcpy_d2d(self, dst_index: int, dst: int, src_index: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` between device addresses, possibly across devices; synchronous."""

    # ---- optional: lifetime ------------------------------------------------------
    def initialize(self) -> None:
        """Called once before any other method except ``device_count``."""

    def finalize(self) -> None:
        """Called once at interpreter exit; the core makes no calls afterwards."""

    # ---- optional: streams and events ---------------------------------------------
    # The defaults are a synchronous runtime's: work is done when the call queuing it returns, so
    # waiting is a device synchronize (free there) and an event's time is the host's. A vendor with
    # asynchronous streams overrides every method of STREAM_AND_EVENT_METHODS.
    def create_stream(self, index: int, priority: int = 0) -> object:
        """Create a stream on device ``index``; lower ``priority`` runs first."""
        return SynchronousStream(index, priority)

    def destroy_stream(self, index: int, stream: object) -> None:
        """Destroy a stream from :meth:`create_stream`."""

    def synchronize_stream(self, index: int, stream: object) -> None:
        """Block until all work queued on ``stream`` (None: default stream) is done."""
        self.synchronize_device(index)

    def query_stream(self, index: int, stream: object) -> bool:
        """True if all work on ``stream`` is done. Default: synchronize, then True."""
        self.synchronize_stream(index, stream)
        return True

    def stream_wait_event(self, index: int, stream: object, event: object) -> None:
        """Make future work on ``stream`` wait until ``event`` has completed.

        Default: nothing to wait for; the work before the event ran when it was queued.
        """

    def create_event(self, index: int, enable_timing: bool) -> object:
        """Create an event on device ``index``; timing events support elapsed time."""
        return SynchronousEvent(index, enable_timing)

    def destroy_event(self, index: int, event: object) -> None:
        """Destroy an event from :meth:`create_event`."""

    def record_event(self, index: int, event: object, stream: object) -> None:
        """Record ``event`` at the current end of ``stream``'s queue."""
        event.timestamp = time.perf_counter()  # type: ignore[attr-defined]  # create_event's, a SynchronousEvent

    def synchronize_event(self, index: int, event: object) -> None:
        """Block until ``event`` has completed (returns at once if never recorded)."""
        self.synchronize_device(index)

    def query_event(self, index: int, event: object) -> bool:
        """True if ``event`` has completed. Default: synchronize on it, then True."""
        self.synchronize_event(index, event)
        return True

    def event_elapsed_time(self, index: int, start: object, end: object) -> float:
        """Milliseconds between two recorded timing events.

        Default: the host time between their records, for the default events; a vendor with events
        of its own and no way to time them leaves this, and timing them raises.
        """
        if not (isinstance(start, SynchronousEvent) and isinstance(end, SynchronousEvent)):
            raise NotImplementedError(f"vendor '{self.name}' does not time events")
        if start.timestamp is None or end.timestamp is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end.timestamp - start.timestamp) * 1000.0

    #: Vendors whose kernels follow an implicit current stream override this.
    def set_current_stream(self, index: int, stream: object) -> None:
        """Called when the current dipu stream of device ``index`` changes."""

    # ---- optional: memory ------------------------------------------------------------
    def mem_get_info(self, index: int) -> tuple[int, int]:
        """(free, total) bytes of device ``index``."""
        total = self.device_properties(index).total_memory
        return total, total

    #: Pinned host memory is offered when a vendor overrides these two.
    def host_malloc(self, nbytes: int) -> int:
        """Allocate page-locked host memory; return its address (0 when exhausted)."""
        raise NotImplementedError

    def host_free(self, ptr: int) -> None:
        """Release memory from :meth:`host_malloc`."""
        raise NotImplementedError

    # ---- optional: virtual memory ----------------------------------------------------
    # A vendor that can put memory behind a reserved range of addresses piece by piece implements all five,
    # and PYTORCH_ALLOC_CONF=expandable_segments:True then grows one segment per stream instead of allocating
    # many (Note [Expandable segments] in dipu/csrc/allocator.cpp). Addresses and sizes dipu passes are
    # multiples of the granularity.
    def vm_granularity(self, index: int) -> int:
        """The unit of mapping on device ``index`` in bytes: a power of two (2 MiB on CUDA)."""
        raise NotImplementedError

    def vm_reserve(self, index: int, nbytes: int) -> int:
        """Reserve ``nbytes`` of addresses with no memory behind them; their start (0: no range that large)."""
        raise NotImplementedError

    def vm_map(self, index: int, ptr: int, nbytes: int) -> bool:
        """Put device memory behind ``[ptr, ptr + nbytes)`` of a reserved range; False when out of memory."""
        raise NotImplementedError

    def vm_unmap(self, index: int, ptr: int, nbytes: int) -> None:
        """Give the memory behind ``[ptr, ptr + nbytes)`` back to the device; the addresses stay reserved."""
        raise NotImplementedError

    def vm_release(self, index: int, ptr: int, nbytes: int) -> None:
        """Give back a whole range :meth:`vm_reserve` made, nothing mapped in it."""
        raise NotImplementedError

    # ---- optional: profiling and random numbers ---------------------------------------
    #: A vendor with its own tracer (CUPTI, a vendor profiler) hooks it here.
    def start_tracing(self) -> None:
        """Called when a torch.profiler session with the PrivateUse1 activity starts recording.

        dipu already times each op with this vendor's events (Note [Device timeline] in
        dipu/csrc/profiler.cpp); a vendor may start its own device tracer alongside.
        """

    def stop_tracing(self) -> None:
        """Called when that profiler session stops recording, before its trace is processed."""

    def native_generator(self, index: int):
        """A new ``torch.Generator`` of the native alias device for device ``index``."""
        import torch

        device = self.native_device_type or "cpu"
        return torch.Generator(device=device if device == "cpu" else f"{device}:{index}")


def overrides(runtime: DeviceRuntime, method: str) -> bool:
    """Whether ``runtime``'s class implements an optional ``method`` itself."""
    return _implements(type(runtime), method)


def _implements(cls: type, method: str) -> bool:
    return getattr(cls, method) is not getattr(DeviceRuntime, method)


def has_virtual_memory(runtime: DeviceRuntime) -> bool:
    """Whether ``runtime`` has the virtual-memory methods expandable segments need: a Python vendor's own
    :data:`VIRTUAL_MEMORY_METHODS`, a C plug-in's ``DipuInitVirtualMemory`` group, or, for the core's CUDA
    runtime, the driver's (which answers for itself when it reserves)."""
    plugin = plugin_of(runtime)
    if plugin is not None:
        return plugin.has_virtual_memory()
    if runtime.native_cuda_library is not None:
        return True
    return all(overrides(runtime, m) for m in VIRTUAL_MEMORY_METHODS)


def check_runtime_class(name: str, cls: type) -> None:
    """Fail at once, naming every missing required method, for an incomplete vendor."""
    if not (isinstance(cls, type) and issubclass(cls, DeviceRuntime)):
        raise TypeError(f"dipu vendor '{name}': {cls!r} is not a subclass of dipu.runtime.DeviceRuntime")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise TypeError(
            f"dipu vendor '{name}' ({cls.__module__}.{cls.__qualname__}) does not implement "
            f"the required runtime methods: {', '.join(missing)}"
        )
    for group, (methods, rule) in _WHOLE_GROUPS.items():
        own = [m for m in methods if _implements(cls, m)]
        if own and len(own) < len(methods):
            raise TypeError(
                f"dipu vendor '{name}' ({cls.__module__}.{cls.__qualname__}) implements the {group} methods "
                f"{', '.join(own)} but not {', '.join(m for m in methods if m not in own)}: {rule}"
            )


class PluginRuntime(DeviceRuntime):
    """A vendor runtime in C: a runtime plug-in (Note [C runtime plug-ins] in dipu/csrc/vendor_plugin.cpp).

    ``DIPU_VENDOR=<path to .so>`` runs a plug-in as it is: the vendor is named by the plug-in's
    device type, keeps device memory opaque (ops run through the CPU fallback) and has no op
    library. A packaged plug-in subclasses this class, sets :attr:`library` (the .so's path) and
    may declare what a C table cannot say (``native_device_type``, ``diopi_impl``,
    ``collectives``, ``compiler_backend``), then names the subclass in the ``dipu.vendors``
    entry-point group like any vendor. The native core calls the plug-in's table directly, without
    Python; these methods serve dipu's Python (``torch.dipu.get_device_properties``,
    ``mem_get_info``, lifetime) and tests.
    """

    #: Path of the plug-in's shared library (a packaged plug-in sets it; may be a callable
    #: returning the path, e.g. one that builds the library first).
    library = None
    diopi_impl = None

    def __init__(self, plugin) -> None:
        #: The loaded plug-in (``dipu._C.RuntimePlugin``).
        self.plugin = plugin
        self._sizes: dict[tuple[int, int], int] = {}

    def device_count(self) -> int:
        return self.plugin.device_count()

    def initialize(self) -> None:
        self.plugin.initialize()

    def finalize(self) -> None:
        self.plugin.finalize()

    def set_device(self, index: int) -> None:
        self.plugin.set_device(index)

    def synchronize_device(self, index: int) -> None:
        self.plugin.synchronize_device(index)

    def device_properties(self, index: int) -> DeviceProperties:
        name = " ".join(part for part in (self.plugin.device_type, self.plugin.sub_device_type) if part)
        capability = self.plugin.compute_capability()
        major, minor = divmod(capability, 10) if capability is not None else (1, 0)
        return DeviceProperties(name=name, total_memory=self.plugin.mem_get_info(index)[1], major=major, minor=minor)

    def mem_get_info(self, index: int) -> tuple[int, int]:
        return tuple(self.plugin.mem_get_info(index))

    def malloc(self, index: int, nbytes: int) -> int:
        ptr = self.plugin.malloc(index, nbytes)
        if ptr:
            self._sizes[(index, ptr)] = nbytes  # the ABI's deallocation takes the size
        return ptr

    def free(self, index: int, ptr: int) -> None:
        self.plugin.free(index, ptr, self._sizes.pop((index, ptr), 0))

    def memcpy_h2d(self, index: int, dst: int, src: int, nbytes: int) -> None:
        self.plugin.memcpy_h2d(index, dst, src, nbytes)

    def memcpy_d2h(self, index: int, dst: int, src: int, nbytes: int) -> None:
        self.plugin.memcpy_d2h(index, dst, src, nbytes)

    def memcpy_d2d(self, dst_index: int, dst: int, src_index: int, src: int, nbytes: int) -> None:
        self.plugin.memcpy_d2d(dst_index, dst, src_index, src, nbytes)


#: The op libraries that compute on zero-copy aliases of device memory (the Python one and its C++ twin).
ALIAS_LIBRARIES = ("torch", "torch_cpp")


def op_library_of(runtime: DeviceRuntime) -> str | None:
    """The op library ``runtime`` asks for: its :attr:`~DeviceRuntime.diopi_impl`, except that the default
    torch library, which computes on zero-copy aliases of device memory, is no library at all for a vendor
    whose memory is opaque (no ``native_device_type``): such a vendor starts on the CPU fallback rather
    than failing at its first op. Naming the torch library explicitly there is an error."""
    choice = runtime.diopi_impl
    if choice not in ALIAS_LIBRARIES or runtime.native_device_type is not None:
        return choice
    explicit = "diopi_impl" in vars(runtime) or any(
        "diopi_impl" in vars(cls) for cls in type(runtime).__mro__ if cls is not DeviceRuntime)
    if explicit:
        raise TypeError(
            f"dipu vendor '{runtime.name}' ({type(runtime).__module__}.{type(runtime).__qualname__}) names the "
            f"op library '{choice}', which computes on zero-copy aliases of device memory, but sets no "
            "native_device_type (its memory is opaque): set native_device_type if torch can address the "
            "memory, or diopi_impl = None (every op on the CPU fallback) or your own op library")
    return None


def plugin_of(runtime: DeviceRuntime):
    """The loaded C plug-in (``dipu._C.RuntimePlugin``) of a :class:`PluginRuntime`; None for a Python vendor."""
    return runtime.plugin if isinstance(runtime, PluginRuntime) else None


def installed_vendors() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=VENDOR_GROUP)}


def is_plugin_path(name: str) -> bool:
    """Whether a ``DIPU_VENDOR`` value names a shared library rather than an installed vendor."""
    return os.sep in name or name.endswith(".so") or ".so." in name


def load_vendor(name: str | None = None, load_plugin=None) -> DeviceRuntime:
    """Instantiate the vendor named by ``name`` or ``DIPU_VENDOR`` (default: sim).

    ``load_plugin(path, variable)`` loads a runtime plug-in (``dipu._C.load_runtime_plugin``); it
    serves a path (``DIPU_VENDOR=/path/libx.so``) and packaged :class:`PluginRuntime` vendors.
    """
    name = name or os.environ.get("DIPU_VENDOR", "").strip() or DEFAULT_VENDOR
    if is_plugin_path(name):
        if load_plugin is None:
            raise RuntimeError(f"DIPU_VENDOR={name!r} names a runtime plug-in, which needs the native core")
        runtime = PluginRuntime(load_plugin(os.path.abspath(os.path.expanduser(name)), "DIPU_VENDOR"))
        runtime.name = runtime.plugin.device_type
        return runtime
    vendors = installed_vendors()
    if name not in vendors:
        raise RuntimeError(
            f"DIPU_VENDOR={name!r} names no installed dipu vendor; installed: "
            f"{', '.join(sorted(vendors)) or 'none'} (entry-point group '{VENDOR_GROUP}'; a package's "
            "entry points are read when it is installed: after adding or renaming one, run pip install "
            "again, `pip install -e .` included); a runtime plug-in in C is named by its path "
            "(DIPU_VENDOR=/path/to/libvendor.so)"
        )
    cls = vendors[name].load()
    check_runtime_class(name, cls)
    if issubclass(cls, PluginRuntime):
        if load_plugin is None:
            raise RuntimeError(f"dipu vendor '{name}' is a runtime plug-in, which needs the native core")
        library = cls.library() if callable(cls.library) else cls.library
        if not library:
            raise TypeError(f"dipu vendor '{name}' ({cls.__module__}.{cls.__qualname__}) sets no library")
        runtime = cls(load_plugin(os.fspath(library), f"{cls.__module__}.{cls.__qualname__}.library"))
    else:
        runtime = cls()
    runtime.name = name
    if runtime.collectives is not None:
        from dipu.distributed.collectives import check_communicator_class

        check_communicator_class(name, runtime.collectives)
    return runtime


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(variable: str, text: str) -> int:
    """Parse a byte count such as ``512M``, ``2G``, ``1.5GiB`` or ``1048576``."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{variable}={text!r} is not a size; use bytes or a suffix K/M/G/T (e.g. 512M, 2G)")
    number, unit = float(match.group(1)), match.group(2).upper()
    value = int(number * 1024 ** " KMGT".index(unit or " "))
    if value <= 0:
        raise ValueError(f"{variable}={text!r} must be a positive size")
    return value


def env_int(variable: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
    text = os.environ.get(variable)
    if text is None or not text.strip():
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{variable}={text!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{variable}={text!r} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{variable}={text!r} must be at most {maximum}")
    return value
