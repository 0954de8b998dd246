"""Autocompare (dipu/autocompare.py): judging tensors as a whole, naming the first wrong kernel of a
training step, the output lines, the exit summary and the ``dipu.autocompare`` block."""

import os
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import dipu
from dipu import autocompare

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from models import GPT, GPTConfig, SmallCNN  # noqa: E402, F401 (GPTConfig: read by eval(TINY_GPT))

AUTOCOMPARE_VARS = ("DIPU_AUTOCOMPARE_OPS_LIST", "DIPU_AUTOCOMPARE_STRICT", "DIPU_AUTOCOMPARE_VERBOSE",
                    "DIPU_AUTOCOMPARE_RTOL", "DIPU_AUTOCOMPARE_ATOL", "DIPU_DIOPI_IMPL", "DIPU_DUMP_OP_ARGS",
                    "DIPU_FORCE_FALLBACK_OPS_LIST")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for var in AUTOCOMPARE_VARS:
        monkeypatch.delenv(var, raising=False)


def library_path(tmp_path, name: str, source: str) -> dict:
    (tmp_path / f"{name}.py").write_text(source)
    return {"DIPU_DIOPI_IMPL": name, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


# The torch op library with one kernel 1% wrong: gelu's backward.
FAULTY_GELU = """
from dipu import _C
from dipu.diopi import OpLibrary
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("faulty_gelu", base=reference)

@library.register
def diopiGeluBackward(ctx, grad_input, grad_output, input, approximate):
    status = reference.get("diopiGeluBackward")(ctx, grad_input, grad_output, input, approximate)
    _C.alias(grad_input, ctx.device).mul_(1.01)
    return status
"""

# A library in which neg computes the wrong values and abs also negates its input in place.
BROKEN_LIBRARY = """
from dipu import _C
from dipu.diopi import SUCCESS, OpLibrary
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("broken", base=reference)

@library.register
def diopiNeg(ctx, out, input):
    _C.alias(out, ctx.device).copy_(_C.alias(input, ctx.device))
    return SUCCESS

@library.register
def diopiAbs(ctx, out, input):
    x = _C.alias(input, ctx.device)
    _C.alias(out, ctx.device).copy_(x.abs())
    x.neg_()
    return SUCCESS
"""

TINY_GPT = "GPTConfig(vocab_size=16, seq_len=8, n_layer=1, n_head=2, d_model=16, dropout=0.0)"

GPT_TRAINING_STEP = f"""
import sys, torch, dipu
sys.path.insert(0, {str(Path(__file__).resolve().parents[1] / "examples")!r})
from models import GPT, GPTConfig
torch.manual_seed(0)
model = GPT({TINY_GPT}).to("dipu")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(16, (4, 9)).to("dipu")
_, loss = model(tokens[:, :-1], tokens[:, 1:])
loss.backward()
optimizer.step()
print("step done")
"""


def gpt_step(device="dipu"):
    torch.manual_seed(0)
    model = GPT(eval(TINY_GPT)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(16, (4, 9)).to(device)
    _, loss = model(tokens[:, :-1], tokens[:, 1:])
    loss.backward()
    optimizer.step()


def cnn_step(device="dipu"):
    torch.manual_seed(0)
    model = SmallCNN(in_channels=3, num_classes=4, width=4).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images, labels = torch.randn(4, 3, 8, 8).to(device), torch.tensor([0, 1, 2, 3]).to(device)
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()


# ---- a training step, from the environment ------------------------------------------------------


def test_a_1_percent_wrong_backward_kernel_is_named_first(python, tmp_path):
    env = {"DIPU_AUTOCOMPARE_OPS_LIST": ".*", **library_path(tmp_path, "faulty_gelu", FAULTY_GELU)}
    lines = python(GPT_TRAINING_STEP, env=env).stdout.splitlines()
    first = [line for line in lines if line.startswith("autocompare: first mismatch")]
    assert len(first) == 1
    assert first[0].startswith("autocompare: first mismatch at call #")
    assert ": gelu_backward grad_input: max rel err 1.0e-02, cosine " in first[0]
    assert "args: grad_output [4, 8, 64] float32, self [4, 8, 64] float32" in first[0]
    assert lines.index(first[0]) < lines.index("step done")
    assert [line for line in lines if "not_close" in line][0].startswith(
        "autocompare:    gelu_backward grad_input: not_close, call #")
    summary = lines[-1]
    assert summary.startswith("autocompare: ") and (
        " 1 mismatches (gelu_backward -> diopiGeluBackward x1); first mismatch at call #" in summary)
    # Note [What autocompare checked]: the faulty library's one function ran, so none is listed as never run
    assert "never ran" not in summary


def test_the_same_step_without_the_fault_reports_nothing_but_the_summary(python):
    lines = python(GPT_TRAINING_STEP, env={"DIPU_AUTOCOMPARE_OPS_LIST": ".*"}).stdout.splitlines()
    assert lines[0] == "step done"
    assert lines[1].startswith("autocompare: ") and " calls, 0 mismatches; " in lines[1]
    # the reference library's functions this step never reached are counted, and the first few named
    assert " functions of op library 'torch_cpp' never ran under autocompare " \
        "(not called, or their ops not compared): diopiAbs, diopiAcos, " in lines[1]
    assert len(lines) == 2


# ---- dipu.autocompare(...) blocks, in this process ----------------------------------------------


@pytest.mark.parametrize("step", [gpt_step, cnn_step])
def test_correct_training_steps_have_no_mismatch(step):
    with dipu.autocompare(".*") as run:
        step()
    assert run.calls > 20 and run.mismatches == [] and run.first_mismatch is None
    assert run.reference_failures == {}  # convolution_overrideable included: see dipu/ops/overrideable.py
    if step is cnn_step:
        assert {"convolution_overrideable", "convolution_backward_overrideable"} <= run.ops


def test_a_block_compares_only_inside_and_only_its_ops(capsys):
    x = torch.arange(6.0).to("dipu")
    before = autocompare.results().calls
    with dipu.autocompare("mul.Tensor", verbose=True) as run:
        x * 2
        x + 2
    x * 2
    assert (run.calls, run.ops) == (1, {"mul.Tensor"})
    assert autocompare.results().calls == before + 1
    assert capsys.readouterr().out == "autocompare:    mul.Tensor out: allclose\n"


def test_a_block_quiet_by_default_and_nested_blocks_restore_the_outer_one(capsys):
    x = torch.arange(6.0).to("dipu")
    with dipu.autocompare("mul.Tensor") as outer:
        with dipu.autocompare("add.Tensor") as inner:
            x + 1
            x * 2
        x * 2
        x + 1
    assert (inner.calls, inner.ops) == (1, {"add.Tensor"})
    assert (outer.calls, outer.ops) == (2, {"add.Tensor", "mul.Tensor"})
    assert capsys.readouterr().out == ""


# ---- judging (Note [Judging a tensor as a whole]) ------------------------------------------------


def judged(actual, expected):
    return autocompare.judge(actual, expected)[0]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
def test_a_1_percent_error_is_caught_whatever_the_magnitude(dtype):
    for scale in (1e-6, 1.0, 1e3):
        expected = (torch.randn(1000, dtype=torch.float64) * scale).to(dtype)
        assert judged((expected.double() * 1.01).to(dtype), expected) is False
        assert judged(expected.clone(), expected) is True


def test_rounding_differences_and_cancelled_elements_pass():
    expected = torch.randn(1000, dtype=torch.float64)
    expected[:10] = 1e-12  # elements that cancelled to near zero: tiny, with large relative errors
    actual = expected * (1 + 1e-7 * torch.randn(1000, dtype=torch.float64))
    actual[:10] = -1e-12
    assert judged(actual.float(), expected.float()) is True


def test_errors_spread_over_small_elements_fail_the_cosine():
    expected = torch.cat([torch.tensor([100.0]), torch.randn(10_000) * 1e-3])
    actual = expected.clone()
    actual[1:] *= -1  # each error below rtol * max, but all of them wrong
    agree, detail, _, rel_err, cosine = autocompare.judge(actual, expected)
    assert not agree and rel_err < 1e-4 and cosine < 1 - 1e-6


def test_nan_inf_positions_must_agree_and_integers_be_equal():
    nan, inf = float("nan"), float("inf")
    assert judged(torch.tensor([1.0, nan, inf]), torch.tensor([1.0, nan, inf])) is True
    assert judged(torch.tensor([1.0, 1.0, inf]), torch.tensor([1.0, nan, inf])) is False
    assert judged(torch.tensor([1.0, nan, -inf]), torch.tensor([1.0, nan, inf])) is False
    assert judged(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4])) is False
    assert judged(torch.tensor([True]), torch.tensor([True])) is True
    assert judged(torch.zeros(3), torch.zeros(3)) is True
    assert autocompare.judge(torch.tensor([0.0, 1e-30]), torch.zeros(2))[3] == float("inf")


