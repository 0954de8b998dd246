"""The C form of the DIOPI proto: the C parameters of each proto function.

Note [The C form of a proto function]
A vendor's C library implements the proto functions with DIOPI's C types (the runtime types of
``diopi/diopirt.h``), and dipu calls them by position, so each proto parameter has exactly one C form,
decided here and nowhere else (the header, the comparison with DeepLink's proto and the callers that
build C arguments all read ``c_parameters``):

- the context ``diopiContextHandle_t ctx`` comes first;
- a tensor read is ``diopiConstTensorHandle_t``, a tensor written ``diopiTensorHandle_t``, an optional
  one may be NULL; an output the function allocates (Note [Outputs a function allocates]) is
  ``diopiTensorHandle_t*``, filled through ``diopiRequireTensor``;
- a list (tensors read or written, scalars) is a pointer to its first element; consecutive lists share
  one length, an ``int64_t`` right after the last of them (``diopiCat(ctx, out, tensors, num_tensors,
  dim)``, the fused optimizers' ``params, grads, ..., state_steps, num_params``), as in DeepLink's proto;
  a list of allocated outputs (``outs`` of the _foreach_ functions) has the length of the lists it
  goes with;
- a Scalar is ``const diopiScalar_t*`` (NULL for None); an int ``int64_t``, a float ``double``, a bool
  ``bool``, a dtype ``diopiDtype_t``, each passed by pointer (NULL for None) when optional;
- a size list is ``diopiSize_t`` by value (an optional one is None when its ``data`` is NULL);
- a string is ``const char*`` (NULL for None), a generator ``diopiGeneratorHandle_t`` (NULL: the
  device's default), a reduction ``diopiReduction_t``, a rounding mode ``diopiRoundMode_t``, a memory
  format ``diopiMemoryFormat_t``;
- where DeepLink's proto fixes another C type for a parameter, the proto says so (``Param.c_type``):
  ``diopiConvolution2dBackward``'s ``bias_sizes`` is a ``diopiSize_t*`` (NULL: no bias),
  ``diopiAmpUpdateScaleInp``'s ``growth_interval`` an ``int32_t``.
"""

from __future__ import annotations

import dataclasses

from dipu.diopi.proto import Function, Kind, Param

_LISTS = (Kind.TENSOR_LIST, Kind.TENSOR_LIST_OUT, Kind.SCALAR_LIST)
_BY_VALUE = {
    Kind.TENSOR: "diopiConstTensorHandle_t",
    Kind.TENSOR_OUT: "diopiTensorHandle_t",
    Kind.TENSOR_ALLOC: "diopiTensorHandle_t*",
    Kind.TENSOR_ALLOC_LIST: "diopiTensorHandle_t*",
    Kind.TENSOR_LIST: "diopiConstTensorHandle_t*",
    Kind.TENSOR_LIST_OUT: "diopiTensorHandle_t*",
    Kind.SCALAR: "const diopiScalar_t*",
    Kind.SCALAR_LIST: "const diopiScalar_t*",
    Kind.INT: "int64_t",
    Kind.FLOAT: "double",
    Kind.BOOL: "bool",
    Kind.SIZE: "diopiSize_t",
    Kind.STRING: "const char*",
    Kind.DTYPE: "diopiDtype_t",
    Kind.GENERATOR: "diopiGeneratorHandle_t",
    Kind.REDUCTION: "diopiReduction_t",
    Kind.ROUNDING_MODE: "diopiRoundMode_t",
    Kind.MEMORY_FORMAT: "diopiMemoryFormat_t",
}
_POINTER_WHEN_OPTIONAL = {Kind.INT: "const int64_t*", Kind.FLOAT: "const double*", Kind.BOOL: "const bool*",
                          Kind.DTYPE: "const diopiDtype_t*"}


@dataclasses.dataclass(frozen=True)
class CParam:
    """One C parameter; ``param`` is the proto parameter it passes (None for a list's length)."""

    type: str
    name: str
    param: Param | None

    def __str__(self) -> str:
        return f"{self.type} {self.name}"


def c_type(param: Param) -> str:
    """The C type of one proto parameter (Note [The C form of a proto function])."""
    if param.c_type is not None:
        return param.c_type
    if param.optional and param.kind in _POINTER_WHEN_OPTIONAL:
        return _POINTER_WHEN_OPTIONAL[param.kind]
    return _BY_VALUE[param.kind]


def c_parameters(function: Function) -> list[CParam]:
    """The C parameters of ``function``, context first, lists followed by their shared length."""
    result = [CParam("diopiContextHandle_t", "ctx", None)]
    params = function.params
    first_of_run = None  # the first list of the run of lists being read: its length names the run's
    for index, param in enumerate(params):
        result.append(CParam(c_type(param), param.name, param))
        if param.kind not in _LISTS:
            continue
        first_of_run = first_of_run or param.name
        if index + 1 == len(params) or params[index + 1].kind not in _LISTS:
            result.append(CParam("int64_t", f"num_{first_of_run}", None))
            first_of_run = None
    return result

