"""The Python side of the CPU fallback: substitutes for the ``*_overrideable`` entry points PyTorch sends
PrivateUse1, and the one entry every kernel that answers FORCE_FALLBACK goes through.

The boxed fallback itself (copy in, run on CPU, copy or write back) is in the native core
(dipu/csrc/cpu_fallback.cpp); an op without a dipu kernel reaches it from the dispatcher directly.

Note [Overrideable ops in the fallback]
ATen routes some ops on PrivateUse1 to placeholders that exist only to be
overridden by a backend (``convolution_overrideable`` and its backward, the
overrideable fused-attention pair). They have no CPU kernel, so the boxed CPU
fallback cannot run them and autocompare has no reference for them. Each gets
here a substitute: a function of the placeholder's arguments, on CPU tensors,
computed by the op the placeholder stands for (``convolution``,
``convolution_backward``; attention by the blockwise algorithm of
dipu/diopi/attention.py, whose dropout draws from the dipu generator). :func:`register` installs, for
every placeholder without a dipu kernel (none in the op library, or forced to
the fallback), a kernel that runs its substitute on host copies and returns
results on the op's dipu device; a generated kernel that answers
``FORCE_FALLBACK`` reaches the same substitute through :func:`run_on_cpu`.
"""

from __future__ import annotations

import collections
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch

from dipu._core import _C
from dipu.diopi.attention import accumulation_dtype, blockwise_backward, blockwise_forward
from dipu.ops.attention import resolve_scale, restored_generator

aten = torch.ops.aten


def device_of(*args) -> int:
    """The dipu device of the first dipu tensor among ``args`` (and the tensors of list arguments)."""
    for value in args:
        for tensor in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "dipu":
                return tensor.get_device()
    raise RuntimeError("no dipu tensor among the arguments")


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups,
                         output_mask):
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    return aten.convolution_backward(grad_output, input, weight, [channels], stride, padding, dilation, transposed,
                                     output_padding, groups, output_mask)


def _dropout_generator():
    """The native generator of the current dipu device's default generator, when it can draw on the CPU."""
    index = _C.current_device()
    generator = _C.native_generator(None, index)
    if generator.device.type != "cpu":
        raise NotImplementedError(
            "_scaled_dot_product_fused_attention_overrideable: the CPU fallback cannot draw the dropout mask "
            f"(the dipu generator's native device is {generator.device.type}, not cpu); implement "
            "diopiScaledDotProductAttention for dipu or use dropout_p=0")
    return generator


def fused_attention(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *,
                    scale=None):
    """The placeholder's outputs as dipu's kernel gives them (dipu/ops/attention.py), computed blockwise."""
    batch, heads, length = query.shape[:3]
    out = torch.empty(batch, heads, length, value.shape[-1], dtype=query.dtype)
    logsumexp = torch.empty(batch, heads, length, dtype=accumulation_dtype(query.dtype))
    generator, rng_state = None, torch.empty(0, dtype=torch.uint8)
    if dropout_p > 0:
        generator = _dropout_generator()
        rng_state = generator.get_state()
    blockwise_forward(out, logsumexp, query, key, value, attn_bias, dropout_p, is_causal,
                      resolve_scale(query, scale), generator)
    empty = torch.empty(0, dtype=torch.int64)
    return (out, logsumexp, empty, empty.clone(), length, key.shape[-2], rng_state, empty.clone(),
            torch.empty(0, dtype=query.dtype))


def fused_attention_backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
                             cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale=None):
    """The gradients of :func:`fused_attention`, the dropout mask redrawn from the state in ``philox_seed``."""
    grads = [torch.empty_like(t) if wanted else None for t, wanted in zip((query, key, value), grad_input_mask[:3])]
    grad_bias = None
    if grad_input_mask[3] and attn_bias is not None and attn_bias.is_floating_point():
        grad_bias = torch.empty_like(attn_bias)
    generator = None
    if dropout_p > 0:
        index = _C.current_device()
        generator = _C.native_generator(restored_generator(philox_seed, index), index)
    blockwise_backward(*grads, grad_bias, grad_out, query, key, value, attn_bias, dropout_p, is_causal,
                       resolve_scale(query, scale), generator)
    return (*grads, grad_bias)


