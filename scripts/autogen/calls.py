"""The call language of ``interface:``: ``diopiAdd(ctx, out, self, other, alpha)``, checked against the DIOPI
proto and the op's schema.

A call names a DIOPI function and passes ``ctx`` first, then one token per parameter: a schema argument, an
output name, or a Python literal (None, 1, "tanh", [1, 1]). Every token is checked against the parameter's
kind (proto.Kind): a ``Tensor?`` cannot go where the function needs a tensor, an output only where it
writes. Errors are :class:`CallError` without the entry's location, which spec.py adds.
"""

from __future__ import annotations

import ast
import keyword
import re

from torchgen.model import Argument, FunctionSchema, OptionalType

from . import proto
from .model import Call, CallArg, Function
from .proto import Kind, Param

_CALL = re.compile(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*", re.DOTALL)


class CallError(Exception):
    """A call that does not fit the proto or the schema."""


def function(key: str, name: str) -> Function:
    """The proto's function ``name``; ``key`` is the spec key naming it."""
    found = proto.FUNCTIONS.get(name)
    if found is None:
        raise CallError(f"{key}: unknown DIOPI function '{name}'")
    return found


def bare_function(text: str) -> Function:
    """The function an ``impl:`` entry's interface names (no call: the impl kernel makes it)."""
    if not text.strip().isidentifier():
        raise CallError(f"with impl, interface names the DIOPI function only, got {text!r}")
    return function("interface", text.strip())


def syntax(key: str, text: str) -> tuple[Function, list[str]]:
    """The DIOPI function a call names and its argument tokens, checked against the proto only."""
    match = _CALL.fullmatch(text)
    if match is None:
        raise CallError(f"{key}: expected a call like diopiAdd(ctx, out, self, other, alpha), got {text!r}")
    called = function(key, match.group(1))
    tokens = _split_arguments(match.group(2))
    names = called.param_names
    if len(tokens) != len(names):
        raise CallError(f"{key}: {called.name} takes {len(names)} arguments ({', '.join(names)}), got {len(tokens)}")
    if tokens[0] != "ctx":
        raise CallError(f"{key}: the first argument of {called.name} must be ctx, got '{tokens[0]}'")
    return called, tokens


def parse(key: str, text: str, schema: FunctionSchema, outputs: tuple[str, ...], writes: tuple[str, ...],
          numbers_allowed: bool = False) -> Call:
    """The call ``text`` bound to ``schema``: every token checked against its parameter. With
    ``numbers_allowed`` (a scalar_interface), a Tensor argument may go to a Scalar parameter."""
    called, tokens = syntax(key, text)
    arguments = {a.name: a for a in schema.arguments.flat_all}
    args, numbers = [], []
    for token, param in zip(tokens[1:], called.params):
        if token.isidentifier() and not keyword.iskeyword(token) or token in arguments:
            if _check_name(key, called, param, token, arguments, (*outputs, *writes), numbers_allowed):
                numbers.append(token)
            args.append(CallArg(token))
        else:
            args.append(CallArg(None, _check_literal(key, called, param, token)))
    for output in outputs:
        if output not in tokens:
            raise CallError(f"{key}: output '{output}' is not passed to {called.name}")
    return Call(called, tuple(args), tuple(numbers))


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


def _describe(param: Param) -> str:
    return f"'{param.name}' ({param.kind.value}{'?' if param.optional else ''})"


def _check_name(key, called: Function, param: Param, token: str, arguments: dict[str, Argument],
                outputs: tuple[str, ...], numbers_allowed: bool) -> bool:
    """Check ``token`` may be passed to ``param``; True when it is a Tensor passed as a number."""
    where = f"{key}: {called.name} parameter {_describe(param)}"
    if token in arguments:
        arg = arguments[token]
        kinds = proto.argument_kinds(arg)
        if token in outputs:
            kinds |= {Kind.TENSOR_OUT}
        if isinstance(arg.type, OptionalType) and not param.optional:
            raise CallError(f"{where} cannot take '{token}' ({arg.type}): it may be None")
        if param.kind in kinds:
            return False
        if numbers_allowed and param.kind == Kind.SCALAR and Kind.TENSOR in kinds:
            return True
        raise CallError(f"{where} cannot take '{token}' ({arg.type})")
    if token in outputs:
        if param.kind.is_output:
            return False
        raise CallError(f"{where} cannot take '{token}' (an output)")
    raise CallError(f"{key}: '{token}' is neither an argument nor an output")


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


def _check_literal(key, called: Function, param: Param, token: str):
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError):
        raise CallError(f"{key}: cannot read argument {token!r} (expected a name or a literal)") from None
    if value is None:
        if not param.optional:
            raise CallError(f"{key}: {called.name} parameter {_describe(param)} cannot take None")
    elif param.kind not in _literal_kinds(value):
        raise CallError(f"{key}: {called.name} parameter {_describe(param)} cannot take {token}")
    return value
