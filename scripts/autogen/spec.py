"""Read diopi_functions.yaml into :class:`Entry` objects, rejecting anything suspicious.

Every error names ``<file>:<line>`` and the entry, and its text is asserted by
tests/test_autogen.py: the messages are part of the interface.
"""

from __future__ import annotations

import ast
import functools
import keyword
import re
from pathlib import Path

import torch
import yaml
from torchgen.model import Argument, FunctionSchema, OptionalType, SchemaKind

from . import proto
from .model import Call, CallArg, Entry, op_name

FUNCTIONS, Kind, Param = proto.FUNCTIONS, proto.Kind, proto.Param

REPO = Path(__file__).resolve().parents[2]  # the repository (the generator runs from a checkout)
DIPU_DIR = REPO / "dipu"
SHAPE_RULES_FILE = DIPU_DIR / "ops" / "shapes.py"
VARIANT_KINDS = ("out", "functional", "inplace")


class SpecError(Exception):
    pass


# ---- the installed torch's schemas ------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _installed_schema_texts() -> dict[str, str]:
    texts = {}
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith("aten::"):
            name = schema.name[6:] + (f".{schema.overload_name}" if schema.overload_name else "")
            texts[name] = str(schema)[6:]
    return texts


@functools.lru_cache(maxsize=None)
def installed_schema(name: str) -> FunctionSchema | None:
    text = _installed_schema_texts().get(name)
    try:
        return None if text is None else FunctionSchema.parse(text)
    except Exception:  # a few JIT-only schemas use types torchgen does not know; no op of ours is one
        return None


def siblings(schema: FunctionSchema) -> dict[str, FunctionSchema]:
    """The installed schemas with the same signature as ``schema``, by kind (out/functional/inplace)."""
    base = str(schema.name.name.base)
    found = {}
    for name in _installed_schema_texts():
        if name.split(".")[0] in (base, base + "_"):
            other = installed_schema(name)
            # factory siblings (arange.start_step for arange.start_out) have no tensor to dispatch on
            has_tensor = other is not None and any(a.type.is_tensor_like() for a in other.arguments.flat_all)
            if has_tensor and other.signature() == schema.signature():
                found.setdefault(other.kind().name, other)
    return found


# ---- argument kinds ------------------------------------------------------------------------

_kinds_for = proto.argument_kinds


def _literal_kinds(value) -> set[Kind]:
    if isinstance(value, bool):
        return {Kind.BOOL}
    if isinstance(value, int):
        return {Kind.INT, Kind.SCALAR, Kind.REDUCTION, Kind.FLOAT}
    if isinstance(value, float):
        return {Kind.FLOAT, Kind.SCALAR}
    if isinstance(value, str):
        return {Kind.STRING, Kind.ROUNDING_MODE}
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return {Kind.SIZE}
    return set()


def _describe_param(param: Param) -> str:
    return f"'{param.name}' ({param.kind.value}{'?' if param.optional else ''})"


# ---- the YAML file --------------------------------------------------------------------------


class _EntryReader:
    """Pops the keys of one YAML mapping, checking each one's type."""

    def __init__(self, data: dict, where: str):
        self.data = dict(data)
        self.where = where

    def fail(self, message: str):
        raise SpecError(f"{self.where}: {message}")

    def pop(self, key: str, types: type | tuple, default=None, required: bool = False):
        if key not in self.data:
            if required:
                self.fail(f"missing required key '{key}'")
            return default
        value = self.data.pop(key)
        if not isinstance(value, types):
            expected = {str: "a string", bool: "a bool", list: "a list"}[types]
            self.fail(f"'{key}' must be {expected}, got {type(value).__name__}")
        return value

    def finish(self, allowed: tuple[str, ...]) -> None:
        for key in self.data:
            self.fail(f"unknown key '{key}' (allowed: {', '.join(sorted(allowed))})")


_KEYS = ("op", "torch", "interface", "scalar_interface", "returns", "writes", "unused", "shape", "impl",
         "variants", "autocompare", "fallback", "register")


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


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):
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


def installed_torch() -> tuple[int, ...]:
    """The installed torch's release numbers (2.15.0+cu132 and 2.15.0 are both (2, 15, 0))."""
    return tuple(int(part) for part in re.match(r"\d+(\.\d+)*", torch.__version__).group(0).split("."))


