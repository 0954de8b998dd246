"""The Python wrappers (wrappers.py): one factory per kernel, binding the op library's functions.

Note [Generated wrappers]
A wrapper is built by a factory (``make_add_out(op, diopiAdd, diopiAddScalar)``) that binds the op library's
functions when the kernels are registered, so a call pays for closure reads, not for lookups. Per call a
wrapper: guards the device of its first tensor, dumps its arguments (DIPU_DUMP_OP_ARGS, read once per call into
a local), checks devices (DIPU_CHECK_TENSOR_DEVICE), allocates its outputs from a shape rule (functional),
resizes them (out=) or checks them (in-place), refuses written memory that overlaps as the CPU does
(``check_written_memory``, Note [Overlapping memory] in dipu/csrc/overlap.cpp), calls the DIOPI function,
handles a failed status, synchronizes (DIPU_SYNC_EXEC_MODE) and dumps its results. A Python number where the
schema says Tensor is retried as a tensor, at no cost to tensors (Note [Python numbers in Tensor positions] in
dipu/kernels/support.py); any other exception is raised as the CPU raises it when the CPU rejects the arguments
too (Note [Errors of the CPU's type], there). Its helpers come from dipu.kernels.support only, its rules from
dipu/ops/shape_rules.py and dipu/ops/meta_rules.py. What only the debug switches and a failed status need
(dumping, device checks, synchronizing, on_failure) is two functions of the module (``checked_args``,
``finished``) behind the same flag tests a wrapper made inline, so the fast path pays nothing for the shorter
wrappers.

This module turns each Kernel into the Python it needs (names, signature, expressions); the template
(templates/wrappers.py.j2) lays them out, choosing blocks by the kernel's Allocation.
"""

from __future__ import annotations

import dataclasses
import keyword

from torchgen.model import Argument, BaseTy, BaseType, FunctionSchema, ListType, OptionalType

from ..kernels import is_tensor_list
from ..model import Allocation, Call, Kernel, SpecError, StrideRule, op_name
from ..shape_rules import RUNTIME_MODULE

TEMPLATE = "wrappers.py.j2"
_TENSOR = BaseType(BaseTy.Tensor)


@dataclasses.dataclass(frozen=True)
class Branch:
    """``status = <call>``, made when ``test`` holds (the last branch has none)."""

    test: str
    call: str


@dataclasses.dataclass(frozen=True)
class Wrapper:
    """What the template prints for one kernel."""

    schema: str
    factory: str  # "make_add_Tensor"
    factory_params: str  # "op, diopiAdd, diopiAddScalar"
    wrapper: str  # "dipu_add_Tensor"
    signature: str
    device_expr: str
    device_args: str
    number_guard: bool  # device_expr reads a Tensor argument a Python number may stand in
    args_tuple: str
    fallback_args: str
    fallback_kwargs: str
    retries_numbers: bool  # a Tensor input may be a Python number: retry it as a tensor
    allocation: str  # Allocation's name
    outputs: tuple[str, ...]
    shape_call: str  # "shape_binary(self, other, alpha)"
    contiguous_test: str  # "" when the outputs are always contiguous
    strides_call: str
    branches: tuple[Branch, ...]  # the DIOPI calls; empty for impl kernels
    impl_call: str
    result: str
    overlap_check: str  # "" but for out= kernels: check_written_memory(op, outputs, tensor inputs, ...)


@dataclasses.dataclass(frozen=True)
class ModuleRule:
    """``<name> = <value>``: a shape or stride rule made once, at import."""

    name: str
    value: str


def values(kernels: list[Kernel]) -> dict:
    """The template's values for wrappers.py."""
    imports: set[tuple[str, str, str]] = set()
    meta_rules: set[str] = set()
    rules: set[ModuleRule] = set()
    wrappers = [_wrapper(kernel, imports, meta_rules, rules) for kernel in kernels]
    return dict(
        wrappers=wrappers,
        meta_rules=", ".join(sorted(meta_rules)),
        imports=sorted(imports),
        rules=sorted(rules, key=lambda r: r.name),
    )


def py(name: str) -> str:
    """A schema argument's Python name (``from`` is a keyword)."""
    return name + "_" if keyword.iskeyword(name) else name


