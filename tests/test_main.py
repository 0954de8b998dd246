"""`python -m dipu`: what a user pastes into a bug report, and the op library's gaps it lists."""

import os
import re
import subprocess
import sys
import textwrap

import torch

import dipu
from dipu.diopi.proto import FUNCTIONS
from dipu.diopi_impl.torch import library as torch_library

PARTIAL_LIBRARY = """
from dipu.diopi import OpLibrary
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("partial")
for name, function in reference.functions.items():
    if name not in ("diopiAdd", "diopiMul"):
        library.register(function)
"""


def dipu_main(*args, env=None):
    return subprocess.run([sys.executable, "-m", "dipu", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def test_reports_versions_vendor_devices_library_and_variables():
    env = {**os.environ, "DIPU_SYNC_EXEC_MODE": "1"}
    proc = dipu_main(env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("dipu ") and dipu.__file__.rsplit("/", 1)[0] in lines[0]
    assert lines[1].startswith(f"torch {torch.__version__} ")
    assert lines[2].startswith(f"vendor: {dipu.vendor().name} ")
    count = torch.dipu.device_count()
    assert f"devices: {count}" in lines
    name = torch.dipu.get_device_properties(count - 1).name
    assert any(line.startswith(f"  dipu:{count - 1}: {name}, ") for line in lines), proc.stdout
    assert "  DIPU_SYNC_EXEC_MODE=1" in lines
    assert any(line.startswith("native core: ") for line in lines)


def test_lists_what_a_partial_op_library_lacks(tmp_path):
    (tmp_path / "partial_ops.py").write_text(textwrap.dedent(PARTIAL_LIBRARY))
    env = {**os.environ, "DIPU_DIOPI_IMPL": "partial_ops", "PYTHONPATH": str(tmp_path)}
    proc = dipu_main("--missing", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    total = len(FUNCTIONS)
    # The reference less diopiAdd and diopiMul. On torch 2.11 the reference lacks diopiForeachClone (Note [ATen
    # ops a torch lacks] in diopi_impl/torch/_table.py), which no op of that torch wants: two are still missing.
    partial = len(torch_library.functions) - 2
    assert f"op library: partial ({partial} functions)" in lines
    assert f"  implements {partial} of the {total} DIOPI functions of the proto ({100 * partial / total:.0f}%)" \
        in lines
    assert "  6 ops run on the CPU fallback for want of 2 DIOPI functions (--missing lists them)" in lines
    assert lines[-2:] == ["  diopiAdd: add.Tensor, add.out, add_.Tensor",
                          "  diopiMul: mul.Tensor, mul.out, mul_.Tensor"]


def test_lists_the_kernels_left_on_python_wrappers_with_their_reasons():
    """``--python-wrappers``: every registered kernel without a C++ wrapper installed, under one of the reasons a
    kernel can have (none is left unexplained); with the wrappers switched off, every kernel, for that reason."""
    proc = dipu_main("--python-wrappers")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kernels on their Python wrapper: "))
    left, registered = (int(n) for n in lines[start].split(": ")[1].split(" registered")[0].split(" of "))
    groups = {m.group(1): (int(m.group(2)), m.group(3)) for m in map(GROUP.match, lines[start + 1:]) if m}
    assert len(groups) == len(lines) - start - 1, lines[start:]
    assert set(groups) <= {"no C++ wrapper", "the op library's function is in Python",
                           "its meta kernel is in Python"}, groups.keys()
    assert sum(count for count, _ in groups.values()) == left
    assert 0 < left < registered / 2
    # an op the generator cannot wrap says what stops it; one whose DIOPI function is Python's names it
    assert "_cdist_backward (shape rule cdist_backward has no C++ twin)" in groups["no C++ wrapper"][1]
    assert "_ctc_loss (diopiCTCLossUnreduced)" in groups["the op library's function is in Python"][1]

    off = dipu_main("--python-wrappers", env={**os.environ, "DIPU_CPP_WRAPPERS": "0"})
    assert off.returncode == 0, off.stderr
    assert f"  C++ wrappers are switched off by DIPU_CPP_WRAPPERS=0 or DIPU_CHECK_TENSOR_DEVICE ({registered}): " \
        in off.stdout, off.stdout[-2000:]


#: A reason's line of ``--python-wrappers``: the reason, how many kernels, the kernels.
GROUP = re.compile(r"^  (.+?) \((\d+)\): (.*)$")


def test_a_runtime_only_vendor_says_so():
    proc = dipu_main(env={**os.environ, "DIPU_VENDOR": "sim", "DIPU_SIM_NATIVE_ALIAS": "0"})
    assert proc.returncode == 0, proc.stderr
    assert "op library: none (a runtime only: every op runs on the CPU fallback)" in proc.stdout.splitlines()
    assert "  memory: opaque; " in proc.stdout
