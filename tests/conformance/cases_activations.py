"""Conformance cases: activations and their backwards (diopi_impl/torch/activations.py)."""

import itertools

import torch
import torch.nn.functional as F

from conformance.spec import FLOAT, SHAPES, Case, T, unary_cases

aten = torch.ops.aten
GLU_SHAPES = ((4,), (2, 6), (6, 2), (3, 4, 2), (0, 2), (2, 0, 4))


def _grad_cases(function, reference, names=("grad_output", "input"), attrs=None, dtypes=FLOAT, shapes=SHAPES,
                low=None, high=None, grad_shape=lambda shape, **_: shape):
    """``function(grad_input, grad_output, <input>, *attrs)`` over shapes x layouts x dtypes x attributes."""
    cases = []
    attr_names = list((attrs or {}).keys())
    for dtype, shape, values in itertools.product(dtypes, shapes, itertools.product(*(attrs or {}).values())):
        attr_args = dict(zip(attr_names, values))
        layouts = ("contiguous", "transposed", "sliced") if len(shape) >= 2 else ("contiguous", "sliced")
        for layout in layouts if shape else ("contiguous",):
            args = {names[0]: T(grad_shape(shape, **attr_args), layout=layout),
                    names[1]: T(shape, layout=layout, low=low, high=high), **attr_args}
            cases.append(Case(function, args, reference, dtype=dtype))
    return cases


CASES = []

# ---- forward activations without attributes: diopiX and diopiXInp ------------------------------------------
for _suffix, _op, _fn in (("Silu", "silu", F.silu), ("Hardswish", "hardswish", F.hardswish),
                          ("Hardsigmoid", "hardsigmoid", F.hardsigmoid), ("Mish", "mish", F.mish),
                          ("Relu", "relu", torch.relu)):
    CASES += unary_cases(f"diopi{_suffix}", lambda input, _fn=_fn: _fn(input), dtypes=FLOAT, low=-5, high=5)
    CASES += unary_cases(f"diopi{_suffix}Inp", lambda input, _op=_op: getattr(aten, _op + "_")(input),
                         dtypes=FLOAT, low=-5, high=5, inplace=True)
CASES += unary_cases("diopiRelu", torch.relu, dtypes=(torch.int64, torch.int32, torch.int8))
CASES += _grad_cases("diopiThresholdBackward",
                     lambda grad_output, input, threshold: aten.threshold_backward(grad_output, input, threshold),
                     attrs={"threshold": [0, 0.5]})
CASES += unary_cases("diopiGelu", lambda input, approximate: F.gelu(input, approximate=approximate), dtypes=FLOAT,
                     attrs={"approximate": ["none", "tanh"]})
CASES += _grad_cases("diopiGeluBackward",
                     lambda grad_output, input, approximate:
                     aten.gelu_backward(grad_output, input, approximate=approximate),
                     attrs={"approximate": ["none", "tanh"]})

# ---- forward activations with attributes ----------------------------------------------------------------------
_ATTRS = {  # suffix: (aten op, attributes, in place?)
    "Hardtanh": ("hardtanh", {"min_val": [-1, -0.5], "max_val": [1, 2.5]}, True),
    "LeakyRelu": ("leaky_relu", {"negative_slope": [0.01, 0.2, -0.5]}, True),
    "Elu": ("elu", {"alpha": [1.0, 0.5], "scale": [1.0507], "input_scale": [1.0, 2.0]}, True),
    "Softplus": ("softplus", {"beta": [1, 2.5], "threshold": [20, 1]}, False),
    "Threshold": ("threshold", {"threshold": [0, 0.5], "value": [-1, 0]}, True),
    "Softshrink": ("softshrink", {"lambd": [0.5, 1.5]}, False),
    "Hardshrink": ("hardshrink", {"lambd": [0.5, 1.5]}, False),
}
for _suffix, (_op, _attrs, _inplace) in _ATTRS.items():
    _names = list(_attrs)
    CASES += unary_cases(f"diopi{_suffix}",
                         lambda input, _op=_op, _names=_names, **kw:
                         getattr(aten, _op)(input, *(kw[n] for n in _names)),
                         dtypes=FLOAT, attrs=_attrs)
    if _inplace:
        CASES += unary_cases(f"diopi{_suffix}Inp",
                             lambda input, _op=_op, _names=_names, **kw: getattr(aten, _op + "_")(
                                 input, *(kw[n] for n in _names)),
                             dtypes=FLOAT[::2], attrs=_attrs, inplace=True)
