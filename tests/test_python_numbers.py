"""Python numbers where a schema says Tensor (Note [Python numbers in Tensor positions], dipu/kernels/support.py).

torch hands Python kernels wrapped numbers as plain numbers: `torch.add(2, x)`, `2 - x`, and C++
composites such as rsub or multilabel_soft_margin_loss. Every generated wrapper accepts them in any
Tensor position, natively (no CPU fallback), with the CPU's values and dtypes: a wrapped number
promotes by category only (`torch.add(2.5, int32)` is float32, `torch.add(2, int32)` int32).
"""

import pytest
import torch
import torch.nn.functional as F

import dipu

X = torch.tensor([[1.5, -2.0, 3.0], [0.25, 4.0, -0.5]])
XI = torch.tensor([[1, -2, 3], [4, 5, -7]], dtype=torch.int32)
TARGET = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])

CALLS = {
    "add(2, x, alpha=0.3)": lambda x, xi: torch.add(2, x, alpha=0.3),
    "div(2, x)": lambda x, xi: torch.div(2, x),
    "rsub(x, 2)": lambda x, xi: torch.rsub(x, 2),
    "rsub(int32, 2.5)": lambda x, xi: torch.rsub(xi, 2.5),
    "2 - x": lambda x, xi: 2 - x,
    "2.5 - int32": lambda x, xi: 2.5 - xi,
    "add(2, int32)": lambda x, xi: torch.add(2, xi),
    "add(2.5, int32)": lambda x, xi: torch.add(2.5, xi),
    "add(2, int32 0-dim)": lambda x, xi: torch.add(2, xi[0, 0]),
    "add(2.5, int32 0-dim)": lambda x, xi: torch.add(2.5, xi[0, 0]),
    "add(True, bool)": lambda x, xi: torch.add(True, xi > 0),
    "add(2, bool)": lambda x, xi: torch.add(2, xi > 0),
    "add(1j, int32)": lambda x, xi: torch.add(1j, xi),
    "add(2., float64)": lambda x, xi: torch.add(2.0, x.double()),
    "mul(2.5, float16)": lambda x, xi: torch.mul(2.5, x.half()),
    "sub(2, int32, alpha=2)": lambda x, xi: torch.sub(2, xi, alpha=2),
    "true_divide(7, int32)": lambda x, xi: torch.true_divide(7, xi),
    "div(7, int32, floor)": lambda x, xi: torch.div(7, xi, rounding_mode="floor"),
    "floor_divide(7, int32)": lambda x, xi: torch.floor_divide(7, xi),
    "bitwise_and(3, int32)": lambda x, xi: torch.bitwise_and(3, xi),
    "xlogy(2., x)": lambda x, xi: torch.xlogy(2.0, x.abs()),
    "multilabel_soft_margin_loss": lambda x, xi: F.multilabel_soft_margin_loss(x, TARGET.to(x.device)),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_number_in_a_tensor_position_matches_cpu(call):
    expected = call(X, XI)
    dipu.reset_fallback_counts()
    actual = call(X.to("dipu"), XI.to("dipu"))
    assert dipu.fallback_counts() == {}
    assert actual.device.type == "dipu"
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


def test_a_number_in_a_later_tensor_position_reaches_the_kernel_as_a_tensor():
    # maximum has no scalar_interface: the number fails inside the wrapper, which retries with a tensor
    from dipu._generated import OPS
    from dipu.diopi.library import load_library

    op = next(op for op in OPS if op.name == "maximum")
    kernel = op.make(op, *(load_library("torch").get(f) for f in op.functions))
    assert kernel(XI.to("dipu"), 2).dtype == torch.int32
    assert torch.equal(kernel(XI.to("dipu"), 2).cpu(), torch.maximum(XI, torch.tensor(2, dtype=torch.int32)))
    assert torch.equal(kernel(2.5, XI.to("dipu")).cpu(), torch.maximum(XI.float(), torch.tensor(2.5)))


def test_errors_unrelated_to_numbers_are_unchanged():
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        XI.to("dipu").mul_(2.5)
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        torch.add(torch.ones(3, device="dipu"), torch.ones(4, device="dipu"))


FLOAT_ONLY_SCALAR_ADD = """
import torch
from dipu.diopi import OpLibrary
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("float_scalar_add", base=reference)
library.register(reference.functions["diopiAddScalar"], dtypes=(torch.float32,))
"""


def test_a_scalar_function_refusing_a_dtype_falls_back_with_the_number(tmp_path, python):
    # The dtype guard of a scalar function answers FORCE_FALLBACK for int64: the CPU fallback then gets
    # the Python number (a Tensor parameter of add_.Tensor) as a 0-dim tensor, as BatchNorm's
    # num_batches_tracked.add_(1) needs in every training step.
    (tmp_path / "float_scalar_add.py").write_text(FLOAT_ONLY_SCALAR_ADD)
    out = python("""
        import torch, dipu
        steps = torch.zeros(3, dtype=torch.long, device="dipu")
        steps.add_(1)
        steps += 2
        print(steps.cpu().tolist(), (steps + 1).dtype)
        bn = torch.nn.BatchNorm1d(4).to("dipu")
        bn(torch.randn(8, 4, device="dipu")).sum().backward()
        print(int(bn.num_batches_tracked), dipu.fallback_counts().get("add_.Tensor", 0) > 0)
    """, env={"DIPU_DIOPI_IMPL": "float_scalar_add", "PYTHONPATH": str(tmp_path)}).stdout
    assert out.splitlines() == ["[3, 3, 3] torch.int64", "1 True"]
