"""What an op library sees: the DIOPI proto, the runtime it calls, and the library base.

Op libraries (``diopi_impl/<name>/``) import from here and nowhere else in dipu:

- ``OpLibrary`` to declare their functions (checked against the proto, ``FUNCTIONS``), and the rules of the
  ATen arguments a function derives from its outputs (``KEPT_DIMS``, ``OUTPUT_DTYPE``, ``FALSE``,
  ``DERIVATIONS``: Note [Derived arguments] in library.py);
- ``Status`` / ``SUCCESS`` to answer, and ``set_last_error`` to say why a call failed;
- the ``Context`` each function receives as ``ctx`` (its device, stream, ``require_tensor``);
- ``native_alias(tensor)``: a zero-copy tensor of the vendor's ``native_device_type`` ("cpu" on the
  simulated vendor) over a dipu tensor's memory, for libraries that compute with another torch
  backend (0-dim CPU tensors pass through unchanged); ``native_generator(generator, device)``: that
  backend's generator for a dipu generator (None: the device's default);
- ``attention``: the blockwise attention algorithm, for libraries that build fused attention on it.
"""

from dipu._core import _C
from dipu.diopi.library import DERIVATIONS, FALSE, KEPT_DIMS, OUTPUT_DTYPE, OpLibrary, load_library
from dipu.diopi.context import SUCCESS, Context, Status, get_last_error, set_last_error
from dipu.diopi.proto import FUNCTIONS, Function, Kind

native_alias = _C.alias
native_generator = _C.native_generator

__all__ = ["OpLibrary", "load_library", "DERIVATIONS", "FALSE", "KEPT_DIMS", "OUTPUT_DTYPE", "SUCCESS", "Context",
           "Status", "get_last_error", "set_last_error", "FUNCTIONS", "Function", "Kind", "native_alias",
           "native_generator"]
