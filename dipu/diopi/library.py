"""Op libraries: which DIOPI functions a vendor implements, and finding the active one.

An op library is an :class:`OpLibrary` whose functions are registered with the
``register`` decorator. Each function is checked against the DIOPI proto when
it is registered, so a misspelled name or a parameter list that drifted from
the proto fails at import, not at the first call.

Note [Declared dtypes]
A function may declare the dtypes it supports (``@library.register(dtypes=...)``,
data, checked against the first tensor input). For such a function ``get``
returns a guard that answers ``FORCE_FALLBACK`` for other dtypes, so the
generated kernel runs the op through the CPU fallback instead of failing. (A
kernel that itself answers ``DTYPE_NOT_SUPPORTED`` reports an error: it claimed
a dtype it cannot handle.) A scalar function (``diopiAddScalar``) may declare
dtypes too: the Python number it refused reaches the CPU fallback as a 0-dim
tensor (dipu/kernels/fallback.py), so ``steps.add_(1)`` on int64 still runs.
Functions without a declaration pay nothing: ``get`` returns them as they are.

Note [Derived arguments]
DIOPI leaves out some arguments ATen takes because a function's outputs imply them: a reduction's ``keepdim``
(its output keeps the input's rank) and the ``dtype`` of a scan (its output's), or because it never sets them
(softmax's ``half_to_float``, which the output's dtype says, and gather's ``sparse_grad``: always false). A function
that applies one overload with such an argument derived says so: ``register(aten=...,
derived={"keepdim": KEPT_DIMS})``. The pairing is then checked without those arguments, and each rule here is the
one definition of what it computes, from the function's first output and first tensor input; the generated C++
twin (Note [The ATen library in C++]) computes the same from the same rule (``tc::kept_dims``, the output's
``scalar_type()``, ``false``).

Note [Choosing the op library]
The vendor names its library (``DeviceRuntime.diopi_impl``); ``DIPU_DIOPI_IMPL``
overrides it, which lets a developer try another library, or a test install a
deliberately broken one, without touching the vendor. A name is looked up in
the ``dipu.diopi_impls`` entry-point group first, then imported as the module
``dipu.diopi_impl.<name>``, then as a module path of its own; the entry point or module
provides an ``OpLibrary`` (a module's ``library`` attribute). A path to a shared library, as the
value or as what an entry point provides, names a C op library, laid over the library the vendor
names when it comes from ``DIPU_DIOPI_IMPL`` (Note [Loading a C op library] in c_library.py).
"""

from __future__ import annotations

import importlib
import inspect
import os
import types
from importlib import metadata
from collections.abc import Callable

from dipu.diopi import c_library
from dipu.diopi.context import Status
from dipu.diopi.proto import FUNCTIONS, AtenArg, aten_mismatch, kinds_of

ENTRY_POINT_GROUP = "dipu.diopi_impls"
IMPL_VAR = "DIPU_DIOPI_IMPL"


class LibraryNotFound(RuntimeError):
    """No entry point or module provides the op library asked for."""


#: Note [Derived arguments]: the rules, each from (first output, first tensor input).
KEPT_DIMS = "kept_dims"  # the output has the input's rank and the input is not a scalar
OUTPUT_DTYPE = "output_dtype"  # the output's dtype
FALSE = "false"  # a flag DIOPI has no parameter for, always off (softmax's half_to_float, gather's sparse_grad)
DERIVATIONS: dict[str, Callable] = {
    KEPT_DIMS: lambda out, input: out.dim() == input.dim() and input.dim() > 0,
    OUTPUT_DTYPE: lambda out, input: out.dtype,
    FALSE: lambda out, input: False,
}


