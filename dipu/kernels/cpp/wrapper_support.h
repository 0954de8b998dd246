// What the generated C++ wrappers (Note [Generated C++ wrappers] in scripts/autogen/dest/cpp_wrappers.py)
// use: the per-kernel state, the hook test, the Python path, the device scope, allocation and the
// conversions of ATen values to DIOPI's C values. Built into the wrapper extension only (never into the
// native core), so it reaches the core through torch's registries (the PrivateUse1 device guard and
// allocator) and the inline part of diopi_rt.h: nothing here needs a symbol of the core. No file of the extension
// reads a Python header: the Python path is a function of the core's (Note [The C++ wrappers' way to Python] in
// dipu/csrc/python_wrapper_call.h), and the library's interface is C (wrapper_support.cpp).
#pragma once

#include "diopi_rt.h"
#include "python_wrapper_call.h"
#include "shape_rules.h"

#include <ATen/core/Tensor.h>
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/boxing/impl/boxing.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <tuple>
#include <string>
#include <vector>

namespace dipu::cwrap {

namespace diopi = ::dipu::diopi;
constexpr auto kDipu = c10::DeviceType::PrivateUse1;

// DIPU_SYNC_EXEC_MODE, as dipu/kernels/switches.py read it: set by dipu/kernels/cpp_wrappers.py when it loads the
// extension.
extern bool g_sync;

// Whether DIPU_DUMP_OP_ARGS asks for dumps: set by dipu/kernels/cpp_wrappers.py when it loads the extension and
// whenever os.environ changes it (watch_dump in dipu/kernels/switches.py).
extern std::atomic<bool> g_dump;

// The core's function that calls a Python wrapper, which dipu/kernels/cpp_wrappers.py hands over when it loads the
// extension (Note [The C++ wrappers' way to Python]).
extern PythonWrapperCall g_python_call;

// The native core's flag of an active device timeline (Note [Device timeline] in dipu/csrc/profiler.cpp), which
// dipu/kernels/cpp_wrappers.py hands over when it loads the extension; until then a flag that is always set.
extern const std::atomic<bool>* g_timeline;

// Note [Hooks on the C++ path]
// Force fallback and autocompare are decided by registration (dipu/kernels/registry.py): a forced op
// never gets a kernel, and a compared op's overlay is registered over the C++ wrapper, so neither
// costs the C++ path anything. The two hooks that switch on at run time without a registration are
// tested on every call: DIPU_DUMP_OP_ARGS (as os.environ holds it, g_dump, with the Python wrappers' idea of
// "off": unset, empty or "0") and a profiler that records dipu's device timeline (which the Python path's
// exchange_device feeds). Either sends the call to the Python wrapper. A profiler of the CPU alone leaves calls
// on the C++ path, so that its profile measures the path that runs when nothing profiles it.
inline bool hooks_on() {
  if (g_dump.load(std::memory_order_relaxed)) return true;
  return torch::profiler::impl::profilerEnabled() && g_timeline->load(std::memory_order_relaxed);
}

// One generated kernel: its op, its DIOPI function (bound at install), its Python wrapper (the path
// every case the C++ wrapper does not handle takes) and how often the C++ path served a call.
struct Kernel {
  // constexpr: the thousand Kernels of the generated tables are data, with no code to run when the library loads
  constexpr Kernel(const char* op, const char* diopi_name, const char* scalar_name = "", const char* meta_op = "")
      : op(op), diopi_name(diopi_name), scalar_name(scalar_name), meta_op(meta_op) {}
  const char* op;
  const char* diopi_name;
  // the scalar_interface's function, for a wrapped number (an impl twin's second function: a transposed
  // convolution's); "" when none
  const char* scalar_name;
  // the op whose meta kernel the dispatcher picks gives its output shapes ("": a rule or ATen's C++ meta function
  // called directly; Note [Meta shapes in C++])
  const char* meta_op;
  void* function = nullptr;
  void* scalar_function = nullptr;  // null when the library lacks it
  void* python_kernel = nullptr;  // the Python wrapper (a PyObject*), which cpp_wrappers.py keeps while installed
  const c10::FunctionSchema* schema = nullptr;
  std::atomic<int64_t> fast_calls{0};
  // Set when the op turned out to have no meta kernel (Note [Meta shapes in C++]): the Python path for good.
  std::atomic<bool> no_meta{false};

