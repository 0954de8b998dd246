"""Reductions, scans, sorting and searching, and unique.

DIOPI passes no keepdim: the output's rank says whether dims are kept. Where the rest lines up with one ATen
overload, a table row derives keepdim (or a scan's dtype) from the output (Note [Derived arguments] in
dipu/diopi/library.py); functions that take keepdim or need none (argmax, cummax, topk) are table rows as they
are. The others are written out.
"""

import torch

from dipu.diopi import DERIVATIONS, KEPT_DIMS, OUTPUT_DTYPE, SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import fast_aten, optional_alias, require_copy
from ._library import library
from ._table import copy_function, out_function

aten = torch.ops.aten


#: Whether a reduction keeps its dims, read from its output (Note [Derived arguments] in dipu/diopi/library.py).
_keepdim = DERIVATIONS[KEPT_DIMS]


def _dims(dim):
    """DIOPI's optional dim list: None or empty reduces every dim."""
    return dim or None


# One ATen overload each, keepdim or dtype derived from the output (Note [Derived arguments] in
# dipu/diopi/library.py): table rows, generated in C++ as well.
for _name, _overload, _outs in (
        ("diopiMax", aten.max.dim_max, ("max", "max_values")),
        ("diopiMin", aten.min.dim_min, ("min", "min_indices")),
        ("diopiAmin", aten.amin.out, ()),
        ("diopiMedian", aten.median.dim_values, ("values", "indices")),
        ("diopiNanmedian", aten.nanmedian.dim_values, ("values", "indices")),
        ("diopiMode", aten.mode.values, ("values", "indices")),
        ("diopiKthvalue", aten.kthvalue.values, ("values", "indices")),
        ("diopiVar", aten.var.correction_out, ()), ("diopiStd", aten.std.correction_out, ()),
        ("diopiVarMean", aten.var_mean.correction_out, ("out0", "out1")),
        ("diopiStdMean", aten.std_mean.correction_out, ("out0", "out1"))):
    out_function(_name, _overload, _outs, derived={"keepdim": KEPT_DIMS})
for _name, _overload in (("diopiSum", aten.sum.IntList_out), ("diopiMean", aten.mean.out),
                         ("diopiNansum", aten.nansum.out)):
    out_function(_name, _overload, derived={"keepdim": KEPT_DIMS, "dtype": OUTPUT_DTYPE})
for _name, _overload in (("diopiCumsum", aten.cumsum.out), ("diopiCumprod", aten.cumprod.out)):
    out_function(_name, _overload, derived={"dtype": OUTPUT_DTYPE})
# ... and with keepdim a parameter, or no argument to derive.
for _name, _overload, _outs in (
        ("diopiAmax", aten.amax.out, ()), ("diopiArgmax", aten.argmax.out, ()), ("diopiArgmin", aten.argmin.out, ()),
        ("diopiHistc", aten.histc.out, ()), ("diopiBucketize", aten.bucketize.Tensor_out, ()),
        ("diopiIsin", aten.isin.Tensor_Tensor_out, ()),
        ("diopiCummax", aten.cummax.out, ("values", "indices")),
        ("diopiCummin", aten.cummin.out, ("values", "indices")),
        ("diopiLogcumsumexp", aten._logcumsumexp.out, ("out",)),
        ("diopiTopk", aten.topk.values, ("values", "indices"))):
    out_function(_name, _overload, _outs)


# ---- reductions ------------------------------------------------------------------------------------------


@library.register
def diopiProd(ctx, out, input, dim):
    d = ctx.device
    x, o = alias(input, d), alias(out, d)
    if dim is None:
        o.copy_(torch.prod(x, dtype=o.dtype))
    else:
        torch.prod(x, dim, keepdim=_keepdim(o, x), dtype=o.dtype, out=o)
    return SUCCESS


copy_function("diopiMaxAll", aten.max.default)
copy_function("diopiMinAll", aten.min.default)


@library.register
def diopiAminmax(ctx, min, max, input, dim):
    d = ctx.device
    x, low = alias(input, d), alias(min, d)
    torch.aminmax(x, dim=dim, keepdim=_keepdim(low, x), out=(low, alias(max, d)))
    return SUCCESS


def _any_or_all(name, reduce):
    """diopiAny and diopiAll: DIOPI's optional single dim, over every element without one."""
    def function(ctx, out, input, dim):
        d = ctx.device
        x, o = alias(input, d), alias(out, d)
        if dim is None:
            reduce(x, out=o)
        else:
            reduce(x, dim, keepdim=_keepdim(o, x), out=o)
        return SUCCESS

    function.__name__ = function.__qualname__ = name
    library.register(function)


_any_or_all("diopiAny", torch.any)
_any_or_all("diopiAll", torch.all)


@library.register
def diopiNorm(ctx, out, input, p, dim):
    d = ctx.device
    x, o = alias(input, d), alias(out, d)
    dtype = o.dtype if x.dtype.is_floating_point and o.dtype != x.dtype else None
    torch.linalg.vector_norm(x, 2 if p is None else p, _dims(dim), _keepdim(o, x), dtype=dtype, out=o)
    return SUCCESS


@library.register
def diopiLogSumExp(ctx, out, input, dim):
    d = ctx.device
    x, o = alias(input, d), alias(out, d)
    o.copy_(torch.logsumexp(x, dim, keepdim=_keepdim(o, x)))
    return SUCCESS


copy_function("diopiMedianAll", aten.median.default)
copy_function("diopiNanmedianAll", aten.nanmedian.default)
copy_function("diopiCountNonzero", aten.count_nonzero.dim_IntList)
copy_function("diopiTrace", aten.trace.default)
copy_function("diopiBincount", aten.bincount.default)


# ---- sorting and searching ---------------------------------------------------------------------------------


@library.register
def diopiSort(ctx, values, indices, input, dim, descending, stable):
    d = ctx.device
    aten.sort.values_stable(alias(input, d), stable=stable, dim=dim, descending=descending,
                            values=alias(values, d), indices=alias(indices, d))
    return SUCCESS


@library.register(aten=aten.searchsorted.Tensor_out)
def diopiSearchsorted(ctx, out, sorted_sequence, values, out_int32, right, side, sorter):
    d = ctx.device
    values = alias(values, d) if isinstance(values, torch.Tensor) else values
    torch.searchsorted(alias(sorted_sequence, d), values, out_int32=out_int32, right=right, side=side,
                       sorter=optional_alias(sorter, d), out=alias(out, d))
    return SUCCESS


@library.register(aten=aten.unique_dim.default)
def diopiUniqueInverseCounts(ctx, out, inverse, counts, input, dim, sorted, return_inverse, return_counts):
    x = alias(input, ctx.device)
    if dim is None:
        results = fast_aten._unique2(x, sorted, return_inverse, return_counts)
    else:
        results = fast_aten.unique_dim(x, dim, sorted, return_inverse, return_counts)
    for slot, result in zip((out, inverse, counts), results):
        slot[0] = require_copy(ctx, result)
    return SUCCESS


@library.register
def diopiUniqueConsecutive(ctx, out, inverse, counts, input, dim, return_inverse, return_counts):
    results = fast_aten.unique_consecutive(alias(input, ctx.device), return_inverse, return_counts, dim)
    for slot, result in zip((out, inverse, counts), results):
        slot[0] = require_copy(ctx, result)
    return SUCCESS
