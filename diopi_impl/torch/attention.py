"""Attention (Note [The DIOPI attention contract] in dipu/ops/attention.py).

On CPU aliases without dropout, ATen's fused CPU kernel (``_scaled_dot_product_flash_attention_for_cpu`` and
its backward) does the work: it walks the scores in small tiles and keeps only the output and the row
logsumexp, so nothing of size L x S is ever allocated. Everything else (dropout drawn from the dipu generator,
a gradient of the bias, a value head size other than the query's, a non-CPU native device) runs the blockwise
algorithm of dipu/diopi/attention.py (Note [Blockwise attention]) on the aliases.
"""

import math

import torch

from dipu.diopi import SUCCESS, native_generator
from dipu.diopi import native_alias as alias
from dipu.diopi.attention import blockwise_backward, blockwise_forward, repeat_heads, sum_head_groups
from ._aten import optional_alias
from ._library import library

aten = torch.ops.aten

_FLOATING = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _unit_stride(tensor):
    """``tensor`` with its last dim dense: the CPU kernel assumes it and reads past the data otherwise."""
    return tensor if tensor is None or tensor.stride(-1) == 1 or tensor.shape[-1] == 1 else tensor.contiguous()


def _fused_cpu_kernel_fits(query, value, dropout_p) -> bool:
    return dropout_p == 0 and query.device.type == "cpu" and query.shape[-1] == value.shape[-1]


def _flash_mask(bias, query, key):
    """The bias as the CPU kernel takes it: additive, 2-d or 4-d (broadcast dims as stride-0 views)."""
    if bias is None:
        return None
    if bias.dtype == torch.bool:
        bias = torch.zeros(bias.shape, dtype=query.dtype).masked_fill_(~bias, -math.inf)
    if bias.dim() not in (2, 4):
        bias = bias.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    return _unit_stride(bias)


@library.register(dtypes=_FLOATING)
def diopiScaledDotProductAttention(ctx, out, logsumexp, query, key, value, attn_bias, dropout_p, is_causal, scale,
                                   generator):
    d = ctx.device
    q, k, v, bias = alias(query, d), alias(key, d), alias(value, d), optional_alias(attn_bias, d)
    o, lse = alias(out, d), alias(logsumexp, d)
    if _fused_cpu_kernel_fits(q, v, dropout_p):
        heads = q.shape[1]
        result, result_lse = aten._scaled_dot_product_flash_attention_for_cpu(
            _unit_stride(q), _unit_stride(repeat_heads(k, heads)), _unit_stride(repeat_heads(v, heads)), 0.0, is_causal,
            attn_mask=_flash_mask(bias, q, k), scale=scale)
        o.copy_(result)
        lse.copy_(result_lse)
        return SUCCESS
    blockwise_forward(o, lse, q, k, v, bias, dropout_p, is_causal, scale,
                      native_generator(generator, d) if dropout_p > 0 else None)
    return SUCCESS


@library.register(dtypes=_FLOATING)
def diopiScaledDotProductAttentionBackward(ctx, grad_query, grad_key, grad_value, grad_attn_bias, grad_out, query,
                                           key, value, attn_bias, out, logsumexp, dropout_p, is_causal, scale,
                                           generator):
    d = ctx.device
    q, k, v, bias = alias(query, d), alias(key, d), alias(value, d), optional_alias(attn_bias, d)
    grads = [optional_alias(g, d) for g in (grad_query, grad_key, grad_value, grad_attn_bias)]
    if grads[3] is None and _fused_cpu_kernel_fits(q, v, dropout_p):
        heads, kv_heads = q.shape[1], k.shape[1]
        results = aten._scaled_dot_product_flash_attention_for_cpu_backward(
            _unit_stride(alias(grad_out, d)), _unit_stride(q), _unit_stride(repeat_heads(k, heads)),
            _unit_stride(repeat_heads(v, heads)), _unit_stride(alias(out, d)), alias(logsumexp, d), 0.0, is_causal,
            attn_mask=_flash_mask(bias, q, k), scale=scale)
        for grad, result, summed in zip(grads, results, (False, True, True)):
            if grad is not None:
                grad.copy_(sum_head_groups(result, kv_heads) if summed else result)
        return SUCCESS
    blockwise_backward(*grads, alias(grad_out, d), q, k, v, bias, dropout_p, is_causal, scale,
                       native_generator(generator, d) if dropout_p > 0 else None)
    return SUCCESS
