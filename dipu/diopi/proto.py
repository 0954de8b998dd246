"""The DIOPI proto: one typed declaration per standard function.

Every function takes the context first, then its outputs, then its inputs, then
its attributes, in DIOPI's naming (``diopiAdd``, ``diopiReluInp``, ...). An op
library implements a subset of these (see ``dipu.diopi.OpLibrary``), and the
generator checks each ``interface:`` call in ``diopi_functions.yaml`` against
them, so this file is the contract between the two. It is a leaf: it imports
nothing, so the generator can read it without the dipu package (Note [The
generator reads the runtime's proto] in scripts/autogen/proto.py).

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
``diopiTensorHandle_t* out`` filled through ``diopiRequireTensor``. The
functional _foreach_ functions allocate one output per element of the lists
they go with: an ``Allocs`` parameter (``Tensor[]* outs``), whose one-element
list the function fills with a list of tensors; its C form is the same array
of handles, as long as those lists.
"""

from __future__ import annotations

import dataclasses
import enum
import re


class Kind(enum.Enum):
    TENSOR = "Tensor"  # read only
    TENSOR_OUT = "Tensor(a!)"  # written: an output, or an input updated in place
    TENSOR_ALLOC = "Tensor*"  # see Note [Outputs a function allocates]
    TENSOR_ALLOC_LIST = "Tensor[]*"  # as many allocated outputs as the lists it goes with have elements
    TENSOR_LIST = "Tensor[]"
    TENSOR_LIST_OUT = "Tensor(a!)[]"  # a list of tensors written in place (_foreach_*_, fused optimizers)
    SCALAR = "Scalar"
    SCALAR_LIST = "Scalar[]"  # a sequence of Python numbers (ATen's Scalar[]: _foreach_*.ScalarList)
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
        return self in (Kind.TENSOR_OUT, Kind.TENSOR_ALLOC, Kind.TENSOR_ALLOC_LIST, Kind.TENSOR_LIST_OUT)

    @property
    def is_allocated(self) -> bool:
        return self in (Kind.TENSOR_ALLOC, Kind.TENSOR_ALLOC_LIST)


_TENSOR_KINDS = frozenset({Kind.TENSOR, Kind.TENSOR_OUT, Kind.TENSOR_ALLOC, Kind.TENSOR_ALLOC_LIST,
                           Kind.TENSOR_LIST, Kind.TENSOR_LIST_OUT})


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    optional: bool = False
    # the C type where DIOPI's proto fixes another than the kind's (Note [The C form of a proto function])
    c_type: str | None = None

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
    def make(name: str, optional: bool = False, c_type: str | None = None) -> Param:
        return Param(name, kind, optional, c_type)

    return make


