"""Conformance cases: indexing, scatter/gather, joining, shape ops, creation and linear algebra
(diopi_impl/torch/indexing.py, tensor.py, linalg.py, embedding.py and reductions.py's unique; padding and
resampling are in cases_nn.py)."""

import torch

from conformance.cases_reduction import NUMERIC, SHAPES, one_dims, reseeded, sweep
from conformance.spec import FLOAT, Case, T

aten = torch.ops.aten
F32_64 = (torch.float32, torch.float64)
WITH_BOOL = NUMERIC + (torch.bool,)
ND = ((3, 5), (2, 3, 4), (1, 4, 1, 3))  # shapes with a dim 1


def index(shape, high, layout="contiguous"):
    """An int64 index tensor with values in [0, high) (a single 0 where ``high`` is 0)."""
    return T(shape, torch.int64, layout=layout, low=0, high=max(high, 1))


def size(shape, dim):
    return shape[dim] if shape else 1


CASES = []

# ---- advanced indexing --------------------------------------------------------------------------


def _index_args(shape, layout):
    yield {"input": T(shape, layout=layout), "indices": [index((4,), shape[0])]}
    yield {"input": T(shape, layout=layout), "indices": [index((2, 3), shape[0], "transposed")]}
    # (a None in ``indices`` is covered by tests/test_nn_ops.py: the runner builds lists of tensors only)
    yield {"input": T(shape, layout=layout), "indices": [index((3,), shape[0]), index((3,), shape[1])]}
    yield {"input": T(shape, layout=layout), "indices": [T(shape[:1], torch.bool)]}
    yield {"input": T(shape, layout=layout), "indices": [T(shape[:2], torch.bool)]}


CASES += sweep("diopiIndex", lambda input, indices: aten.index.Tensor(input, indices), _index_args, WITH_BOOL, ND)
CASES += sweep("diopiIndex", lambda input, indices: aten.index.Tensor(input, indices), lambda shape, layout: [
    {"input": T(shape, layout=layout), "indices": [index((0,), 1)]},
    {"input": T(shape, layout=layout), "indices": [index((), shape[0])]}][:2 if shape[0] else 1], FLOAT,
    ((4,), (3, 5), (0, 3)), at_least=20,
    note="empty and 0-d indices")


def _put_args(shape, layout, inplace):
    name = "input"
    for accumulate in (False, True):
        yield {name: T(shape, layout=layout), "values": T((4,) + shape[1:]),
               "indices": [index((4,), shape[0])], "accumulate": accumulate}
        yield {name: T(shape, layout=layout), "values": T(()), "indices": [T(shape, torch.bool)],
               "accumulate": accumulate}
        yield {name: T(shape, layout=layout), "values": T((3,) + shape[2:]),
               "indices": [index((3,), shape[0]), index((3,), shape[1])], "accumulate": accumulate}


def _index_put_reference(input, values, indices, accumulate):
    return aten.index_put(input, indices, values, accumulate)


def _index_put_inp_reference(input, values, indices, accumulate):
    input.index_put_(indices, values, accumulate)


CASES += sweep("diopiIndexPut", _index_put_reference, lambda s, l: _put_args(s, l, False), NUMERIC, ND)
CASES += sweep("diopiIndexPutInp", _index_put_inp_reference, lambda s, l: _put_args(s, l, True), NUMERIC, ND)

# ---- scatter / gather -------------------------------------------------------------------------------


def _scatter_args(shape, layout, value_name="src", value=None):
    for dim in one_dims(shape):
        idx_shape = tuple(max(s - 1, 1) if s else s for s in shape)
        yield {"input": T(shape, layout=layout), "dim": dim, "index": index(idx_shape, size(shape, dim)),
               value_name: T(shape, layout=layout) if value is None else value}


SCATTER_SHAPES = ((), (7,), (3, 5), (2, 3, 4))
for reduce in (None, "add", "multiply"):
    CASES += sweep("diopiScatter", lambda input, dim, index, src, reduce=reduce: (
        torch.scatter(input, dim, index, src) if reduce is None
        else torch.scatter(input, dim, index, src, reduce=reduce)),
        lambda s, l, reduce=reduce: ({**a, "reduce": reduce} for a in _scatter_args(s, l)),
        NUMERIC if reduce else WITH_BOOL, SCATTER_SHAPES, note=f"reduce={reduce}")
    CASES += sweep("diopiScatterScalar", lambda input, dim, index, value, reduce=reduce: (
        torch.scatter(input, dim, index, value) if reduce is None
        else torch.scatter(input, dim, index, value, reduce=reduce)),
        lambda s, l, reduce=reduce: ({**a, "reduce": reduce} for a in _scatter_args(s, l, "value", 2)),
        NUMERIC, SCATTER_SHAPES, note=f"reduce={reduce}")
