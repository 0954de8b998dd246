"""Sparse COO and CSR tensors on dipu (Note [Sparse tensors on dipu] in dipu/csrc/sparse.cpp), each result
compared with the same computation on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

DIPU = torch.device("dipu", 0)


def coo(device="cpu"):
    indices = torch.tensor([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]])  # (0, 2) twice: uncoalesced
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    return torch.sparse_coo_tensor(indices, values, (4, 3), device=device)


def assert_same_sparse(dipu, cpu):
    """Same layout, structure and values, with dipu's parts on dipu."""
    assert dipu.device.type == "dipu" and dipu.layout == cpu.layout, (dipu.device, dipu.layout, cpu.layout)
    if cpu.layout == torch.sparse_coo:
        assert dipu.is_coalesced() == cpu.is_coalesced()
        parts = [(dipu._indices(), cpu._indices()), (dipu._values(), cpu._values())]
    else:
        parts = [(dipu.crow_indices(), cpu.crow_indices()), (dipu.col_indices(), cpu.col_indices()),
                 (dipu.values(), cpu.values())]
    for mine, theirs in parts:
        assert mine.device.type == "dipu"
        torch.testing.assert_close(mine.cpu(), theirs)
    torch.testing.assert_close(dipu.to_dense().cpu(), cpu.to_dense())


def test_coo_construction_moves_and_accessors():
    cpu = coo()
    for made in (coo(DIPU), cpu.to(DIPU), cpu.dipu()):
        assert made.is_sparse and made._nnz() == 5 and made.sparse_dim() == 2 and made.dense_dim() == 0
        assert_same_sparse(made, cpu)
        back = made.cpu()
        assert back.is_sparse and back.device.type == "cpu"
        torch.testing.assert_close(back.to_dense(), cpu.to_dense())
    dense = torch.randn(4, 5).relu()
    assert_same_sparse(dense.to(DIPU).to_sparse(), dense.to_sparse())
    assert_same_sparse(dense.to(DIPU).to_sparse(1), dense.to_sparse(1))  # hybrid: one sparse dim, dense rows
    empty = torch.sparse_coo_tensor(size=(2, 3), device=DIPU)
    assert empty._nnz() == 0 and empty.to_dense().abs().sum().item() == 0


def test_coalesce_and_indices():
    cpu, dipu = coo(), coo(DIPU)
    assert not dipu.is_coalesced()
    assert_same_sparse(dipu.coalesce(), cpu.coalesce())
    torch.testing.assert_close(dipu.coalesce().indices().cpu(), cpu.coalesce().indices())
    torch.testing.assert_close(dipu.coalesce().values().cpu(), cpu.coalesce().values())
    with pytest.raises(RuntimeError, match="coalesced"):  # the CPU's refusal: indices() of an uncoalesced tensor
        dipu.indices()


def test_csr_construction_and_conversions():
    dense = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0], [0.0, 0.0, 0.0]])
    cpu = dense.to_sparse_csr()
    for made in (dense.to(DIPU).to_sparse_csr(), cpu.to(DIPU), coo(DIPU).coalesce().to_sparse_csr()):
        reference = cpu if made._nnz() == 3 else coo().coalesce().to_sparse_csr()
        assert made.layout == torch.sparse_csr
        assert_same_sparse(made, reference)
    assert_same_sparse(cpu.to(DIPU).to_sparse(), cpu.to_sparse())
    made = torch.sparse_csr_tensor(cpu.crow_indices(), cpu.col_indices(), cpu.values(), (3, 3), device=DIPU)
    assert_same_sparse(made, cpu)


