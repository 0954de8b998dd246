"""C op libraries: DIOPI functions from a shared library compiled against DIOPI's C headers.

Note [Loading a C op library] (the native side is in dipu/csrc/diopi_rt.cpp)
``DIPU_DIOPI_IMPL=/path/to/libdiopi_impl.so`` (any value ending in ``.so`` or naming a path), or an
entry point of ``dipu.diopi_impls`` whose object is such a path (a ``str`` or ``os.PathLike``) or a
function of no arguments returning one (so a package can build its library on first use), names a
C library. dipu opens it (the core first makes its exported DIOPI runtime functions visible to
it), looks up every function of the proto by name, and lays the ones it finds over the op library
it would use otherwise (``library.load_active_library``): a C library may cover any part of the
proto, the rest comes from that library or the CPU fallback. A missing file, a file the dynamic
linker refuses (its reason: an unresolved symbol, a wrong architecture) and a library exporting no
DIOPI function are refused at import, naming the file and where its name came from.

Note [The Python trampoline]
Each function found becomes a Python function with the proto's calling convention, so the
generated Python wrappers call it as they call a Python library's, and force fallback,
autocompare, the dumps and the status handling work unchanged. A call builds a ``_C.DiopiFrame``
for the context's device, which turns the Python arguments into C arguments in one crossing (a
tensor becomes the address of an ``at::Tensor`` the frame holds, a Scalar a ``diopiScalar_t``, a
size list a ``diopiSize_t``: Note [DIOPI handles]) and owns them until the call is over; ctypes
makes the call itself (its libffi knows how the platform passes a ``diopiSize_t`` by value), with
the GIL released. The C form of each proto parameter (Note [The C form of a proto function]) is
spelled as one letter per C parameter for the frame (``_FORMS``; legend in diopi_call.cpp).
The generated C++ wrappers call the same functions without Python when no hook is on.

Note [C status codes]
A C function answers DIOPI's codes (``diopi/diopirt.h``): 0 success; ``diopiForceFallbackToCPU``
(14) and ``diopiNoImplement`` (13, "not for these arguments": it exported the function) run the
call on the CPU fallback; ``diopiDtypeNotSupported`` (1000) and every other code are errors, whose
text is the code's name and value and the library's ``diopiGetLastErrorString()``.

Note [Tensors a C library is handed]
A C library reads every tensor it is handed as memory of the call's device. A tensor elsewhere (a CPU
tensor a user forgot to move) would be read as device memory: wrong numbers on a simulated device whose
memory is the host's, an illegal address on a real one. So before each call the trampoline checks its
tensor arguments as ATen checks a kernel's: a tensor on another device is refused with torch's own
message, naming the argument and the function; a 0-dim CPU tensor, which ATen lets stand beside any
device's tensors where it is read, is copied to the call's device first (DIOPI has no way to pass a host
number in a Tensor position). Only calls through the trampoline pay for this; the C++ wrappers hand a C
library nothing but tensors of the call's device (their own test, ``on``). dipu's C++ torch library
(``dipu_header``) is exempt: it reads its arguments as ATen does, CPU scalars included, and refuses a
tensor of another device itself.

Note [diopiFusedAdamW under AMP]
dipu's ``diopiFusedAdamW`` takes ``grad_scale`` and ``found_inf`` after DeepLink's last parameter
(``maximize``): ATen's ``_fused_adamw_`` unscales the gradients and skips the step on an inf when a
GradScaler passes them, and DeepLink's function has no way to be told. A library compiled against
DeepLink's header still receives the first parameters right (the platform C conventions, SysV x86-64
and AAPCS64, let a caller pass arguments a callee does not declare, and a const and a non-const handle
are one type to the ABI), but would ignore the two and step with scaled gradients. dipu cannot tell
which header a library was compiled against, so a C library's ``diopiFusedAdamW`` is called only
without them (NULL, no GradScaler); with them the call answers ``diopiForceFallbackToCPU`` for it
and the CPU fallback takes the step (counted in ``dipu.fallback_counts()``): right with a library of
either kind, slower only under AMP. dipu's own C++ torch library, compiled against dipu's header, is
loaded with ``dipu_header=True`` and called with them (and from the C++ wrappers).
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path
from collections.abc import Callable

from dipu._core import _C
from dipu.diopi.context import SUCCESS, Status, is_host_scalar, set_last_error
from dipu.diopi.c_form import c_parameters
from dipu.diopi.proto import FUNCTIONS, Function, Kind


class CLibraryError(RuntimeError):
    """A C op library that cannot be used: missing, not loadable, or exporting no DIOPI function."""


class DiopiSize(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_int64)]


_FORM_LETTERS = {
    Kind.TENSOR: "T", Kind.TENSOR_OUT: "O", Kind.TENSOR_ALLOC: "A", Kind.TENSOR_ALLOC_LIST: "P", Kind.TENSOR_LIST: "L",
    Kind.TENSOR_LIST_OUT: "M", Kind.SCALAR: "S", Kind.SCALAR_LIST: "R", Kind.INT: "i", Kind.FLOAT: "f",
    Kind.BOOL: "b", Kind.SIZE: "z", Kind.STRING: "s", Kind.DTYPE: "d", Kind.GENERATOR: "g",
    Kind.REDUCTION: "r", Kind.ROUNDING_MODE: "m", Kind.MEMORY_FORMAT: "e",
}
_P = ctypes.c_void_p
_CTYPES = {
    "T": _P, "O": _P, "A": _P, "L": _P, "M": _P, "n": ctypes.c_int64, "S": _P, "R": _P,
    "i": ctypes.c_int64, "I": _P, "f": ctypes.c_double, "F": _P, "b": ctypes.c_bool, "B": _P,
    "z": DiopiSize, "Z": _P, "s": _P, "d": ctypes.c_int, "D": _P, "g": _P, "r": ctypes.c_int,
    "m": ctypes.c_int, "e": ctypes.c_int, "P": _P,
}


def c_form(function: Function) -> str:
    """One letter per C parameter after ``ctx`` (Note [The Python trampoline])."""
    return "".join("n" if p.param is None else _letter(p.param, p.type.endswith("*"))
                   for p in c_parameters(function)[1:])


def _letter(param, pointer: bool) -> str:
    letter = _FORM_LETTERS[param.kind]
    if pointer and letter in "ifbdz":
        return letter.upper()
    return letter


_STATUS_NAMES = {1: "diopiErrorOccurred", 2: "diopiNotInited", 12: "diopi5DNotSupported", 13: "diopiNoImplement",
                 14: "diopiForceFallbackToCPU", 1000: "diopiDtypeNotSupported"}
_FALLBACK_CODES = (13, 14)


def _failure(code: int, last_error: Callable[[], bytes | None] | None) -> Status:
    """Note [C status codes]. ``last_error``: the library's diopiGetLastErrorString, if it has one."""
    if code in _FALLBACK_CODES:
        return Status.FORCE_FALLBACK
    message = (last_error() or b"").decode(errors="replace") if last_error is not None else ""
    name = _STATUS_NAMES.get(code, "diopiNoRegistered...Function" if 3 <= code <= 11 else "an unknown status")
    set_last_error(f"C status {code} ({name})" + (f", the library says: {message}" if message else ""))
    return Status.DTYPE_NOT_SUPPORTED if code == 1000 else Status.ERROR_OCCURRED


