"""Pointwise math, logical/bitwise, clamping and activation functions with their backwards.

Most functions here differ only in the ATen overload they apply, so they are
made from small tables: ``diopiX(out, input, ...)`` writes through ``out=`` into
the output's alias, ``diopiXInp(input, ...)`` calls the ATen in-place method
on the input's alias. See the module docstring of dipu.diopi_impl.torch.
"""

import inspect

import torch

from dipugen.proto import FUNCTIONS
from dipu._core import _C
from dipu.diopi import SUCCESS
from . import library
from ._aten import fast_aten

alias = _C.alias
aten = torch.ops.aten


def _alias(value, d):
    """Tensors become their native alias; Python numbers and None pass through."""
    return alias(value, d) if isinstance(value, torch.Tensor) else value


def _register(name: str, function, aten) -> None:
    """Register a table-made ``function(ctx, *args)`` applying ``aten`` under ``name``, with the proto's
    parameter names (Note [Table-made functions are checked against ATen] in dipu/diopi/library.py)."""
    function.__name__ = function.__qualname__ = name
    function.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in FUNCTIONS[name].param_names])
    library.register(function, aten=aten)


def _out_function(name: str, overload, out_names: tuple[str, ...] = ()):
    """``name(ctx, *outputs, *inputs)`` applying the out= ``overload`` to the inputs, writing the outputs.

    It is called through torch's binding of its op, whose ``out=`` picks the out= overload the arguments
    select (Note [Calling ATen from kernels]); an op without a binding (``out_names`` given: its outputs'
    keyword names) is called through ``overload``. The registration checks the proto against ``overload``.
    """
    bound = getattr(fast_aten, overload._overloadpacket.__name__)
    outputs = len(out_names) or 1

    def function(ctx, *args):
        d = ctx.device
        inputs = [_alias(a, d) for a in args[outputs:]]
        if out_names:
            overload(*inputs, **{n: alias(t, d) for n, t in zip(out_names, args[:outputs])})
        else:
            bound(*inputs, out=_alias(args[0], d))
        return SUCCESS

    _register(name, function, overload)


def _inplace_function(name: str, method: str):
    """``name(ctx, input, *others)`` applying the in-place ATen op ``method`` (overload by arguments) to the input."""
    packet = getattr(aten, method)

    def function(ctx, input, *args):
        d = ctx.device
        packet(alias(input, d), *(_alias(a, d) for a in args))
        return SUCCESS

    _register(name, function, packet)


# ---- unary math: diopiX(out, input) and diopiXInp(input) ---------------------------------------
UNARY = {
    "Exp2": "exp2", "Expm1": "expm1", "Log2": "log2", "Log10": "log10", "Log1p": "log1p",
    "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
    "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
    "Erf": "erf", "Erfc": "erfc", "Erfinv": "erfinv", "Reciprocal": "reciprocal",
    "Lgamma": "lgamma", "Digamma": "digamma", "I0": "i0", "Sinc": "sinc",
    "Floor": "floor", "Ceil": "ceil", "Round": "round", "Trunc": "trunc", "Frac": "frac",
    "Sign": "sign", "Sgn": "sgn", "BitwiseNot": "bitwise_not", "LogicalNot": "logical_not",
    "Silu": "silu", "Hardswish": "hardswish", "Hardsigmoid": "hardsigmoid", "Mish": "mish",
}
#: Unary functions with no in-place ATen variant.
UNARY_OUT_ONLY = {"IsNan": "isnan", "IsPosInf": "isposinf", "IsNegInf": "isneginf", "Signbit": "signbit"}

for _suffix, _op in UNARY.items():
    _out_function("diopi" + _suffix, getattr(aten, _op).out)
    _inplace_function("diopi" + _suffix + "Inp", _op + "_")
for _suffix, _op in UNARY_OUT_ONLY.items():
    if _op != "isnan":
        _out_function("diopi" + _suffix, getattr(aten, _op).out)


@library.register
def diopiIsNan(ctx, out, input):
    # isnan.out is a composite over the functional kernel, the one CPU implements
    d = ctx.device
    alias(out, d).copy_(torch.isnan(alias(input, d)))
    return SUCCESS


# ---- unary functions with attributes ---------------------------------------------------------------
_out_function("diopiNanToNum", aten.nan_to_num.out)
_inplace_function("diopiNanToNumInp", "nan_to_num_")


@library.register
def diopiRoundDecimals(ctx, out, input, decimals):
    d = ctx.device
    aten.round.decimals_out(alias(input, d), decimals=decimals, out=alias(out, d))
    return SUCCESS


