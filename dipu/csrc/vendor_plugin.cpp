// Note [C runtime plug-ins]
// A vendor runtime written in C: a shared library to the custom-runtime ABI of PaddlePaddle's
// CustomDevice (dipu's declaration: dipu/include/dipu/custom_runtime.h). `DIPU_VENDOR=<path>`
// or a packaged vendor class (dipu.runtime.PluginRuntime) names the library; load_plugin
// dlopens it, calls InitPlugin with a zeroed function table, and refuses (one error naming
// the file and everything wrong) a library without InitPlugin, a version below 0.1.1, a
// required function left null or an empty device type. The core then calls the table through
// PluginRuntime (Note [Two kinds of vendor runtime]) without the GIL.
//
// What real plug-ins do, and dipu's answers:
// - they may leave optional functions null: streams and events default to a synchronous
//   runtime's (a null stream; waiting is synchronizing the event on the host), the device-to-
//   device copy to a copy staged through host memory, memory statistics to zero;
// - they may "create" null handles (Paddle's CustomCPU writes none at all): dipu starts every
//   out-handle null and never reads null as "absent" (Note [Stream ids]);
// - they may return memory aligned to less than kMinAlignment: dipu then over-allocates by the
//   alignment and hands back an aligned address, remembering the plug-in's own for deallocation
//   (which, in this ABI, also takes the size);
// - the ABI cannot time events: dipu stamps an event with the host clock when its stream
//   reaches it (through stream_add_callback where the plug-in has it, else when it is recorded,
//   which is exact for a synchronous runtime).
// - dipu's own optional group, virtual memory (DipuInitVirtualMemory, outside Paddle's table), is looked up
//   with dlsym; a plug-in without it keeps plain segments (Note [Expandable segments] in allocator.cpp).
// A failed call (status other than C_SUCCESS or C_WARNING) raises a RuntimeError naming the
// vendor, the function and the status; a failed allocation is "out of memory" to the caching
// allocator, which raises torch.OutOfMemoryError. Plug-ins are never unloaded.
#include "vendor_plugin.h"

#include <c10/util/ApproximateClock.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace dipu {

// What a plug-in's call returned, by name (the runtime here, the collectives in xccl.cpp).
const char* status_name(C_Status status) {
  switch (status) {
    case C_SUCCESS: return "C_SUCCESS";
    case C_WARNING: return "C_WARNING";
    case C_FAILED: return "C_FAILED";
    case C_ERROR: return "C_ERROR";
    case C_INTERNAL_ERROR: return "C_INTERNAL_ERROR";
  }
  return "an unknown status";
}

namespace {

// An event of a plug-in and the host time its stream reached it (NaN until then). The stamp is
// shared with a pending stream callback, which may outlive the event.
struct PluginEvent {
  C_Event event = nullptr;
  std::shared_ptr<std::atomic<double>> stamp = std::make_shared<std::atomic<double>>(NAN);
};

double now_ms() { return static_cast<double>(c10::getTime()) / 1e6; }

void stamp_callback(C_Device, C_Stream, void* user_data, C_Status*) {
  auto* stamp = static_cast<std::shared_ptr<std::atomic<double>>*>(user_data);
  (*stamp)->store(now_ms());
  delete stamp;
}

}  // namespace

class RuntimePlugin {
 public:
  std::string path, device_type, sub_device_type;
  CustomRuntimeVersion version{};
  C_DeviceInterface table{};
  std::vector<int> ids;  // the plug-in's device id of each dipu index (get_device_list)

  std::string name() const { return device_type; }

  // Fails with the vendor, the function and the status unless `status` is a success.
  void check(C_Status status, const char* function) const {
    TORCH_CHECK(status == C_SUCCESS || status == C_WARNING, "dipu: vendor '", device_type, "' (runtime plug-in ", path,
                ") failed in ", function, ": it returned ", status_name(status));
  }
  // The plug-in's device of a dipu index, as the ABI passes it: a pointer to its id.
  C_Device_st device(int index) const { return C_Device_st{ids.at(static_cast<size_t>(index))}; }

  int device_count() const { return static_cast<int>(ids.size()); }

