"""Registering the generated op kernels with the dispatcher, on PrivateUse1: the one owner of registration.

Note [What gets registered]
For each generated op, in order: ``register: false`` in the spec skips it; an
op whose name or spec entry matches DIPU_FORCE_FALLBACK_OPS_LIST (unless
``fallback: false``) is left to the core's CPU fallback (``add.out`` covers
``add.Tensor`` and ``add_.Tensor``, which the ``add.out`` entry generates);
an op whose DIOPI function the active library lacks is left to it too
(DIPU_DUMP_OP_ARGS says how many in one line; ``python -m dipu --missing``
lists them). The rest get their wrapper, built
by the generated factory with the library's functions bound in (a function
the library lacks, other than the main one, is bound to a stub answering
FORCE_FALLBACK). Placeholder ops left without a kernel get their CPU
substitute (Note [Overrideable ops in the fallback]). Where the library's
function is a C library's, the op's C++ wrapper is installed over its Python
one (Note [Generated C++ wrappers] in scripts/autogen/dest/cpp_wrappers.py),
which stays registered beneath it for the calls the C++ path hands back. All of this happens
once, at import, so none of it costs anything per call (Note [Hooks cost
nothing unless asked for]).

Note [Autocompare as a switch]
The plain kernels live in one ``torch.library.Library``. The ops compared
with the CPU get a compared kernel (``autocompare.wrap`` of the plain one)
in a second library laid over the first: the dispatcher runs the kernel
registered last, and destroying that library brings the plain kernel back.
So switching autocompare, at import (DIPU_AUTOCOMPARE_OPS_LIST) and on entering or leaving a ``with
dipu.autocompare(...)`` block, rebuilds that overlay for the ops it matches
and touches no other kernel.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from dipu.kernels import generated as generated_kernels
from dipu._core import vendor
from dipu.runtime import op_library_of
from dipu.diopi.context import Status
from dipu.diopi.library import OpLibrary, active_library_name, load_active_library
from dipu.kernels import cpp_wrappers, fallback, switches
from dipu.kernels.op import Op
from dipu.kernels.support import init_contexts
from dipu.kernels.switches import OpPatterns


def _force_fallback(*args) -> Status:
    return Status.FORCE_FALLBACK


class Registration:
    """What is registered on PrivateUse1: plain kernels, and the compared overlay (Note [Autocompare as a switch])."""

    def __init__(self) -> None:
        self._plain: torch.library.Library | None = None
        self._compared: torch.library.Library | None = None
        self.kernels: dict[str, tuple[Op, Callable]] = {}  # op name -> (op, plain kernel)
        self.cpp_kernels: list[str] = []  # ops whose C++ wrapper is installed over the plain kernel
        self.library: OpLibrary | None = None  # the op library the kernels call; None: every op on the fallback
        self.missing: dict[str, list[str]] = {}  # DIOPI function the library lacks -> the ops left to the fallback

    def register(self, ops: tuple[Op, ...], library: OpLibrary | None, *, force_fallback: OpPatterns,
                 report_missing: bool = False) -> list[str]:
        """Register ``ops`` (Note [What gets registered]), replacing what was registered; returns their names.

        ``library`` None: a vendor without an op library, every op on the CPU fallback.
        """
        self._drop(compared_only=False)
        fallback.unregister()
        init_contexts()
        self.library = library
        self._plain = torch.library.Library("aten", "IMPL")
        missing: dict[str, list[str]] = {}  # DIOPI function the library lacks -> the ops that need it
        if library is not None:  # none: no op is bound
            for op in ops:
                if not op.register or op.fallback and (force_fallback.matches(op.name) or
                                                       op.entry and force_fallback.matches(op.entry)):
                    continue
                functions = [library.get(name) for name in op.functions]
                if functions[0] is None:
                    missing.setdefault(op.diopi, []).append(op.name)
                    continue
                kernel = op.make(op, *(fn or _force_fallback for fn in functions))
                self._plain.impl(op.name, kernel, "PrivateUse1")
                self.kernels[op.name] = (op, kernel)
        self.missing = missing
        if report_missing and missing and library is not None:  # missing: only ever filled with a library
            print(f"dipu: the op library '{library.name}' lacks {len(missing)} of the DIOPI functions the spec "
                  f"calls; their {sum(map(len, missing.values()))} ops run on the CPU fallback "
                  "(`python -m dipu --missing` lists them)", flush=True)
        fallback.register(self.kernels)  # Note [Overrideable ops in the fallback]
        if library is not None:
            self.cpp_kernels = cpp_wrappers.install(self.kernels, _c_addresses(library))
        return list(self.kernels)

    def left_to_python(self) -> dict[str, str]:
        """Op -> why its kernel runs the Python wrapper, for the registered ops without a C++ wrapper installed
        (``python -m dipu --python-wrappers``)."""
        if self.library is None:
            return {}
        return cpp_wrappers.left_to_python(self.kernels, _c_addresses(self.library), self.cpp_kernels)

    def compare(self, selects: Callable[[str], bool], wrap: Callable) -> list[str]:
        """Compare the registered ops ``selects`` accepts (their kernels replaced by ``wrap(kernel, op)``),
        and no others; returns their names (Note [Autocompare as a switch])."""
        self._drop(compared_only=True)
        chosen = [(op, kernel) for name, (op, kernel) in self.kernels.items() if selects(name)]
        if not chosen:
            return []
        self._compared = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():  # "Overriding a previously registered kernel": the point of the overlay
            warnings.simplefilter("ignore", UserWarning)
            for op, kernel in chosen:
                # allow_override: torch before 2.13 refuses by default a second Python kernel for one op and key
                self._compared.impl(op.name, wrap(kernel, op), "PrivateUse1", allow_override=True)
        return [op.name for op, _ in chosen]

    def _drop(self, *, compared_only: bool) -> None:
        if self._compared is not None:
            self._compared._destroy()
            self._compared = None
        if not compared_only and self.cpp_kernels:
            cpp_wrappers.uninstall()
            self.cpp_kernels = []
        if not compared_only and self._plain is not None:
            self._plain._destroy()
            self._plain = None
            self.kernels.clear()


def _c_addresses(library: OpLibrary) -> dict[str, int]:
    """DIOPI function -> the address of the C function behind it, for the functions a C library gives
    ``library`` (its trampolines carry ``c_address``: Note [The Python trampoline] in dipu/diopi/c_library.py)."""
    names: set[str] = set()
    layer: OpLibrary | None = library
    while layer is not None:
        names.update(layer.functions)
        layer = layer.base
    found = {}
    for name in names:
        address = getattr(library.get(name), "c_address", None)
        if address:
            found[name] = address
    return found


#: The process's registration (PrivateUse1 has one owner per process).
registration = Registration()


def registered_ops() -> list[str]:
    """The aten ops that currently have a generated kernel on PrivateUse1."""
    return list(registration.kernels)


def register_active():
    """Register the generated kernels with the active op library (the vendor's, or DIPU_DIOPI_IMPL's), the
    debug switches as the environment sets them; a vendor without an op library gets only the CPU fallback.
    Returns the generated package (None without an op library)."""
    choice = op_library_of(vendor())
    if active_library_name(choice) is None:
        registration.register((), None, force_fallback=OpPatterns([]))
        return None
    try:
        library = load_active_library(choice)
    except ImportError as error:
        raise RuntimeError(f"cannot load the DIOPI op library: {error}") from error
    layer = library
    while layer is not None:  # a library whose kernels cannot reach this vendor's memory fails here, not at an op
        reason = layer.cannot_run_on(vendor())
        if reason:
            raise RuntimeError(f"{reason}: choose another op library (DIPU_DIOPI_IMPL, or the vendor's "
                               "diopi_impl; None runs every op on the CPU fallback)")
        layer = layer.base
    generated = generated_kernels.load()
    registration.register(generated.OPS, library, force_fallback=switches.force_fallback_patterns(),
                          report_missing=switches.dump_level() > 0)
    return generated
