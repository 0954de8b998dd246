"""Debug hooks users switch on with environment variables (DESIGN.md §6).

Note [Hooks cost nothing unless asked for]
Force fallback and autocompare are decided once, when the generated kernels
are registered: a force-fallback op is simply not registered (the core's CPU
fallback takes it) and an autocompare op is registered wrapped by
:func:`dipu.autocompare.wrap`. ``DIPU_CHECK_TENSOR_DEVICE`` and ``DIPU_SYNC_EXEC_MODE``
are read once at import into constants the wrappers test. Only
``DIPU_DUMP_OP_ARGS`` must follow changes at run time, so wrappers read it per
call straight from ``os.environ``'s underlying dict (``env_get(DUMP_KEY)``,
about 30 ns; ``os.getenv`` costs about 750 ns).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from dipu._core import _C
from dipu.diopi.runtime import Status, take_last_error

FORCE_FALLBACK_VAR = "DIPU_FORCE_FALLBACK_OPS_LIST"
FORCE_FALLBACK_CONFIG = ".dipu_force_fallback_op_list.config"
AUTOCOMPARE_VAR = "DIPU_AUTOCOMPARE_OPS_LIST"
DUMP_VAR = "DIPU_DUMP_OP_ARGS"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "off", "no")


CHECK_DEVICE = _env_flag("DIPU_CHECK_TENSOR_DEVICE")
SYNC = _env_flag("DIPU_SYNC_EXEC_MODE")

# See Note [Hooks cost nothing unless asked for].
env_get = os.environ._data.get
DUMP_KEY = os.environ.encodekey(DUMP_VAR)
DUMP_OFF = frozenset((None, os.environ.encodevalue(""), os.environ.encodevalue("0")))


DUMP_LEVELS = {"": 0, "0": 0, "1": 1, "2": 2, "3": 3}


def dump_level() -> int:
    """DIPU_DUMP_OP_ARGS: 0 off; 1 op and DIOPI function; 2 plus arguments, then results; 3 plus values."""
    text = os.environ.get(DUMP_VAR, "").strip()
    level = DUMP_LEVELS.get(text)
    if level is None:
        raise ValueError(f"{DUMP_VAR}={text!r}: expected 0 (off), 1 (op and DIOPI function), "
                         f"2 (plus arguments and results) or 3 (plus tensor values)")
    return level


dump_level()  # an invalid level fails at import, not at the first op


# ---- op name patterns -----------------------------------------------------------------------


class OpPatterns:
    """Comma-separated regexes, whitespace trimmed, each matched against the whole op name."""

    def __init__(self, texts: list[tuple[str, str]]):
        self.regexes = []
        for source, text in texts:
            for pattern in (p.strip() for p in text.split(",")):
                if not pattern:
                    continue
                try:
                    self.regexes.append(re.compile(pattern))
                except re.error as error:
                    raise ValueError(f"{source}: invalid regular expression {pattern!r}: {error}") from None

    @classmethod
    def from_env(cls, var: str, config_file: str | None = None) -> OpPatterns:
        texts = [(var, os.environ.get(var, ""))]
        if config_file is not None and Path(config_file).is_file():
            lines = Path(config_file).read_text().splitlines()
            texts += [(config_file, line) for line in lines if not line.lstrip().startswith("#")]
        return cls(texts)

    def matches(self, name: str) -> bool:
        return any(regex.fullmatch(name) for regex in self.regexes)

    def __bool__(self) -> bool:
        return bool(self.regexes)


def force_fallback_patterns() -> OpPatterns:
    return OpPatterns.from_env(FORCE_FALLBACK_VAR, FORCE_FALLBACK_CONFIG)


def autocompare_patterns() -> OpPatterns:
    return OpPatterns.from_env(AUTOCOMPARE_VAR)


# ---- called from generated wrappers (slow paths only) -------------------------------------------


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return (
            f"numel:{value.numel()}, sizes:{list(value.shape)}, stride:{list(value.stride())}, "
            f"is_view:{int(value._is_view())}, dtype={str(value.dtype).removeprefix('torch.')}, "
            f"device={value.device}, data_ptr:{hex(value.data_ptr())}"
        )
    return repr(value)


def _dump_lines(op, names: tuple[str, ...], values, level: int) -> list[str]:
    lines = []
    for name, value in zip(names, values):
        items = list(enumerate(value)) if isinstance(value, (list, tuple)) and value and \
            isinstance(value[0], torch.Tensor) else [(None, value)]
        for index, item in items:
            label = name if index is None else f"{name}[{index}]"
            lines.append(f"\t{op.name}: {label}:{_describe(item)}")
            if level >= 3 and isinstance(item, torch.Tensor):
                lines.append(f"\t{op.name}: {label}:{item.detach().cpu()}")
    return lines


def dump_op_args(op, args: tuple) -> None:
    """Print one op call before it runs (DIPU_DUMP_OP_ARGS 1: name, 2: arguments, 3: their values)."""
    level = dump_level()
    if level:
        lines = [f"[{op.wrapper_name}]:{op.name}  {op.diopi}"]
        if level >= 2:
            lines += _dump_lines(op, op.arg_names, args, level)
        print("\n".join(lines), flush=True)


def dump_op_results(op, result) -> None:
    """Print what one op call produced, after it ran (DIPU_DUMP_OP_ARGS 2: metadata, 3: values too)."""
    level = dump_level()
    if level >= 2:
        results = result if len(op.outputs) > 1 else (result,)
        print("\n".join(_dump_lines(op, op.outputs, results, level)), flush=True)


def _tensors(args: tuple, names: tuple[str, ...]):
    for name, value in zip(names, args):
        if isinstance(value, torch.Tensor):
            yield name, value
        elif isinstance(value, (list, tuple)):
            yield from ((f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, torch.Tensor))


def device_of(*args) -> int:
    """The dipu device of the first dipu tensor (when the first one is a CPU scalar)."""
    for _, tensor in _tensors(args, ("",) * len(args)):
        if tensor.device.type == "dipu":
            return tensor.get_device()
    raise RuntimeError("no dipu tensor among the arguments")


def check_device(op, device: int, args: tuple) -> None:
    """DIPU_CHECK_TENSOR_DEVICE: every tensor argument is on dipu:<device> (0-dim CPU tensors pass)."""
    for name, tensor in _tensors(args, op.arg_names):
        if tensor.device.type == "cpu" and tensor.dim() == 0:
            continue
        if tensor.device.type != "dipu" or tensor.get_device() != device:
            raise RuntimeError(f"{op.name}: argument '{name}' is on {tensor.device}, expected dipu:{device}")


def on_failure(status: int, op, args: tuple, kwargs: dict):
    """A DIOPI function did not succeed; see Note [Status codes]."""
    if status == Status.FORCE_FALLBACK:
        from dipu.ops.overrideable import CPU_SUBSTITUTES, run_on_cpu  # it imports this module

        if op.name in CPU_SUBSTITUTES:  # Note [Overrideable ops in the fallback]
            result = run_on_cpu(op.name, args, kwargs)
        else:
            result = _C.cpu_fallback(op.name, args, kwargs)
        if env_get(DUMP_KEY) not in DUMP_OFF:
            dump_op_results(op, result)
        return result
    text = Status(status).text if status in Status._value2member_map_ else f"unknown status {int(status)}"
    message = take_last_error()
    raise RuntimeError(f"{op.name}: {op.diopi} failed with {text}" + (f": {message}" if message else ""))


# Note [Python numbers in Tensor positions]
# Where a schema says Tensor, torch may hand a Python kernel a plain number: a wrapped number
# (`torch.add(2, x)`, `2 - x`, and C++ composites such as rsub calling sub(wrapped, x)). The
# shape rules and scalar_interface calls take numbers where the spec says so. Everywhere else a
# wrapper tries its tensors as they are, and only when that fails (the device lookup of its first
# Tensor argument raises AttributeError, or its body raises while a number sits in one of
# ``op.tensor_inputs``) calls itself again through :func:`call_with_numbers`, with each such
# number made a 0-dim dipu tensor. The dtype is the one the number promotes to among the op's
# tensors, as a wrapped number would (torch.add(2.5, int_tensor) is float32, not float64;
# torch.add(2, int32_tensor) is int32), so the result matches the CPU's. Tensors pay nothing:
# in Python 3.11 a try block costs no instruction until something raises.

_NUMBERS = (bool, int, float, complex)


def has_numbers(op, args: tuple) -> bool:
    """Whether a Python number stands in one of the op's Tensor inputs (``args`` in schema order)."""
    return any(isinstance(value, _NUMBERS) for name, value in zip(op.arg_names, args) if name in op.tensor_inputs)


