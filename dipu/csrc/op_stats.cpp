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
//
// Note [Device time per kernel]
// With the report on, every dipu frame is also timed on the device, by one of two methods chosen once
// (op_stats_enable's device_timing, DIPU_REPORT_DEVICE_TIME; "auto" probes the vendor on the first
// dipu op after the runtime started):
// - "events": two timing events of the vendor recorded on the op's device's current stream (through
//   the device guard, so a Python vendor, a C plug-in and CUDA alike), kept in a ring per thread with
//   the op's signature and drained in batches of kRing: one synchronizeEvent per stream of the batch,
//   then the vendor's elapsed time of each pair. Events come from a pool per thread. No call waits
//   for the device, and no call reads a time back.
// - "synchronize", a vendor whose events cannot be timed (elapsed time raises): the device is
//   synchronized before and after the call and the host time between is its device time. This does
//   stall every call; the report says which method it used.
// Device self time is the frame's device time minus the device time of the dipu frames timed inside
// it, as for host time: a child is drained before its parent (its end event was pushed first), so
// its time waits in `children_ns` under its parent's sequence number until the parent is drained.
// Each frame is also counted per signature: the op, and for each input its dtype, shape and strides
// (tensors) or value (numbers, lists, strings), hashed on each call; the first call of a signature
// keeps its arguments with tensors replaced by meta tensors of the same shape, strides and dtype, so
// the report can replay it on a reference device (dipu/report/reference.py).
// RecordFunction::inputs() checks a flag that torch's release libraries never set; the core is compiled
// with NDEBUG, as they are, which leaves that check out (Note [The native core in parts]).
#include "python.h"

#include <ATen/EmptyTensor.h>
#include <ATen/record_function.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace dipu {
namespace {

struct OpTotals {
  std::string name;
  bool is_op = true;  // false: a FUNCTION-scope range that is no operator (DDP's reducer records some)
  int64_t calls = 0, inclusive_ns = 0, self_ns = 0;
};

// One signature of an op (Note [Device time per kernel]).
struct SignatureTotals {
  std::string op, text;
  std::vector<c10::IValue> args;  // the first call's inputs, tensors as meta tensors
  int64_t calls = 0, host_ns = 0, host_self_ns = 0, device_calls = 0, device_ns = 0, device_self_ns = 0;
};

// A timed frame waiting in the ring: its events, or (method "synchronize") its measured time.
struct PendingTime {
  SignatureTotals* signature;
  void* start_event;
  void* end_event;
  c10::Stream stream;
  int64_t measured_ns;
  uint64_t seq, parent_seq;
};

constexpr size_t kRing = 1024;

struct ThreadTotals {
  std::mutex mutex;  // never held during a vendor call (a Python vendor takes the GIL)
  std::mutex drain_mutex;  // one drain at a time, in ring order
  std::unordered_map<const char*, OpTotals> ops;
  std::unordered_map<uint64_t, SignatureTotals> signatures;
  std::vector<PendingTime> ring;
  std::vector<void*> free_events;
  std::unordered_map<uint64_t, int64_t> children_ns;  // timed parent's sequence number -> its children's time
};

std::mutex g_threads_mutex;
std::vector<std::shared_ptr<ThreadTotals>> g_threads;  // kept after a thread exits, for the reader
std::mutex g_switch_mutex;
std::optional<at::CallbackHandle> g_callback;

enum class Timing { kUnknown, kEvents, kSynchronize, kOff };
std::atomic<Timing> g_timing{Timing::kOff};
std::atomic<Timing> g_requested{Timing::kOff};  // kUnknown: "auto", probe on the first op

struct Frame : at::ObserverContext {
  Frame* parent = nullptr;
  bool dipu = false;
  int64_t start_ns = 0;
  int64_t dipu_children_ns = 0;
  SignatureTotals* signature = nullptr;
  c10::DeviceIndex device = -1;
  std::optional<c10::Stream> stream;  // set: timed on the device
  void* start_event = nullptr;
  int64_t sync_start_ns = 0;
  uint64_t seq = 0, timed_ancestor = 0;
};

thread_local Frame* t_open_frame = nullptr;
thread_local std::shared_ptr<ThreadTotals> t_totals;
thread_local uint64_t t_seq = 0;

ThreadTotals& thread_totals() {
  if (!t_totals) {
    t_totals = std::make_shared<ThreadTotals>();
    std::lock_guard<std::mutex> lock(g_threads_mutex);
    g_threads.push_back(t_totals);
  }
  return *t_totals;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Whether `v` is or holds a dipu tensor or names a dipu device; `device` gets the first one's index
// (a tensor's; a Device argument without an index says the current device).
bool is_dipu_value(const c10::IValue& v, c10::DeviceIndex* device = nullptr) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    bool dipu = t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
    if (dipu && device) *device = t.device().index();
    return dipu;
  }
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec())
      if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) {
        if (device) *device = t.device().index();
        return true;
      }
    return false;
  }
  if (v.isList()) {  // Tensor?[] (index.Tensor's indices)
    for (const c10::IValue& e : v.toListRef())
      if (is_dipu_value(e, device)) return true;
    return false;
  }
  if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
    if (device) *device = v.toDevice().has_index() ? v.toDevice().index() : -1;
    return true;
  }
  return false;
}

