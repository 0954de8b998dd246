// The dipu native core: everything PyTorch decides in C++ for a PrivateUse1
// backend (allocator, device guard, hooks, metadata ops, the CPU fallback).
// The vendor runtime (a Python DeviceRuntime or a C plug-in) is reached only
// through vendor_bridge.h; the core calls it only off the hot path: cache
// misses, stream/event operations and copies for vendors without a native alias
// device.
#pragma once

#include "vendor_bridge.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <string>
#include <vector>

namespace dipu {

// Whether `t` is a tensor on a dipu device (false for an undefined one).
inline bool on_dipu(const at::Tensor& t) { return t.defined() && t.device().type() == kDipu; }
// dipu's device guard (guard.cpp), as the profiler and the op statistics drive events through it.
inline const c10::impl::DeviceGuardImplInterface* dipu_guard() { return c10::impl::getDeviceGuardImpl(kDipu); }

// ---- the current device and streams (streams.cpp) -------------------------
c10::DeviceIndex current_device();
// torch.dipu.set_device: the thread's current device, which the vendor is told about too.
void set_device(c10::DeviceIndex index);
// The device guard's switch of the current device: the thread's index only (guards switch on
// every op; the vendor, whose calls all name their device, need not follow).
void set_guard_device(c10::DeviceIndex index) noexcept;
c10::Stream current_stream(c10::DeviceIndex index);
// Makes `stream` its device's current stream on this thread; returns the previous one.
c10::Stream exchange_stream(const c10::Stream& stream);
// The next stream of `device`'s pool (Note [Stream ids]).
c10::Stream pool_stream(c10::Device device, int priority);
// The vendor's handle of a stream (null for a device's default stream).
Handle stream_native_handle(const c10::Stream& stream);
void streams_init(int device_count);

// ---- the caching allocator (allocator.cpp) --------------------------------
// One statistic as torch.cuda reports it: current, peak, and the running totals.
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(int64_t n) {
    current += n;
    peak = std::max(peak, current);
    allocated += n;
  }
  void decrease(int64_t n) {
    current -= n;
    freed += n;
  }
};
// Index 0: every block; 1: small blocks (<= 1 MiB); 2: large blocks, as in torch.cuda.
using StatArray = std::array<Stat, 3>;
struct DeviceStats {
  StatArray allocation, segment, active, allocated_bytes, reserved_bytes, active_bytes, requested_bytes;
  StatArray inactive_split, inactive_split_bytes;  // free blocks of segments that are split
  Stat oversize_allocations, oversize_segments;  // at least max_split_size_mb (Note [Oversize blocks])
  int64_t num_alloc_retries = 0, num_ooms = 0, num_device_alloc = 0, num_device_free = 0;
};
// The caching allocator's tunables, as PYTORCH_ALLOC_CONF spells them (Note [Allocator settings] in
// dipu/_alloc_conf.py parses and checks them).
struct AllocatorSettings {
  size_t max_split_size = SIZE_MAX;  // bytes; SIZE_MAX: no oversize blocks
  double garbage_collection_threshold = 0;  // share of the memory cap; 0: off
  // Divisions of each power-of-two interval from 1 MiB (index 0: <= 1 MiB, 1: <= 2 MiB, ...); 0 or 1: none.
  std::array<size_t, 16> roundup_power2_divisions{};
  bool expandable_segments = false;  // Note [Expandable segments]; only set where Vendor::has_vm
};
void set_allocator_settings(const AllocatorSettings& settings);
// The max_split_size in effect, in bytes; -1 where there is none (as torch.cuda.memory_stats reports it).
int64_t allocator_max_split_size();
c10::Allocator* device_allocator();
// Reallocates `storage` to `newsize` bytes on its device, keeping the contents.
void resize_storage_bytes(const c10::Storage& storage, size_t newsize);
void allocator_init(int device_count, bool caching);
void empty_cache();
// A DataPtr of dipu:device over the memory of `native` (a storage of the alias device), counted as dipu's
// allocation while it lives; empty where the memory cap refuses it. Note [Taken results] in allocator.cpp.
c10::DataPtr take_memory(const c10::Storage& native, c10::DeviceIndex device);
DeviceStats device_stats(c10::DeviceIndex index);
void reset_peak_stats(c10::DeviceIndex index);
void reset_accumulated_stats(c10::DeviceIndex index);
void record_stream(const c10::DataPtr& ptr, const c10::Stream& stream);
// The device owning `ptr` (an allocation's start or any byte inside it).
std::optional<c10::DeviceIndex> device_of_pointer(const void* ptr);
// Caps what the allocator reserves on `index` (0: no cap); see Note [Memory fraction].
void set_memory_limit(c10::DeviceIndex index, int64_t bytes);
// See Note [Memory history]. `when`: 0 off, 1 state, 2 alloc, 3 all (c10's RecordContext).
void record_memory_history(bool trace, int when, bool cpp_frames, size_t max_entries, bool clear_history,
                           const std::vector<std::string>& skip_actions);
// What torch.cuda.memory._snapshot() reports, before its stacks are symbolized (python.h's memory_snapshot
// makes the dict of it).
struct MemorySnapshot {
  struct Block {  // one block of a segment, in address order
    uintptr_t address;
    size_t size, requested;
    const char* state;  // active_allocated, active_pending_free or inactive
    std::shared_ptr<c10::GatheredContext> context;  // null: not recorded
  };
  struct Segment {  // memory the vendor allocated at once, split into blocks (Note [Splitting blocks])
    c10::DeviceIndex device;
    c10::StreamId stream;
    uintptr_t address;
    size_t total_size;
    bool small;  // of the small pool
    bool expandable;  // Note [Expandable segments]
    std::shared_ptr<c10::GatheredContext> segment_context;  // null: not recorded
    std::vector<Block> blocks;
  };
  struct Event {
    const char* action;
    uintptr_t address;  // for an oom: the bytes the device still had free
    bool oom;
    size_t size;
    c10::StreamId stream;
    int64_t time_us;
    std::shared_ptr<c10::GatheredContext> context;
  };
  std::vector<Segment> segments;  // by address
  std::vector<std::vector<Event>> traces;  // per device
  bool caching;
};
MemorySnapshot memory_snapshot_data();
c10::Allocator* pinned_allocator();
bool is_pinned_pointer(const void* ptr);

// ---- copies and aliases (copies.cpp) ---------------------------------------
// Zero-copy tensor of the vendor's alias device over `t`'s memory.
at::Tensor native_alias(const at::Tensor& t);

// ---- the device timeline of the profiler (profiler.cpp) --------------------
// True while a profiler session records the device timeline (Note [Device timeline]).
extern std::atomic<bool> g_timeline_active;
// Called by generated kernels' device guard (exchange_device) while the timeline is active.
void profiler_on_kernel(c10::DeviceIndex index);
void profiler_init();
bool profiler_has_device_timeline();

// ---- generators and hooks (hooks.cpp) -------------------------------------
void hooks_register();
void hooks_init(std::vector<at::Generator> default_natives);
// The native (alias-device) generator behind a dipu generator: the dipu generator's own member, valid while
// the dipu generator lives.
const at::Generator& native_generator(const at::Generator& dipu_gen);
const at::Generator& default_generator(c10::DeviceIndex index);

}  // namespace dipu