In, Out, Alloc, Tensors = (_param(k) for k in (Kind.TENSOR, Kind.TENSOR_OUT, Kind.TENSOR_ALLOC, Kind.TENSOR_LIST))
OutTensors, Allocs = _param(Kind.TENSOR_LIST_OUT), _param(Kind.TENSOR_ALLOC_LIST)
Scalar, Int, Float, Bool, Sizes = (_param(k) for k in (Kind.SCALAR, Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.SIZE))
Scalars = _param(Kind.SCALAR_LIST)
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
    # not DeepLink's diopiUnique (that one fills a preallocated inverse between allocated outputs)
    Function("diopiUniqueInverseCounts", (
        Alloc("out"), Alloc("inverse"), Alloc("counts"), In("input"), Int("dim", optional=True),
        Bool("sorted"), Bool("return_inverse"), Bool("return_counts"))),
    Function("diopiEmbedding", (
        Out("out"), In("weight"), In("indices"), Int("padding_idx"), Bool("scale_grad_by_freq"), Bool("sparse"))),
    Function("diopiEmbeddingBackward", (
        Out("out"), In("grad"), In("indices"), Int("num_weights"), Int("padding_idx"), Bool("scale_grad_by_freq"),
        Bool("sparse"))),
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
        In("grad_output"), In("input"), In("weight"), Sizes("bias_sizes", optional=True, c_type="diopiSize_t*"),
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
    # ---- attention: see Note [The DIOPI attention contract] in dipu/ops/attention.py --------------
    Function("diopiScaledDotProductAttention", (
        Out("out"), Out("logsumexp"), In("query"), In("key"), In("value"), In("attn_bias", optional=True),
        Float("dropout_p"), Bool("is_causal"), Float("scale"), Gen("generator", optional=True))),
    Function("diopiScaledDotProductAttentionBackward", (
        Out("grad_query", optional=True), Out("grad_key", optional=True), Out("grad_value", optional=True),
        Out("grad_attn_bias", optional=True), In("grad_out"), In("query"), In("key"), In("value"),
        In("attn_bias", optional=True), In("out"), In("logsumexp"), Float("dropout_p"), Bool("is_causal"),
        Float("scale"), Gen("generator", optional=True))),
    # ---- random (generator None: the device's default generator) -------------------------
    Function("diopiDropout", (
        Out("out"), Out("mask"), In("input"), Float("p"), Bool("train"), Gen("generator", optional=True))),
    Function("diopiDropoutBackward", (Out("grad_input"), In("grad_output"), In("mask"), Float("scale"))),
    Function("diopiBernoulliScalar", (Out("out"), Float("p"), Gen("generator", optional=True))),
    Function("diopiUniformInp", (Out("inout"), Float("from_"), Float("to"), Gen("generator", optional=True))),
    Function("diopiNormalInp", (Out("inout"), Float("mean"), Float("std"), Gen("generator", optional=True))),
    # ---- coverage: pointwise math, comparisons, logical/bitwise, activations and their backwards ----
    *(f for s in (
        "Exp2", "Expm1", "Log2", "Log10", "Log1p", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
        "Asinh", "Acosh", "Atanh", "Erf", "Erfc", "Erfinv", "Reciprocal", "Lgamma", "Digamma", "I0", "Sinc",
        "Floor", "Ceil", "Round", "Trunc", "Frac", "Sign", "Sgn", "BitwiseNot", "LogicalNot", "Silu", "Hardswish",
        "Hardsigmoid", "Mish",
    ) for f in (Function(f"diopi{s}", (Out("out"), In("input"))), Function(f"diopi{s}Inp", (Out("input"),)))),
    *_unary("diopiIsNan", "diopiIsPosInf", "diopiIsNegInf", "diopiSignbit"),
    Function("diopiRoundDecimals", (Out("out"), In("input"), Int("decimals"))),
    Function("diopiRoundDecimalsInp", (Out("input"), Int("decimals"))),
    Function("diopiNanToNum", (Out("out"), In("input"), Float("nan", optional=True),
                               Float("posinf", optional=True), Float("neginf", optional=True))),
    Function("diopiNanToNumInp", (Out("input"), Float("nan", optional=True),
                                  Float("posinf", optional=True), Float("neginf", optional=True))),
    # "Name:flags": s also a Scalar other, i also in place
    *(f for spec in (
        "Atan2:i", "Fmod:si", "Remainder:si", "Maximum:", "Minimum:", "Fmax:", "Fmin:", "Hypot:i", "Copysign:si",
        "Logaddexp:", "Logaddexp2:", "Nextafter:i", "Xlogy:si", "Heaviside:i", "Gcd:i", "Lcm:i", "FloorDivide:i",
        "LogicalAnd:i", "LogicalOr:i", "LogicalXor:i", "BitwiseAnd:si", "BitwiseOr:si", "BitwiseXor:si",
        "BitwiseLeftShift:si", "BitwiseRightShift:si",
    ) for s, flags in [spec.split(":")] for f in (
        Function(f"diopi{s}", (Out("out"), In("input"), In("other"))),
        *([Function(f"diopi{s}Scalar", (Out("out"), In("input"), Scalar("other")))] if "s" in flags else []),
        *([Function(f"diopi{s}Inp", (Out("input"), In("other")))] if "i" in flags else []),
        *([Function(f"diopi{s}InpScalar", (Out("input"), Scalar("other")))] if flags == "si" else []))),
    Function("diopiPow", (Out("out"), In("input"), Scalar("exponent"))),
    Function("diopiPowTensor", (Out("out"), In("input"), In("exponent"))),
    Function("diopiPowScalar", (Out("out"), Scalar("input"), In("exponent"))),
    Function("diopiPowInp", (Out("input"), Scalar("exponent"))),
    Function("diopiPowInpTensor", (Out("input"), In("exponent"))),
    Function("diopiLerpTensor", (Out("out"), In("input"), In("end"), In("weight"))),
    Function("diopiLerpTensorInp", (Out("input"), In("end"), In("weight"))),
    Function("diopiClamp", (Out("out"), In("input"), In("min", optional=True), In("max", optional=True))),
    Function("diopiClampScalar", (Out("out"), In("input"), Scalar("min", optional=True), Scalar("max", optional=True))),
    Function("diopiClampInp", (Out("input"), In("min", optional=True), In("max", optional=True))),
    Function("diopiClampInpScalar", (Out("input"), Scalar("min", optional=True), Scalar("max", optional=True))),
    *(f for bound in ("Min", "Max") for f in (
        Function(f"diopiClamp{bound}", (Out("out"), In("input"), In(bound.lower()))),
        Function(f"diopiClamp{bound}Scalar", (Out("out"), In("input"), Scalar(bound.lower()))),
        Function(f"diopiClamp{bound}Inp", (Out("input"), In(bound.lower()))),
        Function(f"diopiClamp{bound}InpScalar", (Out("input"), Scalar(bound.lower()))))),
    Function("diopiHardtanh", (Out("out"), In("input"), Scalar("min_val"), Scalar("max_val"))),
    Function("diopiHardtanhInp", (Out("input"), Scalar("min_val"), Scalar("max_val"))),
    Function("diopiLeakyRelu", (Out("out"), In("input"), Scalar("negative_slope"))),
    Function("diopiLeakyReluInp", (Out("input"), Scalar("negative_slope"))),
    Function("diopiElu", (Out("out"), In("input"), Scalar("alpha"), Scalar("scale"), Scalar("input_scale"))),
    Function("diopiEluInp", (Out("input"), Scalar("alpha"), Scalar("scale"), Scalar("input_scale"))),
    Function("diopiSoftplus", (Out("out"), In("input"), Scalar("beta"), Scalar("threshold"))),
    Function("diopiThreshold", (Out("out"), In("input"), Scalar("threshold"), Scalar("value"))),
    Function("diopiThresholdInp", (Out("input"), Scalar("threshold"), Scalar("value"))),
    Function("diopiSoftshrink", (Out("out"), In("input"), Scalar("lambd"))),
    Function("diopiHardshrink", (Out("out"), In("input"), Scalar("lambd"))),
    Function("diopiGlu", (Out("out"), In("input"), Int("dim"))),
    Function("diopiLogit", (Out("out"), In("input"), Float("eps", optional=True))),
    Function("diopiLogitInp", (Out("input"), Float("eps", optional=True))),
    Function("diopiLogSigmoidForward", (Out("output"), Out("buffer"), In("input"))),
    *(Function(f"diopi{s}Backward", (Out("grad_input"), In("grad_output"), In("input")))
      for s in ("Silu", "Hardsigmoid", "Hardswish")),
    *(Function(f"diopi{s}Backward", (Out("grad_input"), In("grad_output"), In("output"))) for s in ("Sigmoid", "Tanh")),
    Function("diopiHardtanhBackward", (
        Out("grad_input"), In("grad_output"), In("input"), Scalar("min_val"), Scalar("max_val"))),
    Function("diopiLeakyReluBackward", (
        Out("grad_input"), In("grad_output"), In("input"), Scalar("negative_slope"), Bool("input_is_result"))),
    Function("diopiEluBackward", (
        Out("grad_input"), In("grad_output"), In("input"), Scalar("alpha"), Scalar("scale"), Scalar("input_scale"),
        Bool("is_result"))),
    Function("diopiSoftplusBackward", (
        Out("grad_input"), In("grad_output"), In("input"), Scalar("beta"), Scalar("threshold"))),
    Function("diopiLogSigmoidBackward", (Out("grad_input"), In("grad_output"), In("input"), In("buffer"))),
    *(Function(f"diopi{s}Backward", (Out("grad_input"), In("grad_output"), In("input"), Scalar("lambd")))
      for s in ("Softshrink", "Hardshrink")),
    Function("diopiGluBackward", (Out("grad_input"), In("grad_output"), In("input"), Int("dim"))),
    Function("diopiLogitBackward", (Out("grad_input"), In("grad_output"), In("input"), Float("eps", optional=True))),
    # ---- coverage: reductions, sorting, indexing, joining, shape ops, nn layers and losses ----
    # reductions and scans (a reduction's output rank says whether dims are kept)
    Function("diopiProd", (Out("out"), In("input"), Int("dim", optional=True))),
    Function("diopiAmax", (Out("out"), In("input"), Sizes("dim"), Bool("keepdim"))),
    Function("diopiAmin", (Out("out"), In("input"), Sizes("dim"))),
    Function("diopiMin", (Out("min"), Out("min_indices"), In("input"), Int("dim"))),
    Function("diopiMinAll", (Out("min"), In("input"))),
    Function("diopiArgmax", (Out("out"), In("input"), Int("dim", optional=True), Bool("keepdim"))),
    Function("diopiArgmin", (Out("out"), In("input"), Int("dim", optional=True), Bool("keepdim"))),
    Function("diopiAny", (Out("out"), In("input"), Int("dim", optional=True))),
    Function("diopiAll", (Out("out"), In("input"), Int("dim", optional=True))),
    Function("diopiNorm", (Out("out"), In("input"), Scalar("p", optional=True), Sizes("dim", optional=True))),
    Function("diopiVar", (Out("out"), In("input"), Sizes("dim", optional=True), Scalar("correction", optional=True))),
    Function("diopiStd", (Out("out"), In("input"), Sizes("dim", optional=True), Scalar("correction", optional=True))),
    Function("diopiVarMean", (
        Out("var"), Out("mean"), In("input"), Sizes("dim", optional=True), Scalar("correction", optional=True))),
    Function("diopiStdMean", (
        Out("std"), Out("mean"), In("input"), Sizes("dim", optional=True), Scalar("correction", optional=True))),
    Function("diopiLogSumExp", (Out("out"), In("input"), Sizes("dim"))),
    Function("diopiCumsum", (Out("out"), In("input"), Int("dim"))),
    Function("diopiCumprod", (Out("out"), In("input"), Int("dim"))),
    Function("diopiCummax", (Out("values"), Out("indices"), In("input"), Int("dim"))),
    Function("diopiCummin", (Out("values"), Out("indices"), In("input"), Int("dim"))),
    Function("diopiMedian", (Out("values"), Out("indices"), In("input"), Int("dim"))),
    Function("diopiMedianAll", (Out("out"), In("input"))),
    Function("diopiAminmax", (Out("min"), Out("max"), In("input"), Int("dim", optional=True))),
    Function("diopiCountNonzero", (Out("out"), In("input"), Sizes("dim"))),
    Function("diopiTrace", (Out("out"), In("input"))),
    Function("diopiHistc", (Out("out"), In("input"), Int("bins"), Scalar("min"), Scalar("max"))),
    Function("diopiBincount", (Alloc("out"), In("input"), In("weights", optional=True), Int("minlength"))),
    # sorting and searching
    Function("diopiSort", (
        Out("values"), Out("indices"), In("input"), Int("dim"), Bool("descending"), Bool("stable", optional=True))),
    Function("diopiTopk", (
        Out("values"), Out("indices"), In("input"), Int("k"), Int("dim"), Bool("largest"), Bool("sorted"))),
    Function("diopiKthvalue", (Out("values"), Out("indices"), In("input"), Int("k"), Int("dim"))),
    Function("diopiSearchsorted", (
        Out("out"), In("sorted_sequence"), In("values"), Bool("out_int32"), Bool("right"),
        String("side", optional=True), In("sorter", optional=True))),
    Function("diopiBucketize", (Out("out"), In("input"), In("boundaries"), Bool("out_int32"), Bool("right"))),
    Function("diopiIsin", (Out("out"), In("elements"), In("test_elements"), Bool("assume_unique"), Bool("invert"))),
    Function("diopiUniqueConsecutive", (
        Alloc("out"), Alloc("inverse"), Alloc("counts"), In("input"), Int("dim", optional=True),
        Bool("return_inverse"), Bool("return_counts"))),
    # indexing (a None in ``indices`` selects the whole dim, as in ATen)
    Function("diopiIndex", (Alloc("out"), In("input"), Tensors("indices"))),
    Function("diopiIndexPut", (Out("out"), In("input"), In("values"), Tensors("indices"), Bool("accumulate"))),
    Function("diopiIndexPutInp", (Out("input"), In("values"), Tensors("indices"), Bool("accumulate"))),
    # DIOPI's order: the source before the index
    Function("diopiScatter", (
        Out("out"), In("input"), Int("dim"), In("src"), In("index"), String("reduce", optional=True))),
    Function("diopiScatterScalar", (
        Out("out"), In("input"), Int("dim"), Scalar("value"), In("index"), String("reduce", optional=True))),
    Function("diopiScatterReduce", (
        Out("out"), In("input"), Int("dim"), In("index"), In("src"), String("reduce"), Bool("include_self"))),
    Function("diopiGather", (Out("out"), In("input"), Int("dim"), In("index"))),
    Function("diopiIndexAdd", (Out("out"), In("input"), Int("dim"), In("index"), In("source"), Scalar("alpha"))),
    Function("diopiIndexCopy", (Out("out"), In("input"), Int("dim"), In("index"), In("source"))),
    Function("diopiIndexFill", (Out("out"), In("input"), Int("dim"), In("index"), In("value"))),
    Function("diopiIndexFillScalar", (Out("out"), In("input"), Int("dim"), In("index"), Scalar("value"))),
    Function("diopiIndexFillInp", (Out("input"), Int("dim"), In("index"), In("value"))),
    Function("diopiIndexFillInpScalar", (Out("input"), Int("dim"), In("index"), Scalar("value"))),
    Function("diopiMaskedScatter", (Out("out"), In("input"), In("mask"), In("source"))),
    Function("diopiTake", (Out("out"), In("input"), In("index"))),
    Function("diopiPut", (Out("out"), In("input"), In("index"), In("source"), Bool("accumulate"))),
    Function("diopiPutInp", (Out("input"), In("index"), In("source"), Bool("accumulate"))),
    Function("diopiRepeatInterleave", (Alloc("out"), In("repeats"), Int("output_size", optional=True))),
    # joining, shape ops, padding and resampling
    Function("diopiStack", (Out("out"), Tensors("tensors"), Int("dim"))),
    Function("diopiFlip", (Out("out"), In("input"), Sizes("dims"))),
    Function("diopiRoll", (Out("out"), In("input"), Sizes("shifts"), Sizes("dims"))),
    Function("diopiRepeat", (Out("out"), In("input"), Sizes("repeats_size"))),
    Function("diopiTril", (Out("out"), In("input"), Int("diagonal"))),
    Function("diopiPad", (Out("out"), In("input"), Sizes("pad"), String("mode"), Float("value", optional=True))),
    Function("diopiPadBackward", (Out("grad_input"), In("grad_output"), In("input"), Sizes("pad"), String("mode"))),
    Function("diopiUpsampleNearest1d", (Out("out"), In("input"), Sizes("size"), Float("scales", optional=True))),
    Function("diopiUpsampleNearest2d", (
        Out("out"), In("input"), Sizes("size"), Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiUpsampleNearest2dBackward", (
        Out("grad_input"), In("grad_output"), Sizes("out_size"), Sizes("in_size"),
        Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiUpsampleLinear1d", (
        Out("out"), In("input"), Sizes("size"), Bool("align_corners"), Float("scales", optional=True))),
    Function("diopiUpsampleBilinear2d", (
        Out("out"), In("input"), Sizes("size"), Bool("align_corners"),
        Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiUpsampleBilinear2dBackward", (
        Out("grad_input"), In("grad_output"), Sizes("out_size"), Sizes("in_size"), Bool("align_corners"),
        Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiIm2Col", (
        Out("out"), In("input"), Sizes("kernel_size"), Sizes("dilation"), Sizes("padding"), Sizes("stride"))),
    Function("diopiCol2Im", (
        Out("out"), In("input"), Sizes("output_size"), Sizes("kernel_size"), Sizes("dilation"), Sizes("padding"),
        Sizes("stride"))),
    # creation and linear algebra
    Function("diopiLinspace", (Out("out"), Scalar("start"), Scalar("end"), Int("steps"))),
    Function("diopiLogspace", (Out("out"), Scalar("start"), Scalar("end"), Int("steps"), Float("base"))),
    Function("diopiEye", (Out("out"), Int("n"), Int("m"))),
    Function("diopiDot", (Out("out"), In("input"), In("other"))),
    Function("diopiMv", (Out("out"), In("input"), In("vec"))),
    Function("diopiAddmv", (Out("out"), In("input"), In("mat"), In("vec"), Scalar("beta"), Scalar("alpha"))),
    Function("diopiAddbmm", (Out("out"), In("input"), In("batch1"), In("batch2"), Scalar("beta"), Scalar("alpha"))),
    Function("diopiBaddbmm", (Out("out"), In("input"), In("batch1"), In("batch2"), Float("beta"), Float("alpha"))),
    Function("diopiAddr", (Out("out"), In("input"), In("vec1"), In("vec2"), Scalar("beta"), Scalar("alpha"))),
    # nn layers and losses
    Function("diopiGroupNorm", (
        Out("out"), Out("save_mean"), Out("save_invstd"), In("input"), In("weight", optional=True),
        In("bias", optional=True), Int("num_groups"), Float("eps"))),
    Function("diopiGroupNormBackward", (
        Out("grad_input", optional=True), Out("grad_weight", optional=True), Out("grad_bias", optional=True),
        In("grad_output"), In("input"), In("weight", optional=True), In("mean"), In("rstd"), Int("num_groups"))),
    Function("diopiAdaptiveMaxPool2dWithIndices", (Out("out"), Out("indices"), In("input"), Sizes("output_size"))),
    Function("diopiAdaptiveMaxPool2dBackward", (Out("grad_input"), In("grad_output"), In("input"), In("indices"))),
    Function("diopiSmoothL1Loss", (Out("out"), In("input"), In("target"), Reduction("reduction"), Float("beta"))),
    Function("diopiSmoothL1LossBackward", (
        Out("grad_input"), In("grad_output"), In("input"), In("target"), Reduction("reduction"), Float("beta"))),
    Function("diopiHuberLoss", (Out("out"), In("input"), In("target"), Reduction("reduction"), Float("delta"))),
    Function("diopiHuberLossBackward", (
        Out("grad_input"), In("grad_output"), In("input"), In("target"), Reduction("reduction"), Float("delta"))),
    Function("diopiBCELoss", (
        Out("out"), In("input"), In("target"), In("weight", optional=True), Reduction("reduction"))),
    Function("diopiBCELossBackward", (
        Out("grad_input"), In("grad_output"), In("input"), In("target"), In("weight", optional=True),
        Reduction("reduction"))),
    Function("diopiBCEWithLogits", (
        Out("out"), In("input"), In("target"), In("weight", optional=True), In("pos_weight", optional=True),
        Reduction("reduction"))),
    # second batch: transposed convolution, nan-reductions, 3-d pooling/resampling, grid sampling, cdist
    Function("diopiConvTranspose2d", (
        Out("out"), In("input"), In("weight"), In("bias", optional=True), Sizes("stride"), Sizes("padding"),
        Sizes("output_padding"), Int("groups"), Sizes("dilation"))),
    Function("diopiConvTranspose2dBackward", (
        Out("grad_input", optional=True), Out("grad_weight", optional=True), Out("grad_bias", optional=True),
        In("grad_output"), In("input"), In("weight"), Sizes("bias_sizes", optional=True, c_type="diopiSize_t*"),
        Sizes("stride"), Sizes("padding"), Sizes("dilation"), Sizes("output_padding"), Int("groups"))),
    Function("diopiNansum", (Out("out"), In("input"), Sizes("dim", optional=True))),
    Function("diopiMode", (Out("values"), Out("indices"), In("input"), Int("dim"))),
    Function("diopiNanmedian", (Out("values"), Out("indices"), In("input"), Int("dim"))),
    Function("diopiNanmedianAll", (Out("out"), In("input"))),
    Function("diopiLogcumsumexp", (Out("out"), In("input"), Int("dim"))),
    Function("diopiCross", (Out("out"), In("input"), In("other"), Int("dim"))),
    Function("diopiRenorm", (Out("out"), In("input"), Scalar("p"), Int("dim"), Scalar("maxnorm"))),
    Function("diopiIndexReduce", (
        Out("out"), In("input"), Int("dim"), In("index"), In("source"), String("reduce"), Bool("include_self"))),
    Function("diopiMaxPool3dWithIndices", (
        Out("out"), Out("indices"), In("input"),
        Sizes("kernel_size"), Sizes("stride"), Sizes("padding"), Sizes("dilation"), Bool("ceil_mode"))),
    Function("diopiMaxPool3dBackward", (
        Out("grad_input"), In("grad_output"), In("input"),
        Sizes("kernel_size"), Sizes("stride"), Sizes("padding"), Sizes("dilation"), Bool("ceil_mode"), In("indices"))),
    Function("diopiAvgPool3d", (
        Out("out"), In("input"), Sizes("kernel_size"), Sizes("stride"), Sizes("padding"),
        Bool("ceil_mode"), Bool("count_include_pad"), Int("divisor_override", optional=True))),
    Function("diopiAvgPool3dBackward", (
        Out("grad_input"), In("grad_output"), In("input"), Sizes("kernel_size"), Sizes("stride"), Sizes("padding"),
        Bool("ceil_mode"), Bool("count_include_pad"), Int("divisor_override", optional=True))),
    Function("diopiAdaptiveAvgPool3d", (Out("out"), In("input"), Sizes("output_size"))),
    Function("diopiAdaptiveAvgPool3dBackward", (Out("grad_input"), In("grad_output"), In("input"))),
    Function("diopiUpsampleNearest3d", (
        Out("out"), In("input"), Sizes("size"), Float("scales_d", optional=True), Float("scales_h", optional=True),
        Float("scales_w", optional=True))),
    Function("diopiUpsampleTrilinear3d", (
        Out("out"), In("input"), Sizes("size"), Bool("align_corners"), Float("scales_d", optional=True),
        Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiUpsampleBicubic2d", (
        Out("out"), In("input"), Sizes("size"), Bool("align_corners"),
        Float("scales_h", optional=True), Float("scales_w", optional=True))),
    # not DeepLink's diopiGridSample(out, input, grid, mode), which has no padding mode or align_corners
    Function("diopiGridSampler", (
        Out("out"), In("input"), In("grid"), Int("interpolation_mode"), Int("padding_mode"), Bool("align_corners"))),
    Function("diopiGridSamplerBackward", (
        Out("grad_input", optional=True), Out("grad_grid", optional=True), In("grad_output"), In("input"), In("grid"),
        Int("interpolation_mode"), Int("padding_mode"), Bool("align_corners"))),
    Function("diopiCdist", (Out("out"), In("x1"), In("x2"), Float("p"), Int("compute_mode", optional=True))),
    Function("diopiCdistBackward", (Out("grad_x1"), In("grad_output"), In("x1"), In("x2"), Float("p"), In("cdist"))),
    # third batch: upsampling backwards, nearest-exact, embedding bag, pdist, multi-margin loss, max unpooling
    Function("diopiUpsampleNearest1dBackward", (
        Out("grad_input"), In("grad_output"), Sizes("out_size"), Sizes("in_size"), Float("scales", optional=True))),
    Function("diopiUpsampleLinear1dBackward", (
        Out("grad_input"), In("grad_output"), Sizes("out_size"), Sizes("in_size"), Bool("align_corners"),
        Float("scales", optional=True))),
    Function("diopiUpsampleBicubic2dBackward", (
        Out("grad_input"), In("grad_output"), Sizes("out_size"), Sizes("in_size"), Bool("align_corners"),
        Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiUpsampleNearest3dBackward", (
        Out("grad_input"), In("grad_output"), Sizes("out_size"), Sizes("in_size"), Float("scales_d", optional=True),
        Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiUpsampleTrilinear3dBackward", (
        Out("grad_input"), In("grad_output"), Sizes("out_size"), Sizes("in_size"), Bool("align_corners"),
        Float("scales_d", optional=True), Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiUpsampleNearestExact2d", (
        Out("out"), In("input"), Sizes("size"), Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiUpsampleNearestExact2dBackward", (
        Out("grad_input"), In("grad_output"), Sizes("out_size"), Sizes("in_size"),
        Float("scales_h", optional=True), Float("scales_w", optional=True))),
    Function("diopiEmbeddingBag", (
        Out("out"), Out("offset2bag"), Out("bag_size"), Out("max_indices"), In("weight"), In("indices"),
        In("offsets"), Bool("scale_grad_by_freq"), Int("mode"), Bool("sparse"),
        In("per_sample_weights", optional=True), Bool("include_last_offset"), Int("padding_idx"))),
    Function("diopiEmbeddingBagBackward", (
        Out("grad_weight"), In("grad"), In("indices"), In("offsets"), In("offset2bag"), In("bag_size"),
        In("maximum_indices"), Int("num_weights"), Bool("scale_grad_by_freq"), Int("mode"), Bool("sparse"),
        In("per_sample_weights", optional=True), Int("padding_idx"))),
    Function("diopiPdist", (Out("out"), In("input"), Float("p"))),
    Function("diopiPdistBackward", (Out("grad_input"), In("grad_output"), In("input"), Float("p"), In("pdist"))),
    Function("diopiMultiMarginLoss", (
        Out("out"), In("input"), In("target"), Scalar("p"), Scalar("margin"), In("weight", optional=True),
        Reduction("reduction"))),
    Function("diopiMultiMarginLossBackward", (
        Out("grad_input"), In("grad_output"), In("input"), In("target"), Scalar("p"), Scalar("margin"),
        In("weight", optional=True), Reduction("reduction"))),
    Function("diopiMaxUnpool2d", (Out("out"), In("input"), In("indices"), Sizes("output_size"))),
    # fourth batch: weight norm, embedding renorm, multilabel margin loss, linear-algebra decompositions
    Function("diopiWeightNorm", (Out("out"), Out("norm"), In("v"), In("g"), Int("dim"))),
    Function("diopiWeightNormBackward", (
        Out("grad_v"), Out("grad_g"), In("grad_w"), In("saved_v"), In("saved_g"), In("saved_norms"), Int("dim"))),
    Function("diopiEmbeddingRenormInp", (Out("inout"), In("indices"), Float("max_norm"), Float("norm_type"))),
    Function("diopiMultilabelMarginLoss", (
        Out("out"), Out("is_target"), In("input"), In("target"), Reduction("reduction"))),
    Function("diopiMultilabelMarginLossBackward", (
        Out("grad_input"), In("grad_output"), In("input"), In("target"), Reduction("reduction"), In("is_target"))),
    Function("diopiLinalgInvEx", (Out("inverse"), Out("info"), In("input"), Bool("check_errors"))),
    Function("diopiLinalgDet", (Out("result"), Out("lu"), Out("pivots"), In("input"))),
    Function("diopiLinalgSlogdet", (Out("sign"), Out("logabsdet"), Out("lu"), Out("pivots"), In("input"))),
    Function("diopiLinalgCholeskyEx", (Out("l"), Out("info"), In("input"), Bool("upper"), Bool("check_errors"))),
    Function("diopiLinalgSvd", (
        Out("u"), Out("s"), Out("vh"), In("input"), Bool("full_matrices"), Bool("compute_uv"),
        String("driver", optional=True))),
    Function("diopiLinalgQR", (In("input"), String("mode"), Out("q"), Out("r"))),  # DIOPI's order: outputs last
    Function("diopiLinalgSolveEx", (
        Out("result"), Out("lu"), Out("pivots"), Out("info"), In("a"), In("b"), Bool("left"), Bool("check_errors"))),
    Function("diopiLinalgEigh", (
        Out("eigenvalues"), Out("eigenvectors"), In("input"), String("uplo"), Bool("compute_v"))),
    Function("diopiLinalgLuFactorEx", (Out("lu"), Out("pivots"), Out("info"), In("input"), Bool("pivot"),
                                       Bool("check_errors"))),
    Function("diopiLinalgSolveTriangular", (
        Out("out"), In("input"), In("b"), Bool("upper"), Bool("left"), Bool("unitriangular"))),
    Function("diopiLinalgLuSolve", (
        Out("out"), In("lu"), In("pivots"), In("b"), Bool("left"), Bool("adjoint"))),
    # fifth batch: CTC loss, embedding-bag per-sample weights, 3-d adaptive max pooling
    # ATen's _ctc_loss, one loss per sample: not DeepLink's diopiCTCLoss, which reduces and takes tensor lengths
    Function("diopiCTCLossUnreduced", (
        Out("out"), Out("log_alpha"), In("log_probs"), In("targets"), Sizes("input_lengths"), Sizes("target_lengths"),
        Int("blank"), Bool("zero_infinity"))),
    Function("diopiCTCLossUnreducedBackward", (
        Out("grad_input"), In("grad_output"), In("log_probs"), In("targets"), Sizes("input_lengths"),
        Sizes("target_lengths"), In("neg_log_likelihood"), In("log_alpha"), Int("blank"), Bool("zero_infinity"))),
    Function("diopiEmbeddingBagPerSampleWeightsBackward", (
        Out("out"), In("grad"), In("weight"), In("indices"), In("offsets"), In("offset2bag"), Int("mode"),
        Int("padding_idx"))),
    Function("diopiAdaptiveMaxPool3dWithIndices", (Out("out"), Out("indices"), In("input"), Sizes("output_size"))),
    Function("diopiAdaptiveMaxPool3dBackward", (Out("grad_input"), In("grad_output"), In("input"), In("indices"))),
    # sixth batch: the fused recurrent cells ATen's LSTM/GRU use on every non-CPU device, channel shuffle
    Function("diopiLstmCell", (
        Out("hy"), Out("cy"), Out("workspace"), In("input_gates"), In("hidden_gates"), In("cx"),
        In("input_bias", optional=True), In("hidden_bias", optional=True))),
    Function("diopiLstmCellBackward", (
        Out("grad_gates"), Out("grad_cx"), Out("grad_bias", optional=True), In("grad_hy", optional=True),
        In("grad_cy", optional=True), In("cx"), In("cy"), In("workspace"), Bool("has_bias"))),
    Function("diopiGruCell", (
        Out("hy"), Out("workspace"), In("input_gates"), In("hidden_gates"), In("hx"), In("input_bias", optional=True),
        In("hidden_bias", optional=True))),
    Function("diopiGruCellBackward", (
        Out("grad_input_gates"), Out("grad_hidden_gates"), Out("grad_hx"), Out("grad_input_bias", optional=True),
        Out("grad_hidden_bias", optional=True), In("grad_hy"), In("workspace"), Bool("has_bias"))),
    Function("diopiChannelShuffle", (Out("out"), In("input"), Int("groups"))),
    # ---- coverage: optimizers (_foreach_, fused Adam), AMP, random ----
    # _foreach_ functions take lists of tensors; the functional ones store their list of new tensors
    # in "outs" (Note [Outputs a function allocates]); the Inp ones update "inputs" in place.
    *[f for name, params in (
        ("Add", {"List": (Tensors("others"), Scalar("alpha")), "Scalar": (Scalar("scalar"),),
                 "ScalarList": (Scalars("scalars"),), "Tensor": (In("other"), Scalar("alpha"))}),
        ("Sub", {"List": (Tensors("others"), Scalar("alpha")), "Scalar": (Scalar("scalar"),),
                 "ScalarList": (Scalars("scalars"),)}),
        *[(op, {"List": (Tensors("others"),), "Scalar": (Scalar("scalar"),), "ScalarList": (Scalars("scalars"),),
                "Tensor": (In("other"),)}) for op in ("Mul", "Div")],
        *[(op, {"List": (Tensors("others"),), "Scalar": (Scalar("scalar"),), "ScalarList": (Scalars("scalars"),)})
          for op in ("Maximum", "Minimum", "ClampMin", "ClampMax")],
        ("Pow", {"List": (Tensors("exponents"),), "Scalar": (Scalar("exponent"),),
                 "ScalarList": (Scalars("exponents"),)}),
        ("Lerp", {"List": (Tensors("tensors1"), Tensors("weights")), "Scalar": (Tensors("tensors1"), Scalar("weight")),
                  "ScalarList": (Tensors("tensors1"), Scalars("weights"))}),
        *[(op, {"Scalar": (Tensors("tensors1"), Tensors("tensors2"), Scalar("value")),
                "Tensor": (Tensors("tensors1"), Tensors("tensors2"), In("scalars")),
                "ScalarList": (Tensors("tensors1"), Tensors("tensors2"), Scalars("scalars"))})
          for op in ("Addcmul", "Addcdiv")],
    ) for variant, rest in params.items() for f in (
        Function(f"diopiForeach{name}{variant}", (Allocs("outs"), Tensors("inputs"), *rest)),
        Function(f"diopiForeach{name}Inp{variant}", (OutTensors("inputs"), *rest)))],
    *[f for name in ("Abs", "Neg", "Sqrt", "Rsqrt", "Exp", "Expm1", "Log", "Log1p", "Log2", "Log10", "Reciprocal",
                     "Sign", "Sigmoid", "Tanh", "Sin", "Cos", "Erf", "Ceil", "Floor", "Round", "Trunc", "Frac")
      for f in (Function(f"diopiForeach{name}", (Allocs("outs"), Tensors("inputs"))),
                Function(f"diopiForeach{name}Inp", (OutTensors("inputs"),)))],
    Function("diopiForeachNorm", (Allocs("outs"), Tensors("inputs"), Scalar("ord"), Dtype("dtype", optional=True))),
    Function("diopiForeachZeroInp", (OutTensors("inputs"),)),
    Function("diopiForeachCopyInp", (OutTensors("inputs"), Tensors("srcs"), Bool("non_blocking"))),
    # fused optimizer steps: every list but state_steps is updated in place
    *[Function(f"diopiFused{name}{suffix}", (
        OutTensors("params"), OutTensors("grads"), OutTensors("exp_avgs"), OutTensors("exp_avg_sqs"),
        OutTensors("max_exp_avg_sqs"), Tensors("state_steps"), lr, Float("beta1"), Float("beta2"),
        Float("eps"), Float("weight_decay"), Bool("amsgrad"), Bool("maximize"),
        In("grad_scale", optional=True), In("found_inf", optional=True)))
      for name in ("Adam", "AdamW") for suffix, lr in (("", Float("lr")), ("TensorLr", In("lr")))],
    *[Function(f"diopiFusedSgd{suffix}", (
        OutTensors("params"), OutTensors("grads"), OutTensors("momentum_buffer_list"), Float("weight_decay"),
        Float("momentum"), lr, Float("dampening"), Bool("nesterov"), Bool("maximize"), Bool("is_first_step"),
        In("grad_scale", optional=True), In("found_inf", optional=True)))
      for suffix, lr in (("", Float("lr")), ("TensorLr", In("lr")))],
    # AMP (GradScaler)
    Function("diopiAmpForeachNonFiniteCheckAndUnscaleInp", (
        OutTensors("scaled_grads"), Out("found_inf"), In("inv_scale"))),
    Function("diopiAmpUpdateScaleInp", (
        Out("scale"), Out("growth_tracker"), In("found_inf"), Float("growth_factor"), Float("backoff_factor"),
        Int("growth_interval", c_type="int32_t"))),
    # random: more distributions, all drawing from the dipu generator
    Function("diopiNormalTensorScalar", (Out("out"), In("mean"), Float("std"), Gen("generator", optional=True))),
    Function("diopiNormalScalarTensor", (Out("out"), Float("mean"), In("std"), Gen("generator", optional=True))),
    Function("diopiNormalTensor", (Out("out"), In("mean"), In("std"), Gen("generator", optional=True))),
    Function("diopiBernoulli", (Out("out"), In("input"), Gen("generator", optional=True))),
    Function("diopiBernoulliTensor", (Out("out"), In("p"), Gen("generator", optional=True))),
    Function("diopiRandomInp", (
        Out("inout"), Int("from_"), Int("to", optional=True), Gen("generator", optional=True))),
    Function("diopiExponentialInp", (Out("inout"), Float("lambd"), Gen("generator", optional=True))),
    Function("diopiGeometricInp", (Out("inout"), Float("p"), Gen("generator", optional=True))),
    Function("diopiCauchyInp", (Out("inout"), Float("median"), Float("sigma"), Gen("generator", optional=True))),
    Function("diopiLogNormalInp", (Out("inout"), Float("mean"), Float("std"), Gen("generator", optional=True))),
    Function("diopiRandperm", (Out("out"), Int("n"), Gen("generator", optional=True))),
    Function("diopiMultinomial", (
        Out("out"), In("input"), Int("num_samples"), Bool("replacement"), Gen("generator", optional=True))),
    Function("diopiPoisson", (Out("out"), In("input"), Gen("generator", optional=True))),
    Function("diopiBinomial", (Out("out"), In("count"), In("prob"), Gen("generator", optional=True))),
    Function("diopiStandardGamma", (Out("out"), In("input"), Gen("generator", optional=True))),
    Function("diopiStandardGammaGrad", (Out("grad_input"), In("input"), In("output"))),
    Function("diopiSampleDirichlet", (Out("out"), In("input"), Gen("generator", optional=True))),
    Function("diopiDirichletGrad", (Out("grad_input"), In("x"), In("alpha"), In("total"))),
    Function("diopiRreluWithNoise", (
        Out("out"), Out("noise"), In("input"), Scalar("lower"), Scalar("upper"), Bool("training"),
        Gen("generator", optional=True))),
    Function("diopiRreluWithNoiseBackward", (
        Out("grad_input"), In("grad_output"), In("input"), In("noise"), Scalar("lower"), Scalar("upper"),
        Bool("training"), Bool("self_is_result"))),
    *[f for name in ("Acos", "Asin", "Atan", "Tan", "Sinh", "Cosh", "Erfc", "Lgamma")
      for f in (Function(f"diopiForeach{name}", (Allocs("outs"), Tensors("inputs"))),
                Function(f"diopiForeach{name}Inp", (OutTensors("inputs"),)))],
    Function("diopiForeachMax", (Allocs("outs"), Tensors("inputs"))),
    Function("diopiForeachPowsum", (Allocs("outs"), Tensors("inputs"), Scalar("ord"), Dtype("dtype", optional=True))),
    Function("diopiForeachPowScalarAndTensor", (Allocs("outs"), Scalar("input"), Tensors("exponents"))),
    Function("diopiForeachZero", (Allocs("outs"), Tensors("inputs"))),
    Function("diopiForeachCopy", (Allocs("outs"), Tensors("inputs"), Tensors("srcs"), Bool("non_blocking"))),
    Function("diopiForeachClone", (Allocs("outs"), Tensors("inputs"), MemoryFormat("memory_format", optional=True))),
    *[Function(f"diopiFusedAdagrad{suffix}", (  # the tensor_lr variant leaves state_steps alone, as ATen's
        OutTensors("params"), OutTensors("grads"), OutTensors("state_sums"), steps("state_steps"), lr,
        Float("lr_decay"),
        Float("weight_decay"), Float("eps"), Bool("maximize"), In("grad_scale", optional=True),
        In("found_inf", optional=True)))
      for suffix, lr, steps in (("", Float("lr"), OutTensors), ("TensorLr", In("lr"), Tensors))],
]

