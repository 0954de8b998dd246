// Metadata-only aten ops, copies, and the boxed CPU fallback for PrivateUse1.
//
// Note [Copies: alias or staging]
// A vendor whose memory is addressable by a native torch device (host memory
// for the simulated vendor, CUDA memory for a CUDA vendor) declares that device
// and the core copies through zero-copy native aliases: one native copy_ does
// dtype conversion, layout changes and cross-device moves. A vendor without
// one gets the contract path: byte copies through its memcpy functions, staged
// through a host image of the strided span when layouts or dtypes differ.
#include "python.h"
#include "overlap.h"
#include "../include/diopi/aten_aliases.h"

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/TensorOptions.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace dipu {
namespace {

struct AliasContext {
  c10::intrusive_ptr<c10::StorageImpl> keep_alive;
};
void delete_alias_context(void* ctx) { delete static_cast<AliasContext*>(ctx); }

// Number of elements between the first and the last element of `t`, inclusive.
int64_t span_elements(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * t.stride(d);
  return span;
}

// Gives `view` the conjugate and negative bits of `t`: a tensor over the same
// memory must read the same values (see Note [Conjugate and negative bits]).
at::Tensor with_bits_of(at::Tensor view, const at::Tensor& t) {
  view._set_conj(t.is_conj());
  view._set_neg(t.is_neg());
  return view;
}

// A CPU tensor with `t`'s sizes, strides and bits holding a copy of its values.
at::Tensor host_image(const at::Tensor& t) {
  int64_t span = span_elements(t);
  at::Tensor buf = at::empty({span}, t.options().device(c10::kCPU));
  if (span > 0) copy_bytes(buf.data_ptr(), buf.device(), t.data_ptr(), t.device(), span * t.itemsize());
  return with_bits_of(buf.as_strided(t.sizes(), t.strides(), 0), t);
}

// Writes the strided span of host image `host` back into device tensor `t`.
void write_back(const at::Tensor& t, const at::Tensor& host) {
  int64_t span = span_elements(t);
  if (span > 0) copy_bytes(t.data_ptr(), t.device(), host.data_ptr(), host.device(), span * t.itemsize());
}

bool same_layout_dense(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.strides() == b.strides() && a.is_conj() == b.is_conj() &&
         a.is_neg() == b.is_neg() && a.is_non_overlapping_and_dense();
}

void ensure_storage(const at::Tensor& self, size_t needed) {
  if (needed > self.storage().nbytes()) {
    c10::DeviceGuard guard(self.device());
    resize_storage_bytes(self.storage(), needed);
  }
}

// ---- metadata ops -----------------------------------------------------------

c10::DeviceIndex target_index(std::optional<c10::Device> device) {
  c10::DeviceIndex index = device && device->has_index() ? device->index() : current_device();
  check_device_index(index);
  return index;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
                               std::optional<at::Device> device, std::optional<bool>,
                               std::optional<at::MemoryFormat> format) {
  c10::DeviceGuard guard(c10::Device(kDipu, target_index(device)));
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>) {
  c10::DeviceGuard guard(c10::Device(kDipu, target_index(device)));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<at::MemoryFormat> format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  ensure_storage(self, at::detail::computeStorageNbytesContiguous(size, self.itemsize(), self.storage_offset()));
  if (format) impl->empty_tensor_restride(*format);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kDipu, "set_: expected a dipu storage, got one on ", source.device());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(offset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
    ensure_storage(self, at::detail::computeStorageNbytesContiguous(size, self.itemsize(), offset));
  } else {
    impl->set_sizes_and_strides(size, stride);
    ensure_storage(self, at::detail::computeStorageNbytes(size, stride, self.itemsize(), offset));
  }
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t numel = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, device_allocator(), true);
  empty.unsafeGetStorageImpl()->set_data_ptr_noswap(c10::DataPtr(nullptr, self.device()));
  return set_storage(self, std::move(empty), 0, {0}, {});
}

// ---- copies -----------------------------------------------------------------

// Note [Conjugate and negative bits]
// A complex tensor may carry a lazy conjugation (`conj()`, `mH`) and any
// tensor a lazy negation (`_neg_view`) as bits in its key set. Every tensor the
// core makes over a dipu tensor's memory (native aliases, host images) carries
// the same bits, so native kernels read the values the user sees and a copy
// materializes them. Copies must reach `copy_from` with the bits intact: the
// conjugate/negative fallbacks would otherwise materialize the source with
// `clone`, whose `copy_` lands in `_copy_from` again, recursing until the stack
// overflows; hence the fallthrough registrations at the end of this file.