CASES += unary_cases("diopiGlu", lambda input, dim: F.glu(input, dim), dtypes=FLOAT, shapes=GLU_SHAPES[:4],
                     attrs={"dim": [-1]})
CASES += unary_cases("diopiGlu", lambda input, dim: F.glu(input, dim), dtypes=FLOAT, shapes=((2, 6), (4, 3, 2)),
                     attrs={"dim": [0]})
CASES += unary_cases("diopiLogit", lambda input, eps: torch.logit(input, eps), dtypes=FLOAT,
                     attrs={"eps": [None, 0.2]}, low=0.01, high=0.99)
CASES += unary_cases("diopiLogitInp", lambda input, eps: input.logit_(eps), dtypes=FLOAT,
                     attrs={"eps": [None, 0.2]}, low=0.01, high=0.99, inplace=True)
CASES += unary_cases("diopiLogSigmoidForward", lambda input: aten.log_sigmoid_forward(input), dtypes=FLOAT,
                     low=-30, high=30)

# ---- backwards ---------------------------------------------------------------------------------------------------
for _suffix, _overload in (("Silu", aten.silu_backward), ("Hardsigmoid", aten.hardsigmoid_backward),
                           ("Hardswish", aten.hardswish_backward)):
    CASES += _grad_cases(f"diopi{_suffix}Backward", lambda grad_output, input, _o=_overload: _o(grad_output, input),
                         low=-5, high=5)
for _suffix, _overload in (("Sigmoid", aten.sigmoid_backward), ("Tanh", aten.tanh_backward)):
    CASES += _grad_cases(f"diopi{_suffix}Backward", lambda grad_output, output, _o=_overload: _o(grad_output, output),
                         names=("grad_output", "output"), low=-1, high=1)
CASES += _grad_cases("diopiHardtanhBackward",
                     lambda grad_output, input, min_val, max_val:
                     aten.hardtanh_backward(grad_output, input, min_val, max_val),
                     attrs={"min_val": [-1, 0], "max_val": [1, 2]})
CASES += _grad_cases("diopiLeakyReluBackward",
                     lambda grad_output, input, negative_slope, input_is_result: aten.leaky_relu_backward(
                         grad_output, input, negative_slope, input_is_result),
                     attrs={"negative_slope": [0.01, 0.3], "input_is_result": [False, True]})
CASES += _grad_cases("diopiEluBackward",
                     lambda grad_output, input, alpha, scale, input_scale, is_result: aten.elu_backward(
                         grad_output, alpha, scale, input_scale, is_result, input),
                     attrs={"alpha": [1.0, 0.5], "scale": [1.5], "input_scale": [1.0], "is_result": [False, True]})
CASES += _grad_cases("diopiSoftplusBackward",
                     lambda grad_output, input, beta, threshold:
                     aten.softplus_backward(grad_output, input, beta, threshold),
                     attrs={"beta": [1, 2], "threshold": [20, 1]})
for _suffix, _overload in (("Softshrink", aten.softshrink_backward), ("Hardshrink", aten.hardshrink_backward)):
    CASES += _grad_cases(f"diopi{_suffix}Backward",
                         lambda grad_output, input, lambd, _o=_overload: _o(grad_output, input, lambd),
                         attrs={"lambd": [0.5, 1.5]})
CASES += _grad_cases("diopiGluBackward", lambda grad_output, input, dim: aten.glu_backward(grad_output, input, dim),
                     attrs={"dim": [-1]}, shapes=GLU_SHAPES[:4],
                     grad_shape=lambda shape, dim: shape[:-1] + (shape[-1] // 2,))
CASES += _grad_cases("diopiLogitBackward",
                     lambda grad_output, input, eps: aten.logit_backward(grad_output, input, eps),
                     attrs={"eps": [None, 0.2]}, low=0.01, high=0.99)
CASES += [Case("diopiLogSigmoidBackward",
               {"grad_output": T(shape, layout=layout), "input": T(shape, layout=layout, low=-30, high=30),
                "buffer": T(shape, low=0, high=1)},
               lambda grad_output, input, buffer: aten.log_sigmoid_backward(grad_output, input, buffer), dtype=dtype)
          for dtype, shape in itertools.product(FLOAT, SHAPES)
          for layout in (("contiguous", "transposed") if len(shape) >= 2 else ("contiguous",))]
