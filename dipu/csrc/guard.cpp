// The PrivateUse1 device guard: what PyTorch asks of a device type (current device and stream,
// events) answered from the per-thread state of streams.cpp and the vendor's events.
#include "core.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace dipu {
namespace {

struct EventRecord {
  Handle handle;
  c10::DeviceIndex device;
  bool timing;
};

// "dipu" without an index means the current device.
c10::Device resolve(c10::Device d) { return d.has_index() ? d : c10::Device(kDipu, current_device()); }

struct DipuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDipu; }

  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kDipu, current_device()}; }
  void setDevice(c10::Device d) const override {
    check_device_index(d.index());
    set_guard_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { set_guard_device(d.index()); }

  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::UNSAFE, resolve(d), 0); }
  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return pool_stream(resolve(device), priority);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return exchange_stream(s); }
  c10::DeviceIndex deviceCount() const noexcept override { return vendor_ready() ? vendor().device_count : 0; }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ", device_index,
                " does not match recording stream's ", "device index ", stream.device_index(), ".");
    auto* rec = static_cast<EventRecord*>(*event);
    if (!rec) {
      bool timing = flag == c10::EventFlag::BACKEND_DEFAULT;
      rec = new EventRecord{runtime().create_event(stream.device_index(), timing), stream.device_index(), timing};
      *event = rec;
    }
    runtime().record_event(rec->device, rec->handle, stream_native_handle(stream));
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    auto* rec = static_cast<EventRecord*>(event);
    runtime().stream_wait_event(stream.device_index(), stream_native_handle(stream), rec->handle);
  }
  bool queryEvent(void* event) const override {
    if (!event) return true;
    auto* rec = static_cast<EventRecord*>(event);
    return runtime().query_event(rec->device, rec->handle);
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (!event || g_shutdown.load() || !g_initialized.load()) return;  // g_shutdown: set at interpreter exit
    auto* rec = static_cast<EventRecord*>(event);
    try {
      runtime().destroy_event(rec->device, rec->handle);
      delete rec;
    } catch (...) {
      // Destruction must not throw; a failed vendor destroy leaks one event.
    }
  }
  void synchronizeEvent(void* event) const override {
    if (!event) return;
    auto* rec = static_cast<EventRecord*>(event);
    runtime().synchronize_event(rec->device, rec->handle);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    auto* a = static_cast<EventRecord*>(start);
    auto* b = static_cast<EventRecord*>(end);
    TORCH_CHECK(a->timing && b->timing, "Both events must be created with enable_timing=True to measure elapsed time.");
    return runtime().event_elapsed_time(a->device, a->handle, b->handle);
  }

  bool queryStream(const c10::Stream& stream) const override {
    return runtime().query_stream(stream.device_index(), stream_native_handle(stream));
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    runtime().synchronize_stream(stream.device_index(), stream_native_handle(stream));
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override { runtime().synchronize_device(index); }
  void recordDataPtrOnStream(const c10::DataPtr& ptr, const c10::Stream& stream) const override {
    record_stream(ptr, stream);
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, DipuGuardImpl);

}  // namespace dipu