  void initialize() {
    if (table.initialize) check(table.initialize(), "initialize");
    for (int i = 0; i < device_count(); ++i) {
      C_Device_st d = device(i);
      if (table.init_device) check(table.init_device(&d), "init_device");
    }
  }
  void finalize() {
    for (int i = 0; i < device_count(); ++i) {
      C_Device_st d = device(i);
      if (table.deinit_device) table.deinit_device(&d);
    }
    if (table.finalize) table.finalize();
  }
  void set_device(int index) {
    C_Device_st d = device(index);
    check(table.set_device(&d), "set_device");
  }
  void synchronize_device(int index) {
    if (!table.synchronize_device) return;  // no device-wide queue to wait for
    C_Device_st d = device(index);
    check(waiting([&] { return table.synchronize_device(&d); }), "synchronize_device");
  }

  void* malloc(int index, size_t nbytes) {
    C_Device_st d = device(index);
    if (!overallocate_.load()) {
      void* ptr = nullptr;
      if (table.device_memory_allocate(&d, &ptr, nbytes) != C_SUCCESS || !ptr) return nullptr;
      if (addr(ptr) % kMinAlignment == 0) return ptr;
      check(table.device_memory_deallocate(&d, ptr, nbytes), "device_memory_deallocate");
      overallocate_.store(true);  // this plug-in's memory is not aligned enough
    }
    size_t padded = nbytes + kMinAlignment - 1;
    void* raw = nullptr;
    if (table.device_memory_allocate(&d, &raw, padded) != C_SUCCESS || !raw) return nullptr;
    void* aligned = reinterpret_cast<void*>((addr(raw) + kMinAlignment - 1) & ~(kMinAlignment - 1));
    std::lock_guard<std::mutex> lock(mutex_);
    padded_[aligned] = {raw, padded};
    return aligned;
  }
  void free(int index, void* ptr, size_t nbytes) {
    C_Device_st d = device(index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = padded_.find(ptr);
      if (it != padded_.end()) {
        std::tie(ptr, nbytes) = it->second;
        padded_.erase(it);
      }
    }
    check(table.device_memory_deallocate(&d, ptr, nbytes), "device_memory_deallocate");
  }
  void memcpy_h2d(int index, void* dst, const void* src, size_t nbytes) {
    C_Device_st d = device(index);
    check(waiting([&] { return table.memory_copy_h2d(&d, dst, src, nbytes); }), "memory_copy_h2d");
  }
  void memcpy_d2h(int index, void* dst, const void* src, size_t nbytes) {
    C_Device_st d = device(index);
    check(waiting([&] { return table.memory_copy_d2h(&d, dst, src, nbytes); }), "memory_copy_d2h");
  }
  void memcpy_d2d(int dst_index, void* dst, int src_index, const void* src, size_t nbytes) {
    C_Device_st dd = device(dst_index), sd = device(src_index);
    if (dst_index == src_index && table.memory_copy_d2d) {
      check(waiting([&] { return table.memory_copy_d2d(&dd, dst, src, nbytes); }), "memory_copy_d2d");
    } else if (dst_index != src_index && table.memory_copy_p2p) {
      check(waiting([&] { return table.memory_copy_p2p(&dd, &sd, dst, src, nbytes); }), "memory_copy_p2p");
    } else {  // staged through host memory
      std::unique_ptr<char[]> host(new char[nbytes]);
      memcpy_d2h(src_index, host.get(), src, nbytes);
      memcpy_h2d(dst_index, dst, host.get(), nbytes);
    }
  }
  std::pair<size_t, size_t> mem_get_info(int index) {
    if (!table.device_memory_stats) return {0, 0};
    C_Device_st d = device(index);
    size_t total = 0, free = 0;
    check(table.device_memory_stats(&d, &total, &free), "device_memory_stats");
    return {free, total};
  }
  bool has_pinned() const { return table.host_memory_allocate && table.host_memory_deallocate; }
  void* host_malloc(size_t nbytes) {
    C_Device_st d = device(0);
    void* ptr = nullptr;
    if (table.host_memory_allocate(&d, &ptr, nbytes) != C_SUCCESS) return nullptr;
    return ptr;
  }
  void host_free(void* ptr, size_t nbytes) {
    C_Device_st d = device(0);
    check(table.host_memory_deallocate(&d, ptr, nbytes), "host_memory_deallocate");
  }

