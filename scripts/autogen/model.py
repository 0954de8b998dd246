"""The typed model the generator works on. Everything is frozen: parsing builds it once."""

from __future__ import annotations

import dataclasses

from torchgen.model import FunctionSchema

from . import proto

Function = proto.Function


@dataclasses.dataclass(frozen=True)
class CallArg:
    """One argument of an ``interface:`` call: a name (argument or output) or a literal."""

    name: str | None
    literal: object = None

    @property
    def text(self) -> str:
        return self.name if self.name is not None else repr(self.literal)


@dataclasses.dataclass(frozen=True)
class Call:
    """``diopiAdd(ctx, out, self, other, alpha)``, checked against the DIOPI proto."""

    function: Function
    args: tuple[CallArg, ...]  # without ctx
    number_args: tuple[str, ...] = ()  # schema Tensors passed as Scalars: this call is for Python numbers


@dataclasses.dataclass(frozen=True)
class Entry:
    """One entry of diopi_functions.yaml."""

    line: int
    schema: FunctionSchema
    interface: Call | None  # None with impl, which names only the function
    function: Function  # the DIOPI function the entry calls
    scalar_interface: Call | None
    outputs: tuple[str, ...]  # names the interface uses for what the op returns or writes
    writes: tuple[str, ...]  # arguments updated in place that the schema does not annotate (running stats)
    shape: str  # an inference rule in dipu/ops/shapes.py, or "meta"
    impl: str | None  # dotted name of a custom kernel body
    variants: tuple[str, ...]  # kinds to generate, in "out", "functional", "inplace"
    autocompare: bool
    fallback: bool
    register: bool

    @property
    def name(self) -> str:
        return op_name(self.schema)


def op_name(schema: FunctionSchema) -> str:
    overload = schema.name.overload_name
    return f"{schema.name.name}.{overload}" if overload else str(schema.name.name)
