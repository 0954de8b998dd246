"""``Trainer(accelerator="dipu")`` in PyTorch Lightning, registered when Lightning is imported.

Note [Lightning accelerator]
Lightning finds accelerators in its ``AcceleratorRegistry``, filled when its ``accelerators``
package is imported; it has no entry point for accelerators from other packages. dipu is
imported first (torch's backend autoload runs it inside ``import torch``, which Lightning does
before anything else), so ``install()`` puts an import hook on ``sys.meta_path`` that registers
``DipuAccelerator`` right after ``lightning.pytorch.accelerators`` or ``pytorch_lightning.accelerators``
(the two names Lightning is installed under) is executed. Without Lightning nothing is imported and
the hook is never asked for anything else.

Two of Lightning's choices assume an accelerator it does not know runs on the CPU, and
``DipuAccelerator.setup`` (called by the strategy before it moves the model) corrects them:
- with one device, the strategy it picks is ``SingleDeviceStrategy("cpu")``: its root device
  becomes the dipu device the Trainer was given;
- ``precision="16-mixed"``/``"bf16-mixed"`` autocast on ``"cuda"`` (and scale gradients with a CUDA
  ``GradScaler``), which a CPU build of torch disables: they autocast and scale on dipu.
More than one device per process is refused (Lightning would start DDP with the gloo backend, which
cannot reduce dipu tensors): run one process per device with ``torchrun``.
"""

from __future__ import annotations

import importlib.abc
import sys

import torch

from dipu import device as torch_dipu  # the module torch.dipu is (dipu/__init__.py registers it)

NAME = "dipu"
#: The modules that define Lightning's accelerator registry, one per name Lightning is installed under.
REGISTRY_MODULES = ("lightning.pytorch.accelerators", "pytorch_lightning.accelerators")


def _precision_module(package: str):
    return importlib.import_module(f"{package}.plugins.precision")


def accelerator_class(accelerators):
    """A dipu ``Accelerator`` for the Lightning package whose ``accelerators`` module is given."""
    package = accelerators.__name__.rpartition(".")[0]
    from lightning_utilities.core.rank_zero import rank_zero_info

    exceptions = importlib.import_module(package.replace("pytorch_lightning", "lightning_fabric")
                                         .replace("lightning.pytorch", "lightning.fabric") + ".utilities.exceptions")
    misconfiguration = exceptions.MisconfigurationException

    class DipuAccelerator(accelerators.Accelerator):
        """Runs a Lightning ``Trainer`` on dipu devices (``Trainer(accelerator="dipu", devices=1)``)."""

        def setup_device(self, device: torch.device) -> None:
            # Called before setup() with the strategy's first choice, the CPU (Note [Lightning accelerator]).
            if device.type == NAME:
                torch_dipu.set_device(device)

        def setup(self, trainer) -> None:
            strategy = trainer.strategy
            device = _chosen_device(trainer)
            if strategy.root_device.type != NAME and hasattr(strategy, "_root_device"):
                strategy._root_device = device  # SingleDeviceStrategy's own attribute: no setter exists
            torch_dipu.set_device(device)
            precision = strategy.precision_plugin
            mixed = getattr(_precision_module(package), "MixedPrecision", None)
            if mixed is not None and isinstance(precision, mixed) and precision.device != NAME:
                precision.device = NAME
                if precision.scaler is not None:
                    precision.scaler = torch.amp.GradScaler(NAME)
            rank_zero_info(f"dipu: training on {device}")

        def get_device_stats(self, device) -> dict:
            return torch_dipu.memory_stats(device)

        def teardown(self) -> None:
            torch_dipu.empty_cache()

        @staticmethod
        def parse_devices(devices) -> list[int]:
            count = torch_dipu.device_count()
            if devices in ("auto", -1, "-1"):
                indices = [0]
            elif isinstance(devices, (list, tuple)):
                indices = [int(index) for index in devices]
            elif isinstance(devices, str) and "," in devices:
                indices = [int(index) for index in devices.split(",") if index.strip()]
            else:
                indices = list(range(int(devices)))
            if len(indices) != 1:
                raise misconfiguration(
                    f"accelerator='dipu' runs one device per process, got devices={devices!r}: several devices "
                    "in one process would need DDP over gloo, which cannot reduce dipu tensors. "
                    "Start one process per device (torchrun) instead.")
            if not 0 <= indices[0] < count:
                raise misconfiguration(f"accelerator='dipu': device {indices[0]} does not exist "
                                       f"(torch.dipu.device_count() is {count})")
            return indices

        @staticmethod
        def get_parallel_devices(devices) -> list[torch.device]:
            return [torch.device(NAME, index) for index in devices]

        @staticmethod
        def auto_device_count() -> int:
            return 1

        @staticmethod
        def is_available() -> bool:
            return torch_dipu.is_available()

        @staticmethod
        def name() -> str:
            return NAME

        @classmethod
        def register_accelerators(cls, accelerator_registry) -> None:
            accelerator_registry.register(cls.name(), cls, description=cls.__name__)

    return DipuAccelerator


def _chosen_device(trainer) -> torch.device:
    """The dipu device the Trainer was given (``devices=[1]`` -> dipu:1)."""
    # The connector keeps what get_parallel_devices returned; the strategy only knows the CPU.
    chosen = getattr(getattr(trainer, "_accelerator_connector", None), "_parallel_devices", None) or []
    for device in chosen:
        if isinstance(device, torch.device) and device.type == NAME:
            return device
    return torch.device(NAME, torch_dipu.current_device())


def register(accelerators) -> None:
    """Register ``accelerator="dipu"`` in the registry of an imported Lightning ``accelerators`` module."""
    registry = accelerators.AcceleratorRegistry
    if NAME not in registry:
        accelerator_class(accelerators).register_accelerators(registry)


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Registers the accelerator once a Lightning registry module has been executed."""

    def find_spec(self, name, path, target=None):
        if name not in REGISTRY_MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module

        def execute_and_register(module):
            execute(module)
            register(module)

        spec.loader.exec_module = execute_and_register
        return spec


_hook: _RegisterAfterImport | None = None


def install() -> None:
    """Register now for a Lightning already imported, and from then on at Lightning's import (idempotent)."""
    global _hook
    if _hook is not None:
        return
    for name in REGISTRY_MODULES:
        if name in sys.modules:
            register(sys.modules[name])
    _hook = _RegisterAfterImport()
    sys.meta_path.insert(0, _hook)
