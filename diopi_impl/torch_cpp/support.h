// What the generated functions of the torch_cpp op library use (Note [The ATen library in C++] in
// scripts/autogen/dest/aten_library.py): native aliases of DIOPI handles, conversions of DIOPI's C values to
// ATen's, and the guard that keeps every C++ exception inside the library.
#pragma once

#include <diopi/aten_aliases.h>
#include <diopi/aten_dtypes.h>
#include <diopi/diopirt.h>

#include <ATen/core/Tensor.h>
#include <ATen/ScalarOps.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/TensorImpl.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dipu::torch_cpp {

// The device type of the native aliases (the vendor's native_device_type), set once after loading.
extern c10::DeviceType g_alias_type;
// What the last call that failed on this thread said (diopiGetLastErrorString).
extern thread_local std::string g_last_error;

// A tensor handle is the address of an at::Tensor the caller owns for the call (Note [DIOPI handles] in
// dipu/csrc/diopi_rt.cpp): the same contract DeepLink's DIPU gives its libraries.
inline const at::Tensor& tensor(diopiConstTensorHandle_t h) { return *reinterpret_cast<const at::Tensor*>(h); }

// A tensor on another device than the call's: an error, never the CPU fallback (which would compute with
// it). Note [Exceptions in the C++ library].
struct DeviceMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The device the call runs on: the wrapper made it the current dipu device.
inline c10::DeviceIndex current_device() {
  static const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  return impl->getDevice().index();
}

// Note [Native aliases in C++]
// The tensor of the alias device over the same memory, sizes, strides and offset as the dipu tensor t, and
// with its conjugate and negative bits, as the core's native_alias makes it. Unlike the core's, it does
// not own the memory: it lives only for the call, while the caller holds t (diopi/aten_aliases.h). It is
// also the device check, as the Python library's alias is: a 0-dim CPU tensor (a wrapped Python number, a CPU
// step count) passes through, as ATen lets it beside any device; a tensor on another device is refused with
// torch's message.
// The generated functions read the call's device once and pass it (`device`): reading it costs a virtual call
// into the core, a tenth of a tiny op's overhead when done for each argument.
inline at::Tensor alias_of(const at::Tensor& t, c10::DeviceIndex index) {
  if (!t.defined()) return t;
  if (t.device().type() != c10::DeviceType::PrivateUse1 || t.device().index() != index) {
    if (t.device().is_cpu() && t.dim() == 0) return t;
    throw DeviceMismatch(c10::str("Expected all tensors to be on the same device, but found at least two devices, ",
                                  c10::Device(c10::DeviceType::PrivateUse1, index), " and ", t.device(), "!"));
  }
  return diopi_aliases::call_alias(t, c10::Device(g_alias_type, g_alias_type == c10::DeviceType::CPU ? -1 : index));
}
inline at::Tensor alias_of(const at::Tensor& t) { return alias_of(t, current_device()); }
// A list-taking function's argument: a CPU tensor of any size passes (the Tensor of scalars of
// _foreach_addcmul_, a step count), as alias_tensors lets it in Python.
inline at::Tensor alias_or_cpu(diopiConstTensorHandle_t h, c10::DeviceIndex device) {
  if (h == nullptr) return at::Tensor();
  const at::Tensor& t = tensor(h);
  return t.device().is_cpu() ? t : alias_of(t, device);
}
inline at::Tensor alias_or_cpu(diopiConstTensorHandle_t h) { return alias_or_cpu(h, current_device()); }
inline at::Tensor alias_of(diopiConstTensorHandle_t h, c10::DeviceIndex device) {
  return h == nullptr ? at::Tensor() : alias_of(tensor(h), device);
}
inline at::Tensor alias_of(diopiConstTensorHandle_t h) { return alias_of(h, current_device()); }
inline std::optional<at::Tensor> optional_alias(diopiConstTensorHandle_t h, c10::DeviceIndex device) {
  return h == nullptr ? std::nullopt : std::optional<at::Tensor>(alias_of(tensor(h), device));
}
inline std::optional<at::Tensor> optional_alias(diopiConstTensorHandle_t h) {
  return optional_alias(h, current_device());
}
// A list given as NULL is empty whatever its run's length (the fused optimizers' max_exp_avg_sqs without amsgrad).
inline std::vector<at::Tensor> aliases_of(const diopiConstTensorHandle_t* hs, int64_t n, c10::DeviceIndex device) {
  if (hs == nullptr) return {};
  std::vector<at::Tensor> result;
  result.reserve(n);
  for (int64_t i = 0; i < n; ++i) result.push_back(alias_or_cpu(hs[i], device));
  return result;
}
inline std::vector<at::Tensor> aliases_of(const diopiTensorHandle_t* hs, int64_t n, c10::DeviceIndex device) {
  return aliases_of(reinterpret_cast<const diopiConstTensorHandle_t*>(hs), n, device);
}
template <class Handle>
inline std::vector<at::Tensor> aliases_of(const Handle* hs, int64_t n) {
  return aliases_of(hs, n, current_device());
}