  Handle create_stream(int index) {
    if (!table.create_stream) return nullptr;  // a synchronous runtime: the default stream
    C_Device_st d = device(index);
    C_Stream stream = nullptr;
    check(table.create_stream(&d, &stream), "create_stream");
    return stream;
  }
  void destroy_stream(int index, Handle stream) {
    if (!table.destroy_stream) return;
    C_Device_st d = device(index);
    check(table.destroy_stream(&d, static_cast<C_Stream>(stream)), "destroy_stream");
  }
  void synchronize_stream(int index, Handle stream) {
    if (!table.synchronize_stream) return synchronize_device(index);
    C_Device_st d = device(index);
    check(waiting([&] { return table.synchronize_stream(&d, static_cast<C_Stream>(stream)); }), "synchronize_stream");
  }
  bool query_stream(int index, Handle stream) {
    if (!table.query_stream) {
      synchronize_stream(index, stream);
      return true;
    }
    C_Device_st d = device(index);
    return table.query_stream(&d, static_cast<C_Stream>(stream)) == C_SUCCESS;
  }
  void stream_wait_event(int index, Handle stream, Handle event) {
    auto* ev = static_cast<PluginEvent*>(event);
    if (!table.stream_wait_event) return synchronize_event(index, event);  // wait on the host
    C_Device_st d = device(index);
    check(table.stream_wait_event(&d, static_cast<C_Stream>(stream), ev->event), "stream_wait_event");
  }
  Handle create_event(int index) {
    C_Device_st d = device(index);
    auto ev = std::make_unique<PluginEvent>();
    check(table.create_event(&d, &ev->event), "create_event");
    return ev.release();
  }
  void destroy_event(int index, Handle event) {
    std::unique_ptr<PluginEvent> ev(static_cast<PluginEvent*>(event));
    C_Device_st d = device(index);
    check(table.destroy_event(&d, ev->event), "destroy_event");
  }
  void record_event(int index, Handle event, Handle stream) {
    auto* ev = static_cast<PluginEvent*>(event);
    C_Device_st d = device(index);
    ev->stamp = std::make_shared<std::atomic<double>>(NAN);
    if (table.stream_add_callback) {
      auto* user_data = new std::shared_ptr<std::atomic<double>>(ev->stamp);
      C_Status status = table.stream_add_callback(&d, static_cast<C_Stream>(stream), &stamp_callback, user_data);
      if (status != C_SUCCESS) {
        delete user_data;
        check(status, "stream_add_callback");
      }
    } else {
      ev->stamp->store(now_ms());
    }
    check(table.record_event(&d, static_cast<C_Stream>(stream), ev->event), "record_event");
  }
  void synchronize_event(int index, Handle event) {
    auto* ev = static_cast<PluginEvent*>(event);
    C_Device_st d = device(index);
    check(waiting([&] { return table.synchronize_event(&d, ev->event); }), "synchronize_event");
  }
  bool query_event(int index, Handle event) {
    auto* ev = static_cast<PluginEvent*>(event);
    if (!table.query_event) {
      synchronize_event(index, event);
      return true;
    }
    C_Device_st d = device(index);
    return table.query_event(&d, ev->event) == C_SUCCESS;
  }
  double event_elapsed_time(int index, Handle start, Handle end) {
    synchronize_event(index, start);
    synchronize_event(index, end);
    double a = static_cast<PluginEvent*>(start)->stamp->load();
    double b = static_cast<PluginEvent*>(end)->stamp->load();
    TORCH_CHECK(!std::isnan(a) && !std::isnan(b), "Both events must be recorded before calculating elapsed time.");
    return b - a;
  }

