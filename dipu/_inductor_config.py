"""Inductor's per-device config for dipu (``register_backend_for_device(device_custom_config=...)``).

Inductor puts every registered device config into its FX graph cache key. dipu's codegen lives in
``dipu/compile.py`` and the vendor choice in ``DeviceRuntime.compiler_backend``, neither of which
inductor hashes itself; recording them here keeps a graph compiled by another dipu version or for
another vendor from being served from the cache.
"""

import sys

from torch.utils._config_module import install_config_module

#: SHA-256 of dipu/compile.py, set when it registers the backend.
codegen_source_hash: str = ""
#: The active vendor's name and ``compiler_backend``, e.g. ``"sim:cpp"``.
vendor_compiler: str = ""

install_config_module(sys.modules[__name__])