def test_complex_is_judged_on_its_real_and_imaginary_parts():
    expected = torch.randn(100, dtype=torch.complex64)
    assert judged(expected * 1.01, expected) is False
    assert judged(expected.conj().resolve_conj().conj(), expected) is True
    assert judged(expected * 1j, expected) is False


def test_a_tf32_convolution_passes_as_tf32_and_only_on_a_cuda_vendor(monkeypatch):
    # Note [TF32 on a CUDA vendor]: a float32 convolution computed from TF32-rounded inputs (10-bit mantissas)
    # is beyond float32's tolerance but within TF32's; a 1% error is beyond both.
    x, w = torch.randn(64, 16, 8, 8), torch.randn(32, 16, 3, 3)
    tf32 = [(t.view(torch.int32) & ~0x1FFF).view(torch.float32) for t in (x, w)]
    expected, actual = F.conv2d(x, w, padding=1), F.conv2d(*tf32, padding=1)
    assert autocompare.judge(actual, expected)[0] is False
    assert autocompare.judge(actual, expected, tf32=True)[0] is True
    assert autocompare.judge(expected * 1.01, expected, tf32=True)[0] is False
    monkeypatch.setattr(dipu.vendor(), "native_device_type", "cpu")
    assert not autocompare._tf32("convolution_overrideable")
    monkeypatch.setattr(dipu.vendor(), "native_device_type", "cuda")
    assert autocompare._tf32("convolution_backward_overrideable") and not autocompare._tf32("add.out")
    with torch.backends.cudnn.flags(allow_tf32=False):  # (torch's test utilities forbid setting it directly)
        assert not autocompare._tf32("convolution_overrideable")


