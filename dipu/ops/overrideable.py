"""CPU substitutes for the ``*_overrideable`` entry points PyTorch sends PrivateUse1.

Note [Overrideable ops in the fallback]
ATen routes some ops on PrivateUse1 to placeholders that exist only to be
overridden by a backend (``convolution_overrideable`` and its backward, the
overrideable fused-attention pair). They have no CPU kernel, so the boxed CPU
fallback cannot run them and autocompare has no reference for them. Each gets
here a substitute: a function of the placeholder's arguments, on CPU tensors,
computed by the op the placeholder stands for (``convolution``,
``convolution_backward``, the math attention). :func:`register` installs, for
every placeholder without a dipu kernel (none in the op library, or forced to
the fallback), a kernel that runs its substitute on host copies and returns
results on the op's dipu device; a generated kernel that answers
``FORCE_FALLBACK`` reaches the same substitute through :func:`run_on_cpu`.
"""

from __future__ import annotations

import collections
import math
import os
import sys
import warnings

import torch

from dipu.hooks import device_of

aten = torch.ops.aten


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups,
                         output_mask):
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    return aten.convolution_backward(grad_output, input, weight, [channels], stride, padding, dilation, transposed,
                                     output_padding, groups, output_mask)


def _scale(query, scale):
    return 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale


def _attention_scores(query, key, attn_bias, is_causal, scale):
    """scale * Q K^T + bias in float32, with causal and boolean masks applied as -inf (softmax comes after)."""
    scores = torch.matmul(query.float(), key.float().transpose(-2, -1)) * _scale(query, scale)
    if is_causal:
        length, source = scores.shape[-2:]
        causal = torch.ones(length, source, dtype=torch.bool).tril(diagonal=source - length)
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_bias is not None:
        scores = scores.masked_fill(~attn_bias, float("-inf")) if attn_bias.dtype == torch.bool else scores + attn_bias
    return scores


def _check_no_dropout(dropout_p: float) -> None:
    if dropout_p > 0:
        raise NotImplementedError(
            "_scaled_dot_product_fused_attention_overrideable: the CPU fallback cannot run dropout_p > 0 "
            "(the dropout mask is drawn by the vendor's kernel); implement the op for dipu or use dropout_p=0")


def fused_attention(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *,
                    scale=None):
    _check_no_dropout(dropout_p)
    scores = _attention_scores(query, key, attn_bias, is_causal, scale)
    logsumexp = scores.logsumexp(-1)
    output = torch.matmul(torch.softmax(scores, -1), value.float()).to(query.dtype)
    empty = torch.empty(0, dtype=torch.int64)
    return (output, logsumexp, empty, empty.clone(), query.shape[-2], key.shape[-2], empty.clone(), empty.clone(),
            torch.empty(0, dtype=query.dtype))


def fused_attention_backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
                             cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale=None):
    """The math attention's gradients, written out (kernels run below autograd, so it cannot be asked)."""
    _check_no_dropout(dropout_p)
    probabilities = torch.softmax(_attention_scores(query, key, attn_bias, is_causal, scale), -1)
    grad_out = grad_out.float()
    grad_value = torch.matmul(probabilities.transpose(-2, -1), grad_out)
    grad_probabilities = torch.matmul(grad_out, value.float().transpose(-2, -1))
    grad_scores = probabilities * (grad_probabilities - (grad_probabilities * probabilities).sum(-1, keepdim=True))
    scaled = grad_scores * _scale(query, scale)
    grad_query = torch.matmul(scaled, key.float())
    grad_key = torch.matmul(scaled.transpose(-2, -1), query.float())
    grad_bias = None
    if grad_input_mask[3] and attn_bias is not None and attn_bias.is_floating_point():
        grad_bias = grad_scores.sum_to_size(attn_bias.shape).to(attn_bias.dtype)
    grads = (grad_query.to(query.dtype), grad_key.to(key.dtype), grad_value.to(value.dtype))
    return (*(g if wanted else None for g, wanted in zip(grads, grad_input_mask)), grad_bias)


#: Placeholder op name -> its CPU substitute (Note [Overrideable ops in the fallback]).
CPU_SUBSTITUTES = {
    "convolution_overrideable": convolution,
    "convolution_backward_overrideable": convolution_backward,
    "_scaled_dot_product_fused_attention_overrideable": fused_attention,
    "_scaled_dot_product_fused_attention_overrideable_backward": fused_attention_backward,
}


def _map(fn, value):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map(fn, v) for v in value)
    return value


#: Calls per placeholder op, merged into ``dipu.fallback_counts()``.
counts: collections.Counter = collections.Counter()


def run_on_cpu(name: str, args: tuple, kwargs: dict):
    """Run placeholder op ``name`` through its CPU substitute: host copies in, results on the op's device."""
    counts[name] += 1
    if os.environ.get("DIPU_LOG_FALLBACK_INFO") == "1":
        print(f"dipu: fallback to cpu: {name}", file=sys.stderr)
    elif counts[name] == 1:
        warnings.warn(f"dipu: {name} has no dipu kernel; it runs on the CPU through the fallback "
                      "(set DIPU_LOG_FALLBACK_INFO=1 to log every call)", stacklevel=2)
    device = torch.device("dipu", device_of(*args, *kwargs.values()))
    host = lambda t: t.detach().cpu()  # noqa: E731
    result = CPU_SUBSTITUTES[name](*_map(host, args), **_map(host, kwargs))
    return _map(lambda t: t.to(device), result)


def _fallback_kernel(name: str):
    def kernel(*args, **kwargs):
        return run_on_cpu(name, args, kwargs)

    return kernel


_library: torch.library.Library | None = None


def register(registered) -> None:
    """Serve every placeholder op not in ``registered`` (dipu kernels) through its CPU substitute.

    Calling it again replaces the previous registration.
    """
    global _library
    if _library is not None:
        _library._destroy()
    _library = torch.library.Library("aten", "IMPL")
    for name in CPU_SUBSTITUTES.keys() - set(registered):
        _library.impl(name, _fallback_kernel(name), "PrivateUse1")


def unregister() -> None:
    global _library
    if _library is not None:
        _library._destroy()
        _library = None
