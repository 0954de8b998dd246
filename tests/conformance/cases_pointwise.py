"""Conformance cases: pointwise math, comparisons, logical/bitwise and clamping (diopi_impl/torch/pointwise.py)."""

import dataclasses
import itertools

import torch

from conformance.spec import (
    ALL_NUMERIC, BOOL, FLOAT, INT, SHAPES, Case, T, binary_cases, unary_cases,
)

aten = torch.ops.aten
F32_64 = (torch.float32, torch.float64)
INT_SMALL = (torch.int64, torch.int32, torch.uint8)


def _rename(cases, **names):
    """The same cases with argument names changed (``other`` -> ``exponent``, ...)."""
    return [dataclasses.replace(c, args={names.get(k, k): v for k, v in c.args.items()}) for c in cases]


def _unary_pair(suffix, op, dtypes=FLOAT, low=None, high=None, int_out=None):
    """diopiX over ``dtypes`` (+ ``int_out``, integer inputs whose result is float) and diopiXInp."""
    fn = getattr(torch, op)
    cases = unary_cases(f"diopi{suffix}", lambda input: fn(input), dtypes=dtypes, low=low, high=high)
    if int_out:
        cases += unary_cases(f"diopi{suffix}", lambda input: fn(input), dtypes=int_out, low=low, high=high)
    cases += unary_cases(f"diopi{suffix}Inp", lambda input: getattr(input, op + "_")(), dtypes=dtypes[::2],
                         inplace=True, low=low, high=high)
    return cases


CASES = []

# ---- unary math --------------------------------------------------------------------------------
_FLOAT_UNARY = {  # suffix: (op, low, high)
    "Exp2": ("exp2", None, None), "Expm1": ("expm1", None, None), "Log2": ("log2", 0.1, 5),
    "Log10": ("log10", 0.1, 5), "Log1p": ("log1p", -0.9, 5), "Sin": ("sin", None, None),
    "Cos": ("cos", None, None), "Tan": ("tan", -1.2, 1.2), "Asin": ("asin", -0.95, 0.95),
    "Acos": ("acos", -0.95, 0.95), "Atan": ("atan", None, None), "Sinh": ("sinh", None, None),
    "Cosh": ("cosh", None, None), "Asinh": ("asinh", None, None), "Acosh": ("acosh", 1.1, 5),
    "Atanh": ("atanh", -0.9, 0.9), "Erf": ("erf", None, None), "Erfc": ("erfc", None, None),
    "Erfinv": ("erfinv", -0.9, 0.9), "Reciprocal": ("reciprocal", 0.2, 3), "Lgamma": ("lgamma", 0.1, 5),
    "Digamma": ("digamma", 0.1, 5), "I0": ("i0", None, None), "Sinc": ("sinc", None, None),
}
for _suffix, (_op, _low, _high) in _FLOAT_UNARY.items():
    CASES += _unary_pair(_suffix, _op, low=_low, high=_high,
                         int_out=(torch.int64, torch.int32) if _low is None or _low >= 1 else None)
for _suffix, _op in (("Floor", "floor"), ("Ceil", "ceil"), ("Round", "round"), ("Trunc", "trunc"),
                     ("Sign", "sign"), ("Sgn", "sgn")):
    CASES += _unary_pair(_suffix, _op, dtypes=ALL_NUMERIC)
CASES += _unary_pair("Frac", "frac")
CASES += _unary_pair("BitwiseNot", "bitwise_not", dtypes=INT + BOOL)
CASES += _unary_pair("LogicalNot", "logical_not", dtypes=ALL_NUMERIC + BOOL)
for _suffix, _op in (("IsNan", "isnan"), ("IsPosInf", "isposinf"), ("IsNegInf", "isneginf"),
                     ("Signbit", "signbit")):
    CASES += unary_cases(f"diopi{_suffix}", getattr(torch, _op), dtypes=FLOAT + INT_SMALL)
    CASES += unary_cases(f"diopi{_suffix}", getattr(torch, _op), shapes=((3, 5),), low=-1e30, high=1e30,
                         dtypes=(torch.float16,), note="values overflow to inf")

CASES += unary_cases("diopiRoundDecimals", lambda input, decimals: torch.round(input, decimals=decimals),
                     dtypes=F32_64 + (torch.bfloat16,), attrs={"decimals": [0, 1, 3, -1]}, low=-300, high=300)