# ---- what an ATen argument may be passed to ---------------------------------------------------------


def kinds_of(base: str, is_list: bool, written: bool) -> set[Kind]:
    """The parameter kinds an ATen argument of type ``base`` (``base[]`` if ``is_list``) may be passed to.

    The generator checks every ``interface:`` of the op spec with this (its ``argument_kinds``), and op
    libraries check their table-made functions with it (``aten_mismatch``), so both read ATen's types
    the same way.
    """
    if is_list:
        if base == "Tensor":
            return {Kind.TENSOR_LIST, Kind.TENSOR_LIST_OUT} if written else {Kind.TENSOR_LIST}
        return {Kind.SIZE} if base in ("int", "SymInt") else {Kind.SCALAR_LIST} if base == "Scalar" else set()
    kinds = set(_KINDS_BY_TYPE.get(base, ()))
    if base == "Tensor" and written:
        kinds.add(Kind.TENSOR_OUT)
    return kinds


_KINDS_BY_TYPE = {
    "Tensor": {Kind.TENSOR},
    "Scalar": {Kind.SCALAR, Kind.FLOAT},  # a double in C where DIOPI says so (diopiBaddbmm's beta)
    "int": {Kind.INT, Kind.SCALAR, Kind.REDUCTION},
    "SymInt": {Kind.INT, Kind.SCALAR},
    "float": {Kind.FLOAT, Kind.SCALAR},
    "bool": {Kind.BOOL},
    "str": {Kind.STRING, Kind.ROUNDING_MODE},
    "ScalarType": {Kind.DTYPE},
    "Generator": {Kind.GENERATOR},
    "MemoryFormat": {Kind.MEMORY_FORMAT},
}


