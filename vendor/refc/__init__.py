"""The reference vendor in C: a runtime plug-in built from runtime.c (Note [C runtime plug-ins]).

Its device memory is host memory and its streams run asynchronously on worker threads, so it
serves as a second, independent runtime beside ``sim``: everything dipu does with streams and
events runs here against a runtime that really overlaps work. It is packaged the way a vendor
ships a C runtime: this class names the library (built here with the machine's C compiler on
first use, cached like the native core) and declares what the C table cannot say: its memory is
host-addressable, so dipu's ops compute on it through CPU aliases and the ``torch`` op library.

Environment (read by runtime.c): ``DIPU_REFC_DEVICE_COUNT`` (default 2), ``DIPU_REFC_MEMORY_MB``
per device (default 8192), ``DIPU_REFC_TASK_DELAY_US`` (each stream task waits this long first;
widens races in tests).
"""

from __future__ import annotations

from pathlib import Path

from dipu.diopi.c_build import build
from dipu.runtime import PluginRuntime


def library() -> Path:
    """The built plug-in, compiled once per source and header text (Note [C op library cache])."""
    return build("refc", Path(__file__).parent)


class RefCRuntime(PluginRuntime):
    library = staticmethod(library)
    native_device_type = "cpu"
    diopi_impl = "torch_cpp"
    compiler_backend = "cpp"  # device memory is host memory: inductor's C++ kernels run on it