std::string printable_name(const c10::OperatorName* op) {
  std::string name = op->name.rfind("aten::", 0) == 0 ? op->name.substr(6) : op->name;
  return op->overload_name.empty() ? name : name + "." + op->overload_name;
}

// ---- signatures -------------------------------------------------------------------------------------

inline void mix(uint64_t& h, uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

void hash_value(uint64_t& h, const c10::IValue& v) {
  mix(h, static_cast<uint64_t>(v.tag));
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (!t.defined()) return;
    mix(h, static_cast<uint64_t>(t.scalar_type()));
    mix(h, static_cast<uint64_t>(t.layout()));
    if (t.layout() != c10::kStrided) return;
    for (int64_t d : t.sizes()) mix(h, static_cast<uint64_t>(d));
    for (int64_t d : t.strides()) mix(h, static_cast<uint64_t>(d) * 31);
  } else if (v.isTensorList() || v.isList()) {
    for (const c10::IValue& e : v.toListRef()) hash_value(h, e);
  } else if (v.isInt()) {
    mix(h, static_cast<uint64_t>(v.toInt()));
  } else if (v.isDouble()) {
    double d = v.toDouble();
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    mix(h, bits);
  } else if (v.isBool()) {
    mix(h, v.toBool());
  } else if (v.isString()) {
    mix(h, std::hash<std::string_view>()(v.toStringView()));
  } else if (v.isDevice()) {
    mix(h, static_cast<uint64_t>(v.toDevice().type()) * 256 + static_cast<uint64_t>(v.toDevice().index() + 1));
  }
}

const char* short_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat: return "f32";
    case c10::kDouble: return "f64";
    case c10::kHalf: return "f16";
    case c10::kBFloat16: return "bf16";
    case c10::kLong: return "i64";
    case c10::kInt: return "i32";
    case c10::kShort: return "i16";
    case c10::kChar: return "i8";
    case c10::kByte: return "u8";
    case c10::kBool: return "b8";
    case c10::kComplexFloat: return "c64";
    case c10::kComplexDouble: return "c128";
    default: return c10::toString(type);
  }
}

void describe(std::ostringstream& out, const c10::IValue& v) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (!t.defined()) {
      out << "None";
      return;
    }
    out << short_dtype(t.scalar_type()) << "[";
    for (size_t i = 0; i < t.sizes().size(); ++i) out << (i ? "," : "") << t.sizes()[i];
    out << "]";
    if (t.layout() == c10::kStrided && !t.is_contiguous()) {
      out << "{";
      for (size_t i = 0; i < t.strides().size(); ++i) out << (i ? "," : "") << t.strides()[i];
      out << "}";
    }
  } else if (v.isTensorList() || v.isList()) {
    auto list = v.toListRef();
    out << "[";
    for (size_t i = 0; i < list.size() && i < 4; ++i) {
      if (i) out << ", ";
      describe(out, list[i]);
    }
    if (list.size() > 4) out << ", ... " << list.size() << " in all";
    out << "]";
  } else if (v.isDevice()) {
    out << (v.toDevice().type() == kDipu ? "dipu" : v.toDevice().str());
  } else if (v.isGenerator()) {
    out << "generator";
  } else {
    out << v;
  }
}

