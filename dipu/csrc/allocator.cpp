// Note [Caching allocator]
// Vendor malloc/free are Python calls (microseconds) and often far slower on
// real devices, so the core keeps freed blocks and reuses them. Blocks are
// pooled per (device, stream): a block freed on stream S is only handed out
// again for allocations on S, because work queued on S may still read it.
// A block that was also used on other streams (Tensor.record_stream) waits in
// `pending` until an event recorded on each of those streams has completed.
// Vendor calls are made with the allocator mutex released: they take the GIL,
// and a thread holding the GIL may be waiting for this mutex.
// Note [Block ownership]
// A Block belongs to one thread at a time, or to the pools. The thread that took it from a pool
// (or from the vendor) owns it until it is freed; the DataPtr holding it, and free() until it
// puts the block back into `free_blocks` or `pending` under mutex_. From then on the pools own
// it: another thread may hand it out again, or empty_cache may return it to the vendor and
// delete it, so the freeing thread must not touch it after that insertion, even to read its
// fields. Code that moves blocks out of the pools (pop_free, release_cached, reclaim_pending)
// owns them from there. Breaking this rule was the crash "Device index must be -1 or
// non-negative" under threads: free() published a block and then read block->device for the
// profiler while empty_cache, on another thread, was deleting it.
// Note [Memory history]
// torch.dipu.memory._record_memory_history turns on the same bookkeeping as
// torch.cuda's: every block remembers the stack that allocated it (a
// torch::CapturedTraceback, symbolized only when a snapshot is taken), and each
// allocator action (alloc, free_requested, free_completed, segment_alloc,
// segment_free, oom) is appended to a per-device ring buffer of at most
// `max_entries` (actions in `skip_actions` are not recorded; `clear_history` empties the
// buffers). memory_snapshot_data() gathers both, and memory_snapshot.cpp reports them in
// torch.cuda.memory._snapshot()'s format, so torch.cuda._memory_viz renders it. dipu never splits blocks, so
// every segment holds exactly one block. Stacks are gathered before the
// allocator mutex is taken (gathering Python frames takes the GIL).
//
// Note [Block sizes]
// A request rounds up to a multiple of 512 bytes, large or small. Because dipu never splits a block,
// a coarser rounding of large requests (CUDA's 2 MiB segments) would be memory held for nothing:
// with 2 MiB steps, a ResNet-18 training step's peak was 1.16x the bytes its tensors hold (a 1.1 MiB
// activation took 2 MiB), with 512 B steps it is what they hold. A cached block serves a request
// up to 25% smaller than itself (pop_free), so sizes that vary a little still reuse the cache.
//
// Note [Taken results]
// A kernel of the torch op library that can only call a functional ATen op (cuDNN's convolution backward,
// mkldnn's convolution, batch norm's backward) gets its result in memory the native device's allocator
// handed out; copying it into the output dipu allocated costs a pass over the memory and, on a GPU, a
// kernel launch. Instead the output may take the result's memory (dipuTakeResult in diopi_rt.cpp, for an
// output the wrapper allocated for that call alone; dipuRequireResult, for a function that allocates its
// outputs, such as a functional _foreach_ one): `take` makes a block of it, which keeps the
// result's storage alive and counts in every statistic as memory dipu allocated (its own segment, of the
// result's exact size). It follows a block's stream rules (record_stream holds it until those streams
// are done) and then goes back to the allocator it came from, never into dipu's cache. A take that would
// pass the memory cap is refused (the library copies). The vendor never sees this memory: a simulated
// device's capacity does not count it.
//
// Note [Backward on the caller's thread]
// PyTorch's autograd engine runs the backward of every device but the CPU on a worker thread of its own, one
// per device, as for CUDA: the thread that calls backward hands the graph over and waits. On a vendor whose
// memory is host memory (alias device CPU: the simulated device, refc) every op runs on the host, so the
// handoff buys nothing and costs: the worker brings a second OpenMP team of intra-op threads, the threads then
// outnumber the cores, libgomp shortens every team's spin-wait, and each parallel region pays a wakeup. On the
// 2-core machine the ResNet-18-like training step took 1.06-1.09x the CPU's (the CPU's own steps in that
// process slowed too), and 0.97-1.05x with backward on the caller's thread. The worker also fixed its
// intra-op thread count when it started, so a later torch.set_num_threads never reached backward.
// So on such a vendor a thread's first dipu allocation turns autograd's multithreading off for that thread
// (what torch.autograd.set_multithreading_enabled(False) does; the setting is thread-local): backward, its
// hooks and its errors run on the thread that calls it, as on the CPU. The context manager turns it back on
// for a block. A vendor with memory of its own (cuda, a plug-in without an alias) keeps the worker threads.
//
// Note [Memory fraction]
// set_per_process_memory_fraction caps what this process may reserve from the
// vendor on a device. A request that would pass the cap first releases the
// cache, then fails with torch.OutOfMemoryError naming the cap, as CUDA's does.
#include "core.h"

