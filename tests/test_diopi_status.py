"""What each status a DIOPI function answers means to the user, on each path a call can take: the Python
wrapper and the C++ wrapper, over a C library, the C++ torch library and a Python library (Note [C status
codes] in dipu/diopi/c_library.py; Note [Exceptions in the C++ library] in diopi_impl/torch_cpp/support.h).

Success is the library's result; diopiNoImplement (13) and diopiForceFallbackToCPU (14) are the CPU
fallback's result, counted; every other status is an error naming the function, the status and what the
library says."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_c_op_library import COMPILER, compile_library  # noqa: E402

STATUSES = {0: None, 13: "fallback", 14: "fallback", 1: "diopiErrorOccurred", 2: "diopiNotInited",
            1000: "diopiDtypeNotSupported", 77: "an unknown status"}

# In one process: x + y under each status the library is told to answer (tiny_diopi.c's diopiAdd reads it).
EACH_STATUS = """
import json, os, torch, dipu
from dipu.kernels import cpp_wrappers
x, y = torch.randn(4, 5), torch.randn(4, 5)
dx, dy = x.to("dipu"), y.to("dipu")
results = {}
for status in STATUSES:
    os.environ[VAR] = str(status)
    dipu.reset_fallback_counts()
    cpp_wrappers.reset_fast_calls()
    try:
        right = torch.equal((dx + dy).cpu(), x + y)
        results[status] = {"right": right, "fallback": dipu.fallback_counts().get("add.Tensor", 0),
                           "fast": cpp_wrappers.fast_calls().get("add.Tensor", 0)}
    except RuntimeError as error:
        results[status] = {"error": str(error).splitlines()[0]}
print(json.dumps(results))
"""

PYTHON_LIBRARY = """
import os
from dipu.diopi import OpLibrary, Status
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("told_status", base=reference)
CODES = {"13": Status.FORCE_FALLBACK, "14": Status.FORCE_FALLBACK, "1": Status.ERROR_OCCURRED,
         "1000": Status.DTYPE_NOT_SUPPORTED}

@library.register
def diopiAdd(ctx, out, input, other, alpha):
    told = os.environ.get("TOLD_STATUS", "0")
    if told in CODES:
        return CODES[told]
    return reference.get("diopiAdd")(ctx, out, input, other, alpha)
"""


def run_statuses(python, statuses, env, var="TINY_DIOPI_ADD_STATUS") -> dict:
    code = f"STATUSES = {list(statuses)!r}\nVAR = {var!r}\n" + EACH_STATUS
    return {int(k): v for k, v in json.loads(python(code, env=env).stdout.strip().splitlines()[-1]).items()}


@pytest.mark.skipif(COMPILER is None, reason="no C compiler")
@pytest.mark.parametrize("path", ["python wrapper", "C++ wrapper"])
def test_each_status_of_a_c_library(python, tmp_path, path):
    library = compile_library(tmp_path, "dipu")
    env = {"DIPU_DIOPI_IMPL": str(library), "DIPU_CPP_WRAPPERS": "0" if path == "python wrapper" else "1"}
    results = run_statuses(python, STATUSES, env)
    assert results[0] == {"right": True, "fallback": 0, "fast": 1 if path == "C++ wrapper" else 0}, results[0]
    for status, meaning in STATUSES.items():
        if meaning == "fallback":
            assert results[status] == {"right": True, "fallback": 1, "fast": 0}, (status, results[status])
        elif meaning is not None:
            error = results[status].get("error", "")
            assert error.startswith("add.Tensor: diopiAdd failed with ") and (
                f"C status {status} ({meaning}), the library says: tiny_diopi was told to answer {status}" in error), \
                (status, results[status])


def test_each_status_of_a_python_library(python, tmp_path):
    (tmp_path / "told_status.py").write_text(PYTHON_LIBRARY)
    env = {"DIPU_DIOPI_IMPL": "told_status", "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    results = run_statuses(python, (0, 14, 1, 1000), env, var="TOLD_STATUS")
    assert results[0] == {"right": True, "fallback": 0, "fast": 0}
    assert results[14] == {"right": True, "fallback": 1, "fast": 0}
    assert results[1]["error"].startswith("add.Tensor: diopiAdd failed with "), results[1]
    assert results[1000]["error"].startswith("add.Tensor: diopiAdd failed with "), results[1000]
    assert results[1]["error"] != results[1000]["error"], results


def test_the_cpp_torch_library_serves_without_python_and_leaves_wrong_arguments_to_the_cpu(python):
    """Its functions answer success, or diopiForceFallbackToCPU where ATen throws (Note [Exceptions in the C++
    library]): the CPU fallback then raises the CPU's own error, type and text."""
    out = python("""
        import json, torch, dipu
        from dipu.kernels import cpp_wrappers, registry
        x, y = torch.randn(4, 5), torch.randn(4, 5)
        right = torch.equal((x.to("dipu") + y.to("dipu")).cpu(), x + y)
        fast = cpp_wrappers.fast_calls().get("add.Tensor", 0)
        try:
            torch.ones(2, device="dipu") + torch.ones(3, device="dipu")
        except RuntimeError as error:
            dipu_error = str(error)
        try:
            torch.ones(2) + torch.ones(3)
        except RuntimeError as error:
            cpu_error = str(error)
        print(json.dumps({"library": registry.registration.library.name, "right": right, "fast": fast,
                          "same error": dipu_error == cpu_error, "error": dipu_error}))
    """).stdout.strip().splitlines()[-1]
    result = json.loads(out)
    assert result == {"library": "torch_cpp", "right": True, "fast": 1, "same error": True,
                      "error": result["error"]}, result