  bool fast_path() const { return function != nullptr && !no_meta.load(std::memory_order_relaxed) && !hooks_on(); }

  // After a successful call: count it (a relaxed load and store: an approximate count under races
  // costs nothing on the hot path) and synchronize in sync mode.
  void finished(c10::DeviceIndex device) {
    fast_calls.store(fast_calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (C10_UNLIKELY(g_sync)) c10::impl::getDeviceGuardImpl(kDipu)->synchronizeDevice(device);
  }

  // The Python wrapper's answer for these arguments (schema order), boxed as the dispatcher boxes them.
  template <class... Args>
  at::Tensor python_tensor(const Args&... args) {
    return call_python(c10::impl::boxArgs<Args...>(args...), true).at(0).toTensor();
  }
  template <class... Args>
  void python(const Args&... args) {
    call_python(c10::impl::boxArgs<Args...>(args...), false);
  }
  // The tensors the Python wrapper returns (those of a Tensor[] result, one by one), an undefined tensor for each
  // None (Note [Several outputs in C++] in dest/cpp_wrappers.py).
  template <class... Args>
  std::vector<at::Tensor> python_tensors(const Args&... args) {
    return tensors_of(call_python(c10::impl::boxArgs<Args...>(args...), true));
  }
  // The Python wrapper's results as the schema types them (a SymInt among tensors).
  template <class... Args>
  torch::jit::Stack python_values(const Args&... args) {
    return call_python(c10::impl::boxArgs<Args...>(args...), true);
  }

 private:
  // The core's g_python_call: keyword-only arguments by name, the GIL taken; a Python exception keeps its type
  // (python_error carries it back through the dispatcher). wrapper_support.cpp.
  torch::jit::Stack call_python(torch::jit::Stack stack, bool results);
  static std::vector<at::Tensor> tensors_of(const torch::jit::Stack& results);
};

// ---- arguments ----------------------------------------------------------------------------------

inline bool on(const at::Tensor& t, c10::DeviceIndex device) {
  return t.defined() && t.device().type() == kDipu && t.device().index() == device;
}
inline bool on(const std::optional<at::Tensor>& t, c10::DeviceIndex device) {
  return !t.has_value() || !t->defined() || on(*t, device);
}
// A Python number where the schema says Tensor (Note [Wrapped numbers in C++] in dest/cpp_wrappers.py).
inline bool is_number(const at::Tensor& t) { return t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number(); }
// The number a wrapped number holds (double, int64, bool or complex, as torch wraps them).
inline at::Scalar number_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kDouble: return *t.const_data_ptr<double>();
    case at::kLong: return *t.const_data_ptr<int64_t>();
    case at::kBool: return *t.const_data_ptr<bool>();
    default: return t.item();
  }
}
// Note [Wrapped numbers in C++] in dest/cpp_wrappers.py: the wrapped number `number` as a 0-dim tensor on the dipu
// device of `other`, in the dtype it promotes to beside `other`, as the Python wrapper makes it (call_with_numbers).
at::Tensor device_number(const at::Tensor& number, const at::Tensor& other);
// Note [Tensor lists in C++] in dest/cpp_wrappers.py: the first element's device, -1 when there is none.
inline c10::DeviceIndex device_of(at::TensorList list) {
  return !list.empty() && list[0].defined() && list[0].device().type() == kDipu ? list[0].device().index() : -1;
}
// An empty list (the fused optimizers' max_exp_avg_sqs without amsgrad) holds nothing off the device, but the
// device must come from somewhere else: device_of answers -1 for an empty first list.
inline bool on(at::TensorList list, c10::DeviceIndex device) {
  if (list.empty()) return device >= 0;
  for (const at::Tensor& t : list)
    if (!on(t, device)) return false;
  return true;
}
// Tensor?[] (indices): every tensor given is on the device; None entries select whole dims.
inline bool on(const c10::List<std::optional<at::Tensor>>& list, c10::DeviceIndex device) {
  for (const std::optional<at::Tensor>& t : list)
    if (!on(t, device)) return false;
  return true;
}
// Note [Overlapping memory in C++]
// A C library computes whatever memory it is given, so a wrapper whose op writes a tensor (in place or out=)
// first asks whether that tensor overlaps itself (an expanded self), another output, or a tensor the op reads
// (a view of the same storage); then the Python wrapper takes the call, and its check raises what the CPU raises
// (Note [Overlapping memory] in dipu/csrc/overlap.cpp). The in-place self read as itself (x.add_(x)) is no
// overlap, as the DIOPI contract lets an output be an input; out= given an input (out=x) is, as in the Python
// check (cat and index_select refuse it). Pointer comparisons only; written lists (the foreach steps) are checked
// element by element (written_lists_overlap below).
inline bool reads_memory_of(const at::Tensor& w, const at::Tensor& r, bool in_place) {
  return r.defined() && !(in_place && r.is_same(w)) && r.has_storage() && r.storage().is_alias_of(w.storage());
}
inline bool reads_memory_of(const at::Tensor& w, const std::optional<at::Tensor>& r, bool in_place) {
  return r.has_value() && reads_memory_of(w, *r, in_place);
}
inline bool reads_memory_of(const at::Tensor& w, at::TensorList reads, bool in_place) {
  for (const at::Tensor& r : reads)
    if (reads_memory_of(w, r, in_place)) return true;
  return false;
}
inline bool reads_memory_of(const at::Tensor& w, const c10::List<std::optional<at::Tensor>>& reads, bool in_place) {
  for (const std::optional<at::Tensor>& r : reads)
    if (reads_memory_of(w, r, in_place)) return true;
  return false;
}
template <size_t N, class... Reads>
bool written_overlaps(const std::array<const at::Tensor*, N>& written, bool in_place, const Reads&... reads) {
  for (size_t i = 0; i < N; ++i) {
    const at::Tensor& w = *written[i];
    if (!w.defined()) continue;
    if (at::has_internal_overlap(w) == at::MemOverlap::Yes) return true;
    for (size_t j = i + 1; j < N; ++j)
      if (written[j]->defined() && written[j]->storage().is_alias_of(w.storage())) return true;
    if ((reads_memory_of(w, reads, in_place) || ...)) return true;
  }
  return false;
}

