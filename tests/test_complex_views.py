"""Complex tensors, conjugate/negative bits and view ops on dipu behave as on the CPU.

See Note [Conjugate and negative bits] in dipu/csrc/copies.cpp: a lazily conjugated
or negated tensor must read the same values through every path (copies,
clones, native aliases in kernels), and no copy may recurse.
"""

import pytest
import torch

import dipu  # noqa: F401  (registers the device)


def same(got, want):
    assert got.device.type == "dipu"
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.resolve_conj().resolve_neg(), want.resolve_conj().resolve_neg())


@pytest.fixture(params=[torch.complex64, torch.complex128])
def pair(request):
    c = torch.randn(3, 4, dtype=request.param)
    return c, c.to("dipu")


def test_conjugate_views_copy_clone_and_resolve(pair):
    c, d = pair
    assert d.conj().is_conj()
    torch.testing.assert_close(d.conj().cpu(), c.conj())
    same(d.conj().resolve_conj(), c.conj().resolve_conj())
    same(d.conj().clone(), c.conj().clone())
    same(c.conj().to("dipu"), c.conj())
    assert d.conj()[1, 2].item() == c.conj()[1, 2].item()


def test_negative_views_copy_and_compute():
    r = torch.randn(5)
    rd = r.to("dipu")
    torch.testing.assert_close(torch._neg_view(rd).cpu(), torch._neg_view(r).resolve_neg())
    same(torch._neg_view(rd) * 2, torch._neg_view(r) * 2)
    same(torch._neg_view(rd).clone(), torch._neg_view(r).clone())


def test_writes_through_a_conjugate_view(pair):
    c, d = pair
    x, y = d.clone(), c.clone()
    x.conj().fill_(1 + 2j)
    y.conj().fill_(1 + 2j)
    same(x, y)
    x.conj().copy_(d)
    y.conj().copy_(c)
    same(x, y)


def test_kernels_see_the_conjugate_bit(pair):
    c, d = pair
    same(d.mH @ d, c.mH @ c)  # mm is conjugate-aware: the bit reaches the kernel, not a copy
    same(d.conj() + 1, c.conj() + 1)
    same(d.conj() * d, c.conj() * c)


def test_fft_of_a_real_tensor():
    r = torch.randn(8)
    same(torch.fft.ifft(r.to("dipu")), torch.fft.ifft(r))
    same(torch.fft.rfft(r.to("dipu")), torch.fft.rfft(r))


def test_complex_views(pair):
    c, d = pair
    same(torch.view_as_real(d), torch.view_as_real(c))
    same(torch.view_as_complex(torch.view_as_real(d)), c)
    same(d.real, c.real)
    same(d.imag, c.imag)
    same(d.conj().imag, c.conj().imag)
    real = torch.view_as_real(d)
    real[0, 0, 0] = 42.0  # a view: writes land in the complex tensor
    assert d[0, 0].real.item() == 42.0
    with pytest.raises(RuntimeError, match="view_as_real doesn't work on unresolved conjugated tensors"):
        torch.view_as_real(d.conj())


def test_unfold_and_other_strided_views():
    x = torch.arange(24.0).reshape(4, 6)
    d = x.to("dipu")
    same(d.unfold(1, 3, 2), x.unfold(1, 3, 2))
    same(d.diagonal(offset=1), x.diagonal(offset=1))
    same(d.unfold(0, 2, 1).sum(-1), x.unfold(0, 2, 1).sum(-1))
    assert d.unfold(1, 3, 2).data_ptr() == d.data_ptr()


def test_complex_through_the_contract_path(python):
    """A vendor without a native alias copies through its memcpy: bits are materialized there too."""
    python("""
        import torch, dipu
        c = torch.randn(3, 3, dtype=torch.complex64)
        d = c.to("dipu")
        torch.testing.assert_close(d.conj().cpu(), c.conj())
        torch.testing.assert_close((d.mH @ d).cpu(), c.mH @ c)
        torch.testing.assert_close(torch._neg_view(d.real).cpu(), -c.real)
        x = d.clone(); x.conj().copy_(d)
        torch.testing.assert_close(x.cpu(), c.conj())
    """, env={"DIPU_SIM_NATIVE_ALIAS": "0"})


# Views over layouts dipu does not have (sparse, nested): the fallback refuses them by name.
NOT_DENSE_VIEWS = {"_indices", "_values", "_sparse_broadcast_to", "_nested_get_values",
                   "_nested_view_from_buffer", "_nested_view_from_jagged"}


def test_every_dense_view_op_has_a_kernel():
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    keys = ("PrivateUse1", "CompositeExplicitAutograd", "CompositeImplicitAutograd",
            "CompositeExplicitAutogradNonFunctional")
    missing = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        for schema in torch._C._jit_get_schemas_for_operator(name):
            alias = schema.returns[0].alias_info if schema.returns else None
            if alias is None or alias.is_write:
                continue
            full = name + ("." + schema.overload_name if schema.overload_name else "")
            try:
                served = any(has(full, key) for key in keys)
            except RuntimeError:  # a TorchScript-only overload
                continue
            if not served and name.removeprefix("aten::") not in NOT_DENSE_VIEWS:
                missing.append(full)
    assert missing == []


def test_a_view_without_a_kernel_fails_naming_it():
    with pytest.raises(RuntimeError, match="dipu: _values is a view operator without a dipu kernel"):
        torch.ops.aten._values(torch.ones(2, device="dipu"))