for reduce in ("sum", "prod", "mean", "amax", "amin"):
    for include_self in (True, False):
        CASES += sweep("diopiScatterReduce", lambda input, dim, index, src, reduce, include_self: torch.scatter_reduce(
            input, dim, index, src, reduce, include_self=include_self), lambda s, l, r=reduce, i=include_self: (
            {**a, "reduce": r, "include_self": i} for a in _scatter_args(s, l)),
            F32_64 + (torch.int64,), SCATTER_SHAPES[1:], at_least=3)
CASES += sweep("diopiGather", lambda input, dim, index: torch.gather(input, dim, index),
               lambda s, l: ({k: v for k, v in a.items() if k != "src"} for a in _scatter_args(s, l)),
               WITH_BOOL, SCATTER_SHAPES + ((2, 0, 3),))

# ---- index_add / index_copy / index_fill -------------------------------------------------------------


def _index_dim_args(shape, layout, source=True, value=None, name="input"):
    for dim in one_dims(shape):
        n = size(shape, dim)
        count = 0 if n == 0 else 3
        args = {name: T(shape, layout=layout), "dim": dim, "index": index((count,) if shape else (), n)}
        if source:
            src_shape = list(shape)
            if shape:
                src_shape[dim] = count
            args["source"] = T(tuple(src_shape))
        if value is not None:
            args["value"] = value
        yield args


IDX_SHAPES = ((), (7,), (3, 5), (2, 3, 4), (2, 0, 3))
for alpha in (1, 2):
    CASES += sweep("diopiIndexAdd", lambda input, dim, index, source, alpha: torch.index_add(
        input, dim, index, source, alpha=alpha), lambda s, l, alpha=alpha: (
        {**a, "alpha": alpha} for a in _index_dim_args(s, l)), NUMERIC, IDX_SHAPES)
CASES += sweep("diopiIndexCopy", lambda input, dim, index, source: torch.index_copy(input, dim, index, source),
               lambda s, l: _index_dim_args(s, l), WITH_BOOL, IDX_SHAPES, note="duplicate indices copy in order")
CASES += sweep("diopiIndexFill", lambda input, dim, index, value: torch.index_fill(input, dim, index, value),
               lambda s, l: _index_dim_args(s, l, False, T(())), WITH_BOOL, IDX_SHAPES)
CASES += sweep("diopiIndexFillScalar", lambda input, dim, index, value: torch.index_fill(input, dim, index, value),
               lambda s, l: _index_dim_args(s, l, False, 2), NUMERIC, IDX_SHAPES)


def _fill_inp(input, dim, index, value):
    input.index_fill_(dim, index, value)


CASES += sweep("diopiIndexFillInp", _fill_inp, lambda s, l: _index_dim_args(s, l, False, T(())), WITH_BOOL,
               IDX_SHAPES)
CASES += sweep("diopiIndexFillInpScalar", _fill_inp, lambda s, l: _index_dim_args(s, l, False, 2), NUMERIC,
               IDX_SHAPES)
CASES += sweep("diopiIndexSelect", lambda input, dim, index: torch.index_select(input, dim, index),
               lambda s, l: ({k: v for k, v in a.items() if k != "source"} for a in _index_dim_args(s, l)),
               WITH_BOOL, IDX_SHAPES)

# ---- masked_scatter, masked_select, nonzero, take, put --------------------------------------------------
MASK_SHAPES = ((), (7,), (3, 5), (2, 3, 4), (0, 3))


def _masked_args(shape, layout):
    yield {"input": T(shape, layout=layout), "mask": T(shape, torch.bool, layout=layout)}
    if len(shape) >= 1:
        yield {"input": T(shape, layout=layout), "mask": T(shape[-1:], torch.bool)}
    yield {"input": T(shape, layout=layout), "mask": T((), torch.bool)}


CASES += sweep("diopiMaskedScatter", lambda input, mask, source: input.masked_scatter(mask, source),
               lambda s, l: ({**a, "source": T((max(1, 2 * len(s)) * 30,))} for a in _masked_args(s, l)),
               WITH_BOOL, MASK_SHAPES)