  void start_tracing() {
    if (!table.profiler_start_tracing) return;
    if (table.profiler_initialize) check(table.profiler_initialize(nullptr, &profiler_data_), "profiler_initialize");
    if (table.profiler_prepare_tracing)
      check(table.profiler_prepare_tracing(nullptr, profiler_data_), "profiler_prepare_tracing");
    check(table.profiler_start_tracing(nullptr, profiler_data_), "profiler_start_tracing");
    tracing_since_ns_ = static_cast<uint64_t>(c10::getTime());
  }
  void stop_tracing() {
    if (!table.profiler_stop_tracing) return;
    check(table.profiler_stop_tracing(nullptr, profiler_data_), "profiler_stop_tracing");
    if (table.profiler_collect_trace_data)
      check(table.profiler_collect_trace_data(nullptr, tracing_since_ns_, profiler_data_),
            "profiler_collect_trace_data");
    if (table.profiler_finalize) check(table.profiler_finalize(nullptr, profiler_data_), "profiler_finalize");
    profiler_data_ = nullptr;
  }

  // Note [Expandable segments] in allocator.cpp: DipuVirtualMemoryInterface, all null where the plug-in lacks it.
  DipuVirtualMemoryInterface vm{};
  bool has_vm() const { return vm.granularity != nullptr; }
  size_t vm_granularity(int index) {
    C_Device_st d = device(index);
    size_t granularity = 0;
    check(vm.granularity(&d, &granularity), "DipuVirtualMemoryInterface.granularity");
    return granularity;
  }
  void* vm_reserve(int index, size_t nbytes) {
    C_Device_st d = device(index);
    void* ptr = nullptr;
    C_Status status = vm.reserve(&d, &ptr, nbytes);
    if (status == C_FAILED) return nullptr;
    check(status, "DipuVirtualMemoryInterface.reserve");
    return ptr;
  }
  bool vm_map(int index, void* ptr, size_t nbytes) {
    C_Device_st d = device(index);
    C_Status status = vm.map(&d, ptr, nbytes);
    if (status == C_FAILED) return false;
    check(status, "DipuVirtualMemoryInterface.map");
    return true;
  }
  void vm_unmap(int index, void* ptr, size_t nbytes) {
    C_Device_st d = device(index);
    check(vm.unmap(&d, ptr, nbytes), "DipuVirtualMemoryInterface.unmap");
  }
  void vm_release(int index, void* ptr, size_t nbytes) {
    C_Device_st d = device(index);
    check(vm.release(&d, ptr, nbytes), "DipuVirtualMemoryInterface.release");
  }

  // The functions the plug-in implements, by their names in the ABI.
  std::vector<std::string> functions() const;

 private:
  std::atomic<bool> overallocate_{false};
  std::mutex mutex_;
  std::unordered_map<void*, std::pair<void*, size_t>> padded_;  // aligned -> (plug-in's, size)
  void* profiler_data_ = nullptr;
  uint64_t tracing_since_ns_ = 0;
};