def test_rtol_and_atol_overrides(monkeypatch):
    expected = torch.randn(100)
    monkeypatch.setattr(autocompare, "RTOL", 2e-2)
    assert judged(expected * 1.01, expected) is True
    monkeypatch.setattr(autocompare, "RTOL", None)
    monkeypatch.setattr(autocompare, "ATOL", 1e-3)  # slack for a reference of (near) zeros
    assert judged(torch.full((3,), 1e-4), torch.zeros(3)) is True
    assert judged(torch.full((3,), 1e-2), torch.zeros(3)) is False


# ---- output lines, in DIPU's format --------------------------------------------------------------


def test_verbose_prints_every_output_and_the_skipped_random_ops(python):
    out = python("""
        import torch, dipu
        a = torch.arange(6.).to("dipu"); b = torch.ones(6, device="dipu")
        torch.add(a, b, out=torch.empty(6, device="dipu"))
        a + b
        torch.empty(3, device="dipu").bernoulli_(0.5)
    """, env={"DIPU_AUTOCOMPARE_OPS_LIST": "add.out, add.Tensor, bernoulli_.float",
              "DIPU_AUTOCOMPARE_VERBOSE": "1"}).stdout
    *lines, summary = out.splitlines()
    assert lines == [
        "autocompare:    bernoulli_.float: skipped (autocompare: false, e.g. a random op)",
        "autocompare:    add.out out: allclose",
        "autocompare:    add.Tensor out: allclose",
    ]
    assert summary.startswith("autocompare: 2 ops compared in 2 calls, 0 mismatches; ")
    assert " functions of op library 'torch_cpp' never ran under autocompare" in summary  # diopiAdd ran
    assert ": diopiAbs, diopiAcos, " in summary and " diopiAdd," not in summary


def test_wrong_values_and_a_mutated_input_are_reported(python, tmp_path):
    out = python("""
        import torch, dipu
        x = torch.tensor([1.0, -2.0, 3.0]).to("dipu")
        torch.neg(x)
        torch.abs(x)
        print("training goes on")
    """, env={"DIPU_AUTOCOMPARE_OPS_LIST": "neg, abs", **library_path(tmp_path, "broken_ops", BROKEN_LIBRARY)}).stdout
    first = "call #1: neg out: max rel err 2.0e+00, cosine -1.00000000, max diff 6.0e+00; args: self [3] float32"
    assert out.splitlines() == [
        "autocompare:    neg out: not_close, call #1, max rel err 2.0e+00, cosine -1.00000000, max diff 6.0e+00, "
        "dipu: [1.0, -2.0, 3.0], cpu: [-1.0, 2.0, -3.0]",
        f"autocompare: first mismatch at {first}",
        "autocompare:    abs self: not_close, call #2, the op modified this input",
        "training goes on",
        f"autocompare: 2 ops compared in 2 calls, 2 mismatches (neg -> diopiNeg x1, abs -> diopiAbs x1); "
        f"first mismatch at {first}",
    ]


