"""``DIPU_MOCK_CUDA=1``: unmodified CUDA scripts run on dipu (DIPU's switch; off by default).

Note [Mock CUDA]
A script written for CUDA names the device in four ways, and each is redirected to dipu:
- device arguments (``device="cuda"``, ``"cuda:1"``, ``torch.device("cuda")``, ``.to("cuda")``,
  ``.cuda()``, and so ``Module.cuda()``/``Module.to("cuda")``, which call those tensor methods):
  a torch function mode, entered once for the importing thread the way ``torch.set_default_device``
  enters its ``DeviceContext``, rewrites a cuda device in any call's ``device`` keyword, in the
  positional device of ``Tensor.to``/``Tensor.new_*``-style calls, and turns ``Tensor.cuda(i)`` into
  ``Tensor.to("dipu:i")``. ``torch.device("cuda")`` itself still is a cuda device object: only its
  use in a call is redirected.
- ``torch.cuda.*``: every public name that ``torch.dipu`` also defines is set on ``torch.cuda``
  (``is_available``, ``device_count``, ``synchronize``, ``Stream``, ``Event``, ``stream``,
  ``manual_seed``, ``memory_allocated``, ...), so the dipu device module answers.
- ``torch.autocast("cuda")``, ``torch.amp.autocast("cuda")``, ``torch.cuda.amp.autocast()`` and
  ``torch.amp.GradScaler("cuda")``/``torch.cuda.amp.GradScaler()``: the device type is mapped.
- device arguments of those ``torch.cuda`` functions and classes (``set_device``, ``device``, ``Stream``,
  ``memory_allocated``, ``get_device_capability``, ...): they parse their device with dipu's
  ``_get_device_index``, which the mock tells to take device type ``"cuda"`` as dipu, so
  ``torch.device("cuda:1")``, ``"cuda"`` and indices work in every one of them, present and future, as
  in torch.cuda.
- ``nn.DataParallel`` is refused at construction with a message: torch's scatter/gather/broadcast
  (``torch._C._scatter`` and siblings) exist only in a CUDA build and only for CUDA tensors.
- ``Tensor.is_cuda`` answers True for dipu tensors (``x.device.type`` stays ``"dipu"``).
- ``torch.distributed``: the backend name ``"nccl"`` means dipu's ``"dicl"`` in ``init_process_group``,
  ``new_group`` (and so ``new_subgroups``) and ``init_device_mesh``'s ``backend_override``, also inside
  a per-device spec (``"cpu:gloo,cuda:nccl"`` -> ``"cpu:gloo,dipu:dicl"``); ``device_id=`` and
  ``init_device_mesh("cuda", ...)`` name dipu; ``is_nccl_available()`` answers True. What a group
  reports stays dipu's: ``dist.get_backend()`` is ``"dicl"``.
Torch function modes are per thread: tensors a script creates with ``device="cuda"`` in a thread
other than the one that imported dipu are not redirected.
"""

from __future__ import annotations

import functools
import inspect
import os

import torch
from torch.overrides import TorchFunctionMode

from dipu.device._devices import _accept_device_type

_CUDA = "cuda"
_TYPE = "dipu"
VARIABLE = "DIPU_MOCK_CUDA"

#: torch.distributed backend names a CUDA script uses, and dipu's backend for each (dipu/distributed.py).
DISTRIBUTED_BACKEND_ALIASES: dict[str, str] = {"nccl": "dicl"}


#: DIPU_MOCK_CUDA's spellings (case-insensitive): DIPU's own scripts write True/False, ours 1/0.
_SWITCH_VALUES = {"": False, "0": False, "false": False, "1": True, "true": True}


def requested() -> bool:
    """Whether ``DIPU_MOCK_CUDA`` asks for the mock (``1``/``true``); anything but 0/1/true/false/empty is an error."""
    text = os.environ.get(VARIABLE, "").strip()
    if text.lower() not in _SWITCH_VALUES:
        raise ValueError(f"{VARIABLE}={text!r} must be 0 or False (off, the default) or 1 or True "
                         "(cuda spellings mean dipu)")
    return _SWITCH_VALUES[text.lower()]


