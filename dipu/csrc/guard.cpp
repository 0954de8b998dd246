// The PrivateUse1 device guard: current device and stream per thread, streams
// and events backed by the vendor runtime.
//
// Note [Stream ids]
// Stream id 0 is each device's default stream (vendor handle None). Other ids
// index a per-device pool of vendor streams, created lazily and handed out
// round-robin like CUDA's stream pool, so `torch.dipu.Stream()` in a loop does
// not create unbounded vendor streams. Streams live until the process ends.
#include "core.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <memory>

namespace dipu {
namespace {

constexpr int kStreamsPerDevice = 32;

thread_local c10::DeviceIndex tl_device = 0;
// The device the vendor was last told about on this thread (-1: none yet).
thread_local c10::DeviceIndex tl_vendor_device = -1;
thread_local std::vector<c10::StreamId> tl_streams;

struct StreamPool {
  std::atomic<py::object*> handles[kStreamsPerDevice] = {};
  std::atomic<int> next{0};
};
std::unique_ptr<StreamPool[]> g_streams;  // one pool per device

c10::StreamId& current_stream_slot(c10::DeviceIndex index) {
  if (tl_streams.size() <= static_cast<size_t>(index))
    tl_streams.resize(std::max<int>(vendor().device_count, index + 1), 0);
  return tl_streams[index];
}

void tell_vendor_device(c10::DeviceIndex index) {
  if (tl_vendor_device == index || g_shutdown.load()) return;
  call_vendor<void>(VendorMethod::set_device, index);
  tl_vendor_device = index;
}

void tell_vendor_stream(const c10::Stream& stream) {
  if (!vendor().has_stream_hook || g_shutdown.load()) return;
  py::gil_scoped_acquire gil;
  call_vendor_locked(VendorMethod::set_current_stream, stream.device_index(), stream_handle(stream));
}

struct EventRecord {
  py::object handle;
  c10::DeviceIndex device;
  bool timing;
};

// "dipu" without an index means the current device.
c10::Device resolve(c10::Device d) { return d.has_index() ? d : c10::Device(kDipu, tl_device); }

struct DipuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDipu; }

  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kDipu, tl_device}; }
  void setDevice(c10::Device d) const override {
    check_device_index(d.index());
    tl_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { tl_device = d.index(); }

  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, resolve(d), 0);
  }
  c10::Stream getNewStream(c10::Device device, int priority) const override {
    c10::Device d = resolve(device);
    check_device_index(d.index());
    auto& pool = g_streams[d.index()];
    int slot = pool.next.fetch_add(1) % kStreamsPerDevice;
    if (!pool.handles[slot].load()) {
      py::gil_scoped_acquire gil;
      auto* handle = new py::object(call_vendor_locked(VendorMethod::create_stream, d.index(), priority));
      py::object* expected = nullptr;
      if (!pool.handles[slot].compare_exchange_strong(expected, handle)) {
        call_vendor_locked(VendorMethod::destroy_stream, d.index(), *handle);  // another thread won
        delete handle;
      }
    }
    return c10::Stream(c10::Stream::UNSAFE, d, slot + 1);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto& slot = current_stream_slot(s.device_index());
    c10::Stream old(c10::Stream::UNSAFE, s.device(), slot);
    slot = s.id();
    if (old != s) tell_vendor_stream(s);
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return vendor_ready() ? vendor().device_count : 0;
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", device_index, " does not match recording stream's ",
                "device index ", stream.device_index(), ".");
    py::gil_scoped_acquire gil;
    auto* rec = static_cast<EventRecord*>(*event);
    if (!rec) {
      bool timing = flag == c10::EventFlag::BACKEND_DEFAULT;
      rec = new EventRecord{
          call_vendor_locked(VendorMethod::create_event, stream.device_index(), timing),
          stream.device_index(), timing};
      *event = rec;
    }
    call_vendor_locked(VendorMethod::record_event, rec->device, rec->handle, stream_handle(stream));
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    auto* rec = static_cast<EventRecord*>(event);
    py::gil_scoped_acquire gil;
    call_vendor_locked(VendorMethod::stream_wait_event, stream.device_index(), stream_handle(stream),
                       rec->handle);
  }
  bool queryEvent(void* event) const override {
    if (!event) return true;
    auto* rec = static_cast<EventRecord*>(event);
    py::gil_scoped_acquire gil;
    return call_vendor_locked(VendorMethod::query_event, rec->device, rec->handle).cast<bool>();
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (!event || g_shutdown.load() || !g_initialized.load() || !Py_IsInitialized()) return;
    auto* rec = static_cast<EventRecord*>(event);
    try {
      py::gil_scoped_acquire gil;
      call_vendor_locked(VendorMethod::destroy_event, rec->device, rec->handle);
      delete rec;
    } catch (...) {
      // Destruction must not throw; a failed vendor destroy leaks one event.
    }
  }
  void synchronizeEvent(void* event) const override {
    if (!event) return;
    auto* rec = static_cast<EventRecord*>(event);
    py::gil_scoped_acquire gil;
    call_vendor_locked(VendorMethod::synchronize_event, rec->device, rec->handle);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    auto* a = static_cast<EventRecord*>(start);
    auto* b = static_cast<EventRecord*>(end);
    TORCH_CHECK(a->timing && b->timing,
                "Both events must be created with enable_timing=True to measure elapsed time.");
    py::gil_scoped_acquire gil;
    return call_vendor_locked(VendorMethod::event_elapsed_time, a->device, a->handle, b->handle)
        .cast<double>();
  }

  bool queryStream(const c10::Stream& stream) const override {
    py::gil_scoped_acquire gil;
    return call_vendor_locked(VendorMethod::query_stream, stream.device_index(), stream_handle(stream))
        .cast<bool>();
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    py::gil_scoped_acquire gil;
    call_vendor_locked(VendorMethod::synchronize_stream, stream.device_index(), stream_handle(stream));
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    call_vendor<void>(VendorMethod::synchronize_device, index);
  }
  void recordDataPtrOnStream(const c10::DataPtr& ptr, const c10::Stream& stream) const override {
    record_stream(ptr, stream);
  }
};

}  // namespace

c10::DeviceIndex current_device() { return tl_device; }

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  tl_device = index;
  tell_vendor_device(index);
}

c10::Stream current_stream(c10::DeviceIndex index) {
  if (index < 0) index = tl_device;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDipu, index), current_stream_slot(index));
}

py::object stream_handle(const c10::Stream& stream) {
  if (stream.id() == 0) return py::none();
  check_device_index(stream.device_index());
  py::object* handle = nullptr;
  if (stream.id() > 0 && stream.id() <= kStreamsPerDevice)
    handle = g_streams[stream.device_index()].handles[stream.id() - 1].load();
  TORCH_CHECK(handle, "dipu: unknown stream id ", stream.id(), " on dipu:",
              static_cast<int>(stream.device_index()));
  return *handle;
}

void guard_init(int device_count) { g_streams.reset(new StreamPool[device_count]); }

C10_REGISTER_GUARD_IMPL(PrivateUse1, DipuGuardImpl);

}  // namespace dipu