// `v` with each tensor replaced by a meta tensor of the same shape, strides and dtype, generators by None.
c10::IValue as_meta(const c10::IValue& v) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (!t.defined() || t.layout() != c10::kStrided) return c10::IValue();
    return at::Tensor(at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type()));
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : v.toTensorList().vec())
      list.push_back(at::Tensor(at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type())));
    return list;
  }
  if (v.isList()) {
    c10::impl::GenericList list(v.toList().elementType());
    for (const c10::IValue& e : v.toListRef()) list.push_back(as_meta(e));
    return list;
  }
  if (v.isGenerator()) return c10::IValue();
  return v;
}

SignatureTotals* find_signature(const at::RecordFunction& fn) {
  auto inputs = fn.inputs();
  uint64_t h = reinterpret_cast<uintptr_t>(fn.name());
  for (const c10::IValue& v : inputs) hash_value(h, v);
  ThreadTotals& totals = thread_totals();
  {
    std::lock_guard<std::mutex> lock(totals.mutex);
    auto found = totals.signatures.find(h);
    if (found != totals.signatures.end()) return &found->second;
  }
  SignatureTotals fresh;
  auto op = fn.operator_name();
  if (!op) return nullptr;
  fresh.op = printable_name(&*op);
  std::ostringstream text;
  text << fresh.op << "(";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) text << ", ";
    describe(text, inputs[i]);
  }
  text << ")";
  fresh.text = text.str();
  for (const c10::IValue& v : inputs) fresh.args.push_back(as_meta(v));
  std::lock_guard<std::mutex> lock(totals.mutex);
  return &totals.signatures.try_emplace(h, std::move(fresh)).first->second;
}

// ---- device timing ------------------------------------------------------------------------------------

// Chooses the method of "auto" on the first timed op: events when the vendor times them.
Timing probe(const c10::Stream& stream) {
  void* start = nullptr;
  void* end = nullptr;
  Timing found = Timing::kEvents;
  try {
    dipu_guard()->record(&start, stream, stream.device_index(), c10::EventFlag::BACKEND_DEFAULT);
    dipu_guard()->record(&end, stream, stream.device_index(), c10::EventFlag::BACKEND_DEFAULT);
    dipu_guard()->synchronizeEvent(end);
    dipu_guard()->elapsedTime(start, end, stream.device_index());
  } catch (const std::exception&) {
    found = Timing::kSynchronize;
  }
  dipu_guard()->destroyEvent(start, stream.device_index());
  dipu_guard()->destroyEvent(end, stream.device_index());
  return found;
}

void* take_event(ThreadTotals& totals) {
  std::lock_guard<std::mutex> lock(totals.mutex);
  if (totals.free_events.empty()) return nullptr;  // the guard's record creates one
  void* event = totals.free_events.back();
  totals.free_events.pop_back();
  return event;
}

void start_device_timing(Frame& frame) {
  Timing timing = g_timing.load(std::memory_order_relaxed);
  if (timing == Timing::kOff || !g_initialized.load(std::memory_order_acquire)) return;
  c10::DeviceIndex index = frame.device >= 0 ? frame.device : current_device();
  c10::Stream stream = current_stream(index);
  if (timing == Timing::kUnknown) {
    timing = probe(stream);
    g_timing.store(timing);
  }
  frame.stream = stream;
  frame.seq = ++t_seq;
  if (timing == Timing::kEvents) {
    frame.start_event = take_event(thread_totals());
    dipu_guard()->record(&frame.start_event, stream, index, c10::EventFlag::BACKEND_DEFAULT);
  } else {
    dipu_guard()->synchronizeDevice(index);
    frame.sync_start_ns = now_ns();
  }
}

