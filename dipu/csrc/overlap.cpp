// Memory overlap between what an op writes and its other arguments.
//
// Note [Overlapping memory]
// The CPU refuses to write memory an input also occupies in part
// (`torch.add(x[:5], y, out=x[1:])`: "unsupported operation: some elements of the
// input tensor and the written-to tensor refer to a single memory location"), or
// a written tensor whose elements share a location (an expanded `out`); which op
// refuses what is the op's own business (TensorIterator refuses partial overlap,
// `cat` and `index_select` any overlap, `sum.out` none). dipu lets the CPU decide:
// - The CPU fallback copies its arguments to the host, which hides any overlap.
//   When a written dipu tensor shares bytes with another argument or with itself,
//   it instead copies, per dipu storage, the byte span its arguments cover into one
//   host buffer and builds the host arguments over it with their own offsets and
//   strides: the CPU kernel sees the memory as the user made it, raises what it
//   raises and computes what it computes, and the spans written come back.
// - A generated wrapper calls its DIOPI function directly, and a C library computes
//   whatever overlapping memory gives it. A Python wrapper of an out= or in-place
//   kernel asks `_C.written_memory_overlaps` first (cheap: metadata only; before it
//   resizes out=, as the CPU kernel may refuse first) and, when memory overlaps, runs
//   the op on host replicas as a probe whose error, if any, is the call's
//   (dipu.kernels.support.check_written_memory); a C++ wrapper hands such a call to
//   its Python wrapper (Note [Overlapping memory in C++]). One tensor both written
//   and read (`out=x` with input `x`) counts as overlap there too: ops calling
//   at::assert_no_overlap (cat, index_select, gather, take) refuse it, and only the
//   probe can tell which. The torch libraries, which run ATen on aliases, would see
//   the overlap themselves (Note [Aliases share one storage] in copies.cpp).
// Neither path costs anything but the metadata check when no memory overlaps.
#include "overlap.h"

#include "python.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace dipu {
namespace {

// Bytes [begin, end) of its storage that `t` covers (empty for a tensor without elements).
std::pair<int64_t, int64_t> byte_range(const at::Tensor& t) {
  if (t.numel() == 0) return {0, 0};
  int64_t first = t.storage_offset(), last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t reach = (t.size(d) - 1) * t.stride(d);
    if (reach >= 0)
      last += reach;
    else
      first += reach;
  }
  return {first * static_cast<int64_t>(t.itemsize()), (last + 1) * static_cast<int64_t>(t.itemsize())};
}

bool share_bytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !a.storage().is_alias_of(b.storage())) return false;
  auto [a_begin, a_end] = byte_range(a);
  auto [b_begin, b_end] = byte_range(b);
  return a_begin < b_end && b_begin < a_end;
}

bool overlaps(const std::vector<std::pair<at::Tensor, bool>>& tensors, bool same_tensor_counts) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [written, is_written] = tensors[i];
    if (!is_written) continue;
    if (at::has_internal_overlap(written) == at::MemOverlap::Yes) return true;
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (j == i || (!same_tensor_counts && !tensors[j].second && tensors[j].first.is_same(written))) continue;
      if (share_bytes(written, tensors[j].first)) return true;
    }
  }
  return false;
}

// Calls `visit(tensor, written)` for every tensor among an op's arguments (lists included).
template <class Visit>
void for_each_tensor(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, Visit visit) {
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
    bool written = alias && alias->isWrite();
    const c10::IValue& v = args[i];
    if (v.isTensor()) {
      visit(v.toTensor(), written);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) visit(t, written);
    } else if (v.isList()) {
      for (const auto& e : v.toListRef())
        if (e.isTensor()) visit(e.toTensor(), written);
    }
  }
}

// Per dipu storage: the byte span the arguments cover and its host copy.
struct Replica {
  c10::Storage storage;
  int64_t begin = std::numeric_limits<int64_t>::max(), end = 0;
  bool written = false;
  at::Tensor host;  // bytes [begin, end) of the storage
};

std::vector<at::Tensor> tensors_in(const py::handle& values) {
  std::vector<at::Tensor> found;
  for (const py::handle& value : values) {
    if (THPVariable_Check(value.ptr()))
      found.push_back(THPVariable_Unpack(value.ptr()));
    else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value))
      for (at::Tensor& t : tensors_in(value)) found.push_back(std::move(t));
  }
  return found;
}

