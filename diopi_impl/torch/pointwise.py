"""Pointwise math: arithmetic, unary and binary math functions, comparisons, logical and bitwise functions,
clamping and selection.

Most functions here differ only in the ATen overload they apply, so they are made from tables (Note
[Table-made functions] in _table.py): ``diopiX(out, input, ...)`` writes through ``out=`` into the output's
alias, ``diopiXInp(input, ...)`` calls the ATen in-place method on the input's alias.
"""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._library import library
from ._table import copy_function, inplace_function, out_function

aten = torch.ops.aten

# ---- arithmetic ------------------------------------------------------------------------------------------


@library.register(aten=aten.add.out, direct=True)
def diopiAdd(ctx, out, input, other, alpha):
    d = ctx.device
    if alpha == 1:
        torch.add(alias(input, d), alias(other, d), out=alias(out, d))
    else:
        torch.add(alias(input, d), alias(other, d), alpha=alpha, out=alias(out, d))
    return SUCCESS


for _name, _overload in (
        ("diopiAddScalar", aten.add.Scalar_out), ("diopiSub", aten.sub.out), ("diopiSubScalar", aten.sub.Scalar_out),
        ("diopiMul", aten.mul.out), ("diopiMulScalar", aten.mul.Scalar_out),
        ("diopiDiv", aten.div.out_mode), ("diopiDivScalar", aten.div.Scalar_mode_out),
        ("diopiAddcmul", aten.addcmul.out), ("diopiAddcdiv", aten.addcdiv.out)):
    out_function(_name, _overload)


@library.register(aten=aten.abs.out)
def diopiAbs(ctx, out, input):
    d = ctx.device
    x = alias(input, d)
    if out is input and x.is_complex():  # abs_: a complex tensor cannot hold its real result (as ATen refuses)
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    torch.abs(x, out=alias(out, d))
    return SUCCESS


# ---- unary math: diopiX(out, input) and diopiXInp(input) -------------------------------------------------
UNARY = {
    "Exp2": "exp2", "Expm1": "expm1", "Log2": "log2", "Log10": "log10", "Log1p": "log1p",
    "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
    "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
    "Erf": "erf", "Erfc": "erfc", "Erfinv": "erfinv", "Reciprocal": "reciprocal",
    "Lgamma": "lgamma", "Digamma": "digamma", "I0": "i0", "Sinc": "sinc",
    "Floor": "floor", "Ceil": "ceil", "Round": "round", "Trunc": "trunc", "Frac": "frac",
    "Sign": "sign", "Sgn": "sgn", "BitwiseNot": "bitwise_not", "LogicalNot": "logical_not",
}
#: Unary functions the proto declares without an in-place variant.
UNARY_OUT_ONLY = {"Neg": "neg", "Sqrt": "sqrt", "Rsqrt": "rsqrt", "Exp": "exp", "Log": "log",
                  "IsPosInf": "isposinf", "IsNegInf": "isneginf", "Signbit": "signbit"}

for _suffix, _op in UNARY.items():
    out_function("diopi" + _suffix, getattr(aten, _op).out)
    inplace_function("diopi" + _suffix + "Inp", _op + "_")
for _suffix, _op in UNARY_OUT_ONLY.items():
    out_function("diopi" + _suffix, getattr(aten, _op).out)


# isnan.out is a composite over the functional kernel, the one CPU implements
copy_function("diopiIsNan", aten.isnan.default)


# ---- unary functions with attributes ---------------------------------------------------------------------
out_function("diopiNanToNum", aten.nan_to_num.out)
inplace_function("diopiNanToNumInp", "nan_to_num_")
out_function("diopiRoundDecimals", aten.round.decimals_out, ("out",))
inplace_function("diopiRoundDecimalsInp", aten.round_.decimals)