// A dipu tensor the caller holds, as the vendor's native device sees it for this call (diopi/aten_aliases.h: no
// ownership to take and give back, and the last aliases are reused).
at::Tensor call_alias(const at::Tensor& t) {
  ensure_initialized();  // as native_alias
  const c10::DeviceType type = vendor().alias_type;
  return diopi_aliases::call_alias(t, c10::Device(type, type == c10::DeviceType::CPU ? -1 : t.device().index()));
}

at::Tensor copy_from(const at::Tensor& source, const at::Tensor& dst, bool non_blocking) {
  if (dst.numel() == 0) return dst;
  // copy_ broadcasts its source; ATen hands it to _copy_from unexpanded.
  at::Tensor self = source.sizes() == dst.sizes() ? source : source.expand(dst.sizes());
  if (vendor().has_alias) {
    at::Tensor src = on_dipu(self) ? call_alias(self) : self;
    at::Tensor out = on_dipu(dst) ? call_alias(dst) : dst;
    out.copy_(src, non_blocking);
    return dst;
  }
  // ATen's copy_ hands a dipu copy to _copy_from before its TensorIterator checks memory; the alias path above
  // gets them from the alias device's copy_, and here they are made as it makes them, with its errors.
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, source);
  if (same_layout_dense(self, dst)) {
    copy_bytes(dst.data_ptr(), dst.device(), self.data_ptr(), self.device(), self.nbytes());
    return dst;
  }
  at::Tensor src = on_dipu(self) ? host_image(self) : self;
  if (!on_dipu(dst)) {
    dst.copy_(src);
    return dst;
  }
  at::Tensor host =
      dst.is_non_overlapping_and_dense()
          ? with_bits_of(at::empty_strided(dst.sizes(), dst.strides(), dst.options().device(c10::kCPU)), dst)
          : host_image(dst);
  host.copy_(src);
  write_back(dst, host);
  return dst;
}

// Note [copy_ between aliases]
// ATen's copy_ is a composite that checks its arguments and hands a copy involving dipu to _copy_from, which
// aliases both sides and copies with the alias device's copy_, checks and all. On a vendor with native aliases
// dipu's copy_ takes that last step directly for dense tensors on dipu or the CPU: the alias device's copy_
// broadcasts, casts, reads the lazy bits through the aliases and, as the aliases of one dipu storage share one
// storage (Note [Aliases share one storage]), refuses the overlaps the CPU refuses. Anything else (another
// device or layout, a zero tensor, a vendor without aliases) takes ATen's composite.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  auto plain = [](const at::Tensor& t) {
    return t.defined() && t.layout() == at::kStrided && (on_dipu(t) || t.device().is_cpu()) && !t._is_zerotensor() &&
           !t.is_quantized();
  };
  if (!vendor().has_alias || !plain(self) || !plain(src)) return at::native::copy_(self, src, non_blocking);
  at::Tensor out = on_dipu(self) ? call_alias(self) : self;
  out.copy_(on_dipu(src) ? call_alias(src) : src, non_blocking);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  if (vendor().has_alias) return at::_local_scalar_dense(call_alias(self));
  return at::_local_scalar_dense(host_image(self));
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (vendor().has_alias) {
    call_alias(self).fill_(value);
    return self;
  }
  at::Tensor host = host_image(self);
  host.fill_(value);
  write_back(self, host);
  return self;
}

at::Tensor& zero_(at::Tensor& self) {
  if (vendor().has_alias) {  // the native zero_, not fill_(0): the CPU's zero_ has a faster path (a memset)
    call_alias(self).zero_();
    return self;
  }
  return fill_scalar(self, 0);
}

void record_stream_op(at::Tensor& self, c10::Stream stream) { record_stream(self.storage().data_ptr(), stream); }

// ---- the CPU fallback ---------------------------------------------------------

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
                "of dipu memory (the core implements aten's dense views in dipu/csrc/ops.cpp)");
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
void sparse_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::optional<c10::Device> device = begin_fallback(op, stack);
  const auto& schema = op.schema();
  const HostPairs written =  // Note [Host arguments] in overlap.h
      arguments_to_host(schema, stack, [](const at::Tensor& t) { return t.defined() && on_dipu(t) ? t.cpu() : t; });
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
// for one of its variants (`X.out`, `X_`): the composite reaches that kernel.
std::unique_ptr<torch::Library> g_whole_ops;

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
    if (name.name.rfind("aten::", 0) != 0 || served.count(family(name.name))) continue;
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