CASES += unary_cases("diopiRoundDecimalsInp", lambda input, decimals: input.round_(decimals=decimals),
                     dtypes=F32_64, attrs={"decimals": [0, 2, -1]}, low=-300, high=300, inplace=True)
_NAN_ATTRS = {"nan": [None, 0.5], "posinf": [None, 100.0], "neginf": [None, -7.0]}
CASES += unary_cases("diopiNanToNum", lambda input, **kw: torch.nan_to_num(input, **kw), dtypes=FLOAT,
                     attrs=_NAN_ATTRS, shapes=((), (0,), (3, 5), (2, 3, 4)))
CASES += unary_cases("diopiNanToNum", lambda input, **kw: torch.nan_to_num(input, **kw), dtypes=(torch.float16,),
                     attrs={"posinf": [None, 9.0]}, low=-1e30, high=1e30, shapes=((3, 5),), note="infs")
CASES += unary_cases("diopiNanToNumInp", lambda input, **kw: input.nan_to_num_(**kw), dtypes=FLOAT,
                     attrs=_NAN_ATTRS, shapes=((3, 5),), inplace=True)
CASES += unary_cases("diopiNanToNumInp", lambda input, **kw: input.nan_to_num_(**kw), dtypes=(torch.float16,),
                     attrs={"neginf": [None, -9.0]}, low=-1e30, high=1e30, shapes=((3, 5), (7,)), inplace=True)

# ---- binary math ---------------------------------------------------------------------------------
_BINARY = {  # suffix: (op, dtype sweeps as (dtypes, low, high), has Scalar, has Inp)
    "Atan2": ("atan2", [(FLOAT, None, None)], False, True),
    "Fmod": ("fmod", [(FLOAT, None, None), (INT, 1, 9)], True, True),
    "Remainder": ("remainder", [(FLOAT, None, None), (INT, 1, 9)], True, True),
    "Maximum": ("maximum", [(ALL_NUMERIC + BOOL, None, None)], False, False),
    "Minimum": ("minimum", [(ALL_NUMERIC + BOOL, None, None)], False, False),
    "Fmax": ("fmax", [(ALL_NUMERIC, None, None)], False, False),
    "Fmin": ("fmin", [(ALL_NUMERIC, None, None)], False, False),
    "Hypot": ("hypot", [(FLOAT, None, None)], False, True),
    "Copysign": ("copysign", [(FLOAT, None, None)], True, True),
    "Logaddexp": ("logaddexp", [(FLOAT, None, None)], False, False),
    "Logaddexp2": ("logaddexp2", [(FLOAT, None, None)], False, False),
    "Nextafter": ("nextafter", [(F32_64 + (torch.bfloat16,), None, None)], False, True),
    "Xlogy": ("xlogy", [(FLOAT, 0.0, 3.0)], True, True),
    "Heaviside": ("heaviside", [(ALL_NUMERIC, None, None)], False, True),
    "Gcd": ("gcd", [(INT, None, None)], False, True),
    "Lcm": ("lcm", [(INT, None, None)], False, True),
    "FloorDivide": ("floor_divide", [(FLOAT, None, None), (INT, 1, 9)], False, True),
    "LogicalAnd": ("logical_and", [(ALL_NUMERIC + BOOL, -2, 2)], False, True),
    "LogicalOr": ("logical_or", [(ALL_NUMERIC + BOOL, -2, 2)], False, True),
    "LogicalXor": ("logical_xor", [(ALL_NUMERIC + BOOL, -2, 2)], False, True),
    "BitwiseAnd": ("bitwise_and", [(INT + BOOL, None, None)], True, True),
    "BitwiseOr": ("bitwise_or", [(INT + BOOL, None, None)], True, True),
    "BitwiseXor": ("bitwise_xor", [(INT + BOOL, None, None)], True, True),
    "BitwiseLeftShift": ("bitwise_left_shift", [(INT, 0, 7)], True, True),
    "BitwiseRightShift": ("bitwise_right_shift", [(INT, 0, 7)], True, True),
}