namespace {

// Every function of the table by name, and whether dipu requires it.
struct TableEntry {
  const char* name;
  size_t offset;
  bool required;
};
#define DIPU_ENTRY(name, required) {#name, offsetof(C_DeviceInterface, name), required}
const TableEntry kTable[] = {
    DIPU_ENTRY(initialize, false),
    DIPU_ENTRY(finalize, false),
    DIPU_ENTRY(init_device, false),
    DIPU_ENTRY(set_device, true),
    DIPU_ENTRY(get_device, true),
    DIPU_ENTRY(deinit_device, false),
    DIPU_ENTRY(create_stream, false),
    DIPU_ENTRY(destroy_stream, false),
    DIPU_ENTRY(query_stream, false),
    DIPU_ENTRY(stream_add_callback, false),
    DIPU_ENTRY(create_event, true),
    DIPU_ENTRY(record_event, true),
    DIPU_ENTRY(destroy_event, true),
    DIPU_ENTRY(query_event, false),
    DIPU_ENTRY(synchronize_device, false),
    DIPU_ENTRY(synchronize_stream, false),
    DIPU_ENTRY(synchronize_event, true),
    DIPU_ENTRY(stream_wait_event, false),
    DIPU_ENTRY(device_memory_allocate, true),
    DIPU_ENTRY(device_memory_deallocate, true),
    DIPU_ENTRY(device_memory_set, false),
    DIPU_ENTRY(host_memory_allocate, false),
    DIPU_ENTRY(host_memory_deallocate, false),
    DIPU_ENTRY(memory_copy_h2d, true),
    DIPU_ENTRY(memory_copy_d2h, true),
    DIPU_ENTRY(memory_copy_d2d, false),
    DIPU_ENTRY(memory_copy_p2p, false),
    DIPU_ENTRY(get_device_count, true),
    DIPU_ENTRY(get_device_list, true),
    DIPU_ENTRY(device_memory_stats, false),
    DIPU_ENTRY(get_compute_capability, false),
    DIPU_ENTRY(get_runtime_version, false),
    DIPU_ENTRY(get_driver_version, false),
    DIPU_ENTRY(xccl_get_unique_id_size, false),
    DIPU_ENTRY(xccl_get_unique_id, false),
    DIPU_ENTRY(xccl_comm_init_rank, false),
    DIPU_ENTRY(xccl_destroy_comm, false),
    DIPU_ENTRY(xccl_all_reduce, false),
    DIPU_ENTRY(xccl_broadcast, false),
    DIPU_ENTRY(xccl_reduce, false),
    DIPU_ENTRY(xccl_all_gather, false),
    DIPU_ENTRY(xccl_reduce_scatter, false),
    DIPU_ENTRY(xccl_group_start, false),
    DIPU_ENTRY(xccl_group_end, false),
    DIPU_ENTRY(xccl_send, false),
    DIPU_ENTRY(xccl_recv, false),
    DIPU_ENTRY(xccl_all_to_all, false),
    DIPU_ENTRY(profiler_start_tracing, false),
    DIPU_ENTRY(profiler_stop_tracing, false),
};
#undef DIPU_ENTRY

bool present(const C_DeviceInterface& table, const TableEntry& entry) {
  void* fn = nullptr;
  std::memcpy(&fn, reinterpret_cast<const char*>(&table) + entry.offset, sizeof(fn));
  return fn != nullptr;
}

std::string describe(const char* variable, const std::string& path) {
  return std::string("dipu: ") + variable + "=" + path + ": ";
}

}  // namespace

std::vector<std::string> RuntimePlugin::functions() const {
  std::vector<std::string> names;
  for (const auto& entry : kTable)
    if (present(table, entry)) names.emplace_back(entry.name);
  return names;
}

std::shared_ptr<RuntimePlugin> load_plugin(const std::string& path, const char* variable) {
  std::string where = describe(variable, path);
  struct stat info{};
  TORCH_CHECK(::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode), where,
              "no such file (a runtime plug-in is a shared library exporting InitPlugin)");
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(library, where, "cannot be loaded as a shared library: ", dlerror());
  using Init = void (*)(CustomRuntimeParams*);
  auto init = reinterpret_cast<Init>(dlsym(library, "InitPlugin"));
  TORCH_CHECK(init, where,
              "is not a runtime plug-in: it exports no InitPlugin function "
              "(see dipu/include/dipu/custom_runtime.h)");

  auto plugin = std::make_shared<RuntimePlugin>();
  plugin->path = path;
  CustomRuntimeParams params{};
  params.size = sizeof(CustomRuntimeParams);
  params.interface = &plugin->table;
  plugin->table.size = sizeof(C_DeviceInterface);
  init(&params);

  const auto& v = params.version;
  bool new_enough = v.major > 0 || v.minor > 1 || (v.minor == 1 && v.patch >= 1);
  TORCH_CHECK(new_enough, where, "the plug-in reports ABI version ", v.major, ".", v.minor, ".", v.patch,
              "; dipu needs 0.1.1 or later (did InitPlugin fill params->version?)");
  plugin->version = v;
  TORCH_CHECK(params.device_type && params.device_type[0], where,
              "InitPlugin left the device type empty (params->device_type must name the device)");
  plugin->device_type = params.device_type;
  plugin->sub_device_type = params.sub_device_type ? params.sub_device_type : "";
  std::vector<std::string> missing;
  for (const auto& entry : kTable)
    if (entry.required && !present(plugin->table, entry)) missing.emplace_back(entry.name);
  if (!missing.empty()) {
    std::ostringstream names;
    for (size_t i = 0; i < missing.size(); ++i) names << (i ? ", " : "") << missing[i];
    TORCH_CHECK(false, where, "the plug-in '", plugin->device_type, "' leaves required functions null: ", names.str());
  }

  using InitVm = void (*)(DipuVirtualMemoryInterface*);
  if (auto init_vm = reinterpret_cast<InitVm>(dlsym(library, "DipuInitVirtualMemory"))) {
    auto& vm = plugin->vm;
    vm.size = sizeof(DipuVirtualMemoryInterface);
    init_vm(&vm);
    const int filled = !!vm.granularity + !!vm.reserve + !!vm.map + !!vm.unmap + !!vm.release;
    TORCH_CHECK(filled == 0 || filled == 5, where, "DipuInitVirtualMemory filled ", filled,
                " of the 5 functions of DipuVirtualMemoryInterface; a plug-in fills all of them or none");
  }

  size_t count = 0;
  plugin->check(plugin->table.get_device_count(&count), "get_device_count");
  TORCH_CHECK(count <= 127, where, "the plug-in reports ", count,
              " devices; PyTorch indexes at most 127 devices of one type");
  std::vector<size_t> ids(count);
  if (count) plugin->check(plugin->table.get_device_list(ids.data()), "get_device_list");
  for (size_t id : ids) plugin->ids.push_back(static_cast<int>(id));
  return plugin;
}