class OpLibrary:
    """A named set of DIOPI function implementations.

    ``base``: a library to take functions from when this one lacks them, so a
    vendor can override a few functions of another library. ``vendor``: the one
    vendor whose memory its kernels reach (None: any); ``native_alias``: its
    kernels compute on ``native_alias`` views, so they need a vendor whose memory
    torch can address (a ``native_device_type``). :meth:`cannot_run_on` reads both.
    """

    def __init__(self, name: str, base: OpLibrary | None = None, *, vendor: str | None = None,
                 native_alias: bool = False):
        self.name = name
        self.base = base
        self.vendor = vendor
        self.native_alias = native_alias
        self.functions: dict[str, Callable] = {}
        self.dtypes: dict[str, frozenset] = {}
        #: DIOPI function -> the ATen overload it applies (``register(aten=...)``); those registered ``direct``
        #: (exactly that overload on the aliases, no workaround around it) have a generated C++ twin (Note [The
        #: ATen library in C++] in scripts/autogen/dest/aten_library.py).
        self.aten: dict[str, object] = {}
        self.direct: set[str] = set()
        #: DIOPI function -> the ATen arguments it derives and their rules (Note [Derived arguments]).
        self.derived: dict[str, dict[str, str]] = {}

    def cannot_run_on(self, runtime) -> str | None:
        """Why this library's kernels cannot run on vendor ``runtime`` (None: they can)."""
        if self.vendor is not None and self.vendor != runtime.name:
            return f"op library '{self.name}' computes on vendor '{self.vendor}' memory only"
        if self.native_alias and runtime.native_device_type is None:
            return (f"op library '{self.name}' computes on zero-copy aliases of device memory, and vendor "
                    f"'{runtime.name}' has none (no native_device_type)")
        return None

    def register(self, fn: Callable | None = None, *, dtypes=None, aten=None, direct: bool = False,
                 derived: dict[str, str] | None = None, copied: bool = False):
        """Decorator: ``@library.register`` or ``@library.register(dtypes=(torch.float32, ...))``.

        ``aten``: the ATen overload (or op packet) a table-made function applies; see Note
        [Table-made functions are checked against ATen]. ``direct``: the function is that overload applied
        to its aliases and nothing else, so it may be generated in C++ (``OpLibrary.direct``). ``derived``:
        the overload's arguments the function computes from its outputs (Note [Derived arguments]). ``copied``:
        ``aten`` is a functional overload whose result the function copies into its output (Note [Copies of a
        functional result] in diopi_impl/torch/_table.py).
        """
        if fn is None:
            return lambda f: self._register(f, dtypes, aten, direct, derived, copied)
        return self._register(fn, dtypes, aten, direct, derived, copied)

    def _register(self, fn: Callable, dtypes, aten, direct: bool = False,
                  derived: dict[str, str] | None = None, copied: bool = False) -> Callable:
        name = fn.__name__
        declared = FUNCTIONS.get(name)
        if declared is None:
            raise TypeError(f"op library '{self.name}': {name} is not declared in the DIOPI proto")
        params = _parameter_names(fn)
        if params != declared.param_names:
            raise TypeError(
                f"op library '{self.name}': {name}({', '.join(params)}) does not match "
                f"the DIOPI proto {name}({', '.join(declared.param_names)})"
            )
        if derived and (aten is None or set(derived.values()) - DERIVATIONS.keys()):
            raise TypeError(f"op library '{self.name}': {name} derives {derived}: derived arguments need aten= and "
                            f"rules among {sorted(DERIVATIONS)}")
        overload = _check_aten(self.name, declared, aten, derived or {}, copied) if aten is not None else None
        if name in self.functions:
            raise TypeError(f"op library '{self.name}': {name} is registered twice")
        self.functions[name] = fn
        if overload is not None:
            self.aten[name] = overload
            if direct:
                self.direct.add(name)
            if derived:
                self.derived[name] = dict(derived)
        if dtypes is not None:
            if not any(p.kind.is_tensor and not p.kind.is_output for p in declared.params):
                raise TypeError(f"op library '{self.name}': {name} declares dtypes but has no tensor input")
            self.dtypes[name] = frozenset(dtypes)
        return fn

    def supported_dtypes(self, name: str) -> frozenset | None:
        """The dtypes ``name`` declares, or None when it takes every dtype."""
        if name in self.functions:
            return self.dtypes.get(name)
        return self.base.supported_dtypes(name) if self.base is not None else None

    def get(self, name: str) -> Callable | None:
        fn = self.functions.get(name)
        if fn is None:
            return self.base.get(name) if self.base is not None else None
        dtypes = self.dtypes.get(name)
        return fn if dtypes is None else _dtype_guard(fn, FUNCTIONS[name], dtypes)

    def __repr__(self) -> str:
        return f"OpLibrary({self.name!r}, {len(self.functions)} functions)"


def _parameter_names(fn: Callable) -> tuple[str, ...]:
    """``fn``'s parameter names. A plain function's are read from its code object: ``inspect.signature`` costs
    about 25 us a function, and a library registers hundreds at import (Note [Start-up objects] in
    dipu/__init__.py)."""
    code = getattr(fn, "__code__", None)
    if (type(fn) is types.FunctionType and code is not None
            and not fn.__dict__.keys() & {"__signature__", "__wrapped__"} and not code.co_kwonlyargcount
            and not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)):
        return code.co_varnames[:code.co_argcount]
    return tuple(inspect.signature(fn).parameters)


def _dtype_guard(fn: Callable, declared, dtypes: frozenset) -> Callable:
    """``fn`` behind a check of its first tensor input's dtype; see Note [Declared dtypes]."""
    position = next(i for i, p in enumerate(declared.params) if p.kind.is_tensor and not p.kind.is_output)
    unsupported = Status.FORCE_FALLBACK

    def guarded(ctx, *args):
        value = args[position]
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        dtype = getattr(value, "dtype", None)  # Python numbers have none: accepted
        if dtype is not None and dtype not in dtypes:
            return unsupported
        return fn(ctx, *args)

    guarded.__name__ = fn.__name__
    guarded.__wrapped__ = fn  # type: ignore[attr-defined]  # functools.wraps's attribute, set alone
    return guarded