CASES += sweep("diopiMaskedSelect", lambda input, mask: torch.masked_select(input, mask), _masked_args, WITH_BOOL,
               MASK_SHAPES)
CASES += sweep("diopiNonzero", lambda input: torch.nonzero(input), lambda s, l: [{"input": T(s, layout=l)}],
               WITH_BOOL, MASK_SHAPES + ((1, 4, 1, 3),), at_least=21)


def _take_args(shape, layout, extra=()):
    n = 1
    for s in shape:
        n *= s
    for idx_shape in ((4,), (2, 3), ()):
        if n or not idx_shape or 0 in idx_shape:
            yield {"input": T(shape, layout=layout), "index": index(idx_shape, n) if n else index((0,), 1),
                   **dict(extra)}


CASES += sweep("diopiTake", lambda input, index: torch.take(input, index), _take_args, WITH_BOOL,
               ((), (7,), (3, 5), (2, 3, 4)))
for accumulate in (False, True):
    CASES += sweep("diopiPut", lambda input, index, source, accumulate: input.put(index, source, accumulate),
                   lambda s, l, acc=accumulate: ({**a, "source": T(a["index"].shape), "accumulate": acc}
                                                 for a in _take_args(s, l)), NUMERIC, ((), (7,), (3, 5), (2, 3, 4)))
    CASES += sweep("diopiPutInp", lambda input, index, source, accumulate:
                   [input.put_(index, source, accumulate)] and None,
                   lambda s, l, acc=accumulate: ({**a, "source": T(a["index"].shape), "accumulate": acc}
                                                 for a in _take_args(s, l)), NUMERIC, ((), (7,), (3, 5), (2, 3, 4)))
CASES += sweep("diopiRepeatInterleave", lambda repeats, output_size: torch.repeat_interleave(repeats),
               lambda s, l: [{"repeats": T(s, layout=l, low=0, high=4), "output_size": None}],
               (torch.int64, torch.int32), ((0,), (1,), (7,), (20,)), at_least=20)

# ---- unique -------------------------------------------------------------------------------------------
for ri, rc in ((False, False), (True, False), (True, True), (False, True)):
    CASES += sweep("diopiUniqueInverseCounts", lambda input, dim, sorted, return_inverse, return_counts: tuple(
        aten._unique2(input, sorted, return_inverse, return_counts) if dim is None
        else aten.unique_dim(input, dim, sorted, return_inverse, return_counts)),
        lambda s, l, ri=ri, rc=rc: ({"input": T(s, layout=l, low=0, high=3), "dim": d, "sorted": True,
                                     "return_inverse": ri, "return_counts": rc} for d in [None] + one_dims(s)[:1]),
        (torch.int64, torch.float32, torch.int32, torch.uint8, torch.bool), ((7,), (3, 5), (2, 3, 4), (0,)),
        at_least=3)
    CASES += sweep("diopiUniqueConsecutive", lambda input, dim, return_inverse, return_counts: tuple(
        aten.unique_consecutive(input, return_inverse, return_counts, dim)),
        lambda s, l, ri=ri, rc=rc: ({"input": T(s, layout=l, low=0, high=2), "dim": d,
                                     "return_inverse": ri, "return_counts": rc} for d in [None] + one_dims(s)[:1]),
        (torch.int64, torch.float32, torch.int32, torch.bool), ((7,), (3, 5), (2, 3, 4), (0,)), at_least=3)

# ---- embedding ------------------------------------------------------------------------------------------
CASES += sweep("diopiEmbedding", lambda weight, indices, padding_idx, scale_grad_by_freq, sparse: torch.embedding(
    weight, indices, padding_idx, scale_grad_by_freq, sparse), lambda s, l: (
    {"weight": T((10, 4), layout=l), "indices": index(s, 10), "padding_idx": p, "scale_grad_by_freq": False,
     "sparse": False} for p in (-1, 3)), FLOAT, ((), (5,), (2, 3), (0,), (2, 2, 2)))
CASES += sweep("diopiEmbeddingBackward", lambda grad, indices, num_weights, padding_idx, scale_grad_by_freq, sparse:
               aten.embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq),
               lambda s, l: ({"grad": T(s + (4,)), "indices": index(s, 10), "num_weights": 10, "padding_idx": p,
                              "scale_grad_by_freq": f, "sparse": False} for p in (-1, 3) for f in (False, True)),
               F32_64, ((), (5,), (2, 3), (0,), (2, 2, 2)))