def _wrapper(kernel: Kernel, imports: set, meta_rules: set, rules: set) -> Wrapper:
    schema, entry = kernel.schema, kernel.entry
    suffix = kernel.name.replace(".", "_")
    inputs = ", ".join(py(a.name) for a in schema.arguments.flat_non_out)
    several = len(kernel.outputs) > 1
    shape_call = strides_call = ""
    if kernel.shape is not None:
        if kernel.shape.rule is not None:
            name = f"shape_{kernel.shape.rule.name}"
            imports.add((RUNTIME_MODULE, kernel.shape.rule.name, name))
        else:
            reference = kernel.shape.meta_of
            name = "meta_" + op_name(reference).replace(".", "_")
            meta_rules.add("meta")
            rules.add(ModuleRule(name, f"meta({_overload(reference)}, {_kwarg_names(reference)!r}, {several})"))
        shape_call = f"{name}({inputs})"
    if kernel.strides is not None:
        name = "strides_" + suffix
        rule = kernel.strides.rule
        meta_rules.add(rule.value)
        if rule is StrideRule.ELEMENTWISE:
            value = f"{rule.value}()"
        elif rule is StrideRule.META:
            value = f"{rule.value}({_overload(schema)}, {_kwarg_names(schema)!r}, {several})"
        elif rule is StrideRule.CONTIGUOUS:
            value = rule.value
        else:
            position = [a.name for a in schema.arguments.flat_non_out].index(kernel.strides.argument)
            value = f"{rule.value}({position}, {several})"
        rules.add(ModuleRule(name, value))
        strides_call = f"{name}({inputs})"

    branches: tuple[Branch, ...] = ()
    impl_call, result = "", "None"
    if entry.impl is not None:
        impl_name = "impl_" + entry.impl.replace(".", "_")
        module, _, function = entry.impl.rpartition(".")
        imports.add((module, function, impl_name))
        functions = ", ".join(f.name for f in kernel.functions)
        impl_call = f"{impl_name}({functions}, contexts[d], {inputs})"
        result = "result"
    else:
        assert entry.interface is not None, "an entry without impl has an interface (spec._fit)"
        renamed = dict(kernel.renamed)
        main = _call(entry.interface, renamed)
        if entry.scalar_interface is None:
            branches = (Branch("", main),)
        else:
            test = " and ".join(f"isinstance({py(n)}, Tensor)" for n in entry.scalar_interface.number_args)
            branches = (Branch(test, main), Branch("", _call(entry.scalar_interface, renamed)))
        returned = [f"{o}[0]" if kernel.allocation is Allocation.BY_FUNCTION else o for o in kernel.outputs]
        if schema.returns:  # `-> ()`: _foreach_*_ and the fused optimizer steps return None
            result = returned[0] if len(returned) == 1 else f"({', '.join(returned)})"

    device_expr, device_args, device_arg = _device(schema)
    fallback_args = _tuple(py(a.name) for a in schema.arguments.flat_positional) \
        if schema.arguments.flat_positional else "()"
    fallback_kwargs = "{" + ", ".join(f"{a.name!r}: {a.name}" for a in list(schema.arguments.flat_kwarg_only)
                                      + list(schema.arguments.out)) + "}"
    overlap_check = ""
    written = kernel.checked_writes
    if written:
        read = [py(a.name) for a in schema.arguments.flat_non_out
                if "Tensor" in str(a.type) and a.name not in written]
        overlap_check = (f"check_written_memory(op, {_tuple(py(n) for n in written)}, "
                         f"{_tuple(read) if read else '()'}, {fallback_args}, {fallback_kwargs})")
    elif kernel.checked_written_lists:
        lists = kernel.checked_written_lists
        read = [py(a.name) for a in schema.arguments.flat_all if "Tensor" in str(a.type) and a.name not in lists]
        overlap_check = (f"check_written_lists(op, {_tuple(py(n) for n in lists)}, "
                         f"{_tuple(read) if read else '()'}, {fallback_args}, {fallback_kwargs})")
    return Wrapper(
        schema=str(schema), factory=f"make_{suffix}", wrapper=f"dipu_{suffix}",
        factory_params=", ".join(("op", *(f.name for f in kernel.functions))),
        signature=_signature(schema), device_expr=device_expr, device_args=device_args,
        number_guard=device_arg in kernel.tensor_inputs,
        args_tuple=_tuple(py(a.name) for a in schema.arguments.flat_all),
        fallback_args=fallback_args, fallback_kwargs=fallback_kwargs,
        retries_numbers=bool(kernel.tensor_inputs),
        allocation=kernel.allocation.name, outputs=kernel.outputs, shape_call=shape_call,
        contiguous_test=_contiguous_test(schema, kernel.number_args) if kernel.strides is not None else "",
        strides_call=strides_call, branches=branches, impl_call=impl_call, result=result,
        overlap_check=overlap_check)