// Note [Written lists overlapping] in dipu/kernels/support.py: element i of each written list against itself,
// element i of the other lists and the tensors read whole (the same tensor in place, as x.mul_(x), is no overlap).
inline bool element_reads_memory_of(const at::Tensor& w, size_t, const at::Tensor& r) {
  return reads_memory_of(w, r, true);
}
inline bool element_reads_memory_of(const at::Tensor& w, size_t, const std::optional<at::Tensor>& r) {
  return reads_memory_of(w, r, true);
}
inline bool element_reads_memory_of(const at::Tensor& w, size_t i, at::TensorList r) {
  return i < r.size() && reads_memory_of(w, r[i], true);
}
template <size_t N, class... Reads>
bool written_lists_overlap(const std::array<at::TensorList, N>& written, const Reads&... reads) {
  for (size_t k = 0; k < N; ++k)
    for (size_t i = 0; i < written[k].size(); ++i) {
      const at::Tensor& w = written[k][i];
      if (!w.defined()) continue;
      if (at::has_internal_overlap(w) == at::MemOverlap::Yes) return true;
      for (size_t l = 0; l < N; ++l)
        if (l != k && i < written[l].size() && reads_memory_of(w, written[l][i], false)) return true;
      if ((element_reads_memory_of(w, i, reads) || ...)) return true;
    }
  return false;
}

inline bool contiguous(const at::Tensor& t) { return t.is_contiguous(); }
inline bool contiguous(const std::optional<at::Tensor>& t) {
  return !t.has_value() || !t->defined() || t->is_contiguous();
}