#include <ATen/TensorUtils.h>
#include <c10/core/AutogradState.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/version.h>

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

// c10::DeviceAllocator (what torch.accelerator's memory API asks for) exists from torch 2.9.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
#define DIPU_HAS_DEVICE_ALLOCATOR 1
#else
#define DIPU_HAS_DEVICE_ALLOCATOR 0
#endif

namespace dipu {
namespace {

constexpr size_t kRound = 512;  // every block is a multiple of this (Note [Block sizes])
constexpr size_t kSmallSize = 1 << 20;  // blocks up to this size count as small_pool

size_t round_size(size_t n) { return (n + kRound - 1) / kRound * kRound; }

// Index into a StatArray for a block of `size` bytes: 1 small pool, 2 large pool.
size_t pool_of(size_t size) { return size <= kSmallSize ? 1 : 2; }

void increase(StatArray& stat, size_t size, int64_t amount) {
  stat[0].increase(amount);
  stat[pool_of(size)].increase(amount);
}
void decrease(StatArray& stat, size_t size, int64_t amount) {
  stat[0].decrease(amount);
  stat[pool_of(size)].decrease(amount);
}

using Context = std::shared_ptr<c10::GatheredContext>;

struct Block;
struct FreeOrder {
  bool operator()(const Block* a, const Block* b) const;
};
using FreeSet = std::set<Block*, FreeOrder>;
using ActiveMap = std::map<void*, Block*>;

struct Block {
  c10::DeviceIndex device;
  c10::StreamId stream;
  size_t size;
  void* ptr;
  std::vector<c10::Stream> other_uses;  // streams from record_stream
  size_t requested = 0;  // bytes asked for by the current (or last) user
  Context context;  // stack of the current allocation (Note [Memory history])
  Context segment_context;  // stack that made the vendor allocate this memory
  // Note [Nodes kept by their block]
  // The node of the pool's FreeSet or of the active map that held this block, kept while the other
  // holds it: moving a block between the two reuses both nodes, so an allocation and a free from
  // the cache allocate no heap memory of their own.
  FreeSet::node_type free_node;
  ActiveMap::node_type active_node;
  // Note [Taken results]: the native storage whose memory this block is; empty for the vendor's memory.
  c10::Storage taken;
};

bool FreeOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return addr(a->ptr) < addr(b->ptr);
}

struct Pending {
  Block* block;
  std::vector<std::pair<Handle, c10::DeviceIndex>> events;
};

// The allocator actions of c10::CachingDeviceAllocator::TraceEntry, by their snapshot names.
enum class Action { kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree, kOom };
const char* action_name(Action a) {
  switch (a) {
    case Action::kAlloc: return "alloc";
    case Action::kFreeRequested: return "free_requested";
    case Action::kFreeCompleted: return "free_completed";
    case Action::kSegmentAlloc: return "segment_alloc";
    case Action::kSegmentFree: return "segment_free";
    case Action::kOom: return "oom";
  }
  return "?";
}

struct TraceRecord {
  Action action;
  uintptr_t address;  // for kOom: the bytes the device still had free
  size_t size;
  c10::StreamId stream;
  int64_t time_us;
  Context context;
};

struct DevicePool {
  FreeSet free_blocks;
  std::vector<Pending> pending;
  DeviceStats stats;
  int64_t limit = 0;  // Note [Memory fraction]; 0: none
  std::deque<TraceRecord> trace;
};

// c10::CachingDeviceAllocator::RecordContext values.
enum When : int { kNever = 0, kState = 1, kAlloc = 2, kAll = 3 };

std::string format_bytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void delete_block(void* ctx);

// Note [Backward on the caller's thread] (above): once per thread, at its first dipu allocation.
thread_local bool tl_thread_seen = false;
void backward_on_this_thread() {
  if (C10_LIKELY(tl_thread_seen)) return;
  tl_thread_seen = true;
  if (vendor().has_alias && vendor().alias_type == c10::DeviceType::CPU)
    c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
}

#if DIPU_HAS_DEVICE_ALLOCATOR
using AllocatorBase = c10::DeviceAllocator;
#else
using AllocatorBase = c10::Allocator;
#endif

class DipuAllocator final : public AllocatorBase {
 public:
  void init(int device_count, bool caching) {
    std::lock_guard<std::mutex> lock(mutex_);
    pools_.resize(device_count);
    caching_ = caching;
  }

