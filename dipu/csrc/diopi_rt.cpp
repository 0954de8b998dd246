// The DIOPI runtime functions, exported from the native core with C linkage, and the loader of a
// C op library (DIPU_DIOPI_IMPL=<path to .so>).
//
// Note [DIOPI handles]
// A tensor handle is the address of an at::Tensor that the caller (a generated C++ wrapper, or the
// Python trampoline's frame in diopi_call.cpp) owns until the call returns; the runtime functions
// read it through that pointer and never copy it, so a handle costs nothing to make. A context
// handle is the address of the call's dipu::diopi::Context: the device the call runs on, and the
// tensors diopiRequireTensor/Buffer made for it, which it keeps alive (in a list: growing it never
// moves the tensors already handed out) until the caller has taken the results. The stream is not
// stored: it is the thread's current stream on that device when the library asks, which is the
// stream the call runs on. A generator handle is the address of an at::Generator the caller owns.
//
// Note [Loading a C op library]
// Python loads the native core with RTLD_LOCAL, so its exported diopi* runtime functions are not
// in the global scope where the dynamic linker resolves a library's undefined symbols. Before the
// C library is opened, the core re-opens itself with RTLD_NOLOAD | RTLD_GLOBAL (finding its own
// path with dladdr), which promotes the already loaded core to the global scope without loading a
// second copy; the core builds with -fvisibility=hidden, so only the DIOPI runtime functions (and
// the module's init function) become visible. The library is then opened with RTLD_NOW, so an
// unresolved symbol is reported at load time with its name instead of crashing at the first call.
#include "diopi_rt.h"

#include "core.h"

#include <ATen/record_function.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <mutex>

namespace dipu::diopi {
namespace {

std::unique_ptr<CLibrary> g_library;
std::mutex g_library_mutex;

// Runs `body`, turning any C++ exception into diopiErrorOccurred: nothing may unwind into C.
template <typename Body>
diopiError_t guarded(Body&& body) noexcept {
  try {
    body();
    return diopiSuccess;
  } catch (...) {
    return diopiErrorOccurred;
  }
}

c10::Device device_for(diopiDevice_t device, c10::DeviceIndex index) {
  TORCH_CHECK(device == diopi_host || device == diopi_device, "DIOPI: unknown diopiDevice_t ",
              static_cast<int>(device));
  return device == diopi_host ? c10::Device(c10::kCPU) : c10::Device(c10::kPrivateUse1, index);
}

}  // namespace

at::ScalarType aten_dtype(diopiDtype_t type) { return diopi_dtypes::to_aten(type, "DIOPI"); }

// Note [Scalars in C calls]
// Floating scalars travel as float64, integral ones as int64, bools as bool (ival 0/1): a C library reads
// the one field of the kind, whatever the dtype of the tensors the scalar goes with. The C++ wrappers
// (dipu/kernels/cpp/wrapper_support.h) write scalars this way and the torch library in C++
// (diopi_impl/torch_cpp/support.h) reads them so, each with an inline copy of the rule.
diopiScalar_t scalar(const at::Scalar& value) {
  diopiScalar_t result{};
  if (value.isBoolean()) {
    result.stype = diopi_dtype_bool;
    result.ival = value.toBool();
  } else if (value.isIntegral(false)) {
    result.stype = diopi_dtype_int64;
    result.ival = value.toLong();
  } else {
    TORCH_CHECK(!value.isComplex(), "DIOPI: a complex Scalar has no diopiScalar_t");
    result.stype = diopi_dtype_float64;
    result.fval = value.toDouble();
  }
  return result;
}

const char* status_name(diopiError_t status) {
  switch (status) {
    case diopiSuccess: return "diopiSuccess";
    case diopiErrorOccurred: return "diopiErrorOccurred";
    case diopiNotInited: return "diopiNotInited";
    case diopi5DNotSupported: return "diopi5DNotSupported";
    case diopiNoImplement: return "diopiNoImplement";
    case diopiForceFallbackToCPU: return "diopiForceFallbackToCPU";
    case diopiDtypeNotSupported: return "diopiDtypeNotSupported";
    default:
      return status > diopiNotInited && status < diopi5DNotSupported ? "diopiNoRegistered...Function"
                                                                     : "an unknown diopiError_t";
  }
}

void* CLibrary::find(const char* diopi_name) const { return dlsym(dl, diopi_name); }

std::string CLibrary::last_error_text() const {
  const char* text = last_error ? last_error() : nullptr;
  return text ? text : "";
}

const CLibrary* c_library() { return g_library.get(); }

const CLibrary& load_c_library(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_library_mutex);
  if (g_library && g_library->path == path) return *g_library;
  // Note [Loading a C op library]: the runtime functions into the global scope first.
  Dl_info self{};
  TORCH_CHECK(dladdr(reinterpret_cast<void*>(&diopiGetTensorData), &self) && self.dli_fname,
              "dipu: cannot find the native core's own file (dladdr)");
  void* core = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  TORCH_CHECK(core, "dipu: cannot make the DIOPI runtime functions of ", self.dli_fname,
              " visible to C op libraries: ", dlerror());
  void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* reason = dlerror();
    TORCH_CHECK(false, "cannot load the C op library ", path, ": ", reason ? reason : "dlopen failed");
  }
  auto library = std::make_unique<CLibrary>();
  library->path = path;
  library->dl = dl;
  library->last_error = reinterpret_cast<const char* (*)()>(dlsym(dl, "diopiGetLastErrorString"));
  // A library replaced by another stays open: kernels registered before may still hold its
  // functions until they are re-registered.
  g_library = std::move(library);
  return *g_library;
}

