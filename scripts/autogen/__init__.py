"""dipugen, the op-kernel generator: diopi_functions.yaml -> the Python kernel package dipu generates at first
import (dipu._generated), dipu's C header of the proto, and the C++ sources dipu builds on first use
(docs/architecture.md, "The generator").

Laid out as torchgen is (Note [The generator's model] in model.py):

  model.py        the typed, frozen model (Entry, Kernel) and the enums of its closed sets
  proto.py        the DIOPI proto, read from the runtime that owns it (dipu/diopi/proto.py)
  schemas.py      the schema index: the installed torch's aten schemas
  calls.py        the call language of ``interface:``, checked against the proto
  shape_rules.py  the shape-rule table (the rules of dipu/ops/shape_rules.py)
  spec.py         reading the YAML into Entry records; every error names ``<file>:<line>``
  kernels.py      expanding entries into the Kernel records to generate
  dest/           one emitter per generated file, each with its template:
                    python_wrappers.py  dipu._generated.wrappers, the Python wrapper of every kernel
                    op_table.py         dipu._generated's __init__.py, the table of Op records
                    c_header.py         dipu/include/diopi/functions.h, the proto in C
                    cpp_wrappers.py     cpp_wrappers.cpp, the C++ wrappers of C op libraries
                                        (built by dipu/kernels/cpp_wrappers.py)
                    aten_library.py     aten_library.cpp, the torch op library in C++
                                        (built by dipu/diopi/cpp_build.py)
  emit.py         rendering the package and writing what changed; ``python -m dipugen`` is __main__.py
  deeplink.py     comparing the proto with DeepLink's functions.h (``python -m dipugen.deeplink``)

It imports nothing of dipu (Note [The generator does not import dipu] in __main__.py) but the proto's leaf
modules, which proto.py loads without the package (Note [The generator reads the runtime's proto]).
"""

#: The torch the spec is written against: under it every entry must fit, and the golden files in
#: tests/autogen/expected are generated from its schemas. dipu generates its kernels for whatever torch is
#: installed on first import (dipu/kernels/generated.py).
REFERENCE_TORCH = "2.13.0"
