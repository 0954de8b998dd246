"""ATen functions through their fastest Python binding, and the plumbing around their results.

Note [Calling ATen from kernels]
``torch.ops.aten.<op>(...)`` resolves the overload in Python on every call
(about 15 us for native_layer_norm on this machine), while torch's C++-bound
functions (``torch.native_layer_norm``, ``torch._C._nn.*``) parse arguments
in C++ (about 4 us). ``fast_aten.<op>`` returns the bound function where torch
has one and the op packet otherwise; both dispatch to the same ATen kernel.
Kernels call ops as ``fast_aten.<op>(...)`` and specific overloads as
``torch.ops.aten.<op>.<overload>(...)`` (about 5 us). An out= overload is
reached through the binding too where torch has one (``torch._softmax(...,
out=o)``, ``torch._C._nn.max_pool2d_with_indices(..., out=(o, i))``): about 3 us
less per call than its OpOverload (torch 2.13, measured on the tiny-op
benchmark's inputs).
"""

import torch

from dipu.diopi import native_alias as alias

_BOUND = (torch._C._VariableFunctions, torch._C._nn, torch._C._linalg, torch._C._special, torch._C._fft)


class _FastAten:
    def __getattr__(self, name: str):
        for namespace in _BOUND:
            function = getattr(namespace, name, None)
            if function is not None:
                break
        else:
            function = getattr(torch.ops.aten, name)
        setattr(self, name, function)
        return function


fast_aten = _FastAten()


def alias_tensors(value, d):
    """The ATen view of a list-taking function's argument: aliases for dipu tensors and lists of them; CPU
    tensors (a step count, a scalar tensor) and Scalar[] lists pass through."""
    if isinstance(value, torch.Tensor):
        return value if value.is_cpu else alias(value, d)
    if isinstance(value, (list, tuple)):
        return [alias(v, d) if isinstance(v, torch.Tensor) and not v.is_cpu else v for v in value]
    return value


def optional_alias(tensor, d):
    """The native alias of an optional tensor argument (None stays None)."""
    return None if tensor is None else alias(tensor, d)


def write_results(outputs, results, d) -> None:
    """Copy ATen's results into the outputs DIOPI was given (None: not wanted), resizing an
    output whose shape the CPU kernel chose differently (linalg's data-dependent shapes).
    One _foreach_copy_ does all the copies: about half the time of a copy_ each for three outputs."""
    targets, sources = [], []
    for output, result in zip(outputs, results):
        if output is None:
            continue
        if output.shape != result.shape:
            output.resize_(result.shape)
        targets.append(alias(output, d))
        sources.append(result)
    if targets:
        torch._foreach_copy_(targets, sources)


def require_copy(ctx, result: torch.Tensor):
    """A new dipu tensor from the context holding ``result``: the output of a function that allocates its
    outputs (a shape known only after computing, a functional _foreach_ result)."""
    tensor = ctx.require_tensor(result.shape, result.dtype)
    alias(tensor, ctx.device).copy_(result)
    return tensor
