"""``torch.dipu``: the device module, mirroring ``torch.cuda``."""

from __future__ import annotations

import threading
import traceback

import torch

from dipu._core import _C, vendor

_TYPE = "dipu"


def _index(device=None, optional: bool = False) -> int:
    """Device index from None (current), an int, "dipu:1" or a torch.device."""
    if device is None:
        return -1 if optional else _C.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != _TYPE:
            raise ValueError(f"Expected a dipu device, but got: {device}")
        if device.index is None:
            return -1 if optional else _C.current_device()
        device = device.index
    if not isinstance(device, int):
        raise TypeError(f"Expected a dipu device index, torch.device or str, got {device!r}")
    if device == -1 and optional:
        return -1
    _C.check_device_index(device)
    return device


# ---- devices -----------------------------------------------------------------

def is_available() -> bool:
    return _C.device_count() > 0


# Note [Lazy initialization]
# As torch.cuda: ``import torch`` (which autoloads dipu) registers the device, the native core's
# guard, allocator and hooks, ``torch.dipu`` and the kernels, and asks the vendor only its
# device_count() (which the runtime contract allows before initialize()). The vendor runtime
# starts at the first device use: PyTorch calls ``torch.dipu._lazy_init`` before creating a
# dipu tensor from Python (torch/csrc/utils/device_lazy_init.cpp), the hooks' init() runs it for
# ``at::globalContext().lazyInitDevice``, and the core runs it before any vendor call, allocation
# or native alias (``ensure_initialized`` in dipu/csrc/core.h), so no path reaches the vendor
# first. Seeding before that is queued, as torch.cuda's ``_lazy_call`` does (``torch.manual_seed``
# seeds every device type and must not start a runtime). A process forked from an initialized
# parent inherits a runtime its vendor no longer serves (CUDA's hangs or crashes there), so
# ``os.register_at_fork`` marks it a bad fork: any device use raises at once, naming the 'spawn'
# start method, and inherited tensors are freed without calling the vendor. A child of a parent
# that never used the device initializes on its own (DataLoader workers with fork).

_BAD_FORK_MESSAGE = ("Cannot re-initialize dipu in forked subprocess. To use dipu with multiprocessing, "
                     "you must use the 'spawn' start method")

_initialized = False
_in_bad_fork = False
_initialization_lock = threading.Lock()
_tls = threading.local()
_queued_calls: list = []  # (callable, the stack that queued it)
_queued_seeds: dict = {}  # "seed" / "seed_all" -> (callable, stack): only the latest of each counts


def is_initialized() -> bool:
    """Whether the vendor runtime has started in this process (see Note [Lazy initialization])."""
    return _initialized and not _in_bad_fork


def _is_in_bad_fork() -> bool:
    """Whether this is a forked child of a process that had started the runtime."""
    return _in_bad_fork


def _lazy_init() -> None:
    """Start the vendor runtime unless it runs; see Note [Lazy initialization]."""
    global _initialized
    if is_initialized() or getattr(_tls, "is_initializing", False):
        return
    with _initialization_lock:
        if is_initialized():
            return
        if _in_bad_fork:
            raise RuntimeError(_BAD_FORK_MESSAGE)
        vendor = _vendor()
        try:
            vendor.initialize()
        except Exception as error:  # reported as every vendor failure is (dipu/csrc/module.cpp)
            raise RuntimeError(f"dipu: vendor '{vendor.name}' failed in initialize: "
                               f"{type(error).__name__}: {error}") from error
        _C.start_runtime()
        _tls.is_initializing = True  # queued calls may come back here: let them through
        try:
            for call, stack in _queued_calls + list(_queued_seeds.values()):
                try:
                    call()
                except Exception as error:
                    raise RuntimeError(f"dipu call failed lazily at initialization: {error}\n\n"
                                       f"It was queued at:\n{''.join(stack)}") from error
        finally:
            _tls.is_initializing = False
        _queued_calls.clear()
        _queued_seeds.clear()
        _initialized = True


def init() -> None:
    """Start the vendor runtime now (any device use does it anyway), as ``torch.cuda.init``."""
    _lazy_init()


