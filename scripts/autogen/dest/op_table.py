"""The op table (__init__.py): one ``Op`` record per kernel, which the registry (dipu.kernels) registers."""

from __future__ import annotations

import dataclasses

from ..model import Kernel

TEMPLATE = "__init__.py.j2"


@dataclasses.dataclass(frozen=True)
class Row:
    """One ``Op(...)`` of the table, its fields as the template prints them."""

    name: str
    diopi: str
    functions: tuple[str, ...]  # what the factory binds: the main function first (Kernel.functions)
    factory: str
    arg_names: tuple[str, ...]
    written: tuple[str, ...]
    outputs: tuple[str, ...]
    kind: str
    entry: str
    tensor_inputs: tuple[str, ...]  # see Note [Python numbers in Tensor positions] in dipu/kernels/support.py
    number_args: tuple[str, ...]  # arguments whose being a Python number selects the scalar function
    scalar_diopi: str  # that function ("" without a scalar_interface)
    off: tuple[str, ...]  # the flags (autocompare, fallback, register) the entry turns off


def values(kernels: list[Kernel], torch_version: str, unmatched: dict[str, str]) -> dict:
    """The template's values for __init__.py."""
    return dict(
        rows=[_row(kernel) for kernel in kernels],
        torch_version=torch_version,
        unmatched=[(repr(name), repr(reason)) for name, reason in sorted(unmatched.items())],
    )


def _row(kernel: Kernel) -> Row:
    entry = kernel.entry
    return Row(
        name=kernel.name, diopi=entry.function.name, functions=tuple(f.name for f in kernel.functions),
        factory="make_" + kernel.name.replace(".", "_"),
        arg_names=tuple(a.name for a in kernel.schema.arguments.flat_all), written=kernel.written,
        outputs=kernel.outputs, kind=kernel.variant.value, entry=entry.name, tensor_inputs=kernel.tensor_inputs,
        number_args=kernel.number_args,
        scalar_diopi=entry.scalar_interface.function.name if entry.scalar_interface is not None else "",
        off=tuple(flag for flag in ("autocompare", "fallback", "register") if not getattr(entry, flag)))
