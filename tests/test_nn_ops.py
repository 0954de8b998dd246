"""Reductions, sorting, indexing, joining, shape ops, nn layers and losses run on dipu kernels (no CPU
fallback) through the public torch API, functional, in place, with out= and under autograd, and match CPU."""

import copy
import re

import pytest
import torch
import torch.nn.functional as F

import dipu
from conftest import NATIVE_DEVICE


def inputs():
    g = torch.Generator().manual_seed(0)
    return {
        "x": torch.randn(3, 4, 5, generator=g), "v": torch.randn(5, generator=g),
        "i": torch.randint(-4, 5, (3, 4, 5), generator=g), "idx": torch.tensor([2, 0, 2]),
        "img": torch.randn(2, 3, 6, 7, generator=g), "q": torch.randn(2, 4, 8, 16, generator=g),
        "scatter_index": torch.randint(0, 3, (3, 4, 5), generator=g), "mask": torch.rand(3, 4, 5, generator=g) > 0.5,
        "seq": torch.arange(-3.0, 3.0, 0.5), "prob": torch.rand(2, 3, 6, 7, generator=g),
        "classes": torch.randint(0, 3, (2, 6, 7), generator=g), "vol": torch.randn(1, 2, 4, 5, 6, generator=g),
        "grid": torch.rand(2, 4, 5, 2, generator=g) * 2.2 - 1.1, "w": torch.randn(3, 2, 3, 3, generator=g),
        "sq": torch.randn(3, 4, 4, generator=g, dtype=torch.float64),
        "spd": torch.eye(4, dtype=torch.float64) * 4 + torch.full((4, 4), 0.5, dtype=torch.float64),
        # A plain scatter keeps whichever write to a repeated index lands last, which CUDA leaves undefined:
        # its index is a permutation along dim 0 (each column a rotation of 0, 1, 2).
        "perm_index": torch.stack([torch.arange(3).roll(k) for k in range(20)], 1).view(3, 4, 5),
    }


def _svd(a):
    # Factors whose columns (and the matching rows) LAPACK and cuSOLVER may choose with other signs: their
    # magnitudes, and their product, which does not depend on the choice.
    u, s, vh = torch.linalg.svd(a)
    return u.abs(), s, vh.abs(), (u * s.unsqueeze(-2)) @ vh


def _qr(a):
    q, r = torch.linalg.qr(a)
    return q.abs(), r.abs(), q @ r


def _eigh(a):
    # spd's eigenvalue 4 is threefold, so only its span is defined: the eigenvalues, the matrix they rebuild
    # and the one simple eigenvector (the last) up to sign.
    values, vectors = torch.linalg.eigh(a)
    return values, (vectors * values.unsqueeze(-2)) @ vectors.mT, vectors[..., -1].abs()