// Note [Native generators] in dipu/csrc/hooks.cpp: a generator handle is a dipu generator (the device's default
// where the caller passed none), and an ATen kernel on the native aliases draws from the generator of the alias
// device that it owns, as the Python library's native_generator does, so both libraries draw the same numbers.
// Another device's generator is refused with torch's words for it.
inline std::optional<at::Generator> native_generator(diopiGeneratorHandle_t h) {
  at::Generator fallback;
  if (h == nullptr) {
    fallback = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::PrivateUse1, current_device()));
    h = reinterpret_cast<diopiGeneratorHandle_t>(&fallback);
  }
  const at::Generator& given = *reinterpret_cast<const at::Generator*>(h);
  if (given.device().type() != c10::DeviceType::PrivateUse1)
    throw DeviceMismatch(c10::str("Expected a '", c10::DeviceType::PrivateUse1,
                                  "' device type for generator but found '", given.device().type(), "'"));
  diopiGeneratorHandle_t native = nullptr;
  TORCH_CHECK(dipuGetNativeGenerator != nullptr && dipuGetNativeGenerator(h, &native) == diopiSuccess,
              "torch_cpp: the dipu runtime gave no native generator");
  return *reinterpret_cast<const at::Generator*>(native);
}

// Whether a generated function may call ATen's CPU kernel directly (Note [ATen's CPU kernels without the
// dispatcher] in scripts/autogen/dest/aten_library.py): the aliases are CPU tensors, and none carries a key
// beyond those every CPU tensor has (a conjugate or negative bit, which the dispatcher resolves first).
inline bool plain(const at::Tensor& t) {
  static const c10::DispatchKeySet own = c10::DispatchKeySet(c10::DispatchKey::CPU) |
                                         c10::getAutogradRelatedKeySetFromBackend(c10::BackendComponent::CPUBit) |
                                         c10::getAutocastRelatedKeySetFromBackend(c10::BackendComponent::CPUBit);
  return !t.defined() || own.has_all(t.key_set());
}
inline bool plain(const std::optional<at::Tensor>& t) { return !t.has_value() || plain(*t); }
inline bool plain(const std::vector<at::Tensor>& ts) {
  for (const at::Tensor& t : ts)
    if (!plain(t)) return false;
  return true;
}
template <class... Tensors>
inline bool plain_cpu(const Tensors&... tensors) {
  return g_alias_type == c10::DeviceType::CPU && (plain(tensors) && ...);
}

// Note [Derived arguments] in dipu/diopi/library.py: a reduction keeps its dims when its output has the input's
// rank and the input is not a scalar (KEPT_DIMS there).
inline bool kept_dims(const at::Tensor& out, const at::Tensor& input) {
  return out.dim() == input.dim() && input.dim() > 0;
}

// Note [Scalars in C calls] in dipu/csrc: floats as float64, integers as int64, bools as bool.
inline at::Scalar scalar(const diopiScalar_t* s) {
  switch (s->stype) {
    case diopi_dtype_float64:
    case diopi_dtype_float32:
    case diopi_dtype_float16:
    case diopi_dtype_bfloat16: return at::Scalar(s->fval);
    case diopi_dtype_bool: return at::Scalar(s->ival != 0);
    default: return at::Scalar(static_cast<int64_t>(s->ival));
  }
}
// Note [Scalars as wrapped numbers]
// ATen makes the Scalar_out overloads of add, sub, mul and div by computing the functional result and copying it
// into out. So the generated diopiMulScalar and its kin (WRAPPED_NUMBER in scripts/autogen/dest/aten_library.py)
// apply the Tensor overload (mul.out) with the Scalar as a wrapped number, as ATen's functional Scalar overload
// and Python's torch.mul(t, 0.5, out=o) do: it promotes as a Python number, and the result goes straight to out.
inline at::Tensor wrapped_number(const diopiScalar_t* s) { return at::native::wrapped_scalar_tensor(scalar(s)); }
inline std::optional<at::Scalar> optional_scalar(const diopiScalar_t* s) {
  return s == nullptr ? std::nullopt : std::optional<at::Scalar>(scalar(s));
}
inline std::vector<at::Scalar> scalars(const diopiScalar_t* s, int64_t n) {
  std::vector<at::Scalar> result;
  result.reserve(n);
  for (int64_t i = 0; i < n; ++i) result.push_back(scalar(s + i));
  return result;
}

// An absent optional size list is {nullptr, 0} (c_sizes in dipu/kernels/cpp/wrapper_support.h).
inline at::IntArrayRef sizes(diopiSize_t s) { return at::IntArrayRef(s.data, static_cast<size_t>(s.len)); }
inline at::OptionalIntArrayRef optional_sizes(diopiSize_t s) {
  return s.data == nullptr && s.len == 0 ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(sizes(s));
}
inline c10::SymIntArrayRef sym_sizes(diopiSize_t s) { return c10::fromIntArrayRefSlow(sizes(s)); }
inline at::OptionalSymIntArrayRef optional_sym_sizes(diopiSize_t s) {
  return s.data == nullptr && s.len == 0 ? at::OptionalSymIntArrayRef() : at::OptionalSymIntArrayRef(sym_sizes(s));
}