def _check_aten(library: str, declared, aten, derived: dict[str, str], copied: bool = False):
    """Note [Table-made functions are checked against ATen]
    A function made from a table (one closure applying an ATen op, given the proto's signature) would
    pass the signature check by construction. What can drift is the pairing of the proto declaration
    with the ATen op, so that is checked instead: the declared parameters must take the overload's
    arguments in order (``proto.aten_mismatch``), but for those it derives (Note [Derived arguments]), which
    the overload must have; for an op packet, one of its overloads must fit. The
    schema is read from torch's own schema objects, which costs nothing at import (torchgen would cost
    about 80 ms to import).
    """
    # a packet's overloads made one by one: making one (torch's OpOverload) costs more than checking it
    overloads = (getattr(aten, n) for n in aten.overloads()) if hasattr(aten, "overloads") else iter([aten])
    problems = []
    for overload in overloads:
        schema = overload._schema
        if derived.keys() - {a.name for a in schema.arguments}:
            problems.append(f"{schema.name}.{schema.overload_name or 'default'} has no argument "
                            f"{', '.join(sorted(derived.keys() - {a.name for a in schema.arguments}))} to derive")
            continue
        args = [(a, _aten_arg(a)) for a in schema.arguments if a.name not in derived]
        outs = [arg for a, arg in args if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
        inputs = [arg for a, arg in args if arg not in outs]
        problem = aten_mismatch(declared, outs, inputs, len(schema.returns), copied)
        if problem is None:
            return overload  # the one it applies
        problems.append(f"{schema.name}.{schema.overload_name or 'default'} {problem}")
    raise TypeError(f"op library '{library}': {declared} does not fit the ATen op it applies: {'; '.join(problems)}")


_JIT_NAMES = {"number": "Scalar"}  # TorchScript's name for ATen's Scalar


def _aten_arg(arg) -> AtenArg:
    t, optional = arg.real_type, False
    if t.kind() == "OptionalType":
        t, optional = t.getElementType(), True
    is_list = t.kind() == "ListType"
    if is_list:
        t = t.getElementType()
    written = arg.alias_info is not None and arg.alias_info.is_write
    kinds = set() if t.kind() == "OptionalType" else kinds_of(_JIT_NAMES.get(str(t), str(t)), is_list, written)
    return AtenArg(arg.name, str(arg.real_type), frozenset(kinds), optional)


def _c_library(path: str, where: str, base: Callable[[], OpLibrary] | None) -> OpLibrary:
    """The C library at ``path`` (its functions, as trampolines) over ``base()``'s."""
    functions = c_library.load(path, where)
    library = OpLibrary(f"C library {path}", base=base() if base is not None else None)
    library.functions.update(functions)  # trampolines take the proto's arguments by position
    return library


def _as_library(obj, where: str, base: Callable[[], OpLibrary] | None = None) -> OpLibrary:
    path = c_library.path_of(obj)
    if path is not None:
        return _c_library(path, where, base)
    library = getattr(obj, "library", obj)
    if not isinstance(library, OpLibrary):
        raise TypeError(f"{where} does not provide an OpLibrary")
    return library


def load_library(name: str, base: Callable[[], OpLibrary] | None = None, source: str | None = None) -> OpLibrary:
    """The op library called ``name``; see Note [Choosing the op library]. ``base``: what a C library
    is laid over; ``source``: where a path came from, for the errors."""
    if c_library.names_a_path(name):
        return _c_library(name, source or name, base)
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name == name:
            return _as_library(entry_point.load(), f"entry point '{name}' ({entry_point.value})", base)
    candidates = [name] if "." in name else [f"dipu.diopi_impl.{name}", name]
    for module_name in candidates:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is None or not module_name.startswith(error.name):
                raise  # the module exists but fails to import something itself
            continue
        return _as_library(module, f"module {module_name}")
    raise LibraryNotFound(f"no DIOPI op library named '{name}' (no entry point in '{ENTRY_POINT_GROUP}', "
                          f"no module {' or '.join(candidates)})")


def active_library_name(vendor_choice: str | None) -> str | None:
    """What ``DIPU_DIOPI_IMPL`` names, else ``vendor_choice`` (None: a runtime-only vendor, no override)."""
    return os.environ.get(IMPL_VAR, "").strip() or vendor_choice


def load_active_library(vendor_choice: str | None) -> OpLibrary:
    """The library ``DIPU_DIOPI_IMPL`` names, else the vendor's; see Note [Choosing the op library].

    A name that finds nothing is reported with where it came from and the entry points installed.
    """
    override = os.environ.get(IMPL_VAR, "").strip()
    name = override or vendor_choice
    if not name:
        raise LibraryNotFound(f"the vendor has no op library and {IMPL_VAR} names none")
    base = (lambda: load_library(vendor_choice)) if vendor_choice and override and override != vendor_choice \
        else None
    try:
        return load_library(name, base, f"{IMPL_VAR}={name}" if override else None)
    except LibraryNotFound as error:
        installed = sorted({e.name for e in metadata.entry_points(group=ENTRY_POINT_GROUP)})
        source = f"{IMPL_VAR}={name}" if override else f"the vendor's op library '{name}'"
        raise LibraryNotFound(f"{source}: {error}; installed entry points: {', '.join(installed) or 'none'}") \
            from None
