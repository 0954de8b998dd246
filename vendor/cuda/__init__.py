"""The CUDA vendor: dipu devices backed by NVIDIA GPUs (``DIPU_VENDOR=cuda``).

The core serves this vendor with its C++ CUDA runtime (Note [The CUDA runtime in the core] in
dipu/csrc/vendor_cuda.cpp), which does what the methods below do without Python; they stay the
reference, used with ``DIPU_CUDA_RUNTIME=python``, and describe the behaviour.

Device memory comes straight from the CUDA runtime (cudaMalloc through ctypes;
dipu's core caches it, so PyTorch's CUDA caching allocator is not stacked
underneath). Streams and events are real ``torch.cuda`` streams and events, and
the vendor keeps CUDA's current stream equal to dipu's current stream, so
kernels that the torch op library launches on CUDA aliases run on the stream
the user selected with ``torch.dipu.stream``. Collectives run on NCCL over the
same CUDA aliases (``vendor/cuda/collectives.py``).
"""

from __future__ import annotations

import ctypes
import glob
import os

import torch

from dipu.runtime import DeviceProperties, DeviceRuntime

from .collectives import NcclCommunicator

_MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: direction inferred from unified addressing
_ERROR_MEMORY_ALLOCATION = 2


def _load_cudart() -> ctypes.CDLL:
    """The CUDA runtime library torch was built against."""
    try:
        lib = ctypes.CDLL(None)  # torch's CUDA libraries are already loaded
        lib.cudaMalloc  # noqa: B018  (raises AttributeError if absent)
        return lib
    except (OSError, AttributeError):
        pass
    roots = [os.path.join(os.path.dirname(torch.__file__), "lib")]
    roots += glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "*", "lib"))
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "libcudart.so*")), reverse=True):
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    raise RuntimeError("dipu cuda vendor: could not find the CUDA runtime library (libcudart) "
                       "that torch uses; install a CUDA build of torch")


