"""The torch op library in C++: the default op library of every vendor whose memory torch can address.

The Python ``torch`` library (diopi_impl/torch) pairs most of its functions with one ATen overload; this library
is those functions generated in C++ (Note [The ATen library in C++] in scripts/autogen/dest/aten_library.py),
built on first use for the installed torch and cached (Note [C++ op library cache] in dipu/diopi/cpp_build.py),
and laid over the Python library, which keeps serving what the C++ side lacks and stays the reference
(``DIPU_DIOPI_IMPL=torch`` selects it alone). It is an ordinary C op library to the rest of dipu: trampolines
for the Python wrappers and the hooks, and the generated C++ wrappers for the fast path, which then runs without
Python from the dispatcher to the ATen kernel.

The module's ``library`` is made on first access (the entry point loads the module; registration reads
``library``), so importing the package builds nothing. When the build fails (no C++ compiler), a warning
says so and the Python library serves alone: slower, never wrong.
"""

from pathlib import Path

from dipu.diopi import cpp_build

NAME = "torch_cpp"
#: The functions the generator cannot make, written by hand (the hot path's softmax, reductions, layer norm; the
#: attention functions); support.h beside them holds what they and the generated file use.
HANDWRITTEN = [Path(__file__).parent / name for name in ("handwritten.cpp", "attention.cpp")]


def _python_library():
    from ..torch import library

    return library


def library_path() -> Path:
    """The built library (built now if this torch and the Python library's pairings have none yet)."""
    return cpp_build.twin_path(NAME, _python_library(), HANDWRITTEN)


def __getattr__(name: str):
    if name == "library":
        value = globals()["library"] = cpp_build.twin(NAME, _python_library(), HANDWRITTEN)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
