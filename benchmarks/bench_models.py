"""Training-step time and peak memory of two example models, dipu vs native CPU, side by side.

    python benchmarks/bench_models.py [--quick] [--reps N] [--threads N] [--c-library PATH]

Cases: the ResNet-18-shaped CNN (batch 16, 3x64x64, SGD with momentum) and the 4-layer GPT
(d=256, seq 128, batch 8, AdamW), both from examples/models.py. A step is zero_grad, forward,
loss, backward and optimizer step, with the optimizers at their default foreach settings.

Time: both models start from the same weights; after warmup steps, dipu and CPU steps alternate
(so machine noise hits both alike) and each side reports its median.

Memory: a step's peak is the most bytes live at once above what was live before it started, once
the previous step's gradients are freed (so the baseline is parameters, buffers, optimizer state
and the batch; the new gradients count). The CPU has no allocator statistics, so ``LiveStorageMeter``, a dispatch
mode, counts the storage bytes of every op output that does not share an input's storage (views,
in-place and out= results allocate nothing), once per storage, and subtracts them when a weakref
finalizer sees the storage die. It sees only tensors that come out of aten ops, not a
kernel's internal scratch buffers. The meter runs on both devices, in a separate untimed step; its
dipu figure should agree with the allocator's ``torch.dipu.max_memory_allocated`` (which also
rounds block sizes), and the printed ratio is dipu's allocator peak over the CPU meter's peak.

Targets (issue 28, on the default vendor and library): step time and peak memory each within 1.05x of the CPU's;
no CPU fallbacks.

The C library run (``--c-library PATH`` or a name DIPU_DIOPI_IMPL accepts; default
``$DIPU_BENCH_C_LIBRARY``, else the reference C op library ``ref_c`` when installed; ``--c-library ''``
skips it): the same table from a second process with ``DIPU_DIOPI_IMPL=PATH``.

Each table says how many of a step's op calls the generated C++ wrappers served (Note [Generated C++ wrappers]
in scripts/autogen/dest/cpp_wrappers.py); the rest took the Python wrappers (the library's trampolines, or
the Python library it is laid over) or need no kernel of dipu's (views).
"""

from __future__ import annotations

import argparse
import copy
import os
from importlib.util import find_spec
import statistics
import subprocess
import sys
import time
import warnings
import weakref
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import dipu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from models import GPT, GPT_4_LAYER, resnet18_like  # noqa: E402

STEP_TIME_TARGET = 1.05
PEAK_MEMORY_TARGET = 1.05
warnings.filterwarnings("ignore", message="dipu: .* runs on the CPU through the fallback")  # counted, printed