// Whether the dipu tensors of `written` overlap themselves, one another or those of `inputs`.
bool written_tensors_overlap(const py::sequence& written, const py::sequence& inputs) {
  std::vector<std::pair<at::Tensor, bool>> tensors;
  for (const at::Tensor& t : tensors_in(written))
    if (on_dipu(t)) tensors.emplace_back(t, true);
  if (tensors.empty()) return false;
  for (const at::Tensor& t : tensors_in(inputs))
    if (on_dipu(t)) tensors.emplace_back(t, false);
  return overlaps(tensors, /*same_tensor_counts=*/true);
}

// A generated wrapper's check before its DIOPI function runs on overlapping memory: the op on host
// replicas that overlap as the arguments do, for the CPU's error. Random ops draw from a throwaway
// generator, so the probe leaves every generator's state alone.
void overlap_probe(const std::string& qualified, const py::tuple& args, const py::dict& kwargs) {
  auto op = find_op(qualified);
  torch::jit::Stack stack =
      torch::jit::createStackForSchema(op.schema(), args, py::reinterpret_borrow<py::kwargs>(kwargs), std::nullopt);
  py::gil_scoped_release no_gil;
  const auto& arguments = op.schema().arguments();
  for (size_t i = 0; i < arguments.size(); ++i)
    if (is_optional_generator(arguments[i]))
      stack[stack.size() - arguments.size() + i] = at::detail::createCPUGenerator();
  run_on_host_replicas(op, &stack, std::nullopt, /*write_back=*/false);
}

}  // namespace

c10::OperatorHandle find_op(const std::string& qualified) {
  std::string name = qualified.find("::") == std::string::npos ? "aten::" + qualified : qualified;
  auto dot = name.find('.', name.find("::"));
  std::string base = dot == std::string::npos ? name : name.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
  if (overload == "default") overload = "";
  return c10::Dispatcher::singleton().findSchemaOrThrow(base.c_str(), overload.c_str());
}

bool is_optional_generator(const c10::Argument& arg) {
  const auto& t = arg.type();
  if (t->kind() == c10::TypeKind::GeneratorType) return true;
  if (auto opt = t->cast<c10::OptionalType>()) return opt->getElementType()->kind() == c10::TypeKind::GeneratorType;
  return false;
}

void register_overlap_python(py::module& m) {
  m.def("overlap_probe", &overlap_probe,
        "Run an aten op on host replicas that overlap as its dipu arguments do, for the CPU's error");
  m.def("written_memory_overlaps", &written_tensors_overlap,
        "Whether a written tensor overlaps itself or shares bytes with an input (Note [Overlapping memory])");
}

bool writes_overlapping_memory(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                               bool same_tensor_counts) {
  std::vector<std::pair<at::Tensor, bool>> tensors;
  bool any_written = false;
  for_each_tensor(schema, args, [&](const at::Tensor& t, bool written) {
    if (!on_dipu(t)) return;
    tensors.emplace_back(t, written);
    any_written = any_written || written;
  });
  return any_written && overlaps(tensors, same_tensor_counts);
}