def _in_range(reader: _EntryReader, text: str) -> bool:
    """Whether the installed torch is in ``text``, comma-separated clauses like ``>=2.14, <2.16``."""
    version = installed_torch()
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
    writes = reader.pop("writes", list, [])
    unused = reader.pop("unused", list, [])
    shape = reader.pop("shape", str, "meta")
    impl = reader.pop("impl", str)
    variants = reader.pop("variants", list)
    autocompare = reader.pop("autocompare", bool, True)
    fallback = reader.pop("fallback", bool, True)
    register = reader.pop("register", bool, True)
    reader.finish(_KEYS)
    if shape != "meta" and shape not in shape_rules():
        reader.fail(f"unknown shape rule '{shape}' (known: meta, {', '.join(sorted(shape_rules()))})")
    if impl is not None:  # what does not depend on the installed torch fails for every torch
        _check_impl(reader, impl)
        _bare_function(reader, interface_text)
        if scalar_text is not None:
            reader.fail("scalar_interface cannot be combined with impl")
    else:
        for key, text in (("interface", interface_text), ("scalar_interface", scalar_text)):
            if text is not None:
                _call_syntax(reader, key, text)
    if torch_range is not None and not _in_range(reader, torch_range):
        return None
    try:
        return _fit(reader, line, name, interface_text, scalar_text, returns, writes, unused, shape, impl,
                    variants, autocompare, fallback, register)
    except SpecError as error:
        raise Unmatched(str(error)) from None


