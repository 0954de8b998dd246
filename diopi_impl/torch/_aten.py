"""ATen functions through their fastest Python binding.

Note [Calling ATen from kernels]
``torch.ops.aten.<op>(...)`` resolves the overload in Python on every call
(about 15 us for native_layer_norm on this machine), while torch's C++-bound
functions (``torch.native_layer_norm``, ``torch._C._nn.*``) parse arguments
in C++ (about 4 us). ``fast_aten.<op>`` returns the bound function where torch
has one and the op packet otherwise; both dispatch to the same ATen kernel.
Kernels call ops as ``fast_aten.<op>(...)`` and specific overloads as
``torch.ops.aten.<op>.<overload>(...)`` (about 5 us).
"""

import torch

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
