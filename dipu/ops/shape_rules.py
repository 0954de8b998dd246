"""Shape rules: the output inference rules ``shape:`` names in diopi_functions.yaml.

A rule receives the op's non-output arguments in schema order and returns the
``(shape, dtype)`` of its output, or a tuple of them (``None`` for an output
that is not wanted) when the op has several. Generated wrappers allocate
outputs from it, resize ``out=`` arguments to it and check in-place ops
against it. Rules run on every call, so the common cases stay on a few
attribute reads; ``meta`` (dipu/ops/meta_rules.py) is the general fallback.

Note [Shape rules are a table]
``RULES`` is the one table of the rules: each name, whether the rule is
elementwise (which picks the stride rule: Note [Output strides] in
dipu/ops/meta_rules.py), and whether it has a C++ twin in
dipu/kernels/cpp/shape_rules.h and for how many outputs. The generator reads it
from this file (scripts/autogen/shape_rules.py: this module is a leaf, it
imports torch only) and derives from it what ``shape:`` may name and which
kernels get C++ wrappers; ``CPP_META_TWINS`` does the same for the ops whose
meta kernel has a C++ twin. Generated code imports each rule it uses by name
and calls each C++ twin by name, so a rule the table names but this module or
the header lacks fails at import or at the build; tests/test_autogen.py checks
every name is a function here, and tests/test_cpp_wrappers.py every twin
against its Python rule. The other public functions (the pooling sizes) are
helpers of the ``impl:`` kernels, not rules.

Python numbers may stand where the schema says Tensor: torch hands wrapped
scalars (``x * 2``) to Python kernels as numbers. Shapes are tuples or
``torch.Size`` (never lists) so wrappers can compare them with ``out.shape``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch



class Rule(NamedTuple):
    """What the generator knows of a rule besides its name (Note [Shape rules are a table])."""

    elementwise: bool = False  # broadcasts its tensor operands like TensorIterator: Note [Output strides]
    cpp: int = 0  # the outputs its C++ twin in dipu/kernels/cpp/shape_rules.h fills; 0: it has none
    # pointwise, but its TensorIterator takes the operands in another order than the schema's: where they share one
    # layout, that order does not matter, and the C++ wrapper lays out the output as TensorIterator does (Note
    # [Elementwise strides in C++]); where they differ, the meta kernel's strides, on the Python path
    alike: bool = False


#: Every rule of this module (each a function below).
RULES: dict[str, Rule] = {
    **dict.fromkeys(("compare", "ternary", "unary_bool", "binary", "binary_float", "divide", "unary_float",
                     "unary_real", "where", "pointwise"), Rule(elementwise=True, cpp=1)),
    # unary is shared by ops of every sort (clone, softmax, channel_shuffle): their meta kernels know the strides
    "pointwise_alike": Rule(cpp=1, alike=True),
    **dict.fromkeys(("addmm", "arange", "arange_end", "bmm", "broadcast_grad", "like_self", "mm", "reduce_all",
                     "reduction", "sum_all", "unary"), Rule(cpp=1)),
    "native_layer_norm": Rule(cpp=3), "native_group_norm": Rule(cpp=3), "max_dim": Rule(cpp=2),
    "multinomial": Rule(cpp=1), "fused_lstm_cell": Rule(cpp=3), "fused_lstm_cell_backward": Rule(cpp=3),
    "fused_gru_cell": Rule(cpp=2), "fused_gru_cell_backward": Rule(cpp=5),
    **dict.fromkeys(("cdist_backward", "dropout", "eye", "linspace", "multilabel_margin_loss", "native_batch_norm",
                     "randperm", "sized_float"), Rule()),
}
#: Ops whose spec takes their shapes from the meta kernel, and the outputs the C++ twin of that meta kernel of
#: the same name (an overload's joined by _: var_correction) in dipu/kernels/cpp/shape_rules.h fills (Note [Meta
#: shapes in C++]).
CPP_META_TWINS: dict[str, int] = {
    "_weight_norm_interface": 2, "_weight_norm_interface_backward": 2, "argmax": 1, "argmin": 1,
    "binary_cross_entropy": 1, "binary_cross_entropy_with_logits": 1, "dot": 1, "embedding": 1,
    "embedding_dense_backward": 1, "index_select": 1, "log_sigmoid_forward": 2, "logsumexp": 1, "masked_scatter": 1,
    "mv": 1, "native_group_norm_backward": 3, "native_layer_norm_backward": 3, "nll_loss2d_forward": 2,
    "nll_loss_forward": 2, "prod": 1, "reflection_pad2d": 1, "repeat": 1, "sort": 2, "sort.stable": 2, "stack": 1,
    "std.correction": 1, "std_mean.correction": 2, "var.correction": 1, "var_mean.correction": 2,
}
__all__ = sorted(RULES)

_Tensor = torch.Tensor
_result_type = torch.result_type
_infer_size = torch._C._infer_size
_int64 = torch.int64
_bool = torch.bool


def _float_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype.is_floating_point or dtype.is_complex else torch.get_default_dtype()


def unary(self, *_):
    """Same shape and dtype as the first argument."""
    return self.shape, self.dtype


def pointwise(self, *_):
    """unary's shape and dtype, for an op TensorIterator computes element by element over its tensor operands in
    schema order (relu, gelu and their backwards): its output takes their layout (Note [Output strides])."""
    return self.shape, self.dtype


def pointwise_alike(self, *_):
    """unary's shape and dtype, for a pointwise op whose TensorIterator takes its operands in another order than its
    schema's (threshold_backward reads self first): Rule.alike."""
    return self.shape, self.dtype