  c10::DataPtr allocate(size_t nbytes) override {
    ensure_initialized();
    backward_on_this_thread();
    c10::DeviceIndex device = current_device();
    c10::Device dev(kDipu, device);
    if (nbytes == 0) return {nullptr, nullptr, &delete_block, dev};
    size_t size = round_size(nbytes);
    c10::StreamId stream = current_stream(device).id();
    Context context = gather(kState);
    Usage usage;
    Block* block = caching_ ? take_cached(device, stream, size, nbytes, context, usage) : nullptr;
    if (!block) {
      block = new_block(device, stream, size, nbytes, context);
      std::lock_guard<std::mutex> lock(mutex_);
      mark_active(block);
      hand_out(block, nbytes, context, usage);
    }
    report_to_profiler(block->ptr, static_cast<int64_t>(block->size), usage, dev);
    return {block->ptr, block, &delete_block, dev};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_block; }

  // Note [Taken results]: a DataPtr of dipu:device over `native`'s memory, counted as dipu's; empty if the
  // memory cap refuses it, or there is no memory to take (blocks are keyed by their address).
  c10::DataPtr take(const c10::Storage& native, c10::DeviceIndex device) {
    const size_t size = native.nbytes();
    if (size == 0 || native.data() == nullptr || over_limit(device, size)) return {};
    c10::Device dev(kDipu, device);
    Context context = gather(kState);
    auto* block = new Block{device, current_stream(device).id(), size, native.mutable_data(), {}};
    block->taken = native;
    block->segment_context = context;
    Usage usage;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& s = pools_[device].stats;
      increase(s.reserved_bytes, size, static_cast<int64_t>(size));
      increase(s.segment, size, 1);
      record(device, Action::kSegmentAlloc, addr(block->ptr), size, block->stream, gather_for_trace(context));
      mark_active(block);
      hand_out(block, size, context, usage);
    }
    report_to_profiler(block->ptr, static_cast<int64_t>(size), usage, dev);
    return {block->ptr, block, &delete_block, dev};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    c10::Device dev(kDipu, current_device());
    copy_bytes(dest, dev, src, dev, count);
  }

