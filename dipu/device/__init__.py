"""``torch.dipu``: the device module, mirroring ``torch.cuda``.

dipu/__init__.py registers this package as the PrivateUse1 device module
(``torch._register_device_module("dipu", ...)``). It only assembles the public
namespace; each concern is one submodule, importing downward only:

- ``_initialization``: lazy start of the vendor runtime, queued calls, fork handling
  (Note [Lazy initialization]);
- ``_devices``: device count, the current device, ``device``/``device_of``, synchronize,
  properties, and device-argument parsing; on ``_initialization``;
- ``_streams``: ``Stream``, ``Event``, ``StreamContext`` (Note [Stream priorities]); on ``_devices``;
- ``_random``: default generators, seeds and RNG states; on ``_devices`` and ``_initialization``;
- ``_legacy_types``: ``torch.dipu.FloatTensor`` and its siblings (Note [Legacy tensor types]);
- ``_amp``: the device-module half of ``torch.autocast("dipu")``;
- ``memory``: allocator statistics, limits, history and snapshots (``torch.dipu.memory``,
  as ``torch.cuda.memory``); its public functions are re-exported here as torch.cuda does.

The submodules but ``memory`` are private, though torch.cuda names its own ``random`` and
``streams``: with DIPU_MOCK_CUDA, dipu/integrations/mock_cuda.py copies every public ``torch.dipu`` name that
``torch.cuda`` also has onto ``torch.cuda``, which must not replace ``torch.cuda.amp``,
``.random`` or ``.streams`` (``torch.cuda.memory`` becomes this ``memory``, as before).
Inductor's names (Note [How torch.compile finds dipu]) are served by :func:`__getattr__`, the
only dipu module that imports dipu/compile/backend.py, which imports the submodules, never this namespace.
"""

from __future__ import annotations

from dipu._core import vendor
from dipu.device import memory
from dipu.device._amp import (
    get_amp_supported_dtype, get_autocast_dtype, is_autocast_enabled, set_autocast_dtype, set_autocast_enabled)
from dipu.device._devices import (
    current_device, device, device_count, device_of, get_device_capability, get_device_name,
    get_device_properties, is_available, set_device, synchronize)
from dipu.device._initialization import init, is_initialized
from dipu.device._legacy_types import (
    BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor,
    ShortTensor)
from dipu.device._random import (
    _default_generators, get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all, seed, seed_all,
    set_rng_state, set_rng_state_all)
from dipu.device._streams import (
    Event, Stream, StreamContext, current_stream, default_stream, is_current_stream_capturing, set_stream, stream)
from dipu.device.memory import (
    empty_cache, get_per_process_memory_fraction, max_memory_allocated, max_memory_reserved, mem_get_info,
    memory_allocated, memory_reserved, memory_snapshot, memory_stats, memory_summary, reset_accumulated_memory_stats,
    reset_peak_memory_stats, set_per_process_memory_fraction)

# Private names others call on the device module: PyTorch's C++ calls torch.dipu._lazy_init before it
# creates a dipu tensor, the native core before its first vendor call, dipu/integrations/mock_cuda.py hands it to
# torch.cuda; dipu/__init__.py registers _after_fork_in_child with os.register_at_fork; the others
# are torch.cuda's, for code written against it.
from dipu.device._devices import _get_device_index  # noqa: F401
from dipu.device._initialization import _after_fork_in_child, _is_in_bad_fork, _lazy_call, _lazy_init  # noqa: F401

__all__ = [
    # devices
    "is_available", "device_count", "current_device", "set_device", "device", "device_of", "synchronize",
    "get_device_properties", "get_device_name", "get_device_capability",
    # initialization
    "init", "is_initialized",
    # legacy tensor types
    "DoubleTensor", "FloatTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
    "CharTensor", "ByteTensor", "BoolTensor",
    # streams and events
    "Stream", "Event", "StreamContext", "stream", "current_stream", "default_stream", "set_stream",
    "is_current_stream_capturing",
    # random numbers
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
    "get_rng_state_all", "set_rng_state_all",
    # memory
    "memory", "empty_cache", "get_per_process_memory_fraction", "max_memory_allocated", "max_memory_reserved",
    "mem_get_info", "memory_allocated", "memory_reserved", "memory_snapshot", "memory_stats", "memory_summary",
    "reset_accumulated_memory_stats", "reset_peak_memory_stats", "set_per_process_memory_fraction",
    # autocast
    "get_amp_supported_dtype", "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype",
    "set_autocast_dtype",
    # the active vendor runtime
    "vendor",
]

#: What inductor reads from the device module to compile for dipu (Note [How torch.compile finds dipu]).
_INDUCTOR_NAMES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def __getattr__(name):
    if name == "default_generators":  # a tuple as torch.cuda's, with one generator per device known now
        return _default_generators()
    if name in _INDUCTOR_NAMES:
        from dipu.compile import backend  # registers dipu with dynamo and inductor on import

        return getattr(backend, name)
    raise AttributeError(f"module 'torch.dipu' has no attribute {name!r}")
