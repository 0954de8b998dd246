"""Conformance cases: the _foreach_ family, fused optimizer steps and AMP (diopi_impl/torch/optim.py).

Functional foreach functions return their new tensors through ``outs``, so a
reference returns a one-element tuple holding ATen's list. Each in-place
``...Inp`` function gets its functional twin's cases (see ``_in_place``); the
fused steps and the AMP unscale are listed in skips.py and checked through
torch's API in tests/test_optim_amp_random.py.
"""

import dataclasses
import itertools

import torch

from conformance.spec import FLOAT, Case, T
from dipu.diopi.proto import DEEPLINK_SPELLINGS, FUNCTIONS

aten = torch.ops.aten
INT_SOME = (torch.int64, torch.int32, torch.uint8)

#: Lists of shapes a sweep covers: 0-d, empty, several ranks, non-contiguous layouts, a single tensor.
LISTS = (
    (T((3, 5)), T(()), T((0,)), T((2, 3, 4))),
    (T((4, 3), layout="transposed"), T((7,), layout="sliced"), T((1, 4, 1, 3))),
    (T((6,)),),
    (T((2, 2)), T((5,), layout="sliced")),
    (T((3, 1, 2), layout="transposed"), T(()), T((4,))),
)


def _like(tensors, layout="sliced", low=None, high=None):
    """Tensors of the same shapes as ``tensors`` (the second list of a List function)."""
    return [T(t.shape, layout=layout if len(t.shape) else "contiguous", low=low, high=high) for t in tensors]


def _bounded(tensors, low, high):
    return [T(t.shape, layout=t.layout, low=low, high=high) for t in tensors]


def _reference(overload, params):
    """A reference calling ``overload`` with the proto parameters in order (kwarg-only ones by keyword)."""

    def reference(**kwargs):
        args, keywords = [], {}
        for name in params:
            value = kwargs[name]
            if name in ("alpha", "memory_format"):  # kwarg-only in ATen's schemas
                keywords[name] = value
            else:
                args.append(value)
        return (overload(*args, **keywords),)

    return reference


def _scalars(n, dtype, scale=1.0):
    """A Scalar[] argument: Python numbers, one per tensor."""
    if dtype.is_floating_point:
        return [v * scale for v in (2.5, -1.5, 0.5, 3.0, 1.25)[:n]]
    return [2, 1, 3, 1, 2][:n]


def _scalar(dtype):
    return 1.5 if dtype.is_floating_point else 2


def _sweep(function, overload, build, dtypes):
    """``build(tensors, dtype) -> list of arg dicts`` for every list of LISTS and every dtype."""
    function = DEEPLINK_SPELLINGS.get(function, function)
    params = [p for p in FUNCTIONS[function].param_names[1:] if p != "outs"]
    reference = _reference(overload, params)
    cases = []
    for dtype, tensors in itertools.product(dtypes, LISTS):
        for args in build(list(tensors), dtype):
            cases.append(Case(function, args, reference, dtype=dtype))
    return cases


CASES = []

# ---- binary: List, Scalar, ScalarList, Tensor -----------------------------------------------------------
_BINARY = {  # DIOPI name: (aten name, dtypes, (low, high) of the second operand, variants)
    "Add": ("add", FLOAT + INT_SOME, None, ("List", "Scalar", "ScalarList", "Tensor")),
    "Sub": ("sub", FLOAT + INT_SOME, None, ("List", "Scalar", "ScalarList")),
    "Mul": ("mul", FLOAT + INT_SOME, None, ("List", "Scalar", "ScalarList", "Tensor")),
    "Div": ("div", FLOAT, (0.5, 3), ("List", "Scalar", "ScalarList", "Tensor")),
    "Maximum": ("maximum", FLOAT + INT_SOME, None, ("List", "Scalar", "ScalarList")),
    "Minimum": ("minimum", FLOAT + INT_SOME, None, ("List", "Scalar", "ScalarList")),
    "ClampMin": ("clamp_min", FLOAT + INT_SOME, None, ("List", "Scalar", "ScalarList")),
    "ClampMax": ("clamp_max", FLOAT + INT_SOME, None, ("List", "Scalar", "ScalarList")),
}


def _binary_builder(variant, bounds, has_alpha):
    low, high = bounds or (None, None)

    def build(tensors, dtype):
        alphas = ([1, 2] if not dtype.is_floating_point else [1, 0.5]) if has_alpha else [None]
        for alpha in alphas:
            extra = {} if alpha is None else {"alpha": alpha}
            if variant == "List":
                yield {"inputs": tensors, "others": _like(tensors, low=low, high=high), **extra}
            elif variant == "Scalar":
                yield {"inputs": tensors, "scalar": _scalar(dtype)}
                yield {"inputs": tensors, "scalar": -2}
            elif variant == "ScalarList":
                yield {"inputs": tensors, "scalars": _scalars(len(tensors), dtype)}
            else:  # Tensor: a 0-dim tensor on dipu, or a 0-dim CPU tensor
                yield {"inputs": tensors, "other": T((), low=low, high=high), **extra}
                yield {"inputs": tensors, "other": torch.tensor(_scalar(dtype), dtype=dtype), **extra}

    return build


