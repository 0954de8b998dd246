// Generators and the PrivateUse1 hooks.
//
// Note [Native generators]
// A dipu generator owns a generator of the vendor's alias device (a CPU
// generator for the simulated vendor) and delegates seed and state to it.
// Kernels that run on native aliases draw from that native generator, so
// `torch.manual_seed(0)` makes dipu random ops as reproducible as the native
// ones, and dipu RNG state stays separate from the CPU default generator.
#include "core.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>

#include <mutex>

namespace dipu {
namespace {

struct DipuGenerator final : public c10::GeneratorImpl {
  DipuGenerator(c10::DeviceIndex index, at::Generator native)
      : c10::GeneratorImpl(c10::Device(kDipu, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        native_(std::move(native)) {}

  void set_current_seed(uint64_t seed) override { native_.set_current_seed(seed); }
  void set_offset(uint64_t offset) override { native_.set_offset(offset); }
  uint64_t get_offset() const override { return native_.get_offset(); }
  uint64_t current_seed() const override { return native_.current_seed(); }
  uint64_t seed() override { return native_.seed(); }
  void set_state(const c10::TensorImpl& state) override { native_.unsafeGetGeneratorImpl()->set_state(state); }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return native_.unsafeGetGeneratorImpl()->get_state();
  }
  DipuGenerator* clone_impl() const override { return new DipuGenerator(device().index(), native_.clone()); }
  static c10::DeviceType device_type() { return kDipu; }

  at::Generator native_;
};

std::vector<at::Generator> g_default_generators;

at::Generator make_generator(c10::DeviceIndex index, at::Generator native) {
  return at::make_generator<DipuGenerator>(index, std::move(native));
}

at::Generator new_native_generator(c10::DeviceIndex index) { return vendor().make_native_generator(index); }

struct DipuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return vendor_ready() && vendor().device_count > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override { return default_generator(index); }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    ensure_initialized();
    if (index < 0) index = current_device();
    check_device_index(index);
    return make_generator(index, new_native_generator(index));
  }
  at::Device getDeviceFromPtr(void* data) const override {
    auto index = device_of_pointer(data);
    TORCH_CHECK(index.has_value(), "dipu: pointer ", data,
                " was not allocated by the dipu allocator, so its device is unknown");
    return {kDipu, *index};
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_pointer(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return g_initialized.load(); }
  // at::globalContext().lazyInitDevice(PrivateUse1): default generators, pinned memory, ...
  void init() const override { ensure_initialized(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::DeviceGuard guard(storage.device());
    resize_storage_bytes(storage, newsize);
  }
};

DipuHooks g_hooks;

}  // namespace

void hooks_register() {
  static std::once_flag once;
  std::call_once(once, [] { at::RegisterPrivateUse1HooksInterface(&g_hooks); });
}

void hooks_init(std::vector<at::Generator> default_natives) {
  g_default_generators.clear();
  for (size_t i = 0; i < default_natives.size(); ++i)
    g_default_generators.push_back(make_generator(static_cast<c10::DeviceIndex>(i), default_natives[i]));
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  ensure_initialized();
  if (index < 0) index = current_device();
  check_device_index(index);
  return g_default_generators.at(index);
}

const at::Generator& native_generator(const at::Generator& gen) {
  auto* impl = gen.unsafeGetGeneratorImpl();
  TORCH_CHECK(impl->device().type() == kDipu, "dipu: expected a dipu generator, got one for ", impl->device());
  return static_cast<DipuGenerator*>(impl)->native_;
}

}  // namespace dipu