  void free(Block* block) {
    // What the rest of this function needs of the block, read while this thread still owns it
    // (Note [Block ownership]): once it is back in the free pool, another thread may reuse it or
    // empty_cache may release and delete it.
    const c10::DeviceIndex device = block->device;
    void* const ptr = block->ptr;
    const size_t size = block->size;
    std::vector<c10::Stream> uses;
    Context context = g_shutdown.load() ? nullptr : gather(kAll);
    Usage usage;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      block->active_node = active_.extract(ptr);
      auto& s = pools_[device].stats;
      decrease(s.allocated_bytes, size, static_cast<int64_t>(size));
      decrease(s.active_bytes, size, static_cast<int64_t>(size));
      decrease(s.requested_bytes, size, static_cast<int64_t>(block->requested));
      decrease(s.allocation, size, 1);
      decrease(s.active, size, 1);
      record(device, Action::kFreeRequested, addr(ptr), size, block->stream, context);
      block->context.reset();
      usage = usage_of(s);
      uses.swap(block->other_uses);
      if (uses.empty() && caching_ && !block->taken) {
        record(device, Action::kFreeCompleted, addr(ptr), size, block->stream, context);
        to_free_pool(block);
        block = nullptr;  // no longer this thread's
      }
    }
    // The process is ending, or is a forked child whose inherited memory the vendor no longer
    // serves: nothing to reuse or report, and a deleter must not fail.
    if (g_shutdown.load() || !g_initialized.load()) return;
    report_to_profiler(ptr, -static_cast<int64_t>(size), usage, c10::Device(kDipu, device));
    if (!block) return;
    if (block->taken && (uses.empty() || !caching_)) {  // uncached memory is freed at once, as below
      {
        std::lock_guard<std::mutex> lock(mutex_);
        record(device, Action::kFreeCompleted, addr(ptr), size, block->stream, context);
      }
      give_back({block});
      return;
    }
    if (!caching_) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        record(device, Action::kFreeCompleted, addr(ptr), size, block->stream, context);
      }
      release_to_vendor({block});
      return;
    }
    Pending p{block, {}};
    for (const auto& stream : uses) {
      Handle ev = runtime().create_event(stream.device_index(), false);
      runtime().record_event(stream.device_index(), ev, stream_native_handle(stream));
      p.events.emplace_back(ev, stream.device_index());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    pools_[device].pending.push_back(std::move(p));
  }

  void record_stream(const c10::DataPtr& ptr, const c10::Stream& stream) {
    if (!ptr.get() || ptr.get_deleter() != &delete_block) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto* block = static_cast<Block*>(ptr.get_context());
    if (stream.id() == block->stream) return;
    for (const auto& s : block->other_uses)
      if (s == stream) return;
    block->other_uses.push_back(stream);
  }

  void empty_cache() {
    for (c10::DeviceIndex d = 0; d < static_cast<c10::DeviceIndex>(pools_.size()); ++d) {
      release_cached(d);
    }
  }

  DeviceStats stats(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return pools_.at(device).stats;
  }

  void reset_peak(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = pools_.at(device).stats;
    for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes,
                         &s.requested_bytes})
      for (auto& stat : *a) stat.peak = stat.current;
  }

  void reset_accumulated(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = pools_.at(device).stats;
    for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes,
                         &s.requested_bytes})
      for (auto& stat : *a) stat.allocated = stat.freed = 0;
    s.num_alloc_retries = s.num_ooms = s.num_device_alloc = s.num_device_free = 0;
  }

  void set_limit(c10::DeviceIndex device, int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    pools_.at(device).limit = bytes;
  }

  std::optional<c10::DeviceIndex> device_of(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = active_.upper_bound(const_cast<void*>(ptr));
    if (it == active_.begin()) return std::nullopt;
    --it;
    Block* b = it->second;
    if (addr(ptr) < addr(b->ptr) + b->size) return b->device;
    return std::nullopt;
  }

  void record_history(bool trace, int when, bool cpp_frames, size_t max_entries, bool clear_history,
                      unsigned skip_actions) {
    std::lock_guard<std::mutex> lock(mutex_);
    trace_ = trace;
    cpp_frames_ = cpp_frames;
    max_entries_ = std::max<size_t>(max_entries, 1);
    skip_actions_ = skip_actions;
    when_.store(when);
    for (auto& pool : pools_) {
      if (!trace || clear_history) pool.trace.clear();
      while (pool.trace.size() > max_entries_) pool.trace.pop_front();
    }
  }

  MemorySnapshot snapshot();