#: Placeholder op name -> its CPU substitute (Note [Overrideable ops in the fallback]).
CPU_SUBSTITUTES: dict[str, Callable[..., Any]] = {
    "convolution_overrideable": convolution,
    "convolution_backward_overrideable": convolution_backward,
    "_scaled_dot_product_fused_attention_overrideable": fused_attention,
    "_scaled_dot_product_fused_attention_overrideable_backward": fused_attention_backward,
}


def cpu_reference(name: str):
    """The CPU op for aten op ``name`` ("add.out"): the op itself, or for a placeholder (no CPU kernel)
    its substitute."""
    substitute = CPU_SUBSTITUTES.get(name)
    if substitute is not None:
        return substitute
    packet, overload = name.split(".") if "." in name else (name, "default")
    return getattr(getattr(aten, packet), overload)


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
    elif counts[name] == 1 and _C.announce_fallback():  # Note [One fallback warning] in dipu/csrc/cpu_fallback.cpp
        warnings.warn(_C.fallback_announcement(name), stacklevel=2)
    device = torch.device("dipu", device_of(*args, *kwargs.values()))
    host = lambda t: t.detach().cpu()  # noqa: E731
    previous = _C.exchange_device(device.index)  # a substitute drawing random numbers uses this device's generator
    try:
        result = CPU_SUBSTITUTES[name](*_map(host, args), **_map(host, kwargs))
    finally:
        _C.exchange_device(previous)
    return _map(lambda t: t.to(device), result)


def run(name: str, args: tuple, kwargs: dict):
    """Run op ``name`` on the CPU: through its substitute if it is a placeholder, else the core's boxed fallback."""
    if name in CPU_SUBSTITUTES:  # Note [Overrideable ops in the fallback]
        return run_on_cpu(name, args, kwargs)
    return _C.cpu_fallback(name, *_numbers_as_tensors(name, args, kwargs))


_NUMBERS = (bool, int, float, complex)


def _numbers_as_tensors(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A Python number where the schema says Tensor (torch hands wrapped numbers to Python kernels as numbers:
    ``t.add_(1)``, whose scalar function a library may answer FORCE_FALLBACK) made the 0-dim CPU tensor the
    boxed fallback accepts, which promotes as the wrapped number did (a 0-dim operand never sets the result's
    dtype within its category)."""
    if not any(isinstance(v, _NUMBERS) for v in (*args, *kwargs.values())):
        return args, kwargs
    schema = cpu_reference(name)._schema
    tensor = torch._C.TensorType.get()

    def convert(argument, value):
        return torch.tensor(value) if isinstance(value, _NUMBERS) and argument.type == tensor else value

    positional = [a for a in schema.arguments if not a.kwarg_only]
    args = tuple(convert(a, v) for a, v in zip(positional, args)) + tuple(args[len(positional):])
    named = {a.name: a for a in schema.arguments}
    return args, {k: convert(named[k], v) if k in named else v for k, v in kwargs.items()}


def fallback_counts() -> dict[str, int]:
    """How many times each aten op ran through the CPU fallback."""
    return {**_C.fallback_counts(), **counts}


def reset_fallback_counts() -> None:
    _C.reset_fallback_counts()
    counts.clear()


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
    _C.unroute_whole_ops()
    _library = torch.library.Library("aten", "IMPL")
    for name in CPU_SUBSTITUTES.keys() - set(registered):
        _library.impl(name, _fallback_kernel(name), "PrivateUse1")
    _C.route_whole_ops_to_fallback()  # Note [Functional ops the CPU runs whole] in dipu/csrc/cpu_fallback.cpp


def unregister() -> None:
    global _library
    _C.unroute_whole_ops()
    if _library is not None:
        _library._destroy()
        _library = None
