"""Conformance cases: reductions, scans, sorting and searching (diopi_impl/torch/reductions.py).

DIOPI reductions take no keepdim: the output's rank says whether reduced dims
are kept, so every reduction is swept with a keepdim=False and a keepdim=True
reference (the runner allocates the output from the reference's result).
"""

import torch

from conformance.spec import FLOAT, Case, T

F32_64 = (torch.float32, torch.float64)
INTS = (torch.int64, torch.int32, torch.uint8)
NUMERIC = FLOAT + INTS
#: Non-empty shapes, 0-d included; EMPTY the empty ones reductions with an identity accept.
SHAPES = ((), (7,), (3, 5), (2, 3, 4), (1, 4, 1, 3))
EMPTY = ((0,), (2, 0, 3))


def layouts(shape):
    if len(shape) >= 2:
        return ("contiguous", "transposed", "sliced")
    return ("contiguous", "sliced") if len(shape) == 1 else ("contiguous",)


def sweep(function, reference, make_args, dtypes, shapes, at_least=8, limit=20, **kwargs):
    """Cases over shapes x ``make_args(shape, layout)``'s argument dicts, layouts and dtypes in rotation.

    Every dtype, layout and argument combination is covered, but not their product, and at most ``limit``
    combinations per call (evenly spread): that keeps the suite fast.
    """
    combos = []
    for n, shape in enumerate(shapes):
        options = layouts(shape)
        by_layout = {layout: list(make_args(shape, layout)) for layout in options}
        for i in range(len(by_layout[options[0]])):
            combos.append(by_layout[options[(i + n) % len(options)]][i])
    if len(combos) > limit:  # an evenly spread subset, first and last kept
        step = (len(combos) - 1) / (limit - 1)
        combos = [combos[round(i * step)] for i in range(limit)]
    count = max(len(combos), len(dtypes), at_least) if combos else 0
    return [Case(function, combos[i % len(combos)], reference, dtype=dtypes[i % len(dtypes)], **kwargs)
            for i in range(count)]