namespace {

class PluginRuntime final : public Runtime {
 public:
  explicit PluginRuntime(std::shared_ptr<RuntimePlugin> plugin) : p_(std::move(plugin)) {}

  void set_device(int index) override { started().set_device(index); }
  void synchronize_device(int index) override { started().synchronize_device(index); }
  void* malloc(int index, size_t nbytes) override { return started().malloc(index, nbytes); }
  void free(int index, void* ptr, size_t nbytes) override { started().free(index, ptr, nbytes); }
  void memcpy_h2d(int index, void* dst, const void* src, size_t nbytes) override {
    started().memcpy_h2d(index, dst, src, nbytes);
  }
  void memcpy_d2h(int index, void* dst, const void* src, size_t nbytes) override {
    started().memcpy_d2h(index, dst, src, nbytes);
  }
  void memcpy_d2d(int dst_index, void* dst, int src_index, const void* src, size_t nbytes) override {
    started().memcpy_d2d(dst_index, dst, src_index, src, nbytes);
  }
  std::pair<size_t, size_t> mem_get_info(int index) override { return started().mem_get_info(index); }
  void* host_malloc(size_t nbytes) override { return started().host_malloc(nbytes); }
  void host_free(void* ptr, size_t nbytes) override { started().host_free(ptr, nbytes); }
  Handle create_stream(int index, int) override { return started().create_stream(index); }
  void destroy_stream(int index, Handle stream) override { started().destroy_stream(index, stream); }
  void synchronize_stream(int index, Handle stream) override { started().synchronize_stream(index, stream); }
  bool query_stream(int index, Handle stream) override { return started().query_stream(index, stream); }
  void stream_wait_event(int index, Handle stream, Handle event) override {
    started().stream_wait_event(index, stream, event);
  }
  void set_current_stream(int, Handle) override {}
  Handle create_event(int index, bool) override { return started().create_event(index); }
  void destroy_event(int index, Handle event) override { started().destroy_event(index, event); }
  void record_event(int index, Handle event, Handle stream) override { started().record_event(index, event, stream); }
  void synchronize_event(int index, Handle event) override { started().synchronize_event(index, event); }
  bool query_event(int index, Handle event) override { return started().query_event(index, event); }
  double event_elapsed_time(int index, Handle start, Handle end) override {
    return started().event_elapsed_time(index, start, end);
  }
  void start_tracing() override { started().start_tracing(); }
  void stop_tracing() override { started().stop_tracing(); }
  size_t vm_granularity(int index) override { return started().vm_granularity(index); }
  void* vm_reserve(int index, size_t nbytes) override { return started().vm_reserve(index, nbytes); }
  bool vm_map(int index, void* ptr, size_t nbytes) override { return started().vm_map(index, ptr, nbytes); }
  void vm_unmap(int index, void* ptr, size_t nbytes) override { started().vm_unmap(index, ptr, nbytes); }
  void vm_release(int index, void* ptr, size_t nbytes) override { started().vm_release(index, ptr, nbytes); }

