"""The native core and the active vendor: the leaf every other dipu module builds on.

Note [Start-up order]
Importing this module selects the vendor runtime (``DIPU_VENDOR``), names the
PrivateUse1 backend ``dipu``, builds or loads the native core (Note [Native
core cache]) and hands the vendor to it. Nothing here starts the vendor
runtime: the first device use does (Note [Lazy initialization]). Every other
module imports what it needs from here (``from dipu._core import _C, vendor``),
never from the package root; the root, dipu/__init__.py, then registers the
device module, the kernels and the integrations, in the order it states once.
"""

from __future__ import annotations

import sys

import torch

from dipu import _alloc_conf, _native, runtime

__all__ = ["_C", "vendor", "caching_allocator", "allocator_settings", "virtual_memory"]


#: The allocator settings asked for (Note [Allocator settings] in dipu/_alloc_conf.py); read before anything
#: loads, so that a bad value fails first.
_asked = _alloc_conf.from_environment()
#: Whether device memory goes through the caching allocator (``backend`` of ``PYTORCH_ALLOC_CONF``).
caching_allocator = _asked.backend == "caching"

torch.utils.rename_privateuse1_backend("dipu")
#: The native core (dipu/csrc), also importable as ``dipu._C``.
_C = _native.load()
sys.modules["dipu._C"] = _C
_vendor = runtime.load_vendor(load_plugin=_C.load_runtime_plugin)
# A C plug-in's table serves the core directly (Note [Two kinds of vendor runtime]).
_plugin = runtime.plugin_of(_vendor)
#: Whether the vendor has the virtual-memory methods expandable segments need.
virtual_memory = runtime.has_virtual_memory(_vendor)
_C.register_vendor(
    _vendor,
    _vendor.name,
    _vendor.device_count(),
    _vendor.native_device_type,
    {"host_memory_allocate", "host_memory_deallocate"} <= set(_plugin.functions()) if _plugin
    else runtime.overrides(_vendor, "host_malloc"),
    runtime.overrides(_vendor, "set_current_stream"),
    caching_allocator,
    _vendor.native_generator,
    _plugin,
    _vendor.native_cuda_library,
    virtual_memory,
)
#: The allocator settings in effect: those asked for, as far as the vendor can do them.
allocator_settings = _alloc_conf.effective(_asked, _vendor.name, virtual_memory)
_alloc_conf.apply(_C, allocator_settings)


def vendor() -> runtime.DeviceRuntime:
    """The active vendor runtime."""
    return _vendor