@dataclasses.dataclass(frozen=True)
class AtenArg:
    """One argument of an ATen schema, as ``aten_mismatch`` needs it."""

    name: str
    type: str  # as the schema spells it, for messages
    kinds: frozenset
    optional: bool


def aten_mismatch(function: Function, outs: list[AtenArg], inputs: list[AtenArg], returned: int,
                  copied: bool = False) -> str | None:
    """Why ``function`` cannot apply an ATen op parameter by parameter, or None.

    ``outs`` are the op's out= arguments, ``inputs`` the others in order, ``returned`` how many values it
    returns. The function's outputs come first: they stand for the out= arguments, or for what the op
    returns when they are ``Alloc`` or ``copied`` into (Note [Copies of a functional result] in
    diopi_impl/torch/_table.py); the rest stand for the inputs, in order.
    """
    params = list(function.params)
    if copied:
        if outs or returned != 1 or not params or params[0].kind is not Kind.TENSOR_OUT:
            return f"returns {returned} value(s) and takes {len(outs)} out= argument(s), not one result to copy"
        params = params[1:]
    elif not outs and params and params[0].kind.is_allocated:
        if sum(p.kind.is_allocated for p in params[:returned]) != returned:
            return f"returns {returned} value(s), which {function.name} does not allocate"
        params = params[returned:]
    pairs_out, params = params[:len(outs)], params[len(outs):]
    if len(params) != len(inputs) or any(not p.kind.is_output for p in pairs_out):
        return f"takes {len(outs)} output(s) and {len(inputs)} input(s) ({', '.join(a.name for a in inputs)})"
    for param, arg in zip(pairs_out + params, outs + inputs):
        if param.kind not in arg.kinds:
            return f"its argument '{arg.name}' ({arg.type}) cannot be passed to {param}"
        if arg.optional and not param.optional:
            return f"its argument '{arg.name}' ({arg.type}) may be None, which {param} cannot take"
    return None


