"""Embeddings: embedding and embedding_bag lookups with their backwards, and embedding_renorm_."""

import torch

from dipu.diopi import SUCCESS, Status
from dipu.diopi import native_alias as alias
from ._aten import fast_aten, optional_alias
from ._library import library
from ._table import inplace_function

aten = torch.ops.aten


@library.register(aten=aten.embedding.out)
def diopiEmbedding(ctx, out, weight, indices, padding_idx, scale_grad_by_freq, sparse):
    d = ctx.device
    w, o = alias(weight, d), alias(out, d)
    torch.index_select(w, 0, alias(indices, d).reshape(-1), out=o.view(-1, w.shape[1]))
    return SUCCESS


@library.register
def diopiEmbeddingBackward(ctx, out, grad, indices, num_weights, padding_idx, scale_grad_by_freq, sparse):
    if sparse:  # a dense out cannot hold a sparse gradient (dipu's kernels pass False)
        return Status.FORCE_FALLBACK
    d = ctx.device
    alias(out, d).copy_(fast_aten.embedding_dense_backward(
        alias(grad, d), alias(indices, d), num_weights, padding_idx, scale_grad_by_freq))
    return SUCCESS


inplace_function("diopiEmbeddingRenormInp", "embedding_renorm_")  # Note [Table-made functions] in _table.py


@library.register(aten=aten._embedding_bag.out)
def diopiEmbeddingBag(ctx, out, offset2bag, bag_size, max_indices, weight, indices, offsets, scale_grad_by_freq,
                      mode, sparse, per_sample_weights, include_last_offset, padding_idx):
    d = ctx.device
    results = fast_aten._embedding_bag(alias(weight, d), alias(indices, d), alias(offsets, d), scale_grad_by_freq, mode,
                                  sparse, optional_alias(per_sample_weights, d), include_last_offset, padding_idx)
    # ATen's CPU kernel leaves the bookkeeping outputs it does not need for `mode` empty, unlike its meta kernel
    for output, result in zip((out, offset2bag, bag_size, max_indices), results):
        if output.shape != result.shape:
            output.resize_(result.shape)
        alias(output, d).copy_(result)
    return SUCCESS


@library.register
def diopiEmbeddingBagBackward(ctx, grad_weight, grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                              num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx):
    if sparse:  # a sparse gradient is no dense output to write
        return Status.FORCE_FALLBACK
    d = ctx.device
    alias(grad_weight, d).copy_(fast_aten._embedding_bag_backward(
        alias(grad, d), alias(indices, d), alias(offsets, d), alias(offset2bag, d), alias(bag_size, d),
        alias(maximum_indices, d), num_weights, scale_grad_by_freq, mode, False, optional_alias(per_sample_weights, d),
        padding_idx))
    return SUCCESS


@library.register(aten=aten._embedding_bag_per_sample_weights_backward.out)
def diopiEmbeddingBagPerSampleWeightsBackward(ctx, out, grad, weight, indices, offsets, offset2bag, mode,
                                              padding_idx):
    d = ctx.device
    alias(out, d).copy_(fast_aten._embedding_bag_per_sample_weights_backward(
        alias(grad, d), alias(weight, d), alias(indices, d), alias(offsets, d), alias(offset2bag, d), mode,
        padding_idx))
    return SUCCESS
