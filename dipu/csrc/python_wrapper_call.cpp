// The core's half of Note [The C++ wrappers' way to Python] (python_wrapper_call.h).
#include "python_wrapper_call.h"

#include "python.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

namespace dipu {
namespace {

// The Python wrapper's `item` as the schema's result `result`.
c10::IValue result_of(py::handle item, const c10::Argument& result) {
  if (item.is_none() && result.type()->kind() == c10::TypeKind::TensorType) return at::Tensor();
  return torch::jit::toIValue(item, result.real_type());
}

void call_python_wrapper(void* callable, const c10::FunctionSchema& schema, const char* op, torch::jit::Stack& stack,
                         bool results) {
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
  stack.clear();
  py::object result;
  try {
    result = py::reinterpret_borrow<py::object>(static_cast<PyObject*>(callable))(*py::tuple(positional), **keywords);
  } catch (py::error_already_set& error) {
    error.restore();
    python_error translated;
    translated.persist();
    throw translated;
  }
  const auto& returns = schema.returns();
  if (!results || returns.empty()) return;
  if (returns.size() == 1) {
    stack.push_back(result_of(result, returns[0]));
    return;
  }
  TORCH_CHECK(PyTuple_Check(result.ptr()) || PyList_Check(result.ptr()), "dipu: the Python wrapper of ", op,
              " returned neither a tuple nor a list");
  TORCH_CHECK(py::len(result) == returns.size(), "dipu: the Python wrapper of ", op, " returned ", py::len(result),
              " results, not ", returns.size());
  for (size_t i = 0; i < returns.size(); ++i) stack.push_back(result_of(result[py::int_(i)], returns[i]));
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
