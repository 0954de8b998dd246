// The wrapper extension's interface: installing the generated kernels over the Python wrappers (Note [Generated
// C++ wrappers] in scripts/autogen/dest/cpp_wrappers.py) and reading their counters, as C functions that
// dipu/kernels/cpp_wrappers.py calls through ctypes (Note [The C++ wrappers' way to Python] in
// dipu/csrc/python_wrapper_call.h).
#include "wrapper_support.h"

#include <ATen/native/TypeProperties.h>

#include <algorithm>
#include <cstring>
#include <exception>

namespace dipu::cwrap {
namespace {

// What install() registered: the dispatcher's registrations (Note [Boxed calls of a C++ wrapper]), whose
// destruction gives the ops back to the kernels registered before them (the Python wrappers), as Note [Autocompare
// as a switch] describes.
struct Installed {
  std::vector<c10::RegistrationHandleRAII> registrations;
  std::vector<Kernel*> kernels;
};
Installed* g_installed = nullptr;

void uninstall() {
  if (g_installed == nullptr) return;
  g_installed->registrations.clear();
  for (Kernel* kernel : g_installed->kernels) {
    kernel->function = nullptr;
    kernel->scalar_function = nullptr;
    kernel->python_kernel = nullptr;
    kernel->schema = nullptr;
  }
  delete g_installed;
  g_installed = nullptr;
}

// Installing overrides the Python wrappers on purpose: the dispatcher's "Overriding a previously registered
// kernel" warning would only alarm.
struct Quiet : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

const c10::FunctionSchema& schema_of(const std::string& op) {
  auto dot = op.find('.');
  std::string name = "aten::" + op.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : op.substr(dot + 1);
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str()).schema();
}

}  // namespace

bool g_sync = false;
std::atomic<bool> g_dump{false};
const std::atomic<bool> g_always{true};
const std::atomic<bool>* g_timeline = &g_always;
PythonWrapperCall g_python_call = nullptr;

torch::jit::Stack Kernel::call_python(torch::jit::Stack stack, bool results) {
  TORCH_CHECK(g_python_call != nullptr && schema != nullptr, "dipu: the C++ wrapper of ", op, " is not installed");
  g_python_call(python_kernel, *schema, op, stack, results);
  return stack;
}

at::Tensor device_number(const at::Tensor& number, const at::Tensor& other) {
  at::native::ResultTypeState state;
  state = at::native::update_result_type_state(number, state);
  state = at::native::update_result_type_state(other, state);
  DeviceScope scope(other.device().index());
  at::Tensor t = empty({}, at::native::result_type(state));
  t.fill_(number_of(number));
  return t;
}

std::vector<at::Tensor> Kernel::tensors_of(const torch::jit::Stack& results) {
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& value : results) {
    if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) tensors.push_back(t);
    } else {
      tensors.push_back(value.isNone() ? at::Tensor() : value.toTensor());
    }
  }
  return tensors;
}

namespace {

// Every kernel of the extension, as the tables add them: the generated ones and the hand-written twins of impl
// kernels. A function's static, so that it exists before the first table's constructor runs.
std::vector<const Entry*>& registered() {
  static std::vector<const Entry*> entries;
  return entries;
}

}  // namespace

c10::RegistrationHandleRAII register_entry(const Entry& entry, const c10::OperatorName& name) {
  return c10::Dispatcher::singleton().registerImpl(name, c10::DispatchKey::PrivateUse1,
                                                   entry.make(*entry.kernel, entry.function), entry.signature(),
                                                   nullptr, "dipu's C++ wrappers (dipu/kernels/cpp_wrappers.py)");
}

Table::Table(const Entry* entries, size_t count) {
  for (size_t i = 0; i < count; ++i) registered().push_back(&entries[i]);
}

namespace {

// The kernels by op, whatever order the tables were loaded in (sorted at the first call, after every table).
const std::vector<const Entry*>& sorted_entries() {
  static const std::vector<const Entry*> entries = [] {
    std::vector<const Entry*> sorted = registered();
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Entry* a, const Entry* b) { return std::strcmp(a->op, b->op) < 0; });
    return sorted;
  }();
  return entries;
}

// The kernel at `index` of sorted_entries(), null past either end: no C++ exception may leave a C function.
Kernel* kernel_at(int64_t index) {
  const std::vector<const Entry*>& entries = sorted_entries();
  return index >= 0 && static_cast<size_t>(index) < entries.size() ? entries[index]->kernel : nullptr;
}

}  // namespace
}  // namespace dipu::cwrap

