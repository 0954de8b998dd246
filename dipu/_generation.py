"""The runtime's one door to the generator (``dipugen``, scripts/autogen in a checkout).

Note [Generation at run time]
dipu generates three things for the installed torch, each cached and each keyed by a hash of what it is
generated from: the Python kernels for a torch other than the reference one (Note [Generated code per
torch version] in dipu/kernels/generated.py), the C++ wrappers of a C op library (Note [C++ wrapper
cache] in dipu/kernels/cpp_wrappers.py) and the C++ op library's direct functions (Note [C++ op library
cache] in dipu/diopi/cpp_build.py). Finding a cached build must cost no generation, so this module names
the generator's files without importing it (``generator_file``, ``inputs``), and each generating
function imports it only when called. Nothing else in dipu imports ``dipugen``; the generator in turn
reads the proto from the runtime (Note [The generator reads the runtime's proto] in
scripts/autogen/proto.py). The op spec and the templates ship inside the generator package (Note [The op
spec is package data] in scripts/autogen/spec.py), so an installed wheel generates as a checkout does.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

GENERATOR = "dipugen"
#: The runtime's leaf modules the generator reads (Note [The generator reads the runtime's proto]): the proto,
#: which what generates C reads too, and the shape-rule table (Note [Shape rules are a table]).
PROTO_FILES = (Path(__file__).parent / "diopi" / "proto.py", Path(__file__).parent / "diopi" / "c_form.py",
               Path(__file__).parent / "ops" / "shape_rules.py")


def generator_file(*parts: str) -> Path:
    """A file of the generator package (found, not imported)."""
    spec = importlib.util.find_spec(GENERATOR)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"dipu: the generator package {GENERATOR} is not installed")
    return Path(spec.submodule_search_locations[0]).joinpath(*parts)


#: What generates each product and nothing else: its emitter and templates, which the other products' cache keys
#: leave out (a change to the C++ op library's emitter rebuilds only that library). The rest of the generator is in
#: every key.
PRODUCTS = {
    "python kernels": ("dest/python_wrappers.py", "dest/op_table.py", "templates/wrappers.py.j2",
                       "templates/__init__.py.j2"),
    "C++ wrappers": ("dest/cpp_wrappers.py", "templates/cpp_wrappers.cpp.j2"),
    "C++ op library": ("dest/aten_library.py", "templates/aten_library.cpp.j2"),
}


def inputs(product: str) -> list[Path]:
    """Everything ``product`` (a key of PRODUCTS) is generated from: the generator's modules and templates but the
    other products' own, the op spec beside them, the proto and the shape-rule table."""
    root = generator_file()
    others = {root / name for other, names in PRODUCTS.items() if other != product for name in names}
    files = [*root.rglob("*.py"), *root.glob("templates/*.j2"), *root.glob("*.yaml"), *PROTO_FILES]
    return sorted(path for path in files if path not in others)


def python_kernels() -> dict[str, str]:
    """File name -> text of the generated kernel package (dipu/_generated/'s files) for the installed torch;
    the spec's entries that do not fit it are left out, and listed in the package's ``UNMATCHED``."""
    from dipugen import emit, spec

    entries, unmatched = spec.load_lenient(spec.SPEC)
    return emit.render(entries, spec.SPEC.name, unmatched=unmatched)


def cpp_wrappers(functions: frozenset[str] | None, parts: int = 1) -> list[str]:
    """The C++ wrappers of the kernels whose DIOPI function is in ``functions`` (None: all), in ``parts`` files
    (Note [The wrappers in parts] in scripts/autogen/dest/cpp_wrappers.py)."""
    from dipugen import kernels, spec
    from dipugen.dest import cpp_wrappers as emitter

    entries, _ = spec.load_lenient(spec.SPEC)
    return emitter.render_parts(kernels.expand_all(entries, spec.SPEC.name), spec.SPEC.name, functions, parts)


def unsupported_cpp_wrappers() -> dict[str, str]:
    """Op -> why the generator emits no C++ wrapper for it, for the spec's kernels that fit the installed torch."""
    from dipugen import kernels, spec
    from dipugen.dest import cpp_wrappers as emitter

    entries, _ = spec.load_lenient(spec.SPEC)
    return emitter.explain(kernels.expand_all(entries, spec.SPEC.name))


def aten_library(pairs: list[tuple[str, str, tuple[tuple[str, str], ...]]], source: str) -> str:
    """The text of the C++ functions applying each (DIOPI function, ATen schema, derived arguments) of ``pairs``
    directly."""
    from dipugen.dest import aten_library as emitter

    from dipu.diopi.proto import FUNCTIONS

    import torch

    # torch's own headers, which the library is compiled against (Note [ATen's CPU kernels without the dispatcher])
    cpu_kernels = emitter.CpuKernels(Path(torch.__file__).parent / "include")
    return emitter.render([(FUNCTIONS[n], s, dict(d)) for n, s, d in pairs], source, cpu_kernels)
