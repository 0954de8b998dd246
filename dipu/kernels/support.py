"""What generated wrappers call, and nothing else imports (see Note [Generated wrappers] in dipugen).

The fast path of a wrapper uses the names re-exported at the top (the device exchange, allocation, the
switches); the rest runs only when something is asked for (a dump, a device check) or went wrong (a
status, a Python number where the schema says Tensor).
"""

from __future__ import annotations

import sys
import threading

import torch

from dipu._core import _C
from dipu.diopi.context import Context, Status, is_host_scalar, take_last_error
from dipu.kernels import fallback
from dipu.kernels.fallback import device_of
from dipu.kernels.switches import CHECK_DEVICE, DUMP_KEY, DUMP_OFF, SYNC, dump_level, env_get

empty = _C.empty
exchange_device = _C.exchange_device
synchronize = _C.synchronize

__all__ = ["empty", "exchange_device", "synchronize", "all_contiguous", "allocate", "allocate_strided",
           "check_inplace_shape", "check_written_memory", "contexts", "empty_strided", "resize_outputs",
           "CHECK_DEVICE", "DUMP_KEY",
           "DUMP_OFF", "SYNC", "call_with_numbers", "check_device", "device_of", "dump_op_args",
           "dump_op_results", "env_get", "has_numbers", "on_failure", "raise_as_the_cpu"]

#: One context per device index, which wrappers index instead of building one per call; filled by
#: :func:`init_contexts` before kernels run.
contexts: list[Context] = []


def init_contexts() -> None:
    contexts[:] = [Context(index) for index in range(_C.device_count())]


# ---- allocation -----------------------------------------------------------------------------------



def allocate(specs, device: int) -> tuple:
    """New outputs from a shape rule's ``(shape, dtype)`` specs; ``None`` stays None (not wanted)."""
    return tuple(None if spec is None else _C.empty(list(spec[0]), spec[1], device) for spec in specs)


_devices: dict[int, torch.device] = {}


def empty_strided(shape, dtype, device: int, stride) -> torch.Tensor:
    """A new output with ``stride`` (None: contiguous; or a memory format), as a stride rule answers; see
    Note [Output strides] in dipu/ops/meta_rules.py."""
    if stride is None:
        return _C.empty(list(shape), dtype, device)
    where = _devices.get(device)
    if where is None:
        where = _devices[device] = torch.device("dipu", device)
    if isinstance(stride, torch.memory_format):
        if stride is torch.contiguous_format or len(shape) != (4 if stride is torch.channels_last else 5):
            return _C.empty(list(shape), dtype, device)
        return torch.empty(shape, dtype=dtype, device=where, memory_format=stride)
    if not _dense(shape, stride):
        return _C.empty(list(shape), dtype, device)
    return torch.empty_strided(shape, stride, dtype=dtype, device=where)


def _dense(shape, stride) -> bool:
    """Whether ``stride`` lays out ``shape`` without gaps or overlaps (a stride rule answers for the shape its
    meta kernel saw, which a named shape rule may have decided differently)."""
    if len(stride) != len(shape):
        return False
    expected = 1
    for step, size in sorted((step, size) for size, step in zip(shape, stride) if size != 1):
        if step != expected:
            return False
        expected *= size
    return True


def allocate_strided(specs, strides, device: int) -> tuple:
    """As :func:`allocate`, each output with its strides from a stride rule (None: all contiguous; outputs past
    the end of ``strides`` contiguous)."""
    if strides is None:
        return allocate(specs, device)
    strides = tuple(strides) + (None,) * (len(specs) - len(strides))
    return tuple(None if spec is None else empty_strided(spec[0], spec[1], device, stride)
                 for spec, stride in zip(specs, strides))


def all_contiguous(tensors) -> bool:
    """Whether every tensor of a Tensor[] argument is contiguous (None entries of Tensor?[] count as such)."""
    for tensor in tensors:
        if tensor is not None and not tensor.is_contiguous():
            return False
    return True


