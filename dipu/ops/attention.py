"""Fused attention on dipu: the kernels of PyTorch's overrideable SDPA placeholders.

``F.scaled_dot_product_attention`` reaches ``_scaled_dot_product_fused_attention_overrideable`` (and, for
backward, its ``_backward``) when the core's backend choice says so (Note [Fused attention on dipu] in
dipu/csrc/attention.cpp). The two kernels here (``impl:`` of their spec entries) allocate the outputs, resolve
the scale, keep the dropout generator's state for backward, and call the op library's DIOPI functions; their C++
twins (dipu/kernels/cpp/impl_kernels.cpp) do the same on the C++ path. Op libraries may build those functions on the
blockwise algorithm of dipu/diopi/attention.py (Note [Blockwise attention]), as the torch library does in Python and
in C++ (diopi_impl/torch_cpp/attention.cpp).

Note [The DIOPI attention contract]
``diopiScaledDotProductAttention(ctx, out, logsumexp, query, key, value, attn_bias, dropout_p, is_causal,
scale, generator)`` computes ``softmax(scale * query @ key^T + bias) @ value`` with dropout on the attention
weights:
- query (B, Hq, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev), one floating dtype; Hq a multiple of Hk
  (grouped-query attention: query head h reads key/value head h // (Hq / Hk));
- attn_bias: None, an additive float tensor or a boolean mask (True takes part), broadcastable to
  (B, Hq, L, S);
- is_causal: query row i sees key columns j <= i (top-left aligned, as PyTorch's math path);
- scale: already resolved (1 / sqrt(E) unless the caller gave one);
- out (B, Hq, L, Ev) in the query dtype; logsumexp (B, Hq, L), float64 for float64 input and float32
  otherwise: the log of each row's softmax denominator, of the scaled and biased scores;
- dropout: each attention weight is kept with probability 1 - dropout_p, drawn from ``generator`` (a dipu
  generator; None: the device's default), kept ones scaled by 1 / (1 - dropout_p). The backward gets a
  generator in the state the forward's had before it drew and must draw the same mask.
``diopiScaledDotProductAttentionBackward`` writes the gradients asked for (an output None is not wanted):
grad_attn_bias has attn_bias's shape (summed over its broadcast dimensions), grad_key/grad_value key's and
value's (summed over the query heads sharing them).
"""

from __future__ import annotations

import math

import torch

from dipu._core import _C
from dipu.diopi.attention import accumulation_dtype


def resolve_scale(query, scale) -> float:
    return 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)


# ---- the kernels of the placeholders (impl: entries in diopi_functions.yaml) ---------------------------------


def fused_attention(diopi, ctx, query, key, value, attn_bias, dropout_p, is_causal, return_debug_mask, scale=None):
    """``_scaled_dot_product_fused_attention_overrideable`` on dipu: see Note [The DIOPI attention contract].

    ``philox_seed`` carries the state of the device's default generator before the dropout mask was drawn (an
    empty tensor without dropout), which the backward restores; ``debug_attn_mask`` is always empty.
    """
    d = ctx.device
    batch, heads, length = query.shape[:3]
    out = _C.empty([batch, heads, length, value.shape[-1]], query.dtype, d)
    logsumexp = _C.empty([batch, heads, length], accumulation_dtype(query.dtype), d)
    generator, rng_state = None, torch.empty(0, dtype=torch.uint8)
    if dropout_p > 0:
        generator = _C.default_generator(d)
        rng_state = generator.get_state()
    status = diopi(ctx, out, logsumexp, query, key, value, attn_bias, float(dropout_p), bool(is_causal),
                   resolve_scale(query, scale), generator)
    cum_seq_q, cum_seq_k = _C.empty([0], torch.int64, d), _C.empty([0], torch.int64, d)  # dense: unused
    return status, (out, logsumexp, cum_seq_q, cum_seq_k, length, key.shape[-2], rng_state,
                    torch.empty(0, dtype=torch.int64), _C.empty([0], query.dtype, d))


def restored_generator(rng_state, device: int):
    """A new dipu generator in the state ``rng_state`` (a forward's ``philox_seed``), or None without dropout."""
    if rng_state is None or rng_state.numel() == 0:
        return None
    generator = torch.Generator(device=torch.device("dipu", device))
    generator.set_state(rng_state.cpu())
    return generator


def fused_attention_backward(diopi, ctx, grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp,
                             cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset,
                             scale=None):
    """``_scaled_dot_product_fused_attention_overrideable_backward`` on dipu (see fused_attention)."""
    d = ctx.device
    grads = [_C.empty(list(t.shape), t.dtype, d) if wanted else None
             for t, wanted in zip((query, key, value), grad_input_mask[:3])]
    grad_bias = None
    if grad_input_mask[3] and attn_bias is not None and attn_bias.is_floating_point():
        grad_bias = _C.empty(list(attn_bias.shape), attn_bias.dtype, d)
    generator = restored_generator(philox_seed, d) if dropout_p > 0 else None
    status = diopi(ctx, *grads, grad_bias, grad_out, query, key, value, attn_bias, out, logsumexp,
                   float(dropout_p), bool(is_causal), resolve_scale(query, scale), generator)
    return status, (*grads, grad_bias)
