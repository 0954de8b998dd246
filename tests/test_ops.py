"""The first op set matches CPU, runs on the generated kernels (no fallback), and errors like ATen."""

import pytest
import torch
import torch.nn.functional as F

import dipu
from conftest import NATIVE_DEVICE
from dipu.kernels.registry import registered_ops


def inputs():
    torch.manual_seed(0)
    return {
        "a": torch.randn(3, 4), "b": torch.randn(3, 4), "row": torch.randn(4), "pos": torch.rand(3, 4) + 0.5,
        "i": torch.randint(-5, 5, (3, 4)), "mask": torch.rand(3, 4) > 0.5, "idx": torch.tensor([2, 0, 2]),
        "m": torch.randn(4, 5), "batch": torch.randn(2, 3, 4), "batch2": torch.randn(2, 4, 5),
        "img": torch.randn(2, 3, 6, 6), "w": torch.randn(4, 3, 3, 3), "target": torch.tensor([1, 0, 3]),
    }


CASES = {
    "add": lambda t: t["a"] + t["b"],
    "add alpha broadcast": lambda t: torch.add(t["a"], t["row"], alpha=2),
    "add number": lambda t: t["a"] + 2,
    "radd number": lambda t: 2.5 + t["a"],
    "add 0-dim cpu": lambda t: t["a"] + torch.tensor(3.0),
    "add promote int+float": lambda t: t["i"] + t["a"],
    "add_ inplace": lambda t: t["a"].clone().add_(t["row"], alpha=-1),
    "add_ number": lambda t: t["a"].clone().add_(1e-3),
    "add.Scalar": lambda t: torch.ops.aten.add.Scalar(t["a"], 3),
    "sub": lambda t: t["a"] - t["b"],
    "sub number": lambda t: t["a"] - 1,
    "mul": lambda t: t["a"] * t["b"],
    "mul_ number": lambda t: t["a"].clone().mul_(0.9),
    "div": lambda t: t["a"] / t["pos"],
    "div int true": lambda t: t["i"] / 2,
    "div floor": lambda t: torch.div(t["i"], 3, rounding_mode="floor"),
    "div trunc tensor": lambda t: torch.div(t["a"], t["pos"], rounding_mode="trunc"),
    "neg abs": lambda t: (-t["a"]).abs(),
    "sqrt rsqrt": lambda t: t["pos"].sqrt() + t["pos"].rsqrt(),
    "sqrt int": lambda t: t["i"].abs().sqrt(),
    "exp log": lambda t: t["pos"].log().exp(),
    "tanh sigmoid": lambda t: t["a"].tanh() * t["a"].sigmoid(),
    "addcmul_ addcdiv_":
        lambda t: t["a"].clone().addcmul_(t["b"], t["b"], value=0.1).addcdiv_(t["a"], t["pos"], value=-2),
    "lerp_": lambda t: t["a"].clone().lerp_(t["b"], 0.3),
    "eq ne": lambda t: torch.stack([t["i"] == 1, t["i"] != t["i"][0], t["a"].eq(t["b"])]),
    "lt le gt ge": lambda t: torch.stack([t["a"] < t["b"], t["a"] <= 0, t["a"] > t["row"], t["a"] >= 0.1]),
    "where": lambda t: torch.where(t["mask"], t["a"], t["b"]),
    "where scalar": lambda t: torch.where(t["mask"], t["a"], 0.0),
    "masked_fill": lambda t: t["a"].masked_fill(t["mask"], -1.0),
    "masked_fill tensor": lambda t: t["a"].masked_fill(t["mask"], torch.tensor(5.0)),
    "triu": lambda t: t["a"].triu(1),
    "relu relu_": lambda t: torch.relu(t["a"]) + F.relu(t["b"].clone(), inplace=True),
    "gelu tanh": lambda t: F.gelu(t["a"], approximate="tanh"),
    "sum": lambda t: t["a"].sum(),
    "sum dim keepdim": lambda t: t["a"].sum(1, keepdim=True),
    "sum int": lambda t: t["i"].sum(0),
    "sum dtype": lambda t: t["a"].sum((0, 1), dtype=torch.float64),
    "mean": lambda t: t["a"].mean() + t["a"].mean(0),
    "max": lambda t: t["a"].max(),
    "max dim": lambda t: torch.cat([t["a"].max(1)[0], t["a"].max(1)[1].float()]),
    "max dim keepdim": lambda t: t["a"].max(0, keepdim=True)[0],
    "cat": lambda t: torch.cat([t["a"], t["b"], t["a"]], 1),
    "index_select": lambda t: t["a"].index_select(0, t["idx"]),
    "arange": lambda t: torch.arange(2, 11, 3, device=t["a"].device),
    "arange float": lambda t: torch.arange(0, 1, 0.25, device=t["a"].device),
    "nonzero": lambda t: t["mask"].nonzero(),
    "masked_select": lambda t: t["a"].masked_select(t["mask"]),
    "unique": lambda t: torch.cat([u.float() for u in torch.unique(t["idx"], return_inverse=True, return_counts=True)]),
    "embedding": lambda t: F.embedding(t["idx"], t["a"]),
    "mm": lambda t: t["a"] @ t["m"],
    "bmm": lambda t: t["batch"] @ t["batch2"],
    "addmm": lambda t: torch.addmm(t["row"][:1].expand(5).contiguous(), t["a"], t["m"], beta=0.5, alpha=2),
    "linear": lambda t: F.linear(t["a"], t["m"].t(), t["m"][0]),
    "softmax": lambda t: t["a"].softmax(1) + t["a"].log_softmax(0),
    "cross_entropy": lambda t: F.cross_entropy(t["a"], t["target"]),
    "nll_loss sum": lambda t: F.nll_loss(t["a"].log_softmax(1), t["target"], reduction="sum"),
    "mse_loss": lambda t: F.mse_loss(t["a"], t["b"]),
    "layer_norm": lambda t: F.layer_norm(t["a"], (4,), t["row"], t["row"]),
    "conv2d": lambda t: F.conv2d(t["img"], t["w"], t["row"], stride=2, padding=1),
    "conv2d groups": lambda t: F.conv2d(t["img"][:, :2], t["w"][:, :1], groups=2),
    "batch_norm eval": lambda t: F.batch_norm(t["img"], t["row"][:3].abs(), t["pos"][0, :3], training=False),
    "max_pool2d": lambda t: F.max_pool2d(t["img"], 2),
    "avg_pool2d": lambda t: F.avg_pool2d(t["img"], 3, stride=2, padding=1),
    "adaptive_avg_pool2d": lambda t: F.adaptive_avg_pool2d(t["img"], (2, 3)),
}