for _name, (_op, _dtypes, _bounds, _variants) in _BINARY.items():
    for _variant in _variants:
        _alpha = (_op, _variant) in (("add", "List"), ("add", "Tensor"), ("sub", "List"))
        CASES += _sweep(f"diopiForeach{_name}{_variant}", getattr(getattr(aten, f"_foreach_{_op}"), _variant),
                        _binary_builder(_variant, _bounds, _alpha), _dtypes)


# ---- pow, lerp, addcmul, addcdiv ------------------------------------------------------------------------
def _pow(variant):
    def build(tensors, dtype):
        tensors = _bounded(tensors, 0.5, 3) if dtype.is_floating_point else _bounded(tensors, 0, 5)
        if variant == "List":
            yield {"inputs": tensors, "exponents": _like(tensors, low=0, high=3)}
        elif variant == "Scalar":
            for exponent in ((2, 0.5, -1.5) if dtype.is_floating_point else (2, 3)):
                yield {"inputs": tensors, "exponent": exponent}
        else:
            yield {"inputs": tensors, "exponents": [abs(v) for v in _scalars(len(tensors), dtype)]}

    return build


for _variant in ("List", "Scalar", "ScalarList"):
    CASES += _sweep(f"diopiForeachPow{_variant}", getattr(aten._foreach_pow, _variant), _pow(_variant),
                    FLOAT + ((torch.int64, torch.int32) if _variant != "List" else ()))


def _lerp(variant):
    def build(tensors, dtype):
        if variant == "List":
            yield {"inputs": tensors, "tensors1": _like(tensors), "weights": _like(tensors, low=0, high=1)}
        elif variant == "Scalar":
            for weight in (0.0, 0.3, 1.0, 1.5):
                yield {"inputs": tensors, "tensors1": _like(tensors), "weight": weight}
        else:
            yield {"inputs": tensors, "tensors1": _like(tensors), "weights": _scalars(len(tensors), dtype, 0.25)}

    return build


for _variant in ("List", "Scalar", "ScalarList"):
    CASES += _sweep(f"diopiForeachLerp{_variant}", getattr(aten._foreach_lerp, _variant), _lerp(_variant),
                    FLOAT)


def _addc(op, variant):
    def build(tensors, dtype):
        low = 0.5 if op == "addcdiv" else None
        if variant == "Scalar":
            for value in ((1, -0.5) if dtype.is_floating_point else (1, 2)):
                yield {"inputs": tensors, "tensors1": _like(tensors), "tensors2": _like(tensors, low=low),
                       "value": value}
        else:  # Tensor: a 1-D CPU tensor, one scalar per tensor; ScalarList: the same values as numbers
            scalars = _scalars(len(tensors), dtype)
            if variant == "Tensor":
                scalars = torch.tensor(scalars, dtype=torch.float64 if dtype.is_floating_point else torch.int64)
            yield {"inputs": tensors, "tensors1": _like(tensors), "tensors2": _like(tensors, low=low),
                   "scalars": scalars}

    return build


for _op in ("addcmul", "addcdiv"):
    for _variant in ("Scalar", "Tensor", "ScalarList"):
        CASES += _sweep(f"diopiForeach{_op.capitalize()}{_variant}",
                        getattr(getattr(aten, f"_foreach_{_op}"), _variant),
                        _addc(_op, _variant), FLOAT + ((torch.int64,) if _op == "addcmul" else ()))

# ---- unary ----------------------------------------------------------------------------------------------
_UNARY = {  # DIOPI name: (aten name, dtypes, low, high)
    "Abs": ("abs", FLOAT + INT_SOME, None, None), "Neg": ("neg", FLOAT + (torch.int64, torch.int32), None, None),
    "Sqrt": ("sqrt", FLOAT, 0.1, 5), "Rsqrt": ("rsqrt", FLOAT, 0.1, 5), "Exp": ("exp", FLOAT, None, None),
    "Expm1": ("expm1", FLOAT, None, None), "Log": ("log", FLOAT, 0.1, 5), "Log1p": ("log1p", FLOAT, -0.9, 5),
    "Log2": ("log2", FLOAT, 0.1, 5), "Log10": ("log10", FLOAT, 0.1, 5),
    "Reciprocal": ("reciprocal", FLOAT, 0.5, 3), "Sign": ("sign", FLOAT + INT_SOME, None, None),
    "Sigmoid": ("sigmoid", FLOAT, None, None), "Tanh": ("tanh", FLOAT, None, None), "Sin": ("sin", FLOAT, None, None),
    "Cos": ("cos", FLOAT, None, None), "Erf": ("erf", FLOAT, None, None), "Ceil": ("ceil", FLOAT, None, None),
    "Floor": ("floor", FLOAT, None, None), "Round": ("round", FLOAT, None, None),
    "Trunc": ("trunc", FLOAT, None, None), "Frac": ("frac", FLOAT, None, None),
}

