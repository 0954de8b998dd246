"""The caching allocator: reuse, statistics, stream awareness, raw mode, OOM."""

import gc

import pytest
import torch

import dipu

MiB = 1 << 20


def stats(device=0):
    return torch.dipu.memory_stats(device)


def test_stats_return_to_baseline():
    gc.collect()
    base = torch.dipu.memory_allocated(1)
    tensors = [torch.empty(1000, device="dipu:1") for _ in range(5)]
    assert torch.dipu.memory_allocated(1) - base == 5 * 4096  # 4000 B rounds to 4096
    assert torch.dipu.max_memory_allocated(1) >= base + 5 * 4096
    assert torch.dipu.memory_reserved(1) >= torch.dipu.memory_allocated(1)
    del tensors
    gc.collect()
    assert torch.dipu.memory_allocated(1) == base


def test_a_large_tensor_holds_its_size_not_a_2_mib_step():
    """Note [Block sizes]: a large request is split off its segment at a multiple of 512 B, not CUDA's 2 MiB."""
    gc.collect()
    torch.dipu.empty_cache()  # no cached block up to 25% larger to reuse
    base = torch.dipu.memory_allocated(1)
    x = torch.empty(MiB + 100_000, dtype=torch.uint8, device="dipu:1")
    assert torch.dipu.memory_allocated(1) - base == (MiB + 100_000 + 511) // 512 * 512
    del x


def test_cache_reuses_blocks_without_vendor_calls():
    x = torch.empty(MiB, dtype=torch.uint8, device="dipu")
    ptr = x.data_ptr()
    del x
    before = stats()["num_device_alloc"]
    y = torch.empty(MiB, dtype=torch.uint8, device="dipu")
    assert y.data_ptr() == ptr
    assert stats()["num_device_alloc"] == before


def test_peak_reset_and_empty_cache():
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
    del x
    assert torch.dipu.max_memory_allocated() >= 4 * MiB
    torch.dipu.reset_peak_memory_stats()
    assert torch.dipu.max_memory_allocated() == torch.dipu.memory_allocated()
    reserved = torch.dipu.memory_reserved()
    torch.dipu.empty_cache()
    assert torch.dipu.memory_reserved() <= reserved - 4 * MiB
    # What stays reserved but unallocated is the free part of segments that tensors still use.
    assert torch.dipu.memory_reserved() - torch.dipu.memory_allocated() == stats()["inactive_split_bytes.all.current"]


def test_block_freed_on_one_stream_is_not_reused_on_another():
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
    ptr = x.data_ptr()
    del x
    side = torch.dipu.Stream()
    with torch.dipu.stream(side):
        y = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
        assert y.data_ptr() != ptr
    z = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
    assert z.data_ptr() == ptr


def test_record_stream_block_is_reused_once_its_event_completes():
    side = torch.dipu.Stream()
    x = torch.empty(5 * MiB, dtype=torch.uint8, device="dipu")
    ptr = x.data_ptr()
    x.record_stream(side)
    del x
    # Once the side stream has run its work (at once for sim's synchronous events; refc's worker
    # threads need the wait) the block is reusable on its own stream at the next allocation; the
    # deferral itself is checked under manual events below.
    side.synchronize()
    y = torch.empty(5 * MiB, dtype=torch.uint8, device="dipu")
    assert y.data_ptr() == ptr


MANUAL_EVENTS = {"DIPU_SIM_EVENTS": "manual"}  # Note [Manual events] in vendor/sim/manual_events.py


