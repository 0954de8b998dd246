"""Joining, indexing, creation and linear algebra."""

import torch

from dipu import _C
from dipu.diopi import SUCCESS
from diopi_impl.torch import library

alias = _C.alias


def _require_copy(ctx, result: torch.Tensor):
    """A dipu tensor allocated through the context, holding ``result`` (dynamic shapes)."""
    tensor = ctx.require_tensor(result.shape, result.dtype)
    alias(tensor, ctx.device).copy_(result)
    return tensor


@library.register
def diopiCat(ctx, out, tensors, dim):
    d = ctx.device
    torch.cat([alias(t, d) for t in tensors], dim, out=alias(out, d))
    return SUCCESS


@library.register
def diopiIndexSelect(ctx, out, input, dim, index):
    d = ctx.device
    torch.index_select(alias(input, d), dim, alias(index, d), out=alias(out, d))
    return SUCCESS


@library.register
def diopiArange(ctx, out, start, end, step):
    torch.arange(start, end, step, out=alias(out, ctx.device))
    return SUCCESS


@library.register
def diopiNonzero(ctx, out, input):
    out[0] = _require_copy(ctx, torch.nonzero(alias(input, ctx.device)))
    return SUCCESS


@library.register
def diopiMaskedSelect(ctx, out, input, mask):
    d = ctx.device
    out[0] = _require_copy(ctx, torch.masked_select(alias(input, d), alias(mask, d)))
    return SUCCESS


@library.register
def diopiUnique(ctx, out, inverse, counts, input, dim, sorted, return_inverse, return_counts):
    x = alias(input, ctx.device)
    if dim is None:
        results = torch.ops.aten._unique2(x, sorted, return_inverse, return_counts)
    else:
        results = torch.ops.aten.unique_dim(x, dim, sorted, return_inverse, return_counts)
    for slot, result in zip((out, inverse, counts), results):
        slot[0] = _require_copy(ctx, result)
    return SUCCESS


@library.register
def diopiEmbedding(ctx, out, weight, indices, padding_idx, scale_grad_by_freq, sparse):
    d = ctx.device
    w, o = alias(weight, d), alias(out, d)
    torch.index_select(w, 0, alias(indices, d).reshape(-1), out=o.view(-1, w.shape[1]))
    return SUCCESS


@library.register
def diopiEmbeddingBackward(ctx, out, grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    d = ctx.device
    alias(out, d).copy_(torch.ops.aten.embedding_dense_backward(
        alias(grad, d), alias(indices, d), num_weights, padding_idx, scale_grad_by_freq))
    return SUCCESS


@library.register
def diopiMm(ctx, out, input, mat2):
    d = ctx.device
    torch.mm(alias(input, d), alias(mat2, d), out=alias(out, d))
    return SUCCESS


@library.register
def diopiBmm(ctx, out, input, mat2):
    d = ctx.device
    torch.bmm(alias(input, d), alias(mat2, d), out=alias(out, d))
    return SUCCESS


@library.register
def diopiAddmm(ctx, out, input, mat1, mat2, beta, alpha):
    d = ctx.device
    torch.addmm(alias(input, d), alias(mat1, d), alias(mat2, d), beta=beta, alpha=alpha, out=alias(out, d))
    return SUCCESS