@pytest.mark.parametrize("name,compute", [
    ("sparse + sparse", lambda s, d: s + s),
    ("sparse * scalar", lambda s, d: s * 2.5),
    ("sparse * sparse", lambda s, d: s * s),
    ("sparse - sparse", lambda s, d: s - s.coalesce() * 0.5),
    ("neg", lambda s, d: -s),
    ("dense + sparse", lambda s, d: d + s),
    ("sparse.mm", lambda s, d: torch.sparse.mm(s, d.t())),
    ("mm", lambda s, d: s @ d.t()),
    ("addmm", lambda s, d: torch.addmm(d[:, :3] @ d[:, :3].t(), s, d.t())),
    ("sum", lambda s, d: torch.sparse.sum(s)),
    ("sum dim", lambda s, d: torch.sparse.sum(s, dim=0)),
    ("softmax", lambda s, d: torch.sparse.softmax(s.coalesce(), 1)),
    ("sparse_mask", lambda s, d: d.sparse_mask(s.coalesce())),
    ("index_select", lambda s, d: s.index_select(0, torch.tensor([3, 0], device=s.device))),
    ("transpose", lambda s, d: s.t().coalesce()),
])
def test_coo_arithmetic_matches_the_cpu(name, compute):
    dense = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    expected = compute(coo(), dense)
    result = compute(coo(DIPU), dense.to(DIPU))
    if expected.layout == torch.strided:
        assert result.device.type == "dipu" and result.layout == torch.strided
        torch.testing.assert_close(result.cpu(), expected)
    else:
        assert_same_sparse(result, expected)


def test_in_place_updates_of_dense_and_sparse_tensors():
    dense = torch.ones(4, 3)
    on_dipu = dense.to(DIPU)
    on_dipu.add_(coo(DIPU), alpha=-0.5)
    torch.testing.assert_close(on_dipu.cpu(), dense.add_(coo(), alpha=-0.5))
    cpu, dipu = coo(), coo(DIPU)
    cpu.mul_(3.0)
    dipu.mul_(3.0)
    assert_same_sparse(dipu, cpu)
    dipu.zero_()
    assert dipu._nnz() == 0 and dipu.shape == (4, 3)
    csr = torch.eye(3).to_sparse_csr().to(DIPU)
    csr.mul_(2.0)
    assert_same_sparse(csr, torch.eye(3).to_sparse_csr() * 2.0)


def test_csr_matmul_and_addition():
    a = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    b = torch.randn(3, 4)
    expected = a.to_sparse_csr() @ b
    result = a.to(DIPU).to_sparse_csr() @ b.to(DIPU)
    torch.testing.assert_close(result.cpu(), expected)
    assert_same_sparse(a.to(DIPU).to_sparse_csr() + a.to(DIPU).to_sparse_csr(), a.to_sparse_csr() * 2)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_csr_matmul_with_a_reduction_trains_as_on_the_cpu(reduce):
    """torch.sparse.mm(a, b, reduce) runs on the CPU through the sparse fallback. The CPU kernel computes the argmax
    its backward needs only for inputs that require grad, so the host copies keep requires_grad (Note [Sparse CPU
    fallback]): without it, amax's and amin's backward read an empty index tensor and crashed the process."""
    torch.manual_seed(0)
    a, b = torch.randn(5, 4).relu().to_sparse_csr(), torch.randn(4, 3)
    results = []
    for device in ("cpu", DIPU):
        x, y = a.to(device).detach().requires_grad_(), b.to(device).detach().requires_grad_()
        out = torch.sparse.mm(x, y, reduce)
        (out * torch.arange(15.0, device=device).view(5, 3)).sum().backward()
        results.append((out.detach().cpu(), x.grad.to_dense().cpu(), y.grad.cpu()))
    for mine, theirs in zip(results[1], results[0]):
        torch.testing.assert_close(mine, theirs)


def _train(device, optimizer_class, bag=False, steps=5, **options):
    torch.manual_seed(0)
    module = (torch.nn.EmbeddingBag(20, 4, mode="sum", sparse=True) if bag
              else torch.nn.Embedding(20, 4, sparse=True)).to(device)
    head = torch.nn.Linear(4, 1).to(device)
    sparse_optimizer = optimizer_class(module.parameters(), **options)
    dense_optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(1)
    grads = []
    for _ in range(steps):
        ids = torch.randint(0, 20, (6, 3), generator=generator).to(device)
        target = torch.randn(6, 1, generator=generator).to(device)
        out = module(ids) if bag else module(ids).sum(1)
        loss = F.mse_loss(head(out), target)
        sparse_optimizer.zero_grad()
        dense_optimizer.zero_grad()
        loss.backward()
        grads.append(module.weight.grad)
        sparse_optimizer.step()
        dense_optimizer.step()
    return module.weight.detach(), grads


