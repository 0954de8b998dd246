"""Building the C++ twin of a Python op library: its ``direct`` functions generated in C++ (Note [The ATen
library in C++] in scripts/autogen/dest/aten_library.py) with hand-written C++ beside them, compiled against
torch's headers and libraries, cached, and loaded as a C op library over the Python one
(diopi_impl/torch_cpp is the torch library's).

Note [C++ op library cache]
The library's text is a function of the installed torch's schemas, the Python library's pairings and the
generator, so the cache key hashes the torch build, the pairings (DIOPI function, ATen schema text, derived
arguments) and the files that turn them into C++ (the generator's but the other products' emitters and templates,
``_generation.PRODUCTS``; the proto; support.h and the DIOPI headers); finding a built library costs no generation
and no torchgen import. Where torch and dipu are installed is not in the key, and the library has no run path: it
loads into a process that has loaded torch's libraries already, so one torch build in two virtual environments, or
dipu as a wheel beside a
checkout, share one library. A miss generates the text,
keeps it beside the library (aten_library.cpp, for reading) and compiles it with the C++ compiler against
torch's headers and libraries, under the native core's lock and atomic rename (``_native.ensure_built``).
Measured on the 2-core development machine: see docs/op-library-guide.md, "The torch op library in C++".
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from collections.abc import Sequence

import torch

from dipu import _generation, _native
from dipu.diopi.c_build import INCLUDE


#: (DIOPI function, ATen schema, the arguments it derives and their rules: Note [Derived arguments] in library.py)
Pairing = tuple[str, str, tuple[tuple[str, str], ...]]


def pairings(library) -> list[Pairing]:
    """(DIOPI function, ATen schema, derived arguments) for each function of ``library`` that applies one overload
    directly (``OpLibrary.direct``: every table-made function, and the hand-written ones registered so)."""
    return sorted((name, str(library.aten[name]._schema).removeprefix("aten::"),
                   tuple(sorted(library.derived.get(name, {}).items()))) for name in library.direct)


def _key_files(sources: Sequence[Path]) -> list[Path]:
    directories = {source.parent for source in sources}
    return [*_generation.inputs("C++ op library"), *sources,
            *sorted(p for d in directories for p in d.glob("*.h")), *sorted((INCLUDE / "diopi").glob("*.h"))]


def _flags(sources: Sequence[Path]) -> tuple[list[str], list[str]]:
    """The compiler's and the linker's flags: torch's headers and libraries as every library dipu builds finds them
    (Note [Compiling dipu's libraries] in dipu/_native.py); part of the cache key, computed at every import."""
    cflags, ldflags = _native.torch_flags()
    return [*cflags, _native.GENERATED_OPTIMIZATION, "-fvisibility=hidden",
            *(f"-I{p}" for p in [INCLUDE, *sorted({s.parent for s in sources})])], ldflags


def library_file(name: str, pairs: list[Pairing], sources: Sequence[Path]) -> Path:
    """Where the library for these pairings, sources and this torch lives (Note [C++ op library cache])."""
    # Where torch and dipu are installed is not part of the key (the -I, -isystem and -L flags): torch's headers are
    # keyed by its build, dipu's by their text (_key_files).
    flags = [flag for flag in sum(_flags(sources), []) if not flag.startswith(("-I", "-isystem", "-L"))]
    digest = hashlib.sha256(" ".join([_native.compiler("C++17", "building a C++ op library"), *flags]).encode())
    for path in _key_files(sources):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update("\n".join(f"{n} {s} {d}" for n, s, d in pairs).encode())
    return _native.cache_root() / "-".join([
        name, f"torch{torch.__version__}", (torch.version.git_version or "nogit")[:10],
        f"py{sys.version_info.major}{sys.version_info.minor}", digest.hexdigest()[:12]]) / f"lib{name}.so"


def generate(pairs: list[Pairing], source: str) -> str:
    """The text of the generated functions for ``pairs``."""
    return _generation.aten_library(pairs, source)


def _compile(target: Path, name: str, pairs: list[Pairing], sources: Sequence[Path]) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        generated = Path(work) / "aten_library.cpp"
        generated.write_text(generate(pairs, f"the direct functions of op library {name}'s base"))
        built = Path(work) / target.name
        # the generated and the hand-written files as one translation unit: torch's headers, which cost each file
        # about 6 s, are read once (Note [Builds side by side] in dipu/_native.py)
        unit = Path(work) / f"{name}.cpp"
        unit.write_text("".join(f'#include "{path}"\n' for path in [generated, *sources]))
        _native.compile_library(built, [(unit, [])], *_flags(sources), f"building the C++ op library {name}")
        shutil.copy(generated, target.parent / generated.name)
        os.replace(built, target)


def twin_path(name: str, python_library, sources: Sequence[Path] = ()) -> Path:
    """The built C++ twin of ``python_library`` (built now if this torch and its pairings have none yet);
    ``sources``: hand-written C++ files compiled with the generated one (their directory's headers too)."""
    pairs = pairings(python_library)
    target = library_file(name, pairs, sources)
    return _native.ensure_built(target, lambda path: _compile(path, name, pairs, sources),
                                f"the C++ op library {name}")


def twin(name: str, python_library, sources: Sequence[Path] = ()):
    """The op library ``name``: the C++ twin of ``python_library`` (:func:`twin_path`) laid over it, its
    aliases on the vendor's native device. Where it cannot be built, a warning says so and
    ``python_library`` serves alone: slower, never wrong."""
    from dipu._core import _C, vendor
    from dipu.diopi import OpLibrary, c_library

    from dipu.kernels import cpp_wrappers

    cpp_wrappers.build_in_background()  # the wrappers this library will be installed with (Note [Builds side by side])
    try:
        path = twin_path(name, python_library, sources)
        functions = c_library.load(str(path), f"the C++ op library {path}", dipu_header=True)
    except Exception as error:  # no compiler, a failed build, a library this torch cannot load
        warnings.warn(f"dipu: the C++ op library {name} could not be built or loaded, so op library "
                      f"'{python_library.name}' serves every op (DIPU_DIOPI_IMPL={python_library.name} skips "
                      f"trying): {error}", stacklevel=3)
        return python_library
    device = (vendor().native_device_type or "cpu").encode()
    ctypes.CFUNCTYPE(None, ctypes.c_char_p)(_C.c_library_symbol("dipuTorchCppSetAliasDevice"))(device)
    library = OpLibrary(name, base=python_library, native_alias=True)
    library.functions.update(functions)
    return library