def resize_outputs(outputs, specs) -> None:
    """Resize ``out=`` tensors whose shape differs from what the op produces, as ATen does."""
    for out, spec in zip(outputs, specs):
        if out is not None and spec is not None and out.shape != spec[0]:
            out.resize_(spec[0])


def check_inplace_shape(op, self, shape) -> None:
    raise RuntimeError(
        f"{op.name}: output with shape {list(self.shape)} doesn't match the broadcast shape {list(shape)}")


# ---- dumps, checks and failures (slow paths only) ---------------------------------------------------




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
        lines = [f"[{op.wrapper_name}]:{op.name}  {op.diopi_for(dict(zip(op.arg_names, args)))}"]
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


def check_device(op, device: int, args: tuple) -> None:
    """DIPU_CHECK_TENSOR_DEVICE: every tensor argument is on dipu:<device> (0-dim CPU tensors pass)."""
    for name, tensor in _tensors(args, op.arg_names):
        if is_host_scalar(tensor):
            continue
        if tensor.device.type != "dipu" or tensor.get_device() != device:
            raise RuntimeError(f"{op.name}: argument '{name}' is on {tensor.device}, expected dipu:{device}")


def on_failure(status: int, op, args: tuple, kwargs: dict):
    """A DIOPI function did not succeed; see Note [Status codes]."""
    if status == Status.FORCE_FALLBACK:
        result = fallback.run(op.name, args, kwargs)
        if env_get(DUMP_KEY) not in DUMP_OFF:
            dump_op_results(op, result)
        return result
    text = Status(status).text if status in Status._value2member_map_ else f"unknown status {int(status)}"
    message = take_last_error()
    devices = _argument_devices(op, args)
    if len(devices) > 1:  # the caller's mistake, which no library computes with: torch's own words for it
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{devices[0]} and {devices[1]}!")
    function = op.diopi_for({**dict(zip(op.arg_names, args)), **kwargs})
    raise RuntimeError(f"{op.name}: {function} failed with {text}" + (f": {message}" if message else ""))


def _argument_devices(op, args: tuple) -> list:
    """The devices of the tensor arguments, dipu's first (as torch names a CUDA op's own device first); a host scalar
    (``is_host_scalar``) counts for none."""
    devices = {t.device for _, t in _tensors(args, op.arg_names) if not is_host_scalar(t)}
    return sorted(devices, key=lambda d: (d.type != "dipu", str(d)))


# Note [Errors of the CPU's type]
# A wrapper checks its arguments only as far as its shape rule, meta inference or ``impl:`` kernel
# needs to, and those fail in their own way: a decomposition's ``assert`` (AssertionError), an index
# out of range (IndexError), where the CPU raises ``RuntimeError: non-empty 3D or 4D (batch mode)
# tensor expected``. User code catches the CPU's types, so every wrapper's ``except`` clause hands the
# exception to :func:`raise_as_the_cpu`, which runs the op's CPU reference on host copies of the
# arguments (dipu memory is never written; dipu generators and devices become the CPU's) and, if the
# CPU rejects them too with another exception type, raises the CPU's exception, type and message. Of
# the same type, dipu's own stays (its messages name the op: ``add_.Tensor: output with shape [3]
# doesn't match the broadcast shape [2, 3]``). If the CPU accepts them, the failure is dipu's own (two
# devices mixed, out of memory, a kernel's error) and the wrapper re-raises it unchanged. Only failed calls
# pay for this: in Python 3.11 a try block costs nothing until something raises. A CPU reference that lands
# in a dipu wrapper again (it should not: every tensor and device is the CPU's) is not re-checked, so the
# check cannot recurse.

_KEPT_ERRORS = (torch.OutOfMemoryError,)
_checking = threading.local()  # .running: this thread is inside a CPU check