// The device guard of a kernel: dipu:device current for the call, the previous device back after.
class DeviceScope {
 public:
  explicit DeviceScope(c10::DeviceIndex device) : impl_(c10::impl::getDeviceGuardImpl(kDipu)) {
    previous_ = impl_->getDevice().index();
    if (previous_ != device) impl_->uncheckedSetDevice(c10::Device(kDipu, device));
    device_ = device;
  }
  ~DeviceScope() {
    if (previous_ != device_) impl_->uncheckedSetDevice(c10::Device(kDipu, previous_));
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  const c10::impl::DeviceGuardImplInterface* impl_;
  c10::DeviceIndex previous_, device_;
};

// A new contiguous output from the caching allocator (the core registers it for PrivateUse1), on the
// current device, which the kernel's DeviceScope has made `device`.
inline at::Tensor empty(c10::IntArrayRef shape, at::ScalarType dtype) {
  static c10::Allocator* allocator = c10::GetAllocator(kDipu);
  return at::detail::empty_generic(shape, allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype,
                                   std::nullopt);
}

// A new output laid out as the meta kernel laid it out (Note [Meta shapes in C++]); undefined when unwanted.
inline at::Tensor empty(const rules::Spec& spec) {
  if (!spec.wanted) return at::Tensor();
  if (!spec.strided) return empty(spec.shape, spec.dtype);
  static c10::Allocator* allocator = c10::GetAllocator(kDipu);
  return at::detail::empty_strided_generic(spec.shape, spec.strides, allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), spec.dtype);
}

// The meta twin of a tensor argument: same sizes, strides and dtype, no memory; a CPU tensor (a wrapped
// number, a CPU scalar) passes as it is, as the meta kernels take it beside meta tensors.
inline at::Tensor meta(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kDipu) return t;
  return at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type());
}
inline std::optional<at::Tensor> meta(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional<at::Tensor>(meta(*t)) : std::nullopt;
}

inline void fill_spec(rules::Spec& spec, const at::Tensor& result) {
  spec.wanted = result.defined();
  if (!spec.wanted) return;
  spec.shape.assign(result.sizes().begin(), result.sizes().end());
  spec.strides.assign(result.strides().begin(), result.strides().end());
  spec.strided = !result.is_contiguous();
  spec.dtype = result.scalar_type();
}
template <size_t N>
inline void fill_specs(std::array<rules::Spec, N>& specs, const at::Tensor& result) {
  fill_spec(specs[0], result);
}
template <size_t N, class... Ts>
inline void fill_specs(std::array<rules::Spec, N>& specs, const std::tuple<Ts...>& results) {
  size_t i = 0;
  std::apply([&](const auto&... r) { (fill_spec(specs[i++], r), ...); }, results);
}