def unary_real(self, *_):
    """Same shape; complex numbers give their real dtype (abs of complex64 is float32)."""
    dtype = self.dtype
    return self.shape, dtype.to_real() if dtype.is_complex else dtype


def unary_float(self, *_):
    """Same shape; integers and bool compute in the default float dtype (sqrt, exp, ...)."""
    return self.shape, _float_dtype(self.dtype)


def binary(self, other, *_):
    """Elementwise: broadcast shapes, promote dtypes."""
    if isinstance(other, _Tensor):
        shape = self.shape
        if other.shape != shape:
            shape = _infer_size(shape, other.shape)
        dtype = self.dtype
        return shape, dtype if other.dtype is dtype else _result_type(self, other)
    return self.shape, _result_type(self, other)


def divide(self, other, rounding_mode=None, *_):
    """As ``binary``, except true division of integers gives the default float dtype."""
    shape, dtype = binary(self, other)
    return shape, dtype if rounding_mode is not None else _float_dtype(dtype)


def compare(self, other, *_):
    """As ``binary`` for the shape; the result is bool."""
    shape = self.shape
    if isinstance(other, _Tensor) and other.shape != shape:
        shape = _infer_size(shape, other.shape)
    return shape, _bool


def ternary(self, first, second, *_):
    """Three-way broadcast (addcmul, addcdiv, lerp); dtype from all three."""
    shape = _infer_size(_infer_size(self.shape, first.shape), second.shape)
    return shape, _result_type(_result_type(self, first), second) if first.dtype is not self.dtype \
        or second.dtype is not self.dtype else self.dtype


def where(condition, self, other, *_):
    other_shape = other.shape if isinstance(other, _Tensor) else torch.Size()
    shape = _infer_size(_infer_size(condition.shape, self.shape), other_shape)
    return shape, _result_type(self, other)


def _reduced_shape(shape, dim, keepdim: bool) -> tuple[int, ...]:
    ndim = len(shape)
    if dim is None or len(dim) == 0:
        dims = set(range(ndim))
    else:
        dims = {d % ndim if ndim else 0 for d in dim}
    if keepdim:
        return tuple(1 if i in dims else size for i, size in enumerate(shape))
    return tuple(size for i, size in enumerate(shape) if i not in dims)


def reduction(self, dim=None, keepdim=False, dtype=None, *_):
    """sum/mean over ``dim`` (all when None or empty); integers and bool sum to int64."""
    if dtype is None:
        dtype = self.dtype if self.dtype.is_floating_point or self.dtype.is_complex else _int64
    return _reduced_shape(self.shape, dim, keepdim), dtype


