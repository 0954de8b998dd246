// Hot-path entry points for generated kernels, as METH_FASTCALL C functions.
//
// Note [Fast calls]
// Every generated kernel calls exchange_device() once, alias() once per tensor
// argument and empty() once per output. Through pybind11 each call costs ~0.5 us of argument
// conversion; written against the CPython API they cost a fraction of that,
// which is the margin between a tiny op at 4x native CPU and well under it.
#include "python.h"

#include <ATen/EmptyTensor.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

namespace dipu {
namespace {

bool to_index(PyObject* obj, int& out) {
  long v = PyLong_AsLong(obj);
  if (v == -1 && PyErr_Occurred()) return false;
  out = static_cast<int>(v);
  return true;
}

// alias(tensor, device_index) -> native alias; doubles as the device check of Python kernels.
PyObject* fast_alias(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(nargs == 2 && THPVariable_Check(args[0]), "alias(tensor, device_index)");
  int index;
  if (!to_index(args[1], index)) return nullptr;
  const at::Tensor& t = THPVariable_Unpack(args[0]);
  if (t.device().type() == kDipu && t.device().index() == index) return THPVariable_Wrap(native_alias(t));
  if (t.device().is_cpu() && t.dim() == 0) {
    Py_INCREF(args[0]);
    return args[0];
  }
  TORCH_CHECK(false,
              "Expected all tensors to be on the same device, but found at least two "
              "devices, dipu:",
              index, " and ", t.device(), "!");
  END_HANDLE_TH_ERRORS
}

// empty(sizes, dtype, device_index) -> contiguous dipu tensor.
PyObject* fast_empty(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(nargs == 3 && THPDtype_Check(args[1]), "empty(sizes, dtype, device_index)");
  int index;
  if (!to_index(args[2], index)) return nullptr;
  PyObject* seq = PySequence_Fast(args[0], "empty: sizes must be a sequence of ints");
  if (!seq) return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  c10::SmallVector<int64_t, 6> sizes(n);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n; ++i) {
    sizes[i] = PyLong_AsLongLong(items[i]);
    if (sizes[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return nullptr;
    }
  }
  Py_DECREF(seq);
  check_device_index(static_cast<c10::DeviceIndex>(index));
  c10::DeviceGuard guard(c10::Device(kDipu, static_cast<c10::DeviceIndex>(index)));
  return THPVariable_Wrap(at::detail::empty_generic(sizes, device_allocator(),
                                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    reinterpret_cast<THPDtype*>(args[1])->scalar_type, std::nullopt));
  END_HANDLE_TH_ERRORS
}

// exchange_device(index) -> previous index: the device guard of generated kernels.
PyObject* fast_exchange_device(PyObject*, PyObject* arg) {
  HANDLE_TH_ERRORS
  int index;
  if (!to_index(arg, index)) return nullptr;
  c10::DeviceIndex previous = current_device();
  if (previous != index) {
    check_device_index(static_cast<c10::DeviceIndex>(index));
    c10::impl::getDeviceGuardImpl(kDipu)->uncheckedSetDevice(c10::Device(kDipu, index));
  }
  if (g_timeline_active.load(std::memory_order_relaxed)) profiler_on_kernel(static_cast<c10::DeviceIndex>(index));
  return PyLong_FromLong(previous);
  END_HANDLE_TH_ERRORS
}

PyMethodDef g_methods[] = {
    {"exchange_device", &fast_exchange_device, METH_O,
     "exchange_device(index) -> previous: make dipu:index current on this thread."},
    {"alias", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_alias)), METH_FASTCALL,
     "alias(tensor, device_index): zero-copy native alias of a tensor on dipu:device_index; a 0-dim "
     "CPU tensor passes through; any other device raises the mixed-device error."},
    {"empty", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_empty)), METH_FASTCALL,
     "empty(sizes, dtype, device_index): a contiguous dipu tensor."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void register_fast_calls(py::module& m) {
  TORCH_CHECK(PyModule_AddFunctions(m.ptr(), g_methods) == 0, "dipu: registering fast calls failed");
}

}  // namespace dipu
