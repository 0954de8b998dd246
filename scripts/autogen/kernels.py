"""Expand spec entries into the aten kernels to generate, deciding what each one's code does.

Note [Generated wrappers]
Every decision about a wrapper is taken here, in Python, and handed to the
template as finished lines: the template only substitutes and loops. A
wrapper is built by a factory (``make_add_out(op, diopiAdd, diopiAddScalar)``)
that binds the op library's functions when the kernels are registered, so a
call pays for closure reads, not for lookups. Per call a wrapper: guards the
device of its first tensor, dumps its arguments (DIPU_DUMP_OP_ARGS, read once
per call into a local), checks devices (DIPU_CHECK_TENSOR_DEVICE), allocates
its outputs from a shape rule (functional), resizes them (out=) or checks them
(in-place), calls the DIOPI function, handles a failed status, synchronizes
(DIPU_SYNC_EXEC_MODE) and dumps its results. A Python number where the schema
says Tensor is retried as a tensor, at no cost to tensors (Note [Python
numbers in Tensor positions] in dipu/hooks.py).
"""

from __future__ import annotations

import dataclasses
import keyword

from torchgen.model import Argument, BaseTy, BaseType, FunctionSchema, ListType, OptionalType

from . import proto
from .model import Call, Entry, op_name
from .spec import SpecError, siblings

Kind = proto.Kind


@dataclasses.dataclass(frozen=True)
class Wrapper:
    """One generated kernel: everything the templates print, already decided."""

    name: str  # "add.Tensor"
    entry: str  # the spec entry it is generated from: "add.out"
    wrapper: str  # "dipu_add_Tensor"
    factory: str  # "make_add_Tensor"
    factory_params: str  # "op, diopiAdd, diopiAddScalar"
    schema: str
    signature: str
    device_expr: str
    device_args: str
    number_guard: bool  # device_expr reads a Tensor argument a Python number may stand in
    args_tuple: str
    body: tuple[str, ...]
    fallback_args: str
    fallback_kwargs: str
    result: str
    # what the op table in __init__ describes
    diopi: str
    functions: tuple[str, ...]
    arg_names: tuple[str, ...]
    written: tuple[str, ...]
    outputs: tuple[str, ...]
    tensor_inputs: tuple[str, ...]  # see Note [Python numbers in Tensor positions] in dipu/hooks.py
    kind: str
    flags: str  # ", autocompare=False, ..." for the flags that are not at their default
    # module-level lines the kernel needs
    imports: tuple[str, ...]
    rules: tuple[str, ...]  # module-level shape and stride rules


def py(name: str) -> str:
    """A schema argument's Python name (``from`` is a keyword)."""
    return name + "_" if keyword.iskeyword(name) else name


def _tuple(names) -> str:
    names = list(names)
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


def _default(arg: Argument) -> str:
    text = arg.default
    if text in ("True", "False", "None"):
        return text
    if text.startswith('"') or text.startswith("'"):
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


def _is_tensor(arg: Argument) -> bool:
    return arg.type == BaseType(BaseTy.Tensor)


def _is_tensor_list(arg: Argument) -> bool:
    t = arg.type.elem if isinstance(arg.type, OptionalType) else arg.type
    return isinstance(t, ListType) and t.elem == BaseType(BaseTy.Tensor)


def _device(schema: FunctionSchema) -> tuple[str, str, str]:
    """The expression giving the device, the tensors to search when it is a CPU scalar, and the
    argument the expression reads."""
    args = schema.arguments.flat_all
    tensors = [py(a.name) for a in args if a.type.is_tensor_like()]
    for arg in args:
        if _is_tensor(arg):
            return f"{py(arg.name)}.get_device()", ", ".join(tensors), arg.name
        if _is_tensor_list(arg) and not isinstance(arg.type, OptionalType):
            return f"{py(arg.name)}[0].get_device()", ", ".join(tensors), arg.name
    raise SpecError(f"{op_name(schema)}: no tensor argument to take the device from")


def _tensor_inputs(schema: FunctionSchema, written: tuple[str, ...], numbers: tuple[str, ...]) -> tuple[str, ...]:
    """The Tensor and Tensor? inputs a Python number may arrive in and no scalar_interface takes."""
    return tuple(a.name for a in schema.arguments.flat_all
                 if a.type in (BaseType(BaseTy.Tensor), OptionalType(BaseType(BaseTy.Tensor)))
                 and a.name not in written and a.name not in numbers)