# Note [DeepLink's spellings]
# A C library exports its functions under the names DeepLink's proto gives them, and dipu finds them by
# name, so where that proto spells a name otherwise than the pattern above (letter case, a suffix),
# the function takes DeepLink's spelling. DeepLink's diopiRemainder divides a Scalar by a Tensor; the
# Tensor-Tensor one is diopiRemainderTensor. For the same reason diopiLinalgQR takes its outputs last, and
# where DeepLink's namesake is another operation dipu's function has a name of its own
# (diopiUniqueInverseCounts, diopiGridSampler, diopiCTCLossUnreduced): a C library's diopiUnique is never
# called with arguments it does not expect. README.md lists what still differs.
DEEPLINK_SPELLINGS = {
    "diopiForeachAddScalar": "diopiForeachaddScalar", "diopiForeachAddInpScalar": "diopiForeachaddInpScalar",
    "diopiForeachMulScalar": "diopiForeachmulScalar", "diopiForeachMulInpScalar": "diopiForeachmulInpScalar",
    "diopiForeachMulTensor": "diopiForeachmulTensor", "diopiForeachMulInpTensor": "diopiForeachmulInpTensor",
    "diopiRemainder": "diopiRemainderTensor",
}

#: Every declared function by name, DeepLink's spelling where it has one (``_DECLARATIONS`` keeps the pattern's).
FUNCTIONS: dict[str, Function] = {
    f.name: f for f in (dataclasses.replace(f, name=DEEPLINK_SPELLINGS.get(f.name, f.name)) for f in _DECLARATIONS)}