def _device_checks(function: Function) -> tuple[tuple[int, str, bool, bool], ...]:
    """(position, name, written, list) of each tensor argument Note [Tensors a C library is handed] checks."""
    kinds = {Kind.TENSOR: (False, False), Kind.TENSOR_OUT: (True, False), Kind.TENSOR_LIST: (False, True),
             Kind.TENSOR_LIST_OUT: (True, True)}
    return tuple((i, p.name, *kinds[p.kind]) for i, p in enumerate(function.params) if p.kind in kinds)


def _on_the_device(function: Function, device: int, args: tuple, checks) -> tuple:
    """``args`` with each 0-dim CPU tensor read copied to dipu:``device``; any other tensor off that device is
    refused (Note [Tensors a C library is handed])."""
    copied = None
    for i, name, written, is_list in checks:
        value = args[i]
        if value is None:
            continue
        for k, t in enumerate(value if is_list else (value,)):
            place = getattr(t, "device", None)  # None: an optional list element left out (the frame checks the rest)
            if place is None or (place.type == "dipu" and place.index == device):
                continue
            if not written and is_host_scalar(t):
                copied = copied or list(args)
                moved = t.to(f"dipu:{device}")
                if is_list:
                    copied[i] = list(copied[i]) if copied[i] is value else copied[i]
                    copied[i][k] = moved
                else:
                    copied[i] = moved
                continue
            where = f"{name}[{k}]" if is_list else name
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                               f"dipu:{device} and {place}! (when checking argument {where} of {function.name})")
    return args if copied is None else tuple(copied)


@functools.cache
def _prototype(form: str):
    """The ctypes function type of a C form; one per form (a few dozen), not one per function (hundreds)."""
    return ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *(_CTYPES[c] for c in form))


