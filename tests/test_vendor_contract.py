"""The contract path: a vendor without a native alias device.

With DIPU_SIM_NATIVE_ALIAS=0 the simulated vendor hides that its memory is host
memory, so the core must move bytes through the vendor's memcpy functions and
stage strided or converting copies through host images (see Note [Copies:
alias or staging]). Everything a user does must still be exact.
"""

from dipu.runtime import parse_size


def test_copies_views_fill_and_ops_through_vendor_memcpy(python):
    out = python("""
        import torch, dipu
        assert dipu.vendor().native_device_type is None
        x = torch.arange(24.0).reshape(4, 6)
        d = x.to("dipu:1")
        assert torch.equal(d.cpu(), x)
        assert torch.equal(d.t().cpu(), x.t())                  # strided D2H
        assert torch.equal(d[1:, 2:5].cpu(), x[1:, 2:5])        # offset + gaps
        assert torch.equal(d.to(torch.int64).cpu(), x.long())   # dtype conversion on device
        assert torch.equal(d.t().contiguous().cpu(), x.t().contiguous())
        e = d.to("dipu:0")                                      # D2D across devices
        assert e.device.index == 0 and torch.equal(e.cpu(), x)
        d[:, 1].fill_(-1)                                       # fill_ through a strided view
        d[2].zero_()
        y = x.clone(); y[:, 1] = -1; y[2] = 0
        assert torch.equal(d.cpu(), y)
        d[3].copy_(torch.tensor(5.0).to("dipu"))                 # broadcasting D2D copy
        y[3] = 5.0
        d[0, 1:3].copy_(torch.tensor([7.0, 8.0]))               # H2D into a strided slice
        y[0, 1:3] = torch.tensor([7.0, 8.0])
        assert torch.equal(d.cpu(), y)
        assert d[0, 2].item() == 8.0
        assert torch.allclose((d * 2 + 1).cpu(), y * 2 + 1)      # ops via the CPU fallback
        t = torch.arange(4.0, device="dipu"); t.resize_(8)
        assert torch.equal(t[:4].cpu(), torch.arange(4.0))
        print("ok")
    """, env={"DIPU_SIM_NATIVE_ALIAS": "0"}).stdout
    assert out.strip() == "ok"


def test_bad_alias_switch_is_rejected(python):
    proc = python("import dipu", env={"DIPU_SIM_NATIVE_ALIAS": "maybe"}, check=False)
    assert "DIPU_SIM_NATIVE_ALIAS='maybe' must be 0 or 1" in proc.stderr


def test_size_parsing():
    assert parse_size("X", "512M") == 512 << 20
    assert parse_size("X", "2G") == 2 << 30
    assert parse_size("X", "1.5GiB") == 3 << 29
    assert parse_size("X", "4096") == 4096