def _call(call: Call, function_param: str, rename: dict[str, str]) -> str:
    args = ", ".join(rename.get(a.name, py(a.name)) if a.name is not None else a.text for a in call.args)
    return f"{function_param}(contexts[d], {args})"


def _contiguous_test(schema: FunctionSchema, numbers: tuple[str, ...]) -> str:
    """An expression true when every tensor argument is contiguous: the fast path of Note [Output strides]
    in dipu/ops/shapes.py. An argument a scalar_interface takes may be a Python number."""
    tests = []
    for arg in schema.arguments.flat_non_out:
        name = py(arg.name)
        if arg.type == BaseType(BaseTy.Tensor):
            tests.append(f"(not isinstance({name}, Tensor) or {name}.is_contiguous())" if arg.name in numbers
                         else f"{name}.is_contiguous()")
        elif arg.type == OptionalType(BaseType(BaseTy.Tensor)):
            tests.append(f"({name} is None or {name}.is_contiguous())")
        elif _is_tensor_list(arg):
            tests.append(f"all_contiguous({name})" if not isinstance(arg.type, OptionalType)
                         else f"({name} is None or all_contiguous({name}))")
    return " and ".join(tests)


def _overload(schema: FunctionSchema) -> str:
    packet, _, overload = op_name(schema).partition(".")
    overload = overload or "default"
    return f"getattr(torch.ops.aten.{packet}, {overload!r})" if keyword.iskeyword(overload) \
        else f"torch.ops.aten.{packet}.{overload}"


