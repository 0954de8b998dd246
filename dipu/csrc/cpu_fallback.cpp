// The boxed CPU fallback: an op without a dipu kernel runs on the CPU, dense ops over dipu memory through
// torch's cpu_fallback, sparse ones on CPU copies (Note [Sparse CPU fallback]); each call is counted, the first
// announced (Note [One fallback warning]).
#include "python.h"
#include "overlap.h"

#include <ATen/native/CPUFallback.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/library.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dipu {
namespace {

std::mutex g_fallback_mutex;
std::unordered_map<std::string, int64_t> g_fallback_counts;
bool g_log_every_fallback = false;

// Note [One fallback warning]
// On a vendor with few kernels (a runtime-only one has none) nearly every op falls
// back: printing one tensor alone runs a dozen ops (abs, ne, masked_select, min,
// max, ceil, div, ...), and a warning per op buried the user's output. So only the
// first op to fall back is announced, saying that the others go the same way
// unannounced; dipu.fallback_counts() lists them all and DIPU_LOG_FALLBACK_INFO=1
// logs every call. reset_fallback_counts() re-arms the warning. The Python
// fallback of the placeholder ops (dipu/kernels/fallback.py) shares the flag.
std::atomic<bool> g_fallback_announced{false};

// True once per process (or per reset_fallback_counts): the caller warns.
bool announce_fallback() { return !g_fallback_announced.exchange(true); }

std::string fallback_announcement(const std::string& name) {
  return "dipu: " + name +
         " runs on the CPU through the fallback (it has no dipu kernel, or its kernel "
         "declined these arguments), as will every other op that does, unannounced (dipu.fallback_counts() lists "
         "them; set DIPU_LOG_FALLBACK_INFO=1 to log every call)";
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.operator_name();
  std::string name = n.name.rfind("aten::", 0) == 0 ? n.name.substr(6) : n.name;
  return n.overload_name.empty() ? name : name + "." + n.overload_name;
}

// Checks that tensor arguments live on one dipu device (0-dim CPU tensors are
// scalars and may mix, as on CUDA; index lists may be on the CPU, as on CUDA),
// and returns that device.
std::optional<c10::Device> check_devices(const std::string& name, c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> dipu_device, other;
  auto visit = [&](const at::Tensor& t, bool cpu_allowed) {
    if (!t.defined()) return;
    if (on_dipu(t)) {
      if (!dipu_device)
        dipu_device = t.device();
      else if (*dipu_device != t.device() && !other)
        other = t.device();
    } else if (!(t.device().is_cpu() && (t.dim() == 0 || cpu_allowed)) && !other) {
      other = t.device();
    }
  };
  for (const auto& v : args) {
    if (v.isTensor())
      visit(v.toTensor(), false);
    else if (v.isTensorList())
      for (const auto& t : v.toTensorList()) visit(t, false);
    else if (v.isList()) {
      for (const auto& e : v.toListRef())
        if (e.isTensor()) visit(e.toTensor(), true);
    } else if (v.isDevice() && v.toDevice().type() == kDipu && !dipu_device) {
      dipu_device = v.toDevice();
    }
  }
  TORCH_CHECK(!(dipu_device && other),
              "Expected all tensors to be on the same device, but found at least two devices, ", *dipu_device, " and ",
              other.value_or(c10::Device(c10::kCPU)), "! (when checking arguments for ", name, ")");
  return dipu_device;
}

// Random ops on the CPU must draw from the dipu generator's native (CPU)
// generator, never from a dipu one (see Note [Native generators]).
void substitute_generators(const c10::FunctionSchema& schema, torch::jit::Stack* stack,
                           std::optional<c10::Device> device) {
  const auto& arguments = schema.arguments();
  size_t begin = stack->size() - arguments.size();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (!is_optional_generator(arguments[i])) continue;
    c10::IValue& v = (*stack)[begin + i];
    at::Generator gen;
    if (v.isGenerator())
      gen = v.toGenerator();
    else if (device)
      gen = default_generator(device->index());
    else
      continue;
    if (gen.device().type() != kDipu) continue;
    at::Generator native = native_generator(gen);
    v = native.device().is_cpu() ? c10::IValue(native) : c10::IValue();
  }
}

