// Note [Caching allocator]
// Vendor malloc/free are Python calls (microseconds) and often far slower on
// real devices, so the core keeps freed blocks and reuses them. Blocks are
// pooled per (device, stream): a block freed on stream S is only handed out
// again for allocations on S, because work queued on S may still read it.
// A block that was also used on other streams (Tensor.record_stream) waits in
// `pending` until an event recorded on each of those streams has completed.
// Vendor calls are made with the allocator mutex released: they take the GIL,
// and a thread holding the GIL may be waiting for this mutex.
//
// Note [Splitting blocks]
// As PyTorch's CUDA caching allocator: the vendor's memory comes in segments, and a segment is split
// into blocks. A request of at most 1 MiB is served from the small pool, whose segments are 2 MiB; a
// larger one from the large pool, whose segments are 20 MiB for requests under 10 MiB and the request
// rounded up to 2 MiB above (a small request that finds no small block takes free space of a large segment, and
// with expandable segments a large request may borrow from the small pool: Note [Borrowing between pools]). Each
// pool finds the smallest cached block of the stream that fits (best fit, the lowest address among equal sizes;
// expandable segments choose otherwise: Note [Placement in expandable segments]); a larger block is split and the
// remainder stays cached, and a freed block merges with the free neighbours of its segment, so a segment wholly
// free again is one block that empty_cache can return to the vendor. A remainder is kept apart from 512 B up in both
// pools (CUDA's large pool keeps remainders of 1 MiB or less with the block): allocated bytes then stay what the
// tensors hold (Note [Block sizes]).
// Workloads whose shapes change every step (variable sequence lengths, a KV cache that grows each
// decoded token) reuse the cache this way; before, a block served only a request up to 25% smaller than
// itself and each new size cost a device malloc (benchmarks/bench_memory.py: a variable-length
// Transformer training loop reserved 6.48x its peak, 1.39x with splitting; a GPT-2 decode 42.9x, 1.37x).
//
// Note [Expandable segments]
// With expandable_segments:True (Note [Allocator settings] in dipu/_alloc_conf.py) and a vendor that has the
// virtual-memory functions (the vm_* methods of dipu/runtime.py; for a C plug-in, DipuVirtualMemoryInterface in
// dipu/include/dipu/custom_runtime.h), each stream has one segment per pool instead of many: a range of
// addresses as large as the device is reserved once (vm_reserve), and when no cached block fits, memory is
// mapped at the segment's end (vm_map, in multiples of the vendor's granularity), just what the request needs
// beyond the free block already at the end, which the new memory joins (or, first, a free block of the other
// pool: Note [Borrowing between pools]). A segment is never too small for a request, nor left with a tail no
// request fits, so a workload whose shapes vary reserves less (benchmarks/bench_memory.py: reserved/peak 1.08x for
// the variable-length Transformer and 1.10x for the GPT-2 decode, against 1.29x and 1.15x with plain segments;
// holes between live blocks remain, Note [Placement in expandable segments] keeps them few, and mapped memory is
// not moved to fill them, which would cost a map and an unmap each time). empty_cache, and an allocation that
// finds the device full, unmap the whole granules of each segment's free block at its end (vm_unmap); a segment
// left with nothing mapped gives its range back (vm_release). Grows and shrinks run one at a time (vm_mutex_, taken
// before mutex_, and waited for without the GIL: a Python vendor's call needs it), with mutex_ released around the
// vendor's calls; memory enters the pools only once mapped and leaves them before it is unmapped. The statistics count
// the segment once from its reservation to its release, its mapped bytes as reserved, and each map and unmap as a
// device allocation and free (num_device_alloc, num_device_free); the history records them as segment_map and
// segment_unmap, as CUDA's does, and the snapshot marks the segment is_expandable. A block of an expandable
// segment is never oversize (max_split_size_mb) and garbage_collection_threshold leaves the segment alone: it
// only grows by what is missing. Without the vendor's functions the setting warns once, naming the vendor, and
// segments stay plain; a vendor that cannot reserve the range (vm_reserve answers null) serves that request
// with a plain segment, after a warning.
//
// Note [Borrowing between pools]
// A request that finds no block in its own pool (Note [Splitting blocks]) may take a free block of the other pool,
// on its stream, before new memory is allocated for it:
// - a small request, the best fit among the free blocks of the large pool's segments, plain or expandable;
// - with expandable segments, a large request, the free blocks of the small pool's expandable segment (a plain
//   small segment, 2 MiB, has no room for it).
// Only when neither pool has a block does a new segment (or, with expandable segments, a map at the end of the
// request's own pool's segment) serve it. The pools stay apart as a preference: each request looks at its own
// first, and a block keeps the pool of the segment it lies in (the statistics count it there).
// This departs from CUDA, which keeps the pools strictly apart so that small blocks, which are often long-lived,
// do not pin large segments that empty_cache and garbage_collection_threshold could return whole. Here a small
// block in a large plain segment keeps that segment (20 MiB and up) reserved until it is freed; an expandable
// segment is returned from its end granule by granule, so a borrowed block pins no more than any other block
// there would. Kept apart strictly, the pools cost the sum of their peaks: memory leaves a pool only at
// empty_cache or when the device is full, so a workload whose small and large tensors peak at different times
// holds both peaks. Measured with benchmarks/bench_memory.py, reserved / peak allocated:
// - GPT-2 decode (its KV cache is in the small pool while each of its tensors is under 1 MiB, in the large one
//   after): plain segments 1.34-1.37x -> 1.15x. Under CUDA's rule 1.3x could not be met: the large pool needs
//   four 20 MiB segments for its 68.1 MiB peak and the small pool 14 MiB, 1.29x with perfect packing. With
//   expandable segments 1.21x -> 1.10x (no packing could do better than 1.15x with the pools apart).
// - Variable-length Transformer (short sequences put activations of up to 1 MiB into the small pool, and its
//   parameters, gradients and AdamW state are small blocks): plain 1.39x -> 1.29x and 0.08 -> 0 device mallocs
//   per step after warm-up; expandable 1.26x -> 1.18x (1.08x with Note [Placement in expandable segments]).
// - ResNet-18-like step, plain 1.25x -> 1.16x; GPT step, plain 1.18x either way; same peaks, no mallocs after
//   warm-up.
// - Other sequences, plain segments: variable lengths drawn from seed 1 and 2 (bench_memory.py --seed) 1.30x ->
//   1.15x and 1.27x -> 1.18x, a 200-token decode 1.52x -> 1.31x.
// A small request borrowing only from large plain segments already in use (split), so that a wholly free one
// stays whole for empty_cache, measured the same for decode and variable lengths but worse for the GPT step
// (1.20x, and a device malloc every other step), and was not kept.
//
// Note [Placement in expandable segments]
// Within an expandable segment a request does not take the plain best fit (Note [Splitting blocks]):
// - a large request takes the free block that fits at the lowest address (first fit);
// - a small request takes the best fit other than the free block at the segment's end, which can grow by mapping
//   and is taken only when no other block fits;
// - a block borrowed from the other pool's segment (Note [Borrowing between pools]) is cut from the top of its
//   free block, unless that block is the segment's end: the rest stays at the bottom, where first fit looks.
// With best fit, the variable-length Transformer's small blocks (parameters, gradients and AdamW state borrowed
// among the large activations) and each step's activations, placed in whichever hole was nearest in size, left
// holes between live blocks: the large segment mapped 174 MiB for a 153 MiB peak, reserved/peak was 1.18x, and
// the segment still mapped twice after step 10. With these rules large blocks pack toward the start of the
// segment and the free space gathers at its end: 1.08x and no map after step 8 (benchmarks/bench_memory.py; the
// GPT-2 decode, ResNet and GPT steps reserve what they did). The rules were chosen by replaying the benchmark's
// allocation sequences (sizes and order as the workloads ask them, independent of the allocator) through a model
// of these pools (benchmarks/replay_memory.py, which gives what the allocator measures), and are no law: with its
// lengths drawn from seed 1 and 2 instead of 0 (bench_memory.py --seed) the variable-length loop reserves 1.19x
// and 1.17x (1.20x and 1.19x with best fit; seed 1's longest sequence comes after step 10, so its segment must
// grow late whatever the placement: 4 maps there, 3 with best fit), and a 200-token decode 1.13x (1.10x with best
// fit, one 2 MiB granule more). Cutting every small block from the top of its free block, with plain best fit for
// small requests, did better on those (1.16x for seed 2, 1.10x for the short decode) but mapped a granule more
// for the GPT step (1.11x). First fit walks the stream's free blocks at least as large as the request, so its
// cost grows with their number; only expandable segments pay it.
//
// Note [Oversize blocks]
// With max_split_size_mb set (PYTORCH_ALLOC_CONF), a block of at least that size is never split, a
// request below it never takes such a block, and a request at or above it takes a cached block only if
// that is less than 20 MiB larger, as in CUDA: large buffers stop fragmenting the cache for the small
// ones. On a failed device malloc the cache is released (every wholly free segment) and the malloc
// retried. garbage_collection_threshold (with set_per_process_memory_fraction) returns the oldest
// wholly free segments before a new segment would take reserved memory past that share of the cap.
//
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
// torch.cuda.memory._snapshot()'s format, so torch.cuda._memory_viz renders it, each segment with its blocks
// (Note [Splitting blocks]). Stacks are gathered before the
// allocator mutex is taken (gathering Python frames takes the GIL).
//
// Note [Block sizes]
// A request rounds up to a multiple of 512 bytes, large or small, and is split off its segment at that
// size (Note [Splitting blocks]): with CUDA's 2 MiB steps for large blocks, a ResNet-18 training step's
// peak was 1.16x the bytes its tensors hold (a 1.1 MiB activation took 2 MiB), with 512 B steps it is
// what they hold. roundup_power2_divisions (PYTORCH_ALLOC_CONF) rounds coarser, as in CUDA: a request
// between two powers of two rounds up to the next of that many equal divisions.
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
// are done) and then goes back to the allocator it came from, never into dipu's cache. The vendor never
// sees this memory, so the allocator counts it against the device's capacity (mem_get_info's total, asked
// once) itself: every byte dipu reserves, the vendor's and the taken, counts once, and a take or a vendor
// allocation that would pass the capacity or the memory cap (Note [Memory fraction]) is refused (a take
// is then copied by the library; an allocation is out of memory).
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
constexpr size_t kSmallSize = 1 << 20;  // requests up to this size are served from the small pool
constexpr size_t kSmallBuffer = 2 << 20;  // the small pool's segments (Note [Splitting blocks])
constexpr size_t kMinLargeAlloc = 10 << 20;  // large requests below this get a kLargeBuffer segment
constexpr size_t kLargeBuffer = 20 << 20;
constexpr size_t kRoundLarge = 2 << 20;  // larger segments round up to this
constexpr size_t kMaxSpareBlocks = 1024;  // Block objects kept for reuse after merges
constexpr size_t kUnknownCapacityRange = size_t{64} << 30;  // an expandable segment's range where the total is unknown