// Reads the ring's times back (one wait per stream) and adds them to their signatures.
void drain(ThreadTotals& totals) {
  std::lock_guard<std::mutex> drain_lock(totals.drain_mutex);
  std::vector<PendingTime> batch;
  {
    std::lock_guard<std::mutex> lock(totals.mutex);
    batch.swap(totals.ring);
  }
  if (batch.empty()) return;
  std::map<std::pair<int, int64_t>, void*> last_per_stream;
  for (const PendingTime& p : batch)
    if (p.end_event) last_per_stream[{p.stream.device_index(), p.stream.id()}] = p.end_event;
  for (const auto& [stream, event] : last_per_stream) dipu_guard()->synchronizeEvent(event);
  std::vector<int64_t> elapsed(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const PendingTime& p = batch[i];
    if (!p.end_event) {
      elapsed[i] = p.measured_ns;
      continue;
    }
    try {
      elapsed[i] =
          static_cast<int64_t>(dipu_guard()->elapsedTime(p.start_event, p.end_event, p.stream.device_index()) * 1e6);
    } catch (const std::exception&) {
      elapsed[i] = -1;  // not counted
    }
  }
  std::lock_guard<std::mutex> lock(totals.mutex);
  for (size_t i = 0; i < batch.size(); ++i) {
    const PendingTime& p = batch[i];
    if (p.start_event) totals.free_events.push_back(p.start_event);
    if (p.end_event) totals.free_events.push_back(p.end_event);
    int64_t children = 0;
    auto found = totals.children_ns.find(p.seq);
    if (found != totals.children_ns.end()) {
      children = found->second;
      totals.children_ns.erase(found);
    }
    if (elapsed[i] < 0) continue;
    if (p.parent_seq) totals.children_ns[p.parent_seq] += elapsed[i];
    if (!p.signature) continue;
    p.signature->device_calls += 1;
    p.signature->device_ns += elapsed[i];
    p.signature->device_self_ns += std::max<int64_t>(elapsed[i] - children, 0);
  }
}

void end_device_timing(Frame& frame) {
  ThreadTotals& totals = thread_totals();
  PendingTime pending{frame.signature, frame.start_event, nullptr, *frame.stream, 0, frame.seq, frame.timed_ancestor};
  if (frame.start_event) {
    pending.end_event = take_event(totals);
    dipu_guard()->record(&pending.end_event, *frame.stream, frame.stream->device_index(),
                         c10::EventFlag::BACKEND_DEFAULT);
  } else {
    dipu_guard()->synchronizeDevice(frame.stream->device_index());
    pending.measured_ns = now_ns() - frame.sync_start_ns;
  }
  bool full;
  {
    std::lock_guard<std::mutex> lock(totals.mutex);
    totals.ring.push_back(pending);
    full = totals.ring.size() >= kRing;
  }
  if (full) drain(totals);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  auto frame = std::make_unique<Frame>();
  for (const c10::IValue& v : fn.inputs()) {
    if (is_dipu_value(v, &frame->device)) {
      frame->dipu = true;
      break;
    }
  }
  frame->parent = t_open_frame;
  if (frame->dipu && fn.operator_name()) {
    frame->signature = find_signature(fn);
    if (frame->parent) frame->timed_ancestor = frame->parent->seq ? frame->parent->seq : frame->parent->timed_ancestor;
    start_device_timing(*frame);
  } else if (frame->parent) {
    frame->timed_ancestor = frame->parent->seq ? frame->parent->seq : frame->parent->timed_ancestor;
  }
  t_open_frame = frame.get();
  frame->start_ns = now_ns();
  return frame;
}

// Adds the call to its op's totals; false when `fn` is not an operator (then it counts as a non-dipu frame).
bool record(const at::RecordFunction& fn, int64_t elapsed, int64_t self, SignatureTotals* signature) {
  thread_totals();
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
  if (signature) {
    signature->calls += 1;
    signature->host_ns += elapsed;
    signature->host_self_ns += self;
  }
  return true;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* context) {
  auto* frame = static_cast<Frame*>(context);
  int64_t elapsed = now_ns() - frame->start_ns;
  // Frames end in the reverse order they started on a thread (RecordFunction is a scope guard);
  // a frame opened before the callback was added has no context and never reaches here.
  t_open_frame = frame->parent;
  bool counted = frame->dipu && record(fn, elapsed, elapsed - frame->dipu_children_ns, frame->signature);
  if (frame->parent) frame->parent->dipu_children_ns += counted ? elapsed : frame->dipu_children_ns;
  if (frame->stream) end_device_timing(*frame);
}

