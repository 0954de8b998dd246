// The runtime of a Python vendor: each call of the core becomes a call of the vendor's
// DeviceRuntime method of the same name (Note [Two kinds of vendor runtime]).
#include "python.h"

namespace dipu {
namespace {

// A call's result kind that makes a handle: the Python object, held on the heap.
struct NewHandle {};
template <typename R>
using Result = std::conditional_t<std::is_same_v<R, NewHandle>, Handle, R>;

class PythonRuntime final : public Runtime {
 public:
  explicit PythonRuntime(py::object runtime) : runtime_(std::move(runtime)) {}

  void set_device(int index) override { call<void>(VendorMethod::set_device, index); }
  void synchronize_device(int index) override { call<void>(VendorMethod::synchronize_device, index); }
  void* malloc(int index, size_t nbytes) override {
    return reinterpret_cast<void*>(call<uintptr_t>(VendorMethod::malloc, index, nbytes));
  }
  void free(int index, void* ptr, size_t) override { call<void>(VendorMethod::free, index, addr(ptr)); }
  void memcpy_h2d(int index, void* dst, const void* src, size_t nbytes) override {
    call<void>(VendorMethod::memcpy_h2d, index, addr(dst), addr(src), nbytes);
  }
  void memcpy_d2h(int index, void* dst, const void* src, size_t nbytes) override {
    call<void>(VendorMethod::memcpy_d2h, index, addr(dst), addr(src), nbytes);
  }
  void memcpy_d2d(int dst_index, void* dst, int src_index, const void* src, size_t nbytes) override {
    call<void>(VendorMethod::memcpy_d2d, dst_index, addr(dst), src_index, addr(src), nbytes);
  }
  std::pair<size_t, size_t> mem_get_info(int index) override {
    return call<std::pair<size_t, size_t>>(VendorMethod::mem_get_info, index);
  }
  void* host_malloc(size_t nbytes) override {
    return reinterpret_cast<void*>(call<uintptr_t>(VendorMethod::host_malloc, nbytes));
  }
  void host_free(void* ptr, size_t) override { call<void>(VendorMethod::host_free, addr(ptr)); }

  Handle create_stream(int index, int priority) override {
    return call<NewHandle>(VendorMethod::create_stream, index, priority);
  }
  void destroy_stream(int index, Handle stream) override {
    call<void>(VendorMethod::destroy_stream, index, stream);
    release(stream);
  }
  void synchronize_stream(int index, Handle stream) override {
    call<void>(VendorMethod::synchronize_stream, index, stream);
  }
  bool query_stream(int index, Handle stream) override { return call<bool>(VendorMethod::query_stream, index, stream); }
  void stream_wait_event(int index, Handle stream, Handle event) override {
    call<void>(VendorMethod::stream_wait_event, index, stream, event);
  }
  void set_current_stream(int index, Handle stream) override {
    call<void>(VendorMethod::set_current_stream, index, stream);
  }
  Handle create_event(int index, bool timing) override {
    return call<NewHandle>(VendorMethod::create_event, index, timing);
  }
  void destroy_event(int index, Handle event) override {
    call<void>(VendorMethod::destroy_event, index, event);
    release(event);
  }
  void record_event(int index, Handle event, Handle stream) override {
    call<void>(VendorMethod::record_event, index, event, stream);
  }
  void synchronize_event(int index, Handle event) override {
    call<void>(VendorMethod::synchronize_event, index, event);
  }
  bool query_event(int index, Handle event) override { return call<bool>(VendorMethod::query_event, index, event); }
  double event_elapsed_time(int index, Handle start, Handle end) override {
    return call<double>(VendorMethod::event_elapsed_time, index, start, end);
  }
  void start_tracing() override { call<void>(VendorMethod::start_tracing); }
  void stop_tracing() override { call<void>(VendorMethod::stop_tracing); }
  size_t vm_granularity(int index) override { return call<size_t>(VendorMethod::vm_granularity, index); }
  void* vm_reserve(int index, size_t nbytes) override {
    return reinterpret_cast<void*>(call<uintptr_t>(VendorMethod::vm_reserve, index, nbytes));
  }
  bool vm_map(int index, void* ptr, size_t nbytes) override {
    return call<bool>(VendorMethod::vm_map, index, addr(ptr), nbytes);
  }
  void vm_unmap(int index, void* ptr, size_t nbytes) override {
    call<void>(VendorMethod::vm_unmap, index, addr(ptr), nbytes);
  }
  void vm_release(int index, void* ptr, size_t nbytes) override {
    call<void>(VendorMethod::vm_release, index, addr(ptr), nbytes);
  }
  // The vendor's object behind a handle this runtime made (None for null).
  py::object to_python(Handle handle) {
    py::gil_scoped_acquire gil;
    return object(handle);
  }

 private:
  // Calls runtime_.<method>(args...) and converts its result to R, all holding the GIL (no
  // Python object outlives it), preserving any Python exception already pending in the caller
  // (e.g. a tensor freed while Python unwinds) so that it is neither mistaken for, nor
  // clobbered by, this call's. A Handle argument is passed as its Python object.
  template <typename R, typename... Args>
  Result<R> call(VendorMethod method, const Args&... args) {
    const char* name = method_name(method);
    TORCH_CHECK(!g_shutdown.load(), "dipu: vendor call ", name, " after interpreter shutdown");
    ensure_initialized();  // every vendor call but device_count needs a started runtime
    py::gil_scoped_acquire gil;
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    std::string error;
    py::object result;
    try {
      result = runtime_.attr(name)(argument(args)...);
    } catch (py::error_already_set& e) {
      error = e.what();
    }
    PyErr_Restore(type, value, trace);
    if (!error.empty()) vendor_failed(method, error);
    if constexpr (std::is_same_v<R, NewHandle>) {
      return static_cast<Handle>(new py::object(std::move(result)));
    } else if constexpr (!std::is_void_v<R>) {
      try {
        return result.cast<R>();
      } catch (const py::cast_error&) {
        vendor_failed(method, "returned " + std::string(py::repr(result)) +
                                  ", not what dipu.runtime.DeviceRuntime says it returns");
      }
    }
  }
  template <typename T>
  static py::object argument(const T& value) {
    if constexpr (std::is_same_v<T, Handle>) {
      return object(value);
    } else {
      return py::cast(value);
    }
  }
  // Requires the GIL.
  static py::object object(Handle handle) { return handle ? *static_cast<py::object*>(handle) : py::none(); }
  static void release(Handle handle) {
    if (!handle) return;
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(handle);
  }

  py::object runtime_;
};

}  // namespace

std::unique_ptr<Runtime> python_runtime(py::object device_runtime) {
  return std::make_unique<PythonRuntime>(std::move(device_runtime));
}

py::object python_handle(Handle handle) {
  if (auto* python = dynamic_cast<PythonRuntime*>(&runtime())) return python->to_python(handle);
  py::gil_scoped_acquire gil;
  if (auto stream = cuda_stream_of(handle))  // what the Python cuda runtime's handle is: a torch.cuda.Stream
    return py::module_::import("torch.cuda")
        .attr("Stream")(py::arg("stream_id") = stream->id(), py::arg("device_index") = stream->device_index(),
                        py::arg("device_type") = static_cast<int>(stream->device_type()));
  // a C plug-in's own handle
  return handle ? py::object(py::int_(addr(handle))) : py::object(py::none());
}

}  // namespace dipu
