"""Op libraries: which DIOPI functions a vendor implements, and finding the active one.

An op library is an :class:`OpLibrary` whose functions are registered with the
``register`` decorator. Each function is checked against the DIOPI proto when
it is registered, so a misspelled name or a parameter list that drifted from
the proto fails at import, not at the first call.

Note [Choosing the op library]
The vendor names its library (``DeviceRuntime.diopi_impl``); ``DIPU_DIOPI_IMPL``
overrides it, which lets a developer try another library, or a test install a
deliberately broken one, without touching the vendor. A name is looked up in
the ``dipu.diopi_impls`` entry-point group first, then imported as the module
``diopi_impl.<name>``, then as a module path of its own; the entry point or module
provides an ``OpLibrary`` (a module's ``library`` attribute).
"""

from __future__ import annotations

import importlib
import inspect
import os
from importlib import metadata
from typing import Callable

from diopi_impl.proto import FUNCTIONS

ENTRY_POINT_GROUP = "dipu.diopi_impls"


class OpLibrary:
    """A named set of DIOPI function implementations.

    ``base``: a library to take functions from when this one lacks them, so a
    vendor can override a few functions of another library.
    """

    def __init__(self, name: str, base: OpLibrary | None = None):
        self.name = name
        self.base = base
        self.functions: dict[str, Callable] = {}

    def register(self, fn: Callable) -> Callable:
        name = fn.__name__
        declared = FUNCTIONS.get(name)
        if declared is None:
            raise TypeError(f"op library '{self.name}': {name} is not declared in the DIOPI proto")
        params = tuple(inspect.signature(fn).parameters)
        if params != declared.param_names:
            raise TypeError(
                f"op library '{self.name}': {name}({', '.join(params)}) does not match "
                f"the DIOPI proto {name}({', '.join(declared.param_names)})"
            )
        if name in self.functions:
            raise TypeError(f"op library '{self.name}': {name} is registered twice")
        self.functions[name] = fn
        return fn

    def get(self, name: str) -> Callable | None:
        fn = self.functions.get(name)
        if fn is None and self.base is not None:
            return self.base.get(name)
        return fn

    def __repr__(self) -> str:
        return f"OpLibrary({self.name!r}, {len(self.functions)} functions)"


def _as_library(obj, where: str) -> OpLibrary:
    library = getattr(obj, "library", obj)
    if not isinstance(library, OpLibrary):
        raise TypeError(f"{where} does not provide an OpLibrary")
    return library


def load_library(name: str) -> OpLibrary:
    """The op library called ``name``; see Note [Choosing the op library]."""
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name == name:
            return _as_library(entry_point.load(), f"entry point '{name}' ({entry_point.value})")
    candidates = [name] if "." in name else [f"diopi_impl.{name}", name]
    for module_name in candidates:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is None or not module_name.startswith(error.name):
                raise  # the module exists but fails to import something itself
            continue
        return _as_library(module, f"module {module_name}")
    raise RuntimeError(f"no DIOPI op library named '{name}' (no entry point in '{ENTRY_POINT_GROUP}', "
                       f"no module {' or '.join(candidates)})")


def active_library_name(vendor_choice: str) -> str:
    return os.environ.get("DIPU_DIOPI_IMPL", "").strip() or vendor_choice
