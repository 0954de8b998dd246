// The current device and stream of each thread, and the vendor streams behind stream ids; the
// device guard (guard.cpp) and the allocator build on them, as c10/cuda's CUDAGuardImpl and
// caching allocator build on CUDAStream.
//
// Note [Stream ids]
// Stream id 0 is each device's default stream (vendor handle null). Other ids
// index a per-device pool of vendor streams, created lazily and handed out
// round-robin like CUDA's stream pool, so `torch.dipu.Stream()` in a loop does
// not create unbounded vendor streams. Streams live until the process ends.
#include "core.h"

#include <memory>
#include <thread>

namespace dipu {
namespace {

constexpr int kStreamsPerDevice = 32;

thread_local c10::DeviceIndex tl_device = 0;
// The device the vendor was last told about on this thread (-1: none yet).
thread_local c10::DeviceIndex tl_vendor_device = -1;
thread_local std::vector<c10::StreamId> tl_streams;

// A slot's handle is written once, by the thread that wins the slot (kEmpty -> kFilling), and
// read after kReady. The handle itself may be null (a plug-in may "create" null streams), so
// the state, not the handle, says whether the slot is filled.
enum SlotState : int { kEmpty, kFilling, kReady };
struct StreamPool {
  Handle handles[kStreamsPerDevice] = {};
  std::atomic<int> states[kStreamsPerDevice] = {};
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
  runtime().set_device(index);
  tl_vendor_device = index;
}

void tell_vendor_stream(const c10::Stream& stream) {
  if (!vendor().has_stream_hook || g_shutdown.load()) return;
  runtime().set_current_stream(stream.device_index(), stream_native_handle(stream));
}

}  // namespace

c10::DeviceIndex current_device() { return tl_device; }

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  tl_device = index;
  tell_vendor_device(index);
}

void set_guard_device(c10::DeviceIndex index) noexcept { tl_device = index; }

c10::Stream current_stream(c10::DeviceIndex index) {
  if (index < 0) index = tl_device;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDipu, index), current_stream_slot(index));
}

c10::Stream exchange_stream(const c10::Stream& stream) {
  auto& slot = current_stream_slot(stream.device_index());
  c10::Stream old(c10::Stream::UNSAFE, stream.device(), slot);
  slot = stream.id();
  if (old != stream) tell_vendor_stream(stream);
  return old;
}

c10::Stream pool_stream(c10::Device device, int priority) {
  check_device_index(device.index());
  auto& pool = g_streams[device.index()];
  int slot = pool.next.fetch_add(1) % kStreamsPerDevice;
  auto& state = pool.states[slot];
  if (state.load(std::memory_order_acquire) != kReady) {
    // Created without a lock: the vendor call may take the GIL, which a thread waiting here
    // could hold.
    Handle handle = runtime().create_stream(device.index(), priority);
    int expected = kEmpty;
    if (state.compare_exchange_strong(expected, kFilling)) {
      pool.handles[slot] = handle;
      state.store(kReady, std::memory_order_release);
    } else {
      runtime().destroy_stream(device.index(), handle);  // another thread filled the slot first
      while (state.load(std::memory_order_acquire) != kReady) std::this_thread::yield();
    }
  }
  return c10::Stream(c10::Stream::UNSAFE, device, slot + 1);
}

Handle stream_native_handle(const c10::Stream& stream) {
  if (stream.id() == 0) return nullptr;
  check_device_index(stream.device_index());
  auto& pool = g_streams[stream.device_index()];
  bool known = stream.id() > 0 && stream.id() <= kStreamsPerDevice &&
               pool.states[stream.id() - 1].load(std::memory_order_acquire) == kReady;
  TORCH_CHECK(known, "dipu: unknown stream id ", stream.id(), " on dipu:", static_cast<int>(stream.device_index()));
  return pool.handles[stream.id() - 1];
}

void streams_init(int device_count) { g_streams.reset(new StreamPool[device_count]); }

}  // namespace dipu
