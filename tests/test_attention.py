"""Fused attention: F.scaled_dot_product_attention and nn.MultiheadAttention on dipu reach the DIOPI attention
functions through PyTorch's overrideable SDPA entry points (Note [Fused attention on dipu]), match the math
path in value and gradient, draw dropout from the dipu generator, and keep less memory than the math path."""

import ctypes

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

import dipu  # noqa: F401  (registers the device)

FUSED = "aten._scaled_dot_product_fused_attention_overrideable"


class _OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket._qualified_op_name).replace("::", "."))
        return func(*args, **(kwargs or {}))


def ops_run(fn):
    with _OpLog() as log:
        fn()
    return log.ops


def _inputs(dtype, heads=4, kv_heads=4, length=6, source=9, dim=8, value_dim=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shapes = ((2, heads, length, dim), (2, kv_heads, source, dim), (2, kv_heads, source, value_dim))
    return [torch.randn(s, generator=generator).to(dtype) for s in shapes]


CASES = {  # name: (input options, sdpa keyword arguments given the CPU query/key, bias with a gradient?)
    "plain": ({}, lambda q, k: {}),
    "causal_L_ne_S": ({}, lambda q, k: {"is_causal": True}),
    "causal_long_query": ({"length": 11}, lambda q, k: {"is_causal": True}),
    "scale": ({}, lambda q, k: {"scale": 0.3}),
    "float_bias_2d": ({}, lambda q, k: {"attn_mask": torch.randn(q.shape[2], k.shape[2]).to(q.dtype)}),
    "float_bias_3d": ({}, lambda q, k: {"attn_mask": torch.randn(4, q.shape[2], k.shape[2]).to(q.dtype)}),
    "float_bias_4d": ({}, lambda q, k: {"attn_mask": torch.randn(2, 1, q.shape[2], k.shape[2]).to(q.dtype)}),
    "bool_mask": ({}, lambda q, k: {"attn_mask": _bool_mask(q.shape[2], k.shape[2])}),
    "gqa": ({"heads": 4, "kv_heads": 2}, lambda q, k: {"enable_gqa": True}),
    "gqa_causal": ({"heads": 6, "kv_heads": 2}, lambda q, k: {"enable_gqa": True, "is_causal": True}),
    "value_dim": ({"value_dim": 5}, lambda q, k: {}),
    "value_dim_causal_gqa": ({"value_dim": 5, "heads": 4, "kv_heads": 2, "length": 11},
                             lambda q, k: {"is_causal": True, "enable_gqa": True}),
}


def _bool_mask(length, source):
    mask = torch.rand(length, source, generator=torch.Generator().manual_seed(3)) > 0.4
    mask[:, 0] = True  # no fully masked row (the math path gives NaN there)
    return mask


TOLERANCE = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}


def _run(device, q, k, v, kwargs, grad_out, bias_grad: bool):
    leaves = [t.to(device).requires_grad_() for t in (q, k, v)]
    kwargs = dict(kwargs)
    if "attn_mask" in kwargs:
        kwargs["attn_mask"] = kwargs["attn_mask"].to(device)
        if bias_grad:
            kwargs["attn_mask"].requires_grad_()
    out = F.scaled_dot_product_attention(*leaves, **kwargs)
    out.backward(grad_out.to(device))
    grads = [t.grad for t in leaves]
    if bias_grad:
        grads.append(kwargs["attn_mask"].grad)
    return [out.detach().cpu()] + [g.cpu() for g in grads]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_sdpa_matches_the_math_path(case, dtype):
    options, make_kwargs = CASES[case]
    q, k, v = _inputs(dtype, **options)
    kwargs = make_kwargs(q, k)
    bias_grad = "attn_mask" in kwargs and kwargs["attn_mask"].is_floating_point()
    grad_out = torch.randn(*q.shape[:3], v.shape[-1], generator=torch.Generator().manual_seed(5)).to(dtype)

    ops = ops_run(lambda: _run("dipu", q, k, v, kwargs, grad_out, bias_grad))
    assert FUSED in ops and FUSED + "_backward" in ops
    assert not {"aten.bmm", "aten._softmax", "aten.matmul"} & set(ops), ops
    fused = _run("dipu", q, k, v, kwargs, grad_out, bias_grad)
    with sdpa_kernel(SDPBackend.MATH):  # PyTorch's math decomposition, on the CPU, in float64
        wide = {n: t.double() if torch.is_tensor(t) and t.is_floating_point() else t for n, t in kwargs.items()}
        math = _run("cpu", q.double(), k.double(), v.double(), wide, grad_out.double(), bias_grad)
    assert len(fused) == len(math) == 4 + bias_grad
    for name, got, want in zip(["out", "grad_query", "grad_key", "grad_value", "grad_bias"], fused, math):
        assert got.dtype == dtype and got.shape == want.shape, name
        torch.testing.assert_close(got.double(), want, **TOLERANCE[dtype], msg=lambda m: f"{name}: {m}")


