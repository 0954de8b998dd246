"""The reference op library: DIOPI functions written on ATen kernels.

Each function applies ATen to zero-copy native aliases of its dipu tensors
(``_C.alias``: CPU tensors under the simulated vendor, CUDA tensors under a
CUDA vendor), writing straight into the output's memory. Aliasing every tensor
argument is also the device check: a tensor on another device raises there.
0-dim CPU tensors pass through unchanged, as ATen allows them beside any device.
"""

from dipu.diopi import OpLibrary

library = OpLibrary("torch")

from . import (  # noqa: E402,F401  (they register)
    attention, elementwise, indexing, nn, optim, pointwise, random, reduction, tensor,
)
