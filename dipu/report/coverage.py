"""What the active op library implements of the DIOPI proto, and which ops need each function.

Read in a live dipu process (the kernels registered), by the run report and by autocompare's summary.
"""

from __future__ import annotations

import sys
import warnings

from dipu.diopi.library import OpLibrary
from dipu.diopi.proto import FUNCTIONS, family_of
from dipu.kernels.registry import registration
from dipu.kernels import generated as generated_kernels

def active_library() -> OpLibrary | None:
    """The op library the kernels were registered with (None: a vendor without one, every op on the CPU
    fallback)."""
    return registration.library


def layers(library: OpLibrary | None) -> list[OpLibrary]:
    """``library`` and the libraries it lays over, top first."""
    found = []
    while library is not None:
        found.append(library)
        library = library.base
    return found


def implementing_layer(library: OpLibrary | None, name: str) -> str | None:
    """The name of the layer of ``library`` that implements DIOPI function ``name`` (None: none does)."""
    for layer in layers(library):
        if name in layer.functions:
            return layer.name
    return None


def generated_ops() -> tuple:
    """The generated ops (dipu/_generated's OPS), loaded here when registration did not (a vendor without an
    op library), so the report still says which DIOPI function each op needs."""
    generated = sys.modules.get("dipu._generated")
    if generated is None:
        with warnings.catch_warnings():  # import warned about ops that do not fit this torch, if it loaded them
            warnings.simplefilter("ignore")
            generated = generated_kernels.load()
    return tuple(generated.OPS)


def ops_by_function() -> dict[str, list[str]]:
    """DIOPI function -> the aten ops whose generated kernel calls it."""
    needed: dict[str, list[str]] = {}
    for op in generated_ops():
        for function in op.functions:
            needed.setdefault(function, []).append(op.name)
    return needed


def proto_coverage(library: OpLibrary | None) -> dict:
    """Per DIOPI function of the proto: family, implemented (by which layer), the ops that need it."""
    needed = ops_by_function()
    functions = {}
    for name in FUNCTIONS:
        layer = implementing_layer(library, name)
        functions[name] = {"family": family_of(name), "implemented": layer is not None, "layer": layer,
                           "ops": sorted(needed.get(name, ()))}
    return {"library": library.name if library is not None else None,
            "layers": [layer.name for layer in layers(library)],
            "functions": functions}