def test_strict_mode_raises(python, tmp_path):
    proc = python("""
        import torch, dipu
        torch.neg(torch.ones(3, device="dipu"))
    """, check=False, env={"DIPU_AUTOCOMPARE_OPS_LIST": "neg", "DIPU_AUTOCOMPARE_STRICT": "1",
                           **library_path(tmp_path, "broken_ops", BROKEN_LIBRARY)})
    assert ("RuntimeError: autocompare: neg differs from the CPU result at call #1 (DIPU_AUTOCOMPARE_STRICT)"
            in proc.stderr)


def test_repeated_mismatches_of_one_op_are_counted_not_printed(python, tmp_path):
    out = python("""
        import torch, dipu
        x = torch.ones(3, device="dipu")
        for _ in range(15):
            torch.neg(x)
    """, env={"DIPU_AUTOCOMPARE_OPS_LIST": "neg", **library_path(tmp_path, "broken_ops", BROKEN_LIBRARY)}).stdout
    lines = out.splitlines()
    assert sum("not_close" in line for line in lines) == autocompare.PRINT_LIMIT
    assert "autocompare:    neg: further mismatches of this op are counted, not printed " \
           "(DIPU_AUTOCOMPARE_VERBOSE=1 prints all)" in lines
    assert lines[-1].startswith("autocompare: 1 ops compared in 15 calls, 15 mismatches (neg -> diopiNeg x15)")
    # Note [What autocompare checked]: the library's wrong abs was never called, and the summary says so
    assert lines[-1].endswith("; 1 functions of op library 'broken' never ran under autocompare "
                              "(not called, or their ops not compared): diopiAbs")


def test_an_input_aliasing_the_written_argument_is_not_reported_modified():
    """``t -= t`` is ``sub_(t, t)``: ``other`` changes because ``self`` is written (Note [Inputs that alias a
    written argument]), which is no mismatch; a view of the written tensor is one storage too."""
    t, u = torch.randn(5, device="dipu"), torch.randn(5, device="dipu")
    v = torch.randn(6, device="dipu")
    with dipu.autocompare(".*") as run:
        t -= t
        u.add_(u)
        v[:3].mul_(v[3:])
    assert {"sub_.Tensor", "add_.Tensor"} <= run.ops
    assert run.mismatches == [], run.mismatches
    assert t.cpu().eq(0).all()
    # an input apart from the written ones is still checked (abs of BROKEN_LIBRARY negates its input):
    # test_wrong_values_and_a_mutated_input_are_reported


# A library whose sub computes self - other + 1.
OFF_BY_ONE_SUB = """
from dipu import _C
from dipu.diopi import SUCCESS, OpLibrary
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("off_by_one_sub", base=reference)

@library.register
def diopiSub(ctx, out, input, other, alpha):
    d = ctx.device
    _C.alias(out, d).copy_(_C.alias(input, d) - alpha * _C.alias(other, d) + 1)
    return SUCCESS
"""


def test_a_wrong_kernel_on_aliased_arguments_is_still_named(python, tmp_path):
    out = python("""
        import torch, dipu
        t = torch.tensor([1.0, 2.0, 3.0]).to("dipu")
        with dipu.autocompare(".*") as run:
            t -= t
        print(sorted({(m.op, m.output) for m in run.mismatches}))
    """, env=library_path(tmp_path, "off_by_one_sub", OFF_BY_ONE_SUB)).stdout
    assert "autocompare:    sub_.Tensor self: not_close, call #1" in out
    assert out.splitlines()[-1] == "[('sub_.Tensor', 'self')]"


# The torch op library with max.dim's values right and its indices wrong: every output is compared, not the first.
WRONG_MAX_INDICES = """
from dipu import _C
from dipu.diopi import OpLibrary
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("wrong_max_indices", base=reference)

@library.register
def diopiMax(ctx, max, max_indices, input, dim):
    status = reference.get("diopiMax")(ctx, max, max_indices, input, dim)
    _C.alias(max_indices, ctx.device).add_(1)
    return status
"""


def test_a_wrong_second_output_is_named(python, tmp_path):
    out = python("""
        import torch, dipu
        x = torch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], device="dipu")
        with dipu.autocompare("max.*") as run:
            values, indices = torch.max(x, dim=1)
        print("mismatched:", sorted({(m.op, m.output) for m in run.mismatches}))
        print("values:", values.cpu().tolist())
    """, env=library_path(tmp_path, "wrong_max_indices", WRONG_MAX_INDICES)).stdout
    assert "values: [5.0, 7.0]" in out, out
    (mismatched,) = [line for line in out.splitlines() if line.startswith("mismatched:")]
    assert "max_values" in mismatched and "'max')" not in mismatched, mismatched
