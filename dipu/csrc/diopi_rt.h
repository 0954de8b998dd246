// The DIOPI runtime as the native core provides it to C op libraries (dipu/include/diopi/diopirt.h)
// and to the C++ code that calls them: the generated C++ wrappers and the Python trampoline
// (diopi_call.cpp). See Note [DIOPI handles] and Note [Loading a C op library] in diopi_rt.cpp.
#pragma once

#include "../include/diopi/aten_dtypes.h"
#include "../include/diopi/diopirt.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include <array>
#include <list>
#include <string>
#include <vector>

namespace dipu::diopi {

// What a diopiContextHandle_t points to: one per call, on the caller's stack
// (`Context ctx(device_index);`). It keeps what diopiRequireTensor/Buffer made alive until the
// caller has taken the call's results. Lists, not deques: the handles given out stay valid as a list
// grows too, and an empty std::list allocates nothing, where libstdc++'s deque allocates its map and a
// first block on construction (about 100 ns for the two per C call, measured: most calls require
// nothing).
struct Context {
  explicit Context(c10::DeviceIndex device) : device(device) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  c10::DeviceIndex device;
  std::list<at::Tensor> required;
  // Tensors the runtime handed out that are not the caller's (generator states).
  std::list<at::Tensor> held;
  // The outputs the caller allocated for this call alone, which may take a result's memory (dipuTakeResult,
  // Note [Taken results] in allocator.cpp); null slots are unused.
  std::array<const at::Tensor*, 3> fresh{};
};

inline diopiContextHandle_t handle(Context& ctx) { return reinterpret_cast<diopiContextHandle_t>(&ctx); }
inline Context& context(diopiContextHandle_t ctx) { return *reinterpret_cast<Context*>(ctx); }

// A tensor handle is the address of an at::Tensor the caller owns for the call; an undefined
// tensor (an optional argument left out) is the null handle.
inline diopiTensorHandle_t handle(at::Tensor& t) {
  return t.defined() ? reinterpret_cast<diopiTensorHandle_t>(&t) : nullptr;
}
inline diopiConstTensorHandle_t handle(const at::Tensor& t) {
  return t.defined() ? reinterpret_cast<diopiConstTensorHandle_t>(&t) : nullptr;
}
inline const at::Tensor& tensor(diopiConstTensorHandle_t th) { return *reinterpret_cast<const at::Tensor*>(th); }
inline at::Tensor& tensor(diopiTensorHandle_t th) { return *reinterpret_cast<at::Tensor*>(th); }

// A generator handle is the address of an at::Generator the caller owns for the call.
inline diopiGeneratorHandle_t handle(at::Generator& g) {
  return g.defined() ? reinterpret_cast<diopiGeneratorHandle_t>(&g) : nullptr;
}

// Floating scalars travel as float64, integral ones as int64, bools as bool (ival 0/1).
diopiScalar_t scalar(const at::Scalar& value);
inline diopiSize_t size(c10::IntArrayRef values) {
  return diopiSize_t{values.data(), static_cast<int64_t>(values.size())};
}
// The dtypes DIOPI and torch share (the C++ wrappers convert with them too, Note [Generated C++ wrappers]).
inline diopiDtype_t diopi_dtype(at::ScalarType type) { return diopi_dtypes::to_diopi(type); }
at::ScalarType aten_dtype(diopiDtype_t type);  // throws for diopi_dtype_unsupported and tfloat32
const char* status_name(diopiError_t status);

// The loaded C op library (DIPU_DIOPI_IMPL=<path to .so>); see Note [Loading a C op library].
struct CLibrary {
  std::string path;
  void* dl = nullptr;  // dlopen's handle
  const char* (*last_error)() = nullptr;  // the library's diopiGetLastErrorString, if it has one
  // The library's function called `diopi_name`, or null.
  void* find(const char* diopi_name) const;
  // The library's last error text ("" when it has no diopiGetLastErrorString or says nothing).
  std::string last_error_text() const;
};
// Null when no C library is loaded.
const CLibrary* c_library();
// Opens `path` (error: c10::Error naming the path and dlerror's reason) and makes it the process's
// C library; the runtime functions are made visible to it first. Returns the library.
const CLibrary& load_c_library(const std::string& path);

// True for diopiSuccess. For another status: false for diopiForceFallbackToCPU/diopiNoImplement (the caller
// falls back); otherwise throws the c10::Error naming the DIOPI function and the library's last
// error string.
bool check_status_slow(diopiError_t status, const char* diopi_name);
inline bool status_ok(diopiError_t status, const char* diopi_name) {
  return status == diopiSuccess || check_status_slow(status, diopi_name);
}

}  // namespace dipu::diopi
