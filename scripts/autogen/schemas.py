"""The schema index: the installed torch's aten schemas, by op name, parsed by torchgen."""

from __future__ import annotations

import functools
import re

import torch
from torchgen.model import FunctionSchema

from .model import Variant


def installed_torch() -> tuple[int, ...]:
    """The installed torch's release numbers (2.15.0+cu132 and 2.15.0 are both (2, 15, 0))."""
    release = re.match(r"\d+(\.\d+)*", torch.__version__)
    if release is None:
        raise RuntimeError(f"dipugen: cannot read torch's version {torch.__version__!r}")
    return tuple(int(part) for part in release.group(0).split("."))


@functools.cache
def _installed_schema_texts() -> dict[str, str]:
    texts = {}
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith("aten::"):
            name = schema.name[6:] + (f".{schema.overload_name}" if schema.overload_name else "")
            texts[name] = str(schema)[6:]
    return texts


@functools.cache
def installed_schema(name: str) -> FunctionSchema | None:
    text = _installed_schema_texts().get(name)
    try:
        return None if text is None else FunctionSchema.parse(text)
    except Exception:  # a few JIT-only schemas use types torchgen does not know; no op of ours is one
        return None


def siblings(schema: FunctionSchema) -> dict[Variant, FunctionSchema]:
    """The installed schemas with the same signature as ``schema``, by variant (out/functional/inplace)."""
    base = str(schema.name.name.base)
    found: dict[Variant, FunctionSchema] = {}
    for name in _installed_schema_texts():
        if name.split(".")[0] in (base, base + "_"):
            other = installed_schema(name)
            if other is None:
                continue
            # factory siblings (arange.start_step for arange.start_out) have no tensor to dispatch on
            has_tensor = any(a.type.is_tensor_like() for a in other.arguments.flat_all)
            variant = Variant.of(other)
            if has_tensor and variant is not None and other.signature() == schema.signature():
                found.setdefault(variant, other)
    return found
