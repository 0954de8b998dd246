"""Registering the generated op kernels with the dispatcher, on PrivateUse1.

Note [What gets registered]
For each generated op, in order: ``register: false`` in the spec skips it; an
op whose name or spec entry matches DIPU_FORCE_FALLBACK_OPS_LIST (unless
``fallback: false``) is left to the core's CPU fallback (``add.out`` covers
``add.Tensor`` and ``add_.Tensor``, which the ``add.out`` entry generates);
an op whose DIOPI function the active library lacks is left to it too,
which DIPU_DUMP_OP_ARGS reports once here. The rest get their wrapper, built
by the generated factory with the library's functions bound in, and wrapped
for autocompare when it matches DIPU_AUTOCOMPARE_OPS_LIST. All of this
happens once, so none of it costs anything per call (Note [Hooks cost
nothing unless asked for]).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from dipu import autocompare, hooks
from dipu.diopi.library import OpLibrary, load_active_library
from dipu.diopi.runtime import Status, init_contexts
from dipu.ops import overrideable


@dataclasses.dataclass(frozen=True)
class Op:
    """One generated aten kernel, as the generator describes it."""

    name: str  # "add.out"
    diopi: str  # the DIOPI function it calls, "diopiAdd"
    functions: tuple[str, ...]  # what the factory needs: the main function first, then scalar variants
    make: Callable  # factory(op, *functions) -> kernel
    arg_names: tuple[str, ...]  # schema argument names, in order
    written: tuple[str, ...]  # arguments the op writes (out, self of an in-place op, running stats)
    outputs: tuple[str, ...]  # names of what it returns
    kind: str  # "out", "functional" or "inplace"
    entry: str = ""  # the spec entry it was generated from ("add.out" for add.Tensor); "" means ``name``
    tensor_inputs: tuple[str, ...] = ()  # Tensor inputs a Python number may stand in, made a tensor first
    # (Note [Python numbers in Tensor positions]; not those a scalar_interface passes as numbers)
    autocompare: bool = True
    fallback: bool = True
    register: bool = True

    @property
    def wrapper_name(self) -> str:
        return "dipu_" + self.name.replace(".", "_")


def _force_fallback(*args) -> Status:
    return Status.FORCE_FALLBACK


_torch_library: torch.library.Library | None = None
_registered: list[str] = []


def registered_ops() -> list[str]:
    """The aten ops that currently have a generated kernel on PrivateUse1."""
    return list(_registered)


def register_ops(ops: tuple[Op, ...], *, library: OpLibrary | None = None,
                 autocompare_all: bool = False, print_call_info: bool = False,
                 autocompare_ops: hooks.OpPatterns | None = None) -> list[str]:
    """Register ``ops`` on PrivateUse1 (see Note [What gets registered]); returns the registered names.

    Calling it again replaces the previous registration. ``autocompare_ops`` replaces
    DIPU_AUTOCOMPARE_OPS_LIST (``dipu.autocompare(...)`` blocks use it).
    """
    global _torch_library
    if library is None:
        from dipu._core import vendor

        try:
            library = load_active_library(vendor().diopi_impl)
        except ImportError as error:  # dipu/__init__ treats ImportError as "nothing generated"
            raise RuntimeError(f"cannot load the DIOPI op library: {error}") from error
    force_fallback = hooks.force_fallback_patterns()
    compare = hooks.autocompare_patterns() if autocompare_ops is None else autocompare_ops
    report_missing = hooks.dump_level() > 0
    init_contexts()

    if _torch_library is not None:
        _torch_library._destroy()
    overrideable.unregister()
    _torch_library = torch.library.Library("aten", "IMPL")
    registered = []
    for op in ops:
        if not op.register or op.fallback and (force_fallback.matches(op.name) or
                                               op.entry and force_fallback.matches(op.entry)):
            continue
        functions = [library.get(name) for name in op.functions]
        if functions[0] is None:
            if report_missing:
                print(f"{op.diopi} is not yet implemented, {op.name} will be fallback to cpu", flush=True)
            continue
        kernel = op.make(op, *(fn or _force_fallback for fn in functions))
        if autocompare_all or compare.matches(op.name):
            kernel = autocompare.wrap(kernel, op)
        if print_call_info:
            kernel = hooks.print_call_info(kernel, op)
        _torch_library.impl(op.name, kernel, "PrivateUse1")
        registered.append(op.name)
    _registered[:] = registered
    overrideable.register(registered)  # Note [Overrideable ops in the fallback]
    return registered
