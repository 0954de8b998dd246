"""The C++ wrappers of a C op library: generated, compiled and cached like the native core, installed over the
Python wrappers (Note [Generated C++ wrappers] in scripts/autogen/dest/cpp_wrappers.py).

Note [C++ wrapper cache]
Only a process with a C op library (the default torch_cpp included) builds anything here. The extension holds a
wrapper for every kernel the C++ side supports, whichever library a process loads: a kernel is installed where the
library exports its DIOPI function, so one build per torch serves every C library (the torch library in C++, ref_c,
a vendor's, a test's) instead of one build per set of exported functions. Its text depends on the installed torch's
schemas, the spec and generator (the generator's files but the other products' emitters and templates:
``_generation.PRODUCTS``) and the C++ support files (dipu/kernels/cpp, diopi_rt.h, python_wrapper_call.h,
diopirt.h); the cache key hashes exactly those, so finding a built extension costs no generation (loading the spec
takes seconds); a miss generates the text in parts (Note [The wrappers in parts] in
scripts/autogen/dest/cpp_wrappers.py), keeps them beside the library (cpp_wrappers_N.cpp, for reading) and compiles
them as dipu compiles its libraries (Note [Compiling dipu's libraries] in dipu/_native.py), under the native core's
lock and atomic rename (dipu/_native.py's ``ensure_built``). Build time, measured on the 2-core development machine:
Note [Builds side by side] there. Torch's headers cost each part about 4 s of it (Note [Torch's headers, op by op]
there), and no file of the extension reads Python's (Note [The C++ wrappers' way to Python] in
dipu/csrc/python_wrapper_call.h).

DIPU_CPP_WRAPPERS=0 keeps every op on the Python wrappers (for comparing the two paths, and as an escape
hatch); DIPU_CHECK_TENSOR_DEVICE, which the C++ wrappers do not implement, does the same.
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
from typing import TYPE_CHECKING

import torch

from dipu import _generation, _native
from dipu.kernels import switches

if TYPE_CHECKING:
    import concurrent.futures

NAME = "dipu_cwrap"
SUPPORT = Path(__file__).parent / "cpp"
_INCLUDES = (SUPPORT, Path(__file__).parent.parent / "csrc", Path(__file__).parent.parent / "include")
_ENABLE_VAR = "DIPU_CPP_WRAPPERS"

#: The loaded extension (None until a C library asks for it).
_module: Extension | None = None


def enabled() -> bool:
    """Whether C++ wrappers may be installed (Note [C++ wrapper cache], last paragraph)."""
    text = os.environ.get(_ENABLE_VAR, "1").strip().lower()
    return text not in ("0", "false", "off", "no") and not switches.CHECK_DEVICE


def _inputs() -> list[tuple[str, bytes]]:
    files = [*_generation.inputs("C++ wrappers"), *sorted(SUPPORT.iterdir()),
             *(_INCLUDES[1] / name for name in ("diopi_rt.h", "python_wrapper_call.h")),
             *sorted((_INCLUDES[2] / "diopi").glob("*.h"))]
    return [(path.name, path.read_bytes()) for path in sorted(files) if path.is_file()]


def cache_dir() -> Path:
    """The directory of the extension for this torch and these inputs (Note [C++ wrapper cache])."""
    digest = hashlib.sha256()
    for name, data in _inputs():
        digest.update(name.encode())
        digest.update(data)
    digest.update(" ".join([*_native.cxx_runtime_flags(), _native.GENERATED_OPTIMIZATION]).encode())
    return _native.cache_root() / "-".join([
        "cwrap", f"torch{torch.__version__}", (torch.version.git_version or "nogit")[:10],
        f"py{sys.version_info.major}{sys.version_info.minor}", digest.hexdigest()[:12]])


def generate(functions: frozenset[str] | None, parts: int = 1) -> list[str]:
    """The text of the C++ wrappers of the kernels whose DIOPI function is in ``functions`` (None: all), in
    ``parts`` files."""
    return _generation.cpp_wrappers(functions, parts)


def _build(target: Path, texts: list[str] | None = None) -> None:
    """Build the extension at ``target`` from ``texts`` (the generated parts; generated now where not given)."""
    work = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        sources = []
        texts = generate(None, _native.build_jobs()) if texts is None else texts
        for number, text in enumerate(texts, 1):  # Note [The wrappers in parts]
            sources.append(work / f"cpp_wrappers_{number}.cpp")
            sources[-1].write_text(text)
        # the hand-written files as one more part: one reading of torch's headers for both
        support = work / "cpp_wrappers_support.cpp"
        support.write_text("".join(f'#include "{SUPPORT / name}"\n' for name in ("wrapper_support.cpp",
                                                                                   "impl_kernels.cpp")))
        cflags, ldflags = _native.torch_flags()  # a plain library: Note [The C++ wrappers' way to Python]
        units = [(source, [_native.GENERATED_OPTIMIZATION]) for source in [*sources, support]]
        _native.compile_library(work / f"{NAME}.so", units,
                                [*cflags, "-fvisibility=hidden", *(f"-I{p}" for p in _INCLUDES)], ldflags,
                                "building the C++ wrappers")
        for old in target.parent.glob("cpp_wrappers*.cpp"):
            old.unlink()
        for source in sources:
            shutil.copy(source, target.parent / source.name)
        os.replace(work / f"{NAME}.so", target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


#: What build_in_background found: the extension's path and the build it started (None where it was cached).
_planned: tuple[Path, concurrent.futures.Future | None] | None = None


def _target() -> Path:
    return cache_dir() / f"{NAME}.so"


def build() -> Path:
    """The extension, built first if it is not cached (or the build that build_in_background started, waited
    for)."""
    global _planned
    if _planned is not None:
        (target, started), _planned = _planned, None
        if started is not None:
            return started.result()
        return _native.ensure_built(target, _build, "the C++ wrappers")
    return _native.ensure_built(_target(), _build, "the C++ wrappers")


def build_in_background() -> None:
    """Where the extension will be loaded (a C op library is about to be), start compiling it in a thread if it is
    not cached: Note [Builds side by side] in dipu/_native.py."""
    global _planned
    if _planned is not None or _module is not None or not enabled():
        return
    target, started = _target(), None
    if not target.exists():
        import concurrent.futures

        texts = generate(None, _native.build_jobs())
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dipu-build")
        started = pool.submit(_native.ensure_built, target, lambda path: _build(path, texts), "the C++ wrappers")
        pool.shutdown(wait=False)
    _planned = (target, started)


class Extension:
    """The built library through its C interface (wrapper_support.cpp; Note [The C++ wrappers' way to Python] in
    dipu/csrc/python_wrapper_call.h), connected to the native core when loaded."""

    def __init__(self, path: Path):
        from dipu._core import _C

        self._lib = lib = ctypes.PyDLL(str(path))  # PyDLL: the GIL stays held, as around any registration
        i64, c_int, ptr = ctypes.c_int64, ctypes.c_int, ctypes.c_size_t
        for name, restype, argtypes in [
                ("dipu_cwrap_count", i64, []), ("dipu_cwrap_op", ctypes.c_char_p, [i64, c_int]),
                ("dipu_cwrap_install", c_int, [i64, ctypes.POINTER(i64), ctypes.POINTER(ptr), ctypes.POINTER(ptr),
                                               ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_size_t]),
                ("dipu_cwrap_uninstall", None, []), ("dipu_cwrap_fast_calls", i64, [i64]),
                ("dipu_cwrap_reset_fast_calls", None, []), ("dipu_cwrap_hooks_on", c_int, []),
                ("dipu_cwrap_connect", None, [ptr, ptr, c_int]), ("dipu_cwrap_sync", c_int, []),
                ("dipu_cwrap_set_dump", None, [c_int])]:
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes
        self._ops = [lib.dipu_cwrap_op(i, 0).decode() for i in range(lib.dipu_cwrap_count())]
        self._index = {op: i for i, op in reversed(list(enumerate(self._ops)))}
        self._installed: list = []  # the Python wrappers the library holds by address while installed
        lib.dipu_cwrap_connect(_C.timeline_flag_address(), _C.python_wrapper_call_address(), switches.SYNC)
        switches.watch_dump(self.set_dump)

    def ops(self) -> list[tuple[str, str, str, str]]:
        """(op, DIOPI function, scalar DIOPI function or '', the op whose meta kernel the dispatcher picks for its
        shapes or '') of every kernel the extension has."""
        lib = self._lib
        return [(op, *(lib.dipu_cwrap_op(i, field).decode() for field in (1, 2, 3)))
                for i, op in enumerate(self._ops)]

    def install(self, chosen: list[tuple[str, int, int, object]]) -> list[str]:
        """install([(op, C function address, scalar C function address or 0, Python wrapper), ...]): register those
        C++ wrappers on PrivateUse1, over what is registered (replacing an earlier install); returns the ops."""
        missing = [op for op, *_ in chosen if op not in self._index]
        if missing:
            raise RuntimeError(f"dipu: the C++ wrappers have no kernel for {', '.join(missing)}")
        count = len(chosen)
        error = ctypes.create_string_buffer(4096)
        failed = self._lib.dipu_cwrap_install(
            count, (ctypes.c_int64 * count)(*(self._index[op] for op, *_ in chosen)),
            (ctypes.c_size_t * count)(*(address for _, address, _, _ in chosen)),
            (ctypes.c_size_t * count)(*(scalar for _, _, scalar, _ in chosen)),
            (ctypes.c_void_p * count)(*(id(kernel) for *_, kernel in chosen)), error, len(error))
        self._installed = [] if failed else [kernel for *_, kernel in chosen]
        if failed:
            raise RuntimeError(error.value.decode(errors="replace"))
        return [op for op, *_ in chosen]

    def uninstall(self) -> None:
        """Unregister the installed C++ wrappers."""
        self._lib.dipu_cwrap_uninstall()
        self._installed = []

    def fast_calls(self) -> dict[str, int]:
        """op -> calls the C++ path served (the Python path's calls are not counted)."""
        counts = ((op, self._lib.dipu_cwrap_fast_calls(i)) for i, op in enumerate(self._ops))
        return {op: n for op, n in counts if n}

    def reset_fast_calls(self) -> None:
        self._lib.dipu_cwrap_reset_fast_calls()

    def hooks_on(self) -> bool:
        """Whether a run-time hook sends calls to the Python path now."""
        return bool(self._lib.dipu_cwrap_hooks_on())

    def sync(self) -> bool:
        return bool(self._lib.dipu_cwrap_sync())

    def set_dump(self, on: bool) -> None:
        self._lib.dipu_cwrap_set_dump(on)


def load() -> Extension:
    """The extension (:func:`build`), loaded once per process."""
    global _module
    if _module is None:
        _module = Extension(build())
    return _module


def module() -> Extension | None:
    """The loaded extension, or None (no C library, or its wrappers not installed)."""
    return _module


def install(kernels: dict, addresses: dict[str, int]) -> list[str]:
    """Install the C++ wrapper over the Python one for each registered op (``kernels``: op name -> (Op, Python
    wrapper)) whose DIOPI function is a C function (``addresses``: DIOPI name -> its address); returns those
    ops. Nothing is built or loaded without a C function."""
    if not addresses or not enabled():
        return []
    try:
        extension = load()
    except Exception as error:  # the Python wrappers serve the library all the same: slower, never wrong
        warnings.warn(f"dipu: the C++ wrappers of the C op library could not be built or loaded, so its functions "
                      f"run through the Python wrappers ({_ENABLE_VAR}=0 skips trying): {error}", stacklevel=2)
        return []
    chosen = [(op, addresses[diopi], addresses.get(scalar, 0), kernels[op][1])
              for op, diopi, scalar, meta_op in extension.ops()
              if op in kernels and diopi in addresses  # an op not in kernels: forced to the fallback
              and not (meta_op and _python_meta(meta_op))]
    with warnings.catch_warnings():  # "Overriding a previously registered kernel": the point of installing
        warnings.simplefilter("ignore", UserWarning)
        return extension.install(chosen)


def _python_meta(op: str) -> bool:
    """Whether ``op``'s meta kernel is written in Python (torch/_meta_registrations.py registers most of them
    over the C++ ones): calling it from C++ would cost more than the Python wrapper, so such an op keeps its
    Python wrapper (Note [Meta shapes in C++] in scripts/autogen/dest/cpp_wrappers.py). The dispatcher says
    where each kernel was registered; a Python registration names a .py file."""
    table = torch._C._dispatch_dump_table("aten::" + op)
    meta = [line for line in table.splitlines() if line.startswith("Meta:")]
    return not meta or ".py:" in meta[0]


def left_to_python(kernels: dict, addresses: dict[str, int], installed: list[str]) -> dict[str, str]:
    """Op -> why its registered Python wrapper is not replaced by a C++ one, for each of ``kernels`` (op name ->
    (Op, Python wrapper)) not in ``installed``; ``addresses``: the library's C functions (:func:`install`'s).
    ``python -m dipu --python-wrappers`` prints it. The generator's reasons cost loading the spec (seconds)."""
    left = sorted(kernels.keys() - set(installed))
    if not left:
        return {}
    if not enabled():
        return dict.fromkeys(left, f"C++ wrappers are switched off by {_ENABLE_VAR}=0 or DIPU_CHECK_TENSOR_DEVICE")
    if not addresses:
        return dict.fromkeys(left, "the op library has no C functions for C++ wrappers to call")
    served = {op: (diopi, meta_op) for op, diopi, _, meta_op in load().ops()}
    unsupported = _generation.unsupported_cpp_wrappers() if set(left) - served.keys() else {}
    reasons = {}
    for op in left:
        if op not in served:
            reasons[op] = f"no C++ wrapper: {unsupported.get(op, 'its spec entry does not fit this torch')}"
        elif served[op][0] not in addresses:
            reasons[op] = f"the op library's function is in Python: {served[op][0]}"
        elif served[op][1] and _python_meta(served[op][1]):
            reasons[op] = "its meta kernel is in Python"  # Note [Meta shapes in C++]
        else:
            reasons[op] = "not installed"  # nothing above: a bug in this list, which the tests look for
    return reasons


def uninstall() -> None:
    if _module is not None:
        _module.uninstall()


def fast_calls() -> dict[str, int]:
    """Op -> calls the C++ wrappers served without Python (empty without a C library)."""
    return dict(_module.fast_calls()) if _module is not None else {}


def reset_fast_calls() -> None:
    if _module is not None:
        _module.reset_fast_calls()
