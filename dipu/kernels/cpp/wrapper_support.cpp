// The wrapper extension's module functions: installing the generated kernels over the Python wrappers
// (Note [Generated C++ wrappers] in scripts/autogen/dest/cpp_wrappers.py) and reading their counters.
#include "wrapper_support.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <unordered_map>

namespace dipu::cwrap {
namespace {

bool env_flag(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) return false;
  std::string value(text);
  value.erase(0, value.find_first_not_of(" \t\n"));
  value.erase(value.find_last_not_of(" \t\n") + 1);
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
  return !(value.empty() || value == "0" || value == "false" || value == "off" || value == "no");
}

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
    Py_XDECREF(static_cast<PyObject*>(kernel->python_kernel));
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

bool g_sync = env_flag("DIPU_SYNC_EXEC_MODE");
std::atomic<bool> g_dump{[] {
  const char* dump = std::getenv("DIPU_DUMP_OP_ARGS");
  return dump != nullptr && dump[0] != '\0' && !(dump[0] == '0' && dump[1] == '\0');
}()};
const std::atomic<bool> g_always{true};
const std::atomic<bool>* g_timeline = &g_always;

namespace {

// Calls the kernel's Python wrapper (the GIL held), keyword-only arguments by name; a Python exception
// keeps its type (python_error carries it back through the dispatcher).
py::object call_wrapper(const Kernel& kernel, torch::jit::Stack stack) {
  TORCH_CHECK(kernel.python_kernel != nullptr && kernel.schema != nullptr, "dipu: the C++ wrapper of ", kernel.op,
              " is not installed");
  const auto& arguments = kernel.schema->arguments();
  py::list positional;
  py::dict keywords;
  for (size_t i = 0; i < stack.size() && i < arguments.size(); ++i) {
    py::object value = torch::jit::toPyObject(std::move(stack[i]));
    if (arguments[i].kwarg_only())
      keywords[py::str(arguments[i].name())] = value;
    else
      positional.append(value);
  }
  try {
    return py::reinterpret_borrow<py::object>(static_cast<PyObject*>(kernel.python_kernel))(*py::tuple(positional),
                                                                                            **keywords);
  } catch (py::error_already_set& error) {
    error.restore();
    python_error translated;
    translated.persist();
    throw translated;
  }
}

}  // namespace

at::Tensor Kernel::call_python(torch::jit::Stack stack, bool want_tensor) {
  py::gil_scoped_acquire gil;
  py::object result = call_wrapper(*this, std::move(stack));
  if (!want_tensor) return at::Tensor();
  TORCH_CHECK(THPVariable_Check(result.ptr()), "dipu: the Python wrapper of ", op, " returned no tensor");
  return THPVariable_Unpack(result.ptr());
}

std::vector<at::Tensor> Kernel::call_python_tuple(torch::jit::Stack stack) {
  py::gil_scoped_acquire gil;
  py::object result = call_wrapper(*this, std::move(stack));
  TORCH_CHECK(PyTuple_Check(result.ptr()) || PyList_Check(result.ptr()), "dipu: the Python wrapper of ", op,
              " returned neither a tuple nor a list");
  std::vector<at::Tensor> tensors;
  for (py::handle item : result) {
    if (item.is_none()) {
      tensors.emplace_back();
      continue;
    }
    TORCH_CHECK(THPVariable_Check(item.ptr()), "dipu: the Python wrapper of ", op, " returned a non-tensor");
    tensors.push_back(THPVariable_Unpack(item.ptr()));
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

// The kernels by op, whatever order the tables were loaded in.
std::vector<const Entry*> all_entries() {
  std::vector<const Entry*> entries = registered();
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry* a, const Entry* b) { return std::strcmp(a->op, b->op) < 0; });
  return entries;
}

void define_module(py::module& m) {
  const std::vector<const Entry*> entries = all_entries();
  std::unordered_map<std::string, const Entry*> by_op;
  for (const Entry* entry : entries) by_op.emplace(entry->op, entry);

  m.def(
      "ops",
      [entries] {
        std::vector<std::tuple<std::string, std::string, std::string, bool>> result;
        for (const Entry* entry : entries)
          result.emplace_back(entry->op, entry->kernel->diopi_name, entry->kernel->scalar_name,
                              entry->kernel->dispatched_meta);
        return result;
      },
      "(op, DIOPI function, scalar DIOPI function or '', whether its shapes come from the meta kernel the dispatcher "
      "picks) of every "
      "kernel this extension has.");
  m.def(
      "install",
      [by_op](const std::vector<std::tuple<std::string, uintptr_t, uintptr_t, py::object>>& chosen) {
        uninstall();
        Quiet quiet;
        c10::WarningUtils::WarningHandlerGuard quiet_guard(&quiet);
        auto installed = std::make_unique<Installed>();
        std::vector<std::string> names;
        for (const auto& [op, address, scalar_address, python_kernel] : chosen) {
          auto found = by_op.find(op);
          TORCH_CHECK(found != by_op.end(), "dipu: the C++ wrappers have no kernel for ", op);
          TORCH_CHECK(address != 0, "dipu: no C function given for ", op);
          Kernel* kernel = found->second->kernel;
          kernel->schema = &schema_of(op);
          kernel->python_kernel = python_kernel.inc_ref().ptr();  // released by uninstall
          kernel->function = reinterpret_cast<void*>(address);
          kernel->scalar_function = reinterpret_cast<void*>(scalar_address);
          installed->kernels.push_back(kernel);
          installed->registrations.push_back(register_entry(*found->second, kernel->schema->operator_name()));
          names.push_back(op);
        }
        g_installed = installed.release();
        return names;
      },
      "install([(op, C function address, scalar C function address or 0, Python wrapper), ...]): register those C++ "
      "wrappers on PrivateUse1, "
      "over what is registered (replacing an earlier install); returns the ops.");
  m.def("uninstall", &uninstall, "Unregister the installed C++ wrappers.");
  m.def(
      "fast_calls",
      [entries] {
        std::unordered_map<std::string, int64_t> counts;
        for (const Entry* entry : entries) {
          int64_t n = entry->kernel->fast_calls.load(std::memory_order_relaxed);
          if (n) counts.emplace(entry->op, n);
        }
        return counts;
      },
      "op -> calls the C++ path served (the Python path's calls are not counted).");
  m.def("reset_fast_calls", [entries] {
    for (const Entry* entry : entries) entry->kernel->fast_calls.store(0, std::memory_order_relaxed);
  });
  m.def("hooks_on", &hooks_on, "Whether a run-time hook sends calls to the Python path now.");
  m.def(
      "set_timeline_flag", [](uintptr_t address) { g_timeline = reinterpret_cast<const std::atomic<bool>*>(address); },
      "Read the native core's device-timeline flag at this address (Note [Hooks on the C++ path]).");
  m.def(
      "set_dump", [](bool on) { g_dump.store(on, std::memory_order_relaxed); },
      "Whether DIPU_DUMP_OP_ARGS asks for dumps now (dipu/kernels/switches.py's watch_dump calls it).");
  m.def("sync", [] { return g_sync; });
}

}  // namespace
}  // namespace dipu::cwrap

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { dipu::cwrap::define_module(m); }
