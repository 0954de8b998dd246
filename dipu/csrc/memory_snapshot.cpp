// torch.dipu.memory._snapshot(): the caching allocator's memory_snapshot_data() as the dict
// torch.cuda.memory._snapshot() returns, its stacks symbolized (Note [Memory history] in allocator.cpp).
#include "python.h"

#include <torch/csrc/profiler/combined_traceback.h>

namespace torch {
// Declared in torch/csrc/profiler/python/combined_traceback.h, which needs
// nlohmann/json, a header the torch wheel does not ship.
TORCH_API std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
}  // namespace torch

namespace dipu {

py::dict memory_snapshot() {
  const MemorySnapshot data = memory_snapshot_data();

  // Symbolize every stack at once, as torch.cuda's snapshot does.
  std::vector<torch::CapturedTraceback*> to_symbolize;
  auto index_of = [&](const std::shared_ptr<c10::GatheredContext>& c) -> int64_t {
    auto* tb = dynamic_cast<torch::CapturedTraceback*>(c.get());
    if (!tb) return -1;
    to_symbolize.push_back(tb);
    return static_cast<int64_t>(to_symbolize.size()) - 1;
  };
  // Per segment: its own stack, then each block's.
  std::vector<std::vector<int64_t>> segment_frames;
  for (const auto& s : data.segments) {
    segment_frames.push_back({index_of(s.segment_context)});
    for (const auto& b : s.blocks) segment_frames.back().push_back(index_of(b.context));
  }
  std::vector<std::vector<int64_t>> trace_frames;
  for (const auto& trace : data.traces) {
    trace_frames.emplace_back();
    for (const auto& e : trace) trace_frames.back().push_back(index_of(e.context));
  }
  // torch's C++ symbolizer can fail on a library it cannot parse (seen once in the full test suite:
  // "ValueError: stoi" from its addr2line reader); the snapshot is then given without frames and a
  // warning rather than not at all. Recording with stacks="python" avoids C++ frames entirely.
  std::vector<py::object> frames;
  try {
    frames = torch::py_symbolize(to_symbolize);
  } catch (const std::exception& e) {
    TORCH_WARN("dipu: memory snapshot: stack frames could not be symbolized (", e.what(),
               "); the snapshot has no frames. _record_memory_history(stacks='python') avoids C++ frames.");
    frames.assign(to_symbolize.size(), py::list());
  }
  auto frames_at = [&](int64_t i) -> py::object { return i < 0 ? py::list() : frames[i]; };

  py::list segment_list;
  for (size_t i = 0; i < data.segments.size(); ++i) {
    const auto& s = data.segments[i];
    size_t allocated = 0, active = 0, requested = 0;
    py::list blocks;
    for (size_t j = 0; j < s.blocks.size(); ++j) {
      const auto& b = s.blocks[j];
      bool is_allocated = std::string(b.state) == "active_allocated";
      bool is_active = is_allocated || std::string(b.state) == "active_pending_free";
      if (is_allocated) allocated += b.size;
      if (is_active) {
        active += b.size;
        requested += b.requested;
      }
      py::dict block;
      block["address"] = b.address;
      block["size"] = b.size;
      block["requested_size"] = is_active ? b.requested : 0;
      block["state"] = b.state;
      block["frames"] = frames_at(segment_frames[i][j + 1]);
      blocks.append(block);
    }
    py::dict seg;
    seg["device"] = static_cast<int>(s.device);
    seg["address"] = s.address;
    seg["total_size"] = s.total_size;
    seg["allocated_size"] = allocated;
    seg["active_size"] = active;
    seg["requested_size"] = requested;
    seg["stream"] = s.stream;
    seg["segment_type"] = s.small ? "small" : "large";
    seg["segment_pool_id"] = py::make_tuple(0, 0);
    seg["is_expandable"] = s.expandable;  // Note [Expandable segments]
    seg["frames"] = frames_at(segment_frames[i][0]);
    seg["blocks"] = blocks;
    segment_list.append(seg);
  }
  py::list device_traces;
  for (size_t d = 0; d < data.traces.size(); ++d) {
    py::list entries;
    for (size_t i = 0; i < data.traces[d].size(); ++i) {
      const auto& r = data.traces[d][i];
      py::dict e;
      e["action"] = r.action;
      e["addr"] = r.address;
      if (r.oom) e["device_free"] = r.address;
      e["size"] = r.size;
      e["stream"] = r.stream;
      e["time_us"] = r.time_us;
      e["frames"] = frames_at(trace_frames[d][i]);
      e["compile_context"] = "";
      e["user_metadata"] = "";
      entries.append(e);
    }
    device_traces.append(entries);
  }
  py::dict result;
  result["segments"] = segment_list;
  result["device_traces"] = device_traces;
  result["external_annotations"] = py::list();
  return result;
}

}  // namespace dipu
