"""dipugen, the op-kernel generator: diopi_functions.yaml -> dipu/_generated/ (see DESIGN.md §5).

``spec`` reads and validates the YAML into frozen dataclasses, ``kernels``
expands each entry into the aten kernels to generate and decides what their
code does, ``emit`` renders that through the Jinja2 templates.
"""

#: The torch whose schemas dipu/_generated/ is generated from: the reviewed, checked-in copy. dipu
#: generates its kernels for any other installed torch on first import (dipu/_codegen.py).
REFERENCE_TORCH = "2.13.0"
