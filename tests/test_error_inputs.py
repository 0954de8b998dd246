"""What dipu's shape inference decides before a kernel runs, against the CPU: output shapes, and the
exceptions of invalid arguments (Note [Errors of the CPU's type] in dipu/kernels/support.py).

The sweep takes every OpInfo of ``op_db`` with ``error_inputs`` (PyTorch's own catalogue of invalid
arguments), runs each error input on the CPU and, moved to dipu, on dipu, and asserts dipu raises the
exception type the CPU raises. Error inputs the CPU accepts (some are written for other devices) are
not compared. Ops that still differ are in ``EXPECTED_DIFFERENCES`` with the reason; they are strict:
an op listed there that agrees fails, so the table stays honest.
"""

from __future__ import annotations

import json
import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.testing._internal.common_methods_invocations import op_db

import dipu  # noqa: F401  (registers the device)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: The CPU's refusals of overlapping memory (each torch adds error inputs of this kind: 2.15 has one for aminmax's
#: two outputs): dipu raises them too, on every path (Note [Overlapping memory] in dipu/csrc/overlap.cpp).
_OVERLAP = re.compile(r"overlap|refers? to a single memory location", re.IGNORECASE)

#: op key -> why dipu raises another exception type than the CPU for one of its error inputs.
#: (narrow_copy was one until ops ATen serves elsewhere through a composite ran whole on the CPU fallback:
#: Note [Functional ops the CPU runs whole] in dipu/csrc/cpu_fallback.cpp.)
EXPECTED_DIFFERENCES: dict[str, str] = {}


