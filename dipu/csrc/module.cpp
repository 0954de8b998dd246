// The Python face of the native core: the dipu._C module. Its start-up functions wire the
// vendor (vendor_bridge.h) to the allocator, the device guard, the hooks and the profiler.
#include "python.h"
#include "diopi_rt.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <torch/csrc/utils/pybind.h>

namespace dipu {
namespace {

c10::DeviceIndex checked(int index) {
  check_device_index(static_cast<c10::DeviceIndex>(index));
  return static_cast<c10::DeviceIndex>(index);
}

// Flat "<stat>.<all|small_pool|large_pool>.<current|peak|allocated|freed>" keys, the names
// torch.cuda.memory_stats and torch.accelerator.memory_stats use.
py::dict memory_stats(int index) {
  DeviceStats s = device_stats(checked(index));
  py::dict d;
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto put = [&](const char* name, const StatArray& stat) {
    for (size_t p = 0; p < stat.size(); ++p) {
      std::string prefix = std::string(name) + "." + pools[p] + ".";
      d[py::str(prefix + "current")] = stat[p].current;
      d[py::str(prefix + "peak")] = stat[p].peak;
      d[py::str(prefix + "allocated")] = stat[p].allocated;
      d[py::str(prefix + "freed")] = stat[p].freed;
    }
  };
  put("allocation", s.allocation);
  put("segment", s.segment);
  put("active", s.active);
  put("allocated_bytes", s.allocated_bytes);
  put("reserved_bytes", s.reserved_bytes);
  put("active_bytes", s.active_bytes);
  put("requested_bytes", s.requested_bytes);
  put("inactive_split", s.inactive_split);
  put("inactive_split_bytes", s.inactive_split_bytes);
  auto put_one = [&](const char* name, const Stat& stat) {
    std::string prefix = std::string(name) + ".";
    d[py::str(prefix + "current")] = stat.current;
    d[py::str(prefix + "peak")] = stat.peak;
    d[py::str(prefix + "allocated")] = stat.allocated;
    d[py::str(prefix + "freed")] = stat.freed;
  };
  put_one("oversize_allocations", s.oversize_allocations);
  put_one("oversize_segments", s.oversize_segments);
  d["max_split_size"] = allocator_max_split_size();
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  return d;
}

}  // namespace
}  // namespace dipu

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace dipu;
  // Note [Lazy initialization] in dipu/device/_initialization.py: `register_vendor` at import (no vendor
  // call), `start_runtime` at the first device use, `forget_runtime` in a forked child.
  m.def("register_vendor",
        [](py::object runtime, const std::string& name, int device_count, std::optional<std::string> alias_type,
           bool has_pinned, bool has_stream_hook, bool caching, py::object make_native_generator, py::object plugin,
           std::optional<std::string> cuda_library, bool has_vm) {
          // Note [Two kinds of vendor runtime]: a C plug-in's table, the native CUDA runtime (Note [The CUDA
          // runtime in the core]), else the Python object.
          auto v = std::make_unique<Vendor>();
          v->runtime = !plugin.is_none() ? plugin_runtime(plugin)
                       : cuda_library    ? cuda_runtime(*cuda_library)
                                         : python_runtime(std::move(runtime));
          v->name = name;
          v->device_count = device_count;
          v->has_alias = alias_type.has_value();
          if (alias_type) v->alias_type = c10::Device(*alias_type).type();
          v->has_pinned = has_pinned;
          v->has_stream_hook = has_stream_hook;
          v->has_vm = has_vm;
          v->blocking = [](const std::function<void()>& wait) { waiting(wait); };
          // What the runtime layer calls Python through (Note [The core's layers]); never destroyed, as the vendor.
          v->make_native_generator = [make = std::move(make_native_generator)](c10::DeviceIndex index) {
            py::gil_scoped_acquire gil;
            return make(index).cast<at::Generator>();
          };
          v->start = [] {
            py::gil_scoped_acquire gil;
            std::string error;
            try {
              py::module_::import("dipu.device").attr("_lazy_init")();
            } catch (py::error_already_set& e) {
              error = e.what();
            }
            TORCH_CHECK(error.empty(), error);
          };
          install_vendor(std::move(v));
          streams_init(device_count);
          allocator_init(device_count, caching);
          hooks_register();
          profiler_init();  // registers the profiler stubs; no vendor call
        });
  m.def("start_runtime", [] {
    // Called by torch.dipu._lazy_init after vendor.initialize(), holding its lock.
    std::vector<at::Generator> natives;
    for (int i = 0; i < vendor().device_count; ++i) natives.push_back(vendor().make_native_generator(i));
    hooks_init(std::move(natives));
    g_initialized.store(true, std::memory_order_release);
  });
  m.def(
      "forget_runtime", [] { g_initialized.store(false, std::memory_order_release); },
      "In a forked child of an initialized parent: the inherited runtime is unusable.");
  m.def("is_initialized", [] { return g_initialized.load(); });
  m.def("shutdown", [] { g_shutdown.store(true); }, "Called at interpreter exit: stop calling into the Python vendor.");

  register_fast_calls(m);  // alias, empty, exchange_device: see Note [Fast calls]
  register_python_wrapper_call(m);  // Note [The C++ wrappers' way to Python]

  m.def("device_count", [] { return vendor_ready() ? vendor().device_count : 0; });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int index) { set_device(checked(index)); });
  m.def("check_device_index", [](int index) { checked(index); });
  m.def("synchronize", [](int index) { c10::impl::getDeviceGuardImpl(kDipu)->synchronizeDevice(checked(index)); });

  m.def("current_stream_handle",
        [](int index) { return python_handle(stream_native_handle(current_stream(checked(index)))); });
  m.def("stream_handle", [](int64_t id, int index) {
    return python_handle(
        stream_native_handle(c10::Stream(c10::Stream::UNSAFE, c10::Device(kDipu, checked(index)), id)));
  });

  m.def("device_from_pointer",
        [](uintptr_t ptr) { return at::detail::getPrivateUse1Hooks().getDeviceFromPtr(reinterpret_cast<void*>(ptr)); });
  m.def("memory_stats", &memory_stats);
  m.def("reset_peak_memory_stats", [](int index) { reset_peak_stats(checked(index)); });
  m.def("reset_accumulated_memory_stats", [](int index) { reset_accumulated_stats(checked(index)); });
  m.def("set_memory_limit", [](int index, int64_t bytes) { set_memory_limit(checked(index), bytes); });
  m.def("record_memory_history", &record_memory_history, py::arg("trace"), py::arg("when"), py::arg("cpp_frames"),
        py::arg("max_entries"), py::arg("clear_history"), py::arg("skip_actions"));
  m.def("memory_snapshot", &memory_snapshot);
  m.def(
      "set_allocator_settings",
      [](size_t max_split_size, double garbage_collection_threshold, std::vector<size_t> roundup_power2_divisions,
         bool expandable_segments) {
        AllocatorSettings settings;
        settings.expandable_segments = expandable_segments;
        settings.max_split_size = max_split_size == 0 ? SIZE_MAX : max_split_size;
        settings.garbage_collection_threshold = garbage_collection_threshold;
        TORCH_CHECK(roundup_power2_divisions.size() == settings.roundup_power2_divisions.size(),
                    "set_allocator_settings: roundup_power2_divisions needs ", settings.roundup_power2_divisions.size(),
                    " entries");
        std::copy(roundup_power2_divisions.begin(), roundup_power2_divisions.end(),
                  settings.roundup_power2_divisions.begin());
        set_allocator_settings(settings);
      },
      "The caching allocator's tunables, parsed by dipu._alloc_conf (max_split_size 0: none); expandable_segments "
      "only where the vendor has virtual memory.");
  m.def("has_device_timeline", &profiler_has_device_timeline,
        "Whether this torch lets dipu give the profiler a device timeline (Note [Device timeline]).");
  m.def(
      "timeline_flag_address", [] { return reinterpret_cast<uintptr_t>(&g_timeline_active); },
      "The address of the flag set while a device timeline records, for the C++ wrappers' hook test.");
  m.def("empty_cache", &empty_cache);

  m.def("native_generator", [](std::optional<at::Generator> gen, int index) {
    return native_generator(gen ? *gen : default_generator(checked(index)));
  });
  m.def("default_generator", [](int index) { return default_generator(checked(index)); });

  register_fallback_python(m);
  register_plugin_python(m);
  register_cuda_runtime_python(m);
  register_xccl_python(m);  // a plug-in's collectives: Note [Collectives on a plug-in's streams]
  register_op_stats_python(m);  // the run report's per-op times: Note [Op statistics]
  diopi::register_diopi_python(m);  // C op libraries: Note [The Python trampoline]
}