void run_on_host_replicas(const c10::OperatorHandle& op, torch::jit::Stack* stack, std::optional<c10::Device> device,
                          bool write_back) {
  const auto& schema = op.schema();
  const size_t count = schema.arguments().size();
  std::unordered_map<c10::StorageImpl*, Replica> replicas;
  for_each_tensor(schema, torch::jit::last(*stack, count), [&](const at::Tensor& t, bool written) {
    if (!on_dipu(t)) return;
    Replica& replica = replicas[t.storage().unsafeGetStorageImpl()];
    replica.storage = t.storage();
    replica.written = replica.written || written;
    if (t.numel() == 0) return;
    auto [begin, end] = byte_range(t);
    replica.begin = std::min(replica.begin, begin);
    replica.end = std::max(replica.end, end);
  });
  for (auto& [impl, replica] : replicas) {
    // Aligned to the largest element size, so every tensor's offset is whole elements.
    replica.begin = replica.end > 0 ? replica.begin / 16 * 16 : 0;
    replica.host = at::empty({replica.end - replica.begin}, at::TensorOptions().dtype(at::kByte));
    if (replica.end > replica.begin)
      copy_bytes(replica.host.data_ptr(), replica.host.device(),
                 static_cast<const char*>(replica.storage.data()) + replica.begin, replica.storage.device(),
                 replica.end - replica.begin);
  }
  auto host_of = [&](const at::Tensor& t) -> at::Tensor {
    if (!on_dipu(t)) return t;
    at::TensorOptions options = t.options().device(c10::kCPU);
    at::Tensor host;
    if (t.numel() == 0) {
      host = at::empty_strided(t.sizes(), t.strides(), options);
    } else {
      const Replica& replica = replicas.at(t.storage().unsafeGetStorageImpl());
      int64_t offset = (t.storage_offset() * static_cast<int64_t>(t.itemsize()) - replica.begin) /
                       static_cast<int64_t>(t.itemsize());
      host = at::empty({0}, options).set_(replica.host.storage(), offset, t.sizes(), t.strides());
    }
    host._set_conj(t.is_conj());
    host._set_neg(t.is_neg());
    return host;
  };
  const HostPairs written = arguments_to_host(schema, stack, host_of);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  const size_t results = schema.returns().size();
  if (!write_back) {
    torch::jit::drop(*stack, results);
    return;
  }
  for (auto& [impl, replica] : replicas) {
    if (replica.written && replica.end > replica.begin)
      copy_bytes(static_cast<char*>(replica.storage.mutable_data()) + replica.begin, replica.storage.device(),
                 replica.host.const_data_ptr(), replica.host.device(), replica.end - replica.begin);
  }
  // An out= tensor the CPU kernel resized (or gave other memory) no longer lies in its replica.
  for (auto& [original, host] : written) {
    bool in_place = host.storage().is_alias_of(replicas.at(original.storage().unsafeGetStorageImpl()).host.storage()) &&
                    host.sizes() == original.sizes() && host.strides() == original.strides();
    if (in_place) continue;
    if (host.sizes() != original.sizes()) original.resize_(host.sizes());
    original.copy_(host);
  }
  results_from_host(schema, stack, written, device);
}

HostPairs arguments_to_host(const c10::FunctionSchema& schema, torch::jit::Stack* stack,
                            const std::function<at::Tensor(const at::Tensor&)>& to_host) {
  const size_t count = schema.arguments().size();
  const size_t first = stack->size() - count;
  HostPairs written;
  for (size_t i = 0; i < count; ++i) {
    c10::IValue& v = (*stack)[first + i];
    const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
    const bool writes = alias && alias->isWrite();
    if (v.isTensor()) {
      at::Tensor original = v.toTensor();
      at::Tensor host = to_host(original);
      if (writes && on_dipu(original)) written.emplace_back(original, host);
      v = host;
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> hosts;
      for (const at::Tensor& t : v.toTensorVector()) {
        hosts.push_back(to_host(t));
        if (writes && on_dipu(t)) written.emplace_back(t, hosts.back());
      }
      v = hosts;
    } else if (v.isList()) {
      c10::List<std::optional<at::Tensor>> hosts;
      bool optional_tensors = true;
      for (const auto& e : v.toListRef()) {
        if (e.isTensor())
          hosts.push_back(to_host(e.toTensor()));
        else if (e.isNone())
          hosts.push_back(std::nullopt);
        else
          optional_tensors = false;
      }
      if (optional_tensors && !v.toListRef().empty()) v = hosts;
    } else if (v.isDevice() && v.toDevice().type() == kDipu) {
      v = c10::Device(c10::kCPU);
    }
  }
  return written;
}

void results_from_host(const c10::FunctionSchema& schema, torch::jit::Stack* stack, const HostPairs& written,
                       std::optional<c10::Device> device) {
  const size_t results = schema.returns().size();
  for (size_t i = stack->size() - results; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const at::Tensor& result = v.toTensor();
    auto same =
        std::find_if(written.begin(), written.end(), [&](const auto& pair) { return pair.second.is_same(result); });
    if (same != written.end())
      v = same->first;
    else if (device && result.device().is_cpu())
      v = result.to(*device);
  }
}

}  // namespace dipu
