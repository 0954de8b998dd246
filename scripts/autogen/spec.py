"""Read diopi_functions.yaml into :class:`Entry` objects, rejecting anything suspicious.

Every error names ``<file>:<line>`` and the entry, and its text is asserted by
tests/test_autogen.py: the messages are part of the interface. The schemas
come from schemas.py, the ``interface:`` calls are parsed by calls.py, the
shape rules are the table of shape_rules.py.
"""

from __future__ import annotations

from typing import NoReturn
import ast
import contextlib
import functools
import re
from pathlib import Path

import torch
import yaml
from torchgen.model import FunctionSchema, SchemaKind

from . import calls, schemas
from .model import Entry, SpecError, Strides, StrideRule, Variant, op_name
from .proto import DIPU_DIR
from .shape_rules import META, SHAPE_RULES

# Note [The op spec is package data]
# An installed dipu generates its kernels for any torch of the supported range, so everything generation
# reads must be installed with it: the generator's modules and templates are the dipugen package, the proto
# and the impl kernels' modules are dipu's (found where dipu is, DIPU_DIR), and the op spec ships inside
# dipugen. It is edited at the repository root, where it is reviewed beside the code; the package holds it
# through a symbolic link (scripts/autogen/diopi_functions.yaml), which building a wheel replaces by the
# file itself. So a checkout, an editable install and a wheel all read it as SPEC.
SPEC = Path(__file__).parent / "diopi_functions.yaml"

__all__ = ["SpecError", "Unmatched", "load", "load_lenient", "SPEC"]


# ---- the YAML file --------------------------------------------------------------------------


class _EntryReader:
    """Pops the keys of one YAML mapping, checking each one's type."""

    def __init__(self, data: dict, where: str):
        self.data = dict(data)
        self.where = where

    def fail(self, message: str) -> NoReturn:
        raise SpecError(f"{self.where}: {message}")

    def pop(self, key: str, types: type | tuple, default=None, required: bool = False):
        if key not in self.data:
            if required:
                self.fail(f"missing required key '{key}'")
            return default
        value = self.data.pop(key)
        if not isinstance(value, types):
            expected = {str: "a string", bool: "a bool", list: "a list", (str, dict): "a string or a mapping"}[types]
            self.fail(f"'{key}' must be {expected}, got {type(value).__name__}")
        return value

    def finish(self, allowed: tuple[str, ...]) -> None:
        for key in self.data:
            self.fail(f"unknown key '{key}' (allowed: {', '.join(sorted(allowed))})")

    @contextlib.contextmanager
    def calls(self):
        """Errors of the call language (calls.py) as errors of this entry."""
        try:
            yield
        except calls.CallError as error:
            self.fail(str(error))


_KEYS = ("op", "torch", "interface", "scalar_interface", "returns", "writes", "unused", "shape", "strides", "impl",
         "calls", "variants", "autocompare", "fallback", "register")


