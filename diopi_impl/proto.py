"""The DIOPI proto: one typed declaration per standard function.

Every function takes the context first, then its outputs, then its inputs, then
its attributes, in DIOPI's naming (``diopiAdd``, ``diopiReluInp``, ...). An op
library implements a subset of these (see ``dipu.diopi.OpLibrary``), and the
generator checks each ``interface:`` call in ``diopi_functions.yaml`` against
them, so this file is the contract between the two. It imports nothing heavy:
the generator reads it without loading torch's device machinery.

Note [Python values in DIOPI calls]
DIOPI in C passes handles and plain structs; here a tensor is the dipu tensor
itself (the library builds whatever native view it needs, e.g. a zero-copy
alias), a scalar is a Python number, a size list a sequence of ints, an enum
the value ATen uses (reduction: 0 none, 1 mean, 2 sum; rounding mode: None,
"trunc" or "floor"; a torch.memory_format), a dtype a torch.dtype and a
generator a dipu torch.Generator or None for the device default. Optional
parameters take None.

Note [Outputs a function allocates]
Outputs whose shape depends on the data (nonzero, masked_select, unique) are
``Alloc`` parameters: the caller passes a one-element list and the function
stores ``ctx.require_tensor(sizes, dtype)`` into it, which is C DIOPI's
``diopiTensorHandle_t* out`` filled through ``diopiRequireTensor``.
"""

from __future__ import annotations

import dataclasses
import enum


class Kind(enum.Enum):
    TENSOR = "Tensor"  # read only
    TENSOR_OUT = "Tensor(a!)"  # written: an output, or an input updated in place
    TENSOR_ALLOC = "Tensor*"  # see Note [Outputs a function allocates]
    TENSOR_LIST = "Tensor[]"
    SCALAR = "Scalar"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    SIZE = "int[]"
    STRING = "str"
    DTYPE = "ScalarType"
    GENERATOR = "Generator"
    REDUCTION = "reduction"
    ROUNDING_MODE = "rounding mode"
    MEMORY_FORMAT = "memory format"

    @property
    def is_tensor(self) -> bool:
        return self in _TENSOR_KINDS

    @property
    def is_output(self) -> bool:
        return self in (Kind.TENSOR_OUT, Kind.TENSOR_ALLOC)


_TENSOR_KINDS = frozenset({Kind.TENSOR, Kind.TENSOR_OUT, Kind.TENSOR_ALLOC, Kind.TENSOR_LIST})


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    optional: bool = False

    def __str__(self) -> str:
        return f"{self.kind.value}{'?' if self.optional else ''} {self.name}"


@dataclasses.dataclass(frozen=True)
class Function:
    """A DIOPI function; the context parameter ``ctx`` is implicit and always first."""

    name: str
    params: tuple[Param, ...]

    @property
    def param_names(self) -> tuple[str, ...]:
        return ("ctx",) + tuple(p.name for p in self.params)

    def __str__(self) -> str:
        return f"{self.name}(ctx, {', '.join(map(str, self.params))})"


def _param(kind: Kind):
    def make(name: str, optional: bool = False) -> Param:
        return Param(name, kind, optional)

    return make


In, Out, Alloc, Tensors = (_param(k) for k in (Kind.TENSOR, Kind.TENSOR_OUT, Kind.TENSOR_ALLOC, Kind.TENSOR_LIST))
Scalar, Int, Float, Bool, Sizes = (_param(k) for k in (Kind.SCALAR, Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.SIZE))
String, Dtype, Gen = (_param(k) for k in (Kind.STRING, Kind.DTYPE, Kind.GENERATOR))
Reduction, RoundingMode, MemoryFormat = (_param(k) for k in (Kind.REDUCTION, Kind.ROUNDING_MODE, Kind.MEMORY_FORMAT))


def _binary(name: str, *attrs: Param) -> list[Function]:
    """``diopiX(out, input, other, ...)`` and ``diopiXScalar`` with a Scalar ``other``."""
    return [
        Function(name, (Out("out"), In("input"), In("other"), *attrs)),
        Function(name + "Scalar", (Out("out"), In("input"), Scalar("other"), *attrs)),
    ]


def _unary(*names: str) -> list[Function]:
    return [Function(name, (Out("out"), In("input"))) for name in names]


