"""Linear algebra: matrix products, cross products and distances, and the torch.linalg decompositions and
solvers (their data-dependent output shapes are written back by ``write_results``)."""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import fast_aten, write_results
from ._library import library
from ._table import copy_function, out_function

aten = torch.ops.aten

# ---- products: one overload each (Note [Table-made functions] in _table.py) --------------------------------
for _name, _overload in (
        ("diopiMm", aten.mm.out), ("diopiBmm", aten.bmm.out), ("diopiDot", aten.dot.out), ("diopiMv", aten.mv.out),
        ("diopiAddmm", aten.addmm.out), ("diopiAddbmm", aten.addbmm.out), ("diopiBaddbmm", aten.baddbmm.out),
        ("diopiAddr", aten.addr.out), ("diopiCross", aten.linalg_cross.out)):
    out_function(_name, _overload)


@library.register(aten=aten.addmv.out)
def diopiAddmv(ctx, out, input, mat, vec, beta, alpha):
    d = ctx.device
    x, m, v, o = alias(input, d), alias(mat, d), alias(vec, d), alias(out, d)
    if m.numel() == 0:  # ATen's addmv.out resizes `out`'s storage for an empty matrix, which an alias cannot
        o.copy_(torch.addmv(x, m, v, beta=beta, alpha=alpha))
    else:
        torch.addmv(x, m, v, beta=beta, alpha=alpha, out=o)
    return SUCCESS


# ---- distances -------------------------------------------------------------------------------------------


copy_function("diopiCdist", aten._cdist_forward.default)


@library.register(aten=aten._cdist_backward.out)
def diopiCdistBackward(ctx, grad_x1, grad_output, x1, x2, p, cdist):
    d = ctx.device
    alias(grad_x1, d).copy_(fast_aten._cdist_backward(alias(grad_output, d), alias(x1, d), alias(x2, d), p,
                                                 alias(cdist, d)))
    return SUCCESS


@library.register(aten=aten._pdist_forward.out)
def diopiPdist(ctx, out, input, p):
    d = ctx.device
    alias(out, d).copy_(fast_aten._pdist_forward(alias(input, d), p))
    return SUCCESS


copy_function("diopiPdistBackward", aten._pdist_backward.default)


# ---- torch.linalg ----------------------------------------------------------------------------------------


@library.register(aten=aten.linalg_inv_ex.inverse)
def diopiLinalgInvEx(ctx, inverse, info, input, check_errors):
    d = ctx.device
    write_results((inverse, info), fast_aten.linalg_inv_ex(alias(input, d), check_errors=check_errors), d)
    return SUCCESS


@library.register(aten=aten._linalg_det.result)
def diopiLinalgDet(ctx, result, lu, pivots, input):
    d = ctx.device
    write_results((result, lu, pivots), fast_aten._linalg_det(alias(input, d)), d)
    return SUCCESS


@library.register(aten=aten._linalg_slogdet.sign)
def diopiLinalgSlogdet(ctx, sign, logabsdet, lu, pivots, input):
    d = ctx.device
    write_results((sign, logabsdet, lu, pivots), fast_aten._linalg_slogdet(alias(input, d)), d)
    return SUCCESS


@library.register(aten=aten.linalg_cholesky_ex.L)
def diopiLinalgCholeskyEx(ctx, l, info, input, upper, check_errors):  # noqa: E741  (the proto's name)
    d = ctx.device
    write_results((l, info), fast_aten.linalg_cholesky_ex(alias(input, d), upper=upper, check_errors=check_errors), d)
    return SUCCESS


@library.register(aten=aten._linalg_svd.U)
def diopiLinalgSvd(ctx, u, s, vh, input, full_matrices, compute_uv, driver):
    d = ctx.device
    write_results((u, s, vh), fast_aten._linalg_svd(alias(input, d), full_matrices, compute_uv, driver=driver), d)
    return SUCCESS


@library.register  # DIOPI's order: the outputs last
def diopiLinalgQR(ctx, input, mode, q, r):
    d = ctx.device
    write_results((q, r), fast_aten.linalg_qr(alias(input, d), mode), d)
    return SUCCESS


@library.register(aten=aten._linalg_solve_ex.result)
def diopiLinalgSolveEx(ctx, result, lu, pivots, info, a, b, left, check_errors):
    d = ctx.device
    write_results((result, lu, pivots, info),
               fast_aten._linalg_solve_ex(alias(a, d), alias(b, d), left=left, check_errors=check_errors), d)
    return SUCCESS


@library.register(aten=aten._linalg_eigh.eigenvalues)
def diopiLinalgEigh(ctx, eigenvalues, eigenvectors, input, uplo, compute_v):
    d = ctx.device
    write_results((eigenvalues, eigenvectors), fast_aten._linalg_eigh(alias(input, d), uplo, compute_v), d)
    return SUCCESS


@library.register(aten=aten.linalg_lu_factor_ex.out)
def diopiLinalgLuFactorEx(ctx, lu, pivots, info, input, pivot, check_errors):
    d = ctx.device
    results = fast_aten.linalg_lu_factor_ex(alias(input, d), pivot=pivot, check_errors=check_errors)
    write_results((lu, pivots, info), results, d)
    return SUCCESS


@library.register(aten=aten.linalg_solve_triangular.out)
def diopiLinalgSolveTriangular(ctx, out, input, b, upper, left, unitriangular):
    d = ctx.device
    alias(out, d).copy_(fast_aten.linalg_solve_triangular(alias(input, d), alias(b, d), upper=upper, left=left,
                                                     unitriangular=unitriangular))
    return SUCCESS


@library.register(aten=aten.linalg_lu_solve.out)
def diopiLinalgLuSolve(ctx, out, lu, pivots, b, left, adjoint):
    d = ctx.device
    alias(out, d).copy_(fast_aten.linalg_lu_solve(alias(lu, d), alias(pivots, d), alias(b, d), left=left,
                                                  adjoint=adjoint))
    return SUCCESS
