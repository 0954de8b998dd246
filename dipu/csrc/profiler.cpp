// Note [Device timeline]
// torch.profiler.profile(activities=[CPU, PrivateUse1]) runs Kineto in its
// KINETO_PRIVATEUSE1 state, which asks the libkineto::IActivityProfiler that a
// backend registered (torch::profiler::impl::PrivateUse1ProfilerRegistry; torch
// 2.11 has none, so there dipu registers with Kineto's child-profiler API,
// which the registry calls) for device activities. dipu's session times every
// op that runs a dipu kernel: Kineto pushes each op's correlation id on the
// op's thread; the first kernel call inside that op (a generated wrapper's
// exchange_device, see Note [Fast calls]) records a timing event of the vendor
// on that device's current stream, and popping the op records the closing
// event. The vendor's elapsed time between the two events is the op's device
// time: the simulated vendor times its synchronous execution with host
// timestamps, the CUDA vendor uses CUDA events. Each timed op becomes a kernel
// activity (CONCURRENT_KERNEL, the type Kineto maps to the PrivateUse1 device)
// linked to the CPU op by correlation id, so aten::mm reports device_time_total
// and the Chrome trace shows the kernel on a dipu row. Kernel activities start
// at the CPU time of their first event: an asynchronous vendor's queueing delay
// is not modelled.
//
// Kineto's logger keeps pointers to the activities a session logs and replays
// them for every export of that profile, so logged activities are never freed
// (about 100 bytes per timed op; a profile of 10,000 ops keeps about 1 MB).
#include "core.h"

#if __has_include(<IActivityProfiler.h>)
#define DIPU_HAS_KINETO_PLUGIN 1  // with -DUSE_KINETO from the build (dipu/_native.py), as torch is built
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <c10/util/ApproximateClock.h>
#if __has_include(<torch/csrc/profiler/standalone/privateuse1_profiler.h>)
#define DIPU_HAS_PRIVATEUSE1_PROFILER_REGISTRY 1
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#else
#define DIPU_HAS_PRIVATEUSE1_PROFILER_REGISTRY 0
#endif
#else
#define DIPU_HAS_KINETO_PLUGIN 0
#endif

#include <deque>
#include <mutex>
#include <sstream>

namespace dipu {

std::atomic<bool> g_timeline_active{false};

#if DIPU_HAS_KINETO_PLUGIN
namespace {

// One op on this thread's stack of Kineto correlation ids.
struct OpFrame {
  uint64_t correlation;
  uint64_t session;  // frames of an earlier session are ignored
  void* start_event = nullptr;
  c10::DeviceIndex device = -1;
  c10::StreamId stream = 0;
  int64_t cpu_start_ns = 0;
  uint64_t first_child = 0;  // correlation id of the first op nested in this one
  int children = 0;
};
thread_local std::vector<OpFrame> tl_frames;

struct TimedOp {
  uint64_t correlation;
  c10::DeviceIndex device;
  c10::StreamId stream;
  void* start_event;
  void* end_event;
  int64_t cpu_start_ns;
  uint64_t first_child;
  int children;
};

std::mutex g_mutex;
uint64_t g_session = 0;  // id of the current (or last) session
std::vector<TimedOp> g_timed_ops;  // of the current session, guarded by g_mutex

void destroy_events(const TimedOp& op) {
  dipu_guard()->destroyEvent(op.start_event, op.device);
  dipu_guard()->destroyEvent(op.end_event, op.device);
}

class KernelActivity final : public libkineto::ITraceActivity {
 public:
  KernelActivity(const TimedOp& op, int64_t duration_ns, const libkineto::ITraceActivity* linked,
                 const libkineto::TraceSpan* span)
      : device_(op.device),
        stream_(op.stream),
        start_ns_(op.cpu_start_ns),
        duration_ns_(duration_ns),
        correlation_(static_cast<int64_t>(op.correlation)),
        linked_(linked),
        span_(span),
        name_(std::string("dipu kernel: ") + (linked ? linked->name() : std::string("op"))) {}