def reduce_all(self, dtype=None, *_):
    """A full reduction to a 0-dim tensor that keeps the input dtype (max)."""
    return (), self.dtype if dtype is None else dtype


def sum_all(self, dtype=None, *_):
    return reduction(self, None, False, dtype)


def max_dim(self, dim, keepdim=False, *_):
    shape = _reduced_shape(self.shape, [dim], keepdim)
    return (shape, self.dtype), (shape, _int64)


def mm(self, mat2, *_):
    return (self.shape[0], mat2.shape[1]), self.dtype


def bmm(self, mat2, *_):
    return (self.shape[0], self.shape[1], mat2.shape[2]), self.dtype


def addmm(self, mat1, mat2, *_):
    return (mat1.shape[0], mat2.shape[1]), self.dtype


def like_self(grad_output, self, *_):
    """A gradient with respect to ``self``, the second argument (pooling and loss backwards)."""
    return self.shape, self.dtype


def broadcast_grad(grad_output, self, target, *_):
    """The gradient of a loss that broadcasts ``self`` with ``target`` (mse, smooth_l1, huber): the broadcast
    shape, as the CPU kernel writes it; autograd sums it back to the shape of ``self``."""
    shape = self.shape
    if target.shape != shape:
        shape = _infer_size(shape, target.shape)
    if grad_output.shape != shape:
        shape = _infer_size(shape, grad_output.shape)
    return shape, self.dtype


def multilabel_margin_loss(self, target, reduction, *_):
    """``multilabel_margin_loss_forward``: the loss and ``is_target`` (shaped like ``self``).

    The loss is 0-dim when reduced, else one per row, and 0-dim for a vector input as the CPU kernel
    gives (the op's meta kernel, a decomposition, gives a vector input's unreduced loss shape ``[1]``).
    """
    per_row = reduction == 0 and self.dim() == 2
    return ((self.shape[0],) if per_row else (), self.dtype), (self.shape, self.dtype)


def cdist_backward(grad, x1, x2, *_):
    """The gradient of ``cdist`` with respect to ``x1`` over the broadcast batch dimensions of both inputs."""
    batch = _infer_size(x1.shape[:-2], x2.shape[:-2])
    return (*batch, *x1.shape[-2:]), x1.dtype


def arange(start, end, step=1, *_):
    length = max(0, math.ceil((end - start) / step))
    is_float = any(isinstance(v, float) for v in (start, end, step))
    return (length,), torch.get_default_dtype() if is_float else _int64


def dropout(input, *_):
    return (input.shape, input.dtype), (input.shape, _bool)


def unary_bool(self, *_):
    """Same shape; the result is bool (isnan, signbit, logical_not)."""
    return self.shape, _bool


def binary_float(self, other, *_):
    """As ``binary``; integers and bool compute in the default float dtype (atan2, hypot, xlogy, ...)."""
    shape, dtype = binary(self, other)
    return shape, _float_dtype(dtype)


def randperm(n, *_):
    """``randperm(n)``: a permutation of n int64 indices."""
    return (n,), _int64


def multinomial(self, num_samples, *_):
    """``num_samples`` int64 indices per row of probabilities."""
    return (*self.shape[:-1], num_samples), _int64


def sized_float(mean, std, size, *_):
    """A factory filled from a distribution (``normal.float_float``): ``size``, the default float dtype."""
    return tuple(size), torch.get_default_dtype()


# ---- coverage: creation ops with only an out= kernel (no functional sibling to run on meta)


def arange_end(end, *_):
    """``arange.out(end)``: as ``arange`` from 0 in steps of 1."""
    return arange(0, end, 1)


def linspace(start, end, steps, *_):
    """linspace and logspace: ``steps`` values of the default float dtype (out= resizes only)."""
    return (steps,), torch.get_default_dtype()


def eye(n, m=None, *_):
    return (n, n if m is None else m), torch.get_default_dtype()


# ---- coverage: the fused recurrent cells (see Note [Fused recurrent cells] in diopi_impl/torch/recurrent.py); the CPU
# has no kernels for them, so no meta kernels either


def fused_lstm_cell(input_gates, hidden_gates, cx, *_):
    return (cx.shape, cx.dtype), (cx.shape, cx.dtype), (input_gates.shape, input_gates.dtype)