CASES = {
    # reductions
    "prod dim": lambda t: t["x"].prod(1), "prod all int": lambda t: t["i"].prod(),
    "amax": lambda t: t["x"].amax((0, 2)),
    "amin keepdim": lambda t: t["x"].amin(1, keepdim=True), "min dim": lambda t: t["x"].min(1),
    "min/max all": lambda t: (t["x"].min(), t["x"].max()), "argmax": lambda t: t["x"].argmax(),
    "argmax dim": lambda t: t["x"].argmax(1, keepdim=True), "argmin dim": lambda t: t["i"].argmin(2),
    "any/all": lambda t: ((t["x"] > 0).any(1), (t["x"] > -9).all(), t["i"].any()),
    "norm": lambda t: (t["x"].norm(), t["x"].norm(p=1, dim=1), torch.linalg.vector_norm(t["x"], float("inf"), (0, 2))),
    "var/std": lambda t: (t["x"].var(1), t["x"].std(), t["x"].var(0, unbiased=False, keepdim=True)),
    "var_mean/std_mean": lambda t: (*torch.var_mean(t["x"], 1), *torch.std_mean(t["x"], correction=0)),
    "logsumexp": lambda t: t["x"].logsumexp(1), "cumsum/cumprod": lambda t: (t["x"].cumsum(1), t["i"].cumsum(0),
                                                                              t["x"].cumprod(2)),
    "cummax/cummin": lambda t: (*t["x"].cummax(1), *t["i"].cummin(0)), "median": lambda t: (*t["x"].median(1),
                                                                                            t["x"].median()),
    "aminmax": lambda t: (*torch.aminmax(t["x"]), *torch.aminmax(t["x"], dim=1)),
    "count_nonzero/trace": lambda t: (torch.count_nonzero(t["i"], 1), t["x"][0].trace()),
    "histc/bincount": lambda t: (t["x"].histc(7), (t["i"].flatten() + 4).bincount()),
    # sorting and searching
    "sort": lambda t: (*t["x"].sort(1), *t["i"].sort(stable=True, dim=0, descending=True)),
    "topk/kthvalue": lambda t: (*t["x"].topk(2), *t["x"].kthvalue(2, 1)),
    "searchsorted/bucketize": lambda t: (torch.searchsorted(t["seq"], t["x"]), torch.bucketize(t["x"], t["seq"])),
    "unique": lambda t: (*torch.unique(t["i"], return_inverse=True, return_counts=True),
                         *torch.unique(t["i"] % 2, dim=0, return_inverse=True)),
    "unique_consecutive": lambda t: torch.unique_consecutive(t["i"].flatten() // 3, return_counts=True),
    # indexing
    "index": lambda t: (t["x"][t["idx"]], t["x"][:, t["idx"].cpu()], t["x"][t["mask"]], t["x"][..., t["idx"], None]),
    "index put": lambda t: _setitem(t["x"].clone(), t["idx"], 1.5),
    "index put accumulate": lambda t: t["x"].clone().index_put_((t["idx"],), torch.ones_like(t["x"][:3]), True),
    "index put mask": lambda t: _setitem(t["x"].clone(), t["mask"], 0.0),
    "scatter": lambda t: (t["x"].scatter(0, t["perm_index"], t["x"] * 2), t["x"].scatter(0, t["scatter_index"], 3.0),
                          t["x"].scatter_add(0, t["scatter_index"], t["x"]),
                          t["x"].scatter_reduce(0, t["scatter_index"], t["x"], "amax", include_self=False)),
    "scatter_ inplace": lambda t: t["x"].clone().scatter_(1, t["scatter_index"], 1.0, reduce="multiply"),
    "gather": lambda t: t["x"].gather(0, t["scatter_index"]),
    "index_add/copy/fill": lambda t: (t["x"].index_add(1, t["idx"], torch.ones_like(t["x"][:, :3]), alpha=2),
                                      t["x"].index_copy(0, t["idx"][:2] - 1 + 1, t["x"][:2]),
                                      t["x"].index_fill(2, t["idx"], -1.0),
                                      t["x"].clone().index_fill_(1, t["idx"], t["x"].new_tensor(7.0))),
    "masked_scatter/take/put": lambda t: (t["x"].masked_scatter(t["mask"], -t["x"]), t["x"].take(t["idx"] * 9),
                                          t["x"].clone().put_(t["idx"], t["v"][:3], accumulate=True)),
    "repeat_interleave": lambda t: (t["x"].repeat_interleave(2, dim=1), torch.repeat_interleave(t["idx"])),
    # joining, shape ops, creation, linear algebra
    "stack/flip/roll": lambda t: (torch.stack([t["x"], t["x"]], 1), t["x"].flip(0, 2), t["x"].roll(2, 1)),
    "repeat/tile/tril": lambda t: (t["x"].repeat(2, 1, 1), t["v"].tile(3), t["x"].tril(1), t["x"].clone().tril_(-1)),
    "pads": lambda t: (F.pad(t["img"], (1, 2, 3, 4), value=2.0), F.pad(t["img"], (1, 2, 3, 4), mode="reflect"),
                       F.pad(t["img"], (1, 2, 3, 4), mode="replicate"), F.pad(t["x"], (1, 2), mode="circular")),
    "interpolate": lambda t: (F.interpolate(t["img"], scale_factor=2),
                              F.interpolate(t["img"], size=(9, 11), mode="bilinear"),
                              F.interpolate(t["x"], scale_factor=1.5, mode="linear", align_corners=True)),
    "unfold/fold": lambda t: F.fold(F.unfold(t["img"], 3, padding=1), (6, 7), 3, padding=1),
    "dot/mv/outer/addr": lambda t: (t["v"].dot(t["v"]), t["x"][0].mv(t["v"]), torch.outer(t["v"], t["v"]),
                                    torch.addr(t["x"][0, :, :4], t["v"][:4], t["v"][:4], beta=0.5)),
    "addmv/addbmm/baddbmm": lambda t: (torch.addmv(t["v"][:4], t["x"][0], t["v"]),
                                       torch.addbmm(t["x"][0, :, :4], t["x"], t["x"].transpose(1, 2)),
                                       torch.baddbmm(t["x"][:, :, :4], t["x"], t["x"].transpose(1, 2), alpha=2)),
    # nn layers and losses
    "group_norm": lambda t: F.group_norm(t["img"], 3, t["v"][:3], t["v"][1:4]),
    "adaptive_max_pool2d": lambda t: F.adaptive_max_pool2d(t["img"], (2, 3), return_indices=True),
    "cross_entropy 2d": lambda t: F.cross_entropy(t["img"], t["classes"]),
    "smooth_l1/huber/l1": lambda t: (F.smooth_l1_loss(t["img"], t["prob"], beta=0.5),
                                     F.huber_loss(t["img"], t["prob"], delta=0.5, reduction="none"),
                                     F.l1_loss(t["img"], t["prob"])),
    "bce": lambda t: (F.binary_cross_entropy(t["prob"].clamp(0.05, 0.95), t["prob"].round()),
                      F.binary_cross_entropy_with_logits(t["img"], t["prob"], pos_weight=t["v"][:1].abs() + 1)),
    "kl_div": lambda t: F.kl_div(t["img"].log_softmax(1), t["prob"].softmax(1), reduction="batchmean"),
    "sdpa": lambda t: F.scaled_dot_product_attention(t["q"], t["q"], t["q"], is_causal=True),
    "conv_transpose2d": lambda t: (F.conv_transpose2d(t["img"], t["w"], stride=2, padding=1, output_padding=1),
                                   F.conv_transpose2d(t["img"][:, :2], t["w"][:2], t["v"][:4], groups=2, dilation=2),
                                   F.conv_transpose1d(t["x"], t["x"].transpose(0, 1)[:, :2, :3])),
    "nan reductions": lambda t: (_nans(t["x"]).nansum(1), _nans(t["x"]).nanmean(), *_nans(t["x"]).nanmedian(2),
                                 _nans(t["x"]).nanmedian(), *t["i"].mode(1)),
    "logcumsumexp/cross/renorm": lambda t: (t["x"].logcumsumexp(1),
                                            torch.linalg.cross(t["x"][..., :3], t["x"][..., 2:]),
                                            t["x"].renorm(2, 0, 1.0)),
    "index_reduce": lambda t: t["x"].index_reduce(0, t["idx"], t["x"], "amax", include_self=False),
    "pool3d": lambda t: (*F.max_pool3d(t["vol"], 2, return_indices=True), F.avg_pool3d(t["vol"], 2, ceil_mode=True),
                         F.adaptive_avg_pool3d(t["vol"], 3), F.local_response_norm(t["img"], 2)),
    "resample": lambda t: (F.interpolate(t["vol"], scale_factor=2),
                           F.interpolate(t["vol"], size=(5, 6, 7), mode="trilinear"),
                           F.interpolate(t["img"], scale_factor=2, mode="bicubic"),
                           F.interpolate(t["img"], scale_factor=1.7, mode="nearest-exact")),
    "grid_sample": lambda t: F.grid_sample(t["img"], t["grid"], mode="bilinear", padding_mode="border",
                                           align_corners=False),
    "cdist/pdist": lambda t: (torch.cdist(t["x"], t["x"] * 2), torch.cdist(t["x"], t["x"], p=1), F.pdist(t["x"][0])),
    "embedding_bag": lambda t: (F.embedding_bag(t["idx"], t["x"][0],
                                                torch.zeros(1, dtype=torch.long, device=t["idx"].device)),
                                F.embedding_bag(t["idx"].reshape(1, 3), t["x"][0], mode="max")),
    "multi_margin/max_unpool": lambda t: (F.multi_margin_loss(t["x"][0], t["idx"][:4].repeat(2)[:4], p=2, margin=0.5),
                                          F.max_unpool2d(*F.max_pool2d(t["img"], 2, return_indices=True), 2,
                                                        output_size=t["img"].shape[-2:])),
    "linalg": lambda t: (torch.linalg.inv(t["spd"]), torch.linalg.det(t["sq"]), *torch.linalg.slogdet(t["sq"]),
                         torch.linalg.cholesky(t["spd"]), *_svd(t["sq"]), *_qr(t["x"][:, :, :3]),
                         torch.linalg.solve(t["spd"], t["sq"][:, :, :2]), *_eigh(t["spd"]),
                         *torch.linalg.lu_factor(t["sq"]),
                         torch.linalg.solve_triangular(t["spd"].triu(), t["sq"], upper=True)),
    "weight_norm/multilabel": lambda t: (torch._weight_norm(t["x"], t["x"].norm(dim=(1, 2), keepdim=True), 0),
                                         F.multilabel_margin_loss(t["x"][0], t["idx"][:1].repeat(4, 5) - 1)),
}


def _nans(x):
    return x.masked_fill(x < -1, float("nan"))


def _setitem(x, index, value):
    x[index] = value
    return x


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


def _check(expected, actual):
    if isinstance(expected, (tuple, list)):
        assert len(expected) == len(actual)
        for e, a in zip(expected, actual):
            _check(e, a)
        return
    assert actual.device.type == "dipu"
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_cpu_without_fallback(name):
    cpu_inputs = inputs()
    expected = CASES[name](cpu_inputs)
    dev_inputs = _to(inputs(), "dipu")
    dipu.reset_fallback_counts()
    actual = CASES[name](dev_inputs)
    assert dipu.fallback_counts() == {}
    _check(expected, actual)


def test_out_variants_write_into_given_tensors():
    t = _to(inputs(), "dipu")
    dipu.reset_fallback_counts()
    out = torch.empty(0, device="dipu")
    assert torch.cumsum(t["x"], 1, out=out) is out and out.shape == (3, 4, 5)
    values, indices = torch.empty(0, device="dipu"), torch.empty(0, dtype=torch.long, device="dipu")
    torch.sort(t["x"], 1, out=(values, indices))
    torch.testing.assert_close(values.cpu(), inputs()["x"].sort(1).values)
    argmax = torch.empty(0, dtype=torch.long, device="dipu")
    torch.argmax(t["x"], 1, out=argmax)
    assert argmax.cpu().equal(inputs()["x"].argmax(1))
    gathered = torch.empty(0, device="dipu")
    torch.gather(t["x"], 0, t["scatter_index"], out=gathered)
    assert gathered.cpu().equal(inputs()["x"].gather(0, inputs()["scatter_index"]))
    created = (torch.linspace(0, 1, 5, device="dipu"), torch.eye(3, 2, device="dipu"), torch.arange(4, device="dipu"),
               torch.logspace(0, 2, 3, device="dipu"))
    for got, want in zip(created, (torch.linspace(0, 1, 5), torch.eye(3, 2), torch.arange(4), torch.logspace(0, 2, 3))):
        assert got.device.type == "dipu" and got.cpu().equal(want)
    assert dipu.fallback_counts() == {}


BACKWARD = {
    "index": lambda x: x[torch.tensor([0, 0, 1], device=x.device)] * 2,
    "gather/scatter": lambda x: x.gather(1, torch.zeros(2, 3, 6, 7, dtype=torch.long, device=x.device)).scatter_add(
        0, torch.ones(2, 3, 6, 7, dtype=torch.long, device=x.device), x),
    "pad reflect": lambda x: F.pad(x, (1, 2, 3, 1), mode="reflect"),
    "pad replicate": lambda x: F.pad(x, (1, 2, 3, 1), mode="replicate"),
    "upsample nearest": lambda x: F.interpolate(x, scale_factor=2),
    "upsample bilinear": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
    "group norm": lambda x: F.group_norm(x, 3) * torch.arange(7.0, device=x.device),
    "adaptive max pool": lambda x: F.adaptive_max_pool2d(x, 3),
    "smooth l1": lambda x: F.smooth_l1_loss(x, torch.zeros_like(x)),
    "huber": lambda x: F.huber_loss(x, torch.ones_like(x), delta=0.3),
    "bce": lambda x: F.binary_cross_entropy(x.sigmoid(), torch.full_like(x, 0.3)),
    "bce with logits": lambda x: F.binary_cross_entropy_with_logits(x, torch.ones_like(x)),
    "cross entropy 2d": lambda x: F.cross_entropy(x, torch.ones(2, 6, 7, dtype=torch.long, device=x.device)),
    "sort/topk/cumsum": lambda x: x.sort(1).values.cumsum(2) + x.topk(2, 3).values.sum(),
    "norm/var/logsumexp": lambda x: x.norm(dim=1) + x.var(1) + x.logsumexp(1),
    "sdpa": lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True),
    "conv transpose": lambda x: F.conv_transpose2d(x, torch.linspace(-1, 1, 54, device=x.device).reshape(3, 2, 3, 3),
                                                   stride=2, padding=1, output_padding=1),
    "3d pools": lambda x: F.max_pool3d(x, 2) * 2 + F.avg_pool3d(x, 2).sum() + F.adaptive_avg_pool3d(x, 2).sum(),
    "resample": lambda x: F.interpolate(x, scale_factor=2, mode="bicubic").sum()
    + F.interpolate(x, scale_factor=1.5, mode="nearest-exact").sum()
    + F.interpolate(x.unsqueeze(0), scale_factor=2, mode="trilinear").sum()
    + F.interpolate(x.unsqueeze(0), scale_factor=2).sum() + F.interpolate(x.flatten(2), scale_factor=2).sum()
    + F.interpolate(x.flatten(2), scale_factor=2, mode="linear").sum(),
    "grid sample": lambda x: F.grid_sample(
        x, torch.linspace(-1.1, 1.1, 2 * 4 * 5 * 2, device=x.device).reshape(2, 4, 5, 2), align_corners=True),
    "cdist/pdist": lambda x: torch.cdist(x, x * 2 + 1).sum() + F.pdist(x[0, 0]).sum(),
    "embedding bag": lambda x: sum(F.embedding_bag(torch.tensor([[0, 2, 1], [3, 3, 0]], device=x.device), x[0, 0],
                                                   mode=m, padding_idx=p).sum()
                                   for m, p in (("sum", None), ("mean", 1), ("max", None))),
    "multi margin": lambda x: F.multi_margin_loss(x[0, 0], torch.arange(6, device=x.device) % 7, p=2),
    "weight norm": lambda x: torch._weight_norm(x, x.flatten(1).norm(dim=1).reshape(2, 1, 1, 1) * 2, 0),
    "linalg": lambda x: torch.linalg.det(x[0, :, :3, :3]) + torch.linalg.inv(x[0, :, :3, :3]).sum()
    + torch.linalg.svdvals(x[0]).sum() + torch.linalg.qr(x[0]).R.sum(),
}