@library.register
def diopiRoundDecimalsInp(ctx, input, decimals):
    alias(input, ctx.device).round_(decimals=decimals)
    return SUCCESS


# ---- binary math: diopiX(out, input, other), diopiXScalar, diopiXInp, diopiXInpScalar -----------
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
}
for _suffix, (_tensor, _scalar, _method) in BINARY.items():
    _out_function("diopi" + _suffix, _tensor)
    if _scalar is not None:
        _out_function("diopi" + _suffix + "Scalar", _scalar)
    if _method is not None:
        _inplace_function("diopi" + _suffix + "Inp", _method)
        if _scalar is not None:
            _inplace_function("diopi" + _suffix + "InpScalar", _method)

# pow: diopiPow (tensor ** scalar), diopiPowTensor (tensor ** tensor), diopiPowScalar (scalar ** tensor)
_out_function("diopiPow", aten.pow.Tensor_Scalar_out)
_out_function("diopiPowTensor", aten.pow.Tensor_Tensor_out)
_out_function("diopiPowScalar", aten.pow.Scalar_out)
_inplace_function("diopiPowInp", "pow_")
_inplace_function("diopiPowInpTensor", "pow_")

# lerp with a tensor weight (the scalar weight is diopiLerpScalar, in elementwise.py)
_out_function("diopiLerpTensor", aten.lerp.Tensor_out)
_inplace_function("diopiLerpTensorInp", "lerp_")

# ---- clamping: Tensor bounds and Scalar bounds, either may be None for clamp --------------------
_out_function("diopiClamp", aten.clamp.Tensor_out)
_out_function("diopiClampScalar", aten.clamp.out)
_inplace_function("diopiClampInp", "clamp_")
_inplace_function("diopiClampInpScalar", "clamp_")
for _suffix, _op in (("Min", "clamp_min"), ("Max", "clamp_max")):
    _out_function("diopiClamp" + _suffix, getattr(aten, _op).Tensor_out)
    _out_function("diopiClamp" + _suffix + "Scalar", getattr(aten, _op).out)
    _inplace_function("diopiClamp" + _suffix + "Inp", _op + "_")
    _inplace_function("diopiClamp" + _suffix + "InpScalar", _op + "_")

# ---- activations with attributes -----------------------------------------------------------------
for _suffix, _op, _inplace in (("Hardtanh", "hardtanh", True), ("LeakyRelu", "leaky_relu", True),
                               ("Elu", "elu", True), ("Softplus", "softplus", False),
                               ("Threshold", "threshold", True), ("Softshrink", "softshrink", False),
                               ("Hardshrink", "hardshrink", False), ("Glu", "glu", False),
                               ("Logit", "logit", True)):
    _out_function("diopi" + _suffix, getattr(aten, _op).out)
    if _inplace:
        _inplace_function("diopi" + _suffix + "Inp", _op + "_")

_out_function("diopiLogSigmoidForward", aten.log_sigmoid_forward.output, ("output", "buffer"))

# ---- activation backwards: diopiXBackward(grad_input, grad_output, ...) --------------------------
for _suffix, _overload in (
        ("Silu", aten.silu_backward.grad_input), ("Sigmoid", aten.sigmoid_backward.grad_input),
        ("Tanh", aten.tanh_backward.grad_input), ("Hardsigmoid", aten.hardsigmoid_backward.grad_input),
        ("Hardtanh", aten.hardtanh_backward.grad_input), ("LeakyRelu", aten.leaky_relu_backward.grad_input),
        ("Softplus", aten.softplus_backward.grad_input),
        ("LogSigmoid", aten.log_sigmoid_backward.grad_input),
        ("Softshrink", aten.softshrink_backward.grad_input), ("Hardshrink", aten.hardshrink_backward.grad_input),
        ("Glu", aten.glu_backward.grad_input), ("Logit", aten.logit_backward.grad_input)):
    _out_function(f"diopi{_suffix}Backward", _overload, ("grad_input",))


@library.register
def diopiHardswishBackward(ctx, grad_input, grad_output, input):
    # hardswish_backward.out is a composite over the functional kernel; the functional one is real
    d = ctx.device
    alias(grad_input, d).copy_(aten.hardswish_backward.default(alias(grad_output, d), alias(input, d)))
    return SUCCESS


@library.register
def diopiEluBackward(ctx, grad_input, grad_output, input, alpha, scale, input_scale, is_result):
    d = ctx.device
    aten.elu_backward.grad_input(alias(grad_output, d), alpha, scale, input_scale, is_result, alias(input, d),
                                 grad_input=alias(grad_input, d))
    return SUCCESS
