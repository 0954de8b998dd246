"""The typed model the generator works on.

Note [The generator's model]
As in torchgen's model.py: parsing builds the model once and nothing changes it afterwards (every record is
a frozen dataclass), and closed sets are enums, so a misspelt kind fails where it is written rather than
deciding nothing. The stages and their records:

  spec.py (YAML; calls.py parses ``interface:``)  ->  Entry, one per spec entry, bound to the installed
                                                      torch's schema of its op (schemas.py)
  kernels.py                                      ->  Kernel, one per aten kernel to generate, with every
                                                      decision about it taken (how its outputs are made,
                                                      its shape and stride rules, which calls it makes)
  dest/<output>.py                                ->  the text of one generated file: the Python wrappers,
                                                      the op table (the C plug-in issues add more)

A record says what a kernel does, never how an output spells it: Python syntax is the emitters' business.
"""

from __future__ import annotations

import dataclasses
import enum

from torchgen.model import FunctionSchema, SchemaKind

from .proto import Function


class SpecError(Exception):
    """A problem with the op spec; the text names ``<file>:<line>`` and the entry."""


class Variant(enum.Enum):
    """The kinds of aten kernel an entry generates; the values are what the spec's ``variants:`` and the op
    table say."""

    OUT = "out"
    FUNCTIONAL = "functional"
    INPLACE = "inplace"

    @staticmethod
    def of(schema: FunctionSchema) -> Variant | None:
        """The variant ``schema`` is; None for torchgen's other kinds (mutable, scratch), which dipu does not
        generate."""
        return _VARIANT_OF_KIND.get(schema.kind())


_VARIANT_OF_KIND = {SchemaKind.out: Variant.OUT, SchemaKind.functional: Variant.FUNCTIONAL,
                    SchemaKind.inplace: Variant.INPLACE}


@dataclasses.dataclass(frozen=True)
class ShapeRule:
    """A named shape rule of dipu/ops/shape_rules.py (the table is scripts/autogen/shape_rules.py)."""

    name: str
    elementwise: bool = False  # broadcasts its tensor operands like TensorIterator: Note [Output strides]


class StrideRule(enum.Enum):
    """How a functional output's strides are inferred when an input is not contiguous (Note [Output strides]
    in dipu/ops/meta_rules.py); each is a function there."""

    ELEMENTWISE = "elementwise_strides"  # TensorIterator's strides, for elementwise shape rules
    META = "meta_strides"  # the op's meta kernel
    CONTIGUOUS = "contiguous_strides"  # ``strides: contiguous`` in the spec
    FORMAT_OF = "format_of_strides"  # ``strides: {format_of: <argument>}`` in the spec


@dataclasses.dataclass(frozen=True)
class Strides:
    """A stride rule and, for FORMAT_OF, the argument whose memory format the first output takes."""

    rule: StrideRule
    argument: str | None = None


@dataclasses.dataclass(frozen=True)
class CallArg:
    """One argument of an ``interface:`` call: a name (argument or output) or a literal."""

    name: str | None
    literal: object = None


@dataclasses.dataclass(frozen=True)
class Call:
    """``diopiAdd(ctx, out, self, other, alpha)``, checked against the DIOPI proto."""

    function: Function
    args: tuple[CallArg, ...]  # without ctx
    number_args: tuple[str, ...] = ()  # schema Tensors passed as Scalars: this call is for Python numbers


@dataclasses.dataclass(frozen=True)
class Entry:
    """One entry of diopi_functions.yaml, bound to the installed torch's schema of its op."""

    line: int
    schema: FunctionSchema
    interface: Call | None  # None with impl, which names only the function
    function: Function  # the DIOPI function the entry calls
    scalar_interface: Call | None
    calls: tuple[Function, ...]  # with impl: further DIOPI functions the kernel is given
    outputs: tuple[str, ...]  # names the interface uses for what the op returns or writes
    writes: tuple[str, ...]  # arguments updated in place that the schema does not annotate (running stats)
    shape: ShapeRule | None  # None: the general rule, the op's meta kernel
    strides: Strides | None  # the spec's ``strides:``; None: chosen from the shape rule
    impl: str | None  # dotted name of a custom kernel body
    variants: tuple[Variant, ...]  # kinds to generate, in Variant order
    autocompare: bool
    fallback: bool
    register: bool

    @property
    def name(self) -> str:
        return op_name(self.schema)