// Index into a StatArray for a block of the small pool or the large one.
size_t pool_index(bool small) { return small ? 1 : 2; }

void increase(StatArray& stat, bool small, int64_t amount) {
  stat[0].increase(amount);
  stat[pool_index(small)].increase(amount);
}
void decrease(StatArray& stat, bool small, int64_t amount) {
  stat[0].decrease(amount);
  stat[pool_index(small)].decrease(amount);
}

using Context = std::shared_ptr<c10::GatheredContext>;

struct Block;
struct FreeOrder {
  bool operator()(const Block* a, const Block* b) const;
};
using FreeSet = std::set<Block*, FreeOrder>;
using ActiveMap = std::map<void*, Block*>;

struct Expandable;

struct Block {
  c10::DeviceIndex device;
  c10::StreamId stream;
  size_t size;
  void* ptr;
  std::vector<c10::Stream> other_uses;  // streams from record_stream
  size_t requested = 0;  // bytes asked for by the current (or last) user
  bool small = false;  // of the small pool (Note [Splitting blocks])
  bool allocated = false;  // handed out, or waiting for its streams' events
  bool pending = false;  // waiting for its streams' events
  Block* prev = nullptr;  // the neighbours in its segment
  Block* next = nullptr;
  uint64_t freed_at = 0;  // when it last entered the free pool (garbage_collection_threshold)
  Context context;  // stack of the current allocation (Note [Memory history])
  Context segment_context;  // stack that made the vendor allocate this memory (on a segment's first block)
  // Note [Nodes kept by their block]
  // The node of the pool's FreeSet or of the active map that held this block, kept while the other
  // holds it: moving a block between the two reuses both nodes, so an allocation and a free from
  // the cache allocate no heap memory of their own. Block objects freed by merges are kept for the
  // next split for the same reason.
  FreeSet::node_type free_node;
  ActiveMap::node_type active_node;
  // Note [Taken results]: the native storage whose memory this block is; empty for the vendor's memory.
  c10::Storage taken;
  Expandable* expandable = nullptr;  // the segment, where it is expandable (Note [Expandable segments])