assert len(FUNCTIONS) == len(_DECLARATIONS), "a DIOPI function is declared twice"

# Note [Function families]
# The run report (dipu/report) shows the proto's coverage by family. A family is the first of these
# rules whose pattern matches the whole name. Every function is declared here: one that no rule matches
# is an error (tests/test_report.py checks the whole proto), never a silent default, so a new function
# lands in its family or in a new one.
FAMILY_RULES = (
    ("foreach", r"diopiForeach.*"),
    ("optimizers and AMP", r"diopi(Fused|Amp).*"),
    ("attention", r"diopiScaledDotProductAttention.*"),
    ("random", r"diopi(Dropout|Bernoulli|Uniform|Normal|Random|Exponential|Geometric|Cauchy|LogNormal|Randperm"
               r"|Multinomial|Poisson|Binomial|StandardGamma|SampleDirichlet|DirichletGrad|RreluWithNoise).*"),
    ("recurrent", r"diopi(LstmCell|GruCell).*"),
    ("convolution", r"diopi(Convolution|ConvTranspose|Im2Col|Col2Im).*"),
    ("pooling", r"diopi.*(Pool|Unpool).*"),
    ("normalization", r"diopi(BatchNorm|LayerNorm|GroupNorm|WeightNorm|Renorm).*"),
    ("losses", r"diopi.*(Loss|BCE).*"),
    ("embedding", r"diopiEmbedding.*"),
    ("resampling and padding", r"diopi(Upsample|GridSampler|Pad).*"),
    ("linear algebra", r"diopi(Mm|Bmm|Addmm|Dot|Mv|Addmv|Addbmm|Baddbmm|Addr|Linalg|Cdist|Pdist|Cross|Trace).*"),
    ("activations", r"diopi(Relu|Gelu|Softmax|LogSoftmax|Threshold|Silu|Hardswish|Hardsigmoid|Mish|Hardtanh"
                    r"|LeakyRelu|Elu|Softplus|Softshrink|Hardshrink|Glu|LogSigmoid|Logit|Sigmoid|Tanh).*"),
    ("reductions and scans", r"diopi(Sum|Mean|Max|MaxAll|Min|MinAll|Prod|Amax|Amin|Argmax|Argmin|Any|All|Norm|Var"
                             r"|Std|VarMean|StdMean|LogSumExp|Cumsum|Cumprod|Cummax|Cummin|Median|MedianAll"
                             r"|Aminmax|CountNonzero|Histc|Bincount|Nansum|Mode|Nanmedian|NanmedianAll"
                             r"|Logcumsumexp)"),
    ("sorting and searching", r"diopi(Sort|Topk|Kthvalue|Searchsorted|Bucketize|Isin|Unique).*"),
    ("indexing", r"diopi(Index|Scatter|Gather|Masked|Take|Put|Nonzero|Where).*"),
    ("joining and shape", r"diopi(Cat|Stack|Flip|Roll|Repeat|Tril|Triu|ChannelShuffle).*"),
    ("creation", r"diopi(Arange|Linspace|Logspace|Eye).*"),
    ("pointwise", r"diopi(Abs|Acos|Acosh|Add|Addcdiv|Addcmul|Asin|Asinh|Atan|Atan2|Atanh|Ceil|Clamp|ClampMax"
                  r"|ClampMin|Copysign|Cos|Cosh|Digamma|Div|Erf|Erfc|Erfinv|Exp|Exp2|Expm1|Floor|FloorDivide|Fmax"
                  r"|Fmin|Fmod|Frac|Gcd|Heaviside|Hypot|I0|Lcm|Lerp|Lgamma|Log|Log10|Log1p|Log2|Logaddexp"
                  r"|Logaddexp2|Maximum|Minimum|Mul|NanToNum|Neg|Nextafter|Pow|Reciprocal|Remainder|Round"
                  r"|RoundDecimals|Rsqrt|Sgn|Sign|Sin|Sinc|Sinh|Sqrt|Sub|Tan|Trunc|Xlogy"  # math
                  r"|Eq|Ne|Lt|Le|Gt|Ge|IsNan|IsNegInf|IsPosInf|Signbit"  # comparisons and tests
                  r"|BitwiseAnd|BitwiseLeftShift|BitwiseNot|BitwiseOr|BitwiseRightShift|BitwiseXor|LogicalAnd"
                  r"|LogicalNot|LogicalOr|LogicalXor)"  # logical and bitwise
                  r"(Inp)?(Scalar|Tensor)?(Inp)?"),
)


def family_of(name: str) -> str:
    """The family of DIOPI function ``name``; see Note [Function families]."""
    for family, pattern in FAMILY_RULES:
        if re.fullmatch(pattern, name):
            return family
    raise ValueError(f"{name} belongs to no family: declare it in FAMILY_RULES (Note [Function families] in "
                     "dipu/diopi/proto.py)")