def test_embedding_max_norm_renormalizes_rows_in_place():
    torch.manual_seed(0)
    cpu = torch.nn.Embedding(10, 3, max_norm=1.0)
    dev = torch.nn.Embedding(10, 3, max_norm=1.0).to("dipu")
    dev.weight.data.copy_(cpu.weight.data)
    index = torch.tensor([1, 2, 2, 5])
    dipu.reset_fallback_counts()
    torch.testing.assert_close(dev(index.to("dipu")).cpu(), cpu(index))
    torch.testing.assert_close(dev.weight.detach().cpu(), cpu.weight.detach())
    assert dipu.fallback_counts() == {}


@pytest.mark.parametrize("name", list(BACKWARD))
def test_backward_matches_cpu_without_fallback(name):
    base = inputs()["img"]
    grads = []
    for device in ("cpu", "dipu"):
        x = base.to(device).detach().requires_grad_()
        dipu.reset_fallback_counts()
        BACKWARD[name](x).sum().backward()
        if device == "dipu":
            assert dipu.fallback_counts() == {}
        grads.append(x.grad)
    torch.testing.assert_close(grads[1].cpu(), grads[0], rtol=1e-4, atol=1e-5)


def test_errors_match_aten():
    x = torch.randn(3, 4, device="dipu")
    with pytest.raises(RuntimeError):
        torch.empty(0, device="dipu").amax()
    if NATIVE_DEVICE != "cpu":
        return  # CUDA checks indices on the device: a device-side assert, as native CUDA's, ends the process's CUDA
    with pytest.raises(IndexError):
        x[torch.tensor([5], device="dipu")]
    with pytest.raises(RuntimeError):
        x.gather(0, torch.tensor([[7]], device="dipu"))


