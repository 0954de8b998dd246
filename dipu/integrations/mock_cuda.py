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
  ``torch.amp.GradScaler("cuda")``/``torch.cuda.amp.GradScaler()``: the device type is mapped; so is the
  autocast state's ("cuda" or no device, CUDA's default, in ``torch.is_autocast_enabled``/``get_autocast_dtype``).
- device arguments of those ``torch.cuda`` functions and classes (``set_device``, ``device``, ``Stream``,
  ``memory_allocated``, ``get_device_capability``, ...): they parse their device with dipu's
  ``_get_device_index``, which the mock tells to take device type ``"cuda"`` as dipu, so
  ``torch.device("cuda:1")``, ``"cuda"`` and indices work in every one of them, present and future, as
  in torch.cuda.
- ``nn.DataParallel`` splits its work over dipu devices (Note [DataParallel over dipu devices]).
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

from dipu import device as torch_dipu  # the module torch.dipu is (dipu/__init__.py registers it)
from dipu.device._devices import _accept_device_type

_CUDA = "cuda"
_TYPE = "dipu"
VARIABLE = "DIPU_MOCK_CUDA"

#: torch.distributed backend names a CUDA script uses, and dipu's backend for each (dipu/distributed/process_group.py).
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
            target = torch.device(_TYPE, torch_dipu.current_device())
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


def _autocast_state(query):
    """``torch.is_autocast_enabled``/``get_autocast_dtype`` with "cuda", and no device (which means CUDA), as dipu."""
    @functools.wraps(query)
    def mapped(device_type=_CUDA):
        return query(to_dipu(device_type))

    return mapped


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


def _dipu_device(device) -> torch.device:
    """A device of ``torch.nn.parallel.comm``'s arguments (index, -1 for the CPU, None for the current one) as
    dipu's."""
    if device is None:
        return torch.device(_TYPE, torch_dipu.current_device())
    if isinstance(device, int):
        return torch.device("cpu") if device < 0 else torch.device(_TYPE, device)
    return torch.device(to_dipu(device))


# Note [DataParallel over dipu devices]
# nn.DataParallel does its work in torch.nn.parallel.comm, whose scatter, gather and broadcast call
# torch._C._scatter, _gather and _broadcast_coalesced: a CUDA build has them for CUDA tensors only, a CPU
# build not at all. What they compute is plain copies, so under the mock they are tensor copies between
# dipu devices (the comm functions' contracts: a tuple per call, gather's -1 meaning the CPU). The rest of
# DataParallel (replicate, parallel_apply on torch.accelerator's streams, reduce_add) already goes
# through dipu; only its source device, named "cuda" because torch.cuda.is_available(), is renamed. On
# a CUDA build, reduce_add asks torch.cuda.nccl.is_available(), which sees the mock's is_cuda on dipu
# tensors and would hand them to NCCL: it answers False for dipu tensors, so the sum is dipu's adds.
def _broadcast_coalesced(tensors, devices, buffer_size=10485760):
    return [[tensor.to(_dipu_device(device)) for tensor in tensors] for device in devices]


def _scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    if out is not None:
        raise NotImplementedError("torch.nn.parallel.comm.scatter(out=...) is not mapped to dipu (DIPU_MOCK_CUDA)")
    if devices is None:
        raise ValueError("torch.nn.parallel.comm.scatter: devices must be given")
    chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes is not None else tensor.chunk(len(devices), dim)
    return tuple(chunk.to(_dipu_device(device)) for chunk, device in zip(chunks, devices))


def _gather(tensors, dim=0, destination=None, *, out=None):
    if out is not None:
        raise NotImplementedError("torch.nn.parallel.comm.gather(out=...) is not mapped to dipu (DIPU_MOCK_CUDA)")
    target = _dipu_device(destination)
    return torch.cat([tensor.to(target) for tensor in tensors], dim)


def _dipu_data_parallel_init(init):
    """DataParallel's ``__init__`` with its source device named dipu (Note [DataParallel over dipu devices])."""
    @functools.wraps(init)
    def renamed(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if getattr(self, "src_device_obj", None) is not None:
            self.src_device_obj = torch.device(to_dipu(self.src_device_obj))

    return renamed


def _without_dipu_tensors(is_available):
    @functools.wraps(is_available)
    def nccl_is_available(tensors):
        tensors = list(tensors)
        return not any(tensor.device.type == _TYPE for tensor in tensors) and is_available(tensors)

    return nccl_is_available


def _install_data_parallel() -> None:
    from torch.cuda import nccl
    from torch.nn.parallel import comm

    comm.broadcast_coalesced, comm.scatter, comm.gather = _broadcast_coalesced, _scatter, _gather
    nccl.is_available = _without_dipu_tensors(nccl.is_available)
    torch.nn.DataParallel.__init__ = _dipu_data_parallel_init(  # type: ignore[method-assign]  # patched on purpose
        torch.nn.DataParallel.__init__)


def _is_cuda(tensor) -> bool:
    return tensor.device.type in (_CUDA, _TYPE)


_installed: CudaToDipu | None = None


def install() -> None:
    """Make cuda spellings mean dipu for the rest of the process (idempotent)."""
    global _installed
    if _installed is not None:
        return
    dipu_module = torch_dipu
    _accept_device_type(_CUDA)  # torch.cuda.set_device(torch.device("cuda:1")) and every other device argument
    for name in dir(dipu_module):
        if not name.startswith("_") and hasattr(torch.cuda, name):
            setattr(torch.cuda, name, getattr(dipu_module, name))
    # A CUDA build has already initialized nothing at import; with the mock, torch.cuda's lazy
    # initialization would start the real CUDA runtime: make it dipu's (a no-op).
    torch.cuda._lazy_init = dipu_module._lazy_init
    torch.cuda.is_initialized = dipu_module.is_initialized

    # torch's classes replaced by dipu's subclasses on purpose (type: ignore[misc]: assigning to a class name)
    torch.autocast = torch.amp.autocast = torch.amp.autocast_mode.autocast = (  # type: ignore[misc]
        _mapped_autocast(torch.amp.autocast_mode.autocast))
    torch.cuda.amp.autocast = _cuda_amp_autocast(torch.amp.autocast_mode.autocast)  # type: ignore[misc]
    torch.amp.GradScaler = torch.amp.grad_scaler.GradScaler = (  # type: ignore[misc]
        _mapped_grad_scaler(torch.amp.grad_scaler.GradScaler))
    torch.cuda.amp.GradScaler = _mapped_grad_scaler(torch.amp.grad_scaler.GradScaler, _TYPE)  # type: ignore[misc]
    # nn.DataParallel's replicas run under torch.is_autocast_enabled(), the no-device (CUDA) form
    torch.is_autocast_enabled = _autocast_state(torch.is_autocast_enabled)
    torch.get_autocast_dtype = _autocast_state(torch.get_autocast_dtype)
    torch.get_autocast_gpu_dtype = functools.partial(torch.get_autocast_dtype, _TYPE)

    _install_data_parallel()
    # a property over the stub's plain bool attribute, on purpose
    torch.Tensor.is_cuda = property(  # type: ignore[assignment]
        _is_cuda, doc="True for cuda and (DIPU_MOCK_CUDA) dipu tensors.")
    _install_distributed()

    _installed = CudaToDipu()
    _installed.__enter__()  # stays entered, as torch.set_default_device's DeviceContext does


def installed() -> bool:
    """Whether the mock is on in this process."""
    return _installed is not None