#if DIPU_HAS_DEVICE_ALLOCATOR
  // ---- c10::DeviceAllocator: what torch.accelerator.memory_* call ----
  bool initialized() override { return vendor_ready(); }
  void emptyCache(c10::MempoolId_t /*mempool_id*/) override { empty_cache(); }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override { record_stream(ptr, stream); }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    DeviceStats s = stats(device);
    c10::CachingDeviceAllocator::DeviceStats out;
    auto copy = [](const StatArray& from, c10::CachingAllocator::StatArray& to) {
      for (size_t i = 0; i < from.size(); ++i) {
        to[i].current = from[i].current;
        to[i].peak = from[i].peak;
        to[i].allocated = from[i].allocated;
        to[i].freed = from[i].freed;
      }
    };
    copy(s.allocation, out.allocation);
    copy(s.segment, out.segment);
    copy(s.active, out.active);
    copy(s.allocated_bytes, out.allocated_bytes);
    copy(s.reserved_bytes, out.reserved_bytes);
    copy(s.active_bytes, out.active_bytes);
    copy(s.requested_bytes, out.requested_bytes);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    reset_accumulated(device);
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    reset_peak(device);
  }
  // Virtual in c10::DeviceAllocator from the torch versions that have it; no `override`
  // so that older ones, where it is a plain member, still compile.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) {
    check_device_index(device);
    return runtime().mem_get_info(device);
  }
