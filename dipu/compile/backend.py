"""``torch.compile`` on dipu: dynamo's device interface and inductor's backend for the device.

Note [How torch.compile finds dipu]
Nothing here is imported at ``import dipu``: importing dynamo costs about 1.7 s. Inductor, when it
first lowers a graph on a device it has no backend for, asks the PrivateUse1 device module
(``torch.dipu``) for ``Scheduling``, ``PythonWrapperCodegen``, ``CppWrapperCodegen`` and
``WrapperFxCodegen`` (``torch._inductor.codegen.common.init_backend_registration``); the device
module's ``__getattr__`` (dipu/device/__init__.py) answers those names by importing this module (the
only dipu module that does, but for the lazy names of its package, dipu/compile/__init__.py), and this
module imports the device package's submodules, never the package namespace, so the dependency runs one
way. Its import registers, once:
- the dynamo device interface (``register_interface_for_device("dipu", DipuInterface)``), which
  dynamo and inductor use for device guards, streams, properties and Triton capability;
- the device op overrides (the Python spelled into generated wrappers: device guard, sync);
- inductor's backend for dipu (``register_backend_for_device``), chosen by the vendor's
  ``DeviceRuntime.compiler_backend``.

Note [Compiler backends]
``compiler_backend`` is what the vendor's memory and toolchain allow:
- ``"cpp"``: device memory is host memory (the simulated vendor), so inductor's C++/OpenMP kernels,
  which take raw data pointers, run on dipu tensors as they are; buffers are allocated on dipu.
- ``"triton"``: device memory is CUDA memory (the CUDA vendor), so inductor's Triton kernels run on
  it, launched on the CUDA stream the vendor keeps equal to dipu's current stream. Triton targets
  the device through ``DipuInterface`` (compute capability and raw stream of the CUDA device
  behind the dipu device).
- ``None``: no compiler. Inductor's kernels cannot run. ``torch.compile``'s default backend never
  reaches inductor with a dipu graph: it runs it as ``aot_eager`` (Note [torch.compile without a
  compiler], dipu/compile/without_compiler.py). A caller that reaches inductor another way gets an
  error naming ``backend="aot_eager"`` (``NoCompilerScheduling``).
Whatever the backend, ops inductor does not fuse (matmul, convolution, random ops, ...) run as
extern calls into dipu's kernels.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import cast

import torch
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device
from torch._inductor.codegen.common import (
    DeviceOpOverrides,
    register_backend_for_device,
    register_device_op_overrides,
)
from torch._inductor.codegen.wrapper import PythonWrapperCodegen as StockPythonWrapperCodegen
from torch._inductor.virtualized import V
from torch.utils._config_module import ConfigModule

from dipu.compile import inductor_config as device_config
from dipu._core import _C, vendor
from dipu.device import _amp, _devices, _streams, memory
from dipu.ops import convolution

_TYPE = "dipu"
COMPILER_BACKENDS = ("cpp", "triton", None)


def compiler_backend() -> str | None:
    """The active vendor's declared compiler backend (see Note [Compiler backends])."""
    backend = vendor().compiler_backend
    if backend not in COMPILER_BACKENDS:
        raise ValueError(f"dipu vendor '{vendor().name}': compiler_backend={backend!r} is not one of "
                         f"{', '.join(map(repr, COMPILER_BACKENDS))} (see dipu.runtime.DeviceRuntime.compiler_backend)")
    return backend


def _triton() -> bool:
    return compiler_backend() == "triton"


def _raw_stream(index: int) -> int:
    """The native stream handle behind dipu's current stream on ``index`` (0 for host-memory vendors)."""
    if _triton():
        return torch._C._cuda_getCurrentRawStream(index)
    return 0


