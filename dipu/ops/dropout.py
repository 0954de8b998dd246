"""native_dropout: DIOPI's diopiDropout takes ``train`` as a C bool, ATen's schema a ``bool?``."""

from __future__ import annotations

import torch

from dipu._core import _C

_BOOL = torch.bool


def native_dropout(diopi, ctx, input, p, train):
    """ATen's CPU kernel reads a missing ``train`` as training (PrivateUse1 tensors reach native_dropout
    from ``torch.dropout`` in eval mode too, with ``train=False``)."""
    # the CPU's layouts: the output follows the input's strides (TensorIterator), the mask is contiguous
    out = _C.empty(list(input.shape), input.dtype, ctx.device) if input.is_contiguous() else torch.empty_like(input)
    mask = _C.empty(list(input.shape), _BOOL, ctx.device)
    return diopi(ctx, out, mask, input, p, True if train is None else train, None), (out, mask)