def _binary_family(suffix, op, sweeps, scalar, inplace):
    fn = getattr(torch, op)
    method = op + "_"
    cases = []
    for dtypes, low, high in sweeps:
        kw = dict(low=low, high=high)
        cases += binary_cases(f"diopi{suffix}", lambda input, other: fn(input, other),
                              dtypes=dtypes if len(dtypes) <= 6 else dtypes[::2], **kw)
        if inplace:
            cases += binary_cases(f"diopi{suffix}Inp", lambda input, other: getattr(input, method)(other),
                                  dtypes=dtypes[::2], inplace=True, **kw)
        if scalar:
            scalar_dtypes = tuple(d for d in dtypes if d is not torch.bool or op.startswith("bitwise_")
                                  and "shift" not in op)
            cases += binary_cases(f"diopi{suffix}Scalar", lambda input, other: fn(input, other),
                                  dtypes=scalar_dtypes, scalar=True, **kw)
            if inplace:
                cases += binary_cases(f"diopi{suffix}InpScalar", lambda input, other: getattr(input, method)(other),
                                      dtypes=scalar_dtypes[::2], scalar=True, inplace=True, **kw)
    return cases


for _suffix, (_op, _sweeps, _scalar, _inplace) in _BINARY.items():
    CASES += _binary_family(_suffix, _op, _sweeps, _scalar, _inplace)

# ---- pow --------------------------------------------------------------------------------------------
CASES += unary_cases("diopiPow", lambda input, exponent: torch.pow(input, exponent), dtypes=FLOAT,
                     attrs={"exponent": [2, 0.5, -1.5, 3]}, low=0.1, high=3)
CASES += unary_cases("diopiPow", lambda input, exponent: torch.pow(input, exponent), dtypes=INT_SMALL,
                     attrs={"exponent": [2, 0, 3]}, low=0, high=5)
CASES += unary_cases("diopiPowInp", lambda input, exponent: input.pow_(exponent), dtypes=FLOAT,
                     attrs={"exponent": [2, 0.5, -1]}, low=0.1, high=3, inplace=True)
CASES += _rename(binary_cases("diopiPowTensor", lambda input, exponent: torch.pow(input, exponent),
                              dtypes=FLOAT, low=0.1, high=2), other="exponent")
CASES += _rename(binary_cases("diopiPowTensor", lambda input, exponent: torch.pow(input, exponent),
                              dtypes=INT_SMALL, low=0, high=4), other="exponent")
CASES += _rename(binary_cases("diopiPowInpTensor", lambda input, exponent: input.pow_(exponent),
                              dtypes=FLOAT, low=0.1, high=2, inplace=True), other="exponent")
CASES += [Case("diopiPowScalar", {"input": base, "exponent": T(shape, layout=layout, low=-2, high=2)},
               lambda input, exponent: torch.pow(input, exponent), dtype=dtype)
          for base, shape, dtype in itertools.product((2.0, 0.5, 3), SHAPES, FLOAT)
          for layout in (("contiguous", "transposed") if len(shape) >= 2 else ("contiguous",))]

# ---- lerp with a tensor weight ------------------------------------------------------------------------
_LERP_SHAPES = (((), (), ()), ((5,), (5,), (5,)), ((3, 5), (3, 5), (3, 5)), ((3, 5), (5,), ()),
                ((3, 5), (3, 1), (5,)), ((0, 4), (4,), (1,)), ((2, 3, 4), (3, 4), (2, 1, 4)))
for (_s, _e, _w), _dtype, _layout in itertools.product(_LERP_SHAPES, FLOAT, ("contiguous", "sliced")):
    _args = {"input": T(_s), "end": T(_e, layout=_layout), "weight": T(_w, low=0, high=1)}
    CASES.append(Case("diopiLerpTensor", _args, lambda input, end, weight: torch.lerp(input, end, weight),
                      dtype=_dtype))
    if torch.broadcast_shapes(_s, _e, _w) == _s:
        CASES.append(Case("diopiLerpTensorInp", _args, lambda input, end, weight: input.lerp_(end, weight),
                          dtype=_dtype))

# ---- clamp ------------------------------------------------------------------------------------------------
_BOUNDS = ((-1, 1), (None, 0.5), (-0.5, None), (2, -2), (0, 0))
for (_lo, _hi), _dtype, _shape in itertools.product(_BOUNDS, FLOAT + (torch.int64, torch.int32), SHAPES):
    for _layout in (("contiguous", "transposed") if len(_shape) >= 2 else ("contiguous",)):
        _args = {"input": T(_shape, layout=_layout), "min": _lo, "max": _hi}
        CASES.append(Case("diopiClampScalar", _args, lambda input, min, max: torch.clamp(input, min, max),
                          dtype=_dtype))
        if _dtype.is_floating_point or isinstance(_lo, int) and isinstance(_hi, int):
            CASES.append(Case("diopiClampInpScalar", _args, lambda input, min, max: input.clamp_(min, max),
                              dtype=_dtype))
