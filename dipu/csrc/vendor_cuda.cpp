// Note [The CUDA runtime in the core]
// The cuda vendor (vendor/cuda/__init__.py) declares its runtime native: the core serves it with this C++
// runtime, so allocation, copies, streams and events never take the GIL or run Python. The Python
// CudaRuntime stays the reference and is used instead with DIPU_CUDA_RUNTIME=python.
// - Devices, streams and events go through c10's CUDA DeviceGuardImpl, which torch's CUDA build registers
//   (the core links no CUDA library and builds against any torch). Streams are torch's own pool streams and
//   set_current_stream is the guard's exchangeStream, so CUDA's current stream is dipu's, as the Python
//   runtime keeps it with torch.cuda.set_stream: the kernels the op library launches on CUDA aliases, and
//   NCCL's collectives, run on the stream the user picked with torch.dipu.stream. An event is created at its
//   first record, as torch's own; an event never recorded is complete and makes nothing wait.
// - Memory and copies call the CUDA runtime library torch loaded (cudaMalloc, cudaMemcpy, ..., found with
//   dlsym: the copy torch uses, or the file the vendor names), never PyTorch's CUDA caching allocator, which
//   would cache under dipu's cache. An allocation that finds the device full first empties that allocator's
//   cache (native CUDA work in the process may hold memory), then answers "out of memory" to dipu's allocator,
//   which raises torch.OutOfMemoryError.
// - Virtual memory (Note [Expandable segments] in allocator.cpp) calls the CUDA driver's VM API (cuMemAddressReserve,
//   cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease, cuMemAddressFree), found with dlsym in the
//   driver torch loaded (libcuda.so.1) at the first call. Each granule is mapped from an allocation of its own,
//   released at once (the mapping keeps it alive), and unmapped alone (cuMemUnmap takes whole mappings), so any
//   run of granules can go back. A driver without the API reserves nothing: the allocator keeps plain segments.
// - Calls that wait (synchronize_*, the synchronous copies) release the GIL.
// Making the runtime touches no device: CUDA starts at the first device use (Note [Lazy initialization]).
#include "python.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

namespace dipu {
namespace {

constexpr c10::DeviceType kCuda = c10::DeviceType::CUDA;
constexpr int kSuccess = 0;  // cudaSuccess
constexpr int kOutOfMemory = 2;  // cudaErrorMemoryAllocation
constexpr int kMemcpyDefault = 4;  // cudaMemcpyDefault: the direction follows from unified addressing

// The CUDA runtime functions the runtime calls, with their C signatures (cudaError_t is an int enum).
struct Cudart {
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*mem_get_info)(size_t*, size_t*) = nullptr;
  int (*host_alloc)(void**, size_t, unsigned) = nullptr;
  int (*free_host)(void*) = nullptr;
  int (*get_last_error)() = nullptr;
  const char* (*get_error_string)(int) = nullptr;
};

// The CUDA driver's virtual-memory functions and the structures they take (cuda.h's layout; CUresult is an int
// enum, CUdeviceptr an unsigned long long).
struct CuLocation {
  int type;  // CU_MEM_LOCATION_TYPE_DEVICE = 1
  int id;
};
struct CuAllocationProp {
  int type;  // CU_MEM_ALLOCATION_TYPE_PINNED = 1
  int handle_types;  // CU_MEM_HANDLE_TYPE_NONE = 0
  CuLocation location;
  void* win32_metadata;
  unsigned char flags[8];
};
struct CuAccessDesc {
  CuLocation location;
  int flags;  // CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
};
constexpr int kCuOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
struct CudaDriverVm {
  int (*granularity)(size_t*, const CuAllocationProp*, int) = nullptr;  // cuMemGetAllocationGranularity
  int (*reserve)(unsigned long long*, size_t, size_t, unsigned long long, unsigned long long) = nullptr;
  int (*create)(unsigned long long*, size_t, const CuAllocationProp*, unsigned long long) = nullptr;
  int (*map)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long) = nullptr;
  int (*set_access)(unsigned long long, size_t, const CuAccessDesc*, size_t) = nullptr;
  int (*unmap)(unsigned long long, size_t) = nullptr;
  int (*release)(unsigned long long) = nullptr;
  int (*address_free)(unsigned long long, size_t) = nullptr;
};

// A dipu event: the CUDA event torch's guard creates at the first record, with the flag that says whether it
// can time.
struct Event {
  void* event = nullptr;
  c10::EventFlag flag;
  c10::DeviceIndex device;
};