def to_dipu(t):
    return {k: v.to("dipu") for k, v in t.items()}


@pytest.mark.parametrize("name", CASES)
def test_matches_cpu_on_generated_kernels(name):
    t = inputs()
    expected = CASES[name](t)
    dipu.reset_fallback_counts()
    got = CASES[name](to_dipu(t))
    assert dipu.fallback_counts() == {}
    assert got.device.type == "dipu"
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-6)


def test_backward_of_conv_pool_norm_matches_cpu():
    def loss(t):
        x = t["img"].requires_grad_()
        y = F.conv2d(x, t["w"], None, padding=1)
        y = F.batch_norm(y, None, None, t["row"], t["row"], training=True)
        pooled = F.avg_pool2d(y, 2)
        return F.max_pool2d(y, 2).sum() + (pooled * pooled).sum(), x

    cpu_loss, cpu_x = loss(inputs())
    cpu_loss.backward()
    dipu.reset_fallback_counts()
    t = to_dipu(inputs())
    t["row"].requires_grad_()
    dipu_loss, dipu_x = loss(t)
    dipu_loss.backward()
    assert dipu.fallback_counts() == {}
    torch.testing.assert_close(dipu_x.grad.cpu(), cpu_x.grad, rtol=1e-4, atol=1e-5)