def test_ctc_loss_embedding_bag_weights_and_adaptive_max_pool3d_train_on_dipu():
    g = torch.Generator().manual_seed(0)
    log_probs, weight = torch.randn(6, 2, 5, generator=g).log_softmax(2), torch.randn(10, 3, generator=g)
    per_sample, volume = torch.rand(6, generator=g), torch.randn(1, 2, 5, 6, 7, generator=g)
    targets, bags = torch.tensor([[1, 2, 2], [3, 1, 0]]), torch.tensor([1, 2, 3, 1, 0, 5])

    def run(device):
        leaves = [t.to(device).detach().requires_grad_() for t in (log_probs, weight, per_sample, volume)]
        lp, w, psw, vol = leaves
        loss = F.ctc_loss(lp, targets.to(device), torch.tensor([6, 5]), torch.tensor([3, 2]), zero_infinity=True)
        loss = loss + F.embedding_bag(bags.to(device), w, torch.tensor([0, 2], device=device), per_sample_weights=psw,
                                      mode="sum").pow(2).sum()
        loss = loss + F.adaptive_max_pool3d(vol, (2, 3, 4)).sum()
        loss.backward()
        return [loss] + [leaf.grad for leaf in leaves]

    expected = run("cpu")
    dipu.reset_fallback_counts()
    actual = run("dipu")
    assert dipu.fallback_counts() == {}
    _check(expected, actual)


