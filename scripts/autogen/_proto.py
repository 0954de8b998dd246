"""The DIOPI proto (dipu/diopi/proto.py), read without importing the dipu package.

Note [The generator does not import dipu]
Importing dipu starts the vendor runtime and registers the generated kernels,
which may be the very files being regenerated (stale, or broken by a spec
change). The proto imports only the standard library, so the generator loads
it from its file. When dipu itself runs the generator (Note [Generated code
per torch version] in dipu/_codegen.py) the module is already imported and is
reused, so both see the same classes.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_NAME = "dipu.diopi.proto"


def _load():
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    package = importlib.util.find_spec("dipu")  # a top-level find_spec imports nothing
    if package is None or not package.submodule_search_locations:
        raise ImportError("the generator needs the dipu package (run it from the repository root, "
                          "or install dipu with `pip install -e .`)")
    path = Path(list(package.submodule_search_locations)[0]) / "diopi" / "proto.py"
    spec = importlib.util.spec_from_file_location("_dipu_generator_proto", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


proto = _load()
DIPU_DIR = Path(proto.__file__).resolve().parents[1]
