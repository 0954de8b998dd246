"""Expand spec entries into the aten kernels to generate, deciding what each one does (Note [The generator's
model] in model.py).

An out= entry generates its functional and in-place siblings too (``variants:``). For each kernel this
decides how it comes by its outputs (Allocation), where their shapes come from (a named rule, or an op's
meta kernel) and, for new outputs, which stride rule lays them out (Note [Output strides] in
dipu/ops/meta_rules.py).
"""

from __future__ import annotations

from torchgen.model import Argument, BaseTy, BaseType, FunctionSchema, ListType, OptionalType

from . import schemas
from .model import Allocation, Entry, Kernel, ShapeSource, SpecError, StrideRule, Strides, Variant, op_name


def expand_all(entries: list[Entry], source: str) -> list[Kernel]:
    """Every kernel the entries generate, sorted by name; two entries generating one kernel is an error."""
    made: dict[str, int] = {}
    result = []
    for entry in entries:
        where = f"{source}:{entry.line}: {entry.name}"
        for kernel in expand(entry, where):
            if kernel.name in made:
                raise SpecError(f"{where}: generates {kernel.name}, which the entry at line "
                                f"{made[kernel.name]} generates too")
            made[kernel.name] = entry.line
            result.append(kernel)
    return sorted(result, key=lambda k: k.name)


def expand(entry: Entry, where: str) -> list[Kernel]:
    """The kernels ``entry`` generates: itself and, for out= schemas, its functional and in-place siblings."""
    found = schemas.siblings(entry.schema)
    own = Variant.of(entry.schema)
    assert own is not None, "spec._fit refuses the schemas that are no variant"
    by_variant: dict[Variant, FunctionSchema] = \
        {**found, own: entry.schema} if own is Variant.OUT else {own: entry.schema}
    return [_kernel(entry, variant, by_variant[variant], found.get(Variant.FUNCTIONAL), where)
            for variant in entry.variants]


def _kernel(entry: Entry, variant: Variant, schema: FunctionSchema, functional: FunctionSchema | None,
            where: str) -> Kernel:
    from_out = Variant.of(entry.schema) is Variant.OUT
    outputs = ("self",) if variant is Variant.INPLACE else entry.outputs
    allocated = _allocated_by_function(entry)
    allocation = _allocation(entry, variant, outputs, allocated, where)
    shape = None
    if allocation in (Allocation.NEW, Allocation.RESIZE, Allocation.CHECK):
        if entry.shape is not None:
            shape = ShapeSource(entry.shape)
        else:
            reference = schema if variant is Variant.FUNCTIONAL else functional
            if reference is None:
                raise SpecError(f"{where}: needs a shape rule: there is no functional variant to run on meta tensors")
            shape = ShapeSource(None, reference)
    strides = None
    if allocation is Allocation.NEW and _has_tensor_inputs(schema):
        strides = entry.strides or Strides(StrideRule.ELEMENTWISE if entry.shape is not None and entry.shape.elementwise
                                           else StrideRule.META)
    numbers = entry.scalar_interface.number_args if entry.scalar_interface is not None else ()
    written = tuple(a.name for a in schema.arguments.flat_all
                    if a.annotation is not None and a.annotation.is_write or a.name in entry.writes)
    return Kernel(
        schema=schema, entry=entry, variant=variant, outputs=outputs, allocation=allocation, shape=shape,
        strides=strides,
        renamed=((entry.outputs[0], "self"),) if variant is Variant.INPLACE and from_out else (),
        number_args=numbers, written=written,
        tensor_inputs=tuple(a.name for a in schema.arguments.flat_all
                            if a.type in (_TENSOR, OptionalType(_TENSOR))
                            and a.name not in written and a.name not in numbers))


_TENSOR = BaseType(BaseTy.Tensor)


def _allocated_by_function(entry: Entry) -> frozenset[str]:
    """The outputs the DIOPI function allocates itself (TENSOR_ALLOC parameters: nonzero, unique, ...)."""
    if entry.interface is None:
        return frozenset()
    return frozenset(arg.name for arg, param in zip(entry.interface.args, entry.interface.function.params)
                     if param.kind.is_allocated and arg.name is not None)


def _allocation(entry: Entry, variant: Variant, outputs: tuple[str, ...], allocated: frozenset[str],
                where: str) -> Allocation:
    if entry.impl is not None:
        return Allocation.NONE
    if variant is Variant.FUNCTIONAL:
        if not allocated:
            return Allocation.NEW
        if set(outputs) != allocated:
            raise SpecError(f"{where}: mixes outputs the function allocates with ones it does not")
        return Allocation.BY_FUNCTION
    if variant is Variant.OUT:
        if allocated:
            raise SpecError(f"{where}: outputs the function allocates need a functional schema")
        return Allocation.RESIZE
    # in-place: checked against a named rule; an in-place entry of its own is trusted (as ATen's are)
    return Allocation.CHECK if entry.shape is not None and Variant.of(entry.schema) is Variant.OUT \
        else Allocation.NONE


def _has_tensor_inputs(schema: FunctionSchema) -> bool:
    """Whether an input may be non-contiguous: a Tensor, Tensor? or Tensor list."""
    return any(arg.type in (_TENSOR, OptionalType(_TENSOR)) or is_tensor_list(arg)
               for arg in schema.arguments.flat_non_out)


def is_tensor_list(arg: Argument) -> bool:
    t = arg.type.elem if isinstance(arg.type, OptionalType) else arg.type
    return isinstance(t, ListType) and t.elem == _TENSOR


__all__ = ["expand", "expand_all", "is_tensor_list", "op_name"]