def _host(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu() if value.device.type == "dipu" else value
    if isinstance(value, torch.Generator):
        return None if value.device.type == "dipu" else value
    if isinstance(value, torch.device):
        return torch.device("cpu") if value.type == "dipu" else value
    if isinstance(value, (list, tuple)):
        return type(value)(_host(v) for v in value)
    return value


def raise_as_the_cpu(op, error: Exception, args: tuple, kwargs: dict) -> None:
    """Raise the CPU's exception for these arguments if the CPU rejects them with another exception type than
    ``error``'s (Note [Errors of the CPU's type]); else return, and the caller re-raises ``error``. When the CPU
    does not reject them, the failure is dipu's or the op library's own, and ``error`` gets a note naming the op
    and the DIOPI function it was in (a library's own exception says neither)."""
    if getattr(_checking, "running", False) or isinstance(error, _KEPT_ERRORS) or \
            _the_cpu_accepts(op, error, args, kwargs):
        function = op.diopi_for({**dict(zip(op.arg_names, args)), **kwargs})
        if sys.version_info >= (3, 11):  # Python 3.10 has no exception notes
            error.add_note(f"dipu: raised in the kernel of {op.name} ({op.wrapper_name}, DIOPI function "
                           f"{function})")


def _the_cpu_accepts(op, error: Exception, args: tuple, kwargs: dict) -> bool:
    """Whether the CPU runs the op on host copies of these arguments; raises its exception if it rejects them
    with another type than ``error``'s."""
    try:
        reference = fallback.cpu_reference(op.name)
        host_args, host_kwargs = _host(args), {name: _host(value) for name, value in kwargs.items()}
    except Exception:  # no CPU reference to ask: the error is dipu's
        return True
    _checking.running = True
    try:
        reference(*host_args, **host_kwargs)
    except Exception as cpu_error:
        if type(cpu_error) is not type(error):
            raise cpu_error from None
        return False
    finally:
        _checking.running = False
    return True


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


def check_written_memory(op, written: tuple, inputs: tuple, args: tuple, kwargs: dict) -> None:
    """Raise what the CPU raises when the tensors the op writes (``written``: out= or in-place self) overlap
    themselves or share memory with an input (``inputs``), before the DIOPI function computes on them; see
    Note [Overlapping memory] in dipu/csrc/overlap.cpp. ``args``/``kwargs``: the call, as the wrapper got it.
    Costs a metadata check when nothing overlaps; only an overlap runs the op on host replicas. One tensor both
    written and read (``out=x`` with input ``x``) counts too: ops that call ``at::assert_no_overlap`` (cat,
    index_select, gather, take, ...) refuse it, and only the probe tells which."""
    if _C.written_memory_overlaps(written, inputs):
        _C.overlap_probe(op.name, *fallback._numbers_as_tensors(op.name, args, kwargs))


# Note [Written lists overlapping]
# The ops that write tensor lists (the _foreach_ steps, the fused optimizers, out= lists) run on the CPU one
# element at a time, each element checked as a single in-place op checks its tensors. So the wrappers check
# element i of each written list against itself (expanded), against element i of every other list the op takes,
# and against every tensor it reads whole (a _foreach_ op's Tensor other, a fused step's lr or grad_scale): about
# as many metadata checks as elements, where every pair would be quadratic. Elements of different indices are
# not compared, as the CPU's loop does not compare them. An overlap runs the op on host replicas (Note
# [Overlapping memory] in dipu/csrc/overlap.cpp), whose error, if any, is the call's; the C++ wrappers hand such a
# call to this path (written_lists_overlap in dipu/kernels/cpp/wrapper_support.h).
def check_written_lists(op, lists: tuple, inputs: tuple, args: tuple, kwargs: dict) -> None:
    """``check_written_memory`` for the tensor lists an op writes (Note [Written lists overlapping]). A tensor read
    as itself in place (``_foreach_mul_(xs, xs)``) counts as an overlap for the probe, which the CPU allows."""
    singles = [t for t in inputs if isinstance(t, torch.Tensor)]
    others = [x for x in inputs if isinstance(x, (list, tuple))]
    for k, written in enumerate(lists):
        for i, w in enumerate(written):
            reads = [*singles, *(x[i] for x in (*lists[:k], *lists[k + 1:], *others)
                                  if i < len(x) and isinstance(x[i], torch.Tensor))]
            if _C.written_memory_overlaps((w,), tuple(reads)):
                _C.overlap_probe(op.name, *fallback._numbers_as_tensors(op.name, args, kwargs))
                return
