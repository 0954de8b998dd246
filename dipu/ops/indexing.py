"""Indexing kernels: ``impl:`` logic for the ops whose schemas take ``Tensor?[] indices``.

DIOPI passes the index list as a tensor list whose ``None`` entries select a
whole dim; the functional forms allocate here what the in-place forms update.
"""

from __future__ import annotations

from dipu._core import _C


def index(diopi, ctx, self, indices):
    out = [None]
    return diopi(ctx, out, self, indices), out[0]


def index_put(diopi, ctx, self, indices, values, accumulate=False):
    out = _C.empty(list(self.shape), self.dtype, ctx.device)
    return diopi(ctx, out, self, values, indices, accumulate), out


def index_put_(diopi, ctx, self, indices, values, accumulate=False, unsafe=False):
    return diopi(ctx, self, values, indices, accumulate), self
