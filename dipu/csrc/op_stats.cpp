// Per-op host-time statistics for the run report (dipu/report): calls, inclusive and self time of
// every aten op that touches dipu, collected by a global at::RecordFunction callback.
//
// Note [Op statistics]
// Off by default and then free: no callback is registered until op_stats_enable (DIPU_REPORT at
// import), and the dispatcher skips RecordFunction entirely while no callback wants it.
// When on, the callback sees every dispatcher call (FUNCTION scope) with its boxed inputs, and
// counts a call as a dipu op when an input tensor (or an element of a tensor list) is on
// PrivateUse1, or a Device argument names PrivateUse1 (factories: empty, zeros(device=...)).
// Each thread keeps a chain of open frames (the ObserverContext of each call, linked to the frame
// that was open when it started). When a frame ends, its elapsed time goes into the "dipu children"
// total of its parent: a dipu frame passes its elapsed time, a non-dipu frame passes the dipu
// children it collected. So a dipu op's self time is its elapsed time minus the dipu ops it called
// (directly or through non-dipu ops): the CPU work of the fallback (CPU ops, which are not dipu
// frames) stays in the op's self time, while its copies to and from the device are dipu ops of
// their own, and the self times of all dipu ops add up to the host time spent in dipu ops.
// The totals live in one map per thread, each behind its own mutex, which only a reader ever
// contends for: recording never waits for another thread (one shared map would make the main
// thread and autograd's device thread take turns on every op; that variant was not measured).
// Measured on a tiny dipu add (2 busy cores, sim vendor): 5.4 us per call off, 5.9 us on.
// Ops are keyed by the address of their schema's name: each overload's schema owns its own
// string, which lives as long as the operator is registered; the printable name is built once, on
// the first call of each op on each thread.
// torch's release libraries never set RecordFunction's debug-only inputs_valid_ flag, so the inline
// check in RecordFunction::inputs() fails in a file compiled without NDEBUG, as the core is.
#ifndef NDEBUG
#define NDEBUG
#endif
#include "python.h"

#include <ATen/record_function.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace dipu {
namespace {

struct OpTotals {
  std::string name;
  bool is_op = true;  // false: a FUNCTION-scope range that is no operator (DDP's reducer records some)
  int64_t calls = 0, inclusive_ns = 0, self_ns = 0;
};

struct ThreadTotals {
  std::mutex mutex;
  std::unordered_map<const char*, OpTotals> ops;
};

std::mutex g_threads_mutex;
std::vector<std::shared_ptr<ThreadTotals>> g_threads;  // kept after a thread exits, for the reader
std::mutex g_switch_mutex;
std::optional<at::CallbackHandle> g_callback;

struct Frame : at::ObserverContext {
  Frame* parent = nullptr;
  bool dipu = false;
  int64_t start_ns = 0;
  int64_t dipu_children_ns = 0;
};

thread_local Frame* t_open_frame = nullptr;
thread_local std::shared_ptr<ThreadTotals> t_totals;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool is_dipu_value(const c10::IValue& v) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
  }
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec())
      if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) return true;
    return false;
  }
  if (v.isList()) {  // Tensor?[] (index.Tensor's indices)
    for (const c10::IValue& e : v.toListRef())
      if (is_dipu_value(e)) return true;
    return false;
  }
  if (v.isDevice()) return v.toDevice().type() == c10::DeviceType::PrivateUse1;
  return false;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  auto frame = std::make_unique<Frame>();
  for (const c10::IValue& v : fn.inputs()) {
    if (is_dipu_value(v)) {
      frame->dipu = true;
      break;
    }
  }
  frame->parent = t_open_frame;
  t_open_frame = frame.get();
  frame->start_ns = now_ns();
  return frame;
}

std::string printable_name(const c10::OperatorName* op) {
  std::string name = op->name.rfind("aten::", 0) == 0 ? op->name.substr(6) : op->name;
  return op->overload_name.empty() ? name : name + "." + op->overload_name;
}

// Adds the call to its op's totals; false when `fn` is not an operator (then it counts as a non-dipu frame).
bool record(const at::RecordFunction& fn, int64_t elapsed, int64_t self) {
  if (!t_totals) {
    t_totals = std::make_shared<ThreadTotals>();
    std::lock_guard<std::mutex> lock(g_threads_mutex);
    g_threads.push_back(t_totals);
  }
  std::lock_guard<std::mutex> lock(t_totals->mutex);
  auto [it, inserted] = t_totals->ops.try_emplace(fn.name());
  if (inserted) {
    auto op = fn.operator_name();
    it->second.is_op = op.has_value();
    if (op) it->second.name = printable_name(&*op);
  }
  if (!it->second.is_op) return false;
  it->second.calls += 1;
  it->second.inclusive_ns += elapsed;
  it->second.self_ns += self;
  return true;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* context) {
  auto* frame = static_cast<Frame*>(context);
  int64_t elapsed = now_ns() - frame->start_ns;
  // Frames end in the reverse order they started on a thread (RecordFunction is a scope guard);
  // a frame opened before the callback was added has no context and never reaches here.
  t_open_frame = frame->parent;
  bool counted = frame->dipu && record(fn, elapsed, elapsed - frame->dipu_children_ns);
  if (frame->parent) frame->parent->dipu_children_ns += counted ? elapsed : frame->dipu_children_ns;
}

void enable() {
  std::lock_guard<std::mutex> lock(g_switch_mutex);
  if (g_callback) return;
  g_callback = at::addGlobalCallback(
      at::RecordFunctionCallback(&on_start, &on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

void disable() {
  std::lock_guard<std::mutex> lock(g_switch_mutex);
  if (!g_callback) return;
  at::removeCallback(*g_callback);
  g_callback.reset();
}

// name -> (calls, inclusive ns, self ns), summed over threads.
std::unordered_map<std::string, std::tuple<int64_t, int64_t, int64_t>> snapshot() {
  std::unordered_map<std::string, std::tuple<int64_t, int64_t, int64_t>> merged;
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  for (const auto& thread : g_threads) {
    std::lock_guard<std::mutex> thread_lock(thread->mutex);
    for (const auto& [key, totals] : thread->ops) {
      if (!totals.is_op) continue;
      auto& [calls, inclusive, self] = merged[totals.name];
      calls += totals.calls;
      inclusive += totals.inclusive_ns;
      self += totals.self_ns;
    }
  }
  return merged;
}

void reset() {
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  for (const auto& thread : g_threads) {
    std::lock_guard<std::mutex> thread_lock(thread->mutex);
    thread->ops.clear();
  }
}

}  // namespace

void register_op_stats_python(py::module& m) {
  m.def("op_stats_enable", &enable, "Start collecting per-op host times (Note [Op statistics]).");
  m.def("op_stats_disable", &disable, "Stop collecting; what was collected stays readable.");
  m.def("op_stats_enabled", [] {
    std::lock_guard<std::mutex> lock(g_switch_mutex);
    return g_callback.has_value();
  });
  m.def("op_stats", &snapshot, "{op name: (calls, inclusive host ns, self host ns)} of the dipu ops so far.");
  m.def("op_stats_reset", &reset);
}

}  // namespace dipu