@pytest.mark.parametrize("cls, kwargs", [
    (torch.nn.LSTM, {"num_layers": 2, "bidirectional": True}), (torch.nn.LSTM, {"bias": False, "proj_size": 3}),
    (torch.nn.GRU, {"num_layers": 2}), (torch.nn.GRU, {"bias": False, "batch_first": True}),
])
def test_recurrent_layers_train_on_dipu(cls, kwargs):
    """LSTM/GRU use the fused cells off the CPU, which the CPU cannot run: they must never fall back."""
    torch.manual_seed(0)
    cpu = cls(8, 6, **kwargs).double()
    dev = cls(8, 6, **kwargs).double().to("dipu")
    dev.load_state_dict(cpu.state_dict())
    x = torch.randn(5, 2, 8, dtype=torch.float64)
    dipu.reset_fallback_counts()
    results = []
    for module, inp in ((cpu, x.clone().requires_grad_()), (dev, x.to("dipu").requires_grad_())):
        out, state = module(inp)
        hidden = state[0] if isinstance(state, tuple) else state
        (out.sum() + hidden.pow(2).sum()).backward()
        results.append([out, hidden, inp.grad] + [p.grad for p in module.parameters()])
    assert dipu.fallback_counts() == {}
    _check(results[0], results[1])


