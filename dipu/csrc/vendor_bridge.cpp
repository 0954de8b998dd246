// The bridge from the native core to the vendor runtime; see vendor_bridge.h.
#include "vendor_bridge.h"

#include <cstring>
#include <limits>

namespace dipu {

std::atomic<bool> g_shutdown{false};
std::atomic<bool> g_initialized{false};
namespace {
Vendor* g_vendor = nullptr;
}  // namespace

const char* method_name(VendorMethod method) {
  switch (method) {
#define DIPU_VENDOR_METHOD_NAME(name) \
  case VendorMethod::name: return #name;
    DIPU_VENDOR_METHODS(DIPU_VENDOR_METHOD_NAME)
#undef DIPU_VENDOR_METHOD_NAME
  }
  return "?";
}

void install_vendor(std::unique_ptr<Vendor> v) {
  TORCH_CHECK(!g_vendor, "dipu: the native core is already initialized with vendor '", g_vendor ? g_vendor->name : "",
              "'");
  constexpr int max_devices = std::numeric_limits<c10::DeviceIndex>::max();
  TORCH_CHECK(v->device_count >= 0 && v->device_count <= max_devices, "dipu: the ", v->name, " vendor reports ",
              v->device_count, " devices; PyTorch indexes at most ", max_devices, " devices of one type");
  g_vendor = v.release();
}

Vendor& vendor() {
  TORCH_CHECK(g_vendor, "dipu: the native core was used before `import dipu` initialized it");
  return *g_vendor;
}
bool vendor_ready() { return g_vendor != nullptr; }

void lazy_init_slow() {
  TORCH_CHECK(!g_shutdown.load(), "dipu: device used after interpreter shutdown");
  vendor().start();
}

void vendor_failed(VendorMethod method, const std::string& why) {
  TORCH_CHECK(false, "dipu: vendor '", vendor_ready() ? vendor().name : "?", "' failed in ", method_name(method), ": ",
              why);
}

void check_device_index(c10::DeviceIndex index) {
  int count = vendor_ready() ? vendor().device_count : 0;
  TORCH_CHECK(index >= 0 && index < count, "Invalid device dipu:", static_cast<int>(index), ": ", count, " dipu device",
              count == 1 ? " is" : "s are", " available (valid indices: 0..", count - 1, ")");
}

void copy_bytes(void* dst, c10::Device dst_dev, const void* src, c10::Device src_dev, size_t nbytes) {
  if (nbytes == 0) return;
  bool dst_dipu = dst_dev.type() == kDipu, src_dipu = src_dev.type() == kDipu;
  if (!dst_dipu && !src_dipu) {
    std::memcpy(dst, src, nbytes);
  } else if (dst_dipu && !src_dipu) {
    runtime().memcpy_h2d(dst_dev.index(), dst, src, nbytes);
  } else if (!dst_dipu) {
    runtime().memcpy_d2h(src_dev.index(), dst, src, nbytes);
  } else {
    runtime().memcpy_d2d(dst_dev.index(), dst, src_dev.index(), src, nbytes);
  }
}

}  // namespace dipu