#endif

 private:
  // The current stack if history is on at level `needed` or above; else null.
  Context gather(int needed) {
    if (when_.load() < needed || g_shutdown.load()) return nullptr;
    return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, cpp_frames_.load());
  }

  // An allocation's stack goes into the trace only from RecordContext ALLOC up.
  Context gather_for_trace(const Context& context) { return when_.load() >= kAlloc ? context : nullptr; }

  // Requires mutex_.
  void record(c10::DeviceIndex device, Action action, uintptr_t address, size_t size, c10::StreamId stream,
              Context context) {
    if (!trace_ || (skip_actions_ & (1u << static_cast<unsigned>(action)))) return;
    auto& trace = pools_[device].trace;
    trace.push_back(TraceRecord{action, address, size, stream, now_us(), std::move(context)});
    if (trace.size() > max_entries_) trace.pop_front();
  }

  // A device's allocated and reserved bytes after an action, for the profiler's memory events.
  struct Usage {
    int64_t allocated = 0, reserved = 0;
  };
  static Usage usage_of(const DeviceStats& s) { return {s.allocated_bytes[0].current, s.reserved_bytes[0].current}; }

  void report_to_profiler(void* ptr, int64_t delta, const Usage& usage, c10::Device dev) {
    if (!c10::memoryProfilingEnabled()) return;
    c10::reportMemoryUsageToProfiler(ptr, delta, static_cast<size_t>(usage.allocated),
                                     static_cast<size_t>(usage.reserved), dev);
  }

  // A cached block for (device, stream, size), already handed out to a caller asking for `nbytes`;
  // or null. One critical section unless blocks wait for their streams' events.
  Block* take_cached(c10::DeviceIndex device, c10::StreamId stream, size_t size, size_t nbytes, const Context& context,
                     Usage& usage) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!pools_[device].pending.empty()) {
      lock.unlock();
      reclaim_pending(device);
      lock.lock();
    }
    Block* block = pop_free(device, stream, size);
    if (block) hand_out(block, nbytes, context, usage);
    return block;
  }

  // Requires mutex_. An active block becomes the allocation of `nbytes` the caller asked for.
  void hand_out(Block* block, size_t nbytes, const Context& context, Usage& usage) {
    auto& s = pools_[block->device].stats;
    block->requested = nbytes;
    block->context = context;
    increase(s.requested_bytes, block->size, static_cast<int64_t>(nbytes));
    record(block->device, Action::kAlloc, addr(block->ptr), block->size, block->stream, gather_for_trace(context));
    usage = usage_of(s);
  }

  // Requires mutex_. Note [Nodes kept by their block].
  void to_free_pool(Block* block) {
    auto& free_blocks = pools_[block->device].free_blocks;
    if (block->free_node)
      free_blocks.insert(std::move(block->free_node));
    else
      free_blocks.insert(block);
  }

  // Requires mutex_.
  Block* pop_free(c10::DeviceIndex device, c10::StreamId stream, size_t size) {
    auto& free_blocks = pools_[device].free_blocks;
    Block key{device, stream, size, nullptr, {}};
    auto it = free_blocks.lower_bound(&key);
    // A cached block may be at most 25% larger than asked: no splitting, so a
    // looser fit would strand memory.
    if (it == free_blocks.end() || (*it)->stream != stream || (*it)->size > size + size / 4) return nullptr;
    Block* b = *it;
    b->free_node = free_blocks.extract(it);
    mark_active(b);
    return b;
  }

  // Requires mutex_.
  void mark_active(Block* block) {
    if (block->active_node)
      active_.insert(std::move(block->active_node));
    else
      active_.emplace(block->ptr, block);
    auto& s = pools_[block->device].stats;
    increase(s.allocated_bytes, block->size, static_cast<int64_t>(block->size));
    increase(s.active_bytes, block->size, static_cast<int64_t>(block->size));
    increase(s.allocation, block->size, 1);
    increase(s.active, block->size, 1);
  }

  // Whether reserving `size` more bytes would pass the device's cap (Note [Memory fraction]).
  bool over_limit(c10::DeviceIndex device, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto& pool = pools_[device];
    return pool.limit > 0 && pool.stats.reserved_bytes[0].current + static_cast<int64_t>(size) > pool.limit;
  }

  void* limited_malloc(c10::DeviceIndex device, size_t size) {
    return over_limit(device, size) ? nullptr : raw_malloc(device, size);
  }

  Block* new_block(c10::DeviceIndex device, c10::StreamId stream, size_t size, size_t asked, const Context& context) {
    void* ptr = limited_malloc(device, size);
    if (!ptr) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pools_[device].stats.num_alloc_retries += 1;
      }
      release_cached(device);
      ptr = limited_malloc(device, size);
    }
    if (!ptr) {
      bool capped = over_limit(device, size);
      int64_t device_free = 0;
      if (!capped) device_free = static_cast<int64_t>(runtime().mem_get_info(device).first);
      DeviceStats s;
      int64_t limit;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pools_[device].stats.num_ooms += 1;
        record(device, Action::kOom, static_cast<uintptr_t>(device_free), asked, stream, gather_for_trace(context));
        s = pools_[device].stats;
        limit = pools_[device].limit;
      }
      std::string cap = capped ? "; this process may reserve at most " + format_bytes(limit) +
                                     " on this device (torch.dipu.set_per_process_memory_fraction)"
                               : "";
      TORCH_CHECK_WITH(OutOfMemoryError, false, "dipu out of memory on ", vendor().name,
                       " device dipu:", static_cast<int>(device), ": tried to allocate ",
                       format_bytes(static_cast<int64_t>(asked)), cap, "; ", format_bytes(s.allocated_bytes[0].current),
                       " allocated by dipu, ", format_bytes(s.reserved_bytes[0].current),
                       " reserved by dipu on this device. Free tensors or call "
                       "torch.dipu.empty_cache(); the process can continue.");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = pools_[device].stats;
    increase(s.reserved_bytes, size, static_cast<int64_t>(size));
    increase(s.segment, size, 1);
    s.num_device_alloc += 1;
    record(device, Action::kSegmentAlloc, addr(ptr), size, stream, gather_for_trace(context));
    auto* block = new Block{device, stream, size, ptr, {}};
    block->segment_context = context;
    return block;
  }

  void* raw_malloc(c10::DeviceIndex device, size_t size) { return runtime().malloc(device, size); }

  void release_cached(c10::DeviceIndex device) {
    reclaim_pending(device);
    std::vector<Block*> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& free_blocks = pools_[device].free_blocks;
      blocks.assign(free_blocks.begin(), free_blocks.end());
      free_blocks.clear();
    }
    release_to_vendor(blocks);
  }

  void release_to_vendor(const std::vector<Block*>& blocks) {
    if (blocks.empty()) return;
    for (Block* b : blocks) runtime().free(b->device, b->ptr, b->size);
    std::lock_guard<std::mutex> lock(mutex_);
    for (Block* b : blocks) {
      auto& s = pools_[b->device].stats;
      decrease(s.reserved_bytes, b->size, static_cast<int64_t>(b->size));
      decrease(s.segment, b->size, 1);
      s.num_device_free += 1;
      record(b->device, Action::kSegmentFree, addr(b->ptr), b->size, b->stream, nullptr);
      delete b;
    }
  }

  // Moves pending blocks whose stream events have all completed to the free pool.
  void reclaim_pending(c10::DeviceIndex device) {
    std::vector<Pending> pending;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending.swap(pools_[device].pending);
    }
    if (pending.empty()) return;
    std::vector<Pending> still;
    std::vector<Block*> done;
    for (auto& p : pending) {
      bool complete = true;
      for (auto& [ev, dev] : p.events) complete = complete && runtime().query_event(dev, ev);
      if (!complete) {
        still.push_back(std::move(p));
        continue;
      }
      for (auto& [ev, dev] : p.events) runtime().destroy_event(dev, ev);
      done.push_back(p.block);
    }
    std::vector<Block*> taken;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& pool = pools_[device];
      for (Block* b : done) {
        record(device, Action::kFreeCompleted, addr(b->ptr), b->size, b->stream, nullptr);
        if (b->taken)
          taken.push_back(b);
        else
          to_free_pool(b);
      }
      for (auto& p : still) pool.pending.push_back(std::move(p));
    }
    give_back(taken);
  }

  // Taken blocks (Note [Taken results]) no longer used: their memory goes back to the allocator it came from
  // (the storage is released outside mutex_).
  void give_back(const std::vector<Block*>& blocks) {
    if (blocks.empty()) return;
    std::vector<c10::Storage> storages;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Block* b : blocks) {
        auto& s = pools_[b->device].stats;
        decrease(s.reserved_bytes, b->size, static_cast<int64_t>(b->size));
        decrease(s.segment, b->size, 1);
        record(b->device, Action::kSegmentFree, addr(b->ptr), b->size, b->stream, nullptr);
        storages.push_back(std::move(b->taken));
        delete b;
      }
    }
  }

  std::mutex mutex_;
  std::vector<DevicePool> pools_;
  ActiveMap active_;
  bool caching_ = true;
  // Note [Memory history]
  std::atomic<int> when_{kNever};
  bool trace_ = false;
  std::atomic<bool> cpp_frames_{false};  // read by gather() outside mutex_
  size_t max_entries_ = 1;
  unsigned skip_actions_ = 0;  // bit i: Action i is not recorded
};

