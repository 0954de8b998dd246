"""Joining, indexing, creation and linear algebra."""

import torch

from dipu._core import _C
from dipu.diopi import SUCCESS
from . import library
from ._aten import fast_aten, write_results

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
        results = fast_aten._unique2(x, sorted, return_inverse, return_counts)
    else:
        results = fast_aten.unique_dim(x, dim, sorted, return_inverse, return_counts)
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
    alias(out, d).copy_(fast_aten.embedding_dense_backward(
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


# ---- coverage: unique_consecutive, joining, shape ops, padding, resampling, creation, linear algebra ----

aten = torch.ops.aten


@library.register
def diopiUniqueConsecutive(ctx, out, inverse, counts, input, dim, return_inverse, return_counts):
    results = fast_aten.unique_consecutive(alias(input, ctx.device), return_inverse, return_counts, dim)
    for slot, result in zip((out, inverse, counts), results):
        slot[0] = _require_copy(ctx, result)
    return SUCCESS


@library.register
def diopiStack(ctx, out, tensors, dim):
    d = ctx.device
    torch.stack([alias(t, d) for t in tensors], dim, out=alias(out, d))
    return SUCCESS


@library.register
def diopiFlip(ctx, out, input, dims):
    d = ctx.device
    alias(out, d).copy_(torch.flip(alias(input, d), dims))
    return SUCCESS


@library.register
def diopiRoll(ctx, out, input, shifts, dims):
    d = ctx.device
    alias(out, d).copy_(torch.roll(alias(input, d), shifts, dims))
    return SUCCESS


@library.register
def diopiRepeat(ctx, out, input, repeats_size):
    d = ctx.device
    alias(out, d).copy_(alias(input, d).repeat(repeats_size))
    return SUCCESS


@library.register
def diopiTril(ctx, out, input, diagonal):
    d = ctx.device
    torch.tril(alias(input, d), diagonal, out=alias(out, d))
    return SUCCESS


_PADS = {
    ("reflect", 1): aten.reflection_pad1d, ("reflect", 2): aten.reflection_pad2d, ("reflect", 3): aten.reflection_pad3d,
    ("replicate", 1): aten.replication_pad1d, ("replicate", 2): aten.replication_pad2d,
    ("replicate", 3): aten.replication_pad3d,
}
_PAD_BACKWARDS = {
    ("reflect", 1): aten.reflection_pad1d_backward, ("reflect", 2): aten.reflection_pad2d_backward,
    ("reflect", 3): aten.reflection_pad3d_backward, ("replicate", 1): aten.replication_pad1d_backward,
    ("replicate", 2): aten.replication_pad2d_backward, ("replicate", 3): aten.replication_pad3d_backward,
}


@library.register
def diopiPad(ctx, out, input, pad, mode, value):
    """mode: "constant" (value, None meaning 0), "reflect" or "replicate"; pad as ATen orders it."""
    d = ctx.device
    x, o = alias(input, d), alias(out, d)
    if mode == "constant":
        o.copy_(fast_aten.constant_pad_nd(x, pad, 0 if value is None else value))
    else:
        _PADS[mode, len(pad) // 2].out(x, pad, out=o)
    return SUCCESS


@library.register
def diopiPadBackward(ctx, grad_input, grad_output, input, pad, mode):
    d = ctx.device
    _PAD_BACKWARDS[mode, len(pad) // 2].grad_input(alias(grad_output, d), alias(input, d), pad,
                                                   grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiUpsampleNearest1d(ctx, out, input, size, scales):
    d = ctx.device
    aten.upsample_nearest1d.out(alias(input, d), size, scales, out=alias(out, d))
    return SUCCESS


@library.register
def diopiUpsampleNearest2d(ctx, out, input, size, scales_h, scales_w):
    d = ctx.device
    aten.upsample_nearest2d.out(alias(input, d), size, scales_h, scales_w, out=alias(out, d))
    return SUCCESS


@library.register
def diopiUpsampleNearest2dBackward(ctx, grad_input, grad_output, out_size, in_size, scales_h, scales_w):
    d = ctx.device
    aten.upsample_nearest2d_backward.grad_input(alias(grad_output, d), out_size, in_size, scales_h, scales_w,
                                                grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiUpsampleLinear1d(ctx, out, input, size, align_corners, scales):
    d = ctx.device
    aten.upsample_linear1d.out(alias(input, d), size, align_corners, scales, out=alias(out, d))
    return SUCCESS


@library.register
def diopiUpsampleBilinear2d(ctx, out, input, size, align_corners, scales_h, scales_w):
    d = ctx.device
    aten.upsample_bilinear2d.out(alias(input, d), size, align_corners, scales_h, scales_w, out=alias(out, d))
    return SUCCESS


@library.register
def diopiUpsampleBilinear2dBackward(ctx, grad_input, grad_output, out_size, in_size, align_corners, scales_h,
                                   scales_w):
    d = ctx.device
    aten.upsample_bilinear2d_backward.grad_input(alias(grad_output, d), out_size, in_size, align_corners, scales_h,
                                                 scales_w, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiIm2Col(ctx, out, input, kernel_size, dilation, padding, stride):
    d = ctx.device
    aten.im2col.out(alias(input, d), kernel_size, dilation, padding, stride, out=alias(out, d))
    return SUCCESS


@library.register
def diopiCol2Im(ctx, out, input, output_size, kernel_size, dilation, padding, stride):
    d = ctx.device
    aten.col2im.out(alias(input, d), output_size, kernel_size, dilation, padding, stride, out=alias(out, d))
    return SUCCESS


@library.register
def diopiLinspace(ctx, out, start, end, steps):
    torch.linspace(start, end, steps, out=alias(out, ctx.device))
    return SUCCESS


@library.register
def diopiLogspace(ctx, out, start, end, steps, base):
    torch.logspace(start, end, steps, base, out=alias(out, ctx.device))
    return SUCCESS


@library.register
def diopiEye(ctx, out, n, m):
    torch.eye(n, m, out=alias(out, ctx.device))
    return SUCCESS


@library.register
def diopiDot(ctx, out, input, other):
    d = ctx.device
    torch.dot(alias(input, d), alias(other, d), out=alias(out, d))
    return SUCCESS


@library.register
def diopiMv(ctx, out, input, vec):
    d = ctx.device
    torch.mv(alias(input, d), alias(vec, d), out=alias(out, d))
    return SUCCESS


@library.register
def diopiAddmv(ctx, out, input, mat, vec, beta, alpha):
    d = ctx.device
    x, m, v, o = alias(input, d), alias(mat, d), alias(vec, d), alias(out, d)
    if m.numel() == 0:  # ATen's addmv.out resizes `out`'s storage for an empty matrix, which an alias cannot
        o.copy_(torch.addmv(x, m, v, beta=beta, alpha=alpha))
    else:
        torch.addmv(x, m, v, beta=beta, alpha=alpha, out=o)
    return SUCCESS


@library.register
def diopiAddbmm(ctx, out, input, batch1, batch2, beta, alpha):
    d = ctx.device
    torch.addbmm(alias(input, d), alias(batch1, d), alias(batch2, d), beta=beta, alpha=alpha, out=alias(out, d))
    return SUCCESS


@library.register
def diopiBaddbmm(ctx, out, input, batch1, batch2, beta, alpha):
    d = ctx.device
    torch.baddbmm(alias(input, d), alias(batch1, d), alias(batch2, d), beta=beta, alpha=alpha, out=alias(out, d))
    return SUCCESS


@library.register
def diopiAddr(ctx, out, input, vec1, vec2, beta, alpha):
    d = ctx.device
    torch.addr(alias(input, d), alias(vec1, d), alias(vec2, d), beta=beta, alpha=alpha, out=alias(out, d))
    return SUCCESS


@library.register
def diopiUpsampleNearest3d(ctx, out, input, size, scales_d, scales_h, scales_w):
    d = ctx.device
    aten.upsample_nearest3d.out(alias(input, d), size, scales_d, scales_h, scales_w, out=alias(out, d))
    return SUCCESS


@library.register
def diopiUpsampleTrilinear3d(ctx, out, input, size, align_corners, scales_d, scales_h, scales_w):
    d = ctx.device
    aten.upsample_trilinear3d.out(alias(input, d), size, align_corners, scales_d, scales_h, scales_w,
                                  out=alias(out, d))
    return SUCCESS


@library.register
def diopiUpsampleBicubic2d(ctx, out, input, size, align_corners, scales_h, scales_w):
    d = ctx.device
    aten.upsample_bicubic2d.out(alias(input, d), size, align_corners, scales_h, scales_w, out=alias(out, d))
    return SUCCESS


@library.register
def diopiCross(ctx, out, input, other, dim):
    d = ctx.device
    torch.linalg.cross(alias(input, d), alias(other, d), dim=dim, out=alias(out, d))
    return SUCCESS


@library.register
def diopiCdist(ctx, out, x1, x2, p, compute_mode):
    d = ctx.device
    alias(out, d).copy_(fast_aten._cdist_forward(alias(x1, d), alias(x2, d), p, compute_mode))
    return SUCCESS


@library.register
def diopiCdistBackward(ctx, grad_x1, grad_output, x1, x2, p, cdist):
    d = ctx.device
    alias(grad_x1, d).copy_(fast_aten._cdist_backward(alias(grad_output, d), alias(x1, d), alias(x2, d), p,
                                                 alias(cdist, d)))
    return SUCCESS


@library.register
def diopiUpsampleNearest1dBackward(ctx, grad_input, grad_output, out_size, in_size, scales):
    d = ctx.device
    aten.upsample_nearest1d_backward.grad_input(alias(grad_output, d), out_size, in_size, scales,
                                                grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiUpsampleLinear1dBackward(ctx, grad_input, grad_output, out_size, in_size, align_corners, scales):
    d = ctx.device
    aten.upsample_linear1d_backward.grad_input(alias(grad_output, d), out_size, in_size, align_corners, scales,
                                               grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiUpsampleBicubic2dBackward(ctx, grad_input, grad_output, out_size, in_size, align_corners, scales_h,
                                   scales_w):
    d = ctx.device
    aten.upsample_bicubic2d_backward.grad_input(alias(grad_output, d), out_size, in_size, align_corners, scales_h,
                                                scales_w, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiUpsampleNearest3dBackward(ctx, grad_input, grad_output, out_size, in_size, scales_d, scales_h, scales_w):
    d = ctx.device
    aten.upsample_nearest3d_backward.grad_input(alias(grad_output, d), out_size, in_size, scales_d, scales_h,
                                                scales_w, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiUpsampleTrilinear3dBackward(ctx, grad_input, grad_output, out_size, in_size, align_corners, scales_d,
                                     scales_h, scales_w):
    d = ctx.device
    aten.upsample_trilinear3d_backward.grad_input(alias(grad_output, d), out_size, in_size, align_corners, scales_d,
                                                  scales_h, scales_w, grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiUpsampleNearestExact2d(ctx, out, input, size, scales_h, scales_w):
    d = ctx.device
    aten._upsample_nearest_exact2d.out(alias(input, d), size, scales_h, scales_w, out=alias(out, d))
    return SUCCESS


@library.register
def diopiUpsampleNearestExact2dBackward(ctx, grad_input, grad_output, out_size, in_size, scales_h, scales_w):
    d = ctx.device
    aten._upsample_nearest_exact2d_backward.grad_input(alias(grad_output, d), out_size, in_size, scales_h, scales_w,
                                                       grad_input=alias(grad_input, d))
    return SUCCESS


@library.register
def diopiPdist(ctx, out, input, p):
    d = ctx.device
    alias(out, d).copy_(fast_aten._pdist_forward(alias(input, d), p))
    return SUCCESS


@library.register
def diopiPdistBackward(ctx, grad_input, grad_output, input, p, pdist):
    d = ctx.device
    alias(grad_input, d).copy_(fast_aten._pdist_backward(alias(grad_output, d), alias(input, d), p, alias(pdist, d)))
    return SUCCESS


@library.register
def diopiLinalgInvEx(ctx, inverse, info, input, check_errors):
    d = ctx.device
    write_results((inverse, info), fast_aten.linalg_inv_ex(alias(input, d), check_errors=check_errors), d)
    return SUCCESS


@library.register
def diopiLinalgDet(ctx, result, lu, pivots, input):
    d = ctx.device
    write_results((result, lu, pivots), fast_aten._linalg_det(alias(input, d)), d)
    return SUCCESS


@library.register
def diopiLinalgSlogdet(ctx, sign, logabsdet, lu, pivots, input):
    d = ctx.device
    write_results((sign, logabsdet, lu, pivots), fast_aten._linalg_slogdet(alias(input, d)), d)
    return SUCCESS


@library.register
def diopiLinalgCholeskyEx(ctx, l, info, input, upper, check_errors):
    d = ctx.device
    write_results((l, info), fast_aten.linalg_cholesky_ex(alias(input, d), upper=upper, check_errors=check_errors), d)
    return SUCCESS


@library.register
def diopiLinalgSvd(ctx, u, s, vh, input, full_matrices, compute_uv, driver):
    d = ctx.device
    write_results((u, s, vh), fast_aten._linalg_svd(alias(input, d), full_matrices, compute_uv, driver=driver), d)
    return SUCCESS


@library.register
def diopiLinalgQr(ctx, q, r, input, mode):
    d = ctx.device
    write_results((q, r), fast_aten.linalg_qr(alias(input, d), mode), d)
    return SUCCESS


@library.register
def diopiLinalgSolveEx(ctx, result, lu, pivots, info, a, b, left, check_errors):
    d = ctx.device
    write_results((result, lu, pivots, info),
               fast_aten._linalg_solve_ex(alias(a, d), alias(b, d), left=left, check_errors=check_errors), d)
    return SUCCESS


@library.register
def diopiLinalgEigh(ctx, eigenvalues, eigenvectors, input, uplo, compute_v):
    d = ctx.device
    write_results((eigenvalues, eigenvectors), fast_aten._linalg_eigh(alias(input, d), uplo, compute_v), d)
    return SUCCESS


@library.register
def diopiLinalgLuFactorEx(ctx, lu, pivots, info, input, pivot, check_errors):
    d = ctx.device
    write_results((lu, pivots, info), fast_aten.linalg_lu_factor_ex(alias(input, d), pivot=pivot, check_errors=check_errors),
               d)
    return SUCCESS


@library.register
def diopiLinalgSolveTriangular(ctx, out, input, b, upper, left, unitriangular):
    d = ctx.device
    alias(out, d).copy_(fast_aten.linalg_solve_triangular(alias(input, d), alias(b, d), upper=upper, left=left,
                                                     unitriangular=unitriangular))
    return SUCCESS


@library.register
def diopiLinalgLuSolve(ctx, out, lu, pivots, b, left, adjoint):
    d = ctx.device
    alias(out, d).copy_(fast_aten.linalg_lu_solve(alias(lu, d), alias(pivots, d), alias(b, d), left=left, adjoint=adjoint))
    return SUCCESS