def _lazy_call(call, kind: str | None = None) -> None:
    """Run ``call`` now if the runtime runs, else at its start; ``kind`` "seed"/"seed_all" keeps only the latest."""
    with _initialization_lock:
        if is_initialized():
            call()
        elif kind is None:
            _queued_calls.append((call, traceback.format_stack()))
        else:  # the latest of its kind, in the order of the latest calls: seed_all(1), seed(2), seed_all(3) -> 3
            _queued_seeds.pop(kind, None)
            _queued_seeds[kind] = (call, traceback.format_stack())


def _after_fork_in_child() -> None:
    global _initialized, _in_bad_fork, _initialization_lock
    _initialization_lock = threading.Lock()  # another thread of the parent may have held it
    if _initialized:
        _initialized, _in_bad_fork = False, True
        _C.forget_runtime()


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    _lazy_init()
    return _C.current_device()


def set_device(device) -> None:
    index = _index(device, optional=True)
    if index >= 0:
        _lazy_init()
        _C.set_device(index)


class device:
    """Context manager that makes ``device`` current (None or -1: no change)."""

    def __init__(self, device):
        self.index = _index(device, optional=True)
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
    _C.synchronize(_index(device))


_vendor = vendor


def get_device_properties(device=None):
    _lazy_init()
    return _vendor().device_properties(_index(device))


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    props = get_device_properties(device)
    return props.major, props.minor


# ---- legacy typed-tensor classes: torch.dipu.FloatTensor, ... -------------------------

# Note [Legacy tensor types]
# torch creates torch.cuda.FloatTensor and its siblings in C++ (torch/csrc/tensor/python_tensor.cpp) for the
# backends of torch::utils::all_declared_types(): CPU, CUDA and their sparse layouts, never PrivateUse1, and
# torch.utils.backend_registration generates no such classes either. Yet ``x.type()`` names dipu tensors
# ``torch.dipu.FloatTensor`` and ``x.type("torch.dipu.FloatTensor")`` already works (torch parses the
# PrivateUse1 backend name). So dipu defines the classes here with the behaviour of torch's ``tensortype``:
# ``isinstance`` matches device type and dtype, ``dtype``/``layout``/``is_cuda``/``is_sparse`` on the class,
# calling the class follows torch's legacy constructor, and ``x.type(cls)`` works because torch reads the
# class's C-level name (``tp_name``, which is ``__name__`` for a Python class) as the type string.

_LEGACY_TYPES = {
    "Double": torch.float64, "Float": torch.float32, "Half": torch.float16, "BFloat16": torch.bfloat16,
    "Long": torch.int64, "Int": torch.int32, "Short": torch.int16, "Char": torch.int8, "Byte": torch.uint8,
    "Bool": torch.bool,
}


class _TensorType(type):
    """The metaclass of ``torch.dipu.<Scalar>Tensor``, mirroring ``torch.tensortype``."""

    dtype = property(lambda cls: cls._dtype)
    layout = property(lambda cls: torch.strided)
    is_cuda = property(lambda cls: False)
    is_xpu = property(lambda cls: False)
    is_sparse = property(lambda cls: False)
    is_sparse_csr = property(lambda cls: False)

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, torch.Tensor) and obj.device.type == _TYPE and obj.dtype == cls._dtype
                and obj.layout == torch.strided)

    def __call__(cls, *args, device=None):
        """torch's legacy constructor: sizes (uninitialized), data, a tensor of this type (an alias), a storage."""
        if device is not None and torch.device(device).type != _TYPE:
            raise RuntimeError(f"legacy constructor expects device type: {_TYPE} but device type: "
                               f"{torch.device(device).type} was passed")
        target = torch.device(_TYPE, _index(device))
        if len(args) == 1 and isinstance(args[0], torch.Tensor):
            if not isinstance(args[0], cls):
                raise TypeError(f"expected {cls.__name__} (got {args[0].type()})")
            return torch.ops.aten.alias(args[0])
        if len(args) == 1 and isinstance(args[0], (torch.UntypedStorage, torch.TypedStorage)):
            return torch.empty(0, dtype=cls._dtype, device=args[0].device).set_(args[0])
        if args and all(isinstance(a, int) for a in args) or len(args) == 1 and isinstance(args[0], torch.Size):
            return torch.empty(*args, dtype=cls._dtype, device=target)
        return cls._cpu_class(*args).to(target)


