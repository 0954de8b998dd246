"""The boxed CPU fallback for ops without a dipu kernel.

The ops here are defined by this test in its own namespace with CPU kernels
only, so they always exercise the fallback, however many aten ops dipu's op
library grows to cover.
"""

import warnings

import pytest
import torch

import dipu

LIB = torch.library.Library("dipu_test", "DEF")
LIB.define("scale(Tensor x, float factor) -> Tensor")
LIB.define("scale_(Tensor(a!) x, float factor) -> Tensor(a!)")
LIB.define("scale.out(Tensor x, float factor, *, Tensor(a!) out) -> Tensor(a!)")
LIB.define("extrema(Tensor x) -> (Tensor, Tensor)")
LIB.define("total(Tensor[] xs, Tensor? bias=None) -> Tensor")
LIB.define("noise(Tensor x, *, Generator? generator=None) -> Tensor")
LIB.define("flat(Tensor(a) x) -> Tensor(a)")


def _scale_(x, factor):
    return x.mul_(factor)


LIB.impl("scale", lambda x, factor: x * factor, "CPU")
LIB.impl("scale_", _scale_, "CPU")
LIB.impl("scale.out", lambda x, factor, *, out: torch.mul(x, factor, out=out), "CPU")
LIB.impl("extrema", lambda x: (x.min().reshape(1), x.max().reshape(1)), "CPU")
LIB.impl("total", lambda xs, bias=None: sum(xs) + (0 if bias is None else bias), "CPU")
LIB.impl("noise", lambda x, *, generator=None: x + torch.randn(x.shape, generator=generator), "CPU")
LIB.impl("flat", lambda x: x.view(-1), "CPU")
ops = torch.ops.dipu_test


def test_functional_result_lands_on_the_input_device():
    x = torch.rand(3, 4)
    for index in (0, 1):
        out = ops.scale(x.to(f"dipu:{index}"), 2.0)
        assert out.device == torch.device(f"dipu:{index}")
        assert torch.equal(out.cpu(), x * 2)


def test_inplace_through_a_view_writes_back_into_the_base():
    x = torch.rand(3, 4)
    base = x.to("dipu")
    ptr = base.data_ptr()
    row = base[1]
    assert ops.scale_(row, 3.0) is row
    expected = x.clone()
    expected[1] *= 3
    assert base.data_ptr() == ptr
    assert torch.equal(base.cpu(), expected)


def test_out_argument_is_written_in_place():
    x = torch.rand(5)
    out = torch.empty(5, device="dipu:1")
    ptr = out.data_ptr()
    result = ops.scale.out(x.to("dipu:1"), 2.0, out=out)
    assert result is out and out.data_ptr() == ptr
    assert torch.equal(out.cpu(), x * 2)