_TENSOR_BOUNDS = (((3, 5), (3, 5), (3, 5)), ((3, 5), (5,), None), ((3, 5), None, (3, 1)), ((), (), ()),
                  ((2, 3, 4), (4,), ()), ((0, 3), (3,), (3,)), ((7,), (7,), (1,)))
for (_s, _lo, _hi), _dtype in itertools.product(_TENSOR_BOUNDS, FLOAT + (torch.int64, torch.int32, torch.int8)):
    _args = {"input": T(_s), "min": None if _lo is None else T(_lo, high=0),
             "max": None if _hi is None else T(_hi, low=0)}
    CASES.append(Case("diopiClamp", _args, lambda input, min, max: torch.clamp(input, min, max), dtype=_dtype))
    CASES.append(Case("diopiClampInp", _args, lambda input, min, max: input.clamp_(min, max), dtype=_dtype))
for _bound in ("min", "max"):
    _fn = getattr(torch, f"clamp_{_bound}")
    _method = f"clamp_{_bound}_"
    _name = f"diopiClamp{_bound.capitalize()}"
    CASES += _rename(binary_cases(_name, lambda input, _fn=_fn, **bound: _fn(input, *bound.values()),
                                  dtypes=FLOAT + (torch.int64, torch.int32)), other=_bound)
    CASES += _rename(binary_cases(_name + "Inp", lambda input, _m=_method, **bound: getattr(input, _m)(*bound.values()),
                                  dtypes=FLOAT + (torch.int64,), inplace=True), other=_bound)
    CASES += _rename(binary_cases(_name + "Scalar", lambda input, _fn=_fn, **bound: _fn(input, *bound.values()),
                                  dtypes=FLOAT + (torch.int64, torch.int32), scalar=True), other=_bound)
    CASES += _rename(binary_cases(_name + "InpScalar",
                                  lambda input, _m=_method, **bound: getattr(input, _m)(*bound.values()),
                                  dtypes=FLOAT + (torch.int64,), scalar=True, inplace=True), other=_bound)

# ---- arithmetic, comparison and selection --------------------------------------------------------------------
for _suffix, _op in (("Neg", "neg"), ("Abs", "abs")):
    CASES += unary_cases(f"diopi{_suffix}", getattr(torch, _op),
                         dtypes=(torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                                 torch.int8))
for _suffix, _op, _low in (("Sqrt", "sqrt", 0), ("Rsqrt", "rsqrt", 0.1), ("Exp", "exp", None), ("Log", "log", 0.1),
                           ("Tanh", "tanh", None), ("Sigmoid", "sigmoid", None)):
    CASES += unary_cases(f"diopi{_suffix}", getattr(torch, _op), dtypes=FLOAT, low=_low)
    CASES += unary_cases(f"diopi{_suffix}", getattr(torch, _op), dtypes=(torch.int64,),
                         low=1 if _low is not None else None,
                         shapes=((), (3, 5)), note="integer input, float result")
for _suffix, _op in (("Add", torch.add), ("Sub", torch.sub)):
    CASES += binary_cases(f"diopi{_suffix}", lambda input, other, alpha, _op=_op: _op(input, other, alpha=alpha),
                          dtypes=FLOAT, attrs={"alpha": [1, 0.5]})
    CASES += binary_cases(f"diopi{_suffix}", lambda input, other, alpha, _op=_op: _op(input, other, alpha=alpha),
                          dtypes=(torch.int64, torch.int32, torch.uint8), attrs={"alpha": [1, 3]})
    CASES += binary_cases(f"diopi{_suffix}Scalar", lambda input, other, alpha, _op=_op: _op(input, other, alpha=alpha),
                          dtypes=FLOAT + (torch.int64,), attrs={"alpha": [1, 2]}, scalar=True)
CASES += binary_cases("diopiMul", torch.mul, dtypes=ALL_NUMERIC + BOOL)
CASES += binary_cases("diopiMulScalar", torch.mul, dtypes=ALL_NUMERIC, scalar=True)
CASES += binary_cases("diopiDiv",
                      lambda input, other, rounding_mode: torch.div(input, other, rounding_mode=rounding_mode),
                      dtypes=FLOAT, attrs={"rounding_mode": [None, "trunc", "floor"]})
