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

namespace dipu {

// Calls `callable` (the op's Python wrapper, a PyObject*) with the op's arguments on `stack`, in `schema`'s order (its
// keyword-only ones by name), the GIL taken, and leaves on `stack` what it returned, as the schema's results, as a
// boxed kernel leaves them (a Tensor result returned as None: an undefined tensor); where `results` is false, nothing
// (the caller of an in-place or out= op returns its own argument). A Python exception is thrown as torch's
// python_error, which keeps its type through the dispatcher; `op` names the op in the other errors.
using PythonWrapperCall = void (*)(void* callable, const c10::FunctionSchema& schema, const char* op,
                                   torch::jit::Stack& stack, bool results);

}  // namespace dipu
