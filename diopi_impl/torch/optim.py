"""Optimizer kernels: the _foreach_ family, fused Adam/AdamW/SGD/Adagrad steps and the AMP (GradScaler) kernels.

Note [Foreach kernels from the proto]
The _foreach_ functions differ only in the ATen op they apply, so every one is made from its proto
declaration by the table builder (``foreach_function``, Note [Table-made functions] in _table.py), the ATen
overload found from the function's name: ``diopiForeach<Op>[Scalar|ScalarList|List|Tensor]`` is the
functional ``_foreach_<op>.<variant>``, ``diopiForeach<Op>Inp<variant>`` the in-place ``_foreach_<op>_``.
In-place functions write straight into the inputs' memory; functional ones copy ATen's results into new
dipu tensors from ``ctx.require_tensor``.
"""

import inspect

import torch

from dipu.diopi import FUNCTIONS, SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import alias_tensors as native
from ._library import library
from ._table import aten_overload, foreach_function, inplace_function

aten = torch.ops.aten

_SNAKE = {"ClampMin": "clamp_min", "ClampMax": "clamp_max"}
#: Functions whose overload the naming pattern does not give.
_FOREACH_OVERLOADS = {
    "diopiForeachNorm": ("_foreach_norm", "Scalar"),
    "diopiForeachPowsum": ("_foreach_powsum", "Scalar"),
    "diopiForeachPowScalarAndTensor": ("_foreach_pow", "ScalarAndTensor"),
}


def _foreach_overload(name: str):
    """The ATen _foreach_ overload ``name`` applies (Note [Foreach kernels from the proto]); None where the
    installed torch lacks it (Note [ATen ops a torch lacks] in _table.py)."""
    if name in _FOREACH_OVERLOADS:
        return aten_overload(name, *_FOREACH_OVERLOADS[name])
    rest = name.removeprefix("diopiForeach")
    inplace = "Inp" in rest
    op, _, variant = rest.partition("Inp") if inplace else (rest, "", "")
    if not inplace:
        for candidate in ("ScalarList", "Scalar", "List", "Tensor"):
            if op.endswith(candidate) and op != candidate:
                op, variant = op[: -len(candidate)], candidate
                break
    return aten_overload(name, f"_foreach_{_SNAKE.get(op, op.lower())}{'_' if inplace else ''}", variant or "default")


for _name in sorted(FUNCTIONS):
    if _name.startswith("diopiForeach") and (_overload := _foreach_overload(_name)) is not None:
        foreach_function(_name, _overload)


# ---- fused optimizer steps -------------------------------------------------------------------------------


def _fused_adam(step):
    def kernel(ctx, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
               eps, weight_decay, amsgrad, maximize, grad_scale, found_inf):
        d = ctx.device
        step(native(params, d), native(grads, d), native(exp_avgs, d), native(exp_avg_sqs, d),
             native(max_exp_avg_sqs, d), native(state_steps, d), lr=native(lr, d), beta1=beta1, beta2=beta2,
             weight_decay=weight_decay, eps=eps, amsgrad=amsgrad, maximize=maximize,
             grad_scale=native(grad_scale, d), found_inf=native(found_inf, d))
        return SUCCESS

    return kernel


def _fused_sgd(ctx, params, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening, nesterov, maximize,
               is_first_step, grad_scale, found_inf):
    d = ctx.device
    torch._fused_sgd_(
        native(params, d), native(grads, d), native(momentum_buffer_list, d), weight_decay=weight_decay,
        momentum=momentum, lr=native(lr, d), dampening=dampening, nesterov=nesterov, maximize=maximize,
        is_first_step=is_first_step, grad_scale=native(grad_scale, d), found_inf=native(found_inf, d))
    return SUCCESS


def _fused_adagrad(ctx, params, grads, state_sums, state_steps, lr, lr_decay, weight_decay, eps, maximize,
                   grad_scale, found_inf):
    d = ctx.device
    torch._fused_adagrad_(
        native(params, d), native(grads, d), native(state_sums, d), native(state_steps, d), lr=native(lr, d),
        lr_decay=lr_decay, weight_decay=weight_decay, eps=eps, maximize=maximize,
        grad_scale=native(grad_scale, d), found_inf=native(found_inf, d))
    return SUCCESS


def _named(kernel, name: str):
    """``kernel`` registered under ``name`` (one ATen kernel serves a float and a tensor lr)."""

    def named(*args):
        return kernel(*args)

    named.__name__ = named.__qualname__ = name
    named.__signature__ = inspect.signature(kernel)
    return named


for _name, _kernel, _aten in (
        ("diopiFusedAdam", _fused_adam(torch._fused_adam_), aten._fused_adam_.default),
        ("diopiFusedAdamTensorLr", _fused_adam(torch._fused_adam_), aten._fused_adam_.tensor_lr),
        ("diopiFusedAdamW", _fused_adam(torch._fused_adamw_), aten._fused_adamw_.default),
        ("diopiFusedAdamWTensorLr", _fused_adam(torch._fused_adamw_), aten._fused_adamw_.tensor_lr),
        ("diopiFusedSgd", _fused_sgd, aten._fused_sgd_.default),
        ("diopiFusedSgdTensorLr", _fused_sgd, aten._fused_sgd_.tensor_lr),
        ("diopiFusedAdagrad", _fused_adagrad, aten._fused_adagrad_.default),
        ("diopiFusedAdagradTensorLr", _fused_adagrad, aten._fused_adagrad_.tensor_lr)):
    library.register(_named(_kernel, _name), aten=_aten)


# ---- AMP -------------------------------------------------------------------------------------------------


@library.register(aten=aten._amp_foreach_non_finite_check_and_unscale_.default, direct=True)
def diopiAmpForeachNonFiniteCheckAndUnscaleInp(ctx, scaled_grads, found_inf, inv_scale):
    d = ctx.device
    torch._amp_foreach_non_finite_check_and_unscale_(native(scaled_grads, d), alias(found_inf, d), alias(inv_scale, d))
    return SUCCESS

inplace_function("diopiAmpUpdateScaleInp", "_amp_update_scale_")  # Note [Table-made functions] in _table.py
