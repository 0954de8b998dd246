"""Optimizer kernels: the _foreach_ family, fused Adam/AdamW/SGD steps and the AMP (GradScaler) kernels.

Note [Foreach kernels from the proto]
The _foreach_ functions differ only in the ATen op they apply, so they are made
here from their proto declarations rather than written out one by one: each
kernel takes the declared parameters (its ``__signature__`` is the proto's),
aliases every dipu tensor, and calls the matching ATen _foreach_ op on the
aliases. Since the signature is copied from the proto, ``library.register``
checks the declaration against the ATen overload's schema instead (Note
[Table-made functions are checked against ATen] in dipu/diopi/library.py).
In-place functions write straight into the inputs' memory; functional ones
copy ATen's results into new dipu tensors from ``ctx.require_tensor``.
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


def _native(value, d):
    """The ATen view of a DIOPI argument: aliases for dipu tensors and lists of them."""
    if isinstance(value, torch.Tensor):
        return value if value.is_cpu else alias(value, d)
    if isinstance(value, (list, tuple)):  # a Tensor[] (a Scalar[] holds numbers and passes through)
        return [alias(v, d) if isinstance(v, torch.Tensor) and not v.is_cpu else v for v in value]
    return value


def _new(ctx, results):
    """Fresh dipu tensors holding ``results`` (what a functional foreach function stores in ``outs``)."""
    d = ctx.device
    outs = []
    for result in results:
        out = ctx.require_tensor(result.shape, result.dtype)
        alias(out, d).copy_(result)
        outs.append(out)
    return outs


def _foreach_kernel(name: str, overload):
    params = FUNCTIONS[name].param_names
    functional = params[1] == "outs"
    inputs = params[2:] if functional else params[1:]
    # alpha and memory_format, always last, are kwarg-only in the ATen schemas
    keyword = inputs[-1] if inputs and inputs[-1] in ("alpha", "memory_format") else None

    def kernel(ctx, *args):
        d = ctx.device
        if functional:
            outs, args = args[0], args[1:]
        native = [_native(a, d) for a in args]
        result = overload(*native[:-1], **{keyword: native[-1]}) if keyword else overload(*native)
        if functional:
            outs[0] = _new(ctx, result)
        return SUCCESS

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    return kernel


_SNAKE = {"ClampMin": "clamp_min", "ClampMax": "clamp_max"}


def _aten_name(op: str) -> str:
    return _SNAKE.get(op, op.lower())


def _register_foreach():
    for name in sorted(FUNCTIONS):
        if not name.startswith("diopiForeach") or name in _WRITTEN_OUT:
            continue
        rest = name.removeprefix("diopiForeach")
        inplace = "Inp" in rest
        op, _, variant = rest.partition("Inp") if inplace else (rest, "", "")
        if not inplace:
            for candidate in ("ScalarList", "Scalar", "List", "Tensor"):
                if op.endswith(candidate) and op != candidate:
                    op, variant = op[: -len(candidate)], candidate
                    break
        aten_name = f"_foreach_{_aten_name(op)}{'_' if inplace else ''}"
        overload = getattr(getattr(aten, aten_name), variant or "default")
        # called through torch's C++ binding (Note [Calling ATen from kernels]), which picks the overload
        # the arguments' kinds select; the check is against the overload itself
        library.register(_foreach_kernel(name, getattr(fast_aten, aten_name)), aten=overload)


# written out below: their ATen names or arguments do not follow the pattern
_WRITTEN_OUT = {"diopiForeachNorm", "diopiForeachPowsum", "diopiForeachPowScalarAndTensor", "diopiForeachZeroInp",
                "diopiForeachCopyInp"}
_register_foreach()


@library.register
def diopiForeachNorm(ctx, outs, inputs, ord, dtype):
    d = ctx.device
    outs[0] = _new(ctx, torch._foreach_norm(_native(inputs, d), ord, dtype=dtype))
    return SUCCESS


@library.register
def diopiForeachPowsum(ctx, outs, inputs, ord, dtype):
    d = ctx.device
    outs[0] = _new(ctx, torch._foreach_powsum(_native(inputs, d), ord, dtype=dtype))
    return SUCCESS


@library.register
def diopiForeachPowScalarAndTensor(ctx, outs, input, exponents):
    d = ctx.device
    outs[0] = _new(ctx, torch._foreach_pow(input, _native(exponents, d)))
    return SUCCESS


@library.register
def diopiForeachZeroInp(ctx, inputs):
    torch._foreach_zero_(_native(inputs, ctx.device))
    return SUCCESS


@library.register
def diopiForeachCopyInp(ctx, inputs, srcs, non_blocking):
    d = ctx.device
    torch._foreach_copy_(_native(inputs, d), _native(srcs, d), non_blocking=non_blocking)
    return SUCCESS


# ---- fused optimizer steps --------------------------------------------------------------------


def _fused_adam(step):
    def kernel(ctx, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
               weight_decay, eps, amsgrad, maximize, grad_scale, found_inf):
        d = ctx.device
        step(_native(params, d), _native(grads, d), _native(exp_avgs, d), _native(exp_avg_sqs, d),
             _native(max_exp_avg_sqs, d), _native(state_steps, d), lr=_native(lr, d), beta1=beta1, beta2=beta2,
             weight_decay=weight_decay, eps=eps, amsgrad=amsgrad, maximize=maximize,
             grad_scale=_native(grad_scale, d), found_inf=_native(found_inf, d))
        return SUCCESS

    return kernel


def _fused_sgd(ctx, params, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening, nesterov, maximize,
               is_first_step, grad_scale, found_inf):
    d = ctx.device
    torch._fused_sgd_(
        _native(params, d), _native(grads, d), _native(momentum_buffer_list, d), weight_decay=weight_decay,
        momentum=momentum, lr=_native(lr, d), dampening=dampening, nesterov=nesterov, maximize=maximize,
        is_first_step=is_first_step, grad_scale=_native(grad_scale, d), found_inf=_native(found_inf, d))
    return SUCCESS


def _fused_adagrad(ctx, params, grads, state_sums, state_steps, lr, lr_decay, weight_decay, eps, maximize,
                   grad_scale, found_inf):
    d = ctx.device
    torch._fused_adagrad_(
        _native(params, d), _native(grads, d), _native(state_sums, d), _native(state_steps, d), lr=_native(lr, d),
        lr_decay=lr_decay, weight_decay=weight_decay, eps=eps, maximize=maximize,
        grad_scale=_native(grad_scale, d), found_inf=_native(found_inf, d))
    return SUCCESS


def _named(kernel, name: str):
    """``kernel`` registered under ``name`` (one ATen kernel serves a float and a tensor lr)."""

    def named(*args):
        return kernel(*args)

    named.__name__ = named.__qualname__ = name
    named.__signature__ = inspect.signature(kernel)
    return named


for _name, _kernel in (("diopiFusedAdam", _fused_adam(torch._fused_adam_)),
                       ("diopiFusedAdamTensorLr", _fused_adam(torch._fused_adam_)),
                       ("diopiFusedAdamW", _fused_adam(torch._fused_adamw_)),
                       ("diopiFusedAdamWTensorLr", _fused_adam(torch._fused_adamw_)),
                       ("diopiFusedSgd", _fused_sgd), ("diopiFusedSgdTensorLr", _fused_sgd),
                       ("diopiFusedAdagrad", _fused_adagrad), ("diopiFusedAdagradTensorLr", _fused_adagrad)):
    library.register(_named(_kernel, _name))


# ---- AMP ------------------------------------------------------------------------------------------


@library.register
def diopiAmpForeachNonFiniteCheckAndUnscaleInp(ctx, scaled_grads, found_inf, inv_scale):
    d = ctx.device
    torch._amp_foreach_non_finite_check_and_unscale_(_native(scaled_grads, d), alias(found_inf, d), alias(inv_scale, d))
    return SUCCESS


@library.register
def diopiAmpUpdateScaleInp(ctx, scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    d = ctx.device
    torch._amp_update_scale_(alias(scale, d), alias(growth_tracker, d), alias(found_inf, d), growth_factor,
                             backoff_factor, growth_interval)
    return SUCCESS