# ---- joining and shape ops ---------------------------------------------------------------------------------
for name, fn in (("diopiCat", torch.cat), ("diopiStack", torch.stack)):
    CASES += sweep(name, lambda tensors, dim, fn=fn: fn(tensors, dim), lambda s, l: (
        {"tensors": [T(s, layout=l), T(s), T(s, layout="sliced")], "dim": d} for d in ([0] if not s else one_dims(s))
        if name == "diopiStack" or s), WITH_BOOL, SHAPES[1:] + ((2, 0, 3),))
CASES += sweep("diopiCat", lambda tensors, dim: torch.cat(tensors, dim), lambda s, l: [
    {"tensors": [T((2, 3), layout=l), T((4, 3)), T((0,))], "dim": 0},
    {"tensors": [T((2, 3)), T((2, 0)), T((2, 5), layout=l)], "dim": 1}], FLOAT, ((1,),), note="uneven and empty")
CASES += sweep("diopiFlip", lambda input, dims: torch.flip(input, dims), lambda s, l: (
    {"input": T(s, layout=l), "dims": d} for d in ([[]] + [[0], [-1]] * bool(s) + [[0, -1]] * (len(s) >= 2))),
    WITH_BOOL, SHAPES + ((2, 0, 3),))
CASES += sweep("diopiRoll", lambda input, shifts, dims: torch.roll(input, shifts, dims), lambda s, l: (
    {"input": T(s, layout=l), "shifts": sh, "dims": d}
    for sh, d in ([([2], []), ([-1], [0])] + [([1, 3], [0, -1])] * (len(s) >= 2))), WITH_BOOL, SHAPES[1:])
CASES += sweep("diopiRepeat", lambda input, repeats_size: input.repeat(repeats_size), lambda s, l: (
    {"input": T(s, layout=l), "repeats_size": r} for r in ([1] * len(s), [2] * len(s), [2] + [1] * len(s) + [0],
                                                            [3, 2] + [1] * len(s))), WITH_BOOL, SHAPES)
for name, fn in (("diopiTril", torch.tril), ("diopiTriu", torch.triu)):
    if name == "diopiTriu":
        continue  # diopiTriu's cases are in cases_pointwise.py
    CASES += sweep(name, lambda input, diagonal, fn=fn: fn(input, diagonal), lambda s, l: (
        {"input": T(s, layout=l), "diagonal": d} for d in (0, 1, -2, 7)), WITH_BOOL, ND + ((0, 3),))

# ---- creation ---------------------------------------------------------------------------------------------
for dtype in (torch.float32, torch.float64, torch.int64, torch.float16, torch.bfloat16, torch.int32):
    for start, end, step in ((0, 10, 1), (2, 11, 3), (5, -3, -2), (0, 0, 1), (0.5, 3.0, 0.25)):
        if not dtype.is_floating_point and isinstance(start, float):
            continue
        CASES.append(Case("diopiArange", {"start": start, "end": end, "step": step},
                          lambda start, end, step, dtype=dtype: torch.arange(start, end, step, dtype=dtype), dtype))
    for start, end, steps in ((0, 1, 7), (-2, 3, 1), (3, -3, 0), (0, 10, 11)):
        CASES.append(Case("diopiLinspace", {"start": start, "end": end, "steps": steps},
                          lambda start, end, steps, dtype=dtype: torch.linspace(start, end, steps, dtype=dtype),
                          dtype))
        CASES.append(Case("diopiLogspace", {"start": start, "end": end, "steps": steps, "base": 2.0},
                          lambda start, end, steps, base, dtype=dtype: torch.logspace(start, end, steps, base,
                                                                                      dtype=dtype), dtype))
    for n, m in ((3, 3), (2, 5), (4, 1), (0, 3)):
        CASES.append(Case("diopiEye", {"n": n, "m": m}, lambda n, m, dtype=dtype: torch.eye(n, m, dtype=dtype), dtype))
CASES += [Case("diopiEye", {"n": 3, "m": 2}, lambda n, m: torch.eye(n, m, dtype=torch.bool), torch.bool)]

# ---- linear algebra -----------------------------------------------------------------------------------------
LINALG = (torch.float32, torch.float64, torch.bfloat16, torch.int64)
CASES += sweep("diopiMm", lambda input, mat2: torch.mm(input, mat2), lambda s, l: [
    {"input": T(s, layout=l), "mat2": T((s[1], 4), layout="transposed")}, {"input": T(s), "mat2": T((s[1], 0))}],
    LINALG, ((3, 5), (1, 1), (0, 2), (6, 0)))
