"""The reference op library: DIOPI functions written on ATen kernels.

Each function applies ATen to zero-copy native aliases of its dipu tensors
(``dipu.diopi.native_alias``: CPU tensors under the simulated vendor, CUDA tensors under a
CUDA vendor), writing straight into the output's memory. Aliasing every tensor
argument is also the device check: a tensor on another device raises there.
0-dim CPU tensors pass through unchanged, as ATen allows them beside any device.

It uses only the op-library API, ``dipu.diopi``. The library object lives in the leaf
``_library``; one module per op family registers into it (table-made functions through
``_table``, Note [Table-made functions]), and importing them here is what registers them.
"""

from . import (  # noqa: F401  (they register)
    activations, attention, convolution, embedding, indexing, linalg, losses, normalization, optim, pointwise,
    pooling, random, recurrent, reductions, resampling, tensor,
)
from ._library import library
from ._table import warn_lacking

warn_lacking()  # Note [ATen ops a torch lacks]

__all__ = ["library"]