#: The cases the torch op library serves with its blockwise algorithm (a bias gradient, another value head size).
BLOCKWISE_CASES = ["float_bias_2d", "float_bias_3d", "float_bias_4d", "value_dim", "value_dim_causal_gqa"]


@pytest.fixture
def one_row_blocks(monkeypatch):
    """Blocks of one query row in both torch op libraries: the Python one's and its C++ twin's block size."""
    from dipu.diopi_impl import torch_cpp
    from dipu.diopi import attention

    monkeypatch.setattr(attention, "_BLOCK_ELEMENTS", 1)
    elements = ctypes.c_int64.in_dll(ctypes.CDLL(str(torch_cpp.library_path())), "dipuTorchCppAttentionBlockElements")
    saved, elements.value = elements.value, 1
    yield
    elements.value = saved


@pytest.mark.parametrize("case", BLOCKWISE_CASES)
def test_blockwise_attention_one_query_row_per_block(case, one_row_blocks):
    """Note [Blockwise attention] with a block of a single row: row slices of biases, causal key columns."""
    test_sdpa_matches_the_math_path(case, torch.float32)


def test_blockwise_dropout_one_query_row_per_block(one_row_blocks):
    test_dropout_draws_its_mask_from_the_dipu_generator_and_backward_replays_it(causal=True)


#: Each case once through each path of the torch op library: ATen's fused CPU kernel, and the blockwise algorithm
#: for dropout, a bias gradient and a value head size of its own.
TWIN_RUN = """
import sys, torch, torch.nn.functional as F, dipu
torch.manual_seed(0)
q, k, v = torch.randn(2, 4, 7, 8), torch.randn(2, 2, 9, 8), torch.randn(2, 2, 9, 8)
bias, mask = torch.randn(2, 1, 7, 9), torch.rand(7, 9) > 0.3
cases = {"flash gqa causal": (q, k, v, {"is_causal": True, "enable_gqa": True}),
         "flash bool mask": (q, k[:, :1].expand(2, 4, 9, 8), v[:, :1].expand(2, 4, 9, 8), {"attn_mask": mask}),
         "bias gradient": (q, k, v, {"attn_mask": bias, "enable_gqa": True}),
         "value head size": (q, k, v[..., :5], {"is_causal": True, "enable_gqa": True}),
         "dropout": (q, k, v, {"dropout_p": 0.3, "enable_gqa": True, "attn_mask": bias})}
results = {}
for name, (*tensors, kwargs) in cases.items():
    torch.dipu.manual_seed(5)
    leaves = [t.to("dipu").requires_grad_() for t in tensors]
    kwargs = {n: t.to("dipu").requires_grad_(t.is_floating_point()) if torch.is_tensor(t) else t
              for n, t in kwargs.items()}
    out = F.scaled_dot_product_attention(*leaves, **kwargs)
    out.backward(torch.ones_like(out))
    results[name] = [t.detach().cpu() for t in [out] + [t.grad for t in leaves]]
    if kwargs.get("attn_mask") is bias:
        results[name].append(kwargs["attn_mask"].grad.cpu())
torch.save(results, sys.argv[1])
"""


