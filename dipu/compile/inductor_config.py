"""Inductor's per-device config for dipu (``register_backend_for_device(device_custom_config=...)``).

Inductor puts every registered device config into its FX graph cache key. dipu's codegen lives in
``dipu/compile/backend.py``, the layouts inductor plans for convolutions come from ``dipu/ops/convolution.py``
(Note [Convolution layouts under fake tensors]) and the vendor choice from
``DeviceRuntime.compiler_backend``; inductor hashes none of them itself. Recording them here keeps a
graph compiled by another dipu version or for another vendor from being served from the cache.
"""

import sys

from torch.utils._config_module import install_config_module

#: SHA-256 of dipu/compile/backend.py and dipu/ops/convolution.py, set when backend.py registers the backend.
codegen_source_hash: str = ""
#: The active vendor's name and ``compiler_backend``, e.g. ``"sim:cpp"``.
vendor_compiler: str = ""

install_config_module(sys.modules[__name__])
