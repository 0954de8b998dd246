"""dipu: plug an accelerator into PyTorch as the ``dipu`` device (PrivateUse1).

``import dipu`` (or plain ``import torch``, through PyTorch's device-backend
autoload, where Note [Who activates dipu] in dipu_autoload.py lets it) selects
the vendor runtime, builds/loads the native core, registers the device,
``torch.dipu`` and the generated op kernels. It starts no vendor runtime: the
first device use does (Note [Lazy initialization] in dipu/device/_initialization.py).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import time

import torch

from dipu import _native

__all__ = ["vendor", "fallback_counts", "reset_fallback_counts", "autocompare"]

_EXIT_GRACE_SECONDS = 0.02  # see Note [Exit after backward]

@contextlib.contextmanager
def _startup_objects_frozen():
    """Note [Start-up objects]
    dipu's import makes about 33,000 objects the garbage collector tracks (the generated wrappers and their
    closures, the proto, the op library's functions), nearly all alive for the whole process. Made on top of
    torch's 165,000, they set off a full collection during the import: 80 ms on the development machine, a
    third of what dipu added to ``import torch``; and every later full collection walked them again. So the
    start-up runs with the collector paused, and when it has succeeded it freezes (``gc.freeze``) what exists
    then, torch's and dipu's modules among it, into the permanent generation collections skip: the import pays
    no collection and later full collections are cheaper (300,000 small lists made after the import: 97 ms of
    collections instead of 368 ms). What the freeze keeps that a collection would have freed: the 72
    unreachable objects a warm import leaves, a few KB. An import that built something (Note [Build progress]
    in dipu/_native.py: the generator's garbage) collects first; it has just spent seconds or minutes.
    ``gc.unfreeze()`` undoes the freeze.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
    if any(seconds is not None for _, _, seconds in _native.BUILDS):
        gc.collect()
    gc.freeze()


with _startup_objects_frozen():
    # Start-up, in this order (Note [Start-up order] in dipu/_core.py):
    # 1. the vendor runtime and the native core;
    from dipu._core import _C, vendor  # noqa: E402

    # 2. the device module, torch.dipu, and the tensor/module/storage methods (.dipu(), .is_dipu);
    from dipu import device  # noqa: E402

    torch._register_device_module("dipu", device)
    os.register_at_fork(after_in_child=device._after_fork_in_child)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )

    # 3. the op kernels, with the debug switches as the environment sets them;
    from dipu import autocompare  # noqa: E402  (dipu.autocompare(".*") opens a compared block)
    from dipu.kernels import registry  # noqa: E402
    from dipu.kernels.fallback import fallback_counts, reset_fallback_counts  # noqa: E402
    from dipu.ops import convolution  # noqa: E402

    convolution.register_fake_layouts()  # Note [Convolution layouts under fake tensors]
    _generated = registry.register_active()
    autocompare.switch_on()
    if os.environ.get("DIPU_REPORT"):  # the run report (dipu/report); nothing is imported or paid without it
        from dipu.report import collect  # noqa: E402

        collect.start()

    # 4. the integrations: torch.distributed (the dicl backend), torch.compile, mock CUDA, Lightning's
    #    accelerator="dipu" (registered when Lightning is imported; Note [Lightning accelerator]).
    if torch.distributed.is_available():
        from dipu import distributed  # noqa: E402

        distributed.register()

    from dipu.integrations import coexistence, mock_cuda  # noqa: E402

    if coexistence.needed():  # Note [CUDA backward beside dipu]
        coexistence.install()

    if vendor().compiler_backend is None:  # Note [torch.compile without a compiler]
        from dipu.compile import without_compiler  # noqa: E402

        without_compiler.install()

    from dipu.integrations import lightning_accelerator  # noqa: E402
    lightning_accelerator.install()
    if mock_cuda.requested():  # DIPU_MOCK_CUDA=1: cuda spellings mean dipu (Note [Mock CUDA])
        mock_cuda.install()


@atexit.register
def _shutdown() -> None:
    # Note [Exit after backward]
    # backward() returns while the autograd engine's dipu device thread may still
    # be releasing the finished graph, which drops Python references and so needs
    # the GIL. Once the interpreter finalizes, a thread taking the GIL is ended
    # by pthread_exit, whose unwinding through a C++ destructor aborts the process
    # ("terminate called without an active exception"; measured in 11 of 40 runs
    # of a one-line backward script with TORCH_AUTOGRAD_SHUTDOWN_WAIT_LIMIT=0,
    # none of 40 after this pause). Releasing the GIL briefly here, while the
    # interpreter is still whole, lets that thread finish.
    report = sys.modules.get("dipu.report.collect")
    if report is not None:  # its timing events are read back while the vendor still answers
        report.stop()
    if not device.is_initialized():  # never started (or a forked child): nothing to finish
        _C.shutdown()
        return
    time.sleep(_EXIT_GRACE_SECONDS)
    _C.synchronize(_C.current_device())
    _C.shutdown()
    vendor().finalize()
