"""Indexing: advanced indexing and index_put, scatter/gather, index_* functions, masked and take/put
functions, nonzero and repeat_interleave.

Functions with an ``...Inp`` twin write into ``input``; the out= form copies ``input`` to ``out`` first,
unless the caller passed the same tensor for both (the generated in-place kernels do), and then updates
``out`` in place.
"""

import torch

from dipu.diopi import FALSE, SUCCESS
from dipu.diopi import native_alias as alias
from ._aten import require_copy
from ._library import library
from ._table import copy_function, inplace_function, out_function

aten = torch.ops.aten


def _index_list(indices, d):
    # CPU index tensors stay on the CPU: ATen accepts them beside device tensors
    return [None if t is None else t if t.device.type == "cpu" else alias(t, d) for t in indices]


def _value(value, d):
    return alias(value, d) if isinstance(value, torch.Tensor) else value


def _start(out, input, d):
    """``out``'s alias, holding ``input``'s values (out= forms of in-place ATen functions)."""
    o = alias(out, d)
    if out is not input:
        o.copy_(alias(input, d))
    return o


# ---- advanced indexing -----------------------------------------------------------------------------------


@library.register(aten=aten.index)
def diopiIndex(ctx, out, input, indices):
    d = ctx.device
    out[0] = require_copy(ctx, aten.index.Tensor(alias(input, d), _index_list(indices, d)))
    return SUCCESS


def _index_put_(target, indices, values, accumulate, d):
    # aten's schema takes None entries (a whole dim, as index backward passes them); Tensor.index_put_ does not
    values = _value(values, d) if isinstance(values, torch.Tensor) else torch.tensor(values, dtype=target.dtype)
    aten.index_put_(target, _index_list(indices, d), values, accumulate)


@library.register
def diopiIndexPut(ctx, out, input, values, indices, accumulate):
    d = ctx.device
    _index_put_(_start(out, input, d), indices, values, accumulate, d)
    return SUCCESS


@library.register
def diopiIndexPutInp(ctx, input, values, indices, accumulate):
    d = ctx.device
    _index_put_(alias(input, d), indices, values, accumulate, d)
    return SUCCESS


# ---- one overload each (Note [Table-made functions] in _table.py) -----------------------------------------
for _name, _overload in (
        ("diopiIndexSelect", aten.index_select.out), ("diopiIndexAdd", aten.index_add.out),
        ("diopiIndexCopy", aten.index_copy.out), ("diopiIndexReduce", aten.index_reduce.out),
        ("diopiScatterReduce", aten.scatter_reduce.two_out), ("diopiTake", aten.take.out)):
    out_function(_name, _overload)
for _name, _overload in (
        ("diopiIndexFillInp", aten.index_fill_.int_Tensor), ("diopiIndexFillInpScalar", aten.index_fill_.int_Scalar),
        ("diopiMaskedFillInp", aten.masked_fill_.Tensor), ("diopiMaskedFillInpScalar", aten.masked_fill_.Scalar),
        ("diopiPutInp", "put_")):
    inplace_function(_name, _overload)


# ---- index_* ---------------------------------------------------------------------------------------------


@library.register(aten=aten.index_fill.int_Tensor_out)
def diopiIndexFill(ctx, out, input, dim, index, value):
    d = ctx.device
    _start(out, input, d).index_fill_(dim, alias(index, d), _value(value, d))
    return SUCCESS


@library.register(aten=aten.index_fill.int_Scalar_out)
def diopiIndexFillScalar(ctx, out, input, dim, index, value):
    d = ctx.device
    _start(out, input, d).index_fill_(dim, alias(index, d), value)
    return SUCCESS


# ---- scatter and gather ----------------------------------------------------------------------------------


@library.register  # DIOPI's order (src before index) is not ATen's
def diopiScatter(ctx, out, input, dim, src, index, reduce):
    d = ctx.device
    x, i, s, o = alias(input, d), alias(index, d), alias(src, d), alias(out, d)
    if reduce is None:
        torch.scatter(x, dim, i, s, out=o)
    elif reduce == "add":  # the same as scatter's deprecated reduce="add", without its warning
        torch.scatter_add(x, dim, i, s, out=o)
    else:
        torch.scatter(x, dim, i, s, reduce=reduce, out=o)
    return SUCCESS


@library.register
def diopiScatterScalar(ctx, out, input, dim, value, index, reduce):
    d = ctx.device
    x, i, o = alias(input, d), alias(index, d), alias(out, d)
    if reduce is None:
        torch.scatter(x, dim, i, value, out=o)
    else:
        torch.scatter(x, dim, i, value, reduce=reduce, out=o)
    return SUCCESS


out_function("diopiGather", aten.gather.out, derived={"sparse_grad": FALSE})


# ---- masks -----------------------------------------------------------------------------------------------


@library.register(aten=aten.masked_scatter.out)
def diopiMaskedScatter(ctx, out, input, mask, source):
    d = ctx.device
    _start(out, input, d).masked_scatter_(alias(mask, d), alias(source, d))
    return SUCCESS


copy_function("diopiMaskedSelect", aten.masked_select.default)
copy_function("diopiNonzero", aten.nonzero.default)


# ---- take and put, repeat_interleave ---------------------------------------------------------------------


@library.register(aten=aten.put.out)
def diopiPut(ctx, out, input, index, source, accumulate):
    d = ctx.device
    _start(out, input, d).put_(alias(index, d), alias(source, d), accumulate)
    return SUCCESS


@library.register(aten=aten.repeat_interleave.Tensor)
def diopiRepeatInterleave(ctx, out, repeats, output_size):
    out[0] = require_copy(ctx, torch.repeat_interleave(alias(repeats, ctx.device), output_size=output_size))
    return SUCCESS