for _name, (_op, _dtypes, _low, _high) in _UNARY.items():
    CASES += _sweep(f"diopiForeach{_name}", getattr(aten, f"_foreach_{_op}").default,
                    lambda tensors, dtype, low=_low, high=_high: [{"inputs": _bounded(tensors, low, high)}], _dtypes)

for _ord, _dt in ((2, None), (1, None), (float("inf"), None), (3, None), (2, torch.float64)):
    CASES += _sweep("diopiForeachNorm", aten._foreach_norm.Scalar,
                    # the infinity norm of an empty tensor is an error, as on CPU
                    lambda tensors, dtype, o=_ord, dt=_dt: [{"inputs": [t for t in tensors if 0 not in t.shape
                                                                         or o != float("inf")], "ord": o, "dtype": dt}],
                    (torch.float32, torch.float64) if _dt else FLOAT)


# ---- AMP: _amp_update_scale_ ----------------------------------------------------------------------------
def _update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    torch._amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval)


for _found, _tracker, _interval, _growth in itertools.product((0, 1), (0, 1, 4), (1, 2, 5), (2.0, 1.5)):
    CASES.append(Case("diopiAmpUpdateScaleInp", {
        "scale": T((), low=1, high=1000), "growth_tracker": T((), torch.int32, low=_tracker, high=_tracker + 1),
        "found_inf": T((), low=_found, high=_found), "growth_factor": _growth, "backoff_factor": 0.5,
        "growth_interval": _interval}, _update_scale, note=f"found_inf={_found}"))

# ---- more unary ones, max, powsum, a scalar base, functional zero/copy/clone -------------------------------
_MORE_UNARY = {"Acos": ("acos", -0.9, 0.9), "Asin": ("asin", -0.9, 0.9), "Atan": ("atan", None, None),
               "Tan": ("tan", -1.2, 1.2), "Sinh": ("sinh", None, None), "Cosh": ("cosh", None, None),
               "Erfc": ("erfc", None, None), "Lgamma": ("lgamma", 0.1, 5)}
for _name, (_op, _low, _high) in _MORE_UNARY.items():
    CASES += _sweep(f"diopiForeach{_name}", getattr(aten, f"_foreach_{_op}").default,
                    lambda tensors, dtype, low=_low, high=_high: [{"inputs": _bounded(tensors, low, high)}], FLOAT)


def _nonempty(tensors):
    return [t for t in tensors if 0 not in t.shape]  # max of an empty tensor is an error, as on CPU


CASES += _sweep("diopiForeachMax", aten._foreach_max.default,
                lambda tensors, dtype: [{"inputs": _nonempty(tensors)}], FLOAT + INT_SOME)
for _ord in (1, 2, 3):
    CASES += _sweep("diopiForeachPowsum", aten._foreach_powsum.Scalar,
                    lambda tensors, dtype, o=_ord: [{"inputs": tensors, "ord": o, "dtype": None}], FLOAT)
CASES += _sweep("diopiForeachPowScalarAndTensor", aten._foreach_pow.ScalarAndTensor,
                lambda tensors, dtype: [{"input": base, "exponents": tensors} for base in (2.0, 0.5)], FLOAT)
CASES += _sweep("diopiForeachZero", aten._foreach_zero.default, lambda tensors, dtype: [{"inputs": tensors}],
                FLOAT + INT_SOME + (torch.bool,))
CASES += _sweep("diopiForeachCopy", aten._foreach_copy.default,
                lambda tensors, dtype: [{"inputs": tensors, "srcs": _like(tensors, layout="transposed"),
                                         "non_blocking": False}], FLOAT + INT_SOME)
if hasattr(aten, "_foreach_clone"):  # torch 2.12 and later (the torch library leaves it out before)
    CASES += _sweep("diopiForeachClone", aten._foreach_clone.default,
                    lambda tensors, dtype: [{"inputs": tensors, "memory_format": None},
                                            {"inputs": tensors, "memory_format": torch.contiguous_format}],
                    FLOAT + INT_SOME)


def _in_place(case: Case) -> Case | None:
    """The functional foreach case `case` as a case of its ``...Inp`` twin (same arguments).

    The twin writes the results into ``inputs``; where a result's dtype differs
    from its input's, ATen refuses the in-place op, and so must the function.
    """
    name = case.function.replace("diopiForeach", "", 1)
    for variant in ("ScalarList", "Scalar", "List", "Tensor", ""):
        if name.endswith(variant):
            twin = f"diopiForeach{name[: len(name) - len(variant)]}Inp{variant}"
            break
    if twin not in FUNCTIONS or "inputs" not in case.args:
        return None
    functional = case.reference

    def reference(**kwargs):
        (results,) = functional(**kwargs)
        for target, result in zip(kwargs["inputs"], results):
            if result.dtype != target.dtype:
                raise RuntimeError(f"result type {result.dtype} can't be cast to {target.dtype}")
            target.copy_(result)

    return dataclasses.replace(case, function=twin, reference=reference)


CASES += [twin for twin in map(_in_place, list(CASES)) if twin is not None]
