// The core's half of Note [The C++ wrappers' way to Python] (python_wrapper_call.h).
#include "python_wrapper_call.h"

#include "python.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

namespace dipu {
namespace {

at::Tensor tensor_of(py::handle item, const char* op) {
  if (item.is_none()) return at::Tensor();
  TORCH_CHECK(THPVariable_Check(item.ptr()), "dipu: the Python wrapper of ", op, " returned a non-tensor");
  return THPVariable_Unpack(item.ptr());
}

std::vector<at::Tensor> call_python_wrapper(void* callable, const c10::FunctionSchema& schema, const char* op,
                                            torch::jit::Stack&& stack, PythonResult want) {
  TORCH_CHECK(callable != nullptr, "dipu: the C++ wrapper of ", op, " is not installed");
  py::gil_scoped_acquire gil;
  const auto& arguments = schema.arguments();
  py::list positional;
  py::dict keywords;
  for (size_t i = 0; i < stack.size() && i < arguments.size(); ++i) {
    py::object value = torch::jit::toPyObject(std::move(stack[i]));
    if (arguments[i].kwarg_only())
      keywords[py::str(arguments[i].name())] = value;
    else
      positional.append(value);
  }
  py::object result;
  try {
    result = py::reinterpret_borrow<py::object>(static_cast<PyObject*>(callable))(*py::tuple(positional), **keywords);
  } catch (py::error_already_set& error) {
    error.restore();
    python_error translated;
    translated.persist();
    throw translated;
  }
  std::vector<at::Tensor> tensors;
  if (want == PythonResult::kTensor) {
    TORCH_CHECK(THPVariable_Check(result.ptr()), "dipu: the Python wrapper of ", op, " returned no tensor");
    tensors.push_back(THPVariable_Unpack(result.ptr()));
  } else if (want == PythonResult::kTensors) {
    TORCH_CHECK(PyTuple_Check(result.ptr()) || PyList_Check(result.ptr()), "dipu: the Python wrapper of ", op,
                " returned neither a tuple nor a list");
    for (py::handle item : result) tensors.push_back(tensor_of(item, op));
  }
  return tensors;
}

}  // namespace

void register_python_wrapper_call(py::module& m) {
  m.def(
      "python_wrapper_call_address",
      [] {
        PythonWrapperCall call = &call_python_wrapper;
        return reinterpret_cast<uintptr_t>(call);
      },
      "The address of the function the C++ wrappers call their Python wrappers with (Note [The C++ wrappers' way to "
      "Python]).");
}

}  // namespace dipu