class DipuInterface(DeviceInterface):
    """What dynamo and inductor ask of the dipu device (``torch._dynamo.device_interface``)."""

    device = _devices.device
    Event = _streams.Event
    Stream = _streams.Stream

    class Worker:
        """Device queries for compile workers; dipu devices are known in every process."""

        @staticmethod
        def set_device(device: int) -> None:
            _devices.set_device(device)

        @staticmethod
        def current_device() -> int:
            return _devices.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return DipuInterface.get_device_properties(device)

    current_device = staticmethod(_devices.current_device)
    set_device = staticmethod(_devices.set_device)
    device_count = staticmethod(_devices.device_count)
    is_available = staticmethod(_devices.is_available)
    synchronize = staticmethod(_devices.synchronize)
    stream = staticmethod(_streams.stream)
    current_stream = staticmethod(_streams.current_stream)
    set_stream = staticmethod(_streams.set_stream)

    @staticmethod
    def exchange_device(device: int) -> int:
        return _C.exchange_device(device)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return _C.exchange_device(device)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _streams.set_stream(_streams.Stream(stream_id=stream_id, device_index=device_index,
                                              device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return _raw_stream(device_idx)

    @classmethod
    def get_device_properties(cls, device=None):
        if _triton():  # Triton reads CUDA's fields (warp size, registers, ...): hand it the real ones
            return torch.cuda.get_device_properties(_devices._get_device_index(device))
        return _devices.get_device_properties(device)

    @staticmethod
    def get_compute_capability(device=None):
        if _triton():
            major, minor = torch.cuda.get_device_capability(_devices._get_device_index(device))
            return major * 10 + minor
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return torch.bfloat16 in _amp.get_amp_supported_dtype()

    @staticmethod
    def memory_allocated(device=None) -> int:
        return memory.memory_allocated(device)

    @staticmethod
    def is_triton_capable(device=None) -> bool:
        return _triton()

    @classmethod
    def raise_if_triton_unavailable(cls, device=None) -> None:
        if not _triton():
            raise RuntimeError(f"dipu vendor '{vendor().name}' does not compile Triton kernels "
                               f"(compiler_backend={compiler_backend()!r})")


class DipuDeviceOpOverrides(DeviceOpOverrides):
    """The Python that inductor writes into generated wrappers for dipu."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from dipu.compile.backend import _raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.dipu.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.dipu.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.dipu.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.dipu.current_stream()"

    def cpp_kernel_type(self) -> str:
        return "void*" if not _triton() else "CUfunction"


class DipuPythonWrapperCodegen(StockPythonWrapperCodegen):
    """Inductor's Python wrapper, calling C++ kernels on dipu as it does on the CPU.

    The stock wrapper calls a C++ kernel directly only on a ``cpu`` device (any other device is
    "nyi"); on a ``"cpp"`` vendor dipu tensors hold host memory, so the same direct call is right.
    Triton kernels take the stock path. Buffers are allocated on the graph's dipu device by index:
    the stock wrapper writes ``device='dipu'`` (the current device) and, since inductor places
    device guards only around GPU types, a graph on ``dipu:1`` would otherwise allocate on dipu:0.
    """

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if device.type == _TYPE and device.index is not None:
            line = line.replace(f"device='{_TYPE}'", f"device='{_TYPE}:{device.index}'", 1)
        return line

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return StockPythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
        return DipuPythonWrapperCodegen()

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if not triton and device.type == _TYPE:
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


class UnsupportedCppWrapper:
    """``cpp_wrapper=True`` (and AOTInductor) would write C++ that allocates through AOTI's device
    shims, which know no dipu device: refuse clearly rather than emit code that cannot run."""

    @staticmethod
    def create(*args, **kwargs):
        raise RuntimeError("torch.compile on dipu does not support inductor's cpp_wrapper / AOTInductor; "
                           "use the default Python wrapper (torch._inductor.config.cpp_wrapper = False)")


class NoCompilerScheduling:
    """Inductor's scheduling for a vendor without a compiler: refuses, naming what to use instead.

    A class, as inductor expects (it also instantiates it with no scheduler to ask for backend
    features while lowering, so the refusal comes before any code is generated).
    """

    def __init__(self, scheduler=None):
        raise RuntimeError(
            f"dipu vendor '{vendor().name}' has no compiler backend (its DeviceRuntime.compiler_backend "
            f"is None), so inductor cannot generate kernels for dipu. Use torch.compile(model, backend="
            f"\"aot_eager\"): the captured graph then runs through dipu's own kernels.")


def _cpp_scheduling():
    from torch._inductor import config as inductor_config
    from torch._inductor.codegen.cpp import CppScheduling

    class DipuCppScheduling(CppScheduling):
        """Inductor's C++/OpenMP kernels for dipu tensors whose memory is host memory.

        Note [C++ kernels on a device that is not "cpu"]
        The scheduler keeps three loop-layout rewrites away from C++ kernels by asking
        ``node.is_cpu()``: ``Scheduler.shared_data_after_reordering_loop`` and
        ``shared_data_after_inverting_indexing`` answer -1 ("no gain") and
        ``_try_reindex_pointwise_for_reduction`` (not in torch 2.11's inductor) answers False for CPU
        nodes. All three assume Triton-style ``(numel, rnumel)`` groups and fail on a C++ node's
        ``(sizes, reduction_sizes)`` groups ("can't multiply sequence by non-int of type 'tuple'", seen
        on a Linear+GELU backward and on the GPT example). ``is_cpu()`` means ``device.type == "cpu"``,
        so dipu nodes would take those paths. This scheduling is created once per graph with that graph's
        scheduler (before fusion: nodes ask it for ``group_fn``) and gives that one scheduler the
        CPU answers for dipu nodes, leaving every other device and graph alone.

        Likewise ``torch._inductor.utils.get_current_backend()``, which kernel code generation asks
        to pick dtype rules (for ``masked`` loads, e.g. an embedding's index), answers
        ``config.cpu_backend`` for "cpu" and ``config.cuda_backend`` ("triton") for any other
        device. While this scheduling generates a kernel, ``cuda_backend`` reads "cpp" (a
        ``config.patch`` around ``codegen_node``, undone when it returns: the cache key was taken
        before code generation and code generation is single-threaded).
        """

        def codegen_node(self, node):
            with inductor_config.patch(cuda_backend="cpp"):
                return super().codegen_node(node)

        def __init__(self, scheduler):
            super().__init__(scheduler)
            if scheduler is not None:
                for name, cpu_answer in _CPU_ANSWERS.items():
                    if hasattr(scheduler, name):  # a rewrite this torch's inductor lacks needs no answer
                        setattr(scheduler, name, _answer_for_dipu(getattr(scheduler, name), cpu_answer))

    return DipuCppScheduling


#: What the scheduler's loop-layout rewrites answer for CPU nodes (Note [C++ kernels on a device that is not "cpu"]).
_CPU_ANSWERS = {
    "shared_data_after_reordering_loop": -1,
    "shared_data_after_inverting_indexing": -1,
    "_try_reindex_pointwise_for_reduction": False,
}


def _answer_for_dipu(method, cpu_answer):
    """``method(node1, node2)``, answering as for CPU nodes when a node is on dipu."""

    def answer(node1, node2, *args, **kwargs):
        if any(_on_dipu(node) for node in (node1, node2)):
            return cpu_answer
        return method(node1, node2, *args, **kwargs)

    return answer


def _on_dipu(node) -> bool:
    device = node.get_device()
    return device is not None and device.type == _TYPE


# Note [Triton kernels on dipu(cuda)]
# Under the CUDA vendor a dipu tensor's memory is CUDA memory on the same GPU index, and the vendor keeps
# CUDA's current stream equal to dipu's (vendor/cuda). So a Triton kernel inductor generates for a dipu
# graph is a CUDA kernel: it must be compiled for and launched as one. Two things in inductor name the
# device type instead:
# - the kernel's ``triton_meta["device"]`` (``DeviceProperties``, written into the kernel's source), whose
#   ``type`` becomes Triton's compile target; Triton's NVIDIA backend accepts only "cuda" ("0 compatible
#   backends for target (dipu)"), and at launch the same field picks the device interface whose raw stream
#   the kernel is launched on. ``DipuTritonKernel`` writes "cuda" there: the target is the GPU's, and the
#   stream is CUDA's current one, which is dipu's.
# - ``torch._inductor.utils.GPU_TYPES``, which decides whether inductor treats a device as a GPU (device
#   guards around kernels, GPU-only lowerings and layouts). ``_register_gpu_type`` adds "dipu" there, after
#   caching ``get_gpu_type()`` (which asserts that at most one listed type is available) as "cuda".
# Written against inductor's sources of torch 2.11 to 2.14. On an H100 (torch 2.11) the kernels reached Triton
# as CUDA kernels, where "PassManager::run failed" in its LLVM stage: most likely dipu's libraries' static copy
# of the C++ runtime (Note [The C++ runtime of dipu's libraries] in dipu/_native.py), fixed since, not yet rerun.
_TRITON_DEVICE_FIELD = f"DeviceProperties(type='{_TYPE}'"


def for_triton(source: str) -> str:
    """A generated kernel's source with its device properties naming CUDA (Note [Triton kernels on dipu(cuda)])."""
    return source.replace(_TRITON_DEVICE_FIELD, "DeviceProperties(type='cuda'")


def _triton_scheduling():
    from torch._inductor.codegen.triton import TritonKernel, TritonScheduling

    class DipuTritonKernel(TritonKernel):
        """Inductor's Triton kernel, compiled and launched as the CUDA kernel it is (Note [Triton kernels on
        dipu(cuda)])."""

        def codegen_kernel(self, *args, **kwargs):
            source = super().codegen_kernel(*args, **kwargs)
            device = (self.triton_meta or {}).get("device")
            if device is not None and device.type == _TYPE:
                self.triton_meta["device"] = device._replace(type="cuda")
            return for_triton(source)

    class DipuTritonScheduling(TritonScheduling):
        kernel_type = DipuTritonKernel

    return DipuTritonScheduling


def _register_gpu_type() -> None:
    """Note [Triton kernels on dipu(cuda)]: inductor treats dipu as a GPU type."""
    from torch._inductor import utils as inductor_utils

    if _TYPE not in inductor_utils.GPU_TYPES:
        inductor_utils.get_gpu_type()  # cached before dipu is listed: "cuda"
        inductor_utils.GPU_TYPES.append(_TYPE)


def _scheduling():
    backend = compiler_backend()
    if backend == "cpp":
        return _cpp_scheduling()
    if backend == "triton":
        _register_gpu_type()
        return _triton_scheduling()
    return NoCompilerScheduling


#: The names ``init_backend_registration`` reads from ``torch.dipu`` (Note [How torch.compile finds dipu]).
Scheduling = _scheduling()
CppWrapperCodegen = UnsupportedCppWrapper
# None: inductor's FX wrapper is not offered; also, init_backend_registration reads this name last
# and, finding None, leaves the registration below (with its device config) as it is.
WrapperFxCodegen = None

register_interface_for_device(_TYPE, DipuInterface)
for _index in range(_devices.device_count()):
    register_interface_for_device(f"{_TYPE}:{_index}", DipuInterface)
register_device_op_overrides(_TYPE, DipuDeviceOpOverrides())
device_config.codegen_source_hash = hashlib.sha256(
    b"".join(Path(path).read_bytes() for path in (__file__, convolution.__file__))).hexdigest()
device_config.vendor_compiler = f"{vendor().name}:{compiler_backend()}"
register_backend_for_device(_TYPE, Scheduling, DipuPythonWrapperCodegen,
                            CppWrapperCodegen,  # type: ignore[arg-type]  # duck-typed: inductor calls only .create
                            # cast: install_config_module made the module a ConfigModule
                            device_custom_config=cast(ConfigModule, device_config))
PythonWrapperCodegen = DipuPythonWrapperCodegen  # the name inductor looks up