def test_out_argument_is_resized_like_aten():
    out = torch.empty(0, device="dipu")
    torch.add(torch.ones(2, 3, device="dipu"), torch.ones(3, device="dipu"), out=out)
    assert out.shape == (2, 3) and torch.equal(out.cpu(), torch.full((2, 3), 2.0))
    values, indices = torch.empty(0, device="dipu"), torch.empty(0, dtype=torch.long, device="dipu")
    torch.max(torch.tensor([[1.0, 5.0], [7.0, 2.0]]).to("dipu"), 1, out=(values, indices))
    assert values.cpu().tolist() == [5.0, 7.0] and indices.cpu().tolist() == [1, 0]


def test_inplace_broadcast_mismatch_raises_like_aten():
    with pytest.raises(RuntimeError, match=r"^add_.Tensor: output with shape \[3\] doesn't match the broadcast "
                                           r"shape \[2, 3\]$"):
        torch.ones(3, device="dipu").add_(torch.ones(2, 3, device="dipu"))


def test_mixing_devices_raises_torch_s_own_error():
    """Whichever library computes, the user reads what torch says of the same mistake on CUDA."""
    # then, as on CUDA, perhaps the argument it checked
    expected = "Expected all tensors to be on the same device, but found at least two devices, dipu:0 and cpu!"
    for mixed in (lambda: torch.ones(3, device="dipu") + torch.ones(3),
                  lambda: torch.ones(3) + torch.ones(3, device="dipu"),
                  lambda: torch.mm(torch.ones(2, 2, device="dipu"), torch.ones(2, 2))):
        with pytest.raises(RuntimeError) as raised:
            mixed()
        assert str(raised.value).startswith(expected), str(raised.value)
    assert torch.equal((torch.ones(3, device="dipu") + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))


def test_random_ops_follow_the_dipu_seed():
    def draw():
        torch.dipu.manual_seed(7)
        return torch.cat([torch.empty(5, device="dipu").uniform_(-1, 1), torch.randn(5, device="dipu"),
                          torch.empty(5, device="dipu").bernoulli_(0.5),
                          F.dropout(torch.ones(5, device="dipu"), 0.5)]).cpu()
    first, second = draw(), draw()
    assert torch.equal(first, second)
    torch.manual_seed(7)  # the vendor's native generator (the CPU's on the sim vendor, CUDA's on the CUDA one)
    native = torch.cat([torch.empty(5, device=NATIVE_DEVICE).uniform_(-1, 1), torch.randn(5, device=NATIVE_DEVICE),
                        torch.empty(5, device=NATIVE_DEVICE).bernoulli_(0.5)]).cpu()
    assert torch.equal(first[:15], native)
    dropped = first[15:]
    assert set(dropped.tolist()) <= {0.0, 2.0}


def test_the_first_op_set_is_registered():
    names = set(registered_ops())
    for name in ("add.Tensor", "add_.Tensor", "add.out", "mul.Tensor", "div.Tensor_mode", "where.self",
                 "convolution_overrideable", "native_batch_norm", "native_layer_norm", "native_dropout",
                 "embedding_dense_backward", "_log_softmax", "nll_loss_forward", "bernoulli_.float"):
        assert name in names


def test_index_put_with_whole_dims_in_the_index_list():
    """Advanced indexing after a full slice: its backward calls index_put with None entries."""
    x = torch.randn(5, 5, 5, requires_grad=True)
    xd = x.detach().to("dipu").requires_grad_()
    x[:, :, [0, 3]].square().sum().backward()
    xd[:, :, [0, 3]].square().sum().backward()
    assert torch.equal(xd.grad.cpu(), x.grad)
    y, idx = torch.zeros(4, 4), torch.tensor([1, 2])
    got = torch.ops.aten.index_put(y.to("dipu"), [None, idx.to("dipu")], torch.tensor(2.0, device="dipu"), True)
    assert torch.equal(got.cpu(), torch.ops.aten.index_put(y, [None, idx], torch.tensor(2.0), True))