@pytest.mark.parametrize("cls", [torch.nn.GRU, torch.nn.LSTM, torch.nn.GRUCell, torch.nn.LSTMCell])
def test_recurrent_modules_of_module_info_agree_with_the_cpu_in_float32(cls):
    """Every training sample PyTorch's ModuleInfo lists for the recurrent modules, float32: outputs and every
    parameter's gradient agree with the CPU's within torch's float32 tolerance (rtol 1.3e-6, atol 1e-5). Not bit
    for bit: ATen itself computes them another way off the CPU (Note [Fused recurrent cells])."""
    from torch.testing._internal.common_modules import module_db
    from torch.testing._internal.common_utils import TestCase
    from torch.utils._pytree import tree_map

    info = next(m for m in module_db if m.module_cls is cls)
    samples = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=True, training=True)
    assert samples
    for k, sample in enumerate(samples):
        torch.manual_seed(k)
        cpu = cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
        dev = copy.deepcopy(cpu).to("dipu")
        results = []
        for module, device in ((cpu, "cpu"), (dev, "dipu")):
            args = tree_map(lambda a: a.detach().to(device).requires_grad_(a.requires_grad)
                            if isinstance(a, torch.Tensor) else a, sample.forward_input.args)
            out = module(*args, **sample.forward_input.kwargs)
            out = out[0] if isinstance(out, tuple) else out
            out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device))
            results.append([out] + [p.grad for p in module.parameters()])
        TestCase().assertEqual(results[1], results[0], exact_device=False,
                               msg=f"{cls.__name__}{sample.constructor_input.kwargs}")


def _check_like_cpu(expected, actual, rtol=1e-4, atol=1e-5):
    """Values, and the metadata a user sees: shape, dtype, strides."""
    if isinstance(expected, (tuple, list)):
        assert len(expected) == len(actual)
        for e, a in zip(expected, actual):
            _check_like_cpu(e, a, rtol, atol)
        return
    assert actual.device.type == "dipu"
    assert (actual.shape, actual.dtype, actual.stride()) == (expected.shape, expected.dtype, expected.stride())
    torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype, param_dtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                                                (torch.bfloat16, torch.float32)])
def test_native_batch_norm_statistics_match_cpu(training, dtype, param_dtype):
    """Evaluation saves no statistics (shape [0]); reduced-precision inputs keep them in their own dtype."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 4, generator=g).to(dtype)
    weight, bias = torch.randn(3, generator=g).to(param_dtype), torch.randn(3, generator=g).to(param_dtype)
    running = (torch.randn(3, generator=g).to(param_dtype), torch.rand(3, generator=g).to(param_dtype) + 0.5)

    def run(device):
        args = [t.to(device, copy=True) for t in (x, weight, bias, *running)]
        return (*torch.native_batch_norm(*args, training, 0.1, 1e-5), args[3], args[4])

    tolerance = {} if dtype is torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    _check_like_cpu(run("cpu"), run("dipu"), **tolerance)


def test_batch_norm_backward_in_eval_mode_matches_cpu():
    g = torch.Generator().manual_seed(0)
    tensors = (torch.randn(2, 3, 4, 4, generator=g), torch.randn(3, generator=g), torch.randn(3, generator=g))
    running = (torch.randn(3, generator=g), torch.rand(3, generator=g) + 0.5)
    results = []
    for device in ("cpu", "dipu"):
        x, weight, bias = (t.to(device).detach().requires_grad_() for t in tensors)
        out = F.batch_norm(x, *(r.to(device) for r in running), weight, bias, training=False)
        (out * torch.arange(4.0, device=device)).sum().backward()
        results.append((out, x.grad, weight.grad, bias.grad))
    _check_like_cpu(*results)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("param_dtype", [None, "same", torch.float32])
def test_layer_and_group_norm_statistics_keep_the_cpu_dtype(dtype, param_dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 3, 5, generator=g).to(dtype)
    param = (None if param_dtype is None
             else torch.randn(4, generator=g).to(dtype if param_dtype == "same" else param_dtype))

    def run(device):
        p = None if param is None else param.to(device)
        tail = None if param is None else torch.ones(3, 5, dtype=p.dtype, device=device)
        return (*torch.native_layer_norm(x.to(device), [3, 5], tail, tail, 1e-5),
                *torch.native_group_norm(x.to(device), p, p, 2, 4, 15, 2, 1e-5))

    _check_like_cpu(run("cpu"), run("dipu"), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("shapes", [((2, 5, 3), (4, 3)), ((2, 5, 3), (1, 4, 3)), ((5, 3), (2, 4, 3)),
                                    ((3, 1, 5, 3), (2, 4, 3))])
@pytest.mark.parametrize("op", ["cdist", "mse", "smooth_l1", "huber"])
def test_backward_through_broadcast_batch_matches_cpu(op, shapes):
    """Backward kernels write the broadcast shape, as the CPU's do; autograd sums it back to each input."""
    aten = torch.ops.aten
    functions = {
        "cdist": lambda a, b: torch.cdist(a, b, p=1.5),
        "mse": lambda a, b: aten.mse_loss(a, b[..., :1, :], 0),  # aten broadcasts; F.mse_loss expands first
        "smooth_l1": lambda a, b: aten.smooth_l1_loss(a, b[..., :1, :], 0, 0.5),
        "huber": lambda a, b: aten.huber_loss(a, b[..., :1, :], 0, 0.5),
    }
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(*shapes[0], generator=g), torch.randn(*shapes[1], generator=g)
    results = []
    for device in ("cpu", "dipu"):
        a, b = (t.to(device).detach().requires_grad_() for t in (x1, x2))
        dipu.reset_fallback_counts()
        out = functions[op](a, b)
        (out * torch.linspace(-1, 1, out.numel(), device=device).reshape(out.shape)).sum().backward()
        assert dipu.fallback_counts() == {}
        results.append((out, a.grad, b.grad))
    _check_like_cpu(*results)


