// Note [Caching allocator]
// Vendor malloc/free are Python calls (microseconds) and often far slower on
// real devices, so the core keeps freed blocks and reuses them. Blocks are
// pooled per (device, stream): a block freed on stream S is only handed out
// again for allocations on S, because work queued on S may still read it.
// A block that was also used on other streams (Tensor.record_stream) waits in
// `pending` until an event recorded on each of those streams has completed.
// Vendor calls are made with the allocator mutex released: they take the GIL,
// and a thread holding the GIL may be waiting for this mutex.
#include "core.h"

#include <ATen/TensorUtils.h>

#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

namespace dipu {
namespace {

constexpr size_t kRound = 512;                 // every block is a multiple of this
constexpr size_t kLargeRound = 2 << 20;        // requests above 1 MiB round to 2 MiB

size_t round_size(size_t n) {
  if (n <= (1 << 20)) return (n + kRound - 1) / kRound * kRound;
  return (n + kLargeRound - 1) / kLargeRound * kLargeRound;
}

struct Block {
  c10::DeviceIndex device;
  c10::StreamId stream;
  size_t size;
  void* ptr;
  std::vector<c10::Stream> other_uses;  // streams from record_stream
};

struct FreeOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return addr(a->ptr) < addr(b->ptr);
  }
};

struct Pending {
  Block* block;
  std::vector<std::pair<py::object*, c10::DeviceIndex>> events;
};

struct DevicePool {
  std::set<Block*, FreeOrder> free_blocks;
  std::vector<Pending> pending;
  DeviceStats stats;
};

std::string format_bytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  char buf[64];
  snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

void delete_block(void* ctx);

class DipuAllocator final : public c10::Allocator {
 public:
  void init(int device_count, bool caching) {
    std::lock_guard<std::mutex> lock(mutex_);
    pools_.resize(device_count);
    caching_ = caching;
  }

  c10::DataPtr allocate(size_t nbytes) override {
    ensure_initialized();
    c10::DeviceIndex device = current_device();
    c10::Device dev(kDipu, device);
    if (nbytes == 0) return {nullptr, nullptr, &delete_block, dev};
    size_t size = round_size(nbytes);
    c10::StreamId stream = current_stream(device).id();
    Block* block = caching_ ? take_cached(device, stream, size) : nullptr;
    if (!block) {
      block = new_block(device, stream, size, nbytes);
      std::lock_guard<std::mutex> lock(mutex_);
      mark_active(block);
    }
    return {block->ptr, block, &delete_block, dev};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    c10::Device dev(kDipu, current_device());
    copy_bytes(dest, dev, src, dev, count);
  }