// What every CPU fallback does before running the op: refuse views, count and
// announce the call, check devices, substitute generators. Returns the dipu device.
std::optional<c10::Device> begin_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = op_name(op);
  const auto& schema = op.schema();
  for (const auto& ret : schema.returns()) {
    const c10::AliasInfo* alias = ret.alias_info();
    TORCH_CHECK(!alias || alias->isWrite(), "dipu: ", name,
                " is a view operator without a dipu kernel; the CPU fallback cannot return a view "
                "of dipu memory (the core implements aten's dense views in dipu/csrc/metadata_ops.cpp)");
  }
  {
    std::lock_guard<std::mutex> lock(g_fallback_mutex);
    g_fallback_counts[name]++;
  }
  auto args = torch::jit::last(*stack, schema.arguments().size());
  auto device = check_devices(name, args);
  if (g_log_every_fallback) {
    std::cerr << "dipu: fallback to cpu: " << name << std::endl;
  } else if (announce_fallback()) {
    TORCH_WARN(fallback_announcement(name));
  }
  substitute_generators(schema, stack, device);
  return device;
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::optional<c10::Device> device = begin_fallback(op, stack);
  // Host copies would hide memory the op writes and reads at once (Note [Overlapping memory]).
  if (writes_overlapping_memory(op.schema(), torch::jit::last(*stack, op.schema().arguments().size()),
                                /*same_tensor_counts=*/true)) {
    run_on_host_replicas(op, stack, device, /*write_back=*/true);
    return;
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

// Note [Sparse CPU fallback]
// torch's CPU fallback redispatches to the dense CPU key, which has no kernel for a
// sparse argument. For an op on sparse dipu tensors (Note [Sparse tensors on
// dipu] in sparse.cpp) the arguments are moved to the CPU instead (`.cpu()` copies
// a sparse tensor's indices and values) and the op is called again, so the
// dispatcher picks the CPU's kernel for the arguments' layouts. An argument the op
// writes (in-place and out=) gets the CPU's new contents back with copy_, dense or
// sparse, and is what the op returns; every other result is moved to the device.
// A copy keeps the requires_grad of its tensor: a CPU kernel may read it (sparse.mm
// with amax or amin computes the argmax its backward indexes only for inputs that
// require grad, and that backward, given the empty one, crashed the process).
void sparse_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::optional<c10::Device> device = begin_fallback(op, stack);
  const auto& schema = op.schema();
  const HostPairs written =  // Note [Host arguments] in overlap.h
      arguments_to_host(schema, stack, [](const at::Tensor& t) {
        if (!t.defined() || !on_dipu(t)) return t;
        at::Tensor host = t.cpu();
        if (t.requires_grad()) host.requires_grad_(true);
        return host;
      });
  op.callBoxed(stack);
  for (auto& [original, host] : written) {
    at::Tensor target = original;
    target.copy_(host);
  }
  results_from_host(schema, stack, written, device);
}

// Which sparse ops reach the sparse fallback. A backend fallback is the last
// choice of the dispatcher: ATen's composite kernels come first, and for sparse
// arguments they are wrong (a CompositeImplicitAutograd `abs` allocates a dense
// result, a structured op's CompositeExplicitAutogradNonFunctional kernel asks its
// out= variant for a compressed result, `isinf` calls ops the CPU has no sparse
// kernel for). So every op the CPU has a sparse kernel for (SparseCPU,
// SparseCsrCPU), and dipu none, is sent to the sparse fallback by name; views are
// left to their composite kernels (the fallback cannot return a view).
void register_sparse_fallbacks() {
  static std::vector<std::unique_ptr<torch::Library>> libraries;
  if (!libraries.empty()) return;
  const std::pair<c10::DispatchKey, c10::DispatchKey> keys[] = {
      {c10::DispatchKey::SparseCPU, c10::DispatchKey::SparsePrivateUse1},
      {c10::DispatchKey::SparseCsrCPU, c10::DispatchKey::SparseCsrPrivateUse1}};
  auto& dispatcher = c10::Dispatcher::singleton();
  const auto names = dispatcher.getAllOpNames();
  for (const auto& [cpu_key, dipu_key] : keys) {
    libraries.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, "aten", dipu_key, __FILE__, __LINE__));
    for (const c10::OperatorName& name : names) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      auto op = dispatcher.findOp(name);
      if (!op || !op->hasKernelForDispatchKey(cpu_key) || op->hasKernelForDispatchKey(dipu_key)) continue;
      bool view = false;
      for (const auto& ret : op->schema().returns()) view = view || (ret.alias_info() && !ret.alias_info()->isWrite());
      if (view) continue;
      std::string unqualified = name.name.substr(6);
      if (!name.overload_name.empty()) unqualified += "." + name.overload_name;
      libraries.back()->impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&sparse_cpu_fallback>());
    }
  }
}