def test_record_stream_defers_reuse_and_release_until_stream_event_completes(python):
    code = """
        import torch, dipu
        MiB = 1 << 20

        def state(ptr):
            return [b["state"] for s in torch.dipu.memory_snapshot() for b in s["blocks"] if b["address"] == ptr]

        side = torch.dipu.Stream(device=1)  # another device's stream: its event is on dipu:1
        side_handle = dipu._C.stream_handle(side.stream_id, 1)
        x = torch.empty(5 * MiB, dtype=torch.uint8, device="dipu")
        ptr = x.data_ptr()
        x.record_stream(side)
        del x
        assert state(ptr) == ["active_pending_free"], state(ptr)
        # Pending: neither handed out again nor released, however often asked.
        y = torch.empty(5 * MiB, dtype=torch.uint8, device="dipu")
        assert y.data_ptr() != ptr
        torch.dipu.empty_cache()
        assert state(ptr) == ["active_pending_free"], state(ptr)
        assert torch.dipu.memory_reserved() - torch.dipu.memory_allocated() >= 5 * MiB
        z = torch.empty(5 * MiB, dtype=torch.uint8, device="dipu")
        assert z.data_ptr() != ptr
        # The side stream runs past the event: the block is reused on its own stream (y and z
        # stay alive, so it is the only cached block that fits)...
        assert dipu.vendor().advance(1, side_handle)
        w = torch.empty(5 * MiB, dtype=torch.uint8, device="dipu")
        assert w.data_ptr() == ptr, "a completed record_stream block was not reused"
        # ...and, recorded and freed again, released by empty_cache once its event completes.
        w.record_stream(side)
        del w
        torch.dipu.empty_cache()
        assert state(ptr) == ["active_pending_free"], state(ptr)
        torch.dipu.synchronize(1)  # waiting for the device completes its streams' events
        torch.dipu.empty_cache()
        assert state(ptr) == ["inactive"], state(ptr)  # free, in the segment that y and z still use
        del y, z
        torch.dipu.empty_cache()
        assert state(ptr) == [], state(ptr)
        assert dipu.vendor().pending_events() == 0
        print("ok")
    """
    assert python(code, env=MANUAL_EVENTS).stdout.strip() == "ok"


def test_an_output_taking_aten_s_result_memory_counts_as_dipu_s_and_follows_its_stream_rules(python):
    """Note [Taken results]: a convolution's output (torch op library in C++, ATen's functional result) holds
    the result's own memory: counted while it lives, never cached, held past its streams' work."""
    code = """
        import torch, dipu
        import torch.nn.functional as F

        def state(ptr):
            return [b["state"] for s in torch.dipu.memory_snapshot() for b in s["blocks"] if b["address"] == ptr]

        x, w = torch.randn(2, 3, 17, 19), torch.randn(5, 3, 3, 3)
        xd, wd = x.to("dipu"), w.to("dipu")
        torch.dipu.empty_cache()
        reserved, allocated = torch.dipu.memory_reserved(), torch.dipu.memory_allocated()
        y = F.conv2d(xd, wd)
        assert torch.equal(y.cpu(), F.conv2d(x, w))
        size = y.untyped_storage().nbytes()  # 2*5*15*17 floats: not a multiple of dipu's 512-byte blocks
        assert torch.dipu.memory_allocated() - allocated == size, "the output is not the result's own memory"
        assert state(y.data_ptr()) == ["active_allocated"]
        del y
        # Not cached: it went back to the CPU's allocator; only dipu's own block for the output stays cached
        # (split off a small segment: Note [Splitting blocks]).
        assert torch.dipu.memory_allocated() == allocated
        assert torch.dipu.memory_reserved() - reserved <= 2 << 20

        side = torch.dipu.Stream()
        side_handle = dipu._C.stream_handle(side.stream_id, 0)
        y = F.conv2d(xd, wd)
        ptr = y.data_ptr()
        y.record_stream(side)
        del y
        torch.dipu.empty_cache()
        assert state(ptr) == ["active_pending_free"], state(ptr)  # the side stream may still read it
        assert dipu.vendor().advance(0, side_handle)
        torch.dipu.empty_cache()
        assert state(ptr) == [], state(ptr)
        unallocated = torch.dipu.memory_reserved() - torch.dipu.memory_allocated()
        assert unallocated == torch.dipu.memory_stats()["inactive_split_bytes.all.current"]
        # Empty results hold no memory to take: outputs of a batch of none, two alive at once.
        empty = [F.conv2d(torch.randn(0, 3, 8, 8, device="dipu"), wd) for _ in range(2)]
        assert [tuple(e.shape) for e in empty] == [(0, 5, 6, 6)] * 2
        del empty
        print("ok")
    """
    assert python(code, env=MANUAL_EVENTS).stdout.strip() == "ok"