// The C interface dipu/kernels/cpp_wrappers.py calls (through ctypes, the GIL held). A kernel is named by its index in
// the list dipu_cwrap_count and dipu_cwrap_op describe, the tables' entries sorted by op.
extern "C" {

C10_EXPORT int64_t dipu_cwrap_count() { return static_cast<int64_t>(dipu::cwrap::sorted_entries().size()); }

// The kernel's op, DIOPI function, scalar DIOPI function and the op whose meta kernel the dispatcher picks for its
// shapes (field 0, 1, 2, 3; "" for none); NULL past the end.
C10_EXPORT const char* dipu_cwrap_op(int64_t index, int field) {
  const dipu::cwrap::Kernel* kernel = dipu::cwrap::kernel_at(index);
  if (kernel == nullptr) return nullptr;
  switch (field) {
    case 0: return kernel->op;
    case 1: return kernel->diopi_name;
    case 2: return kernel->scalar_name;
    default: return kernel->meta_op;
  }
}

// Registers the kernels at `indices` on PrivateUse1 over what is registered there, replacing an earlier install, each
// with its C function, its scalar C function (0: none) and its Python wrapper (a PyObject* the caller keeps alive while
// installed); returns 0, or 1 with the error's text in `error` (nothing installed).
C10_EXPORT int dipu_cwrap_install(int64_t count, const int64_t* indices, const uintptr_t* functions,
                                  const uintptr_t* scalar_functions, void* const* python_kernels, char* error,
                                  size_t error_size) {
  using namespace dipu::cwrap;
  uninstall();
  auto installed = std::make_unique<Installed>();
  try {
    Quiet quiet;
    c10::WarningUtils::WarningHandlerGuard quiet_guard(&quiet);
    const std::vector<const Entry*>& entries = sorted_entries();
    for (int64_t i = 0; i < count; ++i) {
      TORCH_CHECK(indices[i] >= 0 && static_cast<size_t>(indices[i]) < entries.size(), "dipu: no C++ wrapper ",
                  indices[i]);
      const Entry& entry = *entries[indices[i]];
      TORCH_CHECK(functions[i] != 0, "dipu: no C function given for ", entry.op);
      Kernel* kernel = entry.kernel;
      kernel->schema = &schema_of(entry.op);
      kernel->python_kernel = python_kernels[i];
      kernel->function = reinterpret_cast<void*>(functions[i]);
      kernel->scalar_function = reinterpret_cast<void*>(scalar_functions[i]);
      installed->kernels.push_back(kernel);
      installed->registrations.push_back(register_entry(entry, kernel->schema->operator_name()));
    }
    g_installed = installed.release();
    return 0;
  } catch (const std::exception& e) {
    const char* text = e.what();
    std::strncpy(error, text, error_size - 1);
    error[error_size - 1] = '\0';
    g_installed = installed.release();  // what the loop had set up, undone as a whole
    uninstall();
    return 1;
  }
}

C10_EXPORT void dipu_cwrap_uninstall() { dipu::cwrap::uninstall(); }

// The calls the kernel's C++ path served (the Python path's are not counted).
C10_EXPORT int64_t dipu_cwrap_fast_calls(int64_t index) {
  const dipu::cwrap::Kernel* kernel = dipu::cwrap::kernel_at(index);
  return kernel != nullptr ? kernel->fast_calls.load(std::memory_order_relaxed) : 0;
}
C10_EXPORT void dipu_cwrap_reset_fast_calls() {
  for (const dipu::cwrap::Entry* entry : dipu::cwrap::sorted_entries())
    entry->kernel->fast_calls.store(0, std::memory_order_relaxed);
}

// Whether a run-time hook sends calls to the Python path now (Note [Hooks on the C++ path]).
C10_EXPORT int dipu_cwrap_hooks_on() { return dipu::cwrap::hooks_on(); }

// What the extension takes from the process when it loads: the core's device-timeline flag (Note [Hooks on the C++
// path]), its Python call (Note [The C++ wrappers' way to Python]) and DIPU_SYNC_EXEC_MODE as switches.py read it.
C10_EXPORT void dipu_cwrap_connect(uintptr_t timeline_flag, uintptr_t python_call, int sync) {
  dipu::cwrap::g_timeline = reinterpret_cast<const std::atomic<bool>*>(timeline_flag);
  dipu::cwrap::g_python_call = reinterpret_cast<dipu::PythonWrapperCall>(python_call);
  dipu::cwrap::g_sync = sync != 0;
}
C10_EXPORT int dipu_cwrap_sync() { return dipu::cwrap::g_sync; }

// Whether DIPU_DUMP_OP_ARGS asks for dumps now (dipu/kernels/switches.py's watch_dump calls it).
C10_EXPORT void dipu_cwrap_set_dump(int on) { dipu::cwrap::g_dump.store(on != 0, std::memory_order_relaxed); }

}  // extern "C"