def to_dipu(device):
    """``device`` with a cuda device type replaced by dipu (same index); anything else unchanged."""
    if isinstance(device, str):
        if device == _CUDA or device.startswith(_CUDA + ":"):
            return _TYPE + device[len(_CUDA):]
        return device
    if isinstance(device, torch.device) and device.type == _CUDA:
        return torch.device(_TYPE, device.index) if device.index is not None else torch.device(_TYPE)
    return device


def to_dipu_backend(backend):
    """A torch.distributed backend spec with CUDA's names replaced by dipu's: ``"nccl"`` -> ``"dicl"``,
    ``"cpu:gloo,cuda:nccl"`` -> ``"cpu:gloo,dipu:dicl"``; anything else (None, gloo, Backend options) unchanged."""
    if not isinstance(backend, str):
        return backend
    parts = []
    for part in backend.split(","):
        device, colon, name = part.strip().rpartition(":")
        parts.append(to_dipu(device) + colon + DISTRIBUTED_BACKEND_ALIASES.get(name.lower(), name))
    return ",".join(parts)


def _mapped_arguments(function, **mappers):
    """``function`` with the named arguments (positional or keyword) passed through their mappers."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def mapped(*args, **kwargs):
        bound = signature.bind_partial(*args, **kwargs)
        for name, mapper in mappers.items():
            if name in bound.arguments:
                bound.arguments[name] = mapper(bound.arguments[name])
        return function(*bound.args, **bound.kwargs)

    return mapped


def _backend_override(overrides):
    """``init_device_mesh``'s per-dimension backends: a name, (name, options) or options."""
    def mapped(backend):
        return (to_dipu_backend(backend[0]), *backend[1:]) if isinstance(backend, tuple) else to_dipu_backend(backend)

    return overrides if overrides is None else {dim: mapped(backend) for dim, backend in overrides.items()}


def _install_distributed() -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    from torch.distributed import device_mesh, distributed_c10d

    for module, name, mappers in (
        (distributed_c10d, "init_process_group", {"backend": to_dipu_backend, "device_id": to_dipu}),
        (distributed_c10d, "new_group", {"backend": to_dipu_backend, "device_id": to_dipu}),
        (device_mesh, "init_device_mesh", {"device_type": to_dipu, "backend_override": _backend_override}),
    ):
        mapped = _mapped_arguments(getattr(module, name), **mappers)
        setattr(module, name, mapped)
        if getattr(dist, name, None) is not None:
            setattr(dist, name, mapped)
    dist.is_nccl_available = distributed_c10d.is_nccl_available = lambda: True


#: Tensor methods whose first positional argument may be a device.
_POSITIONAL_DEVICE = {torch.Tensor.to, torch._C.TensorBase.to}


