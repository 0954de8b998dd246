"""The one builder of table-made functions: DIOPI functions that differ only in the ATen op they apply.

Note [Table-made functions]
Most functions of this library take their dipu tensors, alias them (Note [Calling ATen from kernels] in
_aten.py) and apply one ATen op; writing each out would repeat the same three lines a few hundred times.
The family modules list them in tables instead, and this module makes each one from its proto declaration:
the function takes the declared parameters (its ``__signature__`` is the proto's) and is registered with the
ATen op it applies, so ``library.register`` checks the pairing of the declaration with the op (Note
[Table-made functions are checked against ATen] in dipu/diopi/library.py). Every table-made function comes
from here, so every one is checked. Four shapes cover the tables:

- :func:`out_function`: ``diopiX(ctx, *outputs, *inputs)`` applies an out= overload, writing into the
  outputs' aliases (``diopiSin``, ``diopiEqScalar``, ``diopiSiluBackward``, ``diopiTopk``);
- :func:`copy_function`: ``diopiX(ctx, out, *inputs)`` copies a functional overload's result into the output's
  alias (``diopiMSELoss``, ``diopiFlip``, ``diopiIsNan``);
- :func:`inplace_function`: ``diopiXInp(ctx, input, *others)`` applies an in-place op to the input's alias
  (``diopiSinInp``, ``diopiUniformInp``, ``diopiMaskedFillInpScalar``);
- :func:`foreach_function`: the ``_foreach_`` family, in place on Tensor[] arguments or functional, storing
  new dipu tensors (Note [Foreach kernels from the proto] in optim.py).

The proto's inputs are the overload's in order (the registration checks it), so a function passes each one
on as the op's argument at that place: a tensor as its alias, a Generator as the native generator sharing
its state (``native_generator``), anything else as it is; those ATen takes by keyword only (``alpha``,
``rounding_mode``, ``generator``) go by their ATen names (:func:`_passing`). A row calls torch's binding of
the op where it has one (Note [Calling ATen from kernels]); ``out_names`` (out_function) or an overload
rather than a method name (inplace_function) has it call that overload itself.

A function is written out instead where it does more than apply its overload: a workaround, a branch (``diopiAdd``
skips ``alpha`` when it is 1). Those that still apply exactly one overload pass ``aten=`` to ``library.register``
themselves, and ``direct=True`` only where nothing else is done (Note [The ATen library in C++] in
scripts/autogen/dest/aten_library.py).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable

import torch

from dipu.diopi import DERIVATIONS, FUNCTIONS, SUCCESS, Kind, native_generator
from dipu.diopi import native_alias as alias
from ._aten import alias_tensors, fast_aten, require_copy
from ._library import library

aten = torch.ops.aten


#: Note [ATen ops a torch lacks]
#: A table names ATen ops by name, and an older torch may lack one (torch 2.11 has no ``_foreach_clone``).
#: The function applying it is then left out of the library, recorded here (function -> op), and the
#: package warns once at import as the spec does for an entry that does not fit (Note [The spec follows the
#: installed torch]): its ops run through the CPU fallback. Nothing else of the library is lost.
LACKING: dict[str, str] = {}


def aten_overload(name: str, packet: str, overload: str = "default"):
    """``aten.<packet>.<overload>`` for function ``name``, or None (recorded in ``LACKING``) where the installed
    torch lacks it (Note [ATen ops a torch lacks])."""
    try:
        return getattr(getattr(aten, packet), overload)
    except AttributeError:
        LACKING[name] = f"aten::{packet}" + (f".{overload}" if overload != "default" else "")
        return None


def warn_lacking() -> None:
    """The one warning naming the functions left out for the installed torch (Note [ATen ops a torch lacks])."""
    if LACKING:
        warnings.warn(
            f"dipu: {len(LACKING)} function(s) of op library '{library.name}' apply ATen ops torch "
            f"{torch.__version__} lacks and run through the CPU fallback: "
            f"{'; '.join(f'{name} ({op})' for name, op in sorted(LACKING.items()))}", stacklevel=2)


def _register(name: str, function: Callable, aten_op, derived: dict[str, str] | None = None,
              copied: bool = False) -> None:
    """Register ``function(ctx, *args)`` under ``name`` with the proto's parameter names, checked against
    ``aten_op`` (an overload, or an op packet one of whose overloads must fit)."""
    function.__name__ = function.__qualname__ = name
    function.__signature__ = inspect.Signature([_parameter(p) for p in FUNCTIONS[name].param_names])
    library.register(function, aten=aten_op, direct=True, derived=derived, copied=copied)


@functools.cache
def _parameter(name: str) -> inspect.Parameter:
    """One Parameter per name for every table-made signature (a few hundred signatures, some 200 names)."""
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _alias(value, d):
    """Tensors become their native alias; Python numbers and None pass through."""
    return alias(value, d) if isinstance(value, torch.Tensor) else value


def _apply(call: Callable, passing: tuple, d, args, *leading):
    """``call(*leading, *args)`` with ``args`` converted and passed as ``passing`` (:func:`_passing`'s) says: the
    conversions applied, the first ones by position, the rest by their ATen names."""
    conversions, positional, keywords = passing
    values = list(args)
    for i, convert in conversions:
        values[i] = convert(values[i], d)
    return call(*leading, *values[:positional], **dict(zip(keywords, values[positional:])))


def _passing(name: str, overload, first: int,
             derived=()) -> tuple[tuple[tuple[int, Callable], ...], int, tuple[str, ...]]:
    """How ``name`` passes its parameters from ``first`` on to ``overload`` (Note [Table-made functions]): the
    conversions (position among those parameters, conversion) of its tensors and Generators, how many go by
    position, and the ATen names of the rest, which go by keyword (``derived`` arguments are none of these)."""
    params = FUNCTIONS[name].params[first:]
    conversions = tuple((i, native_generator if p.kind is Kind.GENERATOR else _alias) for i, p in enumerate(params)
                        if p.kind.is_tensor or p.kind is Kind.GENERATOR)
    keywords = tuple(a.name for a in overload._schema.arguments if a.kwarg_only and a.name not in derived
                     and not (a.alias_info is not None and a.alias_info.is_write))
    return conversions, len(params) - len(keywords), keywords


def out_function(name: str, overload, out_names: tuple[str, ...] = (), derived: dict[str, str] | None = None) -> None:
    """``name(ctx, *outputs, *inputs)`` applying the out= ``overload`` to the inputs, writing the outputs.

    It is called through torch's binding of its op, whose ``out=`` picks the out= overload the arguments
    select (Note [Calling ATen from kernels]); with ``out_names`` (its outputs' keyword names: an op without a
    binding, several outputs, an output not called ``out``) through ``overload``. Either way the inputs are
    passed as Note [Table-made functions] says. ``derived``: the overload's arguments computed from the first
    output and the first input (Note [Derived arguments] in dipu/diopi/library.py), passed by name, also through
    ``overload``. The registration checks the proto against ``overload``.
    """
    bound = getattr(fast_aten, overload._overloadpacket.__name__)
    outputs = len(out_names) or 1
    inputs = FUNCTIONS[name].params[outputs:]
    derived = derived or {}
    if derived and (inputs[0].kind is not Kind.TENSOR or inputs[0].optional):
        raise TypeError(f"{name} derives {derived} from its first input, which is not a tensor")
    rules = [(argument, DERIVATIONS[rule]) for argument, rule in derived.items()]
    conversions, positional, keywords = _passing(name, overload, outputs, derived)
    plain = not keywords and not derived and all(convert is _alias for _, convert in conversions)
    # The commonest shapes (a tensor, two tensors, a tensor and a Python number) skip the per-argument
    # type test: a few hundred nanoseconds of a tiny op's few microseconds.
    kinds = () if out_names or not plain else tuple(None if p.optional else p.kind for p in inputs)
    if kinds == (Kind.TENSOR,):
        def function(ctx, out, input):
            d = ctx.device
            bound(alias(input, d), out=alias(out, d))
            return SUCCESS
    elif kinds == (Kind.TENSOR, Kind.TENSOR):
        def function(ctx, out, input, other):
            d = ctx.device
            bound(alias(input, d), alias(other, d), out=alias(out, d))
            return SUCCESS
    elif kinds == (Kind.TENSOR, Kind.SCALAR):
        def function(ctx, out, input, other):
            d = ctx.device
            bound(alias(input, d), other, out=alias(out, d))
            return SUCCESS
    elif out_names or not plain:
        call = overload if out_names or derived else bound
        keywords_out = out_names or ("out",)

        def function(ctx, *args):
            d = ctx.device
            values = list(args[outputs:])
            for i, convert in conversions:
                values[i] = convert(values[i], d)
            named = dict(zip(keywords, values[positional:]))
            outs = [alias(t, d) for t in args[:outputs]]
            named.update(zip(keywords_out, outs))
            for argument, rule in rules:
                named[argument] = rule(outs[0], values[0])
            call(*values[:positional], **named)
            return SUCCESS
    else:
        def function(ctx, out, *args):
            d = ctx.device
            bound(*[_alias(a, d) for a in args], out=_alias(out, d))
            return SUCCESS

    _register(name, function, overload, derived)


def copy_function(name: str, overload) -> None:
    """Note [Copies of a functional result]
    ``name(ctx, out, *inputs)`` applying the functional ``overload`` to the inputs and copying its one result into
    the output: into its alias where the output is given, for an op whose out= overload cannot write an alias (it
    resizes ``out``, or uses it as scratch space of the input's size: mse_loss), is a composite over the functional
    kernel (isnan), or does not exist (native_channel_shuffle); into a new tensor of the call's context where the
    function allocates its output (nonzero, masked_select: Note [Outputs a function allocates] in
    dipu/diopi/context.py). The registration checks the proto's inputs against the overload's arguments and its
    output against the one result, and the C++ twin copies the same result (Note [The ATen library in C++] in
    scripts/autogen/dest/aten_library.py)."""
    passing = _passing(name, overload, 1)
    allocates = FUNCTIONS[name].params[0].kind.is_allocated

    def function(ctx, out, *args):
        d = ctx.device
        result = _apply(overload, passing, d, args)
        if allocates:
            out[0] = require_copy(ctx, result)
        else:
            alias(out, d).copy_(result)
        return SUCCESS

    _register(name, function, overload, copied=not allocates)


def inplace_function(name: str, method) -> None:
    """``name(ctx, input, *others)`` applying an in-place ATen op to the input: ``method``, the op's name (the
    overload its arguments select, all passed by position), or the overload itself, which is then called with
    its keyword-only arguments by name and Generators converted (Note [Table-made functions])."""
    if isinstance(method, str):
        packet = getattr(aten, method)

        def function(ctx, input, *args):
            d = ctx.device
            packet(alias(input, d), *(_alias(a, d) for a in args))
            return SUCCESS

        _register(name, function, packet)
        return
    overload = method
    # the Tensor method where there is one: it selects ``overload`` from the same arguments, and faster
    call = getattr(torch.Tensor, overload._overloadpacket.__name__, overload)
    passing = _passing(name, overload, 1)

    def applies(ctx, input, *args):
        d = ctx.device
        _apply(call, passing, d, args, alias(input, d))
        return SUCCESS

    _register(name, applies, overload)


def foreach_function(name: str, overload) -> None:
    """``name`` applying the _foreach_ ``overload`` to its aliased arguments: in place when the proto's first
    parameter is a written Tensor[]; functional when it is ``outs``, storing new dipu tensors there.

    It is called through torch's C++ binding of the op, which picks the overload the arguments' kinds select
    (Note [Calling ATen from kernels]); the registration checks the proto against ``overload`` itself.
    """
    bound = getattr(fast_aten, overload._overloadpacket.__name__)
    functional = FUNCTIONS[name].params[0].name == "outs"
    # the proto's last parameter stands for the op's keyword-only argument where it has one (alpha, memory_format)
    (keyword,) = [a.name for a in overload._schema.arguments if a.kwarg_only] or [None]

    def function(ctx, *args):
        d = ctx.device
        if functional:
            outs, args = args[0], args[1:]
        native = [alias_tensors(a, d) for a in args]
        result = bound(*native[:-1], **{keyword: native[-1]}) if keyword else bound(*native)
        if functional:
            outs[0] = [require_copy(ctx, r) for r in result]
        return SUCCESS

    _register(name, function, overload)