  void free(Block* block) {
    std::vector<c10::Stream> uses;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      active_.erase(block->ptr);
      auto& s = pools_[block->device].stats;
      s.allocated -= block->size;
      s.freed_total += block->size;
      s.active_blocks -= 1;
      uses.swap(block->other_uses);
      if (uses.empty() && caching_) {
        pools_[block->device].free_blocks.insert(block);
        return;
      }
    }
    // The process is ending, or is a forked child whose inherited memory the vendor no longer
    // serves: nothing to reuse, and a deleter must not fail.
    if (g_shutdown.load() || !g_initialized.load()) return;
    if (!caching_) {
      release_to_vendor({block});
      return;
    }
    Pending p{block, {}};
    {
      py::gil_scoped_acquire gil;
      for (const auto& stream : uses) {
        py::object ev = call_vendor_locked("create_event", stream.device_index(), false);
        call_vendor_locked("record_event", stream.device_index(), ev, stream_handle(stream));
        p.events.emplace_back(new py::object(std::move(ev)), stream.device_index());
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    pools_[block->device].pending.push_back(std::move(p));
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
    s.allocated_peak = s.allocated;
    s.reserved_peak = s.reserved;
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

 private:
  // A cached block for (device, stream, size), already marked active; or null.
  Block* take_cached(c10::DeviceIndex device, c10::StreamId stream, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (pools_[device].pending.empty()) return pop_free(device, stream, size);
    }
    reclaim_pending(device);
    std::lock_guard<std::mutex> lock(mutex_);
    return pop_free(device, stream, size);
  }

  // Requires mutex_.
  Block* pop_free(c10::DeviceIndex device, c10::StreamId stream, size_t size) {
    auto& free_blocks = pools_[device].free_blocks;
    Block key{device, stream, size, nullptr, {}};
    auto it = free_blocks.lower_bound(&key);
    // A cached block may be at most 25% larger than asked: no splitting, so a
    // looser fit would strand memory.
    if (it == free_blocks.end() || (*it)->stream != stream || (*it)->size > size + size / 4)
      return nullptr;
    Block* b = *it;
    free_blocks.erase(it);
    mark_active(b);
    return b;
  }

  // Requires mutex_.
  void mark_active(Block* block) {
    active_.emplace(block->ptr, block);
    auto& s = pools_[block->device].stats;
    s.allocated += block->size;
    s.allocated_total += block->size;
    s.allocated_peak = std::max(s.allocated_peak, s.allocated);
    s.active_blocks += 1;
  }

  Block* new_block(c10::DeviceIndex device, c10::StreamId stream, size_t size, size_t asked) {
    void* ptr = raw_malloc(device, size);
    if (!ptr) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pools_[device].stats.num_alloc_retries += 1;
      }
      release_cached(device);
      ptr = raw_malloc(device, size);
    }
    if (!ptr) {
      DeviceStats s;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pools_[device].stats.num_ooms += 1;
        s = pools_[device].stats;
      }
      TORCH_CHECK_WITH(OutOfMemoryError, false, "dipu out of memory on ", vendor().name,
                       " device dipu:", static_cast<int>(device), ": tried to allocate ",
                       format_bytes(static_cast<int64_t>(asked)), "; ",
                       format_bytes(s.allocated), " allocated by dipu, ", format_bytes(s.reserved),
                       " reserved by dipu on this device. Free tensors or call "
                       "torch.dipu.empty_cache(); the process can continue.");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = pools_[device].stats;
    s.reserved += size;
    s.reserved_peak = std::max(s.reserved_peak, s.reserved);
    s.segments += 1;
    s.raw_mallocs += 1;
    return new Block{device, stream, size, ptr, {}};
  }

  void* raw_malloc(c10::DeviceIndex device, size_t size) {
    auto p = call_vendor<uintptr_t>("malloc", device, size);
    return reinterpret_cast<void*>(p);
  }

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
    {
      py::gil_scoped_acquire gil;
      for (Block* b : blocks) call_vendor_locked("free", b->device, addr(b->ptr));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (Block* b : blocks) {
      auto& s = pools_[b->device].stats;
      s.reserved -= b->size;
      s.segments -= 1;
      s.raw_frees += 1;
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
    {
      py::gil_scoped_acquire gil;
      for (auto& p : pending) {
        bool complete = true;
        for (auto& [ev, dev] : p.events)
          complete = complete && call_vendor_locked("query_event", dev, *ev).cast<bool>();
        if (!complete) {
          still.push_back(std::move(p));
          continue;
        }
        for (auto& [ev, dev] : p.events) {
          call_vendor_locked("destroy_event", dev, *ev);
          delete ev;
        }
        done.push_back(p.block);
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto& pool = pools_[device];
    for (Block* b : done) pool.free_blocks.insert(b);
    for (auto& p : still) pool.pending.push_back(std::move(p));
  }

  std::mutex mutex_;
  std::vector<DevicePool> pools_;
  std::map<void*, Block*> active_;
  bool caching_ = true;
};

DipuAllocator g_allocator;

void delete_block(void* ctx) {
  if (ctx) g_allocator.free(static_cast<Block*>(ctx));
}

// Pinned host memory: uncached, straight from the vendor's host_malloc.
std::mutex g_pinned_mutex;
std::map<void*, size_t> g_pinned;

void delete_pinned(void* ptr) {
  if (!ptr) return;
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(ptr);
  }
  if (!g_shutdown.load() && g_initialized.load()) call_vendor<void>("host_free", addr(ptr));
}

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::Device cpu(c10::DeviceType::CPU);
    if (nbytes == 0) return {nullptr, nullptr, &delete_pinned, cpu};
    void* ptr = reinterpret_cast<void*>(call_vendor<uintptr_t>("host_malloc", nbytes));
    TORCH_CHECK_WITH(OutOfMemoryError, ptr, "dipu: the ", vendor().name,
                     " vendor could not allocate ", format_bytes(static_cast<int64_t>(nbytes)),
                     " of pinned host memory");
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.emplace(ptr, nbytes);
    return {ptr, ptr, &delete_pinned, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

PinnedAllocator g_pinned_allocator;

}  // namespace

c10::Allocator* device_allocator() { return &g_allocator; }
void allocator_init(int device_count, bool caching) { g_allocator.init(device_count, caching); }
void empty_cache() { g_allocator.empty_cache(); }
DeviceStats device_stats(c10::DeviceIndex index) {
  check_device_index(index);
  return g_allocator.stats(index);
}
void reset_peak_stats(c10::DeviceIndex index) {
  check_device_index(index);
  g_allocator.reset_peak(index);
}
void record_stream(const c10::DataPtr& ptr, const c10::Stream& stream) {
  g_allocator.record_stream(ptr, stream);
}
std::optional<c10::DeviceIndex> device_of_pointer(const void* ptr) {
  return g_allocator.device_of(ptr);
}
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