class Allocation(enum.Enum):
    """How a kernel comes by its outputs before the call."""

    NONE = enum.auto()  # impl kernels allocate their own; in-place kernels without a shape rule
    BY_FUNCTION = enum.auto()  # the DIOPI function allocates them (TENSOR_ALLOC parameters)
    NEW = enum.auto()  # functional: new tensors from the shape rule (and the stride rule)
    RESIZE = enum.auto()  # out=: the given tensors, resized to the shape rule's answer
    CHECK = enum.auto()  # in-place: self, checked against the shape rule's answer


@dataclasses.dataclass(frozen=True)
class ShapeSource:
    """Where a kernel's output shapes come from: a named rule, or the meta kernel of ``meta_of``."""

    rule: ShapeRule | None
    meta_of: FunctionSchema | None = None


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One aten kernel to generate, every decision taken."""

    schema: FunctionSchema
    entry: Entry
    variant: Variant
    outputs: tuple[str, ...]  # what it returns, in order (``self`` for in-place kernels)
    allocation: Allocation
    shape: ShapeSource | None  # None: the kernel needs no shape rule
    strides: Strides | None  # for NEW outputs when an input may be non-contiguous; None: always contiguous
    renamed: tuple[tuple[str, str], ...]  # interface names the kernel spells otherwise (out -> self)
    number_args: tuple[str, ...]  # Tensor arguments a scalar_interface takes as Python numbers
    written: tuple[str, ...]  # arguments it writes: outputs, self of an in-place op, ``writes:``
    tensor_inputs: tuple[str, ...]  # Tensor inputs a Python number may stand in and no scalar call takes

    @property
    def name(self) -> str:
        return op_name(self.schema)

    @property
    def checked_writes(self) -> tuple[str, ...]:
        """The tensors whose memory the wrappers check against the inputs' before the call (Note [Overlapping
        memory] in dipu/csrc/overlap.cpp): an out= kernel's outputs, an in-place kernel's self, () for the rest.
        Written lists are checked element by element instead (``checked_written_lists``)."""
        arguments = self.schema.arguments
        if self.variant is Variant.OUT:
            written = tuple(arguments.out)
        elif self.variant is Variant.INPLACE and arguments.self_arg is not None:
            written = (arguments.self_arg.argument,)
        else:
            return ()
        return () if any(a.type.is_list_like() for a in written) else tuple(a.name for a in written)

    @property
    def checked_written_lists(self) -> tuple[str, ...]:
        """The tensor lists the op writes (a _foreach_ step's self, a fused optimizer's states, out= lists), which
        the wrappers check element by element before the call: the CPU runs such an op one element at a time, so
        element i may not overlap itself or share memory with element i of the other lists or with a tensor read
        whole (Note [Written lists overlapping])."""
        return tuple(a.name for a in self.schema.arguments.flat_all
                     if a.annotation is not None and a.annotation.is_write and a.type.is_list_like())

    @property
    def functions(self) -> tuple[Function, ...]:
        """What the registry binds, in order: the main function, the scalar variant, an impl's calls."""
        scalar = (self.entry.scalar_interface.function,) if self.entry.scalar_interface is not None else ()
        return (self.entry.function, *scalar, *self.entry.calls)


def op_name(schema: FunctionSchema) -> str:
    overload = schema.name.overload_name
    return f"{schema.name.name}.{overload}" if overload else str(schema.name.name)