CASES += sweep("diopiBmm", lambda input, mat2: torch.bmm(input, mat2), lambda s, l: [
    {"input": T(s, layout=l), "mat2": T((s[0], s[2], 4))}], LINALG, ((2, 3, 5), (1, 1, 1), (0, 2, 3), (2, 0, 3)))
CASES += sweep("diopiAddmm", lambda input, mat1, mat2, beta, alpha: torch.addmm(input, mat1, mat2, beta=beta,
                                                                                alpha=alpha),
               lambda s, l: ({"input": T(b), "mat1": T((s[0], s[1]), layout=l), "mat2": T((s[1], 4)),
                              "beta": be, "alpha": al} for b in ((s[0], 4), (4,), ()) for be, al in ((1, 1), (0, 2))),
               LINALG, ((3, 5), (2, 0)))
CASES += sweep("diopiDot", lambda input, other: torch.dot(input, other), lambda s, l: [
    {"input": T(s, layout=l), "other": T(s, layout="sliced")}], LINALG + (torch.int32,), ((0,), (1,), (7,), (40,)),
    at_least=20)
CASES += sweep("diopiMv", lambda input, vec: torch.mv(input, vec), lambda s, l: [
    {"input": T(s, layout=l), "vec": T(s[1:], layout="sliced")}], LINALG, ((3, 5), (1, 1), (0, 2), (6, 0)))
for name, fn, shapes in (("diopiAddmv", torch.addmv, lambda s: ((s[0],), (), (1,))),
                         ("diopiAddr", torch.addr, lambda s: ((s[0], s[1]), (s[1],), ()))):
    CASES += sweep(name, lambda input, beta, alpha, fn=fn, **kw: fn(input, *kw.values(), beta=beta, alpha=alpha),
                   lambda s, l, name=name, shapes=shapes: (
                       {"input": T(b), **({"mat": T(s, layout=l), "vec": T(s[1:])} if name == "diopiAddmv" else
                                          {"vec1": T(s[:1], layout="sliced"), "vec2": T(s[1:])}),
                        "beta": be, "alpha": al} for b in shapes(s) for be, al in ((1, 1), (0, 2), (0.5, -1))),
                   (torch.float32, torch.float64, torch.bfloat16), ((3, 5), (2, 0), (1, 1)))
for name, fn in (("diopiAddbmm", torch.addbmm), ("diopiBaddbmm", torch.baddbmm)):
    CASES += sweep(name, lambda input, batch1, batch2, beta, alpha, fn=fn: fn(input, batch1, batch2, beta=beta,
                                                                              alpha=alpha),
                   lambda s, l, name=name: ({"input": T(b), "batch1": T(s, layout=l), "batch2": T((s[0], s[2], 4)),
                                             "beta": be, "alpha": al}
                                            for b in (((s[1], 4) if name == "diopiAddbmm" else (s[0], s[1], 4)), (4,))
                                            for be, al in ((1, 1), (0, 2), (0.5, -1))),
                   (torch.float32, torch.float64, torch.bfloat16), ((2, 3, 5), (1, 1, 1), (0, 2, 3)))

# ---- index_reduce, cross ----------------------------------------------------------------------------------------
for reduce in ("prod", "mean", "amax", "amin"):
    for include_self in (True, False):
        CASES += sweep("diopiIndexReduce", lambda input, dim, index, source, reduce, include_self: torch.index_reduce(
            input, dim, index, source, reduce, include_self=include_self), lambda s, l, r=reduce, i=include_self: (
            {**a, "reduce": r, "include_self": i} for a in _index_dim_args(s, l)),
            F32_64 + (torch.int64,), IDX_SHAPES[1:], at_least=3)
CASES += sweep("diopiCross", lambda input, other, dim: torch.linalg.cross(input, other, dim=dim), lambda s, l: [
    {"input": T(s, layout=l), "other": T(s), "dim": -1 if s[-1] == 3 else 0},
    {"input": T(s, layout=l), "other": T((1,) * (len(s) - 1) + (3,) if s[-1] == 3 else (3, 1)),
     "dim": -1 if s[-1] == 3 else 0}],
    (torch.float32, torch.float64, torch.int64, torch.bfloat16), ((4, 3), (3, 5), (2, 4, 3), (0, 3)))