_CL = torch.channels_last
_aten = torch.ops.aten


def _channel(w, i):
    # contiguous: torch's CPU channels_last batch-norm backward mishandles a strided weight (torch 2.13)
    return w[i, :, 0, 0].contiguous()


MEMORY_FORMAT_CASES = {
    "conv2d": lambda x, w: F.conv2d(x, w, padding=1),
    "conv2d channels_last weight": lambda x, w: F.conv2d(x.contiguous(), w.contiguous(memory_format=_CL)),
    "conv_transpose2d": lambda x, w: F.conv_transpose2d(x, w.transpose(0, 1), stride=2),
    "conv backward": lambda x, w: _aten.convolution_backward(
        torch.ones(2, 3, 6, 7, device=x.device).contiguous(memory_format=_CL), x, w, [3], [1, 1], [1, 1], [1, 1],
        False, [0, 0], 1, [True, True, True]),
    "conv3d": lambda x, w: F.conv3d(x.unsqueeze(2).contiguous(memory_format=torch.channels_last_3d),
                                    w.unsqueeze(2), padding=(0, 1, 1)),
    "batch_norm": lambda x, w: _aten.native_batch_norm(x, _channel(w, 0), None, None, None, True, 0.1, 1e-5),
    "batch_norm eval": lambda x, w: F.batch_norm(x, _channel(w, 0), _channel(w, 1).abs() + 1),
    "batch_norm backward": lambda x, w: _aten.native_batch_norm_backward(
        x.flip(3), x, _channel(w, 0), None, None,
        *_aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)[1:],
        True, 1e-5, [True, True, True]),
    "max_pool2d": lambda x, w: F.max_pool2d(x, 2, return_indices=True),
    "max_pool2d backward": lambda x, w: _aten.max_pool2d_with_indices_backward(
        *(lambda o, i: (o * 2, x, [2, 2], [2, 2], [0, 0], [1, 1], False, i))(*F.max_pool2d(x, 2, return_indices=True))),
    "avg_pool2d": lambda x, w: (F.avg_pool2d(x, 2), _aten.avg_pool2d_backward(
        F.avg_pool2d(x, 2), x, [2, 2], [2, 2], [0, 0], False, True, None)),
    "adaptive pools": lambda x, w: (F.adaptive_avg_pool2d(x, 3), *F.adaptive_max_pool2d(x, 3, return_indices=True),
                                    _aten._adaptive_avg_pool2d_backward(F.adaptive_avg_pool2d(x, 3), x),
                                    _aten.adaptive_max_pool2d_backward(F.adaptive_avg_pool2d(x, 3), x,
                                                                       F.adaptive_max_pool2d(x, 3, True)[1])),
    "relu": lambda x, w: (F.relu(x), F.relu(x.transpose(2, 3)), _aten.threshold_backward(x, F.relu(x), 0),
                          _aten.threshold_backward(torch.ones(1, device=x.device).expand(x.shape), F.relu(x), 0)),
}