class CudaRuntime final : public Runtime {
 public:
  explicit CudaRuntime(const std::string& library) : library_(library.empty() ? "loaded by torch" : library) {
    TORCH_CHECK(c10::impl::hasDeviceGuardImpl(kCuda),
                "dipu cuda vendor: this torch has no CUDA device guard (it is not a CUDA build); install a CUDA "
                "build of torch or set DIPU_VENDOR to another vendor");
    guard_ = c10::impl::getDeviceGuardImpl(kCuda);
    void* lib = RTLD_DEFAULT;
    if (!library.empty()) {
      lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
      const char* why = lib ? nullptr : dlerror();
      TORCH_CHECK(lib, "dipu cuda vendor: cannot open the CUDA runtime library ", library, ": ",
                  why ? why : "unknown reason");
    }
    std::string missing;
    bind(lib, "cudaMalloc", cudart_.malloc, missing);
    bind(lib, "cudaFree", cudart_.free, missing);
    bind(lib, "cudaMemcpy", cudart_.memcpy, missing);
    bind(lib, "cudaMemGetInfo", cudart_.mem_get_info, missing);
    bind(lib, "cudaHostAlloc", cudart_.host_alloc, missing);
    bind(lib, "cudaFreeHost", cudart_.free_host, missing);
    bind(lib, "cudaGetLastError", cudart_.get_last_error, missing);
    bind(lib, "cudaGetErrorString", cudart_.get_error_string, missing);
    TORCH_CHECK(missing.empty(), "dipu cuda vendor: the CUDA runtime library (", library_, ") lacks", missing);
  }

  void set_device(int index) override { started().setDevice(device(index)); }
  void synchronize_device(int index) override {
    auto& guard = started();
    waiting([&] { guard.synchronizeDevice(static_cast<c10::DeviceIndex>(index)); });
  }

  void* malloc(int index, size_t nbytes) override {
    OnDevice on(started(), index);
    void* ptr = nullptr;
    int status = cudart_.malloc(&ptr, nbytes);
    if (status == kOutOfMemory) {
      cudart_.get_last_error();  // clears the runtime's sticky last error
      empty_native_cache();
      status = cudart_.malloc(&ptr, nbytes);
    }
    if (status == kOutOfMemory) {
      cudart_.get_last_error();
      return nullptr;
    }
    check(status, VendorMethod::malloc);
    return ptr;
  }
  void free(int index, void* ptr, size_t) override {
    OnDevice on(started(), index);
    check(cudart_.free(ptr), VendorMethod::free);
  }
  void memcpy_h2d(int, void* dst, const void* src, size_t nbytes) override {
    copy(dst, src, nbytes, VendorMethod::memcpy_h2d);
  }
  void memcpy_d2h(int, void* dst, const void* src, size_t nbytes) override {
    copy(dst, src, nbytes, VendorMethod::memcpy_d2h);
  }
  void memcpy_d2d(int, void* dst, int, const void* src, size_t nbytes) override {
    copy(dst, src, nbytes, VendorMethod::memcpy_d2d);
  }
  std::pair<size_t, size_t> mem_get_info(int index) override {
    OnDevice on(started(), index);
    size_t free = 0, total = 0;
    check(cudart_.mem_get_info(&free, &total), VendorMethod::mem_get_info);
    return {free, total};
  }
  void* host_malloc(size_t nbytes) override {
    started();
    void* ptr = nullptr;
    const int status = cudart_.host_alloc(&ptr, nbytes, 0);
    if (status == kOutOfMemory) {
      cudart_.get_last_error();
      return nullptr;
    }
    check(status, VendorMethod::host_malloc);
    return ptr;
  }
  void host_free(void* ptr, size_t) override { check(cudart_.free_host(ptr), VendorMethod::host_free); }

  Handle create_stream(int index, int priority) override {
    // torch's priorities: 0 is the default, lower is more urgent; CUDA has none above the default
    return new c10::Stream(started().getNewStream(device(index), std::min(priority, 0)));
  }
  void destroy_stream(int, Handle stream) override {
    delete static_cast<c10::Stream*>(stream);  // the CUDA stream is torch's pool's: never destroyed
  }
  void synchronize_stream(int index, Handle stream) override {
    auto& guard = started();
    const c10::Stream s = cuda_stream(index, stream);
    waiting([&] { guard.synchronizeStream(s); });
  }
  bool query_stream(int index, Handle stream) override { return started().queryStream(cuda_stream(index, stream)); }
  void stream_wait_event(int index, Handle stream, Handle event) override {
    auto* e = static_cast<Event*>(event);
    if (e->event) started().block(e->event, cuda_stream(index, stream));
  }
  void set_current_stream(int index, Handle stream) override { started().exchangeStream(cuda_stream(index, stream)); }