# ---- linear-algebra decompositions (the same LAPACK call on both sides: results agree bit for bit) -------------------
SQUARE = ((4, 4), (3, 4, 4), (1, 1), (0, 3, 3), (2, 0, 0))
CASES += sweep("diopiLinalgInvEx", lambda input, check_errors: tuple(aten.linalg_inv_ex(input)),
               lambda s, l: [{"input": T(s, layout=l), "check_errors": False}], F32_64, SQUARE)
CASES += sweep("diopiLinalgDet", lambda input: tuple(aten._linalg_det(input)), lambda s, l: [{"input": T(s, layout=l)}],
               F32_64, SQUARE)
CASES += sweep("diopiLinalgSlogdet", lambda input: tuple(aten._linalg_slogdet(input)),
               lambda s, l: [{"input": T(s, layout=l)}], F32_64, SQUARE)
CASES += sweep("diopiLinalgCholeskyEx", lambda input, upper, check_errors: tuple(aten.linalg_cholesky_ex(
    input, upper=upper)), lambda s, l: ({"input": T(s, layout=l), "upper": u, "check_errors": False}
                                        for u in (False, True)),
    F32_64, SQUARE, note="not positive definite: info reports where it stopped")
CASES += sweep("diopiLinalgSvd", lambda input, full_matrices, compute_uv, driver: tuple(aten._linalg_svd(
    input, full_matrices, compute_uv)), lambda s, l: ({"input": T(s, layout=l), "full_matrices": f, "compute_uv": c,
                                                       "driver": None}
                                                      for f, c in ((False, True), (True, True), (False, False))),
    F32_64, ((4, 4), (3, 4, 2), (2, 5), (1, 1)), rtol=1e-5, atol=1e-5)
CASES += sweep("diopiLinalgQR", lambda input, mode: tuple(aten.linalg_qr(input, mode)), lambda s, l: (
    {"input": T(s, layout=l), "mode": m} for m in ("reduced", "complete", "r")), F32_64,
    ((4, 4), (3, 4, 2), (2, 5), (0, 3)))
CASES += sweep("diopiLinalgSolveEx", lambda a, b, left, check_errors: tuple(aten._linalg_solve_ex(a, b, left=left)),
               lambda s, l: ({"a": T(s, layout=l), "b": T(s[:-1] + (2,) if left else s[:-2] + (2, s[-1])), "left": left,
                              "check_errors": False} for left in (True, False)), F32_64, SQUARE[:3])
CASES += sweep("diopiLinalgEigh", lambda input, uplo, compute_v: tuple(aten._linalg_eigh(input, uplo, compute_v)),
               lambda s, l: ({"input": T(s, layout=l), "uplo": u, "compute_v": c}
                             for u in ("L", "U") for c in (True, False)),
               F32_64, SQUARE, rtol=1e-5, atol=1e-5)
CASES += sweep("diopiLinalgLuFactorEx", lambda input, pivot, check_errors: tuple(aten.linalg_lu_factor_ex(input)),
               lambda s, l: [{"input": T(s, layout=l), "pivot": True, "check_errors": False}], F32_64,
               SQUARE + ((3, 5), (5, 3)))
CASES += sweep("diopiLinalgSolveTriangular", lambda input, b, upper, left, unitriangular: aten.linalg_solve_triangular(
    input, b, upper=upper, left=left, unitriangular=unitriangular), lambda s, l: (
    {"input": T(s, layout=l, low=1, high=3), "b": T(s[:-1] + (2,) if left else s[:-2] + (2, s[-1])), "upper": up,
     "left": left, "unitriangular": unit} for up, left, unit in ((True, True, False), (False, False, True),
                                                                 (False, True, False))), F32_64, SQUARE[:3])
CASES += sweep("diopiLinalgLuSolve", lambda lu, pivots, b, left, adjoint: aten.linalg_lu_solve(
    lu, pivots, b, left=left, adjoint=adjoint), lambda s, l: (
    {"lu": T(s, layout=l, low=1, high=3), "pivots": T(s[:-1], torch.int32, low=s[-1], high=s[-1] + 1),
     "b": T(s[:-1] + (2,) if left else s[:-2] + (2, s[-1])), "left": left, "adjoint": adj}
    for left, adj in ((True, False), (False, True), (True, True))), F32_64, SQUARE[:3],
    note="pivots all n: a valid permutation")

CASES = reseeded(CASES)
