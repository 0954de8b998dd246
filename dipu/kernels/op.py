"""The record of one generated aten kernel, as the generator describes it (a leaf: no dipu imports)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from torch import Tensor


@dataclasses.dataclass(frozen=True)
class Op:
    """One generated aten kernel, as the generator describes it."""

    name: str  # "add.out"
    diopi: str  # the DIOPI function it calls, "diopiAdd"
    functions: tuple[str, ...]  # what the factory needs: the main function first, then the others it calls
    make: Callable  # factory(op, *functions) -> kernel
    arg_names: tuple[str, ...]  # schema argument names, in order
    written: tuple[str, ...]  # arguments the op writes (out, self of an in-place op, running stats)
    outputs: tuple[str, ...]  # names of what it returns
    kind: str  # "out", "functional" or "inplace"
    entry: str = ""  # the spec entry it was generated from ("add.out" for add.Tensor); "" means ``name``
    tensor_inputs: tuple[str, ...] = ()  # Tensor inputs a Python number may stand in, made a tensor first
    # (Note [Python numbers in Tensor positions]; not those a scalar_interface passes as numbers)
    number_args: tuple[str, ...] = ()  # a Python number in any of these selects ``scalar_diopi`` over ``diopi``
    scalar_diopi: str = ""  # the spec's scalar_interface function ("diopiAddScalar"); "" if it has none
    autocompare: bool = True
    fallback: bool = True
    register: bool = True

    @property
    def wrapper_name(self) -> str:
        return "dipu_" + self.name.replace(".", "_")

    def diopi_for(self, values: dict) -> str:
        """The DIOPI function a call with these arguments (name -> value) runs: the wrapper calls
        ``scalar_diopi`` unless every one of ``number_args`` is a tensor."""
        if self.scalar_diopi and not all(isinstance(values.get(name), Tensor) for name in self.number_args):
            return self.scalar_diopi
        return self.diopi