class CudaRuntime(DeviceRuntime):
    native_device_type = "cuda"
    collectives = NcclCommunicator  # torch.distributed on dipu tensors through NCCL
    compiler_backend = "triton"  # device memory is CUDA memory: inductor's Triton kernels run on it

    def __init__(self):
        if not torch.cuda.is_available():
            raise RuntimeError(
                "DIPU_VENDOR='cuda' needs an NVIDIA GPU and a CUDA build of torch, but "
                f"torch.cuda.is_available() is False (torch {torch.__version__})"
            )
        self.cudart = _load_cudart()
        self.cudart.cudaGetErrorString.restype = ctypes.c_char_p
        self.pinned: set[int] = set()
        # Note [The CUDA runtime in the core]: the core serves this vendor in C++ with the same CUDA runtime
        # library; the methods below stay the reference, used with DIPU_CUDA_RUNTIME=python.
        choice = os.environ.get("DIPU_CUDA_RUNTIME", "native").strip() or "native"
        if choice not in ("native", "python"):
            raise ValueError(f"DIPU_CUDA_RUNTIME={choice!r} is not one of: native, python")
        self.native_cuda_library = (self.cudart._name or "") if choice == "native" else None

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            self.cudart.cudaGetLastError()  # reset the runtime's last-error state
            message = self.cudart.cudaGetErrorString(status).decode()
            raise RuntimeError(f"{what} failed: {message} (cudaError {status})")

    def initialize(self) -> None:
        torch.cuda.init()  # torch's CUDA state (its context, generators) before the first kernel on an alias

    # ---- devices -----------------------------------------------------------
    def device_count(self) -> int:
        return torch.cuda.device_count()

    def set_device(self, index: int) -> None:
        torch.cuda.set_device(index)

    def synchronize_device(self, index: int) -> None:
        torch.cuda.synchronize(index)

    def device_properties(self, index: int) -> DeviceProperties:
        p = torch.cuda.get_device_properties(index)
        return DeviceProperties(name=p.name, total_memory=p.total_memory,
                                multi_processor_count=p.multi_processor_count,
                                major=p.major, minor=p.minor)

    # ---- memory ---------------------------------------------------------------
    def malloc(self, index: int, nbytes: int) -> int:
        ptr = ctypes.c_void_p()
        with torch.cuda.device(index):
            status = self.cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes))
            if status == _ERROR_MEMORY_ALLOCATION:
                self.cudart.cudaGetLastError()
                torch.cuda.empty_cache()  # native CUDA work in this process may hold memory
                status = self.cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes))
            if status == _ERROR_MEMORY_ALLOCATION:
                self.cudart.cudaGetLastError()
                return 0
        self._check(status, f"cudaMalloc({nbytes}) on cuda:{index}")
        return ptr.value

    def free(self, index: int, ptr: int) -> None:
        with torch.cuda.device(index):
            self._check(self.cudart.cudaFree(ctypes.c_void_p(ptr)), "cudaFree")

    def _memcpy(self, dst: int, src: int, nbytes: int) -> None:
        status = self.cudart.cudaMemcpy(ctypes.c_void_p(dst), ctypes.c_void_p(src),
                                        ctypes.c_size_t(nbytes), _MEMCPY_DEFAULT)
        self._check(status, "cudaMemcpy")

    def memcpy_h2d(self, index: int, dst: int, src: int, nbytes: int) -> None:
        self._memcpy(dst, src, nbytes)

    def memcpy_d2h(self, index: int, dst: int, src: int, nbytes: int) -> None:
        self._memcpy(dst, src, nbytes)

    def memcpy_d2d(self, dst_index: int, dst: int, src_index: int, src: int, nbytes: int) -> None:
        self._memcpy(dst, src, nbytes)

    def mem_get_info(self, index: int) -> tuple[int, int]:
        return torch.cuda.mem_get_info(index)

    def host_malloc(self, nbytes: int) -> int:
        ptr = ctypes.c_void_p()
        status = self.cudart.cudaHostAlloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes), 0)
        if status == _ERROR_MEMORY_ALLOCATION:
            self.cudart.cudaGetLastError()
            return 0
        self._check(status, f"cudaHostAlloc({nbytes})")
        self.pinned.add(ptr.value)
        return ptr.value

    def host_free(self, ptr: int) -> None:
        self.pinned.discard(ptr)
        self._check(self.cudart.cudaFreeHost(ctypes.c_void_p(ptr)), "cudaFreeHost")

    # ---- streams and events -------------------------------------------------------
    @staticmethod
    def _stream(index: int, stream) -> torch.cuda.Stream:
        return stream if stream is not None else torch.cuda.default_stream(index)

    def create_stream(self, index: int, priority: int = 0) -> torch.cuda.Stream:
        return torch.cuda.Stream(device=index, priority=priority)

    def destroy_stream(self, index: int, stream) -> None:
        pass  # torch.cuda streams come from PyTorch's pool and are never destroyed

    def synchronize_stream(self, index: int, stream) -> None:
        self._stream(index, stream).synchronize()

    def query_stream(self, index: int, stream) -> bool:
        return self._stream(index, stream).query()

    def stream_wait_event(self, index: int, stream, event) -> None:
        self._stream(index, stream).wait_event(event)

    def set_current_stream(self, index: int, stream) -> None:
        torch.cuda.set_stream(self._stream(index, stream))

    def create_event(self, index: int, enable_timing: bool) -> torch.cuda.Event:
        return torch.cuda.Event(enable_timing=enable_timing)

    def destroy_event(self, index: int, event) -> None:
        pass  # released with the Python object

    def record_event(self, index: int, event, stream) -> None:
        with torch.cuda.device(index):
            event.record(self._stream(index, stream))

    def synchronize_event(self, index: int, event) -> None:
        event.synchronize()

    def query_event(self, index: int, event) -> bool:
        return event.query()

    def event_elapsed_time(self, index: int, start, end) -> float:
        return start.elapsed_time(end)