_DECLARATIONS = [
    # ---- elementwise ----------------------------------------------------------
    *_binary("diopiAdd", Scalar("alpha")),
    *_binary("diopiSub", Scalar("alpha")),
    *_binary("diopiMul"),
    *_binary("diopiDiv", RoundingMode("rounding_mode", optional=True)),
    *_binary("diopiEq"), *_binary("diopiNe"), *_binary("diopiLt"),
    *_binary("diopiLe"), *_binary("diopiGt"), *_binary("diopiGe"),
    *_unary("diopiNeg", "diopiAbs", "diopiSqrt", "diopiRsqrt", "diopiExp", "diopiLog", "diopiTanh", "diopiSigmoid"),
    Function("diopiWhere", (Out("out"), In("condition"), In("input"), In("other"))),
    Function("diopiAddcmul", (Out("out"), In("input"), In("tensor1"), In("tensor2"), Scalar("value"))),
    Function("diopiAddcdiv", (Out("out"), In("input"), In("tensor1"), In("tensor2"), Scalar("value"))),
    Function("diopiLerpScalar", (Out("out"), In("input"), In("end"), Scalar("weight"))),
    Function("diopiMaskedFillInp", (Out("input"), In("mask"), In("value"))),
    Function("diopiMaskedFillInpScalar", (Out("input"), In("mask"), Scalar("value"))),
    Function("diopiTriu", (Out("out"), In("input"), Int("diagonal"))),
    # ---- activations ----------------------------------------------------------
    Function("diopiRelu", (Out("out"), In("input"))),
    Function("diopiReluInp", (Out("input"),)),
    Function("diopiThresholdBackward", (Out("grad_input"), In("grad_output"), In("input"), Scalar("threshold"))),
    Function("diopiGelu", (Out("out"), In("input"), String("approximate"))),
    Function("diopiGeluBackward", (Out("grad_input"), In("grad_output"), In("input"), String("approximate"))),
    Function("diopiSoftmax", (Out("out"), In("input"), Int("dim"))),
    Function("diopiSoftmaxBackward", (Out("grad_input"), In("grad_output"), In("output"), Int("dim"))),
    Function("diopiLogSoftmax", (Out("out"), In("input"), Int("dim"))),
    Function("diopiLogSoftmaxBackward", (Out("grad_input"), In("grad_output"), In("output"), Int("dim"))),
    # ---- reductions (the output's shape says whether dims are kept) ---------------
    Function("diopiSum", (Out("out"), In("input"), Sizes("dim", optional=True))),
    Function("diopiMean", (Out("out"), In("input"), Sizes("dim", optional=True))),
    Function("diopiMax", (Out("max"), Out("max_indices"), In("input"), Int("dim"))),
    Function("diopiMaxAll", (Out("max"), In("input"))),
    # ---- indexing, joining, creation -----------------------------------------------
    Function("diopiCat", (Out("out"), Tensors("tensors"), Int("dim"))),
    Function("diopiIndexSelect", (Out("out"), In("input"), Int("dim"), In("index"))),
    Function("diopiArange", (Out("out"), Scalar("start"), Scalar("end"), Scalar("step"))),
    Function("diopiNonzero", (Alloc("out"), In("input"))),
    Function("diopiMaskedSelect", (Alloc("out"), In("input"), In("mask"))),
    Function("diopiUnique", (
        Alloc("out"), Alloc("inverse"), Alloc("counts"), In("input"), Int("dim", optional=True),
        Bool("sorted"), Bool("return_inverse"), Bool("return_counts"))),
    Function("diopiEmbedding", (
        Out("out"), In("weight"), In("indices"), Int("padding_idx"), Bool("scale_grad_by_freq"), Bool("sparse"))),
    Function("diopiEmbeddingBackward", (
        Out("out"), In("grad"), In("indices"), Int("num_weights"), Int("padding_idx"), Bool("scale_grad_by_freq"))),
    # ---- linear algebra ----------------------------------------------------------
    Function("diopiMm", (Out("out"), In("input"), In("mat2"))),
    Function("diopiBmm", (Out("out"), In("input"), In("mat2"))),
    Function("diopiAddmm", (Out("out"), In("input"), In("mat1"), In("mat2"), Scalar("beta"), Scalar("alpha"))),
    # ---- convolution, pooling, normalization ------------------------------------------
    Function("diopiConvolution2d", (
        Out("out"), In("input"), In("weight"), In("bias", optional=True),
        Sizes("stride"), Sizes("padding"), Sizes("dilation"), Int("groups"))),
    Function("diopiConvolution2dBackward", (
        Out("grad_input", optional=True), Out("grad_weight", optional=True), Out("grad_bias", optional=True),
        In("grad_output"), In("input"), In("weight"),
        Sizes("stride"), Sizes("padding"), Sizes("dilation"), Int("groups"))),
    Function("diopiMaxPool2dWithIndices", (
        Out("out"), Out("indices"), In("input"),
        Sizes("kernel_size"), Sizes("stride"), Sizes("padding"), Sizes("dilation"), Bool("ceil_mode"))),
    Function("diopiMaxPool2dBackward", (
        Out("grad_input"), In("grad_output"), In("input"),
        Sizes("kernel_size"), Sizes("stride"), Sizes("padding"), Sizes("dilation"), Bool("ceil_mode"), In("indices"))),
    Function("diopiAvgPool2d", (
        Out("out"), In("input"), Sizes("kernel_size"), Sizes("stride"), Sizes("padding"),
        Bool("ceil_mode"), Bool("count_include_pad"), Int("divisor_override", optional=True))),
    Function("diopiAvgPool2dBackward", (
        Out("grad_input"), In("grad_output"), In("input"), Sizes("kernel_size"), Sizes("stride"), Sizes("padding"),
        Bool("ceil_mode"), Bool("count_include_pad"), Int("divisor_override", optional=True))),
    Function("diopiAdaptiveAvgPool2d", (Out("out"), In("input"), Sizes("output_size"))),
    Function("diopiAdaptiveAvgPool2dBackward", (Out("grad_input"), In("grad_output"), In("input"))),
    Function("diopiBatchNorm", (
        Out("out"), Out("save_mean"), Out("save_invstd"), In("input"), In("weight", optional=True),
        In("bias", optional=True), Out("running_mean", optional=True), Out("running_var", optional=True),
        Bool("training"), Float("momentum"), Float("eps"))),
    Function("diopiBatchNormBackward", (
        Out("grad_input", optional=True), Out("grad_weight", optional=True), Out("grad_bias", optional=True),
        In("grad_output"), In("input"), In("weight", optional=True), In("running_mean", optional=True),
        In("running_var", optional=True), In("save_mean", optional=True), In("save_invstd", optional=True),
        Bool("training"), Float("eps"))),
    Function("diopiLayerNorm", (
        Out("out"), Out("save_mean"), Out("save_invstd"), In("input"), In("weight", optional=True),
        In("bias", optional=True), Sizes("normalized_shape"), Float("eps"))),
    Function("diopiLayerNormBackward", (
        Out("grad_input", optional=True), Out("grad_weight", optional=True), Out("grad_bias", optional=True),
        In("grad_output"), In("input"), In("weight", optional=True), In("bias", optional=True),
        In("mean"), In("rstd"), Sizes("normalized_shape"))),
    # ---- losses ----------------------------------------------------------------
    Function("diopiNLLLossV2", (
        Out("out"), Out("total_weight"), In("input"), In("target"), In("weight", optional=True),
        Reduction("reduction"), Int("ignore_index"))),
    Function("diopiNLLLossV2Backward", (
        Out("grad_input"), In("grad_output"), In("input"), In("target"), In("weight", optional=True),
        In("total_weight"), Reduction("reduction"), Int("ignore_index"))),
    Function("diopiMSELoss", (Out("out"), In("input"), In("target"), Reduction("reduction"))),
    Function("diopiMSELossBackward", (
        Out("grad_input"), In("grad_output"), In("input"), In("target"), Reduction("reduction"))),
    # ---- random (generator None: the device's default generator) -------------------------
    Function("diopiDropout", (Out("out"), Out("mask"), In("input"), Float("p"), Bool("train", optional=True), Gen("generator", optional=True))),
    Function("diopiDropoutBackward", (Out("grad_input"), In("grad_output"), In("mask"), Float("scale"))),
    Function("diopiBernoulliScalar", (Out("out"), Float("p"), Gen("generator", optional=True))),
    Function("diopiUniformInp", (Out("inout"), Float("from_"), Float("to"), Gen("generator", optional=True))),
    Function("diopiNormalInp", (Out("inout"), Float("mean"), Float("std"), Gen("generator", optional=True))),
    # ---- coverage: pointwise math, comparisons, logical/bitwise, activations and their backwards ----
    # ---- coverage: reductions, sorting, indexing, joining, shape ops, nn layers and losses ----
    # ---- coverage: optimizers (_foreach_, fused Adam), AMP, random ----
]

#: Every declared function by name.
FUNCTIONS: dict[str, Function] = {f.name: f for f in _DECLARATIONS}
assert len(FUNCTIONS) == len(_DECLARATIONS), "a DIOPI function is declared twice"