py::object python_cpu_fallback(const std::string& qualified, const py::tuple& args, const py::dict& kwargs) {
  auto op = find_op(qualified);
  torch::jit::Stack stack =
      torch::jit::createStackForSchema(op.schema(), args, py::reinterpret_borrow<py::kwargs>(kwargs), std::nullopt);
  {
    py::gil_scoped_release no_gil;
    cpu_fallback(op, &stack);
  }
  return torch::jit::createPyObjectForStack(std::move(stack));
}

// Note [Functional ops the CPU runs whole]
// For some ops ATen gives other backends only a CompositeExplicitAutogradNonFunctional
// kernel that allocates the output and calls the out= variant (mse_loss, the
// structured special functions, pixel_shuffle, ...), while the CPU has a kernel of its
// own. Without a dipu kernel, such an op would reach the fallback as its out= variant,
// with an output the CPU never sees in that op: mse_loss.out then warns "An output
// with one or more elements was resized since it had shape []", which the CPU's
// mse_loss does not. So once dipu's kernels are registered (dipu/kernels/fallback.py
// `register`), every such op is sent whole to the fallback, unless dipu has a kernel
// for one of its variants (`X.out`, `X_`): the composite reaches that kernel. A few
// such composites call no out= variant but decompose into views and copies that dipu
// serves (kDecomposed): those keep their composite, which runs on the device.
std::unique_ptr<torch::Library> g_whole_ops;
const std::unordered_set<std::string> kDecomposed = {"aten::pixel_shuffle", "aten::pixel_unshuffle"};

std::vector<std::string> route_whole_ops_to_fallback() {
  g_whole_ops.reset();
  auto& dispatcher = c10::Dispatcher::singleton();
  const auto names = dispatcher.getAllOpNames();
  auto family = [](const std::string& name) {  // aten::add_ and aten::add -> aten::add
    return !name.empty() && name.back() == '_' ? name.substr(0, name.size() - 1) : name;
  };
  std::unordered_set<std::string> served;  // families with a dipu kernel
  for (const c10::OperatorName& name : names) {
    auto op = dispatcher.findOp(name);
    if (op && op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) served.insert(family(name.name));
  }
  std::vector<std::string> routed;
  for (const c10::OperatorName& name : names) {
    if (name.name.rfind("aten::", 0) != 0 || served.count(family(name.name)) || kDecomposed.count(name.name)) continue;
    auto op = dispatcher.findOp(name);
    if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))
      continue;
    bool view = false;
    for (const auto& ret : op->schema().returns()) view = view || (ret.alias_info() && !ret.alias_info()->isWrite());
    if (!view) routed.push_back(op_name(*op));
  }
  g_whole_ops =
      std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const std::string& name : routed)
    g_whole_ops->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  return routed;
}

}  // namespace

void register_fallback_python(py::module& m) {
  const char* log = std::getenv("DIPU_LOG_FALLBACK_INFO");
  g_log_every_fallback = log && std::string(log) == "1";
  register_sparse_fallbacks();
  m.def("cpu_fallback", &python_cpu_fallback,
        "Run an aten op through the boxed CPU fallback: cpu_fallback('add.out', args, kwargs)");
  register_overlap_python(m);
  m.def("route_whole_ops_to_fallback", &route_whole_ops_to_fallback,
        "Send ops ATen would run through their out= variant whole to the fallback (Note [Functional ops the CPU runs "
        "whole])");
  m.def("unroute_whole_ops", [] { g_whole_ops.reset(); });
  m.def("announce_fallback", &announce_fallback, "True once until reset_fallback_counts (Note [One fallback warning])");
  m.def("fallback_announcement", &fallback_announcement);
  m.def("fallback_counts", [] {
    std::lock_guard<std::mutex> lock(g_fallback_mutex);
    return g_fallback_counts;
  });
  m.def("reset_fallback_counts", [] {
    std::lock_guard<std::mutex> lock(g_fallback_mutex);
    g_fallback_counts.clear();
    g_fallback_announced = false;
  });
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>()); }

// Sparse tensors: every op without a structural kernel in sparse.cpp runs on the
// CPU (Note [Sparse CPU fallback]).
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_cpu_fallback>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_cpu_fallback>());
}

}  // namespace dipu
