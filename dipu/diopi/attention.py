"""The blockwise attention algorithm, part of the op-library API (dipu/diopi/__init__.py).

Note [Blockwise attention]
:func:`blockwise_forward` and :func:`blockwise_backward` implement Note [The DIOPI attention contract] (in
dipu/ops/attention.py) with ATen ops on tensors of any device, a block of query rows at a time: only a
(B, Hq, rows, S) slice of the scores exists at once (``_BLOCK_ELEMENTS`` elements at most), never the whole
(B, Hq, L, S) matrix the math path allocates and keeps for backward; with is_causal a block computes only the
key columns its rows can see. Backward recomputes each block's softmax from query and key instead of storing
it, and redraws the dropout mask block by block in the forward's order from the restored generator state. The
torch op library (diopi_impl/torch/attention.py) uses them where ATen has no fused kernel for the case
(dropout, a bias gradient, different value head size, a non-CPU native device); the CPU substitutes of the
placeholders (dipu/ops/overrideable.py) use them always.
"""

from __future__ import annotations

import math

import torch

#: The most score elements one block holds (64 MiB of float32); see Note [Blockwise attention].
_BLOCK_ELEMENTS = 1 << 24


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The precision scores, the softmax and the logsumexp are kept in: float64 for float64, float32 otherwise."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _rows_per_block(query, key) -> int:
    batch, heads, length = query.shape[:3]
    return max(1, min(length, _BLOCK_ELEMENTS // max(1, batch * heads * key.shape[-2])))


def repeat_heads(tensor, heads: int):
    """Key or value with its heads repeated to ``heads`` (grouped-query attention); unchanged when equal."""
    groups = heads // tensor.shape[1]
    return tensor if groups == 1 else tensor.repeat_interleave(groups, dim=1)


def sum_head_groups(grad, heads: int):
    """The gradient of :func:`repeat_heads`: sum each group of repeated heads back into one."""
    batch, repeated = grad.shape[:2]
    if repeated == heads:
        return grad
    return grad.view(batch, heads, repeated // heads, *grad.shape[2:]).sum(2)


def _visible_columns(is_causal: bool, last: int, source: int) -> int:
    """How many key columns query rows before ``last`` can see: causal rows see columns up to their own index."""
    return min(source, last) if is_causal else source


def _block_scores(query_rows, key, bias, is_causal: bool, scale: float, first: int, acc: torch.dtype):
    """Scaled, biased and masked scores (B, H, rows, columns) of query rows ``first``.. against the first
    ``columns = key.shape[-2]`` keys, in ``acc`` precision."""
    scores = torch.matmul(query_rows.to(acc), key.to(acc).transpose(-2, -1)).mul_(scale)
    rows, columns = scores.shape[-2:]
    if bias is not None:
        if bias.dim() >= 2 and bias.shape[-2] != 1:
            bias = bias[..., first:first + rows, :]
        if bias.shape[-1] != 1:
            bias = bias[..., :columns]
        if bias.dtype == torch.bool:
            scores.masked_fill_(~bias, -math.inf)
        else:
            scores.add_(bias)
    if is_causal:
        hidden = torch.ones(rows, columns, dtype=torch.bool, device=scores.device).triu_(first + 1)
        scores.masked_fill_(hidden, -math.inf)
    return scores


def _keep_mask(weights, source: int, dropout_p: float, generator):
    """Dropout's kept ``weights``, already scaled by 1 / (1 - p). The draw covers every key column, seen or not,
    as ATen's math path draws it: an input that fits in one block gets the math path's mask for the same seed."""
    shape = (*weights.shape[:-1], source)
    keep = torch.empty(shape, dtype=weights.dtype, device=weights.device).bernoulli_(1 - dropout_p,
                                                                                     generator=generator)
    keep = keep[..., :weights.shape[-1]]
    return keep.mul_(1.0 / (1 - dropout_p)) if dropout_p < 1 else keep


def blockwise_forward(out, logsumexp, query, key, value, bias, dropout_p: float, is_causal: bool, scale: float,
                      generator) -> None:
    """Write attention into ``out`` and ``logsumexp`` (Note [The DIOPI attention contract]), one block of query
    rows at a time; ``generator`` is a native ``torch.Generator`` of the tensors' device (None: its default)."""
    heads, length = query.shape[1], query.shape[2]
    acc = accumulation_dtype(query.dtype)
    key, value = repeat_heads(key, heads), repeat_heads(value, heads)
    value_acc = value.to(acc)
    step = _rows_per_block(query, key)
    for first in range(0, length, step):
        last = min(length, first + step)
        columns = _visible_columns(is_causal, last, key.shape[-2])
        scores = _block_scores(query[:, :, first:last], key[:, :, :columns], bias, is_causal, scale, first, acc)
        block_lse = torch.logsumexp(scores, -1)
        weights = scores.sub_(block_lse.unsqueeze(-1)).exp_()
        if dropout_p > 0:
            weights.mul_(_keep_mask(weights, key.shape[-2], dropout_p, generator))
        out[:, :, first:last].copy_(torch.matmul(weights, value_acc[:, :, :columns]))
        logsumexp[:, :, first:last].copy_(block_lse)


def _reduce_to_bias(grad_scores, bias_shape):
    """Sum (B, H, rows, S) score gradients over the dimensions a bias of ``bias_shape`` broadcasts."""
    padded = (1,) * (4 - len(bias_shape)) + tuple(bias_shape)
    dims = [i for i in range(4) if padded[i] == 1 and grad_scores.shape[i] != 1]
    return grad_scores.sum(dims, keepdim=True) if dims else grad_scores


def blockwise_backward(grad_query, grad_key, grad_value, grad_bias, grad_out, query, key, value, bias,
                       dropout_p: float, is_causal: bool, scale: float, generator) -> None:
    """Write the gradients asked for (None: not wanted) of :func:`blockwise_forward`, recomputing each block."""
    heads, length = query.shape[1], query.shape[2]
    kv_heads = key.shape[1]
    acc = accumulation_dtype(query.dtype)
    key, value = repeat_heads(key, heads), repeat_heads(value, heads)
    key_acc, value_acc = key.to(acc), value.to(acc)
    key_sum = torch.zeros(key.shape, dtype=acc, device=key.device) if grad_key is not None else None
    value_sum = torch.zeros(value.shape, dtype=acc, device=value.device) if grad_value is not None else None
    bias_sum = None
    if grad_bias is not None:
        padded = (1,) * (4 - bias.dim()) + tuple(bias.shape)
        bias_sum = torch.zeros(padded, dtype=acc, device=bias.device)
    step = _rows_per_block(query, key)
    for first in range(0, length, step):
        last = min(length, first + step)
        columns = _visible_columns(is_causal, last, key.shape[-2])
        query_rows = query[:, :, first:last].to(acc)
        scores = _block_scores(query_rows, key[:, :, :columns], bias, is_causal, scale, first, acc)
        weights = torch.softmax(scores, -1)
        del scores
        grad_rows = grad_out[:, :, first:last].to(acc)
        grad_weights = torch.matmul(grad_rows, value_acc[:, :, :columns].transpose(-2, -1))
        if dropout_p > 0:
            keep = _keep_mask(weights, key.shape[-2], dropout_p, generator)
            if value_sum is not None:
                value_sum[:, :, :columns].add_(torch.matmul((weights * keep).transpose(-2, -1), grad_rows))
            grad_weights.mul_(keep)
            del keep
        elif value_sum is not None:
            value_sum[:, :, :columns].add_(torch.matmul(weights.transpose(-2, -1), grad_rows))
        # softmax backward: dS = P * (dP - rowsum(dP * P))
        row_dot = (grad_weights * weights).sum(-1, keepdim=True)
        grad_scores = grad_weights.sub_(row_dot).mul_(weights)
        del weights
        if bias_sum is not None:
            reduced = _reduce_to_bias(grad_scores, bias_sum.shape)
            target = bias_sum if bias_sum.shape[2] == 1 else bias_sum[:, :, first:last]
            (target if target.shape[3] == 1 else target[..., :columns]).add_(reduced)
        grad_scores.mul_(scale)
        if grad_query is not None:
            grad_query[:, :, first:last].copy_(torch.matmul(grad_scores, key_acc[:, :, :columns]))
        if key_sum is not None:
            key_sum[:, :, :columns].add_(torch.matmul(grad_scores.transpose(-2, -1), query_rows))
    if grad_key is not None:
        grad_key.copy_(sum_head_groups(key_sum, kv_heads))
    if grad_value is not None:
        grad_value.copy_(sum_head_groups(value_sum, kv_heads))
    if grad_bias is not None and bias_sum is not None:  # bias_sum is made exactly when grad_bias is given
        grad_bias.copy_(bias_sum.view(grad_bias.shape))