def op_key(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


ERROR_OPS = [op for op in op_db if op.error_inputs_func is not None]


def _to_dipu(value, storages: dict | None = None):
    """``value`` on dipu, its tensors laid over dipu memory as they lie in CPU memory: tensors sharing a CPU
    storage share a dipu one, with their offsets and strides (an expanded ``out=``, an ``out=`` that is an input's
    view), so the error inputs about overlapping memory overlap on dipu too. ``storages``: CPU storage -> its copy."""
    storages = {} if storages is None else storages
    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        storage = value.untyped_storage()
        if storage.nbytes() and not value.is_conj() and not value.is_neg():
            key = storage.data_ptr()
            if key not in storages:
                storages[key] = torch.empty(0, dtype=torch.uint8).set_(storage).to("dipu").untyped_storage()
            moved = torch.empty(0, dtype=value.dtype, device="dipu").set_(
                storages[key], value.storage_offset(), value.shape, value.stride())
        else:
            moved = value.detach().to("dipu")
        return moved.requires_grad_(value.requires_grad) if moved.is_floating_point() or moved.is_complex() else moved
    if isinstance(value, (list, tuple)):
        return type(value)(_to_dipu(v, storages) for v in value)
    if isinstance(value, dict):
        return {k: _to_dipu(v, storages) for k, v in value.items()}
    return value


def _raised(op, sample):
    """The exception type ``op`` raises on ``sample`` (None if it raises none)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op(sample.input, *sample.args, **sample.kwargs)
    except Exception as error:  # what is compared is the type
        return type(error), str(error).splitlines()[0][:200] if str(error) else ""
    return None


def _differences(op) -> tuple[list[str], list[str]]:
    """What dipu raises differently from the CPU: (differences, refusals of overlapping memory dipu lacks)."""
    found, overlaps = [], []
    for error_input in op.error_inputs(device="cpu"):
        sample = error_input.sample_input
        on_cpu = _raised(op, sample)
        if on_cpu is None:
            continue
        storages = {}  # one for the sample: its tensors share memory on dipu as they do on the CPU
        moved = type(sample)(_to_dipu(sample.input, storages), args=_to_dipu(sample.args, storages),
                             kwargs=_to_dipu(sample.kwargs, storages))
        on_dipu = _raised(op, moved)
        if on_dipu is None and _OVERLAP.search(on_cpu[1]):
            overlaps.append(on_cpu[1])
        elif on_dipu is None or on_dipu[0] is not on_cpu[0]:
            found.append(f"CPU {on_cpu[0].__name__}: {on_cpu[1]!r}; dipu "
                         + ("no error" if on_dipu is None else f"{on_dipu[0].__name__}: {on_dipu[1]!r}"))
    return found, overlaps


@pytest.mark.parametrize("op", ERROR_OPS, ids=op_key)
def test_error_inputs_raise_the_cpus_exception_type(op):
    differences, overlaps = _differences(op)
    reason = EXPECTED_DIFFERENCES.get(op_key(op))
    if reason is not None:
        assert differences, f"{op_key(op)} now raises the CPU's exception types: remove it from EXPECTED_DIFFERENCES"
        pytest.xfail(reason)
    assert not differences, "\n".join(differences)
    assert not overlaps, f"the CPU refuses overlapping memory, dipu computes: {overlaps[0]}"


def test_moving_a_sample_keeps_its_memory_shared():
    """The sweep's move to dipu keeps overlapping memory overlapping (an input's view as out=, an expanded out=)."""
    x = torch.arange(6.)
    moved = _to_dipu({"input": x[:5], "out": x[1:], "expanded": x[:1].expand(4), "apart": torch.ones(2)}, {})
    assert moved["out"].untyped_storage().data_ptr() == moved["input"].untyped_storage().data_ptr()
    assert moved["out"].data_ptr() - moved["input"].data_ptr() == x.element_size()
    assert moved["expanded"].stride() == (0,) and moved["expanded"].untyped_storage().data_ptr() == \
        moved["input"].untyped_storage().data_ptr()
    assert moved["apart"].untyped_storage().data_ptr() != moved["input"].untyped_storage().data_ptr()
    assert torch.equal(moved["out"].cpu(), x[1:]) and torch.equal(moved["expanded"].cpu(), x[:1].expand(4))


def test_the_sweep_sees_error_inputs():
    assert len(ERROR_OPS) >= 50 and not set(EXPECTED_DIFFERENCES) - {op_key(op) for op in ERROR_OPS}


# ---- the cases, by message too --------------------------------------------------------------


def _cpu_and_dipu(function, *args, **kwargs):
    errors = []
    for device in ("cpu", "dipu"):
        with pytest.raises(Exception) as info:
            function(*_to_dipu(args) if device == "dipu" else args,
                     **(_to_dipu(kwargs) if device == "dipu" else kwargs))
        errors.append(info.value)
    return errors


@pytest.mark.parametrize("case", ["max_pool2d_1d", "cross_entropy_weight", "nll_loss_2d_target"])
def test_invalid_arguments_raise_what_the_cpu_raises(case):
    x = torch.randn(4, 3)
    if case == "max_pool2d_1d":
        cpu, on_dipu = _cpu_and_dipu(F.max_pool2d, torch.randn(3), 2)
    elif case == "cross_entropy_weight":
        cpu, on_dipu = _cpu_and_dipu(F.cross_entropy, x, torch.tensor([0, 1, 2, 1]), weight=torch.ones(5))
    else:
        cpu, on_dipu = _cpu_and_dipu(F.nll_loss, x, torch.zeros(4, 2, dtype=torch.long))
    assert type(cpu) is RuntimeError and type(on_dipu) is RuntimeError, (cpu, on_dipu)
    assert str(on_dipu) == str(cpu)


def test_errors_dipu_finds_itself_stay_dipus():
    """Arguments the CPU accepts keep dipu's error: two devices mixed."""
    with pytest.raises(RuntimeError, match="found at least two devices, dipu:0 and dipu:1"):
        torch.mm(torch.ones(2, 2, device="dipu"), torch.ones(2, 2, device="dipu:1"))


# ---- overlapping memory, on every op library ----------------------------------------------------------------

