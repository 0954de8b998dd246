"""The shape-rule table: the rules ``shape:`` may name, and what the generator knows of each.

Note [Shape rules are a table] in dipu/ops/shape_rules.py: the runtime module defines the same names
(its ``__all__``; tests/test_autogen.py checks they agree), and generated code imports each one it uses
from there by name. ``elementwise`` picks the stride rule of a functional output (Note [Output strides] in
dipu/ops/meta_rules.py).
"""

from __future__ import annotations

from .model import ShapeRule

#: The module generated code imports the rules from.
RUNTIME_MODULE = "dipu.ops.shape_rules"
#: What ``shape:`` says for the general rule, the op's meta kernel (the default).
META = "meta"

_ELEMENTWISE = ("binary", "binary_float", "compare", "divide", "ternary", "unary_bool", "unary_float",
                "unary_real", "where")
_OTHERS = (
    "addmm", "arange", "arange_end", "bmm", "broadcast_grad", "cdist_backward", "dropout", "eye",
    "fused_gru_cell", "fused_gru_cell_backward", "fused_lstm_cell", "fused_lstm_cell_backward", "like_self",
    "linspace", "max_dim", "mm", "multilabel_margin_loss", "multinomial", "native_batch_norm", "native_group_norm",
    "native_layer_norm", "randperm", "reduce_all", "reduction", "sized_float", "sum_all",
    "unary",  # shared by ops of every sort (clone, softmax, channel_shuffle): their meta kernels know the strides
)

SHAPE_RULES: dict[str, ShapeRule] = {
    **{name: ShapeRule(name, elementwise=True) for name in _ELEMENTWISE},
    **{name: ShapeRule(name) for name in _OTHERS},
}