def test_outputs_a_function_allocates_take_aten_s_results_instead_of_copies(python):
    """Note [Taken results]: the outputs of a functional _foreach_ op (torch op library in C++, which allocates
    them) are ATen's results' own memory (dipuRequireResult), counted while they live, and behave as any dipu
    tensor: they compute, grow and go back to the CPU's allocator."""
    code = """
        import torch, dipu

        xs = [torch.rand(3, 37), torch.rand(5)]
        xds = [x.to("dipu:1") for x in xs]
        torch.dipu.empty_cache()
        allocated = torch.dipu.memory_allocated(1)
        ys = torch._foreach_sqrt(xds)
        assert [y.device for y in ys] == [torch.device("dipu:1")] * 2
        assert all(torch.equal(y.cpu(), x.sqrt()) for x, y in zip(xs, ys))
        sizes = [y.untyped_storage().nbytes() for y in ys]
        assert sizes == [3 * 37 * 4, 5 * 4]  # not rounded to dipu's 512-byte blocks: no output was allocated
        assert torch.dipu.memory_allocated(1) - allocated == sum(sizes)
        ys[0].mul_(2)
        ys[1].resize_(300)  # grows into a block of dipu's own; the taken memory goes back
        ys[1][5:] = 1
        assert torch.equal(ys[0].cpu(), xs[0].sqrt() * 2) and torch.equal(ys[1][:5].cpu(), xs[1].sqrt())
        del ys
        assert torch.dipu.memory_allocated(1) == allocated
        print("ok")
    """
    assert python(code).stdout.strip() == "ok"


def test_device_from_pointer():
    x = torch.empty(100, device="dipu:1")
    assert dipu._C.device_from_pointer(x.data_ptr() + 8) == torch.device("dipu:1")
    with pytest.raises(RuntimeError, match="was not allocated by the dipu allocator"):
        dipu._C.device_from_pointer(torch.empty(4).data_ptr())


def test_out_of_memory_recovers(python):
    code = """
        import torch
        x = torch.empty(1 << 20, dtype=torch.uint8, device="dipu:1")  # 1 MiB, stays
        y = torch.empty(200 << 20, dtype=torch.uint8, device="dipu:1")
        del y  # cached, must be released to satisfy the next request
        big = torch.empty(400 << 20, dtype=torch.uint8, device="dipu:1")
        del big
        try:
            torch.empty(600 << 20, dtype=torch.uint8, device="dipu:1")
        except torch.OutOfMemoryError as e:
            print("OOM:", e)
        stats = torch.dipu.memory_stats(1)
        print("retries", stats["num_alloc_retries"], "ooms", stats["num_ooms"])
        z = torch.ones(100 << 20, dtype=torch.uint8, device="dipu:1")
        print("after", int(z.sum().item()), int(x.numel()))
    """
    out = python(code, env={"DIPU_SIM_MEMORY": "512M"}).stdout
    assert "OOM: dipu out of memory on sim device dipu:1: tried to allocate 600.00 MiB. The device has a total " \
           "capacity of 512.00 MiB of which " in out
    assert "Of the memory dipu holds, 1.00 MiB is allocated and 1.00 MiB is reserved but unallocated. Free " in out
    assert "retries 2 ooms 1" in out
    assert f"after {100 << 20} {1 << 20}" in out


def test_raw_allocator_mode(python):
    code = """
        import torch
        for _ in range(3):
            x = torch.empty(1000, device="dipu")
            del x
        s = torch.dipu.memory_stats()
        print(s["num_device_alloc"], s["num_device_free"], s["reserved_bytes.all.current"])
    """
    out = python(code, env={"DIPU_ALLOCATOR": "raw"}).stdout.split()
    assert int(out[0]) >= 3 and int(out[0]) - int(out[1]) <= 1


def test_pinned_memory():
    p = torch.ones(16).pin_memory()
    assert p.is_pinned()
    assert not torch.ones(16).is_pinned()
    d = p.to("dipu", non_blocking=True)
    assert torch.equal(d.cpu(), torch.ones(16))


def test_storage_resize_keeps_contents():
    t = torch.arange(4.0, device="dipu")
    t.resize_(10)
    assert t.shape == (10,)
    assert torch.equal(t[:4].cpu(), torch.arange(4.0))
    s = torch.UntypedStorage(8, device="dipu")
    s.resize_(64)
    assert s.nbytes() == 64 and s.device.type == "dipu"