Timing parse_timing(const std::string& text) {
  if (text == "auto") return Timing::kUnknown;
  if (text == "events") return Timing::kEvents;
  if (text == "synchronize") return Timing::kSynchronize;
  if (text == "off") return Timing::kOff;
  TORCH_CHECK(false, "device timing: expected auto, events, synchronize or off, got '", text, "'");
}

const char* timing_name(Timing timing) {
  switch (timing) {
    case Timing::kEvents: return "events";
    case Timing::kSynchronize: return "synchronize";
    case Timing::kOff: return "off";
    default: return "not chosen (no dipu op ran on a started device)";
  }
}

void enable(const std::string& device_timing) {
  std::lock_guard<std::mutex> lock(g_switch_mutex);
  if (g_callback) return;
  Timing timing = parse_timing(device_timing);
  g_requested.store(timing);
  g_timing.store(timing);
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

void drain_all() {
  std::vector<std::shared_ptr<ThreadTotals>> threads;
  {
    std::lock_guard<std::mutex> lock(g_threads_mutex);
    threads = g_threads;
  }
  for (const auto& thread : threads) drain(*thread);
}

void reset() {
  drain_all();  // returns the ring's events to the pools
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  for (const auto& thread : g_threads) {
    std::lock_guard<std::mutex> thread_lock(thread->mutex);
    thread->ops.clear();
    thread->signatures.clear();
    thread->children_ns.clear();
  }
}

// Per signature, summed over threads: {op, text, calls, host and device times, args (meta tensors)}.
py::list signatures() {
  struct Merged {
    const SignatureTotals* first;
    int64_t calls = 0, host_ns = 0, host_self_ns = 0, device_calls = 0, device_ns = 0, device_self_ns = 0;
  };
  std::map<std::string, Merged> merged;
  {
    std::lock_guard<std::mutex> lock(g_threads_mutex);
    for (const auto& thread : g_threads) {
      std::lock_guard<std::mutex> thread_lock(thread->mutex);
      for (const auto& [key, s] : thread->signatures) {
        auto [it, inserted] = merged.try_emplace(s.text, Merged{&s});
        Merged& m = it->second;
        m.calls += s.calls;
        m.host_ns += s.host_ns;
        m.host_self_ns += s.host_self_ns;
        m.device_calls += s.device_calls;
        m.device_ns += s.device_ns;
        m.device_self_ns += s.device_self_ns;
      }
    }
  }
  // Signatures are never removed outside reset, so the pointers stay valid while the GIL is held.
  py::list out;
  for (const auto& [text, m] : merged) {
    if (!m.calls) continue;
    py::list args;
    for (const c10::IValue& v : m.first->args) args.append(torch::jit::toPyObject(v));
    py::dict d;
    d["op"] = m.first->op;
    d["signature"] = text;
    d["calls"] = m.calls;
    d["host_ns"] = m.host_ns;
    d["host_self_ns"] = m.host_self_ns;
    d["device_calls"] = m.device_calls;
    d["device_ns"] = m.device_ns;
    d["device_self_ns"] = m.device_self_ns;
    d["args"] = args;
    out.append(d);
  }
  return out;
}

}  // namespace

void register_op_stats_python(py::module& m) {
  m.def("op_stats_enable", &enable, py::arg("device_timing") = "off",
        "Start collecting per-op host times (Note [Op statistics]) and, unless device_timing is 'off', device "
        "times per signature (Note [Device time per kernel]): 'auto', 'events' or 'synchronize'.");
  m.def(
      "op_stats_device_timing", [] { return std::string(timing_name(g_timing.load())); },
      "How device time is measured (Note [Device time per kernel]).");
  m.def("op_stats_drain", &drain_all, py::call_guard<py::gil_scoped_release>(),
        "Read the timing events still in the rings back (waits for their streams).");
  m.def("op_stats_signatures", &signatures,
        "Per signature: op, text, calls, host and device times, and the first call's arguments (meta tensors).");
  m.def("op_stats_disable", &disable, "Stop collecting; what was collected stays readable.");
  m.def("op_stats_enabled", [] {
    std::lock_guard<std::mutex> lock(g_switch_mutex);
    return g_callback.has_value();
  });
  m.def("op_stats", &snapshot, "{op name: (calls, inclusive host ns, self host ns)} of the dipu ops so far.");
  m.def("op_stats_reset", &reset);
}

}  // namespace dipu