_NODE_KINDS = {yaml.ScalarNode: "a scalar", yaml.SequenceNode: "a list", yaml.MappingNode: "a mapping"}


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SpecError(f"{path}: cannot read the op spec: {error.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise SpecError(f"{path.name}:{line}: not UTF-8: byte {data[error.start]:#04x} cannot be decoded") from None


def _compose(text: str, filename: str) -> yaml.Node | None:
    """The YAML node tree; syntax errors name the file and line (PyYAML names "<unicode string>")."""
    try:
        return yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else 1
        message = " ".join(part for part in (error.context, error.problem) if part)
        if error.context_mark is not None and error.problem_mark is not None \
                and error.context_mark.line != error.problem_mark.line:
            message = f"{error.problem} ({error.context} at line {error.context_mark.line + 1})"
        raise SpecError(f"{filename}:{line}: invalid YAML: {message}") from None
    except yaml.YAMLError as error:
        raise SpecError(f"{filename}:1: invalid YAML: {error}") from None


def _check_unique_keys(node: yaml.Node, filename: str) -> None:
    """PyYAML keeps the last of two equal keys; a second ``interface:`` would silently win."""
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_unique_keys(item, filename)
    elif isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if key.value in first:
                    raise SpecError(f"{filename}:{line}: duplicate key '{key.value}' "
                                    f"(first at line {first[key.value]})")
                first[key.value] = line
            _check_unique_keys(value, filename)


try:
    from yaml import CSafeLoader as _SafeLoader  # libyaml's, where PyYAML was built with it
except ImportError:
    from yaml import SafeLoader as _SafeLoader


class _Loader(_SafeLoader):
    pass


class Unmatched(SpecError):
    """An entry the installed torch's schema does not fit (Note [The spec follows the installed torch])."""


def load(path: Path) -> list[Entry]:
    """The entries of the spec at ``path`` that apply to the installed torch; any problem is a
    :class:`SpecError` naming ``<file>:<line>``."""
    return _load(path, strict=True)[0]


def load_lenient(path: Path) -> tuple[list[Entry], dict[str, str]]:
    """Like :func:`load`, but an entry the installed torch's schema does not fit is left out and
    reported (op name -> why) instead of failing the whole spec."""
    return _load(path, strict=False)


def _load(path: Path, strict: bool) -> tuple[list[Entry], dict[str, str]]:
    filename = path.name
    root = _compose(_read_text(path), filename)
    if not isinstance(root, yaml.SequenceNode):
        line = root.start_mark.line + 1 if root is not None else 1
        raise SpecError(f"{filename}:{line}: expected a list of entries (mappings)")
    _check_unique_keys(root, filename)
    constructor = yaml.SafeLoader("")
    entries, unmatched = [], {}
    first_line: dict[str, int] = {}
    for node in root.value:
        line = node.start_mark.line + 1
        if not isinstance(node, yaml.MappingNode):
            raise SpecError(f"{filename}:{line}: expected an entry (a mapping of op, interface, ...), "
                            f"got {_NODE_KINDS.get(type(node), 'something else')}")
        try:
            item = constructor.construct_document(node)
        except yaml.MarkedYAMLError as error:  # e.g. an unknown tag
            mark = error.problem_mark or error.context_mark
            raise SpecError(f"{filename}:{mark.line + 1 if mark else line}: invalid YAML: {error.problem}") from None
        try:
            entry = _read_entry(item, filename, line)
        except Unmatched as error:
            if strict:
                raise
            unmatched[item["op"]] = str(error)
            continue
        if entry is None:  # its torch range excludes the installed torch
            continue
        if entry.name in first_line:
            raise SpecError(f"{filename}:{line}: {entry.name}: duplicate entry (first at line {first_line[entry.name]}"
                            f"; entries for one op need torch ranges that do not overlap)")
        first_line[entry.name] = line
        entries.append(entry)
    return entries, unmatched


# Note [The spec follows the installed torch]
# An entry names its op (``op: add.out``); the schema, its argument names and defaults come from the
# installed torch, never from the spec. An entry fits that schema when every name its interface uses is
# an argument of the right kind for the proto parameter, and every argument is accounted for: passed,
# an output, or listed under ``unused``. So an argument torch adds or renames is never silently dropped
# or bound to the wrong parameter: the entry does not fit, and its op is not registered (it runs through
# the CPU fallback) and is reported. Where torch renamed an argument, two entries with ``torch:`` ranges
# say per version what to pass (op-plugin style).
_OP_NAME = re.compile(r"[A-Za-z_]\w*(\.\w+)?")
_RANGE_CLAUSE = re.compile(r"\s*(>=|<=|==|!=|<|>)\s*(\d+(\.\d+)*)\s*")
_COMPARE = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b,
            "!=": lambda a, b: a != b, "<": lambda a, b: a < b, ">": lambda a, b: a > b}


def _in_range(reader: _EntryReader, text: str) -> bool:
    """Whether the installed torch is in ``text``, comma-separated clauses like ``>=2.14, <2.16``."""
    version = schemas.installed_torch()
    result = True
    for clause in text.split(","):
        match = _RANGE_CLAUSE.fullmatch(clause)
        if match is None:
            reader.fail(f"'torch' must be version clauses like '>=2.14' or '>=2.13, <2.15', got {text!r}")
        bound = tuple(int(part) for part in match.group(2).split("."))
        width = max(len(bound), 3)
        result &= _COMPARE[match.group(1)](version[:width] + (0,) * (width - len(version)),
                                           bound + (0,) * (width - len(bound)))
    return result


def _read_entry(item: dict, filename: str, line: int) -> Entry | None:
    reader = _EntryReader(item, f"{filename}:{line}")
    name = reader.pop("op", str, required=True)
    if not _OP_NAME.fullmatch(name):
        reader.fail(f"'op' must name an aten op and its overload, like add.out or relu, got {name!r}")
    reader.where = f"{filename}:{line}: {name}"
    torch_range = reader.pop("torch", str)
    interface_text = reader.pop("interface", str, required=True)
    scalar_text = reader.pop("scalar_interface", str)
    returns = reader.pop("returns", list)
    writes = tuple(reader.pop("writes", list, []))
    unused = reader.pop("unused", list, [])
    shape = reader.pop("shape", str, META)
    strides = reader.pop("strides", (str, dict))
    impl = reader.pop("impl", str)
    called = reader.pop("calls", list, [])
    variants = reader.pop("variants", list)
    autocompare = reader.pop("autocompare", bool, True)
    fallback = reader.pop("fallback", bool, True)
    register = reader.pop("register", bool, True)
    reader.finish(_KEYS)
    if shape != META and shape not in SHAPE_RULES:
        reader.fail(f"unknown shape rule '{shape}' (known: {META}, {', '.join(sorted(SHAPE_RULES))})")
    with reader.calls():  # what does not depend on the installed torch fails for every torch
        if impl is not None:
            _check_impl(reader, impl)
            calls.bare_function(interface_text)
            if scalar_text is not None:
                reader.fail("scalar_interface cannot be combined with impl")
            functions = tuple(_called_function(reader, function) for function in called)
        else:
            if called:
                reader.fail("'calls' names the further DIOPI functions of an impl kernel: it needs impl")
            functions = ()
            for key, text in (("interface", interface_text), ("scalar_interface", scalar_text)):
                if text is not None:
                    calls.syntax(key, text)
    if torch_range is not None and not _in_range(reader, torch_range):
        return None
    try:
        return _fit(reader, line, name, interface_text, scalar_text, functions, returns, writes, unused,
                    shape, strides, impl, variants, autocompare, fallback, register)
    except SpecError as error:
        raise Unmatched(str(error)) from None


def _called_function(reader: _EntryReader, name) -> calls.Function:
    if not isinstance(name, str):
        reader.fail(f"'calls' must list DIOPI function names, got {name!r}")
    return calls.function("calls", name)


def _fit(reader: _EntryReader, line, name, interface_text, scalar_text, functions, returns, writes, unused, shape,
         strides, impl, variants, autocompare, fallback, register) -> Entry:
    """The entry bound to the installed torch's schema of its op; see Note [The spec follows the installed torch]."""
    schema = schemas.installed_schema(name)
    if schema is None:
        reader.fail(f"aten::{name} does not exist in the installed torch {torch.__version__}")
    if Variant.of(schema) is None:
        reader.fail(f"{schema} is a {schema.kind().name} schema: dipu generates out=, functional and in-place "
                    "kernels only")
    outputs = _output_names(reader, schema, returns)
    arguments = {a.name for a in schema.arguments.flat_all}
    for listed, key in ((writes, "writes"), (unused, "unused")):
        for argument in listed:
            if argument not in arguments:
                reader.fail(f"'{key}' names {argument!r}, which is not an argument of {schema}")
    with reader.calls():
        if impl is not None:
            function = calls.bare_function(interface_text)
            interface = scalar = None
            used = arguments
        else:
            interface = calls.parse("interface", interface_text, schema, outputs, writes)
            function = interface.function
            scalar = None if scalar_text is None else calls.parse(
                "scalar_interface", scalar_text, schema, outputs, writes, numbers_allowed=True)
            used = {a.name for call in (interface, scalar) if call is not None for a in call.args} | set(outputs)
    if impl is not None:
        _check_impl_parameters(reader, impl, functions, schema)
    missing = [a.name for a in schema.arguments.flat_all if a.name not in used and a.name not in unused]
    if missing:
        them = "it" if len(missing) == 1 else "them"
        reader.fail(f"{function.name} is not passed {', '.join(repr(m) for m in missing)} of {schema}: pass "
                    f"{them}, or list {them} under 'unused' if the call does not need {them}")
    for argument in unused:
        if argument in used:
            reader.fail(f"'unused' names {argument!r}, which the interface passes")
    chosen = _variants(reader, schema, variants, impl)
    return Entry(
        line=line, schema=schema, interface=interface, function=function, scalar_interface=scalar,
        calls=functions, outputs=outputs, writes=writes, shape=SHAPE_RULES.get(shape),
        strides=_strides(reader, schema, strides, chosen), impl=impl, variants=chosen,
        autocompare=autocompare, fallback=fallback, register=register)


def _output_names(reader: _EntryReader, schema: FunctionSchema, returns: list | None) -> tuple[str, ...]:
    kind = schema.kind()
    if kind == SchemaKind.out:
        names = tuple(a.name for a in schema.arguments.out)
    elif kind == SchemaKind.inplace:
        names = (schema.arguments.self_arg.argument.name,)
    elif any(r.name for r in schema.returns):
        names = tuple(r.name for r in schema.returns)
    else:
        names = ("out",) if len(schema.returns) == 1 else tuple(f"out{i}" for i in range(len(schema.returns)))
    if returns is None:
        return names
    if kind != SchemaKind.functional:
        reader.fail("'returns' names the outputs of a functional schema only")
    if len(returns) != len(schema.returns) or not all(isinstance(r, str) and r.isidentifier() for r in returns):
        reader.fail(f"'returns' must list {len(schema.returns)} identifiers, one per returned tensor")
    return tuple(returns)


def _variants(reader: _EntryReader, schema: FunctionSchema, requested: list | None,
              impl: str | None) -> tuple[Variant, ...]:
    if schema.kind() != SchemaKind.out or impl is not None:
        if requested is not None:
            reader.fail("'variants' applies to out= schemas without impl only")
        own = Variant.of(schema)
        assert own is not None, "_fit refuses the schemas that are no variant"
        return (own,)
    available = schemas.siblings(schema)
    if len(schema.arguments.out) != 1:
        available.pop(Variant.INPLACE, None)
    if requested is None:
        return tuple(variant for variant in Variant if variant in available)
    known = {variant.value: variant for variant in Variant}
    for kind in requested:
        if kind not in known:
            reader.fail(f"unknown variant {kind!r} (known: {', '.join(known)})")
        if known[kind] not in available:
            reader.fail(f"no {kind} variant of {op_name(schema)} in the installed torch")
    return tuple(variant for variant in Variant if variant.value in requested)


_STRIDES_FORMS = "'contiguous' or {format_of: <tensor argument>}"


def _strides(reader: _EntryReader, schema: FunctionSchema, value, variants: tuple[Variant, ...]) -> Strides | None:
    """The spec's ``strides:`` (Note [Output strides] in dipu/ops/meta_rules.py): it describes the outputs the
    entry's functional kernel allocates."""
    if value is None:
        return None
    if Variant.FUNCTIONAL not in variants:
        reader.fail("'strides' describes the outputs of a functional kernel, which this entry does not generate")
    if value == "contiguous":
        return Strides(StrideRule.CONTIGUOUS)
    if isinstance(value, dict) and list(value) == ["format_of"]:
        argument = value["format_of"]
        tensors = [a.name for a in schema.arguments.flat_non_out if a.type.is_tensor_like()]
        if argument not in tensors:
            reader.fail(f"'strides' format_of names {argument!r}, which is not a tensor argument of {schema}")
        return Strides(StrideRule.FORMAT_OF, argument)
    raise SpecError(f"{reader.where}: 'strides' must be {_STRIDES_FORMS}, got {value!r}")


# ---- impl kernels: named Python functions of this repository ----------------------------------------------


@functools.cache
def _top_level_function_nodes(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    return {node.name: node for node in tree.body
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}


def _impl_path(dotted: str) -> tuple[Path, str]:
    module, _, function = dotted.rpartition(".")
    parts = module.split(".")
    return DIPU_DIR.parent / Path(*parts).with_suffix(".py"), function


def _check_impl(reader: _EntryReader, dotted: str) -> None:
    path, function = _impl_path(dotted)
    if "." not in dotted or not path.is_file() or function not in _top_level_function_nodes(path):
        reader.fail(f"impl '{dotted}' names no function (expected a function in a module of this repository)")


def _check_impl_parameters(reader: _EntryReader, dotted: str, functions: tuple[calls.Function, ...],
                           schema: FunctionSchema) -> None:
    """An impl is called as ``impl(diopi, *called, ctx, *inputs)``: the entry's function, those ``calls:``
    names (any parameter names), then the schema's inputs in order, by name; any extra ones need defaults."""
    path, function = _impl_path(dotted)
    node = _top_level_function_nodes(path)[function]
    params = [a.arg for a in node.args.args]
    inputs = ["diopi", *(f.name for f in functions), "ctx", *(a.name for a in schema.arguments.flat_non_out)]
    named = [p if not 0 < i <= len(functions) else inputs[i] for i, p in enumerate(params)]
    required = len(params) - len(node.args.defaults)
    if named[:len(inputs)] != inputs or required > len(inputs) or node.args.vararg is not None:
        reader.fail(f"impl '{dotted}' takes ({', '.join(params)}), but is called with ({', '.join(inputs)})")
