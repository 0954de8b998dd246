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

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from dipu._native import INCLUDE, cache_root, ensure_built
from dipu.runtime import PluginRuntime

SOURCE = Path(__file__).with_name("runtime.c")


def _compile(target: Path) -> None:
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise RuntimeError(f"dipu vendor 'refc': building its runtime needs a C compiler, and '{compiler}' "
                           "was not found (set CC)")
    partial = target.with_suffix(".partial")
    command = [compiler, "-std=c11", "-O2", "-shared", "-fPIC", "-pthread", f"-I{INCLUDE}",
               str(SOURCE), "-o", str(partial)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"dipu vendor 'refc': compiling {SOURCE} failed:\n{' '.join(command)}\n{result.stderr}")
    os.replace(partial, target)


def library() -> Path:
    """The built plug-in, compiled once per source and header text."""
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update((INCLUDE / "dipu" / "custom_runtime.h").read_bytes())
    return ensure_built(cache_root() / f"refc-{digest.hexdigest()[:12]}" / "librefc.so",
                                _compile)


class RefCRuntime(PluginRuntime):
    library = staticmethod(library)
    native_device_type = "cpu"
    diopi_impl = "torch"
    compiler_backend = "cpp"  # device memory is host memory: inductor's C++ kernels run on it