  Handle create_event(int index, bool timing) override {
    return new Event{nullptr, timing ? c10::EventFlag::BACKEND_DEFAULT : c10::EventFlag::PYTORCH_DEFAULT,
                     static_cast<c10::DeviceIndex>(index)};
  }
  void destroy_event(int, Handle event) override {
    auto* e = static_cast<Event*>(event);
    if (e->event) guard_->destroyEvent(e->event, e->device);
    delete e;
  }
  void record_event(int index, Handle event, Handle stream) override {
    auto* e = static_cast<Event*>(event);
    started().record(&e->event, cuda_stream(index, stream), static_cast<c10::DeviceIndex>(index), e->flag);
  }
  void synchronize_event(int, Handle event) override {
    auto* e = static_cast<Event*>(event);
    if (!e->event) return;
    auto& guard = started();
    waiting([&] { guard.synchronizeEvent(e->event); });
  }
  bool query_event(int, Handle event) override {
    auto* e = static_cast<Event*>(event);
    return !e->event || started().queryEvent(e->event);
  }
  double event_elapsed_time(int index, Handle start, Handle end) override {
    auto *a = static_cast<Event*>(start), *b = static_cast<Event*>(end);
    if (!a->event || !b->event) vendor_failed(VendorMethod::event_elapsed_time, "both events must be recorded first");
    return started().elapsedTime(a->event, b->event, static_cast<c10::DeviceIndex>(index));
  }
  void start_tracing() override {}
  void stop_tracing() override {}

  size_t vm_granularity(int index) override {
    const CudaDriverVm* vm = driver_vm();
    if (!vm) return size_t{2} << 20;  // a driver without the API: vm_reserve answers null
    const CuAllocationProp prop = allocation_prop(index);
    size_t granularity = 0;
    check_driver(vm->granularity(&granularity, &prop, 0), VendorMethod::vm_granularity);
    return granularity;
  }
  void* vm_reserve(int index, size_t nbytes) override {
    const CudaDriverVm* vm = driver_vm();
    if (!vm) return nullptr;
    OnDevice on(started(), index);
    unsigned long long ptr = 0;
    if (vm->reserve(&ptr, nbytes, 0, 0, 0) != kSuccess) return nullptr;
    return reinterpret_cast<void*>(ptr);
  }
  bool vm_map(int index, void* ptr, size_t nbytes) override {
    const CudaDriverVm* vm = driver_vm();
    OnDevice on(started(), index);
    const CuAllocationProp prop = allocation_prop(index);
    const size_t step = vm_granularity(index);
    const auto start = static_cast<unsigned long long>(addr(ptr));
    for (size_t done = 0; done < nbytes; done += step) {
      unsigned long long handle = 0;
      int status = vm->create(&handle, step, &prop, 0);
      if (status == kCuOutOfMemory) {
        empty_native_cache();
        status = vm->create(&handle, step, &prop, 0);
      }
      if (status == kCuOutOfMemory) {
        unmap(start, done, step);
        return false;
      }
      check_driver(status, VendorMethod::vm_map);
      status = vm->map(start + done, step, 0, handle, 0);
      vm->release(handle);  // the mapping holds the memory from here on
      check_driver(status, VendorMethod::vm_map);
    }
    const CuAccessDesc access{{1, index}, 3};
    check_driver(vm->set_access(start, nbytes, &access, 1), VendorMethod::vm_map);
    return true;
  }
  void vm_unmap(int index, void* ptr, size_t nbytes) override {
    OnDevice on(started(), index);
    unmap(static_cast<unsigned long long>(addr(ptr)), nbytes, vm_granularity(index));
  }
  void vm_release(int index, void* ptr, size_t nbytes) override {
    OnDevice on(started(), index);
    check_driver(driver_vm()->address_free(static_cast<unsigned long long>(addr(ptr)), nbytes),
                 VendorMethod::vm_release);
  }

  // The torch stream behind a handle of this runtime (null: the device's default stream).
  c10::Stream cuda_stream(int index, Handle stream) const {
    return stream ? *static_cast<const c10::Stream*>(stream) : guard_->getDefaultStream(device(index));
  }
  const std::string& library() const { return library_; }

