"""The torch op library in C++ (aten_library.cpp): each DIOPI function the Python ``torch`` library pairs
with one ATen overload, as a C function calling that overload through ``at::_ops``.

Note [The ATen library in C++]
Most functions of the Python ``torch`` op library (diopi_impl/torch) alias their handles as tensors of
the vendor's ``native_device_type`` and apply one ATen overload, and they say which
(``library.register(..., aten=...)``, every table-made function: Note [Table-made functions] in
diopi_impl/torch/_table.py); ``OpLibrary.aten`` records the overload each applies. This emitter turns
that pairing into C++: ``diopiAdd(ctx, out, input, other, alpha)`` makes the native aliases (Note [Native
aliases in C++] in diopi_impl/torch_cpp/support.h), converts DIOPI's C values to the overload's C++ types
and calls ``at::_ops::add_out::call``. The functions have the C ABI of dipu/include/diopi/functions.h
(the generated file includes it, so the compiler checks every definition against its declaration), so the
result is an ordinary C op library: dipu loads it as it loads ref_c, lays it over the Python library, and
the generated C++ wrappers call it without Python (Note [Generated C++ wrappers] in cpp_wrappers.py).

A function that allocates its outputs (a functional ``_foreach_`` one) applies the functional overload and stores
its results in new dipu tensors from the call's context, as the Python library's ``require_copy`` does; one that
copies a functional overload's result into its output (Note [Copies of a functional result] in
diopi_impl/torch/_table.py) copies it into the output's alias (``tc::copy_into``); one random function draws from
the native generator behind the dipu generator it is given (Note [Native generators] in dipu/csrc/hooks.cpp), as the
Python library's ``native_generator`` does.

The pairing is read from the loaded Python library, not from this generator's own data, so the C++
library applies exactly what the Python reference applies and a function added to a table is in the next
build. A pairing the C++ side cannot call (several allocated outputs, a parameter kind without a
conversion here) is left out, and its Python function keeps serving it: :func:`explain` says
why for each.

Note [ATen's CPU kernels without the dispatcher]
On the CPU alias type a call through ``at::_ops`` costs the dispatcher's lookup and its profiling hook
(about 130 instructions of a tiny op's 10,500) to reach a kernel that torch also exports directly:
``at::cpu::add_outf`` is the kernel ``add.out`` dispatches to on the CPU (torch's
``ATen/ops/<op>_cpu_dispatch.h``). Where that header declares the overload's function with exactly the
parameter types torchgen gives the schema (``CpuKernels`` reads the installed torch's headers; a name and
an arity are not enough: ``remainder``'s Scalar overload is composite, its Tensor one is not), the generated
function calls it when every alias is a plain CPU tensor (``tc::plain_cpu``): a conjugate or negative bit,
or any other key a caller's CPU tensor may carry, needs the dispatcher's handling, as does every other alias
device (CUDA), so those keep the ``at::_ops`` call. Below the dipu kernel nothing else of the dispatcher
applies: autograd is already excluded there, and a user's CPU autocast has no business with its aliases.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from torchgen import local
from torchgen.api import cpp
from torchgen.model import BaseTy, BaseType, FunctionSchema, ListType, OptionalType, SchemaKind

from .. import proto
from ..proto import CParam, Function, Kind
from .c_header import c_parameters

TEMPLATE = "aten_library.cpp.j2"
#: The local holding the call's device, which the aliases are checked against.
DEVICE = "device"


#: The Scalar overloads that ATen makes by copying a functional result into out -> the Tensor overload applied
#: instead, with the Scalar (the second argument) as a wrapped number.
WRAPPED_NUMBER = {"add.Scalar_out": "add_out", "sub.Scalar_out": "sub_out", "mul.Scalar_out": "mul_out",
                  "div.Scalar_mode_out": "div_out_mode"}


class Unsupported(Exception):
    """A pairing the C++ library cannot call; its text says why."""


@dataclasses.dataclass(frozen=True)
class CFunction:
    """What the template prints for one DIOPI function."""

    name: str  # "diopiAdd"
    schema: str  # the ATen overload applied
    header: str  # "add" (ATen/ops/add_ops.h)
    parameters: str  # the C parameters after the context
    locals: tuple[str, ...]  # the written tensors' aliases, lists
    call: str  # at::_ops::add_out::call(...)
    cpu_header: bool  # it may call at::cpu:: (ATen/ops/add_cpu_dispatch.h)


class CpuKernels:
    """The functions torch's ``ATen/ops/<op>_cpu_dispatch.h`` headers under ``include`` declare, by op: name -> the
    parameter types of each overload, spaces removed (Note [ATen's CPU kernels without the dispatcher]).
    ``declared`` stands in for the headers (the golden test's fixed set)."""

    _DECLARATION = re.compile(r"^TORCH_API .*?(\w+)\((.*)\);$", re.M)

    def __init__(self, include: Path | None = None, declared: dict[str, dict[str, set[tuple]]] | None = None):
        self.include = include
        self.declared = dict(declared or {})

    def __call__(self, op: str) -> dict[str, set[tuple[str, ...]]]:
        if op not in self.declared:
            header = self.include / "ATen" / "ops" / f"{op}_cpu_dispatch.h" if self.include else None
            found: dict[str, set[tuple[str, ...]]] = {}
            if header is not None and header.is_file():
                for name, params in self._DECLARATION.findall(header.read_text()):
                    found.setdefault(name, set()).add(tuple(_parameter_type(p) for p in _split_parameters(params)))
            self.declared[op] = found
        return self.declared[op]


def _split_parameters(text: str) -> list[str]:
    """A C++ parameter list's parameters: split at its commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "<({[":
            depth += 1
        elif char in ">)}]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]] if text.strip() else []


def _parameter_type(parameter: str) -> str:
    """``const at::Tensor & self=...`` -> ``constat::Tensor&``: the type without its name and default, unspaced."""
    declared = parameter.split("=", 1)[0].strip()
    return re.sub(r"\s+", "", re.sub(r"\w+$", "", declared))


#: A pairing: (DIOPI function, ATen schema[, the arguments it derives -> their rules]) (Note [Derived arguments] in
#: dipu/diopi/library.py).
Pairing = tuple


def _parts(pairing: Pairing) -> tuple[Function, FunctionSchema, dict[str, str]]:
    function, schema, *derived = pairing
    return function, FunctionSchema.parse(schema), dict(derived[0]) if derived else {}


#: Note [Derived arguments] in dipu/diopi/library.py: each rule in C++, from the first output's and the first tensor
#: input's aliases.
DERIVATIONS = {"kept_dims": "tc::kept_dims({out}, {input})", "output_dtype": "{out}.scalar_type()", "false": "false"}


def values(pairings: list[Pairing], cpu_kernels: CpuKernels | None = None) -> dict:
    """The template's values: a C function for each (DIOPI function, ATen schema) pairing it can call."""
    functions = []
    for pairing in sorted(pairings, key=lambda p: p[0].name):
        try:
            functions.append(_function(*_parts(pairing), cpu_kernels))
        except Unsupported:
            continue
    return dict(functions=functions, headers=sorted({f.header for f in functions}),
                cpu_headers=sorted({f.header for f in functions if f.cpu_header}))


def explain(pairings: list[Pairing]) -> dict[str, str]:
    """DIOPI function -> why the C++ library leaves it to the Python one, for those it leaves."""
    reasons = {}
    for pairing in pairings:
        try:
            _function(*_parts(pairing), None)
        except Unsupported as why:
            reasons[pairing[0].name] = str(why)
    return reasons


def _cpu_function(schema: FunctionSchema, cpu_kernels: CpuKernels | None, number=None) -> str | None:
    """The at::cpu:: function the overload dispatches to on the CPU, where torch declares it (Note [ATen's CPU
    kernels without the dispatcher]); None otherwise. ``number``: the argument passed as a wrapped number."""
    if cpu_kernels is None:
        return None
    name, arguments = schema.name.name, schema.arguments.flat_all
    symint = any("SymInt" in str(a.type) for a in arguments)
    function: str | None
    if schema.is_out_fn():
        function = f"{name.base}{'_symint' if symint else ''}_outf"
    elif name.inplace:
        function = None if symint else f"{name.base}_"
    else:
        function = f"{name.base}{'_symint' if symint else ''}"
    with local.parametrize(use_const_ref_for_mutable_tensors=False, use_ilistref_for_tensor_lists=False):
        types = tuple(re.sub(r"\s+", "", cpp.argumenttype_type(
            BaseType(BaseTy.Tensor) if a is number else a.type, mutable=a.is_write, binds=a.name,
            symint=True).cpp_type()) for a in arguments)
    return function if function is not None and types in cpu_kernels(name.base).get(function, ()) else None


def _function(function: Function, schema: FunctionSchema, derived: dict[str, str],
              cpu_kernels: CpuKernels | None) -> CFunction:
    arguments = schema.arguments
    outs = list(arguments.out)
    inputs = [a for a in arguments.flat_all if a not in outs and a.name not in derived]
    params = list(function.params)
    allocated = [p for p in params if p.kind.is_allocated]
    if allocated:  # a functional overload whose one result (a tensor or a list) becomes the allocated outputs
        returned = ListType(BaseType(BaseTy.Tensor), None) if allocated[0].kind is Kind.TENSOR_ALLOC_LIST \
            else BaseType(BaseTy.Tensor)
        if len(allocated) != 1 or params[0] is not allocated[0] or outs or len(schema.returns) != 1 or \
                schema.returns[0].type != returned:
            raise Unsupported("it allocates its outputs otherwise than as the overload's one result")
        params = params[1:]
    copied = None  # the output a functional overload's result is copied into (Note [Copies of a functional result])
    if not allocated and schema.kind() is SchemaKind.functional and params and params[0].kind is Kind.TENSOR_OUT:
        if len(schema.returns) != 1 or schema.returns[0].type != BaseType(BaseTy.Tensor):
            raise Unsupported("it copies into its output a result other than one tensor")
        copied, params = params[0], params[1:]
    if len(params) != len(outs) + len(inputs):
        raise Unsupported("its parameters do not take the overload's arguments one by one")
    lengths = {p.param.name: name for p, name in _list_lengths(function)}
    # a list-taking function's CPU tensors (a step count, a Tensor of scalars) pass as alias_tensors lets them
    lenient = bool(lengths)
    by_name, locals_, aliases = {}, [], False
    # Note [Scalars as wrapped numbers] in diopi_impl/torch_cpp/support.h: the Scalar passes as the Tensor overload's
    # second argument
    wrapped = WRAPPED_NUMBER.get(str(schema.name))
    number = arguments.flat_positional[1] if wrapped else None
    cpu = _cpu_function(schema, cpu_kernels, number)
    checked = []  # the aliases tc::plain_cpu looks at before a direct CPU call
    # what a derived argument is computed from (Note [Derived arguments]): these become locals
    sources = [params[0], params[len(outs)]] if outs and len(params) > len(outs) else []
    if derived and [p.kind for p in sources] != [Kind.TENSOR_OUT, Kind.TENSOR]:
        raise Unsupported("it derives arguments but its first output and first input are not tensors")
    for param, arg in zip(params, outs + inputs):
        aten_type = BaseType(BaseTy.Tensor) if arg is number else arg.type
        expression, local, aliased = _convert(param, aten_type, lengths.get(param.name), arg.is_write, lenient)
        aliases = aliases or aliased
        if local or (cpu and aliased) or (derived and param in sources):
            locals_.append(f"auto {param.name}_a = {expression};")
            expression = f"{param.name}_a"
            if aliased:
                checked.append(expression)
        by_name[arg.name] = expression
    for name, rule in derived.items():
        if rule not in DERIVATIONS:
            raise Unsupported(f"no C++ for the derivation rule {rule}")
        by_name[name] = DERIVATIONS[rule].format(out=f"{sources[0].name}_a", input=f"{sources[1].name}_a")
    call_args = ", ".join(by_name[a.name] for a in arguments.flat_all)
    call = f"at::_ops::{wrapped or schema.name.unambiguous_name()}::call({call_args})"
    if cpu:  # Note [ATen's CPU kernels without the dispatcher]
        call = f"(tc::plain_cpu({', '.join(checked)}) ? at::cpu::{cpu}({call_args}) : {call})"
    if allocated:  # Note [Outputs a function allocates] in dipu/diopi/context.py
        call = f"tc::require_copies(ctx, {allocated[0].name}, {call})"
    if copied is not None:  # Note [Results copied into outputs] in diopi_impl/torch_cpp/support.h
        call = f"tc::copy_into(tc::alias_of({copied.name}, {DEVICE}), {call})"
        aliases = True
    if aliases:  # the call's device, read once (Note [Native aliases in C++])
        locals_.insert(0, f"const c10::DeviceIndex {DEVICE} = tc::current_device();")
    return CFunction(
        name=function.name, schema=str(schema), header=schema.name.name.base,
        parameters=", ".join(str(p) for p in c_parameters(function)[1:]), locals=tuple(locals_), call=call,
        cpu_header=cpu is not None)


def _list_lengths(function: Function):
    """(C parameter of a list, the name of the length that follows its run of lists)."""
    run: list[CParam] = []
    for c_param in c_parameters(function)[1:]:
        if c_param.param is None:
            yield from ((p, c_param.name) for p in run)
            run = []
        elif c_param.param.kind in (Kind.TENSOR_LIST, Kind.TENSOR_LIST_OUT, Kind.SCALAR_LIST):
            run.append(c_param)


def _convert(param: proto.Param, aten_type, length: str | None, written: bool,
             lenient: bool = False) -> tuple[str, bool, bool]:
    """The C++ expression passing ``param`` as an argument of ``aten_type``, whether it must be a local (a written
    tensor binds to ``at::Tensor&``; a list's vector must outlive the call), and whether it is a native alias (or a
    list of them) checked against the call's device. ``lenient``: a CPU tensor passes as it is (alias_or_cpu)."""
    if param.kind in (Kind.TENSOR, Kind.TENSOR_OUT, Kind.TENSOR_LIST, Kind.TENSOR_LIST_OUT):
        return (*_convert_tensor(param, aten_type, length, written, lenient), True)
    expression, local = _convert_value(param, aten_type, length, written)
    return expression, local, False


def _convert_tensor(param: proto.Param, aten_type, length: str | None, written: bool,
                    lenient: bool) -> tuple[str, bool]:
    name, kind = param.name, param.kind
    optional = isinstance(aten_type, OptionalType)
    base = aten_type.elem if optional else aten_type
    if isinstance(base, ListType):
        if base.elem == BaseType(BaseTy.Tensor) and kind in (Kind.TENSOR_LIST, Kind.TENSOR_LIST_OUT) and not optional:
            return f"tc::aliases_of({name}, {length}, {DEVICE})", True
    elif base == BaseType(BaseTy.Tensor) and kind in (Kind.TENSOR, Kind.TENSOR_OUT):
        if optional:
            return f"tc::optional_alias({name}, {DEVICE})", False
        return f"tc::{'alias_or_cpu' if lenient else 'alias_of'}({name}, {DEVICE})", written
    raise Unsupported(f"{param} as {aten_type}")


def _convert_value(param: proto.Param, aten_type, length: str | None, written: bool) -> tuple[str, bool]:
    name, kind = param.name, param.kind
    optional = isinstance(aten_type, OptionalType)
    base = aten_type.elem if optional else aten_type
    if isinstance(base, ListType):
        element = base.elem
        if element == BaseType(BaseTy.Scalar) and kind is Kind.SCALAR_LIST and not optional:
            return f"tc::scalars({name}, {length})", True
        if element in (BaseType(BaseTy.int), BaseType(BaseTy.SymInt)) and kind is Kind.SIZE:
            sym = "sym_" if element == BaseType(BaseTy.SymInt) else ""
            return (f"tc::optional_{sym}sizes({name})" if optional else f"tc::{sym}sizes({name})"), False
        raise Unsupported(f"{param} as {aten_type}")
    if not isinstance(base, BaseType):
        raise Unsupported(f"{param} as {aten_type}")
    ty = base.name
    if ty is BaseTy.Tensor and kind is Kind.SCALAR and not optional and not param.optional:
        return f"tc::wrapped_number({name})", False
    if optional and not param.optional and ty is not BaseTy.Tensor:
        optional_of = {BaseTy.Scalar: "at::Scalar", BaseTy.int: "int64_t", BaseTy.SymInt: "c10::SymInt",
                       BaseTy.float: "double", BaseTy.bool: "bool"}.get(ty)
        if optional_of is not None:  # a value always given where ATen would take None
            value, _ = _convert_value(param, base, length, written)
            return f"::std::optional<{optional_of}>({value})", False
    if ty is BaseTy.Scalar:
        if kind is Kind.SCALAR:
            return (f"tc::optional_scalar({name})" if param.optional else f"tc::scalar({name})"), False
        if kind in (Kind.FLOAT, Kind.INT) and not param.optional:
            return f"at::Scalar({name})", False
    if ty in (BaseTy.int, BaseTy.SymInt):
        if kind is Kind.INT:
            return (f"tc::optional_value({name})" if param.optional else name), False
        if kind is Kind.REDUCTION and not optional:
            return f"static_cast<int64_t>({name})", False
        if kind is Kind.SCALAR and not param.optional:
            return f"tc::scalar({name}).toLong()", False
    if ty is BaseTy.float:
        if kind is Kind.FLOAT:
            return (f"tc::optional_value({name})" if param.optional else name), False
        if kind is Kind.SCALAR and not param.optional:
            return f"tc::scalar({name}).toDouble()", False
    if ty is BaseTy.bool and kind is Kind.BOOL:
        return (f"tc::optional_value({name})" if param.optional else name), False
    if ty is BaseTy.str:
        if kind is Kind.ROUNDING_MODE and optional:
            return f"tc::rounding_mode({name})", False
        if kind is Kind.STRING:
            return (f"tc::optional_text({name})" if optional else f"c10::string_view({name})"), False
    if ty is BaseTy.Generator and kind is Kind.GENERATOR and optional:
        return f"tc::native_generator({name})", False
    if ty is BaseTy.ScalarType and kind is Kind.DTYPE:
        return (f"tc::optional_dtype({name})" if param.optional else f"tc::dtype({name})"), False
    raise Unsupported(f"{param} as {aten_type}")


def render(pairings: list[Pairing], source: str, cpu_kernels: CpuKernels | None = None) -> str:
    """The text of aten_library.cpp for ``pairings`` (see :func:`values`); ``cpu_kernels``: the at::cpu:: functions
    the generated ones may call directly (none without it)."""
    import jinja2

    from ..emit import TEMPLATES

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)
    return environment.get_template(TEMPLATE).render(source=source, **values(pairings, cpu_kernels))


__all__ = ["TEMPLATE", "CpuKernels", "explain", "render", "values"]