// Never destroyed: blocks and traces hold stacks whose Python frames must not be
// released after the interpreter is gone.
DipuAllocator& g_allocator = *new DipuAllocator();

MemorySnapshot DipuAllocator::snapshot() {
  MemorySnapshot result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto add = [&](const Block* b, const char* state) {
      result.segments.push_back({b->device, b->stream, addr(b->ptr), b->size, b->requested, state,
                                 pool_of(b->size) == 1, b->context, b->segment_context});
    };
    for (const auto& [ptr, b] : active_) add(b, "active_allocated");
    for (const auto& pool : pools_) {
      for (const Block* b : pool.free_blocks) add(b, "inactive");
      for (const auto& p : pool.pending) add(p.block, "active_pending_free");
      auto& events = result.traces.emplace_back();
      for (const TraceRecord& r : pool.trace)
        events.push_back(
            {action_name(r.action), r.address, r.action == Action::kOom, r.size, r.stream, r.time_us, r.context});
    }
  }
  std::sort(result.segments.begin(), result.segments.end(),
            [](const auto& a, const auto& b) { return a.address < b.address; });
  result.caching = caching_;
  return result;
}

void delete_block(void* ctx) {
  if (ctx) g_allocator.free(static_cast<Block*>(ctx));
}

// Pinned host memory: uncached, straight from the vendor's host_malloc.
std::mutex g_pinned_mutex;
std::map<void*, size_t> g_pinned;

