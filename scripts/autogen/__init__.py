"""dipugen, the op-kernel generator: diopi_functions.yaml -> dipu/_generated/ (see DESIGN.md §5).

Laid out as torchgen is (Note [The generator's model] in model.py):

  model.py        the typed, frozen model (Entry, Kernel) and the enums of its closed sets
  proto.py        the DIOPI proto, read from the runtime that owns it (dipu/diopi/proto.py)
  schemas.py      the schema index: the installed torch's aten schemas
  calls.py        the call language of ``interface:``, checked against the proto
  shape_rules.py  the shape-rule table (the rules of dipu/ops/shape_rules.py)
  spec.py         reading the YAML into Entry records; every error names ``<file>:<line>``
  kernels.py      expanding entries into the Kernel records to generate
  dest/           one emitter per generated file, each with its template: python_wrappers.py and op_table.py
                  (dipu/_generated/), c_header.py (dipu's functions.h), cpp_wrappers.py and aten_library.py
                  (the C++ that dipu generates and compiles on first use)
  emit.py         rendering the package and writing what changed; ``python -m dipugen`` is __main__.py

It imports nothing of dipu (Note [The generator does not import dipu] in __main__.py) but the proto's leaf
modules, which proto.py loads without the package (Note [The generator reads the runtime's proto]).
"""

#: The torch whose schemas dipu/_generated/ is generated from: the reviewed, checked-in copy. dipu
#: generates its kernels for any other installed torch on first import (dipu/kernels/generated.py).
REFERENCE_TORCH = "2.13.0"
