"""The schema index: the installed torch's aten schemas, by op name, parsed by torchgen."""

from __future__ import annotations

import functools
import os
import re

import torch
from torchgen.model import FunctionSchema, NativeFunction

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


@functools.cache
def _native_functions() -> tuple[dict[str, NativeFunction], frozenset[str]]:
    """The installed torch's native functions by name, from the native_functions.yaml its torchgen packages
    (the same wheel, so the same release), and the names of those whose ``dispatch:`` names Meta; empty where
    that file is missing."""
    import torchgen
    from torchgen.gen import parse_native_yaml

    native = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native")
    path, tags = os.path.join(native, "native_functions.yaml"), os.path.join(native, "tags.yaml")
    if not (os.path.exists(path) and os.path.exists(tags)):
        return {}, frozenset()
    from torchgen.model import DispatchKey

    parsed = parse_native_yaml(path, tags)
    meta = parsed.backend_indices[DispatchKey.Meta]
    return ({str(f.func.name): f for f in parsed.native_functions},
            frozenset(str(f.func.name) for f in parsed.native_functions if meta.has_kernel(f)))


def meta_function(schema: FunctionSchema) -> tuple[str, str] | None:
    """``(header, name)`` of the op's C++ meta kernel as ATen exports it, callable without the dispatcher:
    ``at::meta::<name>`` declared in ``<header>`` (Note [Meta shapes in C++] in dest/cpp_wrappers.py). Every
    structured op has one (torchgen writes the meta half of a structured kernel for the Meta key), as has an op
    whose ``dispatch:`` names Meta. None for the rest (their meta kernels are registered in Python, or are
    composite), and where the C++ function's argument types are not the dispatcher's (TensorOptions). Runs under
    the caller's ``torchgen.local.parametrize``, which sets the dispatcher types it compares."""
    from torchgen.api.types import CppSignatureGroup, DispatcherSignature

    functions, with_meta = _native_functions()
    found = functions.get(str(schema.name))
    if found is None:
        return None
    if not (found.structured or found.structured_delegate is not None or str(schema.name) in with_meta):
        return None
    group = CppSignatureGroup.from_native_function(found, method=False)
    signature = group.symint_signature if found.func.has_symint() and group.symint_signature else group.signature
    wanted = [binding.type for binding in DispatcherSignature.from_schema(schema).arguments()]
    if [binding.type for binding in signature.arguments()] != wanted:
        return None
    return f"ATen/ops/{found.root_name}_meta_dispatch.h", signature.name()
