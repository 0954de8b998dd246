"""``impl:`` glue for ops whose schema returns nothing or takes a ``Scalar[]``.

Note [Ops that return nothing]
The _foreach_ in-place ops, the fused optimizer steps and
``_amp_foreach_non_finite_check_and_unscale_`` have schemas returning ``()``,
and the dispatcher insists a Python kernel for them returns None, whereas a
generated in-place wrapper returns ``self``. Their entries name these
functions as ``impl:``, which call the DIOPI function with the schema's
arguments in order and return nothing. A ``Scalar[]`` argument, for which the
proto has no parameter kind, reaches the DIOPI function as a 1-D CPU tensor
(int64, float64 or complex128, so no value is rounded), as ATen's own
``_foreach_addcmul_.Tensor`` takes its scalars.
"""

from __future__ import annotations

import torch


def _scalar_list_as_tensor(value):
    if isinstance(value, (list, tuple)) and not any(isinstance(v, torch.Tensor) for v in value):
        if any(isinstance(v, complex) for v in value):
            dtype = torch.complex128
        elif any(isinstance(v, float) for v in value):
            dtype = torch.float64
        else:
            dtype = torch.int64
        return torch.tensor(value, dtype=dtype)
    return value


def returns_nothing(diopi, ctx, *args):
    return diopi(ctx, *args), None


def scalar_list_returns_nothing(diopi, ctx, *args):
    return diopi(ctx, *map(_scalar_list_as_tensor, args)), None


def scalar_list(diopi, ctx, *args):
    """A functional op with a ``Scalar[]``: the DIOPI function allocates the output list."""
    outs = [None]
    status = diopi(ctx, outs, *map(_scalar_list_as_tensor, args))
    return status, outs[0]