# ---- binary math: diopiX(out, input, other), diopiXScalar, diopiXInp, diopiXInpScalar --------------------
#: Where the Tensor-Tensor function has DeepLink's name (Note [DeepLink's spellings] in dipu/diopi/proto.py).
FUNCTION_OF_TENSOR_TENSOR = {"Remainder": "diopiRemainderTensor"}
BINARY = {  # suffix -> (Tensor out= overload, Scalar out= overload or None, in-place method or None)
    "Atan2": (aten.atan2.out, None, "atan2_"),
    "Fmod": (aten.fmod.Tensor_out, aten.fmod.Scalar_out, "fmod_"),
    "Remainder": (aten.remainder.Tensor_out, aten.remainder.Scalar_out, "remainder_"),
    "Maximum": (aten.maximum.out, None, None),
    "Minimum": (aten.minimum.out, None, None),
    "Fmax": (aten.fmax.out, None, None),
    "Fmin": (aten.fmin.out, None, None),
    "Hypot": (aten.hypot.out, None, "hypot_"),
    "Copysign": (aten.copysign.out, aten.copysign.Scalar_out, "copysign_"),
    "Logaddexp": (aten.logaddexp.out, None, None),
    "Logaddexp2": (aten.logaddexp2.out, None, None),
    "Nextafter": (aten.nextafter.out, None, "nextafter_"),
    "Xlogy": (aten.xlogy.OutTensor, aten.xlogy.OutScalar_Other, "xlogy_"),
    "Heaviside": (aten.heaviside.out, None, "heaviside_"),
    "Gcd": (aten.gcd.out, None, "gcd_"),
    "Lcm": (aten.lcm.out, None, "lcm_"),
    "FloorDivide": (aten.floor_divide.out, None, "floor_divide_"),
    "LogicalAnd": (aten.logical_and.out, None, "logical_and_"),
    "LogicalOr": (aten.logical_or.out, None, "logical_or_"),
    "LogicalXor": (aten.logical_xor.out, None, "logical_xor_"),
    "BitwiseAnd": (aten.bitwise_and.Tensor_out, aten.bitwise_and.Scalar_out, "bitwise_and_"),
    "BitwiseOr": (aten.bitwise_or.Tensor_out, aten.bitwise_or.Scalar_out, "bitwise_or_"),
    "BitwiseXor": (aten.bitwise_xor.Tensor_out, aten.bitwise_xor.Scalar_out, "bitwise_xor_"),
    "BitwiseLeftShift": (aten.bitwise_left_shift.Tensor_out, aten.bitwise_left_shift.Tensor_Scalar_out,
                         "bitwise_left_shift_"),
    "BitwiseRightShift": (aten.bitwise_right_shift.Tensor_out, aten.bitwise_right_shift.Tensor_Scalar_out,
                          "bitwise_right_shift_"),
    # comparisons: diopiEq (out, input, other) and diopiEqScalar
    "Eq": (aten.eq.Tensor_out, aten.eq.Scalar_out, None),
    "Ne": (aten.ne.Tensor_out, aten.ne.Scalar_out, None),
    "Lt": (aten.lt.Tensor_out, aten.lt.Scalar_out, None),
    "Le": (aten.le.Tensor_out, aten.le.Scalar_out, None),
    "Gt": (aten.gt.Tensor_out, aten.gt.Scalar_out, None),
    "Ge": (aten.ge.Tensor_out, aten.ge.Scalar_out, None),
}
for _suffix, (_tensor, _scalar, _method) in BINARY.items():
    out_function(FUNCTION_OF_TENSOR_TENSOR.get(_suffix, "diopi" + _suffix), _tensor)
    if _scalar is not None:
        out_function("diopi" + _suffix + "Scalar", _scalar)
    if _method is not None:
        inplace_function("diopi" + _suffix + "Inp", _method)
        if _scalar is not None:
            inplace_function("diopi" + _suffix + "InpScalar", _method)

# pow: diopiPow (tensor ** scalar), diopiPowTensor (tensor ** tensor), diopiPowScalar (scalar ** tensor)
out_function("diopiPow", aten.pow.Tensor_Scalar_out)
out_function("diopiPowTensor", aten.pow.Tensor_Tensor_out)
out_function("diopiPowScalar", aten.pow.Scalar_out)
inplace_function("diopiPowInp", "pow_")
inplace_function("diopiPowInpTensor", "pow_")

# lerp with a tensor weight (the scalar weight is diopiLerpScalar, below)
out_function("diopiLerpTensor", aten.lerp.Tensor_out)
inplace_function("diopiLerpTensorInp", "lerp_")
out_function("diopiLerpScalar", aten.lerp.Scalar_out)


# ---- clamping: Tensor bounds and Scalar bounds, either may be None for clamp ------------------------------
out_function("diopiClamp", aten.clamp.Tensor_out)
out_function("diopiClampScalar", aten.clamp.out)
inplace_function("diopiClampInp", "clamp_")
inplace_function("diopiClampInpScalar", "clamp_")
for _suffix, _op in (("Min", "clamp_min"), ("Max", "clamp_max")):
    out_function("diopiClamp" + _suffix, getattr(aten, _op).Tensor_out)
    out_function("diopiClamp" + _suffix + "Scalar", getattr(aten, _op).out)
    inplace_function("diopiClamp" + _suffix + "Inp", _op + "_")
    inplace_function("diopiClamp" + _suffix + "InpScalar", _op + "_")


# ---- selection -------------------------------------------------------------------------------------------
out_function("diopiWhere", aten.where.self_out)


