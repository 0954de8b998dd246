// The bridge from the native core to the vendor runtime: the registered vendor, the start of its
// runtime, and every call into it. The runtime is either a Python object (dipu/runtime.py's
// DeviceRuntime) or a C plug-in (dipu/include/dipu/custom_runtime.h); the core calls both through
// one typed interface, Runtime (Note [Two kinds of vendor runtime]). It is the bottom of the
// core: it uses no other file of dipu/csrc, and every file that talks to the vendor does so
// through it. Like the rest of the runtime layer it knows nothing of Python (Note [The core's
// layers] in python.h): the two Python-facing runtimes are made in the bindings.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

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
  X(stop_tracing)              \
  X(vm_granularity)            \
  X(vm_reserve)                \
  X(vm_map)                    \
  X(vm_unmap)                  \
  X(vm_release)

enum class VendorMethod {
#define DIPU_VENDOR_METHOD_ENUMERATOR(name) name,
  DIPU_VENDOR_METHODS(DIPU_VENDOR_METHOD_ENUMERATOR)
#undef DIPU_VENDOR_METHOD_ENUMERATOR
};
// The Python name of `method`.
const char* method_name(VendorMethod method);

// Note [Two kinds of vendor runtime]
// A vendor's runtime is a Python DeviceRuntime (vendor_python.cpp) or a C plug-in's function
// table (vendor_plugin.cpp), and the cuda vendor's is the core's own C++ runtime over the CUDA
// runtime library (vendor_cuda.cpp, Note [The CUDA runtime in the core]); the core sees only this interface, with C types: device indices,
// pointers, byte counts and opaque handles. The Python runtime takes the GIL inside each call
// and turns Python exceptions into c10::Errors naming the vendor and the method; the plug-in
// runtime never takes the GIL, and releases it around calls that wait (synchronize_*), so a
// C vendor's allocation, copy, stream and event calls cost no Python. Handles are the vendor's
// own for a plug-in (possibly null); for a Python vendor, a heap-held py::object the runtime
// deletes when the handle is destroyed. A null stream handle is the device's default stream
// (Note [Stream ids]). Method names are DIPU_VENDOR_METHODS', so the two runtimes and the
// contract (dipu/runtime.py) cannot drift apart.
using Handle = void*;
class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual void set_device(int index) = 0;
  virtual void synchronize_device(int index) = 0;
  // Null when the device is out of memory; otherwise aligned to at least kMinAlignment.
  virtual void* malloc(int index, size_t nbytes) = 0;
  virtual void free(int index, void* ptr, size_t nbytes) = 0;
  virtual void memcpy_h2d(int index, void* dst, const void* src, size_t nbytes) = 0;
  virtual void memcpy_d2h(int index, void* dst, const void* src, size_t nbytes) = 0;
  virtual void memcpy_d2d(int dst_index, void* dst, int src_index, const void* src, size_t nbytes) = 0;
  // (free, total) bytes.
  virtual std::pair<size_t, size_t> mem_get_info(int index) = 0;
  // Page-locked host memory: only called when Vendor::has_pinned.
  virtual void* host_malloc(size_t nbytes) = 0;
  virtual void host_free(void* ptr, size_t nbytes) = 0;
  virtual Handle create_stream(int index, int priority) = 0;
  virtual void destroy_stream(int index, Handle stream) = 0;
  virtual void synchronize_stream(int index, Handle stream) = 0;
  virtual bool query_stream(int index, Handle stream) = 0;
  virtual void stream_wait_event(int index, Handle stream, Handle event) = 0;
  // Only called when Vendor::has_stream_hook.
  virtual void set_current_stream(int index, Handle stream) = 0;
  virtual Handle create_event(int index, bool timing) = 0;
  virtual void destroy_event(int index, Handle event) = 0;
  virtual void record_event(int index, Handle event, Handle stream) = 0;
  virtual void synchronize_event(int index, Handle event) = 0;
  virtual bool query_event(int index, Handle event) = 0;
  // Milliseconds between two recorded timing events.
  virtual double event_elapsed_time(int index, Handle start, Handle end) = 0;
  virtual void start_tracing() = 0;
  virtual void stop_tracing() = 0;
  // Virtual memory, for expandable segments (Note [Expandable segments] in allocator.cpp): only called when
  // Vendor::has_vm. The granularity is a power of two; every address and size passed is a multiple of it.
  virtual size_t vm_granularity(int index) = 0;
  // A range of addresses with no memory behind it; null where the device has no range that large.
  virtual void* vm_reserve(int index, size_t nbytes) = 0;
  // Puts memory behind [ptr, ptr + nbytes) of a reserved range; false when the device is out of memory.
  virtual bool vm_map(int index, void* ptr, size_t nbytes) = 0;
  virtual void vm_unmap(int index, void* ptr, size_t nbytes) = 0;
  // Gives back a range vm_reserve made, wholly unmapped.
  virtual void vm_release(int index, void* ptr, size_t nbytes) = 0;
};
constexpr size_t kMinAlignment = 64;

struct Vendor {
  std::unique_ptr<Runtime> runtime;
  std::string name;
  int device_count = 0;
  bool has_alias = false;  // vendor memory is addressable as `alias_type`
  c10::DeviceType alias_type = c10::DeviceType::CPU;
  bool has_pinned = false;  // vendor implements host_malloc/host_free
  bool has_stream_hook = false;  // vendor implements set_current_stream
  bool has_vm = false;  // vendor implements the vm_* methods (Note [Expandable segments] in allocator.cpp)
  // The alias device's generator behind device `index`'s dipu generator (Note [Native generators]).
  std::function<at::Generator(c10::DeviceIndex)> make_native_generator;
  // Starts the runtime on first use (Note [Lazy initialization]): torch.dipu._lazy_init, which raises in a
  // forked child of an initialized parent.
  std::function<void()> start;
  // Runs `wait`, which may block this thread until another one is done with a vendor call, without the GIL
  // where this thread holds it (the other thread's call may need the GIL).
  std::function<void(const std::function<void()>& wait)> blocking;
};

// Makes `v` the vendor of this process, for good (it is never destroyed: what its functions hold
// of Python must not die after the interpreter). Fails if one is installed, or for a device count
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
// Starts the vendor runtime on first use, through Vendor::start. Free once initialized: one atomic load.
inline void ensure_initialized() {
  if (C10_UNLIKELY(!g_initialized.load(std::memory_order_acquire))) lazy_init_slow();
}

// The vendor's runtime; every call into the vendor goes through it.
inline Runtime& runtime() { return *vendor().runtime; }

// A C runtime plug-in (vendor_plugin.cpp, Note [C runtime plug-ins]): loaded from `path`, named
// by the environment variable `variable` in errors.
class RuntimePlugin;
std::shared_ptr<RuntimePlugin> load_plugin(const std::string& path, const char* variable);
// Turns a failed vendor call into the c10::Error every runtime raises: it names the vendor and
// the method (Note [Two kinds of vendor runtime]).
[[noreturn]] void vendor_failed(VendorMethod method, const std::string& why);
inline uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Fails unless `index` names one of the vendor's devices.
void check_device_index(c10::DeviceIndex index);
// Copies bytes between host and device memory through the vendor's memcpy methods (a plain
// memcpy host to host); see Note [Copies: alias or staging] in copies.cpp.
void copy_bytes(void* dst, c10::Device dst_dev, const void* src, c10::Device src_dev, size_t nbytes);

}  // namespace dipu