@pytest.mark.parametrize("optimizer_class,options", [
    (torch.optim.SparseAdam, {"lr": 0.05}),
    (torch.optim.SGD, {"lr": 0.1}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    (torch.optim.Adagrad, {"lr": 0.1}),
], ids=["SparseAdam", "SGD", "SGD-momentum", "Adagrad"])
@pytest.mark.parametrize("bag", [False, True], ids=["Embedding", "EmbeddingBag"])
def test_sparse_embedding_training_matches_the_cpu(optimizer_class, options, bag):
    cpu_weight, cpu_grads = _train("cpu", optimizer_class, bag, **options)
    dipu_weight, dipu_grads = _train(DIPU, optimizer_class, bag, **options)
    for mine, theirs in zip(dipu_grads, cpu_grads):
        assert mine.is_sparse and mine.device.type == "dipu"
        torch.testing.assert_close(mine.to_dense().cpu(), theirs.to_dense())
    assert dipu_weight.device.type == "dipu"
    torch.testing.assert_close(dipu_weight.cpu(), cpu_weight)
    assert not torch.equal(cpu_weight, _train("cpu", optimizer_class, bag, steps=0, **options)[0])  # it trained


def test_sparse_gradients_accumulate():
    """Two backward passes add sparse gradients (autograd's accumulation of sparse + sparse)."""
    results = []
    for device in ("cpu", DIPU):
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(10, 3, sparse=True).to(device)
        for ids in ([1, 2, 2], [2, 7]):
            embedding(torch.tensor(ids, device=device)).square().sum().backward()
        results.append(embedding.weight.grad)
    assert results[1].is_sparse and results[1].device.type == "dipu"
    torch.testing.assert_close(results[1].to_dense().cpu(), results[0].to_dense())


def test_what_stays_unsupported_fails_with_the_cpus_error():
    """An op the CPU has no sparse kernel for raises the CPU's error, naming the op and the layout."""
    with pytest.raises(NotImplementedError, match=r"aten::(_?cumsum|cumsum\.out).*Sparse"):
        torch.cumsum(coo(), 0)
    with pytest.raises(NotImplementedError, match=r"cumsum.*Sparse"):
        torch.cumsum(coo(DIPU), 0)


def _opinfo_cases():
    from torch.testing._internal.common_methods_invocations import op_db

    layouts = {torch.sparse_coo: "supports_sparse", torch.sparse_csr: "supports_sparse_csr",
               torch.sparse_csc: "supports_sparse_csc", torch.sparse_bsr: "supports_sparse_bsr",
               torch.sparse_bsc: "supports_sparse_bsc"}
    return [pytest.param(op, layout, id=f"{op.name}-{str(layout).split('_', 1)[1]}")
            for op in op_db if op.name not in ("randn_like",)  # random: nothing to compare
            for layout, flag in layouts.items() if getattr(op, flag)]


def _on_dipu(value):
    return value.to(DIPU) if isinstance(value, torch.Tensor) else value


def _parts(tensor):
    """A sparse tensor's stored parts, as they are (indices, then values), on the CPU."""
    if tensor.layout == torch.sparse_coo:
        return [tensor._indices().cpu(), tensor._values().cpu()]
    compressed, plain = ((tensor.crow_indices(), tensor.col_indices())
                         if tensor.layout in (torch.sparse_csr, torch.sparse_bsr)
                         else (tensor.ccol_indices(), tensor.row_indices()))
    return [compressed.cpu(), plain.cpu(), tensor.values().cpu()]


def _comparable(value):
    if isinstance(value, torch.Tensor):
        if value.layout == torch.strided:
            return value.cpu()
        try:
            return value.to_dense().cpu()
        except RuntimeError:  # a tensor even the CPU cannot densify: see test_masked_reductions_over_an_empty_mask_row
            return _parts(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_comparable(v) for v in value)
    return value


def _sparse_samples(op, layout):
    """OpInfo's own sparse samples, or (for the unary ops that have none: they declare support and leave
    the samples to torch's test_sparse) its dense 2-d samples without tensor arguments, made sparse."""
    try:
        yield from op.sample_inputs_sparse(layout, "cpu", torch.float32)
        return
    except NotImplementedError:
        pass
    blocksize = (1, 1) if layout in (torch.sparse_bsr, torch.sparse_bsc) else None
    for sample in op.sample_inputs("cpu", torch.float32):
        if sample.input.dim() == 2 and not any(isinstance(a, torch.Tensor) for a in (*sample.args,
                                                                                      *sample.kwargs.values())):
            yield sample.transform(lambda t: t.to_sparse(layout=layout, blocksize=blocksize)
                                   if isinstance(t, torch.Tensor) and t is sample.input else t)


@pytest.mark.parametrize("op,layout", _opinfo_cases())
def test_opinfo_sparse_samples_match_the_cpu(op, layout):
    """OpInfo's sparse samples (every op declaring support for the layout), float32, on dipu vs the CPU.

    The samples are random: seeded, every run draws the same ones, whatever ran before in the process."""
    torch.manual_seed(0)
    checked = 0
    for sample in _sparse_samples(op, layout):
        moved = sample.transform(_on_dipu)
        if "device" in moved.kwargs:  # factory-like samples (zeros_like(x, device=...)) name their device
            moved.kwargs["device"] = DIPU
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except (RuntimeError, NotImplementedError, ValueError, TypeError) as error:  # the CPU refuses the sample
            with pytest.raises(type(error)):
                op(moved.input, *moved.args, **moved.kwargs)
            checked += 1
            continue
        result = op(moved.input, *moved.args, **moved.kwargs)
        if isinstance(expected, torch.Tensor):
            assert result.layout == expected.layout and result.device.type == "dipu", (result.layout, result.device)
        torch.testing.assert_close(_comparable(result), _comparable(expected), equal_nan=True)
        checked += 1
    if checked == 0:
        pytest.skip(f"OpInfo has no {layout} float32 samples for {op.name}")


@pytest.mark.parametrize("name,layout", [(name, layout) for name in ("sum", "prod", "amax", "amin", "mean")
                                         for layout in ("coo", "csr") if (name, layout) != ("mean", "coo")])
def test_masked_reductions_over_an_empty_mask_row(name, layout):
    """torch.masked's reductions of sparse tensors (their mask broadcast by _sparse_broadcast_to, a sparse view
    dipu serves with ATen's own kernel: Note [Sparse views]) give the CPU's result, part by part.

    With a row of the mask empty, the CPU's CSR amax/amin/mean keep a value for that row beyond nnz, a tensor
    its own to_dense refuses; OpInfo's random masks have such a row or not depending on the global random
    state, which is why these samples passed or failed depending on the tests run before them."""
    to_layout = (lambda t: t.to_sparse_csr()) if layout == "csr" else (lambda t: t.to_sparse())
    x = to_layout(torch.tensor([[1., 2, 3], [4, 5, 6], [7, 8, 9]]))
    empty_row = torch.tensor([[True, False, True], [False, False, False], [True, True, False]])
    broadcast = torch.tensor([[True, False, True]])  # one row for all three
    reduce = getattr(torch.masked, name)
    for mask in map(to_layout, (empty_row, broadcast)):
        expected = reduce(x, 1, keepdim=True, mask=mask)
        result = reduce(x.to(DIPU), 1, keepdim=True, mask=mask.to(DIPU))
        assert result.layout == expected.layout and result.device.type == "dipu"
        for mine, theirs in zip(_parts(result), _parts(expected), strict=True):
            torch.testing.assert_close(mine, theirs, equal_nan=True)


@pytest.mark.parametrize("view", ["permute", "unsqueeze", "broadcast", "view_as_real", "select_csr"])
def test_sparse_views_match_the_cpu(view):
    """The sparse view ops dipu serves with ATen's sparse kernels (Note [Sparse views]): the CPU's result, the parts
    on dipu."""
    dense = torch.tensor([[0., 1, 0], [2, 0, 3]])
    make, apply = {
        "permute": (lambda t: t.to_sparse(), lambda t: t.permute(1, 0)),
        "unsqueeze": (lambda t: t.to_sparse(), lambda t: t.unsqueeze(1)),
        "broadcast": (lambda t: t.to_sparse(), lambda t: torch._sparse_broadcast_to(t, (4, 2, 3))),
        "view_as_real": (lambda t: t.to(torch.complex64).to_sparse(), torch.view_as_real),
        "select_csr": (lambda t: t.to_sparse_csr(), lambda t: t.select(0, 1)),
    }[view]
    expected = apply(make(dense))
    result = apply(make(dense).to(DIPU))
    assert result.layout == expected.layout and result.device.type == "dipu"
    assert all(part.device.type == "dipu" for part in (result._indices(), result._values()))
    torch.testing.assert_close(result.to_dense().cpu(), expected.to_dense())