CASES += binary_cases("diopiDiv",
                      lambda input, other, rounding_mode: torch.div(input, other, rounding_mode=rounding_mode),
                      dtypes=(torch.int64, torch.int32), attrs={"rounding_mode": [None, "trunc", "floor"]}, low=1)
CASES += binary_cases("diopiDivScalar", lambda input, other, rounding_mode: torch.div(
    input, other, rounding_mode=rounding_mode), dtypes=FLOAT + (torch.int64,), scalar=True,
    attrs={"rounding_mode": [None, "trunc", "floor"]})
for _suffix, _op in (("Eq", torch.eq), ("Ne", torch.ne), ("Lt", torch.lt), ("Le", torch.le), ("Gt", torch.gt),
                     ("Ge", torch.ge)):
    CASES += binary_cases(f"diopi{_suffix}", _op, dtypes=(ALL_NUMERIC + BOOL)[::2], low=-2, high=2)
    CASES += binary_cases(f"diopi{_suffix}Scalar", _op, dtypes=ALL_NUMERIC, scalar=True, low=-3, high=4)
_TERNARY_SHAPES = (((), (), ()), ((5,), (5,), (5,)), ((3, 5), (3, 5), (3, 5)), ((3, 5), (5,), ()),
                   ((3, 1), (1, 5), (5,)), ((0, 4), (4,), (1,)), ((2, 3, 4), (3, 4), (2, 1, 4)))
for (_s, _a, _b), _dtype, _layout in itertools.product(_TERNARY_SHAPES, FLOAT, ("contiguous", "sliced")):
    for _value in (1, 0.5):
        _args = {"input": T(_s), "tensor1": T(_a, layout=_layout), "tensor2": T(_b, low=0.5, high=2), "value": _value}
        CASES.append(Case("diopiAddcmul", _args, lambda input, tensor1, tensor2, value: torch.addcmul(
            input, tensor1, tensor2, value=value), dtype=_dtype))
        CASES.append(Case("diopiAddcdiv", _args, lambda input, tensor1, tensor2, value: torch.addcdiv(
            input, tensor1, tensor2, value=value), dtype=_dtype))
    _args = {"condition": T(_a, dtype=torch.bool, layout=_layout), "input": T(_s), "other": T(_b)}
    CASES.append(Case("diopiWhere", _args, lambda condition, input, other: torch.where(condition, input, other),
                      dtype=_dtype))
    CASES.append(Case("diopiWhere", _args, lambda condition, input, other: torch.where(condition, input, other),
                      dtype=torch.int64 if _dtype is torch.float32 else torch.bool))
CASES += [dataclasses.replace(c, args={"input": c.args["input"], "end": c.args["other"], "weight": w})
          for c in binary_cases("diopiLerpScalar", lambda input, end, weight: torch.lerp(input, end, weight),
                                dtypes=FLOAT) for w in (0.25, 1.5)]
for _shape, _mask, _dtype in itertools.product(((3, 5), (2, 3, 4), (7,), (), (0, 3)), ("same", "broadcast"),
                                               FLOAT + (torch.int64, torch.bool)):
    _mshape = _shape if _mask == "same" or not _shape else _shape[-1:]
    for _layout in (("contiguous", "transposed") if len(_shape) >= 2 and _mask == "same" else ("contiguous",)):
        _base = {"input": T(_shape, layout=_layout), "mask": T(_mshape, dtype=torch.bool, layout=_layout)}
        CASES.append(Case("diopiMaskedFillInpScalar", {**_base, "value": 2 if not _dtype.is_floating_point else -1.5},
                          lambda input, mask, value: input.masked_fill_(mask, value), dtype=_dtype))
        CASES.append(Case("diopiMaskedFillInp", {**_base, "value": T(())},
                          lambda input, mask, value: input.masked_fill_(mask, value), dtype=_dtype))
CASES += unary_cases("diopiTriu", lambda input, diagonal: torch.triu(input, diagonal),
                     dtypes=(torch.float32, torch.int64, torch.bool), shapes=((3, 5), (2, 3, 4), (0, 3)),
                     attrs={"diagonal": [0, 1, -1]})