def _fit(reader, line, name, interface_text, scalar_text, returns, writes, unused, shape, impl, variants,
         autocompare, fallback, register) -> Entry:
    """The entry bound to the installed torch's schema of its op; see Note [The spec follows the installed torch]."""
    schema = installed_schema(name)
    if schema is None:
        reader.fail(f"aten::{name} does not exist in the installed torch {torch.__version__}")
    outputs = _output_names(reader, schema, returns)
    arguments = {a.name for a in schema.arguments.flat_all}
    for listed, key in ((writes, "writes"), (unused, "unused")):
        for argument in listed:
            if argument not in arguments:
                reader.fail(f"'{key}' names {argument!r}, which is not an argument of {schema}")
    if impl is not None:
        function = _bare_function(reader, interface_text)
        interface = scalar = None
        _check_impl_parameters(reader, impl, schema)
        used = arguments
    else:
        interface = _parse_call(reader, "interface", interface_text, schema, outputs, writes)
        function = interface.function
        scalar = None if scalar_text is None else _parse_call(
            reader, "scalar_interface", scalar_text, schema, outputs, writes, numbers_allowed=True)
        used = {a.name for call in (interface, scalar) if call is not None for a in call.args} | set(outputs)
    missing = [a.name for a in schema.arguments.flat_all if a.name not in used and a.name not in unused]
    if missing:
        them = "it" if len(missing) == 1 else "them"
        reader.fail(f"{function.name} is not passed {', '.join(repr(m) for m in missing)} of {schema}: pass "
                    f"{them}, or list {them} under 'unused' if the call does not need {them}")
    for argument in unused:
        if argument in used:
            reader.fail(f"'unused' names {argument!r}, which the interface passes")
    return Entry(
        line=line, schema=schema, interface=interface, function=function, scalar_interface=scalar,
        outputs=outputs, writes=tuple(writes), shape=shape, impl=impl, variants=_variants(reader, schema, variants, impl),
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


def _variants(reader: _EntryReader, schema: FunctionSchema, requested: list | None, impl: str | None):
    if schema.kind() != SchemaKind.out or impl is not None:
        if requested is not None:
            reader.fail("'variants' applies to out= schemas without impl only")
        return (schema.kind().name,)
    available = siblings(schema)
    if len(schema.arguments.out) != 1:
        available.pop("inplace", None)
    chosen = tuple(kind for kind in VARIANT_KINDS if kind in available)
    if requested is None:
        return chosen
    for kind in requested:
        if kind not in VARIANT_KINDS:
            reader.fail(f"unknown variant {kind!r} (known: {', '.join(VARIANT_KINDS)})")
        if kind not in available:
            reader.fail(f"no {kind} variant of {op_name(schema)} in the installed torch")
    return tuple(kind for kind in VARIANT_KINDS if kind in requested)


# ---- interface calls ---------------------------------------------------------------------------

_CALL = re.compile(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*", re.DOTALL)


def _split_arguments(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def _function(reader: _EntryReader, key: str, name: str):
    function = FUNCTIONS.get(name)
    if function is None:
        reader.fail(f"{key}: unknown DIOPI function '{name}'")
    return function


def _bare_function(reader: _EntryReader, text: str):
    if not text.strip().isidentifier():
        reader.fail(f"with impl, interface names the DIOPI function only, got {text!r}")
    return _function(reader, "interface", text.strip())


def _call_syntax(reader: _EntryReader, key: str, text: str):
    """The DIOPI function a call names and its argument tokens, checked against the proto only."""
    match = _CALL.fullmatch(text)
    if match is None:
        reader.fail(f"{key}: expected a call like diopiAdd(ctx, out, self, other, alpha), got {text!r}")
    function = _function(reader, key, match.group(1))
    tokens = _split_arguments(match.group(2))
    names = function.param_names
    if len(tokens) != len(names):
        reader.fail(f"{key}: {function.name} takes {len(names)} arguments ({', '.join(names)}), got {len(tokens)}")
    if tokens[0] != "ctx":
        reader.fail(f"{key}: the first argument of {function.name} must be ctx, got '{tokens[0]}'")
    return function, tokens


def _parse_call(reader: _EntryReader, key: str, text: str, schema: FunctionSchema, outputs: tuple[str, ...],
                writes: list[str], numbers_allowed: bool = False) -> Call:
    function, tokens = _call_syntax(reader, key, text)
    arguments = {a.name: a for a in schema.arguments.flat_all}
    args, numbers = [], []
    for token, param in zip(tokens[1:], function.params):
        if token.isidentifier() and not keyword.iskeyword(token) or token in arguments:
            arg = _check_name(reader, key, function, param, token, arguments, (*outputs, *writes), numbers_allowed)
            if arg is not None:
                numbers.append(token)
            args.append(CallArg(token))
        else:
            args.append(CallArg(None, _check_literal(reader, key, function, param, token)))
    for output in outputs:
        if output not in tokens:
            reader.fail(f"{key}: output '{output}' is not passed to {function.name}")
    return Call(function, tuple(args), tuple(numbers))


def _check_name(reader, key, function, param: Param, token: str, arguments: dict[str, Argument],
                outputs: tuple[str, ...], numbers_allowed: bool) -> str | None:
    """Check ``token`` may be passed to ``param``; returns it when it is a Tensor passed as a number."""
    where = f"{key}: {function.name} parameter {_describe_param(param)}"
    if token in arguments:
        arg = arguments[token]
        kinds = _kinds_for(arg)
        if token in outputs:
            kinds |= {Kind.TENSOR_OUT}
        if isinstance(arg.type, OptionalType) and not param.optional:
            reader.fail(f"{where} cannot take '{token}' ({arg.type}): it may be None")
        if param.kind in kinds:
            return None
        if numbers_allowed and param.kind == Kind.SCALAR and Kind.TENSOR in kinds:
            return token
        reader.fail(f"{where} cannot take '{token}' ({arg.type})")
    if token in outputs:
        if param.kind.is_output:
            return None
        reader.fail(f"{where} cannot take '{token}' (an output)")
    reader.fail(f"{key}: '{token}' is neither an argument nor an output")


def _check_literal(reader, key, function, param: Param, token: str):
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError):
        reader.fail(f"{key}: cannot read argument {token!r} (expected a name or a literal)")
    if value is None:
        if not param.optional:
            reader.fail(f"{key}: {function.name} parameter {_describe_param(param)} cannot take None")
    elif param.kind not in _literal_kinds(value):
        reader.fail(f"{key}: {function.name} parameter {_describe_param(param)} cannot take {token}")
    return value


# ---- named logic in dipu/ops ------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _top_level_function_nodes(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}


def _top_level_functions(path: Path) -> set[str]:
    return set(_top_level_function_nodes(path))


@functools.lru_cache(maxsize=None)
def shape_rules() -> frozenset[str]:
    return frozenset(_top_level_functions(SHAPE_RULES_FILE) - {"meta"})


def _impl_path(dotted: str) -> tuple[Path, str]:
    module, _, function = dotted.rpartition(".")
    parts = module.split(".")
    if parts[0] != "dipu":
        return REPO / Path(*parts).with_suffix(".py"), function
    return DIPU_DIR / Path(*parts[1:]).with_suffix(".py"), function


def _check_impl(reader: _EntryReader, dotted: str) -> None:
    path, function = _impl_path(dotted)
    if "." not in dotted or not path.is_file() or function not in _top_level_functions(path):
        reader.fail(f"impl '{dotted}' names no function (expected a function in a module of this repository)")


def _check_impl_parameters(reader: _EntryReader, dotted: str, schema: FunctionSchema) -> None:
    """An impl is called as ``impl(diopi_function, ctx, *inputs)`` with the schema's inputs in order: its
    parameters must be those inputs by name, and any extra ones need defaults."""
    path, function = _impl_path(dotted)
    node = _top_level_function_nodes(path)[function]
    params = [a.arg for a in node.args.args]
    inputs = ["diopi", "ctx", *(a.name for a in schema.arguments.flat_non_out)]
    required = len(params) - len(node.args.defaults)
    if params[:len(inputs)] != inputs or required > len(inputs) or node.args.vararg is not None:
        reader.fail(f"impl '{dotted}' takes ({', '.join(params)}), but is called with ({', '.join(inputs)})")
