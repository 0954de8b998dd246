"""Elementwise arithmetic, comparison and activation functions."""

import torch

from dipu._core import _C
from dipu.diopi import SUCCESS
from . import library

alias = _C.alias


@library.register
def diopiAdd(ctx, out, input, other, alpha):
    d = ctx.device
    if alpha == 1:
        torch.add(alias(input, d), alias(other, d), out=alias(out, d))
    else:
        torch.add(alias(input, d), alias(other, d), alpha=alpha, out=alias(out, d))
    return SUCCESS


@library.register
def diopiAddScalar(ctx, out, input, other, alpha):
    d = ctx.device
    torch.add(alias(input, d), other, alpha=alpha, out=alias(out, d))
    return SUCCESS


@library.register
def diopiSub(ctx, out, input, other, alpha):
    d = ctx.device
    torch.sub(alias(input, d), alias(other, d), alpha=alpha, out=alias(out, d))
    return SUCCESS


@library.register
def diopiSubScalar(ctx, out, input, other, alpha):
    d = ctx.device
    torch.sub(alias(input, d), other, alpha=alpha, out=alias(out, d))
    return SUCCESS


@library.register
def diopiMul(ctx, out, input, other):
    d = ctx.device
    torch.mul(alias(input, d), alias(other, d), out=alias(out, d))
    return SUCCESS


@library.register
def diopiMulScalar(ctx, out, input, other):
    d = ctx.device
    torch.mul(alias(input, d), other, out=alias(out, d))
    return SUCCESS


@library.register
def diopiDiv(ctx, out, input, other, rounding_mode):
    d = ctx.device
    torch.div(alias(input, d), alias(other, d), rounding_mode=rounding_mode, out=alias(out, d))
    return SUCCESS


@library.register
def diopiDivScalar(ctx, out, input, other, rounding_mode):
    d = ctx.device
    torch.div(alias(input, d), other, rounding_mode=rounding_mode, out=alias(out, d))
    return SUCCESS


def _comparison(name: str, aten):
    """diopiEq and diopiEqScalar (...) differ only in the ATen function they apply."""

    def tensor(ctx, out, input, other):
        d = ctx.device
        aten(alias(input, d), alias(other, d), out=alias(out, d))
        return SUCCESS

    def scalar(ctx, out, input, other):
        d = ctx.device
        aten(alias(input, d), other, out=alias(out, d))
        return SUCCESS

    tensor.__name__, scalar.__name__ = name, name + "Scalar"
    library.register(tensor)
    library.register(scalar)


for _name, _aten in [("diopiEq", torch.eq), ("diopiNe", torch.ne), ("diopiLt", torch.lt),
                     ("diopiLe", torch.le), ("diopiGt", torch.gt), ("diopiGe", torch.ge)]:
    _comparison(_name, _aten)


def _unary(name: str, aten):
    def function(ctx, out, input):
        d = ctx.device
        aten(alias(input, d), out=alias(out, d))
        return SUCCESS

    function.__name__ = name
    library.register(function)


for _name, _aten in [("diopiNeg", torch.neg), ("diopiSqrt", torch.sqrt),
                     ("diopiRsqrt", torch.rsqrt), ("diopiExp", torch.exp), ("diopiLog", torch.log),
                     ("diopiTanh", torch.tanh), ("diopiSigmoid", torch.sigmoid)]:
    _unary(_name, _aten)


@library.register
def diopiAbs(ctx, out, input):
    d = ctx.device
    x = alias(input, d)
    if out is input and x.is_complex():  # abs_: a complex tensor cannot hold its real result (as ATen refuses)
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    torch.abs(x, out=alias(out, d))
    return SUCCESS


@library.register
def diopiRelu(ctx, out, input):
    d = ctx.device
    torch.clamp_min(alias(input, d), 0, out=alias(out, d))  # torch.relu has no out=
    return SUCCESS


@library.register
def diopiReluInp(ctx, input):
    torch.relu_(alias(input, ctx.device))
    return SUCCESS


@library.register
def diopiThresholdBackward(ctx, grad_input, grad_output, input, threshold):
    d = ctx.device
    torch.ops.aten.threshold_backward.grad_input(
        alias(grad_output, d), alias(input, d), threshold, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiGelu(ctx, out, input, approximate):
    d = ctx.device
    torch._C._nn.gelu(alias(input, d), approximate=approximate, out=alias(out, d))
    return SUCCESS


@library.register
def diopiGeluBackward(ctx, grad_input, grad_output, input, approximate):
    d = ctx.device
    torch.ops.aten.gelu_backward.grad_input(
        alias(grad_output, d), alias(input, d), approximate=approximate, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiWhere(ctx, out, condition, input, other):
    d = ctx.device
    torch.where(alias(condition, d), alias(input, d), alias(other, d), out=alias(out, d))
    return SUCCESS


@library.register
def diopiAddcmul(ctx, out, input, tensor1, tensor2, value):
    d = ctx.device
    torch.addcmul(alias(input, d), alias(tensor1, d), alias(tensor2, d), value=value, out=alias(out, d))
    return SUCCESS


@library.register
def diopiAddcdiv(ctx, out, input, tensor1, tensor2, value):
    d = ctx.device
    torch.addcdiv(alias(input, d), alias(tensor1, d), alias(tensor2, d), value=value, out=alias(out, d))
    return SUCCESS


@library.register
def diopiLerpScalar(ctx, out, input, end, weight):
    d = ctx.device
    torch.lerp(alias(input, d), alias(end, d), weight, out=alias(out, d))
    return SUCCESS


@library.register
def diopiMaskedFillInp(ctx, input, mask, value):
    d = ctx.device
    alias(input, d).masked_fill_(alias(mask, d), alias(value, d))
    return SUCCESS


@library.register
def diopiMaskedFillInpScalar(ctx, input, mask, value):
    d = ctx.device
    alias(input, d).masked_fill_(alias(mask, d), value)
    return SUCCESS


@library.register
def diopiTriu(ctx, out, input, diagonal):
    d = ctx.device
    torch.triu(alias(input, d), diagonal, out=alias(out, d))
    return SUCCESS
