// ATen's CPU kernels called directly into a function's outputs, where an ATen op only returns new tensors
// (Note [ATen's CPU kernels, called directly]).
#pragma once

#include "support.h"

#include <ATen/Context.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/Version.h>

#include <dlfcn.h>

#include <string>

namespace dipu::torch_cpp {

// Note [ATen's CPU kernels, called directly]
// native_layer_norm and its backward have no out= overload of their own (ATen's generated one copies a
// functional result), so through at::_ops a call allocates ATen's outputs and copies them into the
// function's: three allocations and three copies more than the CPU spends, half again the cost of a small
// layer norm. Below the op, ATen computes through a dispatch stub (LayerNormKernel, declared in
// ATen/native/layer_norm.h) whose CPU kernel writes into the tensors it is given. That kernel is one of the
// stub's per-ISA static members (DEFAULT, AVX2, AVX512, ...): ATen picks by its CPU capability, which
// at::get_cpu_capability() reports (ATEN_CPU_CAPABILITY included). Which members a torch build defines
// depends on that build's macros, which no header records, so the members beyond DEFAULT are looked up by
// name: DEFAULT's own symbol, found with dladdr, with its member name swapped for the capability's. A build
// lacking the member leaves DEFAULT (or, for AVX512, AVX2, as ATen falls back); a stub with no CPU kernel
// at all gives null, and the function takes the at::_ops path. The kernel is called only on the CPU alias
// type, with the layout and dtypes the op itself hands it (contiguous, one dtype, shapes as the op checks
// them); anything else takes the at::_ops path, whose errors are ATen's.
template <class Stub>
typename Stub::FnPtr cpu_kernel() {
  using Base = at::native::DispatchStub<typename Stub::FnPtr, Stub>;
  static const typename Stub::FnPtr chosen = [] {
    const typename Stub::FnPtr fallback = Base::DEFAULT;
    Dl_info info{};
    const std::string suffix = "7DEFAULTE";  // the mangled member name, the symbol's last component
    if (dladdr(reinterpret_cast<const void*>(&Base::DEFAULT), &info) == 0 || info.dli_sname == nullptr ||
        info.dli_saddr != reinterpret_cast<const void*>(&Base::DEFAULT))
      return fallback;
    std::string name = info.dli_sname;
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      return fallback;
    name.resize(name.size() - suffix.size());
    void* library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);  // the library defining the stub
    if (library == nullptr) return fallback;
    const std::string capability = at::get_cpu_capability();
    for (const std::string& member : {capability, capability == "AVX512" ? std::string("AVX2") : std::string()}) {
      if (member.empty() || member == "DEFAULT") break;
      const auto* slot = reinterpret_cast<const typename Stub::FnPtr*>(
          dlsym(library, (name + std::to_string(member.size()) + member + "E").c_str()));
      if (slot != nullptr && *slot != nullptr) {
        dlclose(library);  // only drops the reference dlopen added: the library stays loaded
        return *slot;
      }
    }
    dlclose(library);
    return fallback;
  }();
  return g_alias_type == c10::DeviceType::CPU ? chosen : nullptr;
}

// A handle's tensor when it is on `device` (the call's), contiguous, of dtype `type` and `numel` elements: what a
// direct kernel may read or write; null otherwise (the at::_ops path then takes the call).
inline const at::Tensor* plain(diopiConstTensorHandle_t h, c10::DeviceIndex device, at::ScalarType type,
                               int64_t numel) {
  if (h == nullptr) return nullptr;
  const at::Tensor& t = tensor(h);
  const bool ok = t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == device &&
                  t.layout() == at::kStrided && t.scalar_type() == type && t.numel() == numel && t.is_contiguous() &&
                  !t.is_conj() && !t.is_neg();
  return ok ? &t : nullptr;
}
inline at::Tensor* plain(diopiTensorHandle_t h, c10::DeviceIndex device, at::ScalarType type, int64_t numel) {
  return const_cast<at::Tensor*>(plain(static_cast<diopiConstTensorHandle_t>(h), device, type, numel));
}

}  // namespace dipu::torch_cpp