def _tuple(names) -> str:
    names = list(names)
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


def _kwarg_names(schema: FunctionSchema) -> tuple[str, ...]:
    return tuple(a.name for a in schema.arguments.flat_kwarg_only)


def _default(arg: Argument) -> str:
    text = arg.default
    if text in ("True", "False", "None"):
        return text
    if text.startswith(('"', "'")):
        return repr(text[1:-1])
    if text.startswith("["):
        return repr(tuple(int(v) for v in text[1:-1].split(",") if v.strip()))
    try:
        number = int(text)
    except ValueError:
        try:
            return repr(float(text))
        except ValueError:
            return f"torch.{text}"  # dtypes and memory formats
    size = arg.type.size if isinstance(arg.type, ListType) else None
    return repr((number,) * size) if size else repr(number)


def _signature(schema: FunctionSchema) -> str:
    parts = []
    for arg in schema.arguments.flat_positional:
        parts.append(py(arg.name) + (f"={_default(arg)}" if arg.default is not None else ""))
    kwarg_only = list(schema.arguments.flat_kwarg_only) + list(schema.arguments.out)
    if kwarg_only:
        parts.append("*")
    for arg in kwarg_only:
        if keyword.iskeyword(arg.name):
            raise SpecError(f"{op_name(schema)}: keyword-only argument '{arg.name}' is a Python keyword")
        parts.append(arg.name + (f"={_default(arg)}" if arg.default is not None else ""))
    return ", ".join(parts)


def _device(schema: FunctionSchema) -> tuple[str, str, str]:
    """The expression giving the device, the tensors to search when it is a CPU scalar, and the
    argument the expression reads."""
    args = schema.arguments.flat_all
    tensors = [py(a.name) for a in args if a.type.is_tensor_like()]
    for arg in args:
        if arg.type == _TENSOR:
            return f"{py(arg.name)}.get_device()", ", ".join(tensors), arg.name
        if is_tensor_list(arg) and not isinstance(arg.type, OptionalType):
            return f"{py(arg.name)}[0].get_device()", ", ".join(tensors), arg.name
    raise SpecError(f"{op_name(schema)}: no tensor argument to take the device from")


def _call(call: Call, renamed: dict[str, str]) -> str:
    args = ", ".join(renamed.get(a.name, py(a.name)) if a.name is not None else repr(a.literal) for a in call.args)
    return f"{call.function.name}(contexts[d], {args})"


def _contiguous_test(schema: FunctionSchema, numbers: tuple[str, ...]) -> str:
    """An expression true when every tensor argument is contiguous: the fast path of Note [Output strides]
    in dipu/ops/meta_rules.py. An argument a scalar_interface takes may be a Python number."""
    tests = []
    for arg in schema.arguments.flat_non_out:
        name = py(arg.name)
        if arg.type == _TENSOR:
            tests.append(f"(not isinstance({name}, Tensor) or {name}.is_contiguous())" if arg.name in numbers
                         else f"{name}.is_contiguous()")
        elif arg.type == OptionalType(_TENSOR):
            tests.append(f"({name} is None or {name}.is_contiguous())")
        elif is_tensor_list(arg):
            tests.append(f"all_contiguous({name})" if not isinstance(arg.type, OptionalType)
                         else f"({name} is None or all_contiguous({name}))")
    return " and ".join(tests)


def _overload(schema: FunctionSchema) -> str:
    packet, _, overload = op_name(schema).partition(".")
    overload = overload or "default"
    return f"getattr(torch.ops.aten.{packet}, {overload!r})" if keyword.iskeyword(overload) \
        else f"torch.ops.aten.{packet}.{overload}"


__all__ = ["TEMPLATE", "values"]