def reseeded(cases, minimum=20):
    """``cases`` plus copies with other seeds (other random values) for functions with fewer than ``minimum``."""
    import collections
    import dataclasses

    by_function = collections.defaultdict(list)
    for case in cases:
        by_function[case.function].append(case)
    extra = []
    for group in by_function.values():
        for i in range(max(0, minimum - len(group))):
            extra.append(dataclasses.replace(group[i % len(group)], seed=1 + i // len(group)))
    return cases + extra


def dim_lists(shape):
    """Dim lists valid for ``shape``: None (all), one dim, and two dims where there are two."""
    lists = [None, [0], [-1]]
    if len(shape) >= 2:
        lists.append([0, -1])
    return lists


def one_dims(shape):
    return [0, -1] if len(shape) < 2 else [0, 1, -1]


def _input_and(name, values_of):
    def make(shape, layout):
        for value in values_of(shape):
            yield {"input": T(shape, layout=layout), name: value}
    return make


def _input_only(shape, layout):
    yield {"input": T(shape, layout=layout)}


CASES = []

# ---- sum, mean, prod, amax, amin, logsumexp, norm, var, std --------------------------------------
for keep in (False, True):
    def _sum(input, dim, keep=keep):
        return torch.sum(input, dim or None, keepdim=keep) if dim else (
            torch.sum(input).reshape([1] * input.dim()) if keep else torch.sum(input))

    CASES += sweep("diopiSum", _sum, _input_and("dim", dim_lists), NUMERIC, SHAPES + EMPTY, note=f"keepdim={keep}")
    CASES += sweep("diopiMean", lambda input, dim, keep=keep: torch.mean(
        input, dim if dim else list(range(input.dim())), keepdim=keep),
        _input_and("dim", dim_lists), FLOAT, SHAPES + EMPTY, note=f"keepdim={keep}")
    CASES += sweep("diopiProd", lambda input, dim, keep=keep: torch.prod(input, dim, keepdim=keep),
                   _input_and("dim", one_dims), NUMERIC, SHAPES + EMPTY, note=f"keepdim={keep}")
    CASES += sweep("diopiAmax", lambda input, dim, keepdim: torch.amax(input, dim, keepdim=keepdim),
                   lambda s, l, keep=keep: ({**args, "keepdim": keep} for args in _input_and(
                       "dim", lambda s: [[], [0], [-1]] + ([[0, -1]] if len(s) >= 2 else []))(s, l)),
                   NUMERIC, SHAPES, note=f"keepdim={keep}")
    CASES += sweep("diopiAmin", lambda input, dim, keep=keep: torch.amin(input, dim, keepdim=keep),
                   _input_and("dim", lambda s: [[], [0], [-1]] + ([[0, -1]] if len(s) >= 2 else [])),
                   NUMERIC + (torch.bool,), SHAPES, note=f"keepdim={keep}")
    CASES += sweep("diopiLogSumExp", lambda input, dim, keep=keep: torch.logsumexp(input, dim, keepdim=keep),
                   _input_and("dim", lambda s: [[0], [-1]] + ([[0, -1]] if len(s) >= 2 else [])),
                   FLOAT + (torch.int64,), SHAPES + EMPTY, note=f"keepdim={keep}")
for keep, p in ((False, 2), (True, 1), (False, float("inf"))):
    CASES += sweep("diopiNorm", lambda input, p, dim, keep=keep: torch.linalg.vector_norm(input, p, dim, keepdim=keep),
                   lambda shape, layout, p=p: ({"input": T(shape, layout=layout), "p": p, "dim": d}
                                               for d in dim_lists(shape)), F32_64, SHAPES, note=f"keepdim={keep}")
for keep, correction in ((False, None), (True, 0), (False, 2)):
    for name, fn in (("diopiVar", torch.var), ("diopiStd", torch.std)):
        CASES += sweep(name, lambda input, dim, correction, fn=fn, keep=keep: fn(
            input, dim, correction=correction, keepdim=keep), lambda shape, layout, c=correction: (
            {"input": T(shape, layout=layout), "dim": d, "correction": c} for d in dim_lists(shape)),
            F32_64, SHAPES[1:], note=f"keepdim={keep}")
for keep, correction in ((False, None), (True, 0)):
    for name, fn in (("diopiVarMean", torch.var_mean), ("diopiStdMean", torch.std_mean)):
        CASES += sweep(name, lambda input, dim, correction, fn=fn, keep=keep: fn(
            input, dim, correction=correction, keepdim=keep), lambda shape, layout, c=correction: (
            {"input": T(shape, layout=layout), "dim": d, "correction": c} for d in dim_lists(shape)[:2]),
            (torch.float32, torch.float64), SHAPES[1:], note=f"keepdim={keep}")
CASES += sweep("diopiProd", lambda input, dim: torch.prod(input), _input_and("dim", lambda s: [None]),
               NUMERIC, SHAPES + EMPTY, note="all dims")
CASES += sweep("diopiNorm", lambda input, p, dim: torch.linalg.vector_norm(input, 2),
               lambda shape, layout: [{"input": T(shape, layout=layout), "p": None, "dim": None}],
               FLOAT, SHAPES + EMPTY, note="p None means 2")
CASES += sweep("diopiNorm", lambda input, p, dim: torch.linalg.vector_norm(input, 2, dtype=torch.float64),
               lambda shape, layout: [{"input": T(shape, layout=layout), "p": 2, "dim": None}],
               (torch.float32,), SHAPES, note="float64 output")

# ---- max/min with indices, full max/min/median, argmax/argmin, any/all, aminmax ---------------------
for keep in (False, True):
    for name, fn in (("diopiMax", torch.max), ("diopiMin", torch.min), ("diopiMedian", torch.median)):
        CASES += sweep(name, lambda input, dim, fn=fn, keep=keep: tuple(fn(input, dim, keepdim=keep)),
                       _input_and("dim", one_dims), NUMERIC, SHAPES, note=f"keepdim={keep}")
    for name, fn in (("diopiArgmax", torch.argmax), ("diopiArgmin", torch.argmin)):
        CASES += sweep(name, lambda input, dim, keepdim, fn=fn: fn(input, dim, keepdim), lambda shape, layout, k=keep: (
            {"input": T(shape, layout=layout), "dim": d, "keepdim": k} for d in [None] + one_dims(shape)),
            NUMERIC, SHAPES)
    for name, fn in (("diopiAny", torch.any), ("diopiAll", torch.all)):
        CASES += sweep(name, lambda input, dim, fn=fn, keep=keep: fn(input, dim, keepdim=keep),
                       _input_and("dim", one_dims), (torch.bool, torch.float32, torch.int64, torch.uint8),
                       SHAPES + EMPTY, note=f"keepdim={keep}")
    CASES += sweep("diopiAminmax", lambda input, dim, keep=keep: tuple(torch.aminmax(input, dim=dim, keepdim=keep)),
                   _input_and("dim", lambda s: [None] + one_dims(s)), NUMERIC, SHAPES, note=f"keepdim={keep}")
    CASES += sweep("diopiKthvalue", lambda input, k, dim, keep=keep: tuple(torch.kthvalue(input, k, dim, keep)),
                   lambda shape, layout: ({"input": T(shape, layout=layout), "k": k, "dim": -1}
                                          for k in (1, shape[-1] if shape else 1)),
                   FLOAT[:2] + INTS[:2], SHAPES, note=f"keepdim={keep}")
for name, fn in (("diopiMaxAll", torch.max), ("diopiMinAll", torch.min), ("diopiMedianAll", torch.median)):
    CASES += sweep(name, lambda input, fn=fn: fn(input), _input_only, NUMERIC, SHAPES, at_least=21)
for name, fn in (("diopiAny", torch.any), ("diopiAll", torch.all)):
    CASES += sweep(name, lambda input, dim, fn=fn: fn(input), _input_and("dim", lambda s: [None]),
                   (torch.bool, torch.float32, torch.int64, torch.uint8), SHAPES + EMPTY, note="all dims")

# ---- count_nonzero, trace, histc, bincount ---------------------------------------------------------
CASES += sweep("diopiCountNonzero", lambda input, dim: torch.count_nonzero(input, dim),
               _input_and("dim", lambda s: [[]] + ([[0], [-1]] if s else []) + ([[0, -1]] if len(s) >= 2 else [])),
               (torch.float32, torch.int64, torch.bool), SHAPES + EMPTY)
CASES += sweep("diopiTrace", lambda input: torch.trace(input), _input_only, NUMERIC, ((3, 5), (4, 4), (5, 2), (0, 3)),
               at_least=21)
CASES += sweep("diopiHistc", lambda input, bins, min, max: torch.histc(input, bins, min, max),
               lambda shape, layout: ({"input": T(shape, layout=layout), "bins": b, "min": lo, "max": hi}
                                      for b, lo, hi in ((10, 0, 0), (5, -1, 1), (1, -3, 3))),
               F32_64, SHAPES + EMPTY)
CASES += sweep("diopiBincount", lambda input, weights, minlength: torch.bincount(input, weights, minlength),
               lambda shape, layout: ({"input": T(shape, torch.int64, layout=layout, low=0, high=6),
                                       "weights": w, "minlength": m}
                                      for w in (None, T(shape, torch.float64, layout=layout)) for m in (0, 9)),
               (torch.float32,), ((0,), (7,), (30,)))
CASES += sweep("diopiBincount", lambda input, weights, minlength: torch.bincount(input, weights, minlength),
               lambda shape, layout: [{"input": T(shape, layout=layout, low=0, high=6), "weights": None,
                                       "minlength": 0}],
               (torch.int32, torch.uint8, torch.int16), ((7,), (30,)))

# ---- scans -------------------------------------------------------------------------------------------
for name, fn in (("diopiCumsum", torch.cumsum), ("diopiCumprod", torch.cumprod)):
    CASES += sweep(name, lambda input, dim, fn=fn: fn(input, dim), _input_and("dim", one_dims),
                   NUMERIC + (torch.bool,), SHAPES + EMPTY)
    CASES += sweep(name, lambda input, dim, fn=fn: fn(input, dim, dtype=torch.float64), _input_and("dim", one_dims),
                   (torch.float32, torch.int32), SHAPES, note="float64 output")
for name, fn in (("diopiCummax", torch.cummax), ("diopiCummin", torch.cummin)):
    CASES += sweep(name, lambda input, dim, fn=fn: tuple(fn(input, dim)), _input_and("dim", one_dims),
                   NUMERIC + (torch.bool,), SHAPES + EMPTY)

# ---- sorting and searching ---------------------------------------------------------------------------
for stable in (None, True):
    CASES += sweep("diopiSort", lambda input, dim, descending, stable: tuple(
        torch.sort(input, stable=stable, dim=dim, descending=descending)),
        lambda shape, layout, stable=stable: ({"input": T(shape, layout=layout), "dim": d, "descending": desc,
                                               "stable": stable} for d in one_dims(shape) for desc in (False, True)),
        NUMERIC + (torch.bool,) if stable else FLOAT[:2], SHAPES + EMPTY, note="ties: stable" if stable else "")
CASES += sweep("diopiTopk", lambda input, k, dim, largest, sorted: tuple(torch.topk(input, k, dim, largest, sorted)),
               lambda shape, layout: ({"input": T(shape, layout=layout), "k": k, "dim": -1, "largest": largest,
                                       "sorted": True} for k in (0, 1, shape[-1] if shape else 1)
                                      for largest in (True, False)),
               FLOAT + (torch.int64, torch.int32), SHAPES, note="distinct values or sorted ties")


def _searchsorted(sorted_sequence, values, out_int32, right, side, sorter):
    return torch.searchsorted(sorted_sequence, values, out_int32=out_int32, right=right, side=side)


CASES += sweep("diopiSearchsorted", _searchsorted, lambda shape, layout: [
    {"sorted_sequence": T((9,), low=-3, high=3), "values": T(shape, layout=layout), "out_int32": o, "right": r,
     "side": s, "sorter": None} for o, r, s in ((False, False, None), (True, True, None), (False, False, "right"))],
    (torch.float32, torch.float64, torch.int64), SHAPES + EMPTY, note="binary search: unsorted sequences answer alike")
CASES += sweep("diopiBucketize", lambda input, boundaries, out_int32, right: torch.bucketize(
    input, boundaries, out_int32=out_int32, right=right), lambda shape, layout: [
    {"input": T(shape, layout=layout), "boundaries": T((6,), low=-3, high=3), "out_int32": o, "right": r}
    for o, r in ((False, False), (True, True))], (torch.float32, torch.float64, torch.int64), SHAPES + EMPTY)
CASES += sweep("diopiIsin", lambda elements, test_elements, assume_unique, invert: torch.isin(
    elements, test_elements, assume_unique=assume_unique, invert=invert), lambda shape, layout: [
    {"elements": T(shape, low=-4, high=4, layout=layout), "test_elements": T((5,), low=-4, high=4),
     "assume_unique": False, "invert": i} for i in (False, True)], (torch.float32, torch.int64), SHAPES + EMPTY)

# ---- nan-aware reductions, mode, logcumsumexp, renorm --------------------------------------------------------
for keep in (False, True):
    CASES += sweep("diopiNansum", lambda input, dim, keep=keep: torch.nansum(input, dim, keepdim=keep) if dim else (
        torch.nansum(input).reshape([1] * input.dim()) if keep else torch.nansum(input)),
        _input_and("dim", dim_lists), NUMERIC, SHAPES + EMPTY, note=f"keepdim={keep}")
    CASES += sweep("diopiMode", lambda input, dim, keep=keep: tuple(torch.mode(input, dim, keep)),
                   lambda s, l: ({"input": T(s, layout=l, low=-2, high=2), "dim": d} for d in one_dims(s)),
                   NUMERIC, SHAPES, note=f"keepdim={keep}, many ties")
    CASES += sweep("diopiNanmedian", lambda input, dim, keep=keep: tuple(torch.nanmedian(input, dim, keep)),
                   _input_and("dim", one_dims), NUMERIC, SHAPES, note=f"keepdim={keep}")
CASES += sweep("diopiNanmedianAll", lambda input: torch.nanmedian(input), _input_only, NUMERIC, SHAPES, at_least=21)
CASES += sweep("diopiLogcumsumexp", lambda input, dim: torch.logcumsumexp(input, dim), _input_and("dim", one_dims),
               FLOAT, SHAPES + EMPTY)
CASES += sweep("diopiRenorm", lambda input, p, dim, maxnorm: torch.renorm(input, p, dim, maxnorm), lambda s, l: (
    {"input": T(s, layout=l), "p": p, "dim": d, "maxnorm": m} for d in one_dims(s) for p, m in ((2, 1.0), (1, 5.0))),
    F32_64 + (torch.bfloat16,), SHAPES[2:])

CASES = reseeded(CASES)