def test_the_python_and_cpp_torch_libraries_compute_the_same_attention(python, tmp_path):
    """The C++ twin (diopi_impl/torch_cpp/attention.cpp) makes the Python library's ATen calls in its order: the same
    numbers, bit for bit, and the same dropout mask for one seed, in forward and backward."""
    results = {}
    for library in ("torch", "torch_cpp"):
        path = tmp_path / f"{library}.pt"
        python(f"import sys; sys.argv[1:] = [{str(path)!r}]\n" + TWIN_RUN, env={"DIPU_DIOPI_IMPL": library})
        results[library] = torch.load(path)
    assert results["torch"].keys() == results["torch_cpp"].keys()
    for name, tensors in results["torch"].items():
        assert len(tensors) == len(results["torch_cpp"][name]) >= 4, name
        for i, (want, got) in enumerate(zip(tensors, results["torch_cpp"][name])):
            assert torch.equal(got, want), (name, i)


def test_inputs_whose_last_dim_is_strided():
    """ATen's fused CPU kernel assumes a dense last dim (it reads past the data otherwise)."""
    q, k, v = _inputs(torch.float32)
    strided = [t.to("dipu").transpose(-1, -2).contiguous().transpose(-1, -2).requires_grad_() for t in (q, k, v)]
    assert all(t.stride(-1) != 1 for t in strided)
    out = F.scaled_dot_product_attention(*strided, is_causal=True)
    grad_out = torch.randn(out.shape).to("dipu").transpose(-1, -2).contiguous().transpose(-1, -2)
    out.backward(grad_out)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.MATH):
        want = F.scaled_dot_product_attention(*leaves, is_causal=True)
    want.backward(grad_out.cpu().double())
    for got, expected in zip([out] + [t.grad for t in strided], [want] + [t.grad for t in leaves]):
        torch.testing.assert_close(got.detach().cpu().double(), expected.detach(), **TOLERANCE[torch.float32])


# With every backend enabled, torch 2.13 sends 3-d inputs down the math path; torch 2.14 makes them 4-d
# first, so the fused kernel serves them (its values are checked in test_inputs_the_fused_kernel_...).
_THREE_D_FUSED = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 14)


def test_math_backend_still_selectable_and_disabling_everything_is_reported():
    q, k, v = (t.to("dipu") for t in _inputs(torch.float32))
    with sdpa_kernel(SDPBackend.MATH):
        ops = ops_run(lambda: F.scaled_dot_product_attention(q, k, v))
    assert FUSED not in ops and "aten.bmm" in ops
    if _THREE_D_FUSED:  # the fused kernel alone serves 3-d inputs too
        with sdpa_kernel(SDPBackend.OVERRIDEABLE):
            out = F.scaled_dot_product_attention(q[0], k[0], v[0])
        torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q[0].cpu(), k[0].cpu(), v[0].cpu()))
        return
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product_attention was found on dipu"):
            F.scaled_dot_product_attention(q[0], k[0], v[0])  # 3-d: not the placeholder's layout