  int64_t deviceId() const override { return device_; }
  int64_t resourceId() const override { return stream_; }
  int32_t getThreadId() const override { return 0; }
  int64_t timestamp() const override { return start_ns_; }
  int64_t duration() const override { return duration_ns_; }
  int64_t correlationId() const override { return correlation_; }
  int flowType() const override { return 0; }
  int64_t flowId() const override { return 0; }
  bool flowStart() const override { return false; }
  libkineto::ActivityType type() const override { return libkineto::ActivityType::CONCURRENT_KERNEL; }
  const std::string name() const override { return name_; }
  const libkineto::ITraceActivity* linkedActivity() const override { return linked_; }
  const libkineto::TraceSpan* traceSpan() const override { return span_; }
  void log(libkineto::ActivityLogger& logger) const override { logger.handleActivity(*this); }
  const std::string metadataJson() const override {
    std::ostringstream out;
    out << "\"device\": " << static_cast<int>(device_) << ", \"stream\": " << stream_
        << ", \"correlation\": " << correlation_ << ", \"vendor\": \"" << vendor().name << "\"";
    return out.str();
  }

 private:
  int64_t device_, stream_, start_ns_, duration_ns_, correlation_;
  const libkineto::ITraceActivity* linked_;
  const libkineto::TraceSpan* span_;
  std::string name_;
};

// See the lifetime paragraph of Note [Device timeline].
std::mutex g_logged_mutex;
std::deque<KernelActivity>& logged_activities() {
  static auto* activities = new std::deque<KernelActivity>();
  return *activities;
}
std::deque<libkineto::TraceSpan>& logged_spans() {
  static auto* spans = new std::deque<libkineto::TraceSpan>();
  return *spans;
}

void start_vendor_tracing() {
  if (!g_shutdown.load()) runtime().start_tracing();
}
void stop_vendor_tracing() {
  if (!g_shutdown.load()) runtime().stop_tracing();
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      for (const auto& op : g_timed_ops) destroy_events(op);
      g_timed_ops.clear();
      id_ = ++g_session;
    }
    start_ns_ = c10::getTime();
    start_vendor_tracing();
    g_timeline_active.store(true);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    g_timeline_active.store(false);
    end_ns_ = c10::getTime();
    stop_vendor_tracing();
    std::lock_guard<std::mutex> lock(g_mutex);
    ops_.swap(g_timed_ops);
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity, int64_t,
                    int64_t) override {
    std::lock_guard<std::mutex> lock(g_logged_mutex);
    auto& spans = logged_spans();
    spans.emplace_back(start_ns_, end_ns_, "dipu");
    for (const auto& op : ops_) {
      int64_t duration_ns = 0;
      try {
        dipu_guard()->synchronizeEvent(op.end_event);
        duration_ns = static_cast<int64_t>(dipu_guard()->elapsedTime(op.start_event, op.end_event, op.device) * 1e6);
      } catch (const std::exception& e) {
        errors_.push_back(e.what());
      }
      destroy_events(op);
      const libkineto::ITraceActivity* linked = nullptr;
      uint64_t correlation = op.correlation;
      if (linked_activity) {
        linked = linked_activity(static_cast<int32_t>(op.correlation));
        // The torch op library computes a dipu op with the same aten op on a native
        // alias. torch.profiler merges an op with an only child of the same name and
        // keeps the child's kernels, so the kernel goes to that child.
        if (linked && op.children == 1) {
          const auto* child = linked_activity(static_cast<int32_t>(op.first_child));
          if (child && child->name() == linked->name()) {
            linked = child;
            correlation = op.first_child;
          }
        }
      }
      TimedOp linked_op = op;
      linked_op.correlation = correlation;
      auto& activity =
          logged_activities().emplace_back(linked_op, std::max<int64_t>(duration_ns, 0), linked, &spans.back());
      logger.handleActivity(activity);
    }
    ops_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "dipu", "dipu (" + vendor().name + ")"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override {
    if (!g_timeline_active.load()) return;
    // Frames left by an earlier session (stopped while its ops were still open) are dropped.
    while (!tl_frames.empty() && tl_frames.back().session != id_) {
      if (tl_frames.back().start_event)
        dipu_guard()->destroyEvent(tl_frames.back().start_event, tl_frames.back().device);
      tl_frames.pop_back();
    }
    if (!tl_frames.empty()) {
      OpFrame& parent = tl_frames.back();
      if (parent.children++ == 0) parent.first_child = id;
    }
    tl_frames.push_back(OpFrame{id, id_});
  }

  void popCorrelationId() override {
    if (tl_frames.empty()) return;
    OpFrame frame = tl_frames.back();
    tl_frames.pop_back();
    if (!frame.start_event) return;
    if (frame.session != id_ || !g_timeline_active.load() || g_shutdown.load()) {
      dipu_guard()->destroyEvent(frame.start_event, frame.device);
      return;
    }
    void* end_event = nullptr;
    try {
      c10::Stream stream(c10::Stream::UNSAFE, c10::Device(kDipu, frame.device), frame.stream);
      dipu_guard()->record(&end_event, stream, frame.device, c10::EventFlag::BACKEND_DEFAULT);
    } catch (const std::exception& e) {
      dipu_guard()->destroyEvent(frame.start_event, frame.device);
      std::lock_guard<std::mutex> lock(g_mutex);
      errors_.push_back(e.what());
      return;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    g_timed_ops.push_back(TimedOp{frame.correlation, frame.device, frame.stream, frame.start_event, end_event,
                                  frame.cpu_start_ns, frame.first_child, frame.children});
  }

 private:
  uint64_t id_ = 0;
  int64_t start_ns_ = 0, end_ns_ = 0;
  std::vector<TimedOp> ops_;
  std::vector<std::string> errors_;
};

class Profiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config&) override {
    // torch adds PRIVATEUSE1_RUNTIME and PRIVATEUSE1_DRIVER to every profile's CPU activities, so only the
    // device's kernels (CONCURRENT_KERNEL, which ProfilerActivity.PrivateUse1 or CUDA asks for) start a timeline.
    if (types.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return std::make_unique<Session>();
    return nullptr;  // a CPU-only profile: no device timeline, no cost
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "dipu";
  std::set<libkineto::ActivityType> activities_ = {libkineto::ActivityType::CONCURRENT_KERNEL,
                                                   libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                                   libkineto::ActivityType::PRIVATEUSE1_DRIVER};
};

}  // namespace

void profiler_on_kernel(c10::DeviceIndex index) {
  if (tl_frames.empty()) return;
  OpFrame& frame = tl_frames.back();
  if (frame.start_event || frame.session != g_session) return;
  c10::Stream stream = current_stream(index);
  frame.device = index;
  frame.stream = stream.id();
  frame.cpu_start_ns = c10::getTime();
  dipu_guard()->record(&frame.start_event, stream, index, c10::EventFlag::BACKEND_DEFAULT);
}

void profiler_init() {
  auto factory = [] { return std::make_unique<Profiler>(); };
#if DIPU_HAS_PRIVATEUSE1_PROFILER_REGISTRY
  torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().registerFactory(factory);
#else
  // torch 2.11: see Note [Device timeline]
  libkineto::api().registerProfilerFactory(factory);
#endif
}
bool profiler_has_device_timeline() { return true; }

#else  // no Kineto plugin API in this torch: no device timeline
void profiler_on_kernel(c10::DeviceIndex) {}
void profiler_init() {}
bool profiler_has_device_timeline() { return false; }
#endif

}  // namespace dipu
