// The Python bindings of the native core: what builds dipu._C (module.cpp) and the Python-facing
// part of each layer. Only files that bind include this header.
//
// Note [The core's layers]
// The runtime layer (vendor_bridge, streams, guard, the caching allocator, the DIOPI runtime of
// diopi_rt) knows nothing of Python: its headers (vendor_bridge.h, core.h, diopi_rt.h, overlap.h)
// include no pybind, and its sources call Python only through the functions a Vendor holds
// (make_native_generator, start), which module.cpp fills. The bindings sit on top: the Python
// vendor's runtime (vendor_python.cpp), the Python face of a C plug-in (vendor_plugin.cpp's
// register_plugin_python), the memory snapshot's dict (memory_snapshot.cpp), the Python trampoline
// of C op libraries (diopi_call.cpp), the fast calls, and each file's register_*_python.
// tests/test_native_build.py (test_the_native_core_s_runtime_layer_knows_nothing_of_python) checks the runtime
// layer stays free of pybind, as OpenReg keeps its runtime apart from its Python module.
#pragma once

#include "core.h"

#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>

namespace py = pybind11;

namespace dipu {

// ---- the vendor (vendor_python.cpp, vendor_plugin.cpp, vendor_cuda.cpp) --------
// Runs `call`, a vendor call that may wait for the device (a synchronize, a synchronous copy), without the GIL
// where this thread holds it, so other Python threads run meanwhile; returns what the call returns.
template <typename F>
decltype(auto) waiting(F call) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release release;
    return call();
  }
  return call();
}
// The Python runtime of a DeviceRuntime object.
std::unique_ptr<Runtime> python_runtime(py::object device_runtime);
// A handle as dipu's Python sees it (torch.dipu.Stream's vendor handle): the Python vendor's
// object, or the plug-in's pointer as an int; None for a null handle.
py::object python_handle(Handle handle);
// The runtime that serves the core from `plugin`, a dipu._C.RuntimePlugin.
std::unique_ptr<Runtime> plugin_runtime(const py::object& plugin);
// dipu._C.RuntimePlugin and dipu._C.load_runtime_plugin.
void register_plugin_python(py::module& m);
// The cuda vendor's runtime in C++ (vendor_cuda.cpp, Note [The CUDA runtime in the core]), its CUDA runtime
// library `library` ("": the one torch loaded); the torch stream behind one of its stream handles (nullopt for
// another runtime's handle or a null one); dipu._C.check_cuda_runtime.
std::unique_ptr<Runtime> cuda_runtime(const std::string& library);
std::optional<c10::Stream> cuda_stream_of(Handle stream);
void register_cuda_runtime_python(py::module& m);

// ---- memory (memory_snapshot.cpp) -------------------------------------------
// torch.cuda.memory._snapshot()'s dict of memory_snapshot_data(), its stacks symbolized.
py::dict memory_snapshot();

// ---- ops, collectives, statistics --------------------------------------------
void register_fallback_python(py::module& m);  // cpu_fallback.cpp
void register_fast_calls(py::module& m);  // fastcall.cpp: Note [Fast calls]
void register_python_wrapper_call(py::module& m);  // python_wrapper_call.cpp: Note [The C++ wrappers' way to Python]
// _C.written_memory_overlaps and _C.overlap_probe, for dipu.kernels.support.check_written_memory (overlap.cpp).
void register_overlap_python(py::module& m);
// dipu._C.XcclComm and XcclEvent: Note [Collectives on a plug-in's streams] (xccl.cpp).
void register_xccl_python(py::module& m);
void register_op_stats_python(py::module& m);  // op_stats.cpp: Note [Op statistics]

namespace diopi {
// The Python trampoline's call frame and the loader's functions on dipu._C (diopi_call.cpp).
void register_diopi_python(py::module_& m);
}  // namespace diopi

}  // namespace dipu
