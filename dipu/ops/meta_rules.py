"""Rules that consult an op's meta kernel: the general shape rule ``meta`` and the stride rules.

Generated wrappers take shapes from a named rule (dipu/ops/shape_rules.py) or, for any other op, from
``meta``; the strides of a functional output from the stride rule the generator chose for the op (Note
[Output strides]). ``memory_format`` is ATen's ``suggest_memory_format``, which the stride rules and the
``impl:`` kernels that keep their input's layout (dipu/ops/memory_format.py) share. This module is a leaf:
it imports torch only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_Tensor = torch.Tensor
_Generator = torch._C.Generator  # torch.Generator's metaclass makes isinstance() cost 0.7 us
_channels_last = torch.channels_last
_channels_last_3d = torch.channels_last_3d
_contiguous = torch.contiguous_format


def memory_format(tensor: torch.Tensor) -> torch.memory_format:
    """ATen's ``suggest_memory_format`` for the dense layouts kernels produce (torch's Python version,
    ``torch._prims_common.suggest_memory_format``, costs about 30 us a call)."""
    if tensor.is_contiguous():
        return _contiguous
    ndim = tensor.dim()
    if ndim == 4 and tensor.is_contiguous(memory_format=_channels_last):
        return _channels_last
    if ndim == 5 and tensor.is_contiguous(memory_format=_channels_last_3d):
        return _channels_last_3d
    return _contiguous


# Note [Memoized meta inference]
# Running an op on meta tensors costs tens of microseconds, and for ops whose
# meta kernel is a Python decomposition (layer_norm, batch_norm, nll_loss, ...)
# about a millisecond. Training repeats the same shapes every step, so `meta`
# memoizes its answer per argument signature: shape, stride and dtype of each
# tensor and the value of everything else, which is all a meta kernel can see.
# Only successful inferences are cached; a bad call recomputes and raises.
_META_CACHE_SIZE = 4096


def _signature(args: tuple) -> tuple:
    """The memo key of an argument tuple (flat loops: this runs on every call)."""
    key: list[object] = []
    for value in args:
        if isinstance(value, _Tensor):
            key.append((value.shape, value.stride(), value.dtype))
        elif type(value) is list or type(value) is tuple:
            key.append(tuple([(v.shape, v.stride(), v.dtype) if isinstance(v, _Tensor) else v for v in value]))
        elif type(value) is _Generator:
            key.append(None)
        else:
            key.append(value)
    return tuple(key)


def _memoized(infer: Callable[[tuple], Any]) -> Callable[..., Any]:
    """``infer(args)`` answered from a cache keyed by the arguments' signature."""
    cache: dict = {}

    def rule(*args):
        key = _signature(args)
        try:
            return cache[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable argument: infer without caching
            return infer(args)
        answer = infer(args)
        if len(cache) >= _META_CACHE_SIZE:
            cache.clear()
        cache[key] = answer
        return answer

    return rule


def _to_meta(value, dtype=None):
    if isinstance(value, _Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=dtype or value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_to_meta(v, dtype) for v in value)
    if isinstance(value, torch.Generator):
        return None
    return value


def _run_on_meta(overload, kwarg_names: tuple[str, ...], args):
    positional = -len(kwarg_names) or None
    values = [_to_meta(v) for v in args]
    kwargs = dict(zip(kwarg_names, values[positional:])) if kwarg_names else {}
    return overload(*values[:positional], **kwargs)


def meta(overload, kwarg_names: tuple[str, ...], several: bool):
    """The general shape rule: run ``overload`` on meta tensors shaped like the arguments."""

    def spec(result):
        return None if result is None else (result.shape, result.dtype)

    def infer(args):
        result = _run_on_meta(overload, kwarg_names, args)
        return tuple(spec(r) for r in result) if several else spec(result)

    return _memoized(infer)


# Note [Output strides]
# Generated wrappers allocate functional outputs contiguous while every tensor argument is contiguous
# (the common case, one ``is_contiguous`` per tensor). Otherwise they ask a stride rule for the strides the
# CPU kernel would give its outputs, so that a channels_last (or transposed) input keeps its layout through
# pointwise ops, interpolation, padding, normalization, ... as on the CPU (Note [Memory formats of outputs]
# covers the ops done by hand). The generator picks each op's stride rule (``StrideRule`` in
# scripts/autogen/model.py): ops with an elementwise shape rule follow TensorIterator
# (``elementwise_strides``), whose strides a structured meta kernel (add, addcmul) computes exactly; the
# meta kernels of some elementwise ops are Python references that order broadcast and 0-dim operands
# differently. Every other op runs its own meta kernel (``meta_strides``), except the few whose meta kernel
# lays outputs out otherwise than the CPU kernel does (found by running OpInfo samples with channels_last
# and transposed inputs on both, torch 2.13): their entries in diopi_functions.yaml say ``strides:
# contiguous`` (the CPU kernel allocates contiguous; the meta kernel follows its input) or ``strides:
# {format_of: <argument>}`` (the CPU kernel allocates its first output in that argument's
# ``suggest_memory_format``; the meta kernel allocates contiguous). A stride rule answers None (contiguous)
# for an output it cannot infer, and those that infer are memoized (Note [Memoized meta inference]). The C++
# wrappers compute the elementwise rule themselves (Note [Elementwise strides in C++] in
# dipu/kernels/cpp/wrapper_support.h), and for the pointwise ops whose iterator takes the operands in another
# order than the schema's (shape rule ``pointwise_alike``) where those operands share one layout; they need none
# for reductions and matrix products, whose outputs ATen lays out contiguously; the others they leave to these.
_TENSOR_ITERATORS = {1: torch.neg, 2: torch.add, 3: torch.addcmul}


def _strides_of(result):
    return None if result is None else result.stride()


def _elementwise(args):
    operands = [_to_meta(v, torch.float32) for v in args if isinstance(v, _Tensor)]
    try:
        return _TENSOR_ITERATORS[len(operands)](*operands).stride()
    except (KeyError, RuntimeError):  # no operand, more than three, or shapes that do not broadcast
        return None


def elementwise_strides():
    """The strides TensorIterator gives the output of an elementwise op on these operands."""
    return _memoized(_elementwise)


def meta_strides(overload, kwarg_names: tuple[str, ...], several: bool):
    """The strides of ``overload``'s meta kernel's outputs (a tuple when it has several)."""

    def infer(args):
        try:
            result = _run_on_meta(overload, kwarg_names, args)
        except Exception:  # no meta kernel (or bad arguments, which the kernel reports itself)
            return None
        return tuple(_strides_of(r) for r in result) if several else _strides_of(result)

    return _memoized(infer)


def contiguous_strides(*_):
    """The stride rule of an op whose CPU kernel allocates contiguous outputs."""
    return


def format_of_strides(position: int, several: bool):
    """The ``suggest_memory_format`` of argument ``position`` for the first output (a stride rule may answer a
    memory format); any others contiguous."""

    def rule(*args):
        layout = memory_format(args[position])
        return (layout,) if several else layout

    return rule