@pytest.mark.parametrize("name", list(MEMORY_FORMAT_CASES))
def test_memory_format_propagates_as_on_cpu(name):
    """A channels_last input gives channels_last outputs and gradients where the CPU kernel's do."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 6, 7, generator=g).contiguous(memory_format=_CL)
    w = torch.randn(3, 3, 3, 3, generator=g)
    expected = MEMORY_FORMAT_CASES[name](x, w)
    dipu.reset_fallback_counts()
    actual = MEMORY_FORMAT_CASES[name](x.to("dipu"), w.to("dipu"))
    assert dipu.fallback_counts() == {}
    _check_like_cpu(expected, actual)


_CL3 = torch.channels_last_3d
_SPATIAL = {4: "bilinear", 5: "trilinear"}
# the generated kernels' outputs (Note [Output strides] in dipu/ops/meta_rules.py), channels_last and channels_last_3d
GENERIC_MEMORY_FORMAT_CASES = {
    "interpolate nearest": lambda x: F.interpolate(x, scale_factor=2),
    "interpolate linear": lambda x: F.interpolate(x, scale_factor=2, mode=_SPATIAL[x.dim()]),
    "interpolate backward": lambda x: torch.autograd.grad(
        F.interpolate(x, scale_factor=2, mode=_SPATIAL[x.dim()]).square().sum(), x)[0],
    "pad constant": lambda x: F.pad(x, (1, 2) * (x.dim() - 2), value=0.5),
    "pad reflect": lambda x: F.pad(x, (1, 1) * (x.dim() - 2), mode="reflect"),
    "pad replicate": lambda x: F.pad(x, (1, 2) * (x.dim() - 2), mode="replicate"),
    "pad replicate backward": lambda x: torch.autograd.grad(
        F.pad(x, (1, 2) * (x.dim() - 2), mode="replicate").square().sum(), x)[0],
    "group_norm": lambda x: F.group_norm(x, 3, torch.ones(6, device=x.device), torch.zeros(6, device=x.device)),
    # called directly: autograd makes the arguments contiguous on devices other than the CPU (torch 2.13)
    "group_norm backward": lambda x: _aten.native_group_norm_backward(
        x.detach() * 2, *(lambda _, mean, rstd: (x.detach(), mean, rstd))(*_aten.native_group_norm(
            x.detach(), None, None, x.shape[0], x.shape[1], x[0, 0].numel(), 3, 1e-5)),
        None, x.shape[0], x.shape[1], x[0, 0].numel(), 3, [True, False, False])[0],
    "flip": lambda x: torch.flip(x, (1, 3)),
    "softmax": lambda x: F.softmax(x, 1),
    "dropout eval": lambda x: F.dropout(x, 0.5, training=False),
    "dropout": lambda x: F.dropout(x, 0.5),
    "gelu backward": lambda x: torch.autograd.grad(F.gelu(x).square().sum(), x)[0],
}


@pytest.mark.parametrize("memory_format", [_CL, _CL3], ids=["channels_last", "channels_last_3d"])
@pytest.mark.parametrize("name", list(GENERIC_MEMORY_FORMAT_CASES))
def test_generated_kernels_keep_the_cpu_memory_format(name, memory_format):
    shape = (2, 6, 5, 7) if memory_format is _CL else (2, 6, 3, 5, 4)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).contiguous(memory_format=memory_format)
    results = []
    for device in ("cpu", "dipu"):
        torch.manual_seed(0)
        dipu.reset_fallback_counts()
        results.append(GENERIC_MEMORY_FORMAT_CASES[name](x.to(device).requires_grad_()).detach())
    assert dipu.fallback_counts() == {}
    _check_like_cpu(*results)


@pytest.mark.parametrize("fmt", ["channels_last", "contiguous"])
def test_max_unpool2d_reads_indices_of_a_channels_last_pool(fmt):
    memory_format = getattr(torch, "channels_last" if fmt == "channels_last" else "contiguous_format")
    x = torch.randn(2, 3, 8, 8).to(memory_format=memory_format)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    dout, didx = F.max_pool2d(x.to("dipu"), 2, return_indices=True)
    assert torch.equal(F.max_unpool2d(dout, didx, 2).cpu(), F.max_unpool2d(out, idx, 2))


def test_pooling_shapes_match_aten_everywhere():
    """Note [Pooling shapes without meta tensors]: every kernel/stride/padding/dilation/ceil_mode combination
    on odd and even sizes gives ATen's output shape, and calls ATen refuses fail with ATen's message."""
    import itertools

    for size, kernel, stride, padding, dilation, ceil_mode in itertools.product(
            (5, 6, 7), (1, 2, 3), ((), (1,), (2,), (3, 2)), (0, 1), (1, 2), (False, True)):
        cpu = torch.randn(1, 2, size, size + 1)
        args = ((kernel,), stride, (padding,), (dilation,), ceil_mode)
        try:
            expected = torch.ops.aten.max_pool2d_with_indices(cpu, *args)
        except RuntimeError as error:
            with pytest.raises(RuntimeError, match=re.escape(str(error).splitlines()[0])):
                torch.ops.aten.max_pool2d_with_indices(cpu.to("dipu"), *args)
            continue
        actual = torch.ops.aten.max_pool2d_with_indices(cpu.to("dipu"), *args)
        for e, a in zip(expected, actual):
            assert a.shape == e.shape and a.dtype == e.dtype, (size, args)
            torch.testing.assert_close(a.cpu(), e)
        if dilation == 1:
            expected = torch.ops.aten.avg_pool2d(cpu, (kernel,), stride, (padding,), ceil_mode)
            torch.testing.assert_close(torch.ops.aten.avg_pool2d(cpu.to("dipu"), (kernel,), stride, (padding,),
                                                                 ceil_mode).cpu(), expected)
    for output_size in ((1, 1), (2, 3), (5, 7)):
        cpu = torch.randn(2, 3, 5, 7)
        torch.testing.assert_close(F.adaptive_avg_pool2d(cpu.to("dipu"), output_size).cpu(),
                                   F.adaptive_avg_pool2d(cpu, output_size))
        for e, a in zip(F.adaptive_max_pool2d(cpu, output_size, return_indices=True),
                        F.adaptive_max_pool2d(cpu.to("dipu"), output_size, return_indices=True)):
            torch.testing.assert_close(a.cpu(), e)