 private:
  // Makes `index` the current CUDA device for a scope.
  class OnDevice {
   public:
    OnDevice(const c10::impl::DeviceGuardImplInterface& guard, int index)
        : guard_(guard), previous_(guard.exchangeDevice(device(index))) {}
    ~OnDevice() { guard_.uncheckedSetDevice(previous_); }
    OnDevice(const OnDevice&) = delete;
    OnDevice& operator=(const OnDevice&) = delete;

   private:
    const c10::impl::DeviceGuardImplInterface& guard_;
    c10::Device previous_;
  };

  static c10::Device device(int index) { return c10::Device(kCuda, static_cast<c10::DeviceIndex>(index)); }

  template <typename F>
  static void bind(void* lib, const char* name, F& function, std::string& missing) {
    function = reinterpret_cast<F>(dlsym(lib, name));
    if (!function) missing += std::string(" ") + name;
  }

  // The guard, with the runtime started (Note [Lazy initialization]).
  const c10::impl::DeviceGuardImplInterface& started() const {
    ensure_initialized();
    return *guard_;
  }

  void copy(void* dst, const void* src, size_t nbytes, VendorMethod method) {
    started();
    int status = kSuccess;
    waiting([&] { status = cudart_.memcpy(dst, src, nbytes, kMemcpyDefault); });
    check(status, method);
  }

  void check(int status, VendorMethod method) const {
    if (status == kSuccess) return;
    cudart_.get_last_error();
    const char* text = cudart_.get_error_string(status);
    vendor_failed(method, std::string(text ? text : "unknown CUDA error") + " (cudaError " + std::to_string(status) +
                              ", CUDA runtime " + library_ + ")");
  }

  static CuAllocationProp allocation_prop(int index) { return CuAllocationProp{1, 0, {1, index}, nullptr, {}}; }

  // The driver's virtual-memory functions, bound at the first call; null where the driver lacks them.
  const CudaDriverVm* driver_vm() {
    std::call_once(vm_once_, [this] {
      void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
      if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!lib) return;
      std::string missing;
      bind(lib, "cuMemGetAllocationGranularity", vm_.granularity, missing);
      bind(lib, "cuMemAddressReserve", vm_.reserve, missing);
      bind(lib, "cuMemCreate", vm_.create, missing);
      bind(lib, "cuMemMap", vm_.map, missing);
      bind(lib, "cuMemSetAccess", vm_.set_access, missing);
      bind(lib, "cuMemUnmap", vm_.unmap, missing);
      bind(lib, "cuMemRelease", vm_.release, missing);
      bind(lib, "cuMemAddressFree", vm_.address_free, missing);
      has_vm_ = missing.empty();
    });
    return has_vm_ ? &vm_ : nullptr;
  }

  // cuMemUnmap takes whole mappings: one granule at a time, as vm_map made them.
  void unmap(unsigned long long start, size_t nbytes, size_t step) {
    for (size_t done = 0; done < nbytes; done += step)
      check_driver(driver_vm()->unmap(start + done, step), VendorMethod::vm_unmap);
  }

  void check_driver(int status, VendorMethod method) const {
    if (status == kSuccess) return;
    vendor_failed(method, "CUDA driver error " + std::to_string(status) + " (the virtual-memory API of libcuda.so.1)");
  }

  // What PyTorch's own CUDA caching allocator holds in this process goes back to the device.
  static void empty_native_cache() {
    if (auto* allocator = dynamic_cast<c10::DeviceAllocator*>(c10::GetAllocator(kCuda))) allocator->emptyCache();
  }

  const c10::impl::DeviceGuardImplInterface* guard_ = nullptr;
  Cudart cudart_;
  std::once_flag vm_once_;
  CudaDriverVm vm_;
  bool has_vm_ = false;
  std::string library_;
};

}  // namespace

std::unique_ptr<Runtime> cuda_runtime(const std::string& library) { return std::make_unique<CudaRuntime>(library); }

std::optional<c10::Stream> cuda_stream_of(Handle stream) {
  auto* cuda = dynamic_cast<CudaRuntime*>(&runtime());
  if (!cuda || !stream) return std::nullopt;
  return cuda->cuda_stream(0, stream);
}

void register_cuda_runtime_python(py::module& m) {
  m.def(
      "check_cuda_runtime",
      [](const std::string& library) {
        // Makes the runtime (no device call), which checks what it needs; raises naming what is missing.
        return CudaRuntime(library).library();
      },
      py::arg("library") = "",
      "Whether the native CUDA runtime can be made here (Note [The CUDA runtime in the core]).");
}

}  // namespace dipu