def test_inputs_the_fused_kernel_does_not_take_keep_the_math_paths_behaviour():
    q, k, v = _inputs(torch.float32)
    three_d = ops_run(lambda: F.scaled_dot_product_attention(q[0].to("dipu"), k[0].to("dipu"), v[0].to("dipu")))
    assert (FUSED in three_d) is _THREE_D_FUSED
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q[0].to("dipu"), k[0].to("dipu"), v[0].to("dipu")).cpu(),
        F.scaled_dot_product_attention(q[0], k[0], v[0]))
    q, k, v = _inputs(torch.float32, heads=4, kv_heads=2)
    errors = []
    for device in ("cpu", "dipu"):  # grouped heads without enable_gqa: the same error as on the CPU
        with pytest.raises(RuntimeError) as error:
            F.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device))
        errors.append(str(error.value).split("\n")[0])
    assert errors[0] == errors[1]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_dropout_draws_its_mask_from_the_dipu_generator_and_backward_replays_it(causal):
    p, (q, k, v) = 0.3, _inputs(torch.float32, length=16, source=24)
    length, source = q.shape[2], k.shape[2]
    one_hot = torch.eye(source).expand(2, 4, source, source)
    dq, dk = torch.zeros_like(q).to("dipu"), k.to("dipu")
    visible = torch.ones(length, source, dtype=torch.bool).tril() if causal else torch.ones(length, source).bool()
    cpu_state = torch.get_rng_state()

    # With a zero query every visible weight is 1 / (visible columns), so the output over one-hot values shows
    # which weights were kept.
    torch.dipu.manual_seed(7)
    revealed = F.scaled_dot_product_attention(dq, dk, one_hot.to("dipu"), dropout_p=p, is_causal=causal).cpu()
    kept = revealed != 0
    assert not (kept & ~visible).any()
    uniform = (1 / visible.sum(-1, keepdim=True) / (1 - p)).expand(length, source).expand_as(revealed)
    torch.testing.assert_close(revealed[kept], uniform[kept])
    assert abs(1 - kept.sum().item() / (visible.sum().item() * 8) - p) < 0.05

    torch.dipu.manual_seed(7)  # the same draw again, now with real inputs and gradients
    leaves = [t.to("dipu").requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, dropout_p=p, is_causal=causal)
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    cpu_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    want = torch.ops.aten._scaled_dot_product_attention_math(*cpu_leaves, None, p, causal, dropout_mask=kept)[0]
    want.backward(grad_out.cpu())
    torch.testing.assert_close(out.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-5)
    for leaf, cpu_leaf in zip(leaves, cpu_leaves):
        torch.testing.assert_close(leaf.grad.cpu(), cpu_leaf.grad, rtol=1e-4, atol=1e-5)
    assert torch.equal(torch.get_rng_state(), cpu_state)  # the CPU generator was not used

    torch.dipu.manual_seed(7)
    again = F.scaled_dot_product_attention(*leaves, dropout_p=p, is_causal=causal)
    torch.testing.assert_close(again.detach(), out.detach(), rtol=0, atol=0)
    different = F.scaled_dot_product_attention(*leaves, dropout_p=p, is_causal=causal)
    assert not torch.equal(different.detach().cpu(), out.detach().cpu())


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_dropout_with_a_seed_matches_the_math_path_with_that_seed(causal):
    """An input that fits in one block draws the mask the math path draws (Note [Blockwise attention])."""
    q, k, v = (t.to("dipu") for t in _inputs(torch.float32))
    results = []
    for backends in ([SDPBackend.OVERRIDEABLE], [SDPBackend.MATH]):
        torch.manual_seed(11)
        with sdpa_kernel(backends):
            results.append(F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=causal).cpu())
    torch.testing.assert_close(results[0], results[1], rtol=1e-5, atol=1e-6)


