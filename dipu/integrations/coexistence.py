"""dipu beside torch's own accelerator in one process.

Note [CUDA backward beside dipu]
Once dipu registers PrivateUse1, PyTorch takes dipu for the process's one accelerator
(``at::getAccelerator()``), and its autograd engine looks up the stream of a graph node only for devices of
that type. A CUDA node then has no stream, and the engine stops on an internal assertion
(``opt_ready_stream && opt_parent_stream`` or ``opt_consumer_stream && opt_producer_stream``:
pytorch/pytorch#161129, whose fix was not merged). Nothing outside PyTorch's C++ can give the engine
that stream, so dipu does not try: the first CUDA backward in a process where dipu is active raises
:class:`CudaBackwardBesideDipu` instead, naming the cause and the way out (run native CUDA training in a
process without dipu; Note [Who activates dipu] in dipu_autoload.py says when plain ``import torch``
leaves dipu out). The engine object torch calls for every backward and ``torch.autograd.grad``
(``Variable._execution_engine``) is replaced by a subclass that only translates that one error: a
backward that succeeds pays one Python call, and a PyTorch that fixes the engine never meets the
translation. It is installed only where torch is built with CUDA.
"""

from __future__ import annotations

import re

import torch

#: The engine's assertion messages for a node of an accelerator that is not the process's accelerator.
_STREAM_ASSERT = re.compile(r"opt_\w+_stream && opt_\w+_stream INTERNAL ASSERT FAILED")

MESSAGE = (
    "dipu: a backward pass through CUDA tensors cannot run in a process where dipu is active: PyTorch "
    "allows one accelerator per process, takes dipu for it once dipu is registered, and its autograd engine "
    "then finds no stream for CUDA (pytorch/pytorch#161129). Train on CUDA in a process that does not "
    "activate dipu: there plain `import torch` leaves dipu out as long as torch sees a GPU and neither "
    "DIPU_VENDOR nor DIPU_MOCK_CUDA is set (or set TORCH_DEVICE_BACKEND_AUTOLOAD=0); or train on dipu "
    "(DIPU_VENDOR=cuda)."
)


class CudaBackwardBesideDipu(RuntimeError):
    """A CUDA backward in a process where dipu is active (Note [CUDA backward beside dipu])."""


def explained(error: RuntimeError) -> RuntimeError:
    """``error``, or dipu's explanation of it where it is the engine's missing-stream assertion."""
    if _STREAM_ASSERT.search(str(error)):
        return CudaBackwardBesideDipu(MESSAGE)
    return error


class _Engine(torch._C._ImperativeEngine):
    """torch's autograd engine, its missing-stream assertion explained (Note [CUDA backward beside dipu])."""

    def run_backward(self, *args, **kwargs):
        try:
            return super().run_backward(*args, **kwargs)
        except RuntimeError as error:
            replacement = explained(error)
            if replacement is error:
                raise
            raise replacement from error


def install() -> None:
    """Explain the engine's assertion at a CUDA backward from now on (idempotent)."""
    from torch.autograd.variable import Variable

    if not isinstance(Variable._execution_engine, _Engine):
        Variable._execution_engine = _Engine()


def needed() -> bool:
    """Whether this torch can run CUDA at all (a CPU build never meets the assertion)."""
    return torch.backends.cuda.is_built()