// Note [Aliases share one storage]
// ATen finds arguments that overlap (x[1:].add_(x[:-1]), which the CPU refuses rather than compute garbage) by
// comparing their storages, so the aliases of dipu tensors over one storage must share one alias storage. Each
// thread remembers, for the dipu storages it aliased last, the alias storage it made (weakly), and an alias of
// any view of that storage reuses it while it lives and still covers the same memory. A live alias storage keeps
// its dipu storage alive, so an entry whose alias still lives cannot name a storage that was freed and reused.
c10::Storage alias_storage(const c10::Storage& storage, const c10::Device& device) {
  struct Entry {
    c10::StorageImpl* key = nullptr;
    c10::weak_intrusive_ptr<c10::StorageImpl> alias{c10::intrusive_ptr<c10::StorageImpl>()};
  };
  thread_local std::array<Entry, 16> entries;
  c10::StorageImpl* key = storage.unsafeGetStorageImpl();
  Entry& entry = entries[(reinterpret_cast<uintptr_t>(key) >> 6) % entries.size()];
  if (entry.key == key) {
    c10::intrusive_ptr<c10::StorageImpl> live = entry.alias.lock();
    if (live && live->data() == storage.data() && live->nbytes() == storage.nbytes() && live->device() == device)
      return c10::Storage(std::move(live));
  }
  c10::DataPtr data(key->mutable_data_ptr().get(),
                    new AliasContext{c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(key)}, &delete_alias_context,
                    device);
  auto impl = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), storage.nbytes(),
                                                    std::move(data), /*allocator=*/nullptr, /*resizable=*/false);
  entry.key = key;
  entry.alias = c10::weak_intrusive_ptr<c10::StorageImpl>(impl);
  return c10::Storage(std::move(impl));
}

}  // namespace

at::Tensor native_alias(const at::Tensor& t) {
  ensure_initialized();  // a forked child must not touch memory its parent's runtime owns
  TORCH_CHECK(vendor().has_alias, "dipu: the ", vendor().name,
              " vendor declares no native alias device (DeviceRuntime.native_device_type)");
  c10::DeviceIndex index = vendor().alias_type == c10::DeviceType::CPU ? -1 : t.device().index();
  c10::Device device(vendor().alias_type, index);
  at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(
      alias_storage(t.storage(), device),
      c10::DispatchKeySet(c10::computeDispatchKey(std::nullopt, at::kStrided, device)), t.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return with_bits_of(std::move(alias), t);
}

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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &empty_memory_format);
  m.impl("empty_strided", &empty_strided);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("unfold", &at::native::unfold);
  m.impl("view_as_real", &at::native::view_as_real);
  m.impl("view_as_complex", &at::native::view_as_complex);
  m.impl("resize_", &resize_);
  m.impl("set_.source_Storage", &set_source_storage);
  m.impl("set_.source_Storage_storage_offset", &set_storage);
  m.impl("set_.source_Tensor", &set_source_tensor);
  m.impl("set_", &set_empty);
  m.impl("copy_", &copy_);
  m.impl("_copy_from", &copy_from);
  m.impl("_copy_from_and_resize", &copy_from_and_resize);
  m.impl("_local_scalar_dense", &local_scalar_dense);
  m.impl("fill_.Scalar", &fill_scalar);
  m.impl("zero_", &zero_);
  m.impl("record_stream", &record_stream_op);
}

// See Note [Conjugate and negative bits].
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

// Note [Moving modules keeps shared Parameters]
// `Module._apply` (`.to`, `.dipu()`, `to_empty`) keeps a Parameter object and
// swaps its data (`param.data = moved`) only when the two tensors have
// "compatible shallow-copy types"; PyTorch's answer lists CPU, CUDA and other
// in-tree dense backends but not PrivateUse1, so each module would get a new
// Parameter and tied weights (an LM head sharing its embedding) would come
// apart. Dense strided tensors of the CPU and dipu share one TensorImpl type,
// so swapping their data is as safe as for CUDA.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (on_dipu(t) || t.device().is_cpu()) && !t.is_quantized() && !t.is_nested();
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &has_compatible_shallow_copy_type);
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
