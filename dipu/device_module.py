"""``torch.dipu``: the device module, mirroring ``torch.cuda``."""

from __future__ import annotations

import torch

from dipu import _C

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


def is_initialized() -> bool:
    return True


def init() -> None:
    """Devices are initialized at ``import dipu``; kept for torch.cuda parity."""


_lazy_init = init


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device) -> None:
    index = _index(device, optional=True)
    if index >= 0:
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
    _C.synchronize(_index(device))


def _vendor():
    import dipu

    return dipu.vendor()


def get_device_properties(device=None):
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
# in torch.cuda's (least, greatest) order, and any other priority is refused rather than ignored.
_LEAST_PRIORITY = _GREATEST_PRIORITY = 0


class Stream(torch.Stream):
    """A dipu stream. ``Stream()`` takes one from the current device's pool."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if kwargs:  # wrapping an existing stream: stream_id, device_index, device_type
            return super().__new__(cls, **kwargs)
        if not _GREATEST_PRIORITY <= priority <= _LEAST_PRIORITY:
            raise ValueError(
                f"torch.dipu.Stream: priority {priority} is not supported; dipu streams take priorities "
                f"{_GREATEST_PRIORITY} to {_LEAST_PRIORITY} (see torch.dipu.Stream.priority_range())")
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


def manual_seed(seed: int) -> None:
    _C.default_generator(current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for gen in _generators():
        gen.manual_seed(int(seed))


def seed() -> None:
    _C.default_generator(current_device()).seed()


def seed_all() -> None:
    value = _C.default_generator(current_device()).seed()
    for gen in _generators():
        gen.manual_seed(value)


def initial_seed() -> int:
    return _C.default_generator(current_device()).initial_seed()


def get_rng_state(device="dipu") -> torch.Tensor:
    return _C.default_generator(_index(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device="dipu") -> None:
    _C.default_generator(_index(device)).set_state(new_state.clone())


def get_rng_state_all() -> list[torch.Tensor]:
    return [gen.get_state() for gen in _generators()]


def set_rng_state_all(new_states) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


# ---- memory ------------------------------------------------------------------------

def memory_stats(device=None) -> dict[str, int]:
    return _C.memory_stats(_index(device))


def memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None) -> None:
    _C.reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    _C.empty_cache()


def mem_get_info(device=None) -> tuple[int, int]:
    return tuple(_vendor().mem_get_info(_index(device)))


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