 private:
  // The plug-in, its runtime started first (Note [Lazy initialization]).
  RuntimePlugin& started() {
    ensure_initialized();
    return *p_;
  }
  std::shared_ptr<RuntimePlugin> p_;
};

}  // namespace

std::unique_ptr<Runtime> plugin_runtime(const py::object& plugin) {
  return std::make_unique<PluginRuntime>(plugin.cast<std::shared_ptr<RuntimePlugin>>());
}

PluginTable plugin_table(const py::object& plugin) {
  auto p = plugin.cast<std::shared_ptr<RuntimePlugin>>();
  return PluginTable{&p->table, p->ids, p->device_type, p};
}

void register_plugin_python(py::module& m) {
  py::class_<RuntimePlugin, std::shared_ptr<RuntimePlugin>>(
      m, "RuntimePlugin", "A runtime plug-in loaded from a shared library (Note [C runtime plug-ins]).")
      .def_readonly("path", &RuntimePlugin::path)
      .def_readonly("device_type", &RuntimePlugin::device_type)
      .def_readonly("sub_device_type", &RuntimePlugin::sub_device_type)
      .def_property_readonly(
          "version",
          [](const RuntimePlugin& p) { return py::make_tuple(p.version.major, p.version.minor, p.version.patch); })
      .def("functions", &RuntimePlugin::functions)
      .def("has_virtual_memory", &RuntimePlugin::has_vm, "Whether it exports DipuInitVirtualMemory's group.")
      .def("device_count", &RuntimePlugin::device_count)
      .def("device_ids", [](const RuntimePlugin& p) { return p.ids; })
      .def("initialize", &RuntimePlugin::initialize)
      .def("finalize", &RuntimePlugin::finalize)
      .def("set_device", &RuntimePlugin::set_device)
      .def("synchronize_device", &RuntimePlugin::synchronize_device)
      .def("malloc", [](RuntimePlugin& p, int index, size_t n) { return addr(p.malloc(index, n)); })
      .def("free",
           [](RuntimePlugin& p, int index, uintptr_t ptr, size_t n) { p.free(index, reinterpret_cast<void*>(ptr), n); })
      .def("memcpy_h2d",
           [](RuntimePlugin& p, int index, uintptr_t dst, uintptr_t src, size_t n) {
             p.memcpy_h2d(index, reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
           })
      .def("memcpy_d2h",
           [](RuntimePlugin& p, int index, uintptr_t dst, uintptr_t src, size_t n) {
             p.memcpy_d2h(index, reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
           })
      .def("memcpy_d2d",
           [](RuntimePlugin& p, int di, uintptr_t dst, int si, uintptr_t src, size_t n) {
             p.memcpy_d2d(di, reinterpret_cast<void*>(dst), si, reinterpret_cast<const void*>(src), n);
           })
      .def("mem_get_info", &RuntimePlugin::mem_get_info)
      .def("compute_capability",
           [](const RuntimePlugin& p) -> std::optional<size_t> {
             if (!p.table.get_compute_capability) return std::nullopt;
             size_t value = 0;
             p.check(p.table.get_compute_capability(&value), "get_compute_capability");
             return value;
           })
      .def(
          "versions",
          [](const RuntimePlugin& p) {
            auto read = [&](C_Status (*fn)(size_t*), const char* name) -> std::optional<size_t> {
              if (!fn) return std::nullopt;
              size_t value = 0;
              p.check(fn(&value), name);
              return value;
            };
            return py::make_tuple(read(p.table.get_runtime_version, "get_runtime_version"),
                                  read(p.table.get_driver_version, "get_driver_version"));
          },
          "(runtime version, driver version), None where the plug-in does not say");
  m.def("load_runtime_plugin", &load_plugin, py::arg("path"), py::arg("variable"));
}

}  // namespace dipu
