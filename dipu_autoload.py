"""Target of PyTorch's device-backend autoload (entry-point group ``torch.backends``).

Note [Who activates dipu]
PyTorch has one accelerator per process: once a PrivateUse1 backend registers its hooks,
``torch.accelerator.current_accelerator()`` and the autograd engine answer PrivateUse1 even where CUDA is
present, and every native CUDA backward then fails inside the engine (pytorch/pytorch#161129). torch runs
its backend autoload in every process of an environment where dipu is installed, so plain ``import torch``
activates dipu only where that cannot hurt or where the process asked for it:

- torch has no accelerator of its own in this process (a CPU build, or a GPU build on a machine without a
  GPU): dipu becomes the accelerator, and ``torch.randn(3, device="dipu")`` works after ``import torch``;
- ``DIPU_VENDOR`` is set, or ``DIPU_MOCK_CUDA`` is on: the process asked for dipu;
- otherwise (torch sees a GPU of its own) dipu stays out: ``torch.accelerator`` and CUDA autograd are as
  without dipu, and the program activates dipu with ``import dipu``.

``import dipu`` always activates it. A process that uses dipu and native CUDA together gets dipu's own
error at its first CUDA backward (Note [CUDA backward beside dipu] in dipu/integrations/coexistence.py).

This is a top-level module, not one of the ``dipu`` package, because importing any ``dipu.*`` module runs
dipu/__init__.py, which registers the device. The probe must not initialize the other accelerator either:
initializing CUDA in a parent breaks CUDA in the children it forks, so CUDA's GPUs are counted through
NVML (``torch.cuda.device_count`` does so before CUDA is initialized, as ``torch.cuda`` documents).
"""

from __future__ import annotations

import os

_OFF = ("", "0", "false")


def requested() -> str | None:
    """The variable through which the environment asks for dipu, or None."""
    if os.environ.get("DIPU_VENDOR", "").strip():
        return "DIPU_VENDOR"
    if os.environ.get("DIPU_MOCK_CUDA", "").strip().lower() not in _OFF:  # dipu itself rejects a bad value
        return "DIPU_MOCK_CUDA"
    return None


def native_accelerator() -> str | None:
    """The device type of the accelerator torch itself has in this process (None: none), found without
    initializing it (Note [Who activates dipu])."""
    import torch

    device = torch.accelerator.current_accelerator()  # what torch was built with; does not poison fork
    if device is None:
        return None
    if device.type == "cuda":
        return "cuda" if torch.cuda.device_count() > 0 else None  # NVML first (ROCm: amdsmi)
    if device.type == torch._C._get_privateuse1_backend_name():
        return device.type  # another PrivateUse1 backend was loaded first: it owns the key
    try:
        return device.type if torch.accelerator.is_available() else None
    except Exception:  # a backend whose probe fails has no device we could disturb
        return None


def should_activate() -> bool:
    """Whether plain ``import torch`` activates dipu in this process (Note [Who activates dipu])."""
    return requested() is not None or native_accelerator() is None


def load() -> None:
    """Activate dipu if this process should have it (Note [Who activates dipu])."""
    if should_activate():
        import dipu  # noqa: F401  (registers the device)