@pytest.mark.parametrize("size", [(0,), (2,), (7, 3)], ids=["empty", "smaller", "larger"])
def test_out_argument_of_the_wrong_size_is_resized_as_the_cpu_does(size):
    """The CPU kernel resizes a wrongly sized ``out=``; the fallback copies back into it resized too."""
    x = torch.rand(3, 4)
    expected = torch.empty(size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "An output with one or more elements was resized"
        ops.scale.out(x, 2.0, out=expected)
        out = torch.empty(size, device="dipu")
        result = ops.scale.out(x.to("dipu"), 2.0, out=out)
    assert result is out and out.shape == expected.shape == (3, 4)
    assert out.stride() == expected.stride()
    assert torch.equal(out.cpu(), expected)


def test_forced_fallback_resizes_the_out_arguments_of_aten_ops(python):
    """aten ops forced onto the fallback (DIPU_FORCE_FALLBACK_OPS_LIST) with out= of the wrong sizes,
    one output (mm.out) and two (max.dim_max), against the CPU."""
    python("""
        import warnings
        import torch, dipu
        warnings.simplefilter("ignore")
        a, b = torch.rand(3, 4), torch.rand(4, 2)
        for size in [(0,), (1,), (5, 5)]:
            out = torch.empty(size, device="dipu")
            torch.mm(a.to("dipu"), b.to("dipu"), out=out)
            assert out.shape == (3, 2) and torch.allclose(out.cpu(), a @ b), (size, out.shape)
            values, indices = torch.empty(size, device="dipu"), torch.empty(size, dtype=torch.long, device="dipu")
            torch.max(a.to("dipu"), 1, out=(values, indices))
            expected = torch.max(a, 1)
            assert values.shape == indices.shape == (3,), (size, values.shape, indices.shape)
            assert torch.equal(values.cpu(), expected.values) and torch.equal(indices.cpu(), expected.indices)
        assert set(dipu.fallback_counts()) >= {"mm.out", "max.dim_max"}, dipu.fallback_counts()
    """, env={"DIPU_FORCE_FALLBACK_OPS_LIST": "mm.out, max.dim_max"})


def test_multiple_outputs_lists_and_optional_tensors():
    x = torch.rand(3, 4)
    low, high = ops.extrema(x.to("dipu:1"))
    assert low.device == high.device == torch.device("dipu:1")
    assert low.item() == x.min().item() and high.item() == x.max().item()
    parts = [x.to("dipu"), (x + 1).to("dipu")]
    assert torch.equal(ops.total(parts).cpu(), x + (x + 1))
    assert torch.equal(ops.total(parts, torch.ones(4, device="dipu")).cpu(), x + (x + 1) + 1)


def test_dipu_generators_drive_random_ops_on_the_cpu():
    x = torch.zeros(6, device="dipu:1")
    g = torch.Generator(device="dipu:1").manual_seed(7)
    a = ops.noise(x, generator=g)
    g.manual_seed(7)
    assert torch.equal(ops.noise(x, generator=g).cpu(), a.cpu())
    torch.dipu.manual_seed_all(3)
    b = ops.noise(x)  # no generator: the device's default dipu generator
    torch.dipu.manual_seed_all(3)
    assert torch.equal(ops.noise(x).cpu(), b.cpu())
    assert torch.equal(b.cpu(), torch.randn(6, generator=torch.Generator().manual_seed(3)))


def test_factory_ops_follow_their_device_argument():
    assert dipu._C.cpu_fallback("randperm", (6,), {"device": "dipu:1"}).device == torch.device("dipu:1")


def test_fallback_is_counted_and_warns_once_for_all_ops(capfd):
    """Note [One fallback warning]: the first op to fall back is announced, with what happens to the others."""
    # Whether the warning of a custom op reaches stderr through the C++ handler (torch 2.13) or becomes a
    # Python UserWarning (torch 2.15 calls custom ops under PyTorch's Python warning handler), it is given once.
    def told(call) -> str:
        capfd.readouterr()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        return capfd.readouterr().err + "".join(str(w.message) for w in caught)

    dipu.reset_fallback_counts()
    x = torch.rand(4, device="dipu")
    first = told(lambda: ops.scale(x, 2.0))
    assert "dipu: dipu_test::scale runs on the CPU through the fallback (it has no dipu kernel, or its kernel " \
           "declined these arguments), as will every other op that does" in first and "dipu.fallback_counts()" in first
    assert "through the fallback" not in told(lambda: ops.scale(x, 2.0))  # the second call is silent
    assert "through the fallback" not in told(lambda: ops.extrema(x))  # and so is another op
    assert dipu.fallback_counts() == {"dipu_test::scale": 2, "dipu_test::extrema": 1}
    dipu.reset_fallback_counts()  # re-arms the warning
    assert "dipu: dipu_test::extrema runs on the CPU through the fallback" in told(lambda: ops.extrema(x))


_RUNTIME_ONLY = {"DIPU_SIM_NATIVE_ALIAS": "0"}  # sim without its op library: every op falls back


def test_printing_a_tensor_on_a_runtime_only_vendor_warns_once(python):
    """Printing runs a dozen ops (abs, ne, masked_select, min, max, ceil, div, ...), all on the fallback there."""
    err = python("""
        import torch, dipu
        x = torch.randn(3, 4, device="dipu")  # normal_ falls back: the one warning
        print(x)
        assert len(dipu.fallback_counts()) > 10, dipu.fallback_counts()
    """, env=_RUNTIME_ONLY).stderr
    assert err.count("runs on the CPU through the fallback") == 1, err


def test_the_fallback_gives_no_warning_the_cpu_does_not(python):
    """mse_loss has only an out=-calling composite outside the CPU and CUDA; run through the fallback as its out=
    variant, the CPU's mse_loss.out warned "An output with one or more elements was resized since it had shape []"
    (Note [Functional ops the CPU runs whole])."""
    proc = python("""
        import warnings
        import torch, dipu
        import torch.nn.functional as F
        a, b = torch.randn(3, 4), torch.randn(3, 4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for reduction in ("mean", "sum", "none"):
                loss = F.mse_loss(a.to("dipu"), b.to("dipu"), reduction=reduction)
                assert torch.equal(loss.cpu(), F.mse_loss(a, b, reduction=reduction)), reduction
        print("\\n".join(str(w.message) for w in caught))
        assert "mse_loss" in dipu.fallback_counts(), dipu.fallback_counts()
    """, env=_RUNTIME_ONLY)
    assert "resized" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_pixel_shuffle_keeps_its_composite_on_the_device():
    """pixel_shuffle and pixel_unshuffle have a CPU kernel and, elsewhere, a composite of views and a copy that calls no
    out= variant: that composite runs on dipu, forward and backward, with the CPU's values and strides, and nothing
    falls back (Note [Functional ops the CPU runs whole])."""
    import torch.nn.functional as F

    dipu.reset_fallback_counts()
    for fn, shape in ((F.pixel_shuffle, (2, 8, 3, 5)), (F.pixel_unshuffle, (2, 3, 6, 4))):
        x = torch.randn(shape, requires_grad=True)
        on_dipu = x.detach().to("dipu").requires_grad_()
        want, got = fn(x, 2), fn(on_dipu, 2)
        want.backward(torch.ones_like(want))
        got.backward(torch.ones_like(got))
        assert torch.equal(got.cpu(), want) and got.stride() == want.stride()
        assert torch.equal(on_dipu.grad.cpu(), x.grad)
    assert dipu.fallback_counts() == {}, dipu.fallback_counts()


def test_log_every_call(python):
    code = """
        import torch
        lib = torch.library.Library("dipu_test", "DEF")
        lib.define("scale(Tensor x, float factor) -> Tensor")
        lib.impl("scale", lambda x, factor: x * factor, "CPU")
        x = torch.rand(4, device="dipu")
        for _ in range(3):
            torch.ops.dipu_test.scale(x, 2.0)
    """
    err = python(code, env={"DIPU_LOG_FALLBACK_INFO": "1"}).stderr
    assert err.count("dipu: fallback to cpu: dipu_test::scale") == 3


def test_view_ops_are_never_run_by_the_fallback():
    with pytest.raises(RuntimeError, match="dipu: dipu_test::flat is a view operator without a dipu kernel"):
        ops.flat(torch.zeros(2, 2, device="dipu"))
    with pytest.raises(RuntimeError, match="dipu: _values is a view operator without a dipu kernel"):
        torch.ops.aten._values(torch.zeros(2, device="dipu"))


def test_python_entry_runs_an_op_through_the_fallback():
    x = torch.rand(3, device="dipu:1") + 0.5
    out = dipu._C.cpu_fallback("lgamma", (x,), {})
    assert out.device == torch.device("dipu:1")
    assert torch.allclose(out.cpu(), torch.lgamma(x.cpu()))
    out = dipu._C.cpu_fallback("dipu_test::scale", (x, 2.0), {})
    assert torch.equal(out.cpu(), x.cpu() * 2)


# ---- the *_overrideable placeholders (Note [Overrideable ops in the fallback]) ----


def test_convolutions_run_through_the_fallback(python):
    """With convolution forced to the fallback, forward and backward (plain, grouped, strided,
    transposed) match the CPU."""
    python("""
        import torch, torch.nn.functional as F, dipu
        assert "convolution_overrideable" not in dipu.kernels.registry.registered_ops()
        torch.manual_seed(0)
        cases = [
            (F.conv2d, (2, 4, 9, 9), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
            (F.conv1d, (2, 3, 10), (5, 3, 4), dict(dilation=2)),
            (F.conv_transpose2d, (2, 4, 5, 5), (4, 3, 3, 3), dict(stride=2, output_padding=1)),
        ]
        for fn, xs, ws, kw in cases:
            x, w, b = torch.randn(xs), torch.randn(ws), torch.randn(ws[1] if fn is F.conv_transpose2d else ws[0])
            grads = []
            for device in ("cpu", "dipu"):
                leaves = [t.to(device).detach().requires_grad_() for t in (x, w, b)]
                out = fn(*leaves, **kw)
                out.square().sum().backward()
                grads.append([out.detach().cpu()] + [t.grad.cpu() for t in leaves])
            for got, want in zip(grads[1], grads[0]):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        counts = dipu.fallback_counts()
        assert counts["convolution_overrideable"] == 3 and counts["convolution_backward_overrideable"] == 3
    """, env={"DIPU_FORCE_FALLBACK_OPS_LIST": "convolution.*"})


@pytest.mark.parametrize("mask", ["none", "causal", "float", "bool"])
def test_fused_attention_placeholder_matches_the_math_path(mask):
    """The CPU substitute of the attention placeholders (what a vendor without the DIOPI function runs)."""
    from dipu.kernels.fallback import run_on_cpu

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    bias = {"none": None, "causal": None, "float": torch.randn(5, 5), "bool": torch.rand(5, 5) > 0.3}[mask]
    if bias is not None and bias.dtype == torch.bool:
        bias[:, 0] = True  # no fully masked row
    causal = mask == "causal"
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    if bias is not None and bias.is_floating_point():
        bias.requires_grad_()
    want = torch.nn.functional.scaled_dot_product_attention(*leaves, attn_mask=bias, is_causal=causal)
    grad_out = torch.randn_like(want)
    want.backward(grad_out)

    d = [t.to("dipu") for t in (q, k, v)]
    dbias = None if bias is None else bias.detach().to("dipu")
    forward = run_on_cpu("_scaled_dot_product_fused_attention_overrideable", (*d, dbias), {"is_causal": causal})
    out, logsumexp = forward[0], forward[1]
    torch.testing.assert_close(out.cpu(), want.detach(), rtol=1e-5, atol=1e-5)
    assert out.device.type == "dipu" and logsumexp.shape == (2, 3, 5)
    grads = run_on_cpu("_scaled_dot_product_fused_attention_overrideable_backward", (
        grad_out.to("dipu"), *d, dbias, [True, True, True, True], out, logsumexp, *forward[2:6], 0.0, causal,
        *forward[6:8]), {})
    for got, leaf in zip(grads[:3], leaves):
        torch.testing.assert_close(got.cpu(), leaf.grad, rtol=1e-4, atol=1e-5)
    if mask == "float":
        torch.testing.assert_close(grads[3].cpu(), bias.grad, rtol=1e-4, atol=1e-5)
    else:
        assert grads[3] is None
    # With dropout the substitute draws the same mask from the dipu generator as dipu's own kernel does.
    torch.dipu.manual_seed(1)
    substitute = run_on_cpu("_scaled_dot_product_fused_attention_overrideable", (*d,), {"dropout_p": 0.5})[0]
    torch.dipu.manual_seed(1)
    kernel = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(*d, dropout_p=0.5)[0]
    torch.testing.assert_close(substitute.cpu(), kernel.cpu())
    assert (substitute.cpu() - out.cpu()).abs().max() > 0.1  # something was dropped


# ---- overlapping memory (Note [Overlapping memory] in dipu/csrc/overlap.cpp) ----


def _cpu_and_dipu(call):
    """``call(x, y)`` on the CPU and on dipu, each on 0..5 and six ones: (error or None, x after) per device."""
    outcomes = []
    for device in ("cpu", "dipu"):
        x, y = torch.arange(6.).to(device), torch.ones(6).to(device)
        try:
            call(x, y)
            outcomes.append((None, x.cpu()))
        except RuntimeError as error:
            outcomes.append((str(error), x.cpu()))
    return outcomes


@pytest.mark.parametrize("case", ["partial", "internal", "full", "disjoint", "inplace_partial"])
def test_the_fallback_sees_overlapping_memory_as_the_cpu_does(case):
    """Host copies hid overlap: the CPU's refusals (partial, internal) and its results where it accepts (full
    overlap, disjoint parts of one storage) now come from the CPU kernel on memory laid out as on dipu."""
    call = {
        "partial": lambda x, y: ops.scale.out(x[:5], 2.0, out=x[1:]),
        "internal": lambda x, y: ops.scale.out(y[:3], 2.0, out=x[:1].expand(3)),
        "full": lambda x, y: ops.scale.out(x, 2.0, out=x),
        "disjoint": lambda x, y: ops.scale.out(x[:3], 2.0, out=x[3:]),
        "inplace_partial": lambda x, y: ops.scale_(x[1:].as_strided((3,), (2,)), 2.0),  # no overlap: computes
    }[case]
    (cpu_error, cpu_x), (dipu_error, dipu_x) = _cpu_and_dipu(call)
    assert dipu_error == cpu_error
    assert (cpu_error is not None) == (case in ("partial", "internal"))
    if cpu_error:
        assert "refer" in cpu_error and "single memory location" in cpu_error
    assert torch.equal(dipu_x, cpu_x)


def test_copies_on_a_runtime_only_vendor_refuse_overlap_as_the_cpu_does(python):
    """Without native aliases dipu copies with the vendor's memcpy: a copy between overlapping parts of one storage
    (or into an expanded tensor) is refused as the CPU's copy_ refuses it, and one it accepts gives its values."""
    python("""
        import torch
        cases = {
            "partial": lambda x: x[1:].copy_(x[:-1]),
            "internal": lambda x: x[:1].expand(3).copy_(x[3:]),
            "full": lambda x: x.copy_(x.clone()),
            "disjoint": lambda x: x[:3].copy_(x[3:]),
            "broadcast": lambda x: x.view(2, 3).copy_(x[:3]),
        }
        for name, call in cases.items():
            seen = []
            for device in ("cpu", "dipu"):
                x = torch.arange(6.).to(device)
                try:
                    call(x)
                    seen.append(("ok", x.cpu().tolist()))
                except RuntimeError as error:
                    seen.append((str(error), x.cpu().tolist()))
            assert seen[0] == seen[1], (name, seen)
            assert (seen[0][0] != "ok") == (name in ("partial", "internal", "broadcast")), (name, seen)
    """, env=_RUNTIME_ONLY)


def test_forced_fallback_of_aten_ops_refuses_overlap_as_the_cpu_does(python):
    """aten ops on the fallback: each op's own rule (add: partial overlap refused; cat: any overlap; sum.out: none)."""
    python("""
        import torch, dipu
        cases = {
            "add": lambda x, y: torch.add(x[:5], y[:5], out=x[1:]),
            "add_same": lambda x, y: torch.add(x, y, out=x),
            "cat": lambda x, y: torch.cat([x[:3], y[:3]], out=x),
            "sum": lambda x, y: torch.sum(x.view(2, 3), 0, out=x[1:4]),
        }
        for name, call in cases.items():
            seen = []
            for device in ("cpu", "dipu"):
                x, y = torch.arange(6.).to(device), torch.ones(6).to(device)
                try:
                    call(x, y)
                    seen.append(("ok", x.cpu().tolist()))
                except RuntimeError as error:
                    seen.append((str(error), x.cpu().tolist()))
            assert seen[0] == seen[1], (name, seen)
        assert set(dipu.fallback_counts()) >= {"add.out", "cat.out", "sum.IntList_out"}, dipu.fallback_counts()
    """, env={"DIPU_FORCE_FALLBACK_OPS_LIST": "add.out,cat.out,sum.IntList_out"})


def test_wrappers_check_written_memory_before_the_kernel():
    """dipu.kernels.support.check_written_memory, which generated out= and in-place wrappers call before their DIOPI
    function: the CPU's error for overlapping memory, nothing when memory is apart or one tensor is passed twice."""
    from dipu.kernels.support import check_written_memory

    class AddOut:
        name = "add.out"

    outs = {"partial": lambda t: t[1:], "internal": lambda t: t[:1].expand(5), "same_memory": lambda t: t[:5],
            "apart": lambda t: torch.empty(5, device=t.device)}
    errors = {}
    for case, make_out in outs.items():
        for device in ("cpu", "dipu"):
            x, y = torch.arange(6.).to(device), torch.ones(6).to(device)
            args, out = (x[:5], y[:5]), make_out(x)
            try:
                if device == "cpu":
                    torch.add(*args, out=out)
                else:
                    check_written_memory(AddOut, (out,), args, args, {"out": out})
                    assert torch.equal(x.cpu(), torch.arange(6.))  # a probe writes nothing
                errors[case, device] = None
            except RuntimeError as error:
                errors[case, device] = str(error)
        assert errors[case, "dipu"] == errors[case, "cpu"], case
    assert errors["partial", "cpu"] and errors["internal", "cpu"]
    assert errors["same_memory", "cpu"] is None and errors["apart", "cpu"] is None
    x = torch.arange(6., device="dipu")
    # a number where the schema says Tensor
    with pytest.raises(RuntimeError, match="some elements of the input tensor"):
        check_written_memory(AddOut, (x[1:],), (x[:5],), (x[:5], 2), {"out": x[1:]})

    class IndexSelectOut:
        name = "index_select.out"

    index = torch.tensor([0, 1, 2, 3, 4, 5])
    cpu_x = torch.arange(6.)
    with pytest.raises(RuntimeError) as cpu:  # at::assert_no_overlap: the output may not even be the input itself
        torch.index_select(cpu_x, 0, index, out=cpu_x)
    args = (x, 0, index.to("dipu"))
    with pytest.raises(RuntimeError) as mine:
        check_written_memory(IndexSelectOut, (x,), args, args, {"out": x})
    assert str(mine.value) == str(cpu.value)


def test_the_overlap_probe_draws_no_random_numbers():
    """A random op's probe draws from a throwaway generator: neither the CPU's nor dipu's generators move."""
    from dipu.kernels.support import check_written_memory

    class BernoulliOut:
        name = "bernoulli.out"

    x = torch.full((6,), 0.5, device="dipu")
    cpu_state, dipu_state = torch.get_rng_state(), torch.dipu.get_rng_state()
    for generator in (None, torch.Generator(device="dipu").manual_seed(1)):
        generator_state = generator.get_state() if generator is not None else None
        kwargs = {"generator": generator, "out": x[1:]}
        with pytest.raises(RuntimeError, match="single memory location"):
            check_written_memory(BernoulliOut, (x[1:],), (x[:5],), (x[:5],), kwargs)
        check_written_memory(BernoulliOut, (x,), (x,), (x,), {"generator": generator, "out": x})  # allowed
        if generator is not None:
            assert torch.equal(generator.get_state(), generator_state)
    assert torch.equal(torch.get_rng_state(), cpu_state) and torch.equal(torch.dipu.get_rng_state(), dipu_state)
    assert torch.equal(x.cpu(), torch.full((6,), 0.5))
