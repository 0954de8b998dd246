// How the C++ wrappers (dipu/kernels/cpp) call an op's Python wrapper: through a function of the native core, so that
// their library reads none of Python's headers.
//
// Note [The C++ wrappers' way to Python]
// A C++ wrapper hands every call it does not serve itself to the op's Python wrapper, its arguments boxed as the
// dispatcher boxes them. Calling Python from C++ needs Python's, pybind11's and torch's Python headers (5 s of a
// compiler's time on the 2-core development machine, in the wrappers' support part), which the core's Python part
// reads anyway. So the core does it (python_wrapper_call.cpp) and gives the wrappers' library the function's address
// when it loads it (dipu._C.python_wrapper_call_address); the library is a plain shared library with a C interface
// (wrapper_support.cpp's dipu_cwrap_* functions), which dipu/kernels/cpp_wrappers.py calls through ctypes, and it
// holds each Python wrapper by address while Python keeps the reference. A library loaded by a core of another dipu
// cannot meet this header changed: the header is part of the library's cache key.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <vector>

namespace dipu {

// What a caller wants back from a Python wrapper.
enum class PythonResult : int { kNothing = 0, kTensor = 1, kTensors = 2 };

// Calls `callable` (the op's Python wrapper, a PyObject*) with `stack`, the op's arguments in `schema`'s order (its
// keyword-only ones by name), the GIL taken: returns nothing, its tensor (one element), or the tensors of the tuple or
// list it returns (None as an undefined tensor). A Python exception is thrown as torch's python_error, which keeps its
// type through the dispatcher; `op` names the op in the other errors.
using PythonWrapperCall = std::vector<at::Tensor> (*)(void* callable, const c10::FunctionSchema& schema, const char* op,
                                                      torch::jit::Stack&& stack, PythonResult want);

}  // namespace dipu
