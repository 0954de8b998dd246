"""Activation functions and their backwards: relu and friends, gelu, silu, the shrinks and thresholds, glu,
sigmoid/tanh, softmax and log_softmax, rrelu.

The functions that differ only in their ATen overload come from tables (Note [Table-made functions] in
_table.py).
"""

import torch

from dipu.diopi import FALSE, OUTPUT_DTYPE, SUCCESS, native_generator
from dipu.diopi import native_alias as alias
from ._library import library
from ._table import copy_function, inplace_function, out_function

aten = torch.ops.aten

# ---- without attributes: diopiX(out, input) and, where declared, diopiXInp(input) -------------------------
for _suffix, _op in (("Sigmoid", "sigmoid"), ("Tanh", "tanh")):
    out_function("diopi" + _suffix, getattr(aten, _op).out)
for _suffix, _op in (("Silu", "silu"), ("Hardswish", "hardswish"), ("Hardsigmoid", "hardsigmoid"), ("Mish", "mish")):
    out_function("diopi" + _suffix, getattr(aten, _op).out)
    inplace_function("diopi" + _suffix + "Inp", _op + "_")
inplace_function("diopiReluInp", "relu_")


@library.register(aten=aten.relu.out)  # in C++ by hand: relu.out is ATen's copy of a functional relu
def diopiRelu(ctx, out, input):
    d = ctx.device
    torch.clamp_min(alias(input, d), 0, out=alias(out, d))  # torch.relu has no out=
    return SUCCESS


# ---- with attributes ---------------------------------------------------------------------------------------
for _suffix, _op, _inplace in (("Hardtanh", "hardtanh", True), ("LeakyRelu", "leaky_relu", True),
                               ("Elu", "elu", True), ("Softplus", "softplus", False),
                               ("Threshold", "threshold", True), ("Softshrink", "softshrink", False),
                               ("Hardshrink", "hardshrink", False), ("Glu", "glu", False),
                               ("Logit", "logit", True)):
    out_function("diopi" + _suffix, getattr(aten, _op).out)
    if _inplace:
        inplace_function("diopi" + _suffix + "Inp", _op + "_")

out_function("diopiLogSigmoidForward", aten.log_sigmoid_forward.output, ("output", "buffer"))
out_function("diopiGelu", aten.gelu.out)


# ---- backwards: diopiXBackward(grad_input, grad_output, ...) -----------------------------------------------
for _suffix, _overload in (
        ("Silu", aten.silu_backward.grad_input), ("Sigmoid", aten.sigmoid_backward.grad_input),
        ("Tanh", aten.tanh_backward.grad_input), ("Hardsigmoid", aten.hardsigmoid_backward.grad_input),
        ("Hardtanh", aten.hardtanh_backward.grad_input), ("LeakyRelu", aten.leaky_relu_backward.grad_input),
        ("Softplus", aten.softplus_backward.grad_input),
        ("LogSigmoid", aten.log_sigmoid_backward.grad_input),
        ("Softshrink", aten.softshrink_backward.grad_input), ("Hardshrink", aten.hardshrink_backward.grad_input),
        ("Glu", aten.glu_backward.grad_input), ("Logit", aten.logit_backward.grad_input),
        ("Threshold", aten.threshold_backward.grad_input)):
    out_function(f"diopi{_suffix}Backward", _overload, ("grad_input",))
out_function("diopiGeluBackward", aten.gelu_backward.grad_input, ("grad_input",))


# hardswish_backward.out is a composite over the functional kernel; the functional one is real
copy_function("diopiHardswishBackward", aten.hardswish_backward.default)


@library.register
def diopiEluBackward(ctx, grad_input, grad_output, input, alpha, scale, input_scale, is_result):
    d = ctx.device
    aten.elu_backward.grad_input(alias(grad_output, d), alpha, scale, input_scale, is_result, alias(input, d),
                                 grad_input=alias(grad_input, d))
    return SUCCESS


# ---- softmax -----------------------------------------------------------------------------------------------
# The proto's softmax functions take no half_to_float (ATen's _softmax does): the output's dtype says it, and the
# backward's input_dtype is its output's (Note [Derived arguments] in dipu/diopi/library.py).

out_function("diopiSoftmax", aten._softmax.out, derived={"half_to_float": FALSE})
out_function("diopiLogSoftmax", aten._log_softmax.out, derived={"half_to_float": FALSE})
out_function("diopiSoftmaxBackward", aten._softmax_backward_data.out, ("grad_input",),
             derived={"input_dtype": OUTPUT_DTYPE})
out_function("diopiLogSoftmaxBackward", aten._log_softmax_backward_data.out, ("out",),
             derived={"input_dtype": OUTPUT_DTYPE})


# ---- randomized: rrelu draws its slopes from the dipu generator's native generator -------------------------

out_function("diopiRreluWithNoiseBackward", aten.rrelu_with_noise_backward.out, ("out",))


@library.register
def diopiRreluWithNoise(ctx, out, noise, input, lower, upper, training, generator):
    d = ctx.device
    torch.ops.aten.rrelu_with_noise.out(alias(input, d), alias(noise, d), lower, upper, training,
                                        native_generator(generator, d), out=alias(out, d))
    return SUCCESS