def trampoline(function: Function, address: int, last_error: Callable | None = None,
               check_devices: bool = True) -> Callable:
    """A Python function with ``function``'s proto signature calling the C function at ``address``;
    ``last_error``: its library's diopiGetLastErrorString (None if it has none); ``check_devices``: whether
    it checks its tensor arguments' devices (Note [Tensors a C library is handed])."""
    form = c_form(function)
    checks = _device_checks(function) if check_devices else ()
    call = _prototype(form)(address)
    sizes = [i for i, c in enumerate(form) if c == "z"]
    python_args = [c for c in form if c != "n"]
    allocated = [i for i, c in enumerate(python_args) if c == "A"]
    allocated_lists = [i for i, c in enumerate(python_args) if c == "P"]
    frame_type = _C.DiopiFrame

    def c_function(ctx, *args):
        if checks:
            args = _on_the_device(function, ctx.device, args, checks)
        frame = frame_type(ctx.device)
        words = frame.marshal(form, args)
        for i in sizes:
            words[i] = DiopiSize.from_address(words[i])
        code = call(frame.context(), *words)
        if code:
            return _failure(code, last_error)
        for k, i in enumerate(allocated):
            args[i][0] = frame.allocated(k)
        for k, i in enumerate(allocated_lists):
            args[i][0] = frame.allocated_list(k)
        return SUCCESS

    c_function.__name__ = c_function.__qualname__ = function.name
    c_function.c_address = address  # type: ignore[attr-defined]  # an attribute of the function object
    return c_function


#: C functions whose DeepLink namesake lacks trailing parameters dipu passes, and those parameters
#: (Note [diopiFusedAdamW under AMP]).
_UNKNOWN_TO_DEEPLINK = {"diopiFusedAdamW": ("grad_scale", "found_inf")}


def _without(function: Function, c_function: Callable, parameters: tuple[str, ...]) -> Callable:
    """``c_function``, answering force-fallback when any of ``parameters`` is given (not None)."""
    positions = [i for i, param in enumerate(function.params) if param.name in parameters]
    assert len(positions) == len(parameters), (function.name, parameters)

    def guarded(ctx, *args):
        for i in positions:
            if args[i] is not None:
                return Status.FORCE_FALLBACK
        return c_function(ctx, *args)

    guarded.__name__ = guarded.__qualname__ = function.name
    return guarded  # no c_address: the C++ wrappers would bypass the guard


def names_a_path(name: str) -> bool:
    """Whether a DIPU_DIOPI_IMPL value is a path to a C library rather than a library's name."""
    return name.endswith(".so") or os.sep in name


def path_of(obj) -> str | None:
    """The C library an entry point's object names (Note [Loading a C op library]), or None."""
    if callable(obj) and not isinstance(obj, type) and not hasattr(obj, "functions"):
        obj = obj()
    if isinstance(obj, (str, os.PathLike)):
        return os.fspath(obj)
    return None


def load(path: str, source: str, dipu_header: bool = False) -> dict[str, Callable]:
    """The DIOPI functions of the C library at ``path``, as trampolines; ``source`` says where the
    name came from (``DIPU_DIOPI_IMPL=...``, an entry point), for the errors. ``dipu_header``: the library
    is known to be compiled against dipu's functions.h (Note [diopiFusedAdamW under AMP])."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise CLibraryError(f"{source}: the C op library {path} does not exist")
    try:
        _C.load_c_library(str(file.resolve()))
    except RuntimeError as error:
        raise CLibraryError(f"{source}: {error}") from None
    found = {name: _C.c_library_symbol(name) for name in FUNCTIONS}
    # Each trampoline asks its own library why a call failed, whichever library was loaded last.
    last_error_address = _C.c_library_symbol("diopiGetLastErrorString")
    last_error = ctypes.CFUNCTYPE(ctypes.c_char_p)(last_error_address) if last_error_address else None
    functions = {name: trampoline(FUNCTIONS[name], address, last_error, check_devices=not dipu_header)
                 for name, address in found.items() if address}
    for name, parameters in ({} if dipu_header else _UNKNOWN_TO_DEEPLINK).items():
        if name in functions:
            functions[name] = _without(FUNCTIONS[name], functions[name], parameters)
    if not functions:
        raise CLibraryError(f"{source}: the C op library {file} exports no DIOPI function (none of the "
                            f"{len(FUNCTIONS)} names of the proto, such as diopiAdd, is among its symbols)")
    return functions
