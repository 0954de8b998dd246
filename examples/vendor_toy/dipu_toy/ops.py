"""The toy vendor's DIOPI op library: five functions, written the way a vendor writes kernels.

Note [How a toy kernel reaches device memory]
What a kernel receives for a tensor on the device is a dipu tensor whose ``data_ptr()`` is the vendor's
own device address (what ``ToyRuntime.malloc`` returned, plus the storage offset in bytes): the host
cannot dereference it. A kernel asks its runtime where those bytes lie (``ToyRuntime.host_address``,
checked against the live allocation) and views them with the tensor's sizes and strides, which are in
elements and may be anything: transposed, sliced, broadcast (stride 0). The toy device's "compute unit"
is the host CPU working on those views; a real vendor launches its kernel on the address instead.
- Outputs are preallocated by dipu with the op's shape and dtype; they may be strided, and may be the
  very tensor an input is (``x.add_(y)`` is ``diopiAdd(out=x, input=x, other=y)``), so every kernel
  reads all of its inputs before it writes.
- A 0-dim CPU tensor (``x * torch.tensor(2.0)``, a wrapped number) arrives as a CPU tensor, and Scalar
  parameters (``alpha``, ``threshold``) as Python numbers: they are used as they are.
- Each function declares its dtypes (Note [Declared dtypes] in dipu/diopi/library.py): dipu runs the
  others through its CPU fallback, and the conformance suite skips their cases.
``diopiAddmm`` is left out on purpose: ``addmm.out`` (nn.Linear) runs on the CPU fallback, which
``dipu.fallback_counts()`` and the report show (docs/bring-up.md).

Environment: ``DIPU_TOY_WRONG=diopiMul`` (comma-separated DIOPI names) plants a 1% error in those functions'
results, to see autocompare name a wrong kernel (docs/bring-up.md).
"""

from __future__ import annotations

import os

import torch

from dipu.diopi import SUCCESS, OpLibrary, Status, set_last_error
from dipu_toy.runtime import ToyRuntime

#: The library computes on the toy vendor's memory only: tests/test_conformance.py runs it there alone.
library = OpLibrary("toy", vendor="toy")

FLOATS = (torch.float32, torch.float64)
WRONG_VAR = "DIPU_TOY_WRONG"
_arena_bytes: dict[int, torch.Tensor] = {}  # device index -> its whole arena as a CPU uint8 tensor


def device_view(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over the arena bytes of a toy tensor (Note [How a toy kernel reaches device memory])."""
    if tensor.device.type == "cpu":
        return tensor  # a 0-dim CPU tensor: an argument like a number
    if tensor.numel() == 0:
        return torch.empty(tensor.shape, dtype=tensor.dtype)  # no bytes to reach (its address may be 0)
    runtime = ToyRuntime.active
    if runtime is None:
        raise RuntimeError("the toy op library computes on the toy vendor's memory only (DIPU_VENDOR=toy)")
    elements = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    nbytes = elements * tensor.element_size()
    index = tensor.get_device()
    start = runtime.host_address(index, tensor.data_ptr(), nbytes) - runtime.arenas[index].host_base
    arena = _arena_bytes.get(index)
    if arena is None:
        arena = _arena_bytes[index] = torch.frombuffer(runtime.arenas[index].memory, dtype=torch.uint8)
    return arena[start:start + nbytes].view(tensor.dtype).as_strided(tensor.shape, tensor.stride())


def write(out: torch.Tensor, result: torch.Tensor, function: str) -> Status:
    """Store a kernel's ``result`` into the preallocated (maybe strided, maybe aliased) ``out``."""
    if function in WRONG:
        result = result * 1.01  # the planted error: 1% off
    device_view(out).copy_(result)
    return SUCCESS


@library.register(dtypes=FLOATS)
def diopiAdd(ctx, out, input, other, alpha):
    return write(out, torch.add(device_view(input), device_view(other), alpha=alpha), "diopiAdd")


@library.register(dtypes=FLOATS)
def diopiMul(ctx, out, input, other):
    return write(out, torch.mul(device_view(input), device_view(other)), "diopiMul")


@library.register(dtypes=FLOATS)
def diopiMm(ctx, out, input, mat2):
    if input.dim() != 2 or mat2.dim() != 2 or input.shape[1] != mat2.shape[0]:
        set_last_error(f"diopiMm: input is {'x'.join(map(str, input.shape))}, "
                       f"mat2 is {'x'.join(map(str, mat2.shape))}")
        return Status.ERROR_OCCURRED
    return write(out, torch.mm(device_view(input), device_view(mat2)), "diopiMm")


@library.register(dtypes=FLOATS)
def diopiRelu(ctx, out, input):
    return write(out, torch.relu(device_view(input)), "diopiRelu")


@library.register(dtypes=FLOATS)
def diopiThresholdBackward(ctx, grad_input, grad_output, input, threshold):
    grad, x = device_view(grad_output), device_view(input)
    return write(grad_input, torch.where(x > threshold, grad, torch.zeros((), dtype=grad.dtype)),
                 "diopiThresholdBackward")


def _wrong_functions() -> frozenset[str]:
    names = frozenset(n.strip() for n in os.environ.get(WRONG_VAR, "").split(",") if n.strip())
    unknown = sorted(names - set(library.functions))
    if unknown:
        raise ValueError(f"{WRONG_VAR}={os.environ[WRONG_VAR]!r}: {', '.join(unknown)} is not a function of the "
                         f"toy op library ({', '.join(sorted(library.functions))})")
    return names


WRONG = _wrong_functions()