// Note [Elementwise strides in C++]
// A functional elementwise kernel (the ELEMENTWISE stride rule of Note [Output strides] in dipu/ops/meta_rules.py)
// given a non-contiguous operand lays out its output as TensorIterator does on the CPU: a channels_last input keeps
// channels_last, and an expanded gradient (mean's backward) gives a contiguous output. The Python rule reads
// those strides off TensorIterator run on float32 meta twins of the tensor operands, in schema order and without
// the wrapped numbers (which reach Python kernels as numbers); this does the same without the dispatcher: the
// iterator allocates its meta output with the strides it chose. No operand, more than three (the Python rule has
// no iterator for them) or shapes that do not broadcast: false, and the Python path takes the call.
inline void add_operand(at::TensorIteratorConfig& config, const at::Tensor& t, int& count) {
  if (!t.defined() || is_number(t)) return;
  config.add_owned_const_input(at::detail::empty_strided_meta(t.sizes(), t.strides(), at::kFloat));
  ++count;
}
inline void add_operand(at::TensorIteratorConfig& config, const std::optional<at::Tensor>& t, int& count) {
  if (t.has_value()) add_operand(config, *t, count);
}
template <class... Tensors>
bool elementwise_strides(rules::Spec& spec, const Tensors&... operands) {
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(false).check_all_same_dtype(false).add_owned_output(at::Tensor());
  int count = 0;
  (add_operand(config, operands, count), ...);
  if (count == 0 || count > 3) return false;
  try {
    const at::TensorIterator iter = config.build();
    const at::Tensor& out = iter.output(0);
    if (!out.sizes().equals(spec.shape)) return false;
    spec.strides.assign(out.strides().begin(), out.strides().end());
    spec.strided = true;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Whether the tensor operands share their sizes and strides (Rule.alike in dipu/ops/shape_rules.py): then the order
// TensorIterator takes them in does not change the strides it gives the output.
template <class... Tensors>
bool alike(const at::Tensor& first, const Tensors&... rest) {
  return ((rest.sizes().equals(first.sizes()) && rest.strides().equals(first.strides())) && ...);
}

// The outputs' specs from the kernel's own op on meta twins (Note [Meta shapes in C++]); false where the
// meta kernel refuses the arguments (the Python path raises the error), or there is none (for good).
template <size_t N, class MetaCall>
bool meta_specs(Kernel& k, std::array<rules::Spec, N>& specs, MetaCall&& call) {
  try {
    fill_specs(specs, call());
    return true;
  } catch (const c10::NotImplementedError&) {
    k.no_meta.store(true, std::memory_order_relaxed);
  } catch (const std::exception&) {
  }
  return false;
}

inline diopiConstTensorHandle_t c_in(const at::Tensor& t) { return diopi::handle(t); }
inline diopiConstTensorHandle_t c_in(const std::optional<at::Tensor>& t) {
  return t.has_value() ? diopi::handle(*t) : nullptr;
}
inline diopiTensorHandle_t c_out(at::Tensor& t) { return diopi::handle(t); }
// An output the schema does not annotate (``writes:``): DIOPI writes it, as the Python wrapper lets it.
inline diopiTensorHandle_t c_out(const at::Tensor& t) { return diopi::handle(const_cast<at::Tensor&>(t)); }

// Note [Scalars in C calls]: floating scalars travel as float64, integral ones as int64 and bools as
// bool with ival 0/1, as the core's diopi::scalar does (written here again, inline, because the
// wrapper extension links no symbol of the core).
inline diopiScalar_t scalar(const at::Scalar& value) {
  diopiScalar_t result{};
  if (value.isFloatingPoint()) {
    result.stype = diopi_dtype_float64;
    result.fval = value.toDouble();
  } else if (value.isBoolean()) {
    result.stype = diopi_dtype_bool;
    result.ival = value.toBool() ? 1 : 0;
  } else {
    TORCH_CHECK(value.isIntegral(false), "dipu: a complex scalar cannot cross the DIOPI C ABI");
    result.stype = diopi_dtype_int64;
    result.ival = value.toLong();
  }
  return result;
}
class ScalarArg {
 public:
  explicit ScalarArg(const at::Scalar& value) : value_(scalar(value)), present_(true) {}
  explicit ScalarArg(const std::optional<at::Scalar>& value)
      : value_(value.has_value() ? scalar(*value) : diopiScalar_t{}), present_(value.has_value()) {}
  const diopiScalar_t* get() const { return present_ ? &value_ : nullptr; }

 private:
  diopiScalar_t value_;
  bool present_;
};

// A NUL-terminated copy of a string argument (string_view need not be terminated).
class TextArg {
 public:
  explicit TextArg(c10::string_view text) : text_(text), present_(true) {}
  explicit TextArg(const std::optional<c10::string_view>& text)
      : text_(text.has_value() ? std::string(*text) : std::string()), present_(text.has_value()) {}
  const char* get() const { return present_ ? text_.c_str() : nullptr; }

 private:
  std::string text_;
  bool present_;
};

// A dtype argument as DIOPI's enum; an optional one by pointer, NULL for None.
class DtypeArg {
 public:
  explicit DtypeArg(at::ScalarType type) : value_(diopi::diopi_dtype(type)), present_(true) {}
  explicit DtypeArg(const std::optional<at::ScalarType>& type)
      : value_(type.has_value() ? diopi::diopi_dtype(*type) : diopi_dtype_unsupported), present_(type.has_value()) {}
  diopiDtype_t value() const { return value_; }
  const diopiDtype_t* pointer() const { return present_ ? &value_ : nullptr; }

 private:
  diopiDtype_t value_;
  bool present_;
};

// A Generator? argument: the dipu generator given, or the device's default one where none was (as the Python
// trampoline passes it, Note [The C form of a proto function]); a generator of another device takes the
// Python path (dipu_generator).
class GeneratorArg {
 public:
  GeneratorArg(const std::optional<at::Generator>& given, c10::DeviceIndex device)
      : generator_(given.has_value() && given->defined()
                       ? *given
                       : at::globalContext().defaultGenerator(c10::Device(kDipu, device))) {}
  diopiGeneratorHandle_t get() { return diopi::handle(generator_); }

 private:
  at::Generator generator_;
};
inline bool dipu_generator(const std::optional<at::Generator>& g) {
  return !g.has_value() || !g->defined() || g->device().type() == kDipu;
}

inline int64_t c_integer(int64_t value) { return value; }
inline int64_t c_integer(const c10::SymInt& value) { return value.guard_int(__FILE__, __LINE__); }
inline double c_real(double value) { return value; }
// A Scalar where DIOPI's parameter is a float (baddbmm's beta and alpha for diopiBaddbmm's), as the Python trampoline
// passes it: float(value).
inline double c_real(const at::Scalar& value) {
  TORCH_CHECK(!value.isComplex(), "dipu: a complex scalar cannot cross the DIOPI C ABI as a float");
  return value.toDouble();
}
inline bool c_boolean(bool value) { return value; }
inline diopiSize_t c_sizes(c10::IntArrayRef values) { return diopi::size(values); }
inline diopiSize_t c_sizes(at::OptionalIntArrayRef values) {
  return values.has_value() ? diopi::size(*values) : diopiSize_t{nullptr, 0};
}
inline diopiSize_t c_sizes(c10::SymIntArrayRef values) { return diopi::size(C10_AS_INTARRAYREF_SLOW(values)); }
inline diopiSize_t c_sizes(at::OptionalSymIntArrayRef values) {
  return values.has_value() ? c_sizes(*values) : diopiSize_t{nullptr, 0};
}
// An optional number DIOPI takes by pointer: the address of the kernel's own value, NULL for None.
template <class T>
inline const T* pointer_to(const std::optional<T>& value) {
  return value.has_value() ? &*value : nullptr;
}

// A Tensor[] as the array of handles DIOPI takes (the elements' addresses: the list outlives the call),
// as a const or a written list, whichever the function declares.
class HandleList {
 public:
  explicit HandleList(at::TensorList list) {
    handles_.reserve(list.size());
    for (const at::Tensor& t : list) handles_.push_back(const_cast<at::Tensor*>(&t));
  }
  // Tensor?[]: a c10::List holds IValues, not tensors to point at, so the list keeps its own references (made
  // whole before any address is taken); None is the null handle.
  explicit HandleList(const c10::List<std::optional<at::Tensor>>& list) {
    kept_.reserve(list.size());
    for (const std::optional<at::Tensor>& t : list) kept_.push_back(t.has_value() ? *t : at::Tensor());
    handles_.reserve(kept_.size());
    for (at::Tensor& t : kept_) handles_.push_back(t.defined() ? &t : nullptr);
  }
  struct Data {
    void** p;
    operator diopiTensorHandle_t*() const { return reinterpret_cast<diopiTensorHandle_t*>(p); }
    operator diopiConstTensorHandle_t*() const { return static_cast<diopiConstTensorHandle_t*>(static_cast<void*>(p)); }
  };
  Data data() { return Data{handles_.empty() ? nullptr : handles_.data()}; }  // NULL for an empty list
  int64_t size() const { return static_cast<int64_t>(handles_.size()); }

 private:
  c10::SmallVector<void*, 16> handles_;  // no allocation for a short list (a cat's parts)
  c10::SmallVector<at::Tensor, 4> kept_;  // a Tensor?[]'s tensors
};

// The outputs a DIOPI function allocates (Note [Outputs a function allocates, in C++] in
// dest/cpp_wrappers.py): null handles for it to fill with tensors its call's context holds.
class Allocated {
 public:
  explicit Allocated(int64_t count) : handles_(static_cast<size_t>(count), nullptr) {}
  diopiTensorHandle_t* data() { return handles_.data(); }
  bool complete() const {
    for (diopiTensorHandle_t h : handles_)
      if (h == nullptr) return false;
    return true;
  }
  at::Tensor tensor() const { return *reinterpret_cast<const at::Tensor*>(handles_[0]); }
  std::vector<at::Tensor> tensors() const {
    std::vector<at::Tensor> result;
    result.reserve(handles_.size());
    for (diopiTensorHandle_t h : handles_) result.push_back(*reinterpret_cast<const at::Tensor*>(h));
    return result;
  }

 private:
  c10::SmallVector<diopiTensorHandle_t, 16> handles_;
};

class ScalarList {
 public:
  explicit ScalarList(at::ArrayRef<at::Scalar> list) {
    values_.reserve(list.size());
    for (const at::Scalar& value : list) values_.push_back(scalar(value));
  }
  const diopiScalar_t* data() const { return values_.data(); }
  int64_t size() const { return static_cast<int64_t>(values_.size()); }

 private:
  std::vector<diopiScalar_t> values_;
};

inline diopiReduction_t c_reduction(int64_t value) { return static_cast<diopiReduction_t>(value); }
inline diopiRoundMode_t c_rounding_mode(const std::optional<c10::string_view>& mode) {
  if (!mode.has_value()) return RoundModeNone;
  if (*mode == "trunc") return RoundModeTrunc;
  TORCH_CHECK(*mode == "floor", "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode,
              "'");
  return RoundModeFloor;
}

// ---- the extension's table ------------------------------------------------------------------------

// Note [Boxed calls of a C++ wrapper]
// The dispatcher calls a kernel unboxed (typed arguments: most at:: calls) or boxed (a stack of IValues: an op
// through torch.ops.aten with no autograd kernel in between, as in inference mode, and every op whose autograd kernel
// is torch's boxed autogradNotImplementedFallback: the ops without a derivative formula, such as bitwise_not (a
// mask's ~), floor_divide, the random ops and native_group_norm_backward, which autograd's own GroupNorm backward
// calls). A wrapper is registered with the dispatcher directly (register_entry), as an ``Unboxed`` functor: with its
// C++ signature, which the dispatcher checks against the op's other kernels, and no schema inferred from the C++
// types; its boxed adapter is c10's make_boxed_from_unboxed_functor, one per signature (make_kernel), which unpacks the
// stack into the typed call, so a boxed call takes the C++ path as an unboxed one does. Until 2026-12-02 every
// Unboxed functor shared one boxed adapter that handed the stack to the Python wrapper, to spare those adapters'
// compile time: it was 1.4 s of each generated part's 14 (2 of 3 parts on 2 cores), and it had left every call of
// those ops on the Python path, GroupNorm's backward among them.
template <class Signature>
struct Unboxed;
template <class Return, class... Args>
struct Unboxed<Return(Args...)> final : c10::OperatorKernel {
  Unboxed(Kernel& kernel, Return (*function)(Kernel&, Args...)) : kernel(kernel), function(function) {}
  Return operator()(Args... args) { return function(kernel, std::forward<Args>(args)...); }
  Kernel& kernel;
  Return (*function)(Kernel&, Args...);
};

// Any wrapper, as the table keeps it: a function pointer cast back to its own type to be registered.
using AnyFunction = void (*)();

struct Entry {
  const char* op;
  Kernel* kernel;
  // make_kernel<its signature>
  c10::KernelFunction (*make)(Kernel&, AnyFunction);
  c10::impl::CppSignature (*signature)();
  AnyFunction function;
};

// The dispatcher's kernel of a wrapper of this signature (the op's, without the Kernel& a wrapper takes first);
// instantiated once per signature, not per wrapper, and as little as can be (register_entry does the rest).
template <class Return, class... Args>
c10::KernelFunction make_kernel(Kernel& kernel, AnyFunction function) {
  using Functor = Unboxed<Return(Args...)>;
  return c10::KernelFunction::makeFromUnboxedFunctor<false, Functor>(
      std::make_unique<Functor>(kernel, reinterpret_cast<Return (*)(Kernel&, Args...)>(function)));
}
template <class Return, class... Args>
c10::impl::CppSignature signature() {
  return c10::impl::CppSignature::make<Return(Args...)>();
}
// A row of a table: `function` serves `op` with `kernel`, which it is given first (Note [Wrappers sharing a body] in
// scripts/autogen/dest/cpp_wrappers.py).
template <class Return, class... Args>
Entry entry(const char* op, Kernel& kernel, Return (*function)(Kernel&, Args...)) {
  return {op, &kernel, &make_kernel<Return, Args...>, &signature<Return, Args...>,
          reinterpret_cast<AnyFunction>(function)};
}

// Registers an entry's wrapper for the op `name` (its schema's) on PrivateUse1, over what is registered there, until
// the handle is destroyed: the dispatcher checks its C++ signature against the op's other kernels.
c10::RegistrationHandleRAII register_entry(const Entry& entry, const c10::OperatorName& name);

// A table of kernels: each generated part and impl_kernels.cpp define one, which adds its entries to the
// extension's list while the library loads (Note [The wrappers in parts] in scripts/autogen/dest/cpp_wrappers.py).
struct Table {
  Table(const Entry* entries, size_t count);
};

}  // namespace dipu::cwrap
