"""Loss functions and their backwards.

The loss forwards copy ATen's result: their out= kernels may use ``out`` as scratch space of the input's
size, which an alias cannot grow to (see diopiMSELoss)."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import fast_aten, optional_alias
from ._library import library
from ._table import copy_function, out_function

aten = torch.ops.aten

# The backwards apply one overload each (Note [Table-made functions] in _table.py), as does multilabel margin loss.
for _name, _overload, _outs in (
        ("diopiMSELossBackward", aten.mse_loss_backward.grad_input, ("grad_input",)),
        ("diopiSmoothL1LossBackward", aten.smooth_l1_loss_backward.grad_input, ("grad_input",)),
        ("diopiHuberLossBackward", aten.huber_loss_backward.out, ("grad_input",)),
        ("diopiBCELossBackward", aten.binary_cross_entropy_backward.grad_input, ("grad_input",)),
        ("diopiMultiMarginLossBackward", aten.multi_margin_loss_backward.grad_input, ("grad_input",)),
        ("diopiMultilabelMarginLoss", aten.multilabel_margin_loss_forward.output, ("output", "is_target")),
        ("diopiMultilabelMarginLossBackward", aten.multilabel_margin_loss_backward.grad_input, ("grad_input",))):
    out_function(_name, _overload, _outs)


@library.register(aten=aten.nll_loss_forward.output)
def diopiNLLLossV2(ctx, out, total_weight, input, target, weight, reduction, ignore_index):
    d = ctx.device
    x = alias(input, d)
    forward = aten.nll_loss2d_forward if x.dim() == 4 else aten.nll_loss_forward  # (N, C, H, W): nll_loss2d
    forward.output(x, alias(target, d), optional_alias(weight, d), reduction,
                   ignore_index, output=alias(out, d), total_weight=alias(total_weight, d))
    return SUCCESS


@library.register
def diopiNLLLossV2Backward(ctx, grad_input, grad_output, input, target, weight, total_weight, reduction,
                           ignore_index):
    d = ctx.device
    x = alias(input, d)
    backward = aten.nll_loss2d_backward if x.dim() == 4 else aten.nll_loss_backward
    backward.grad_input(
        alias(grad_output, d), x, alias(target, d), optional_alias(weight, d), reduction, ignore_index,
        alias(total_weight, d), grad_input=alias(grad_input, d))
    return SUCCESS


# ATen's mse_loss.out uses `out` as scratch space of the input's size, which an alias cannot grow to
copy_function("diopiMSELoss", aten.mse_loss.default)
copy_function("diopiSmoothL1Loss", aten.smooth_l1_loss.default)
copy_function("diopiHuberLoss", aten.huber_loss.default)
copy_function("diopiBCELoss", aten.binary_cross_entropy.default)
copy_function("diopiBCEWithLogits", aten.binary_cross_entropy_with_logits.default)
copy_function("diopiMultiMarginLoss", aten.multi_margin_loss.default)


@library.register(aten=aten._ctc_loss.out)
def diopiCTCLossUnreduced(ctx, out, log_alpha, log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    d = ctx.device
    results = fast_aten._ctc_loss(alias(log_probs, d), alias(targets, d), input_lengths, target_lengths, blank,
                             zero_infinity)
    for output, result in zip((out, log_alpha), results):
        if output.shape != result.shape:  # CPU sizes log_alpha from the lengths, meta from the tensors
            output.resize_(result.shape)
        alias(output, d).copy_(result)
    return SUCCESS


@library.register(aten=aten._ctc_loss_backward.out)
def diopiCTCLossUnreducedBackward(ctx, grad_input, grad_output, log_probs, targets, input_lengths, target_lengths,
                         neg_log_likelihood, log_alpha, blank, zero_infinity):
    d = ctx.device
    alias(grad_input, d).copy_(fast_aten._ctc_loss_backward(
        alias(grad_output, d), alias(log_probs, d), alias(targets, d), input_lengths, target_lengths,
        alias(neg_log_likelihood, d), alias(log_alpha, d), blank, zero_infinity))
    return SUCCESS