bool check_status_slow(diopiError_t status, const char* diopi_name) {
  if (status == diopiSuccess) return true;
  if (status == diopiForceFallbackToCPU || status == diopiNoImplement) return false;
  std::string message = g_library ? g_library->last_error_text() : "";
  TORCH_CHECK(false, diopi_name, " failed with ", status_name(status), " (", static_cast<int>(status), ")",
              message.empty() ? "" : ": ", message);
}

}  // namespace dipu::diopi

// ---- the exported runtime functions (dipu/include/diopi/diopirt.h) ---------------------------
using dipu::diopi::context;
using dipu::diopi::tensor;

extern "C" {

__attribute__((visibility("default"))) const char* diopiGetVersion() { return "DIOPI 1.0.0 (dipu runtime)"; }

diopiError_t diopiGetTensorData(diopiTensorHandle_t th, void** data) {
  if (!th || !data) return diopiErrorOccurred;
  *data = tensor(th).data_ptr();
  return diopiSuccess;
}

diopiError_t diopiGetTensorDataConst(diopiConstTensorHandle_t th, const void** data) {
  if (!th || !data) return diopiErrorOccurred;
  *data = tensor(th).const_data_ptr();
  return diopiSuccess;
}

diopiError_t diopiGetTensorShape(diopiConstTensorHandle_t th, diopiSize_t* size) {
  if (!th || !size) return diopiErrorOccurred;
  *size = dipu::diopi::size(tensor(th).sizes());
  return diopiSuccess;
}

diopiError_t diopiGetTensorStride(diopiConstTensorHandle_t th, diopiSize_t* stride) {
  if (!th || !stride) return diopiErrorOccurred;
  *stride = dipu::diopi::size(tensor(th).strides());
  return diopiSuccess;
}

diopiError_t diopiGetTensorDtype(diopiConstTensorHandle_t th, diopiDtype_t* dtype) {
  if (!th || !dtype) return diopiErrorOccurred;
  *dtype = dipu::diopi::diopi_dtype(tensor(th).scalar_type());
  return diopiSuccess;
}

diopiError_t diopiGetTensorDevice(diopiConstTensorHandle_t th, diopiDevice_t* device) {
  if (!th || !device) return diopiErrorOccurred;
  *device = tensor(th).is_privateuseone() ? diopi_device : diopi_host;
  return diopiSuccess;
}

diopiError_t diopiGetTensorNumel(diopiConstTensorHandle_t th, int64_t* numel) {
  if (!th || !numel) return diopiErrorOccurred;
  *numel = tensor(th).numel();
  return diopiSuccess;
}

diopiError_t diopiGetTensorElemSize(diopiConstTensorHandle_t th, int64_t* itemsize) {
  if (!th || !itemsize) return diopiErrorOccurred;
  *itemsize = static_cast<int64_t>(tensor(th).element_size());
  return diopiSuccess;
}

diopiError_t diopiGetTensorStoragePtr(diopiConstTensorHandle_t th, void** storage) {
  if (!th || !storage) return diopiErrorOccurred;
  const at::Tensor& t = tensor(th);
  *storage = t.has_storage() ? t.storage().mutable_data() : nullptr;
  return diopiSuccess;
}

diopiError_t diopiGetTensorStorageOffset(diopiConstTensorHandle_t th, int64_t* offset) {
  if (!th || !offset) return diopiErrorOccurred;
  *offset = tensor(th).storage_offset();
  return diopiSuccess;
}

diopiError_t diopiGetTensorStorageNbytes(diopiConstTensorHandle_t th, size_t* nbytes) {
  if (!th || !nbytes) return diopiErrorOccurred;
  const at::Tensor& t = tensor(th);
  *nbytes = t.has_storage() ? t.storage().nbytes() : 0;
  return diopiSuccess;
}

diopiError_t diopiGetTensorDeviceIndex(diopiConstTensorHandle_t th, diopiDeviceIndex_t* index) {
  if (!th || !index) return diopiErrorOccurred;
  const at::Tensor& t = tensor(th);
  *index = static_cast<diopiDeviceIndex_t>(t.is_privateuseone() ? t.get_device() : -1);
  return diopiSuccess;
}

// dipu has no sparse tensors (Note in diopirt.h).
diopiError_t diopiGetTensorCrowIndices(diopiConstTensorHandle_t, diopiConstTensorHandle_t*) {
  return diopiErrorOccurred;
}
diopiError_t diopiGetTensorColIndices(diopiConstTensorHandle_t, diopiConstTensorHandle_t*) {
  return diopiErrorOccurred;
}
diopiError_t diopiGetTensorValues(diopiConstTensorHandle_t, diopiConstTensorHandle_t*) { return diopiErrorOccurred; }
diopiError_t diopiIsTensorSparse(diopiConstTensorHandle_t th, bool* is_sparse) {
  if (!th || !is_sparse) return diopiErrorOccurred;
  *is_sparse = tensor(th).is_sparse() || tensor(th).is_sparse_csr();
  return diopiSuccess;
}

diopiError_t diopiGetCurrentDeviceIndex(diopiDeviceIndex_t* index) {
  if (!index) return diopiErrorOccurred;
  *index = static_cast<diopiDeviceIndex_t>(dipu::current_device());
  return diopiSuccess;
}

diopiError_t diopiGetStream(diopiContextHandle_t ctx, diopiStreamHandle_t* stream) {
  if (!ctx || !stream) return diopiErrorOccurred;
  return dipu::diopi::guarded([&] { *stream = dipu::stream_native_handle(dipu::current_stream(context(ctx).device)); });
}

diopiError_t diopiRequireTensor(diopiContextHandle_t ctx, diopiTensorHandle_t* out, const diopiSize_t* size,
                                const diopiSize_t* stride, const diopiDtype_t dtype, const diopiDevice_t device) {
  if (!ctx || !out || !size || (size->len && !size->data)) return diopiErrorOccurred;
  if (stride && (stride->len != size->len || (stride->len && !stride->data))) return diopiErrorOccurred;
  return dipu::diopi::guarded([&] {
    auto& call = context(ctx);
    auto options =
        at::TensorOptions(dipu::diopi::aten_dtype(dtype)).device(dipu::diopi::device_for(device, call.device));
    c10::IntArrayRef sizes(size->data, size->len);
    call.required.push_back(stride ? at::empty_strided(sizes, c10::IntArrayRef(stride->data, stride->len), options)
                                   : at::empty(sizes, options));
    *out = dipu::diopi::handle(call.required.back());
  });
}

diopiError_t diopiRequireBuffer(diopiContextHandle_t ctx, diopiTensorHandle_t* out, int64_t num_bytes,
                                diopiDevice_t device) {
  if (!ctx || !out || num_bytes < 0) return diopiErrorOccurred;
  return dipu::diopi::guarded([&] {
    auto& call = context(ctx);
    call.required.push_back(
        at::empty({num_bytes}, at::TensorOptions(at::kByte).device(dipu::diopi::device_for(device, call.device))));
    *out = dipu::diopi::handle(call.required.back());
  });
}

diopiError_t diopiGeneratorGetState(diopiContextHandle_t ctx, diopiConstGeneratorHandle_t th,
                                    diopiTensorHandle_t* data) {
  if (!ctx || !th || !data) return diopiErrorOccurred;
  return dipu::diopi::guarded([&] {
    auto& generator = *const_cast<at::Generator*>(reinterpret_cast<const at::Generator*>(th));
    std::lock_guard<std::mutex> lock(generator.mutex());
    auto& call = context(ctx);
    call.held.push_back(generator.get_state());
    *data = dipu::diopi::handle(call.held.back());
  });
}

diopiError_t diopiGeneratorSetState(diopiGeneratorHandle_t th, diopiConstTensorHandle_t state) {
  if (!th || !state) return diopiErrorOccurred;
  return dipu::diopi::guarded([&] {
    auto& generator = *reinterpret_cast<at::Generator*>(th);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(tensor(state));
  });
}

diopiError_t diopiGeneratorGetSeedAndOffset(diopiGeneratorHandle_t th, uint64_t* seed, uint64_t* offset) {
  if (!th || !seed || !offset) return diopiErrorOccurred;
  return dipu::diopi::guarded([&] {  // a generator without a Philox offset (the CPU's) answers an error
    auto& generator = *reinterpret_cast<at::Generator*>(th);
    std::lock_guard<std::mutex> lock(generator.mutex());
    *offset = generator.get_offset();
    *seed = generator.current_seed();
  });
}

diopiError_t diopiGeneratorSetSeedAndOffset(diopiGeneratorHandle_t th, uint64_t seed, uint64_t offset) {
  if (!th) return diopiErrorOccurred;
  return dipu::diopi::guarded([&] {
    auto& generator = *reinterpret_cast<at::Generator*>(th);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_current_seed(seed);
    generator.set_offset(offset);
  });
}

// dipu's own runtime function (Note [Native generators]): where the dipu generator th draws, the generator of
// the native alias device it owns. A library that computes on native aliases (torch_cpp) draws from it as the
// Python torch library draws from native_generator, so both give the same numbers.
diopiError_t dipuGetNativeGenerator(diopiConstGeneratorHandle_t th, diopiGeneratorHandle_t* native) {
  if (!th || !native) return diopiErrorOccurred;
  return dipu::diopi::guarded([&] {
    const at::Generator& owner = dipu::native_generator(*reinterpret_cast<const at::Generator*>(th));
    *native = reinterpret_cast<diopiGeneratorHandle_t>(const_cast<at::Generator*>(&owner));
  });
}

namespace {
// Whether `result` holds memory of its own on the native alias device of the call's dipu device: not a view,
// not shared, not an alias over dipu memory (whose DataPtr owns nothing, so has no deleter).
bool owns_native_memory(const dipu::diopi::Context& ctx, const at::Tensor& result) {
  if (!result.defined() || !dipu::vendor().has_alias || result.layout() != at::kStrided) return false;
  const c10::DeviceType alias = dipu::vendor().alias_type;
  const c10::Storage& theirs = result.storage();
  return result.device() == c10::Device(alias, alias == c10::DeviceType::CPU ? -1 : ctx.device) &&
         result.use_count() == 1 && theirs.use_count() == 1 && result.storage_offset() == 0 &&
         theirs.data_ptr().get_deleter() != nullptr;
}

// dipu's own runtime function (Note [Taken results] in allocator.cpp): `out`, an output the caller allocated
// for this call alone (Context::fresh), takes the memory of `result`, a tensor of the native alias device laid
// out exactly as out, whose memory nothing else refers to; out's own block goes back to the cache. Anything
// else (another output, another layout or dtype or device, memory a view or an alias of dipu memory, the memory
// cap) answers diopiErrorOccurred and changes nothing: the library then copies.
bool takes(const dipu::diopi::Context& ctx, at::Tensor& out, const at::Tensor& result) {
  const bool fresh = std::find(ctx.fresh.begin(), ctx.fresh.end(), &out) != ctx.fresh.end();
  if (!fresh || !out.defined() || !owns_native_memory(ctx, result)) return false;
  const c10::Storage& mine = out.storage();
  if (out.device() != c10::Device(c10::DeviceType::PrivateUse1, ctx.device) || out.use_count() != 1 ||
      mine.use_count() != 1 || out.storage_offset() != 0 ||
      mine.data_ptr().get_deleter() != dipu::device_allocator()->raw_deleter() ||
      result.storage().nbytes() < mine.nbytes())
    return false;
  if (result.scalar_type() != out.scalar_type() || result.sizes() != out.sizes() || result.strides() != out.strides() ||
      result.is_conj() != out.is_conj() || result.is_neg() != out.is_neg())
    return false;
  c10::DataPtr memory = dipu::take_memory(result.storage(), ctx.device);
  if (!memory) return false;
  mine.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(memory));
  return true;
}

// dipu's own runtime function (Note [Taken results]): a new output of the call, kept alive by the context as
// diopiRequireTensor's are, over the memory of `result`, a contiguous tensor of the native alias device whose
// memory nothing else refers to. Anything else answers diopiErrorOccurred and changes nothing: the library then
// requires a tensor and copies.
bool requires_taken(dipu::diopi::Context& ctx, diopiTensorHandle_t* out, const at::Tensor& result) {
  if (!owns_native_memory(ctx, result) || !result.is_contiguous() || result.is_conj() || result.is_neg()) return false;
  const size_t nbytes = result.storage().nbytes();
  c10::DataPtr memory = dipu::take_memory(result.storage(), ctx.device);
  if (!memory) return false;
  at::Tensor taken = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(c10::Storage::use_byte_size_t(), nbytes, std::move(memory), dipu::device_allocator(),
                   /*resizable=*/true),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), result.dtype());
  taken.unsafeGetTensorImpl()->set_sizes_contiguous(result.sizes());
  ctx.required.push_back(std::move(taken));
  *out = dipu::diopi::handle(ctx.required.back());
  return true;
}
}  // namespace