def fused_lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias, *_):
    bias = ((workspace.shape[1],), workspace.dtype) if has_bias else None
    return (workspace.shape, workspace.dtype), (cx.shape, cx.dtype), bias


def fused_gru_cell(input_gates, hidden_gates, hx, *_):
    return (hx.shape, hx.dtype), ((hx.shape[0], hx.shape[1] * 5), hx.dtype)


def fused_gru_cell_backward(grad_hy, workspace, has_bias, *_):
    batch, hidden = grad_hy.shape
    gates = ((batch, hidden * 3), grad_hy.dtype)
    bias = ((hidden * 3,), grad_hy.dtype) if has_bias else None
    return gates, gates, (grad_hy.shape, grad_hy.dtype), bias, bias


# ---- normalization: the CPU kernels keep their statistics in the input dtype (meta kernels follow CUDA, which
# keeps them in float32 for reduced-precision inputs), in float32 when such an input comes with float32
# parameters (ATen's is_mixed_type), and batch norm saves none (shape [0]) outside training


def _statistics_dtype(input, *params) -> torch.dtype:
    for param in params:
        if param is not None and param.dtype is not input.dtype:
            return torch.float32
    return input.dtype


def native_batch_norm(input, weight, bias, running_mean, running_var, training, *_):
    dtype = _statistics_dtype(input, weight, bias, running_mean, running_var)
    saved = ((input.shape[1] if training else 0,), dtype)
    return (input.shape, input.dtype), saved, saved


def native_layer_norm(input, normalized_shape, weight, bias, *_):
    axis = input.dim() - len(normalized_shape)
    statistics = ((*input.shape[:axis], *[1] * len(normalized_shape)), _statistics_dtype(input, weight, bias))
    return (input.shape, input.dtype), statistics, statistics


def native_group_norm(input, weight, bias, N, C, HxW, group, *_):
    statistics = ((N, group), _statistics_dtype(input, weight, bias))
    return (input.shape, input.dtype), statistics, statistics


# ---- pooling ---------------------------------------------------------------------------------------------
# Note [Pooling shapes without meta tensors]
# Pooling runs once per layer per step on small images, where even memoized meta inference (the key alone
# hashes every argument) costs more than the kernel. These rules compute ATen's output size directly
# (pooling_output_shape: floor or ceil division, and a ceil window must start inside the input) for the
# well-formed calls, and return None for anything else, which the caller sends to meta inference so a bad
# call fails with ATen's own message.


def _pair(values, default=None):
    if len(values) == 2:
        return values
    if len(values) == 1:
        return (values[0], values[0])
    return default


def _pooled(size, kernel, stride, pad, dilation, ceil_mode):
    out = (size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def max_pool2d_size(self, kernel_size, stride, padding, dilation, ceil_mode):
    """The output shape of max_pool2d_with_indices / avg_pool2d, or None (see the Note above)."""
    kernel, pad, dil = _pair(kernel_size), _pair(padding), _pair(dilation, (1, 1))
    step = _pair(stride) if len(stride) else kernel
    if kernel is None or pad is None or dil is None or step is None or self.dim() not in (3, 4):
        return None
    height, width = self.shape[-2:]
    if min(kernel) <= 0 or min(step) <= 0 or min(dil) <= 0 or min(pad) < 0 or \
            pad[0] * 2 > kernel[0] or pad[1] * 2 > kernel[1]:
        return None
    out_h = _pooled(height, kernel[0], step[0], pad[0], dil[0], ceil_mode)
    out_w = _pooled(width, kernel[1], step[1], pad[1], dil[1], ceil_mode)
    if out_h <= 0 or out_w <= 0 or 0 in self.shape[-3:]:
        return None
    return (*self.shape[:-2], out_h, out_w)


def adaptive_pool2d_size(self, output_size):
    """The output shape of adaptive pooling to ``output_size``, or None (see the Note above)."""
    if len(output_size) != 2 or self.dim() not in (3, 4) or 0 in self.shape[-3:] or min(output_size) < 0:
        return None
    return (*self.shape[:-2], *output_size)
