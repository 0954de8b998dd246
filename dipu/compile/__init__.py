"""``torch.compile`` on dipu.

- ``backend.py``: dynamo's device interface and inductor's backend for the device (Note [How torch.compile finds
  dipu], Note [Compiler backends]), imported when inductor first asks ``torch.dipu`` for them;
- ``without_compiler.py``: ``torch.compile`` on a vendor without a compiler backend (Note [torch.compile without
  a compiler]), installed at ``import dipu``;
- ``inductor_config.py``: inductor's per-device config for dipu, which keys its FX graph cache.

The package imports nothing itself, as importing dynamo and inductor costs about 1.7 s: ``import dipu`` imports
``without_compiler`` alone. The backend's public names (``dipu.compile.compiler_backend``, ``DipuInterface``, ...)
are looked up in ``backend.py`` on first use, which registers the backend then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dipu.compile.backend import (
        COMPILER_BACKENDS,
        CppWrapperCodegen,
        DipuDeviceOpOverrides,
        DipuInterface,
        DipuPythonWrapperCodegen,
        NoCompilerScheduling,
        PythonWrapperCodegen,
        Scheduling,
        UnsupportedCppWrapper,
        WrapperFxCodegen,
        compiler_backend,
        for_triton,
    )

__all__ = ["COMPILER_BACKENDS", "CppWrapperCodegen", "DipuDeviceOpOverrides", "DipuInterface",
           "DipuPythonWrapperCodegen", "NoCompilerScheduling", "PythonWrapperCodegen", "Scheduling",
           "UnsupportedCppWrapper", "WrapperFxCodegen", "compiler_backend", "for_triton"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from dipu.compile import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
