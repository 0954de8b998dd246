"""The DIOPI proto as the generator reads it: the runtime's (dipu/diopi/proto.py, its C form in
dipu/diopi/c_form.py), and what only the generator asks of it (``argument_kinds``, over torchgen's model).

Note [The generator reads the runtime's proto]
The proto is the contract between dipu's core and every op library, so the runtime owns it: two leaf
modules of dipu that import nothing but each other. The generator checks the spec against them and emits
C from them, but importing any ``dipu.*`` module the usual way runs dipu/__init__.py, which registers the
device and loads the very kernels being generated (Note [The generator does not import dipu] in
__main__.py). So this module, the generator's only door to dipu, loads the two leaves from their files
under their own names, without their package (``leaf``; the shape-rule table, dipu/ops/shape_rules.py, is
read so too: Note [Shape rules are a table]). Whichever side loads a leaf first, the process has one
module object for it (``sys.modules``), so the proto's ``Kind`` members are the same objects to the
runtime and to the generator.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING


def _dipu_dir() -> Path:
    spec = importlib.util.find_spec("dipu")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("dipugen: the dipu package is not importable")
    return Path(spec.submodule_search_locations[0])


#: The dipu package's directory, found without importing it.
DIPU_DIR = _dipu_dir()


def leaf(name: str):
    """The runtime's leaf module ``name`` (``dipu.diopi.proto``), loaded from its file if not yet loaded."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, DIPU_DIR.joinpath(*name.split(".")[1:]).with_suffix(".py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"dipugen: cannot load {name} from {DIPU_DIR}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


_proto = leaf("dipu.diopi.proto")
_c_form = leaf("dipu.diopi.c_form")  # after the proto, which it imports

if TYPE_CHECKING:  # the same names, for the type checker: it reads the files leaf() loads as dipu's modules
    from dipu.diopi.c_form import CParam, c_parameters
    from dipu.diopi.proto import FUNCTIONS, Function, Kind, Param, kinds_of
else:
    Kind, Param, Function, FUNCTIONS = _proto.Kind, _proto.Param, _proto.Function, _proto.FUNCTIONS
    kinds_of = _proto.kinds_of
    CParam, c_parameters = _c_form.CParam, _c_form.c_parameters


def argument_kinds(arg) -> set[Kind]:
    """``kinds_of`` for a torchgen ``Argument`` (the generator's view of a schema)."""
    from torchgen.model import BaseType, ListType, OptionalType

    t = arg.type.elem if isinstance(arg.type, OptionalType) else arg.type
    is_list = isinstance(t, ListType)
    if is_list:
        t = t.elem
        if isinstance(t, OptionalType):  # Tensor?[] (indices): a tensor list whose None entries are null handles
            t = t.elem
    if not isinstance(t, BaseType):
        return set()
    return kinds_of(t.name.name, is_list, arg.annotation is not None and arg.annotation.is_write)
