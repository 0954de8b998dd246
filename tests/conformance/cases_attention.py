"""Conformance cases: attention (diopi_impl/torch/attention.py), against a float64 CPU reference of the contract
(Note [The DIOPI attention contract] in dipu/ops/attention.py). Dropout and the backward are checked through
autograd in tests/test_attention.py (see skips.py)."""

import itertools
import math

import torch

from conformance.spec import Case, T

CASES = []


def _reference(query, key, value, attn_bias, dropout_p, is_causal, scale):
    """(out, logsumexp) of softmax(scale * Q K^T + bias) V, computed in float64."""
    q, k, v = (t.double() for t in (query, key, value))
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    scores = q @ k.transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    if attn_bias is not None:
        scores = scores.masked_fill(~attn_bias, -math.inf) if attn_bias.dtype == torch.bool else scores + attn_bias
    logsumexp = scores.logsumexp(-1)
    out = torch.softmax(scores, -1) @ v
    return out.to(query.dtype), logsumexp.to(torch.float64 if query.dtype == torch.float64 else torch.float32)


# Reduced-precision kernels round the attention weights to their dtype before weighting values of up to 3 (as
# flash attention does): an absolute error of a few units of the dtype's precision (bfloat16 2^-8, float16 2^-11)
# against the float64 reference, which torch's default atol (1e-5) refuses.
TOLERANCE = {torch.bfloat16: dict(rtol=1.6e-2, atol=1.5e-2), torch.float16: dict(rtol=1e-3, atol=2e-3)}

# (query, key, value) shapes: equal heads, L != S, grouped-query heads, a value head size of its own
SHAPES = (((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)), ((1, 4, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4)),
          ((2, 2, 4, 8), (2, 2, 9, 8), (2, 2, 9, 5)))
for dtype, (qs, ks, vs), layout in itertools.product(
        (torch.float32, torch.float64, torch.bfloat16, torch.float16), SHAPES, ("contiguous", "transposed", "sliced")):
    length, source = qs[2], ks[2]
    biases = (None, T((length, source)), T((qs[0], 1, length, source), layout="sliced"), T((source,)),
              T((length, source), torch.bool))
    for bias, is_causal, scale in itertools.product(biases, (False, True), (1 / math.sqrt(qs[-1]), 0.7)):
        if bias is not None and is_causal:
            continue  # PyTorch never passes both (its math path refuses them)
        CASES.append(Case("diopiScaledDotProductAttention", {
            "query": T(qs, layout=layout), "key": T(ks), "value": T(vs, layout=layout), "attn_bias": bias,
            "dropout_p": 0.0, "is_causal": is_causal, "scale": scale}, _reference, dtype=dtype,
            **TOLERANCE.get(dtype, {}),
            note="" if bias is None else f"bias {list(bias.shape)} {bias.dtype or ''}".rstrip()))