  bool is_split() const { return prev != nullptr || next != nullptr; }
};

bool FreeOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return addr(a->ptr) < addr(b->ptr);
}

// Note [Expandable segments]: a reserved range, mapped from its start up to `mapped`, where blocks base..last
// lie; changed under mutex_ and, for `mapped`, vm_mutex_ as well.
struct Expandable {
  c10::DeviceIndex device;
  c10::StreamId stream;
  bool small;
  char* base;
  size_t reserved;
  size_t granularity;
  size_t mapped = 0;
  Block* last = nullptr;  // the block at the end of the mapped memory; null while none is mapped
};

struct Pending {
  Block* block;
  std::vector<std::pair<Handle, c10::DeviceIndex>> events;
};

// The allocator actions of c10::CachingDeviceAllocator::TraceEntry, by their snapshot names.
enum class Action {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kOom,
  kSegmentMap,
  kSegmentUnmap
};
const char* action_name(Action a) {
  switch (a) {
    case Action::kAlloc: return "alloc";
    case Action::kFreeRequested: return "free_requested";
    case Action::kFreeCompleted: return "free_completed";
    case Action::kSegmentAlloc: return "segment_alloc";
    case Action::kSegmentFree: return "segment_free";
    case Action::kOom: return "oom";
    case Action::kSegmentMap: return "segment_map";
    case Action::kSegmentUnmap: return "segment_unmap";
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
  FreeSet small_blocks, large_blocks;  // free blocks (Note [Splitting blocks])
  std::vector<Pending> pending;
  DeviceStats stats;
  int64_t limit = 0;  // Note [Memory fraction]; 0: none
  int64_t capacity = -1;  // the device's total memory (Note [Taken results]); 0: unknown, -1: not asked yet
  std::map<std::pair<c10::StreamId, bool>, Expandable*> expandable;  // by (stream, small)
  uint64_t free_clock = 0;  // counts blocks entering the free pools
  std::deque<TraceRecord> trace;
  FreeSet& blocks_of(bool small) { return small ? small_blocks : large_blocks; }
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

  void configure(const AllocatorSettings& settings) {
    std::lock_guard<std::mutex> lock(mutex_);
    settings_ = settings;
    expandable_.store(settings.expandable_segments && vendor().has_vm);
  }

  c10::DataPtr allocate(size_t nbytes) override {
    ensure_initialized();
    backward_on_this_thread();
    c10::DeviceIndex device = current_device();
    c10::Device dev(kDipu, device);
    if (nbytes == 0) return {nullptr, nullptr, &delete_block, dev};
    c10::StreamId stream = current_stream(device).id();
    Context context = gather(kState);
    Usage usage;
    size_t size;
    Block* block = caching_ ? take_cached(device, stream, nbytes, context, usage, size) : nullptr;
    if (!block && caching_ && expandable_.load()) block = grow(device, stream, size, nbytes, context, usage);
    if (!block) block = new_segment(device, stream, caching_ ? size : round_up(nbytes, kRound), nbytes, context, usage);
    report_to_profiler(block->ptr, static_cast<int64_t>(block->size), usage, dev);
    return {block->ptr, block, &delete_block, dev};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_block; }

  // Note [Taken results]: a DataPtr of dipu:device over `native`'s memory, counted as dipu's; empty if the
  // memory cap refuses it, or there is no memory to take (blocks are keyed by their address).
  c10::DataPtr take(const c10::Storage& native, c10::DeviceIndex device) {
    const size_t size = native.nbytes();
    if (size == 0 || native.data() == nullptr || over_limit(device, size) || over_capacity(device, size)) return {};
    c10::Device dev(kDipu, device);
    Context context = gather(kState);
    auto* block = new Block{device, current_stream(device).id(), size, native.mutable_data(), {}};
    block->small = size <= kSmallSize;
    block->taken = native;
    block->segment_context = context;
    Usage usage;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& s = pools_[device].stats;
      increase(s.reserved_bytes, block->small, static_cast<int64_t>(size));
      increase(s.segment, block->small, 1);
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
    // (Note [Block ownership]): once it is back in the free pool, another thread may reuse it,
    // merge it into a neighbour, or empty_cache may release and delete it.
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
      const bool small = block->small;
      decrease(s.allocated_bytes, small, static_cast<int64_t>(size));
      decrease(s.active_bytes, small, static_cast<int64_t>(size));
      decrease(s.requested_bytes, small, static_cast<int64_t>(block->requested));
      decrease(s.allocation, small, 1);
      decrease(s.active, small, 1);
      if (is_oversize(block)) s.oversize_allocations.decrease(1);
      record(device, Action::kFreeRequested, addr(ptr), size, block->stream, context);
      block->context.reset();
      usage = usage_of(s);
      uses.swap(block->other_uses);
      if (uses.empty() && caching_ && !block->taken) {
        record(device, Action::kFreeCompleted, addr(ptr), size, block->stream, context);
        free_block(block);
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
    block->pending = true;
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

  void empty_cache() {  // every device's plain segments wholly free, and the free ends of expandable ones
    for (c10::DeviceIndex d = 0; d < static_cast<c10::DeviceIndex>(pools_.size()); ++d) {
      release_cached(d);
    }
  }

  DeviceStats stats(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return pools_.at(device).stats;
  }

  int64_t max_split_size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return settings_.max_split_size == SIZE_MAX ? -1 : static_cast<int64_t>(settings_.max_split_size);
  }

  void reset_peak(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = pools_.at(device).stats;
    for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes,
                         &s.requested_bytes, &s.inactive_split, &s.inactive_split_bytes})
      for (auto& stat : *a) stat.peak = stat.current;
    for (Stat* stat : {&s.oversize_allocations, &s.oversize_segments}) stat->peak = stat->current;
  }

  void reset_accumulated(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = pools_.at(device).stats;
    for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes,
                         &s.requested_bytes, &s.inactive_split, &s.inactive_split_bytes})
      for (auto& stat : *a) stat.allocated = stat.freed = 0;
    for (Stat* stat : {&s.oversize_allocations, &s.oversize_segments}) stat->allocated = stat->freed = 0;
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
    auto copy_stat = [](const Stat& from, c10::CachingAllocator::Stat& to) {
      to.current = from.current;
      to.peak = from.peak;
      to.allocated = from.allocated;
      to.freed = from.freed;
    };
    auto copy = [&](const StatArray& from, c10::CachingAllocator::StatArray& to) {
      for (size_t i = 0; i < from.size(); ++i) copy_stat(from[i], to[i]);
    };
    copy(s.allocation, out.allocation);
    copy(s.segment, out.segment);
    copy(s.active, out.active);
    copy(s.inactive_split, out.inactive_split);
    copy(s.allocated_bytes, out.allocated_bytes);
    copy(s.reserved_bytes, out.reserved_bytes);
    copy(s.active_bytes, out.active_bytes);
    copy(s.inactive_split_bytes, out.inactive_split_bytes);
    copy(s.requested_bytes, out.requested_bytes);
    copy_stat(s.oversize_allocations, out.oversize_allocations);
    copy_stat(s.oversize_segments, out.oversize_segments);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    out.max_split_size = max_split_size();
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
  static size_t round_up(size_t n, size_t step) { return (n + step - 1) / step * step; }

  // Requires mutex_. The block size for a request of `n` bytes (Note [Block sizes]).
  size_t round_size(size_t n) const {
    if (n <= kRound) return kRound;
    size_t log_size = 63 - static_cast<size_t>(__builtin_clzll(n));
    size_t index = log_size > 20 ? log_size - 20 : 0;  // intervals start at 1 MiB
    size_t divisions = settings_.roundup_power2_divisions[std::min<size_t>(index, 15)];
    if (divisions > 1 && n > kRound * divisions) {
      if ((n & (n - 1)) == 0) return n;
      size_t floor = size_t{1} << log_size;
      size_t step = floor >> (63 - static_cast<size_t>(__builtin_clzll(divisions)));
      if (step == 0) return floor << 1;
      size_t down = n & ~(step - 1);
      return down == n ? n : down + step;
    }
    return round_up(n, kRound);
  }

  // The segment the vendor allocates for a block of `size` bytes (Note [Splitting blocks]).
  static size_t segment_size(size_t size) {
    if (size <= kSmallSize) return kSmallBuffer;
    if (size < kMinLargeAlloc) return kLargeBuffer;
    return round_up(size, kRoundLarge);
  }

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

  // A cached block for (device, stream) and a request of `nbytes`, already handed out; or null, with
  // `size` the block size the request needs. One critical section unless blocks wait for their events.
  Block* take_cached(c10::DeviceIndex device, c10::StreamId stream, size_t nbytes, const Context& context, Usage& usage,
                     size_t& size) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!pools_[device].pending.empty()) {
      lock.unlock();
      reclaim_pending(device);
      lock.lock();
    }
    size = round_size(nbytes);
    const bool small = size <= kSmallSize;
    Block* block = pop_free(device, stream, size, small, /*borrow=*/false);
    if (!block && (small || expandable_.load())) block = pop_free(device, stream, size, !small, /*borrow=*/true);
    if (block) hand_out(block, nbytes, context, usage);
    return block;
  }

  // Requires mutex_. An active block becomes the allocation of `nbytes` the caller asked for.
  void hand_out(Block* block, size_t nbytes, const Context& context, Usage& usage) {
    auto& s = pools_[block->device].stats;
    block->requested = nbytes;
    block->context = context;
    increase(s.requested_bytes, block->small, static_cast<int64_t>(nbytes));
    record(block->device, Action::kAlloc, addr(block->ptr), block->size, block->stream, gather_for_trace(context));
    usage = usage_of(s);
  }

  // Requires mutex_. Puts a free block into its pool. Note [Nodes kept by their block].
  void to_free_pool(Block* block) {
    auto& pool = pools_[block->device];
    auto& free_blocks = pool.blocks_of(block->small);
    block->freed_at = ++pool.free_clock;
    if (block->free_node)
      free_blocks.insert(std::move(block->free_node));
    else
      free_blocks.insert(block);
    if (block->is_split()) {
      increase(pool.stats.inactive_split, block->small, 1);
      increase(pool.stats.inactive_split_bytes, block->small, static_cast<int64_t>(block->size));
    }
  }

  // Requires mutex_. Takes a free block out of its pool (keeping its node).
  void from_free_pool(Block* block) {
    auto& pool = pools_[block->device];
    block->free_node = pool.blocks_of(block->small).extract(block);
    if (block->is_split()) {
      decrease(pool.stats.inactive_split, block->small, 1);
      decrease(pool.stats.inactive_split_bytes, block->small, static_cast<int64_t>(block->size));
    }
  }

  // Requires mutex_. A Block object for a new remainder: one a merge left over, or a new one.
  Block* spare_block() {
    if (spare_.empty()) return new Block{0, 0, 0, nullptr, {}};
    Block* b = spare_.back();
    spare_.pop_back();
    return b;
  }
  void retire(Block* b) {
    if (spare_.size() >= kMaxSpareBlocks) {
      delete b;
      return;
    }
    b->other_uses.clear();
    b->context.reset();
    b->segment_context.reset();
    b->taken = c10::Storage();
    b->expandable = nullptr;
    b->prev = b->next = nullptr;
    b->allocated = b->pending = false;
    spare_.push_back(b);
  }

  // Requires mutex_. Whether taking `size` bytes of a free `block` leaves a remainder to keep cached.
  bool should_split(const Block* block, size_t size) const {
    return block->size - size >= kRound && (block->small || block->expandable || size < settings_.max_split_size);
  }

  // Requires mutex_. Note [Oversize blocks]; never a block of an expandable segment (Note [Expandable segments]).
  bool is_oversize(const Block* block) const { return !block->expandable && block->size >= settings_.max_split_size; }

  // Requires mutex_. Cuts `block` (out of the pools) down to `size`, the rest cached as a block of its own.
  void split(Block* block, size_t size) {
    if (!should_split(block, size)) return;
    Block* rest = spare_block();
    rest->device = block->device;
    rest->stream = block->stream;
    rest->size = block->size - size;
    rest->ptr = static_cast<char*>(block->ptr) + size;
    rest->small = block->small;
    rest->requested = 0;
    rest->prev = block;
    rest->next = block->next;
    if (block->next) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    rest->expandable = block->expandable;
    if (block->expandable && block->expandable->last == block) block->expandable->last = rest;
    to_free_pool(rest);
  }

  // Requires mutex_. A block no longer in use joins its free neighbours and goes back to its pool.
  void free_block(Block* block) {
    block->allocated = block->pending = false;
    for (Block* n : {block->prev, block->next}) {
      if (!n || n->allocated) continue;
      from_free_pool(n);
      if (n == block->prev) {
        block->ptr = n->ptr;
        block->prev = n->prev;
        if (block->prev) block->prev->next = block;
        block->segment_context = std::move(n->segment_context);
      } else {
        block->next = n->next;
        if (block->next) block->next->prev = block;
        if (block->expandable && block->expandable->last == n) block->expandable->last = block;
      }
      block->size += n->size;
      retire(n);
    }
    to_free_pool(block);
  }

  // Requires mutex_. A free block of the small or the large pool for `size` bytes on `stream`, taken out of it and
  // split: the best fit (Note [Splitting blocks]), or in an expandable segment the block Note [Placement in expandable
  // segments] chooses. A request that `borrow`s from the other pool (Note [Borrowing between pools]) takes from the
  // small pool only a block of an expandable segment, from the large pool any block.
  Block* pop_free(c10::DeviceIndex device, c10::StreamId stream, size_t size, bool small, bool borrow) {
    auto& free_blocks = pools_[device].blocks_of(small);
    Block key{device, stream, size, nullptr, {}};
    auto it = free_blocks.lower_bound(&key);
    while (borrow && small && it != free_blocks.end() && (*it)->stream == stream && !(*it)->expandable) ++it;
    if (it == free_blocks.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    if (b->expandable) b = place(free_blocks, it, /*small_request=*/small != borrow);
    // See Note [Oversize blocks].
    if (!b->expandable && size < settings_.max_split_size && b->size >= settings_.max_split_size) return nullptr;
    if (!b->expandable && size >= settings_.max_split_size && b->size >= size + kLargeBuffer) return nullptr;
    from_free_pool(b);
    if (borrow && b->expandable && b != b->expandable->last)
      b = split_top(b, size);
    else
      split(b, size);
    mark_active(b);
    return b;
  }

  // Requires mutex_. Note [Placement in expandable segments]: `it` is the best fit in `free_blocks`, a block of an
  // expandable segment; the block to take instead, of the same stream, at least as large.
  static Block* place(const FreeSet& free_blocks, FreeSet::const_iterator it, bool small_request) {
    Block* const best = *it;
    const c10::StreamId stream = best->stream;
    if (small_request) {  // the best fit, the segment's tail only where nothing else fits
      if (best != best->expandable->last) return best;
      for (auto j = std::next(it); j != free_blocks.end() && (*j)->stream == stream; ++j)
        if ((*j)->expandable && *j != (*j)->expandable->last) return *j;
      return best;
    }
    Block* lowest = best;  // the first fit: the lowest address
    for (auto j = std::next(it); j != free_blocks.end() && (*j)->stream == stream; ++j)
      if ((*j)->expandable && addr((*j)->ptr) < addr(lowest->ptr)) lowest = *j;
    return lowest;
  }

  // Requires mutex_. Cuts the top `size` bytes off `block` (out of the pools, not its segment's last), returned as a
  // block of their own; the rest stays cached. Note [Placement in expandable segments].
  Block* split_top(Block* block, size_t size) {
    if (block->size - size < kRound) return block;
    Block* top = spare_block();
    top->device = block->device;
    top->stream = block->stream;
    top->size = size;
    top->ptr = static_cast<char*>(block->ptr) + (block->size - size);
    top->small = block->small;
    top->requested = 0;
    top->expandable = block->expandable;
    top->prev = block;
    top->next = block->next;
    if (block->next) block->next->prev = top;
    block->next = top;
    block->size -= size;
    to_free_pool(block);
    return top;
  }

  // Requires mutex_.
  void mark_active(Block* block) {
    block->allocated = true;
    if (block->active_node) {
      block->active_node.key() = block->ptr;
      block->active_node.mapped() = block;
      active_.insert(std::move(block->active_node));
    } else {
      active_.emplace(block->ptr, block);
    }
    auto& s = pools_[block->device].stats;
    increase(s.allocated_bytes, block->small, static_cast<int64_t>(block->size));
    increase(s.active_bytes, block->small, static_cast<int64_t>(block->size));
    increase(s.allocation, block->small, 1);
    increase(s.active, block->small, 1);
    if (is_oversize(block)) s.oversize_allocations.increase(1);
  }

  // Whether reserving `size` more bytes would pass the device's cap (Note [Memory fraction]).
  bool over_limit(c10::DeviceIndex device, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto& pool = pools_[device];
    return pool.limit > 0 && pool.stats.reserved_bytes[0].current + static_cast<int64_t>(size) > pool.limit;
  }

  // Whether reserving `size` more bytes would pass the device's total memory (Note [Taken results]).
  bool over_capacity(c10::DeviceIndex device, size_t size) {
    int64_t capacity;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      capacity = pools_[device].capacity;
    }
    if (capacity < 0) capacity = static_cast<int64_t>(runtime().mem_get_info(device).second);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& pool = pools_[device];
    pool.capacity = capacity;
    return capacity > 0 && pool.stats.reserved_bytes[0].current + static_cast<int64_t>(size) > capacity;
  }

  void* limited_malloc(c10::DeviceIndex device, size_t size) {
    return over_limit(device, size) || over_capacity(device, size) ? nullptr : raw_malloc(device, size);
  }

  // ---- Note [Expandable segments] ----

  // vm_mutex_, waited for without the GIL.
  std::unique_lock<std::mutex> lock_vm() {
    std::unique_lock<std::mutex> vm(vm_mutex_, std::try_to_lock);
    if (!vm.owns_lock()) vendor().blocking([&] { vm.lock(); });
    return vm;
  }

  // Requires vm_mutex_. (device, stream)'s expandable segment of a pool, its range reserved at the first call;
  // null where the vendor reserves no range.
  Expandable* expandable_of(c10::DeviceIndex device, c10::StreamId stream, bool small) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& segments = pools_[device].expandable;
      auto it = segments.find({stream, small});
      if (it != segments.end()) return it->second;
    }
    const size_t granularity = runtime().vm_granularity(device);
    TORCH_CHECK(granularity > 0 && (granularity & (granularity - 1)) == 0, "dipu: vendor '", vendor().name,
                "' reports a virtual-memory granularity of ", granularity, " bytes; it must be a power of two");
    const size_t total = runtime().mem_get_info(device).second;
    const size_t size = round_up(total ? total : kUnknownCapacityRange, granularity);
    void* base = runtime().vm_reserve(device, size);
    if (!base) {
      TORCH_WARN_ONCE("dipu: the ", vendor().name, " vendor could not reserve ",
                      format_bytes(static_cast<int64_t>(size)),
                      " of addresses for an expandable segment; requests it cannot serve get plain segments");
      return nullptr;
    }
    if (addr(base) % granularity != 0) {
      runtime().vm_release(device, base, size);
      TORCH_CHECK(false, "dipu: vendor '", vendor().name, "' reserved a range at ", base,
                  ", which is not a multiple of its granularity (", granularity, " bytes)");
    }
    auto* seg = new Expandable{device, stream, small, static_cast<char*>(base), size, granularity};
    std::lock_guard<std::mutex> lock(mutex_);
    pools_[device].expandable.emplace(std::make_pair(stream, small), seg);
    increase(pools_[device].stats.segment, small, 1);
    return seg;
  }

  // (device, stream)'s expandable segment of the pool of `size`-byte blocks grows until the free block at its end
  // holds `size` bytes, which are handed out (the request was `asked`); null where the vendor reserves no range
  // (a plain segment serves the request then); torch.OutOfMemoryError where the device is full.
  Block* grow(c10::DeviceIndex device, c10::StreamId stream, size_t size, size_t asked, const Context& context,
              Usage& usage) {
    const bool small = size <= kSmallSize;
    std::unique_lock<std::mutex> vm = lock_vm();
    for (bool retried = false;;) {
      Expandable* seg = expandable_of(device, stream, small);
      if (!seg) return nullptr;
      size_t missing;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        Block* last = seg->last;
        const size_t tail = last && !last->allocated ? last->size : 0;
        if (tail >= size) {
          from_free_pool(last);
          split(last, size);
          mark_active(last);
          hand_out(last, asked, context, usage);
          return last;
        }
        missing = round_up(size - tail, seg->granularity);
      }
      if (map_more(seg, missing, context)) continue;
      if (retried) out_of_memory(device, stream, missing, asked, context);
      retried = true;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pools_[device].stats.num_alloc_retries += 1;
      }
      release_cached_holding_vm(device);  // may release `seg`
    }
  }

  // Requires vm_mutex_. Maps `bytes` more at the end of `seg`, joining the free block there; false where the
  // range, the device or the memory cap has no room.
  bool map_more(Expandable* seg, size_t bytes, const Context& context) {
    const c10::DeviceIndex device = seg->device;
    if (seg->mapped + bytes > seg->reserved || over_limit(device, bytes) || over_capacity(device, bytes)) return false;
    char* at = seg->base + seg->mapped;
    if (!runtime().vm_map(device, at, bytes)) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = pools_[device].stats;
    Block* last = seg->last;
    if (last && !last->allocated) {
      from_free_pool(last);
      last->size += bytes;
      to_free_pool(last);
    } else {
      Block* b = spare_block();
      b->device = device;
      b->stream = seg->stream;
      b->size = bytes;
      b->ptr = at;
      b->small = seg->small;
      b->requested = 0;
      b->expandable = seg;
      b->prev = last;
      if (last)
        last->next = b;
      else
        b->segment_context = context;
      seg->last = b;
      to_free_pool(b);
    }
    seg->mapped += bytes;
    increase(s.reserved_bytes, seg->small, static_cast<int64_t>(bytes));
    s.num_device_alloc += 1;
    record(device, Action::kSegmentMap, addr(at), bytes, seg->stream, gather_for_trace(context));
    return true;
  }

  // Requires vm_mutex_. Unmaps the whole granules of the free block at the end of each of `device`'s expandable
  // segments; a segment left with nothing mapped gives its range back.
  void shrink(c10::DeviceIndex device) {
    std::vector<Expandable*> segments;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& entry : pools_[device].expandable) segments.push_back(entry.second);
    }
    for (Expandable* seg : segments) {
      size_t keep = 0, bytes = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        Block* last = seg->last;
        if (last && last->allocated) continue;
        if (last) {
          const size_t offset = addr(last->ptr) - addr(seg->base);
          keep = round_up(offset, seg->granularity);
          bytes = seg->mapped - keep;
        }
        if (bytes) {
          from_free_pool(last);
          if (keep == addr(last->ptr) - addr(seg->base)) {  // the whole block goes
            seg->last = last->prev;
            if (last->prev) last->prev->next = nullptr;
            retire(last);
          } else {
            last->size -= bytes;
            to_free_pool(last);
          }
          seg->mapped = keep;
          auto& s = pools_[device].stats;
          decrease(s.reserved_bytes, seg->small, static_cast<int64_t>(bytes));
          s.num_device_free += 1;
          record(device, Action::kSegmentUnmap, addr(seg->base) + keep, bytes, seg->stream, nullptr);
        }
      }
      if (bytes) runtime().vm_unmap(device, seg->base + keep, bytes);
      if (seg->mapped > 0) continue;
      runtime().vm_release(device, seg->base, seg->reserved);
      std::lock_guard<std::mutex> lock(mutex_);
      pools_[device].expandable.erase({seg->stream, seg->small});
      decrease(pools_[device].stats.segment, seg->small, 1);
      delete seg;
    }
  }

  // A new segment from the vendor for a block of `size` bytes (the request was `asked`), split and handed
  // out; or torch.OutOfMemoryError.
  Block* new_segment(c10::DeviceIndex device, c10::StreamId stream, size_t size, size_t asked, const Context& context,
                     Usage& usage) {
    const size_t seg = caching_ ? segment_size(size) : size;
    collect_garbage(device, seg);
    void* ptr = limited_malloc(device, seg);
    if (!ptr) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pools_[device].stats.num_alloc_retries += 1;
      }
      release_cached(device);
      ptr = limited_malloc(device, seg);
    }
    if (!ptr) out_of_memory(device, stream, seg, asked, context);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = pools_[device].stats;
    auto* block = new Block{device, stream, seg, ptr, {}};
    block->small = size <= kSmallSize;
    block->segment_context = context;
    increase(s.reserved_bytes, block->small, static_cast<int64_t>(seg));
    increase(s.segment, block->small, 1);
    if (seg >= settings_.max_split_size) s.oversize_segments.increase(1);
    s.num_device_alloc += 1;
    record(device, Action::kSegmentAlloc, addr(ptr), seg, stream, gather_for_trace(context));
    if (caching_) split(block, size);
    mark_active(block);
    hand_out(block, asked, context, usage);
    return block;
  }

  [[noreturn]] void out_of_memory(c10::DeviceIndex device, c10::StreamId stream, size_t seg, size_t asked,
                                  const Context& context) {
    bool capped = over_limit(device, seg);
    auto [device_free, capacity] = runtime().mem_get_info(device);
    DeviceStats s;
    int64_t limit;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pools_[device].stats.num_ooms += 1;
      record(device, Action::kOom, static_cast<uintptr_t>(device_free), asked, stream, gather_for_trace(context));
      s = pools_[device].stats;
      limit = pools_[device].limit;
    }
    const int64_t allocated = s.allocated_bytes[0].current;
    const int64_t unallocated = s.reserved_bytes[0].current - allocated;
    std::string cap = capped ? ", and this process may reserve at most " + format_bytes(limit) +
                                   " of it (torch.dipu.set_per_process_memory_fraction)"
                             : "";
    // Enough bytes are cached, but no block of them is large enough: the cache is fragmented. Expandable
    // segments are the cure where the vendor has them and they are off (Note [Expandable segments]).
    std::string advice;
    if (unallocated >= static_cast<int64_t>(asked)) {
      advice = " Reserved but unallocated memory is large: the cache is fragmented; setting PYTORCH_ALLOC_CONF=";
      advice += vendor().has_vm && !expandable_.load()
                    ? "expandable_segments:True lets one segment per stream grow instead (or max_split_size_mb:<MiB> "
                      "keeps large blocks from being split)."
                    : "max_split_size_mb:<MiB> keeps large blocks from being split.";
    }
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "dipu out of memory on ", vendor().name, " device dipu:", static_cast<int>(device),
        ": tried to allocate ", format_bytes(static_cast<int64_t>(asked)), ". The device has a total capacity of ",
        format_bytes(static_cast<int64_t>(capacity)), " of which ", format_bytes(static_cast<int64_t>(device_free)),
        " is free", cap, ". Of the memory dipu holds, ", format_bytes(allocated), " is allocated and ",
        format_bytes(unallocated), " is reserved but unallocated.", advice,
        " Free tensors or call torch.dipu.empty_cache(); the process can continue.");
    std::abort();  // not reached
  }

  void* raw_malloc(c10::DeviceIndex device, size_t size) { return runtime().malloc(device, size); }

  // Note [Oversize blocks]: with garbage_collection_threshold and a memory cap, returns the oldest wholly
  // free segments until reserving `size` more stays within the threshold's share of the cap.
  void collect_garbage(c10::DeviceIndex device, size_t size) {
    std::vector<Block*> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& pool = pools_[device];
      if (settings_.garbage_collection_threshold <= 0 || pool.limit <= 0) return;
      const auto target = static_cast<int64_t>(settings_.garbage_collection_threshold * pool.limit);
      int64_t reserved = pool.stats.reserved_bytes[0].current + static_cast<int64_t>(size);
      if (reserved <= target) return;
      std::vector<Block*> whole;
      for (auto* set : {&pool.small_blocks, &pool.large_blocks})
        for (Block* b : *set)
          if (!b->is_split() && !b->expandable) whole.push_back(b);
      std::sort(whole.begin(), whole.end(), [](const Block* a, const Block* b) { return a->freed_at < b->freed_at; });
      for (Block* b : whole) {
        if (reserved <= target) break;
        from_free_pool(b);
        blocks.push_back(b);
        reserved -= static_cast<int64_t>(b->size);
      }
    }
    release_to_vendor(blocks);
  }

  // Returns every wholly free plain segment of `device` to the vendor, and unmaps the free ends of its expandable
  // ones.
  void release_cached(c10::DeviceIndex device) {
    std::unique_lock<std::mutex> vm = lock_vm();
    release_cached_holding_vm(device);
  }
  void release_cached_holding_vm(c10::DeviceIndex device) {
    reclaim_pending(device);
    std::vector<Block*> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& pool = pools_[device];
      for (auto* set : {&pool.small_blocks, &pool.large_blocks})
        for (Block* b : *set)
          if (!b->is_split() && !b->expandable) blocks.push_back(b);
      for (Block* b : blocks) from_free_pool(b);
    }
    release_to_vendor(blocks);
    shrink(device);
  }

  // Whole segments out of the pools (or uncached blocks) back to the vendor.
  void release_to_vendor(const std::vector<Block*>& blocks) {
    if (blocks.empty()) return;
    for (Block* b : blocks) runtime().free(b->device, b->ptr, b->size);
    std::lock_guard<std::mutex> lock(mutex_);
    for (Block* b : blocks) {
      auto& s = pools_[b->device].stats;
      decrease(s.reserved_bytes, b->small, static_cast<int64_t>(b->size));
      decrease(s.segment, b->small, 1);
      if (b->size >= settings_.max_split_size) s.oversize_segments.decrease(1);
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
          free_block(b);
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
        decrease(s.reserved_bytes, b->small, static_cast<int64_t>(b->size));
        decrease(s.segment, b->small, 1);
        record(b->device, Action::kSegmentFree, addr(b->ptr), b->size, b->stream, nullptr);
        storages.push_back(std::move(b->taken));
        delete b;
      }
    }
  }

  std::mutex vm_mutex_;  // Note [Expandable segments]: taken before mutex_
  std::mutex mutex_;
  std::atomic<bool> expandable_{false};  // expandable segments are on (and the vendor has virtual memory)
  std::vector<DevicePool> pools_;
  ActiveMap active_;
  std::vector<Block*> spare_;  // Note [Nodes kept by their block]
  AllocatorSettings settings_;
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
    // Every segment by its first block, reached from any of its blocks.
    std::set<Block*> heads;
    auto add = [&](Block* b) {
      while (b->prev) b = b->prev;
      heads.insert(b);
    };
    for (const auto& [ptr, b] : active_) add(b);
    for (auto& pool : pools_) {
      for (auto* set : {&pool.small_blocks, &pool.large_blocks})
        for (Block* b : *set) add(b);
      for (const auto& p : pool.pending) add(p.block);
    }
    for (Block* head : heads) {
      MemorySnapshot::Segment seg{head->device, head->stream, addr(head->ptr), 0, head->small, false, nullptr, {}};
      seg.expandable = head->expandable != nullptr;
      seg.segment_context = head->segment_context;
      for (Block* b = head; b; b = b->next) {
        const char* state = b->pending ? "active_pending_free" : b->allocated ? "active_allocated" : "inactive";
        seg.blocks.push_back({addr(b->ptr), b->size, b->requested, state, b->allocated ? b->context : nullptr});
        seg.total_size += b->size;
      }
      result.segments.push_back(std::move(seg));
    }
    for (const auto& pool : pools_) {
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
void set_allocator_settings(const AllocatorSettings& settings) { g_allocator.configure(settings); }
int64_t allocator_max_split_size() { return g_allocator.max_split_size(); }
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
    for (int a = 0; a <= static_cast<int>(Action::kSegmentUnmap); ++a) {
      if (name == action_name(static_cast<Action>(a))) {
        mask |= 1u << a;
        known = true;
      }
    }
    TORCH_CHECK_VALUE(known, "_record_memory_history: skip_actions names '", name,
                      "', which is not an allocator action (alloc, free_requested, free_completed, "
                      "segment_alloc, segment_free, oom, segment_map, segment_unmap)");
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