def test_multihead_attention_uses_the_fused_kernel():
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    x = torch.randn(3, 10, 32)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(10)
    results = []
    for device in ("cpu", "dipu"):
        m = torch.nn.MultiheadAttention(32, 4, batch_first=True).to(device)
        m.load_state_dict(module.state_dict())
        inp = x.detach().to(device).requires_grad_()
        ops = ops_run(lambda: results.append(
            m(inp, inp, inp, attn_mask=causal.to(device), need_weights=False, is_causal=True)[0].sum().backward()))
        results[-1] = [inp.grad.cpu(), m.in_proj_weight.grad.cpu(), m.out_proj.weight.grad.cpu()]
        if device == "dipu":
            assert FUSED in ops and FUSED + "_backward" in ops
    for got, want in zip(results[1], results[0]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def _peak_bytes(fn) -> int:
    torch.dipu.synchronize()
    torch.dipu.reset_peak_memory_stats()
    base = torch.dipu.memory_allocated()
    fn()
    return torch.dipu.max_memory_allocated() - base


def test_fused_attention_keeps_less_memory_than_the_math_path():
    batch, heads, length, dim = 2, 4, 256, 16
    q, k, v = (torch.randn(batch, heads, length, dim, device="dipu", requires_grad=True) for _ in range(3))

    def step():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
        for t in (q, k, v):
            t.grad = None

    fused = _peak_bytes(step)
    with sdpa_kernel(SDPBackend.MATH):
        math = _peak_bytes(step)
    scores = batch * heads * length * length * 4
    assert math >= 2 * scores  # the math path holds the scores and the softmax for backward
    assert fused < scores, (fused, math)


def test_the_cpu_substitutes_serve_sdpa_when_the_kernel_is_forced_to_the_fallback(python):
    """A vendor without the DIOPI attention functions: the placeholders run on the CPU, dropout included."""
    python("""
        import torch, torch.nn.functional as F, dipu
        assert "_scaled_dot_product_fused_attention_overrideable" not in dipu.kernels.registry.registered_ops()
        torch.manual_seed(0)
        q, k, v = (torch.randn(2, 4, n, 8) for n in (6, 9, 9))
        bias = torch.randn(6, 9)
        results = []
        for device in ("cpu", "dipu"):
            leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v, bias)]
            out = F.scaled_dot_product_attention(*leaves[:3], attn_mask=leaves[3])
            out.square().sum().backward()
            results.append([out.detach().cpu()] + [t.grad.cpu() for t in leaves])
        for got, want in zip(results[1], results[0]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        leaves = [t.to("dipu").requires_grad_() for t in (q, k, v)]
        F.scaled_dot_product_attention(*leaves, dropout_p=0.5).sum().backward()
        counts = dipu.fallback_counts()
        assert counts["_scaled_dot_product_fused_attention_overrideable"] == 2, counts
        assert counts["_scaled_dot_product_fused_attention_overrideable_backward"] == 2, counts
    """, env={"DIPU_FORCE_FALLBACK_OPS_LIST": "_scaled_dot_product_fused_attention.*"})


def test_fused_attention_takes_the_cpp_path_and_its_python_path_agrees(python):
    """The C++ twins of the two kernels (dipu/kernels/cpp/impl_kernels.cpp) serve a training step, dropout included;
    with a hook on, the same calls take the Python wrappers (the forward's two SymInts handed back through C++) and
    give the same results and the same mask for one seed."""
    python("""
        import contextlib, io, os, torch, torch.nn.functional as F, dipu
        from dipu.kernels import cpp_wrappers
        torch.manual_seed(0)
        q, k, v, bias = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 9, 8), torch.randn(2, 2, 9, 8), torch.randn(6, 9)

        def step():
            torch.dipu.manual_seed(3)
            leaves = [t.to("dipu").requires_grad_() for t in (q, k, v, bias)]
            out = F.scaled_dot_product_attention(*leaves[:3], attn_mask=leaves[3], dropout_p=0.25, enable_gqa=True)
            out.backward(torch.ones_like(out))
            return [out.detach().cpu()] + [t.grad.cpu() for t in leaves]

        cpp_wrappers.reset_fast_calls()
        fast = step()
        calls = {op: n for op, n in cpp_wrappers.fast_calls().items() if "attention" in op}
        assert calls == {"_scaled_dot_product_fused_attention_overrideable": 1,
                         "_scaled_dot_product_fused_attention_overrideable_backward": 1}, calls
        cpp_wrappers.reset_fast_calls()
        os.environ["DIPU_DUMP_OP_ARGS"] = "1"
        with contextlib.redirect_stdout(io.StringIO()) as dumped:
            slow = step()
        del os.environ["DIPU_DUMP_OP_ARGS"]
        assert "_scaled_dot_product_fused_attention_overrideable" in dumped.getvalue()
        assert not any("attention" in op for op in cpp_wrappers.fast_calls()), cpp_wrappers.fast_calls()
        for a, b in zip(fast, slow):
            assert torch.equal(a, b)
    """)