void delete_pinned(void* ptr) {
  if (!ptr) return;
  size_t nbytes = 0;
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    auto it = g_pinned.find(ptr);
    if (it != g_pinned.end()) nbytes = it->second;
    g_pinned.erase(ptr);
  }
  if (g_shutdown.load() || !g_initialized.load()) return;
  runtime().host_free(ptr, nbytes);
}

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::Device cpu(c10::DeviceType::CPU);
    if (nbytes == 0) return {nullptr, nullptr, &delete_pinned, cpu};
    void* ptr = runtime().host_malloc(nbytes);
    TORCH_CHECK_WITH(OutOfMemoryError, ptr, "dipu: the ", vendor().name, " vendor could not allocate ",
                     format_bytes(static_cast<int64_t>(nbytes)), " of pinned host memory");
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.emplace(ptr, nbytes);
    return {ptr, ptr, &delete_pinned, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

PinnedAllocator g_pinned_allocator;

}  // namespace

c10::Allocator* device_allocator() { return &g_allocator; }
void allocator_init(int device_count, bool caching) { g_allocator.init(device_count, caching); }
void resize_storage_bytes(const c10::Storage& storage, size_t newsize) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  size_t keep = std::min(storage.nbytes(), newsize);
  c10::DataPtr data = device_allocator()->allocate(newsize);
  if (keep > 0) copy_bytes(data.get(), data.device(), storage.data(), storage.device(), keep);
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(data));
  storage.unsafeGetStorageImpl()->set_nbytes(newsize);
}
c10::DataPtr take_memory(const c10::Storage& native, c10::DeviceIndex device) {
  return g_allocator.take(native, device);
}
void empty_cache() { g_allocator.empty_cache(); }
DeviceStats device_stats(c10::DeviceIndex index) {
  check_device_index(index);
  return g_allocator.stats(index);
}
void reset_peak_stats(c10::DeviceIndex index) {
  check_device_index(index);
  g_allocator.reset_peak(index);
}
void reset_accumulated_stats(c10::DeviceIndex index) {
  check_device_index(index);
  g_allocator.reset_accumulated(index);
}
void set_memory_limit(c10::DeviceIndex index, int64_t bytes) {
  check_device_index(index);
  g_allocator.set_limit(index, bytes);
}
void record_memory_history(bool trace, int when, bool cpp_frames, size_t max_entries, bool clear_history,
                           const std::vector<std::string>& skip_actions) {
  unsigned mask = 0;
  for (const auto& name : skip_actions) {
    bool known = false;
    for (int a = 0; a <= static_cast<int>(Action::kOom); ++a) {
      if (name == action_name(static_cast<Action>(a))) {
        mask |= 1u << a;
        known = true;
      }
    }
    TORCH_CHECK_VALUE(known, "_record_memory_history: skip_actions names '", name,
                      "', which is not an allocator action (alloc, free_requested, free_completed, "
                      "segment_alloc, segment_free, oom)");
  }
  g_allocator.record_history(trace, when, cpp_frames, max_entries, clear_history, mask);
}
MemorySnapshot memory_snapshot_data() { return g_allocator.snapshot(); }
void record_stream(const c10::DataPtr& ptr, const c10::Stream& stream) { g_allocator.record_stream(ptr, stream); }
std::optional<c10::DeviceIndex> device_of_pointer(const void* ptr) { return g_allocator.device_of(ptr); }
c10::Allocator* pinned_allocator() {
  TORCH_CHECK(vendor().has_pinned, "dipu: the ", vendor().name,
              " vendor offers no pinned host memory (it does not implement host_malloc)");
  return &g_pinned_allocator;
}
bool is_pinned_pointer(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  auto it = g_pinned.upper_bound(const_cast<void*>(ptr));
  if (it == g_pinned.begin()) return false;
  --it;
  return addr(ptr) < addr(it->first) + it->second;
}

}  // namespace dipu

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &dipu::g_allocator);