template <class T>
inline std::optional<T> optional_value(const T* p) {
  return p == nullptr ? std::nullopt : std::optional<T>(*p);
}
inline std::optional<c10::string_view> optional_text(const char* p) {
  return p == nullptr ? std::nullopt : std::optional<c10::string_view>(c10::string_view(p));
}
inline std::optional<c10::string_view> rounding_mode(diopiRoundMode_t mode) {
  switch (mode) {
    case RoundModeTrunc: return c10::string_view("trunc");
    case RoundModeFloor: return c10::string_view("floor");
    default: return std::nullopt;
  }
}
at::ScalarType dtype(diopiDtype_t type);
diopiDtype_t c_dtype(at::ScalarType type);
inline std::optional<at::ScalarType> optional_dtype(const diopiDtype_t* p) {
  return p == nullptr ? std::nullopt : std::optional<at::ScalarType>(dtype(*p));
}

// Note [Results copied into outputs]
// A function whose ATen op only returns new tensors copies them into its outputs' aliases. ATen's copy_ costs
// about as much as a tiny op itself (dispatch, TensorIterator), so where both are contiguous CPU tensors of one
// dtype, shape and lazy bits the bytes are moved directly; anything else (another device, a layout, a cast, a
// broadcast) goes through copy_.
inline void copy_into(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.is_cpu() && src.is_cpu() && src.layout() == at::kStrided && dst.scalar_type() == src.scalar_type() &&
      dst.sizes() == src.sizes() && dst.is_contiguous() && src.is_contiguous() && dst.is_conj() == src.is_conj() &&
      dst.is_neg() == src.is_neg()) {
    if (src.numel() > 0) std::memmove(dst.mutable_data_ptr(), src.const_data_ptr(), src.nbytes());
    return;
  }
  dst.copy_(src);
}

// Whether the output `out` took the memory of `result` (ATen's new tensor) instead of a copy: where the caller
// allocated out for this call alone and result is laid out as it (dipuTakeResult, Note [Taken results] in
// dipu/csrc/allocator.cpp). Takes nothing from a runtime without the function.
inline bool took(diopiContextHandle_t ctx, diopiTensorHandle_t out, const at::Tensor& result) {
  return dipuTakeResult != nullptr && ctx != nullptr && out != nullptr &&
         dipuTakeResult(ctx, out, reinterpret_cast<diopiConstTensorHandle_t>(&result)) == diopiSuccess;
}

// Note [Outputs a function allocates] in dipu/diopi/context.py: a new contiguous dipu tensor from the call's
// context holding ATen's result, stored in *slot (the Python library's require_copy). It takes the result's
// memory where it can (dipuRequireResult, Note [Taken results] in dipu/csrc/allocator.cpp), else copies.
inline void require_copy(diopiContextHandle_t ctx, diopiTensorHandle_t* slot, const at::Tensor& result) {
  if (dipuRequireResult != nullptr &&
      dipuRequireResult(ctx, slot, reinterpret_cast<diopiConstTensorHandle_t>(&result)) == diopiSuccess)
    return;
  const diopiSize_t shape{result.sizes().data(), result.dim()};
  diopiTensorHandle_t h = nullptr;
  if (diopiRequireTensor(ctx, &h, &shape, nullptr, c_dtype(result.scalar_type()), diopi_device) != diopiSuccess)
    throw std::runtime_error("torch_cpp: the dipu runtime could not allocate an output (diopiRequireTensor)");
  copy_into(alias_of(tensor(h)), result);
  *slot = h;
}
inline void require_copies(diopiContextHandle_t ctx, diopiTensorHandle_t* slots, const at::Tensor& result) {
  require_copy(ctx, slots, result);
}
inline void require_copies(diopiContextHandle_t ctx, diopiTensorHandle_t* slots,
                           const std::vector<at::Tensor>& results) {
  for (size_t i = 0; i < results.size(); ++i) require_copy(ctx, slots + i, results[i]);
}

// Note [Exceptions in the C++ library]
// Nothing may unwind into a C caller. An ATen kernel that throws is refusing these arguments (a shape, a
// dtype its CPU or CUDA kernel lacks) before it writes anything: the library answers
// diopiForceFallbackToCPU, so the CPU fallback runs the op and raises the CPU's own error, with its exact
// type and text, where the arguments are wrong, as the Python torch library lets ATen's exception through.
// The message is kept for diopiGetLastErrorString and the fallback is counted (dipu.fallback_counts()).
// A tensor on another device is the one exception: the fallback would compute with it, so that is
// diopiErrorOccurred, whose message the user reads in dipu's error (torch's own text).
template <class Body>
inline diopiError_t guarded(Body&& body) noexcept {
  try {
    body();
    return diopiSuccess;
  } catch (const DeviceMismatch& error) {
    g_last_error = error.what();
    return diopiErrorOccurred;
  } catch (const c10::Error& error) {
    g_last_error = error.what_without_backtrace();
  } catch (const std::exception& error) {
    g_last_error = error.what();
  } catch (...) {
    g_last_error = "an exception of unknown type";
  }
  return diopiForceFallbackToCPU;
}

}  // namespace dipu::torch_cpp