class LiveStorageMeter(TorchDispatchMode):
    """Tracks the bytes of storages produced by aten ops while they stay alive, and their peak."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        # An output sharing an input's storage (a view, an in-place or out= op) allocated nothing.
        inputs = {t.untyped_storage()._cdata for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(result):
            if isinstance(tensor, torch.Tensor) and tensor.untyped_storage()._cdata not in inputs:
                self._track(tensor.untyped_storage())
        return result

    def _track(self, storage) -> None:
        key = storage._cdata
        if key in self._seen:
            return
        self._seen.add(key)
        self.live += storage.nbytes()
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._release, key, storage.nbytes())

    def _release(self, key: int, nbytes: int) -> None:
        self._seen.discard(key)
        self.live -= nbytes


class TrainingCase:
    """One model, batch and optimizer on one device; ``step()`` trains one step and waits for it."""

    def __init__(self, model, batch, loss_fn, make_optimizer, device: str):
        self.device = torch.device(device)
        self.model = copy.deepcopy(model).to(self.device)
        self.batch = tuple(t.to(self.device) for t in batch)
        self.loss_fn = loss_fn
        self.optimizer = make_optimizer(self.model.parameters())

    def step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.loss_fn(self.model, *self.batch).backward()
        self.optimizer.step()
        if self.device.type == "dipu":
            torch.dipu.synchronize()


def resnet_case():
    torch.manual_seed(0)
    batch = (torch.randn(16, 3, 64, 64), torch.randint(10, (16,)))
    return (resnet18_like(10), batch, lambda model, images, labels: F.cross_entropy(model(images), labels),
            lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9))


def gpt_case():
    torch.manual_seed(0)
    tokens = torch.randint(GPT_4_LAYER.vocab_size, (8, GPT_4_LAYER.seq_len + 1))
    return (GPT(GPT_4_LAYER), (tokens[:, :-1], tokens[:, 1:]),
            lambda model, inputs, targets: model(inputs, targets)[1],
            lambda params: torch.optim.AdamW(params, lr=1e-3))


def timed_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def step_times_ms(dipu_case: TrainingCase, cpu_case: TrainingCase, warmup: int, reps: int) -> tuple[float, float]:
    for _ in range(warmup):
        dipu_case.step()
        cpu_case.step()
    dipu_ms, cpu_ms = [], []
    for _ in range(reps):
        dipu_ms.append(timed_ms(dipu_case.step))
        cpu_ms.append(timed_ms(cpu_case.step))
    return statistics.median(dipu_ms), statistics.median(cpu_ms)


def metered_peak(case: TrainingCase) -> int:
    case.optimizer.zero_grad(set_to_none=True)
    meter = LiveStorageMeter()
    with meter:
        case.step()
    return meter.peak


def allocator_peak(case: TrainingCase) -> tuple[int, int]:
    """(dipu allocator peak above the pre-step baseline, fallbacks) for one step."""
    case.optimizer.zero_grad(set_to_none=True)
    torch.dipu.synchronize()
    torch.dipu.reset_peak_memory_stats()
    baseline = torch.dipu.memory_allocated()
    dipu.reset_fallback_counts()
    case.step()
    return torch.dipu.max_memory_allocated() - baseline, sum(dipu.fallback_counts().values())


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 warmup step and 3 timed steps per side")
    parser.add_argument("--reps", type=int, default=None, help="timed steps per side (default 7)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU intra-op threads for both sides (default: torch's); 1 is steadier on a busy machine")
    default_library = os.environ.get("DIPU_BENCH_C_LIBRARY") or ("ref_c" if find_spec("dipu.diopi_impl.ref_c") else "")
    parser.add_argument("--c-library", default=default_library,
                        help="also run with this C op library (DIPU_DIOPI_IMPL) in a second process")
    parser.add_argument("--c-child", action="store_true", help=argparse.SUPPRESS)  # that process
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warmup, reps = (1, 3) if args.quick else (2, 7)
    reps = args.reps or reps

    cases = {"resnet18-like b16 64x64": resnet_case, "gpt 4L d256 s128 b8": gpt_case}
    mib = 2**20
    print(f"training step, dipu vs CPU (median of {reps} interleaved steps after {warmup} warmup; "
          f"torch threads {torch.get_num_threads()})")
    print(f"{'case':<26}{'dipu ms':>10}{'cpu ms':>10}{'ratio':>7}  {'time target':<18}"
          f"{'dipu MiB':>9}{'meter dipu':>11}{'meter cpu':>10}{'mem ratio':>10}  {'memory target':<16}{'fallbacks':>9}")
    for name, make in cases.items():
        model, batch, loss_fn, make_optimizer = make()
        dipu_case = TrainingCase(model, batch, loss_fn, make_optimizer, "dipu")
        cpu_case = TrainingCase(model, batch, loss_fn, make_optimizer, "cpu")
        dipu_ms, cpu_ms = step_times_ms(dipu_case, cpu_case, warmup, reps)
        dipu_peak, fallbacks = allocator_peak(dipu_case)
        dipu_metered, cpu_metered = metered_peak(dipu_case), metered_peak(cpu_case)
        ratio = dipu_ms / cpu_ms
        time_verdict = f"<= {STEP_TIME_TARGET}x {verdict(ratio <= STEP_TIME_TARGET)}"
        memory = dipu_peak / cpu_metered
        memory_verdict = f"<= {PEAK_MEMORY_TARGET}x {verdict(memory <= PEAK_MEMORY_TARGET)}"
        print(f"{name:<26}{dipu_ms:>10.1f}{cpu_ms:>10.1f}{ratio:>7.2f}  {time_verdict:<18}"
              f"{dipu_peak / mib:>9.1f}{dipu_metered / mib:>11.1f}{cpu_metered / mib:>10.1f}"
              f"{memory:>10.2f}  {memory_verdict:<16}{fallbacks:>6} {verdict(fallbacks == 0)}")
        print(f"{'':<26}C++ wrappers served {cpp_share(dipu_case):.0%} of a step's op calls")
    if args.c_library and not args.c_child:
        print(f"\nwith the C op library {args.c_library} (DIPU_DIOPI_IMPL):", flush=True)
        command = [sys.executable, __file__, "--c-child", *sys.argv[1:]]
        subprocess.run(command, env={**os.environ, "DIPU_DIOPI_IMPL": args.c_library}, check=True)


def cpp_share(case: TrainingCase) -> float:
    """The share of one step's aten op calls on dipu that the C++ wrappers served."""
    from dipu.kernels import cpp_wrappers

    class Count(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.calls += 1
            return func(*args, **(kwargs or {}))

    cpp_wrappers.reset_fast_calls()
    case.step()
    served = sum(cpp_wrappers.fast_calls().values())
    with Count():
        case.step()
    return served / max(Count.calls, 1)


if __name__ == "__main__":
    main()