OVERLAP_CALLS = """
import json, torch, dipu
cases = {
    "add_ reading its own shifted view": lambda x: x[1:].add_(x[:-1]),
    "mul out= over the input shifted": lambda x: torch.mul(x[:-1], 2, out=x[1:]),
    "sqrt out= over the input shifted": lambda x: torch.sqrt(x[:-1], out=x[1:]),
    "add_ into an expanded self": lambda x: x[:1].expand(3).add_(x[3:]),
    "copy_ from its own shifted view": lambda x: x[1:].copy_(x[:-1]),
    "copy_ between disjoint halves": lambda x: x[:3].copy_(x[3:]),
    "add_ of itself": lambda x: x.add_(x),
    "mul_ by a number": lambda x: x.mul_(2),
    # written lists, element by element (Note [Written lists overlapping] in dipu/kernels/support.py)
    "_foreach_add_ into an expanded element": lambda x: torch._foreach_add_([x[:2], x[2:3].expand(2)], [x[4:]] * 2),
    "_foreach_add_ reading its element shifted": lambda x: torch._foreach_add_([x[:2], x[3:6]], [x[4:], x[2:5]]),
    "_foreach_mul_ of itself": lambda x: torch._foreach_mul_([x[:3], x[3:]], [x[:3], x[3:]]),
    "_foreach_add_ of each other's elements": lambda x: torch._foreach_add_([x[:3], x[3:]], [x[3:], x[:3]]),
    "_foreach_add_ of a scalar tensor in the list": lambda x: torch._foreach_add_([x[:3], x[3:]], x[0]),
}
found = {}
for name, case in cases.items():
    found[name] = []
    for device in ("cpu", "dipu"):
        x = torch.arange(6., device=device)
        try:
            case(x)
            found[name].append(x.cpu().tolist())
        except RuntimeError as error:
            found[name].append(str(error).split(".")[0])
print(json.dumps(found))
"""


@pytest.mark.parametrize("library", ["default", "torch", "ref_c"])  # default: the torch library in C++
def test_overlapping_memory_gets_the_cpus_error_or_result_from_every_op_library(python, library):
    """An op writing memory it also reads in part (or through an expanded self) raises the CPU's error on every
    path: the torch library in C++ and the Python one see the overlap through aliases that share one storage
    (Note [Aliases share one storage] in dipu/csrc/copies.cpp), and a C library, which would compute garbage, never
    gets the call (Note [Overlapping memory in C++] in dipu/kernels/cpp/wrapper_support.h). Memory that does
    not overlap, or an in-place op reading its own self whole, computes as on the CPU."""
    env = {} if library == "default" else {"DIPU_DIOPI_IMPL": library}
    found = json.loads(python(OVERLAP_CALLS, env=env).stdout.strip().splitlines()[-1])
    for name, (cpu, on_dipu) in found.items():
        assert on_dipu == cpu, (name, cpu, on_dipu)
    assert "single memory location" in found["add_ reading its own shifted view"][0]
    assert "single memory location" in found["_foreach_add_ into an expanded element"][0]
    assert "single memory location" in found["_foreach_add_ reading its element shifted"][0]
    assert found["copy_ between disjoint halves"][0] == [3.0, 4.0, 5.0, 3.0, 4.0, 5.0]


# ---- output shapes the shape inference decides --------------------------------------------------------


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(4,), (3, 4), (0, 4)], ids=["vector", "matrix", "empty_batch"])
def test_multilabel_margin_loss_shapes_match_the_cpu(shape, reduction):
    torch.manual_seed(0)
    x, target = torch.randn(shape), torch.randint(-1, shape[-1], shape)
    expected = F.multilabel_margin_loss(x, target, reduction=reduction)
    actual = F.multilabel_margin_loss(x.to("dipu"), target.to("dipu"), reduction=reduction)
    assert actual.shape == expected.shape
    if x.numel():  # the CPU kernel leaves a reduced loss over an empty batch uninitialized
        torch.testing.assert_close(actual.cpu(), expected)
    values, is_target = torch.ops.aten.multilabel_margin_loss_forward(x.to("dipu"), target.to("dipu"), 0)
    cpu_values, cpu_is_target = torch.ops.aten.multilabel_margin_loss_forward(x, target, 0)
    assert values.shape == cpu_values.shape and is_target.shape == cpu_is_target.shape
