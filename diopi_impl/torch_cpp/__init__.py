"""The torch op library in C++: the default op library of every vendor whose memory torch can address.

The Python ``torch`` library (diopi_impl/torch) pairs most of its functions with one ATen overload; this
library is those functions generated in C++ (Note [The ATen library in C++] in
scripts/autogen/dest/aten_library.py), built on first use for the installed torch and cached (Note [C++
op library cache]), and laid over the Python library, which keeps serving what the C++ side lacks and
stays the reference (``DIPU_DIOPI_IMPL=torch`` selects it alone). It is an ordinary C op library to the
rest of dipu: trampolines for the Python wrappers and the hooks, and the generated C++ wrappers for the
fast path, which then runs without Python from the dispatcher to the ATen kernel.

Note [C++ op library cache]
The library's text is a function of the installed torch's schemas, the Python library's pairings and the
generator, so the cache key hashes the torch build, the pairings (DIOPI function and ATen schema text) and
the files that turn them into C++ (the emitter, the proto, the template, support.h and the DIOPI
headers); finding a built library costs no generation and no torchgen import. A miss generates the text,
keeps it beside the library (aten_library.cpp, for reading) and compiles it with the C++ compiler against
torch's headers and libraries, under the native core's lock and atomic rename (``_native.ensure_built``).
Measured on the 2-core development machine: see README "The C++ op library".

The module's ``library`` is made on first access (the entry point loads the module; registration reads
``library``), so importing the package builds nothing. When the build fails (no C++ compiler), a warning
says so and the Python library serves alone: slower, never wrong.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch

from dipu import _native

NAME = "torch_cpp"
HERE = Path(__file__).parent
#: The functions the generator cannot make, written by hand (the hot path's softmax, reductions, layer norm).
HANDWRITTEN = HERE / "handwritten.cpp"


def _include_dir() -> Path:
    """dipu's public headers (dipu/include), wherever the package is installed."""
    import dipu

    return Path(dipu.__file__).parent / "include"


def pairings() -> list[tuple[str, str]]:
    """(DIOPI function, ATen schema) for each function of the Python torch library that applies one overload
    directly (``OpLibrary.direct``: every table-made function, and the hand-written ones registered so)."""
    from dipu.diopi_impl.torch import library

    return sorted((name, str(library.aten[name]._schema).removeprefix("aten::")) for name in library.direct)


def _generator_files() -> list[Path]:
    generator = Path(importlib.util.find_spec("dipugen").origin).parent
    return [generator / "proto.py", generator / "dest" / "aten_library.py", generator / "dest" / "c_header.py",
            generator / "templates" / "aten_library.cpp.j2", HERE / "support.h", HANDWRITTEN,
            *sorted((_include_dir() / "diopi").glob("*.h"))]


def _flags() -> list[str]:
    from torch.utils import cpp_extension

    includes = [*cpp_extension.include_paths(), str(_include_dir()), str(HERE)]
    libraries = cpp_extension.library_paths()
    return ["-shared", "-fPIC", "-O2", "-std=c++20", "-fvisibility=hidden",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            *(f"-I{p}" for p in includes), *(f"-L{p}" for p in libraries),
            *(f"-Wl,-rpath,{p}" for p in libraries), "-lc10", "-ltorch_cpu"]


def compiler() -> str:
    name = os.environ.get("CXX", "c++")
    if shutil.which(name) is None:
        raise RuntimeError(f"dipu: building the C++ op library needs a C++ compiler, and '{name}' was not found "
                           "(install g++ or clang++, or point CXX at one)")
    return name


def library_file(pairs: list[tuple[str, str]]) -> Path:
    """Where the library for these pairings and this torch lives (Note [C++ op library cache])."""
    digest = hashlib.sha256(" ".join([compiler(), *_flags()]).encode())
    for path in _generator_files():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update("\n".join(f"{n} {s}" for n, s in pairs).encode())
    return _native.cache_root() / "-".join([
        NAME, f"torch{torch.__version__}", (torch.version.git_version or "nogit")[:10],
        f"py{sys.version_info.major}{sys.version_info.minor}", digest.hexdigest()[:12]]) / f"lib{NAME}.so"


def generate(pairs: list[tuple[str, str]]) -> str:
    """The text of aten_library.cpp for ``pairs``."""
    from dipugen.dest import aten_library
    from dipugen.proto import FUNCTIONS

    return aten_library.render([(FUNCTIONS[n], s) for n, s in pairs], "diopi_impl/torch (OpLibrary.aten)")


def _compile(target: Path, pairs: list[tuple[str, str]]) -> None:
    print(f"dipu: building the C++ op library for torch {torch.__version__} (once per torch)...",
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        source = Path(work) / "aten_library.cpp"
        source.write_text(generate(pairs))
        built = Path(work) / target.name
        result = subprocess.run([compiler(), str(source), str(HANDWRITTEN), *_flags(), "-o", str(built)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"dipu: building the C++ op library failed:\n{result.stderr[-4000:]}")
        shutil.copy(source, target.parent / source.name)
        os.replace(built, target)


def library_path() -> Path:
    """The built library (built now if this torch and these pairings have none yet)."""
    pairs = pairings()
    target = library_file(pairs)
    return _native.ensure_built(target, lambda path: _compile(path, pairs))


def _load():
    from dipu._core import _C, vendor
    from dipu.diopi import OpLibrary, c_library
    from dipu.diopi_impl.torch import library as python_library

    try:
        path = library_path()
    except Exception as error:  # the Python library serves alone: slower, never wrong
        warnings.warn(f"dipu: the C++ op library could not be built, so the Python torch library serves every "
                      f"op (DIPU_DIOPI_IMPL=torch skips trying): {error}", stacklevel=3)
        return python_library
    functions = c_library.load(str(path), f"the C++ op library {path}")
    device = (vendor().native_device_type or "cpu").encode()
    ctypes.CFUNCTYPE(None, ctypes.c_char_p)(_C.c_library_symbol("dipuTorchCppSetAliasDevice"))(device)
    library = OpLibrary(NAME, base=python_library, native_alias=True)
    library.functions.update(functions)
    return library


def __getattr__(name: str):
    if name == "library":
        value = globals()["library"] = _load()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