def _written(schema: FunctionSchema, writes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(a.name for a in schema.arguments.flat_all
                 if a.annotation is not None and a.annotation.is_write or a.name in writes)


def expand(entry: Entry, where: str) -> list[Wrapper]:
    """The kernels ``entry`` generates: itself and, for out= schemas, its functional and in-place siblings."""
    found = siblings(entry.schema)
    schemas = {"out": entry.schema, **{k: v for k, v in found.items() if k != "out"}} \
        if entry.schema.kind().name == "out" else {entry.schema.kind().name: entry.schema}
    return [_wrapper(entry, kind, schemas[kind], found.get("functional"), where) for kind in entry.variants]


def _wrapper(entry: Entry, kind: str, schema: FunctionSchema, functional: FunctionSchema | None,
             where: str) -> Wrapper:
    name = op_name(schema)
    suffix = name.replace(".", "_")
    outputs = entry.outputs if kind != "inplace" else ("self",)
    inputs = [py(a.name) for a in schema.arguments.flat_non_out]
    imports, rules, body = [], [], []
    allocated_names = set()
    if entry.interface is not None:
        for arg, param in zip(entry.interface.args, entry.interface.function.params):
            if param.kind == Kind.TENSOR_ALLOC and arg.name is not None:
                allocated_names.add(arg.name)

    # ---- the shape rule --------------------------------------------------------------------
    needs_rule = entry.impl is None and (kind == "out" or (kind == "functional" and not allocated_names)
                                         or (kind == "inplace" and entry.shape != "meta"
                                             and entry.schema.kind().name == "out"))
    rule = None
    if needs_rule:
        if entry.shape != "meta":
            rule = f"shape_{entry.shape}"
            imports.append(f"from dipu.ops.shapes import {entry.shape} as {rule}")
        else:
            reference = schema if kind == "functional" else functional
            if reference is None:
                raise SpecError(f"{where}: needs a shape rule: there is no functional variant to run on meta tensors")
            rule = "meta_" + op_name(reference).replace(".", "_")
            kwarg_names = tuple(a.name for a in reference.arguments.flat_kwarg_only)
            rules.append(f"{rule} = meta({_overload(reference)}, {kwarg_names!r}, {len(outputs) > 1})")
    rule_call = f"{rule}({', '.join(inputs)})" if rule else None
    numbers = entry.scalar_interface.number_args if entry.scalar_interface is not None else ()

    # ---- the stride rule of a functional output (Note [Output strides] in dipu/ops/shapes.py) ----------------
    contiguous = _contiguous_test(schema, numbers) if kind == "functional" and rule_call else ""
    if contiguous:
        stride_rule = "strides_" + suffix
        kwarg_names = tuple(a.name for a in schema.arguments.flat_kwarg_only)
        rules.append(f"{stride_rule} = strides({entry.shape!r}, {_overload(schema)}, {kwarg_names!r}, "
                     f"{len(outputs) > 1})")
        strides_call = f"{stride_rule}({', '.join(inputs)})"

    # ---- outputs ---------------------------------------------------------------------------
    if kind == "functional" and entry.impl is None:
        if allocated_names:
            if set(outputs) != allocated_names:
                raise SpecError(f"{where}: mixes outputs the function allocates with ones it does not")
            body += [f"{o} = [None]" for o in outputs]
        elif len(outputs) == 1:
            body.append(f"shape, dtype = {rule_call}")
            if contiguous:
                body += [f"if {contiguous}:", f"    {outputs[0]} = empty(shape, dtype, d)", "else:",
                         f"    {outputs[0]} = empty_strided(shape, dtype, d, {strides_call})"]
            else:
                body.append(f"{outputs[0]} = empty(shape, dtype, d)")
        elif contiguous:
            body += [f"if {contiguous}:", f"    {', '.join(outputs)} = allocate({rule_call}, d)", "else:",
                     f"    {', '.join(outputs)} = allocate_strided({rule_call}, {strides_call}, d)"]
        else:
            body.append(f"{', '.join(outputs)} = allocate({rule_call}, d)")
    elif kind == "out" and entry.impl is None:
        if allocated_names:
            raise SpecError(f"{where}: outputs the function allocates need a functional schema")
        if len(outputs) == 1:
            body += [f"shape, dtype = {rule_call}", f"if {outputs[0]}.shape != shape:",
                     f"    {outputs[0]}.resize_(shape)"]
        else:
            body.append(f"resize_outputs({_tuple(outputs)}, {rule_call})")
    elif kind == "inplace" and rule_call is not None:
        body += [f"shape, dtype = {rule_call}", "if shape != self.shape:",
                 "    check_inplace_shape(op, self, shape)"]

    # ---- the call ----------------------------------------------------------------------------
    functions = (entry.function.name,)
    if entry.impl is not None:
        impl_name = "impl_" + entry.impl.replace(".", "_")
        module, _, function = entry.impl.rpartition(".")
        imports.append(f"from {module} import {function} as {impl_name}")
        body.append(f"status, result = {impl_name}({entry.function.name}, contexts[d], {', '.join(inputs)})")
        result = "result"
    else:
        rename = {entry.outputs[0]: "self"} if kind == "inplace" and entry.schema.kind().name == "out" else {}
        main = _call(entry.interface, entry.function.name, rename)
        if entry.scalar_interface is None:
            body.append(f"status = {main}")
        else:
            scalar = entry.scalar_interface
            functions += (scalar.function.name,)
            test = " and ".join(f"isinstance({py(n)}, Tensor)" for n in scalar.number_args)
            body += [f"if {test}:", f"    status = {main}", "else:",
                     f"    status = {_call(scalar, scalar.function.name, rename)}"]
        returned = [f"{o}[0]" if o in allocated_names else o for o in outputs]
        if not schema.returns:  # `-> ()`: _foreach_*_ and the fused optimizer steps
            result = "None"
        else:
            result = returned[0] if len(returned) == 1 else f"({', '.join(returned)})"

    written = _written(schema, entry.writes)
    device_expr, device_args, device_arg = _device(schema)
    tensor_inputs = _tensor_inputs(schema, written, numbers)
    flags = "".join(f", {flag}=False" for flag in ("autocompare", "fallback", "register")
                    if not getattr(entry, flag))
    return Wrapper(
        name=name, entry=entry.name, wrapper=f"dipu_{suffix}", factory=f"make_{suffix}",
        factory_params=", ".join(("op",) + functions), schema=str(schema),
        signature=_signature(schema), device_expr=device_expr, device_args=device_args,
        number_guard=device_arg in tensor_inputs,
        args_tuple=_tuple(py(a.name) for a in schema.arguments.flat_all), body=tuple(body),
        fallback_args=_tuple(py(a.name) for a in schema.arguments.flat_positional) if
        schema.arguments.flat_positional else "()",
        fallback_kwargs="{" + ", ".join(f"{a.name!r}: {a.name}" for a in list(schema.arguments.flat_kwarg_only)
                                        + list(schema.arguments.out)) + "}",
        result=result, diopi=entry.function.name, functions=functions,
        arg_names=tuple(a.name for a in schema.arguments.flat_all), written=written,
        outputs=tuple(outputs), tensor_inputs=tensor_inputs, kind=kind, flags=flags, imports=tuple(imports), rules=tuple(rules))