diopiError_t dipuRequireResult(diopiContextHandle_t ctx, diopiTensorHandle_t* out, diopiConstTensorHandle_t result) {
  if (!ctx || !out || !result) return diopiErrorOccurred;
  bool taken = false;
  const diopiError_t status =
      dipu::diopi::guarded([&] { taken = requires_taken(context(ctx), out, dipu::diopi::tensor(result)); });
  return status == diopiSuccess && taken ? diopiSuccess : diopiErrorOccurred;
}

diopiError_t dipuTakeResult(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t result) {
  if (!ctx || !out || !result) return diopiErrorOccurred;
  bool taken = false;
  const diopiError_t status =
      dipu::diopi::guarded([&] { taken = takes(context(ctx), dipu::diopi::tensor(out), dipu::diopi::tensor(result)); });
  return status == diopiSuccess && taken ? diopiSuccess : diopiErrorOccurred;
}

// A library's named range shows in torch.profiler as a user-scope record function (on the CPU
// rows, inside the op's own range); *record is null while no profiler is recording, so a library
// pays one check.
diopiError_t diopiRecordStart(const char* record_name, void** record) {
  if (!record_name || !record) return diopiErrorOccurred;
  *record = nullptr;
  return dipu::diopi::guarded([&] {
    if (!at::hasCallbacks()) return;
    auto range = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    if (range->isActive()) {
      range->before(record_name);
      *record = range.release();
    }
  });
}

diopiError_t diopiRecordEnd(void** record) {
  if (!record) return diopiErrorOccurred;
  delete static_cast<at::RecordFunction*>(*record);  // ends the range
  *record = nullptr;
  return diopiSuccess;
}

}  // extern "C"
