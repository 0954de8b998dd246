"""Lazy initialization of the vendor runtime and fork handling, as ``torch.cuda`` does them.

Note [Lazy initialization]
As torch.cuda: ``import torch`` (which autoloads dipu) registers the device, the native core's
guard, allocator and hooks, ``torch.dipu`` and the kernels, and asks the vendor only its
device_count() (which the runtime contract allows before initialize()). The vendor runtime
starts at the first device use: PyTorch calls ``torch.dipu._lazy_init`` before creating a
dipu tensor from Python (torch/csrc/utils/device_lazy_init.cpp), the hooks' init() runs it for
``at::globalContext().lazyInitDevice``, and the core runs it before any vendor call, allocation
or native alias (``ensure_initialized`` in dipu/csrc/vendor_bridge.h), so no path reaches the vendor
first. Seeding before that is queued, as torch.cuda's ``_lazy_call`` does (``torch.manual_seed``
seeds every device type and must not start a runtime). A process forked from an initialized
parent inherits a runtime its vendor no longer serves (CUDA's hangs or crashes there), so
``os.register_at_fork`` marks it a bad fork: any device use raises at once, naming the 'spawn'
start method, and inherited tensors are freed without calling the vendor. A child of a parent
that never used the device initializes on its own (DataLoader workers with fork).
"""

from __future__ import annotations

import threading
import traceback

from torch._utils import _LazySeedTracker

from dipu._core import _C, vendor

_BAD_FORK_MESSAGE = ("Cannot re-initialize dipu in forked subprocess. To use dipu with multiprocessing, "
                     "you must use the 'spawn' start method")

_initialized = False
_in_bad_fork = False
_initialization_lock = threading.Lock()
_tls = threading.local()
_queued_calls: list = []  # (callable, the stack that queued it)
# Only the latest manual_seed and manual_seed_all count, run in the order of those latest calls:
# seed_all(1), seed(2), seed_all(3) -> seed(2), then seed_all(3).
_lazy_seed_tracker = _LazySeedTracker()


def is_initialized() -> bool:
    """Whether the vendor runtime has started in this process (see Note [Lazy initialization])."""
    return _initialized and not _in_bad_fork


def _is_in_bad_fork() -> bool:
    """Whether this is a forked child of a process that had started the runtime."""
    return _in_bad_fork


def _lazy_init() -> None:
    """Start the vendor runtime unless it runs; see Note [Lazy initialization]."""
    global _initialized, _lazy_seed_tracker
    if is_initialized() or getattr(_tls, "is_initializing", False):
        return
    with _initialization_lock:
        if is_initialized():
            return
        if _in_bad_fork:
            raise RuntimeError(_BAD_FORK_MESSAGE)
        runtime = vendor()
        try:
            runtime.initialize()
        except Exception as error:  # reported as every vendor failure is (dipu/csrc/vendor_bridge.cpp)
            raise RuntimeError(f"dipu: vendor '{runtime.name}' failed in initialize: "
                               f"{type(error).__name__}: {error}") from error
        _C.start_runtime()
        _tls.is_initializing = True  # queued calls may come back here: let them through
        try:
            for call, stack in _queued_calls + [seeding for seeding in _lazy_seed_tracker.get_calls() if seeding]:
                try:
                    call()
                except Exception as error:
                    raise RuntimeError(f"dipu call failed lazily at initialization: {error}\n\n"
                                       f"It was queued at:\n{''.join(stack)}") from error
        finally:
            _tls.is_initializing = False
        _queued_calls.clear()
        _lazy_seed_tracker = _LazySeedTracker()
        _initialized = True


def init() -> None:
    """Start the vendor runtime now (any device use does it anyway), as ``torch.cuda.init``."""
    _lazy_init()


def _lazy_call(call, *, seed: bool = False, seed_all: bool = False) -> None:
    """Run ``call`` now if the runtime runs, else at its start, as ``torch.cuda._lazy_call``.

    ``seed``/``seed_all``: ``call`` seeds the current/every device, and only the latest of its kind is kept.
    """
    with _initialization_lock:
        if is_initialized():
            call()
        elif seed_all:
            _lazy_seed_tracker.queue_seed_all(call, traceback.format_stack())
        elif seed:
            _lazy_seed_tracker.queue_seed(call, traceback.format_stack())
        else:
            _queued_calls.append((call, traceback.format_stack()))


def _after_fork_in_child() -> None:
    """``os.register_at_fork`` hook: a child of a started parent is a bad fork (Note [Lazy initialization])."""
    global _initialized, _in_bad_fork, _initialization_lock
    _initialization_lock = threading.Lock()  # another thread of the parent may have held it
    if _initialized:
        _initialized, _in_bad_fork = False, True
        _C.forget_runtime()
