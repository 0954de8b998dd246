// The bridge from the native core to the Python vendor runtime (dipu/runtime.py's DeviceRuntime):
// the registered vendor, the start of its runtime, and every call into it (GIL, pending Python
// errors, failures turned into c10::Errors naming the vendor and the method). It is the bottom
// of the core: it uses no other file of dipu/csrc, and every file that talks to the vendor
// does so through it.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace py = pybind11;

namespace dipu {

constexpr c10::DeviceType kDipu = c10::DeviceType::PrivateUse1;

// Note [Vendor method table]
// Every DeviceRuntime method the native core calls, named once. A call site names a
// VendorMethod, never a string, so the core can call nothing outside this table;
// tests/test_vendor_contract.py reads the table to check it against the contract
// (Note [The vendor contract is what the core calls] in dipu/runtime.py).
#define DIPU_VENDOR_METHODS(X) \
  X(set_device)                \
  X(synchronize_device)        \
  X(malloc)                    \
  X(free)                      \
  X(memcpy_h2d)                \
  X(memcpy_d2h)                \
  X(memcpy_d2d)                \
  X(mem_get_info)              \
  X(host_malloc)               \
  X(host_free)                 \
  X(create_stream)             \
  X(destroy_stream)            \
  X(synchronize_stream)        \
  X(query_stream)              \
  X(stream_wait_event)         \
  X(set_current_stream)        \
  X(create_event)              \
  X(destroy_event)             \
  X(record_event)              \
  X(synchronize_event)         \
  X(query_event)               \
  X(event_elapsed_time)        \
  X(start_tracing)             \
  X(stop_tracing)

enum class VendorMethod {
#define DIPU_VENDOR_METHOD_ENUMERATOR(name) name,
  DIPU_VENDOR_METHODS(DIPU_VENDOR_METHOD_ENUMERATOR)
#undef DIPU_VENDOR_METHOD_ENUMERATOR
};
// The Python name of `method`.
const char* method_name(VendorMethod method);

struct Vendor {
  py::object runtime;             // the dipu.runtime.DeviceRuntime instance
  std::string name;
  int device_count = 0;
  bool has_alias = false;         // vendor memory is addressable as `alias_type`
  c10::DeviceType alias_type = c10::DeviceType::CPU;
  bool has_pinned = false;        // vendor implements host_malloc/host_free
  bool has_stream_hook = false;   // vendor implements set_current_stream
  py::object make_native_generator;  // callable(index) -> torch.Generator
};

// Makes `v` the vendor of this process, for good (it is never destroyed: its py::objects
// must not die after the interpreter). Fails if one is installed, or for a device count
// PyTorch cannot index.
void install_vendor(std::unique_ptr<Vendor> v);
Vendor& vendor();
bool vendor_ready();
// Set at interpreter exit: from then on nothing calls into Python.
extern std::atomic<bool> g_shutdown;

// ---- lazy initialization (Note [Lazy initialization] in dipu/device/_initialization.py) ----
// True once the vendor runtime has started (vendor.initialize(), default generators); false
// again in a forked child of a started parent, where any device use must fail.
extern std::atomic<bool> g_initialized;
void lazy_init_slow();
// Starts the vendor runtime on first use, through torch.dipu._lazy_init (which raises in a
// forked child of an initialized parent). Free once initialized: one atomic load.
inline void ensure_initialized() {
  if (C10_UNLIKELY(!g_initialized.load(std::memory_order_acquire))) lazy_init_slow();
}

// Calls vendor.<method>(args...) holding the GIL, preserving any pending Python
// exception, and turns a Python exception into a c10::Error naming the vendor.
py::object call_vendor_raw(VendorMethod method, const py::tuple& args);
template <typename... Args>
py::object call_vendor_locked(VendorMethod method, Args&&... args) {
  return call_vendor_raw(method, py::make_tuple(std::forward<Args>(args)...));
}
template <typename R, typename... Args>
R call_vendor(VendorMethod method, Args&&... args) {
  py::gil_scoped_acquire gil;
  py::object r = call_vendor_locked(method, std::forward<Args>(args)...);
  if constexpr (!std::is_void_v<R>) return r.cast<R>();
}
inline uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Fails unless `index` names one of the vendor's devices.
void check_device_index(c10::DeviceIndex index);
// Copies bytes between host and device memory through the vendor's memcpy methods (a plain
// memcpy host to host); see Note [Copies: alias or staging] in ops.cpp.
void copy_bytes(void* dst, c10::Device dst_dev, const void* src, c10::Device src_dev,
                size_t nbytes);

}  // namespace dipu