class CudaToDipu(TorchFunctionMode):
    """Rewrites cuda device arguments to dipu in every torch call (Note [Mock CUDA])."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.cuda, torch._C.TensorBase.cuda):
            return self._cuda(*args, **kwargs)
        if "device" in kwargs:
            kwargs = {**kwargs, "device": to_dipu(kwargs["device"])}
        if func in _POSITIONAL_DEVICE and len(args) > 1:
            args = (args[0], to_dipu(args[1]), *args[2:])
        return func(*args, **kwargs)

    @staticmethod
    def _cuda(tensor, device=None, non_blocking=False, memory_format=torch.preserve_format):
        if device is None:
            target = torch.device(_TYPE, torch.dipu.current_device())
        elif isinstance(device, int):
            target = torch.device(_TYPE, device)
        else:
            target = torch.device(to_dipu(device))
            if target.type != _TYPE:
                raise RuntimeError(f"Invalid device, must be cuda device (got {device!r})")
        return tensor.to(target, non_blocking=non_blocking, memory_format=memory_format)


def _mapped_autocast(base):
    class autocast(base):  # noqa: N801  (torch's spelling)
        __doc__ = f"{base.__doc__ or ''}\n(DIPU_MOCK_CUDA: device_type 'cuda' means dipu.)"

        def __init__(self, device_type=_CUDA, *args, **kwargs):
            super().__init__(to_dipu(device_type), *args, **kwargs)

    autocast.__qualname__ = base.__qualname__
    autocast.__module__ = base.__module__
    return autocast


def _cuda_amp_autocast(base):
    class autocast(base):  # noqa: N801  torch.cuda.amp.autocast(enabled, dtype, cache_enabled)
        def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
            super().__init__(_TYPE, enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)

    return autocast


def _mapped_grad_scaler(base, default_device=None):
    class GradScaler(base):
        def __init__(self, device=default_device or _CUDA, *args, **kwargs):
            super().__init__(to_dipu(device), *args, **kwargs)

    GradScaler.__qualname__ = base.__qualname__
    GradScaler.__module__ = base.__module__
    return GradScaler


DATA_PARALLEL_REFUSAL = (
    "torch.nn.DataParallel cannot run on dipu devices under DIPU_MOCK_CUDA: it scatters inputs, replicates the "
    "module and gathers outputs with torch._C._scatter, _broadcast_coalesced and _gather, which a CPU build of "
    "torch lacks and a CUDA build implements for CUDA tensors only. Use DistributedDataParallel "
    "(init_process_group(\"nccl\") means dipu's dicl) or leave the module unwrapped on one device.")


def _refusing_data_parallel_init(init):
    """DataParallel's ``__init__``, refusing where it would split work over devices (Note [Mock CUDA])."""
    @functools.wraps(init)
    def refusing(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.device_ids:
            raise RuntimeError(DATA_PARALLEL_REFUSAL)

    return refusing


def _is_cuda(tensor) -> bool:
    return tensor.device.type in (_CUDA, _TYPE)


_installed: CudaToDipu | None = None


def install() -> None:
    """Make cuda spellings mean dipu for the rest of the process (idempotent)."""
    global _installed
    if _installed is not None:
        return
    dipu_module = torch.dipu
    _accept_device_type(_CUDA)  # torch.cuda.set_device(torch.device("cuda:1")) and every other device argument
    for name in dir(dipu_module):
        if not name.startswith("_") and hasattr(torch.cuda, name):
            setattr(torch.cuda, name, getattr(dipu_module, name))
    # A CUDA build has already initialized nothing at import; with the mock, torch.cuda's lazy
    # initialization would start the real CUDA runtime: make it dipu's (a no-op).
    torch.cuda._lazy_init = dipu_module._lazy_init
    torch.cuda.is_initialized = dipu_module.is_initialized

    torch.autocast = torch.amp.autocast = torch.amp.autocast_mode.autocast = \
        _mapped_autocast(torch.amp.autocast_mode.autocast)
    torch.cuda.amp.autocast = _cuda_amp_autocast(torch.amp.autocast_mode.autocast)
    torch.amp.GradScaler = torch.amp.grad_scaler.GradScaler = _mapped_grad_scaler(torch.amp.grad_scaler.GradScaler)
    torch.cuda.amp.GradScaler = _mapped_grad_scaler(torch.amp.grad_scaler.GradScaler, _TYPE)

    torch.nn.DataParallel.__init__ = _refusing_data_parallel_init(torch.nn.DataParallel.__init__)
    torch.Tensor.is_cuda = property(_is_cuda, doc="True for cuda and (DIPU_MOCK_CUDA) dipu tensors.")
    _install_distributed()

    _installed = CudaToDipu()
    _installed.__enter__()  # stays entered, as torch.set_default_device's DeviceContext does


def installed() -> bool:
    """Whether the mock is on in this process."""
    return _installed is not None