def _legacy_type(name: str, dtype: torch.dtype) -> _TensorType:
    cls = _TensorType(f"torch.{_TYPE}.{name}Tensor", (), {
        "_dtype": dtype, "_cpu_class": getattr(torch, f"{name}Tensor"), "__module__": f"torch.{_TYPE}",
        "__doc__": f"``torch.{_TYPE}.{name}Tensor``: the legacy class of {dtype} dipu tensors (see Note "
                   f"[Legacy tensor types])."})
    cls.__qualname__ = f"{name}Tensor"
    torch._tensor_classes.add(cls)
    return cls


DoubleTensor, FloatTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, CharTensor, \
    ByteTensor, BoolTensor = (_legacy_type(name, dtype) for name, dtype in _LEGACY_TYPES.items())


# ---- streams and events ---------------------------------------------------------

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
        with globals()["device"](device):
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

    def record_event(self, event: "Event | None" = None) -> "Event":
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

    def elapsed_time(self, end: "Event") -> float:
        return self.event.elapsed_time(_unwrap(end))

    def __repr__(self) -> str:
        return f"torch.dipu.Event({self.event!r})"


def _unwrap(event):
    return event.event if isinstance(event, Event) else event


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                  device_type=stream.device_type)


def current_stream(device=None) -> Stream:
    index = _index(device)
    return _wrap(torch.accelerator.current_stream(index))


def default_stream(device=None) -> Stream:
    index = _index(device)
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


# ---- random numbers ---------------------------------------------------------------

def _generators() -> tuple:
    return tuple(_C.default_generator(i) for i in range(device_count()))


#: What inductor reads from the device module to compile for dipu (Note [How torch.compile finds dipu]).
_INDUCTOR_NAMES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def __getattr__(name):
    if name == "default_generators":
        return _generators()
    if name in _INDUCTOR_NAMES:
        from dipu import compile  # registers dipu with dynamo and inductor on import

        return getattr(compile, name)
    raise AttributeError(f"module 'torch.dipu' has no attribute {name!r}")


# Seeding before the runtime starts is queued (Note [Lazy initialization]).

def manual_seed(seed: int) -> None:
    seed = int(seed)
    index = _C.current_device()
    _lazy_call(lambda: _C.default_generator(index).manual_seed(seed), "seed")


def manual_seed_all(seed: int) -> None:
    seed = int(seed)

    def seed_every_device():
        for gen in _generators():
            gen.manual_seed(seed)

    _lazy_call(seed_every_device, "seed_all")


def seed() -> None:
    index = _C.current_device()
    _lazy_call(lambda: _C.default_generator(index).seed(), "seed")


def seed_all() -> None:
    def seed_every_device():
        value = _C.default_generator(current_device()).seed()
        for gen in _generators():
            gen.manual_seed(value)

    _lazy_call(seed_every_device, "seed_all")


def initial_seed() -> int:
    return _C.default_generator(current_device()).initial_seed()


def get_rng_state(device="dipu") -> torch.Tensor:
    return _C.default_generator(_index(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device="dipu") -> None:
    index, state = _index(device), new_state.clone()
    _lazy_call(lambda: _C.default_generator(index).set_state(state))


def get_rng_state_all() -> list[torch.Tensor]:
    return [gen.get_state() for gen in _generators()]


def set_rng_state_all(new_states) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


# ---- memory (dipu/memory.py; torch.dipu.memory is that module) -----------------------

from dipu import memory  # noqa: E402
from dipu.memory import (  # noqa: E402,F401
    empty_cache, get_per_process_memory_fraction, max_memory_allocated, max_memory_reserved, mem_get_info,
    memory_allocated, memory_reserved, memory_snapshot, memory_stats, memory_summary,
    reset_accumulated_memory_stats, reset_peak_memory_stats, set_per_process_memory_fraction)


# ---- autocast (the backend module half of torch.autocast("dipu")) --------------------

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
