"""The shape-rule table: the rules ``shape:`` may name, and what the generator knows of each.

Note [Shape rules are a table] in dipu/ops/shape_rules.py: the table is the runtime module's ``RULES``, read
here from its file (a leaf module, as the proto is: Note [The generator reads the runtime's proto] in
proto.py); generated code imports each rule it uses from there by name.
"""

from __future__ import annotations

from .model import ShapeRule
from .proto import leaf

_runtime = leaf("dipu.ops.shape_rules")

#: The module generated code imports the rules from.
RUNTIME_MODULE = _runtime.__name__
#: What ``shape:`` says for the general rule, the op's meta kernel (the default).
META = "meta"

SHAPE_RULES: dict[str, ShapeRule] = {name: ShapeRule(name, elementwise=rule.elementwise)
                                     for name, rule in _runtime.RULES.items()}
#: Pointwise rules whose C++ wrapper lays out non-contiguous operands that share one layout (Rule.alike there).
ALIKE_RULES: frozenset[str] = frozenset(name for name, rule in _runtime.RULES.items() if rule.alike)
#: Rules with a C++ twin in dipu/kernels/cpp/shape_rules.h -> the outputs it fills.
CPP_RULES: dict[str, int] = {name: rule.cpp for name, rule in _runtime.RULES.items() if rule.cpp}
#: Ops whose spec takes their shapes from the meta kernel and whose C++ rule of the same name stands in for
#: it -> the outputs it fills.
CPP_META_TWINS: dict[str, int] = dict(_runtime.CPP_META_TWINS)