def call_with_numbers(op, kernel, args: tuple, kwargs: dict):
    """``kernel(*args, **kwargs)`` with the numbers in Tensor inputs made 0-dim dipu tensors.

    Called from a wrapper's ``except`` clause: with no such number, the exception being handled
    goes on (see Note [Python numbers in Tensor positions]).
    """
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

    names = op.arg_names
    values = dict(zip(names, args), **kwargs)
    numbers = [n for n in names if n in op.tensor_inputs and isinstance(values[n], _NUMBERS)]
    if not numbers:
        raise  # noqa: PLE0704 -- the wrapper's exception, which has nothing to do with numbers
    tensors = [v for n, v in values.items() if isinstance(v, torch.Tensor) and n not in op.written]
    device = torch.device("dipu", device_of(*tensors))
    for name in numbers:
        dtype = elementwise_dtypes(values[name], *tensors,
                                   type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]
        values[name] = torch.tensor(values[name], dtype=dtype, device=device)
    positional = len(args)
    return kernel(*(values[n] for n in names[:positional]), **{n: values[n] for n in names[positional:]})


def print_call_info(kernel, op):
    """The generator's --print-call-info: the level-1 dump line on every call, whatever the variable."""

    def printed(*args, **kwargs):
        print(f"[{op.wrapper_name}]:{op.name}  {op.diopi}", flush=True)
        return kernel(*args, **kwargs)

    return printed
