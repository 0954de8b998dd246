"""Expandable segments (Note [Expandable segments] in dipu/csrc/allocator.cpp): with expandable_segments:True and
a vendor with the virtual-memory methods, one segment per stream and pool grows by mapping memory at its end and
shrinks on empty_cache; a vendor without them warns and keeps plain segments. Also Note [Taken results]: memory
taken from ATen's results counts against the device's capacity. The in-process tests turn the setting on for
themselves and allocate on a stream of their own, whose pools start empty."""

import gc
import random

import pytest
import torch
import torch.cuda._memory_viz as memory_viz

import dipu
from dipu import runtime

MiB = 1 << 20
MANUAL_EVENTS = {"DIPU_SIM_EVENTS": "manual"}


@pytest.fixture
def expandable():
    gc.collect()
    torch.dipu.empty_cache()
    torch.dipu.memory._set_allocator_settings("expandable_segments:True")
    yield
    torch.dipu.memory._set_allocator_settings("expandable_segments:False")
    gc.collect()
    torch.dipu.empty_cache()


def stats():
    return torch.dipu.memory_stats()


def segment_of(ptr):
    for seg in torch.dipu.memory_snapshot():
        if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
            return seg
    return None


def test_the_vendor_has_virtual_memory():
    assert dipu._core.virtual_memory, f"vendor '{dipu.vendor().name}' should have the vm_* methods"


def test_one_segment_grows_by_what_is_missing_and_shrinks_on_empty_cache(expandable):
    with torch.dipu.stream(torch.dipu.Stream()):
        before = stats()
        x = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
        seg = segment_of(x.data_ptr())
        assert seg["is_expandable"] and seg["address"] == x.data_ptr()
        assert seg["total_size"] == 4 * MiB, "the 3 MiB request maps two 2 MiB granules"
        y = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")  # 1 MiB free at the end: 2 MiB more mapped
        assert y.data_ptr() == x.data_ptr() + 3 * MiB
        assert segment_of(x.data_ptr())["total_size"] == 6 * MiB
        now = stats()
        assert now["num_device_alloc"] - before["num_device_alloc"] == 2
        assert now["segment.large_pool.current"] - before["segment.large_pool.current"] == 1
        assert now["reserved_bytes.large_pool.current"] - before["reserved_bytes.large_pool.current"] == 6 * MiB
        z = torch.empty(1 * MiB, dtype=torch.uint8, device="dipu")  # the small pool's own segment
        assert segment_of(z.data_ptr())["segment_type"] == "small" and segment_of(z.data_ptr())["is_expandable"]
        del y, z
        torch.dipu.empty_cache()  # x ends at 3 MiB: the granule it touches stays, the one after it goes
        assert segment_of(x.data_ptr())["total_size"] == 4 * MiB
        assert [(b["size"], b["state"]) for b in segment_of(x.data_ptr())["blocks"]] == [
            (3 * MiB, "active_allocated"), (1 * MiB, "inactive")]
        assert stats()["num_device_free"] - before["num_device_free"] == 2  # and the small segment's granule
        ptr = x.data_ptr()
        del x
        torch.dipu.empty_cache()
        assert segment_of(ptr) is None
        after = stats()
        for key in ("segment.all.current", "reserved_bytes.all.current", "allocated_bytes.all.current",
                    "inactive_split.all.current"):
            assert after[key] == before[key], key


def test_a_request_borrows_a_free_block_of_the_other_pool_before_mapping(expandable):
    """Note [Borrowing between pools]: with no block in its own pool, a request takes the other pool's best fit;
    only when neither has one does its own pool's segment map more. With plain segments only a small request
    borrows, from a large segment (tests/test_allocator_split.py)."""
    with torch.dipu.stream(torch.dipu.Stream()):
        big = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
        large = segment_of(big.data_ptr())
        del big  # the large segment: 4 MiB mapped, all free
        before = stats()
        a = torch.empty(MiB // 2, dtype=torch.uint8, device="dipu")  # small, from the large segment
        assert segment_of(a.data_ptr())["address"] == large["address"]
        assert stats()["num_device_alloc"] == before["num_device_alloc"]
        assert stats()["allocated_bytes.large_pool.current"] - before["allocated_bytes.large_pool.current"] == MiB // 2
        rest = torch.empty(3 * MiB + MiB // 2, dtype=torch.uint8, device="dipu")  # the rest of the large one
        assert rest.data_ptr() == a.data_ptr() + MiB // 2
        b = torch.empty(MiB // 2, dtype=torch.uint8, device="dipu")  # nothing free anywhere: the small pool maps
        assert segment_of(b.data_ptr())["segment_type"] == "small"
        assert stats()["num_device_alloc"] - before["num_device_alloc"] == 1
        del a, rest
        c = torch.empty(MiB + MiB // 2, dtype=torch.uint8, device="dipu")  # large: the large segment's free block
        assert segment_of(c.data_ptr())["address"] == large["address"]
        del b, c
    torch.dipu.memory._set_allocator_settings("expandable_segments:False")
    with torch.dipu.stream(torch.dipu.Stream()):
        small = torch.empty(MiB // 2, dtype=torch.uint8, device="dipu")
        del small  # a plain small segment, free
        big = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
        del big  # a plain large segment, free
        d = torch.empty(2 * MiB, dtype=torch.uint8, device="dipu")  # large: never from the small segment
        seg = segment_of(d.data_ptr())
        assert seg["segment_type"] == "large" and not seg["is_expandable"]
        del d


def test_a_variable_size_loop_maps_nothing_after_warm_up(expandable):
    """Sequence lengths drawn each step, activations freed in reverse as a backward pass does: once the longest
    step has run, every step fits the segment; plain segments reserve more for the same loop."""
    rng = random.Random(0)
    lengths = [512] + [rng.randint(16, 512) for _ in range(30)]

    def step(length):
        acts = [torch.empty(MiB + length * 4096 * k, dtype=torch.uint8, device="dipu") for k in (1, 3, 2, 4, 1)]
        while acts:
            acts.pop()

    with torch.dipu.stream(torch.dipu.Stream()):
        params = torch.empty(5 * MiB, dtype=torch.uint8, device="dipu")
        torch.dipu.reset_peak_memory_stats()
        mallocs = []
        for length in lengths:
            before = stats()["num_device_alloc"]
            step(length)
            mallocs.append(stats()["num_device_alloc"] - before)
        s = stats()
        assert sum(mallocs[10:]) == 0, mallocs
        assert s["reserved_bytes.all.peak"] <= 1.15 * s["allocated_bytes.all.peak"] + 4 * MiB
        del params


def test_blocks_used_on_another_stream_wait_and_are_reused(python):
    """record_stream: the block waits for the other stream's work, the segment keeps it mapped, and once the
    work is done its memory serves the next request without a map."""
    code = """
        import torch, dipu
        MiB = 1 << 20
        torch.dipu.memory._set_allocator_settings("expandable_segments:True")
        s, side = torch.dipu.Stream(), torch.dipu.Stream()
        side_handle = dipu._C.stream_handle(side.stream_id, 0)
        def seg_of(ptr):
            return [(b["size"], b["state"]) for s in torch.dipu.memory_snapshot() for b in s["blocks"]
                    if s["address"] <= ptr < s["address"] + s["total_size"]]
        with torch.dipu.stream(s):
            x = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
            ptr = x.data_ptr()
            x.record_stream(side)
            del x
            torch.dipu.empty_cache()
            assert seg_of(ptr) == [(3 * MiB, "active_pending_free"), (1 * MiB, "inactive")], seg_of(ptr)
            assert dipu.vendor().advance(0, side_handle)
            mapped = torch.dipu.memory_stats()["num_device_alloc"]
            y = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
            assert y.data_ptr() == ptr and torch.dipu.memory_stats()["num_device_alloc"] == mapped
            del y
            torch.dipu.empty_cache()
            assert seg_of(ptr) == []
        print("ok")
    """
    assert python(code, env=MANUAL_EVENTS).stdout.strip() == "ok"


@pytest.mark.parametrize("vendor", ["sim", "refc"])
def test_both_host_vendors_grow_shrink_compute_and_run_out(vendor, python):
    code = """
        import torch, dipu
        MiB = 1 << 20
        assert dipu._core.virtual_memory
        x = torch.arange(3 * MiB // 4, dtype=torch.float32, device="dipu")
        y = x * 2
        assert torch.equal(y.cpu(), torch.arange(3 * MiB // 4, dtype=torch.float32) * 2)
        seg = [s for s in torch.dipu.memory_snapshot() if s["address"] <= x.data_ptr() < s["address"] + s["total_size"]]
        assert seg[0]["is_expandable"] and seg[0]["total_size"] == 6 * MiB, seg
        free_before = torch.dipu.mem_get_info()[0]
        del y
        torch.dipu.empty_cache()
        assert torch.dipu.mem_get_info()[0] - free_before == 2 * MiB  # the vendor got the unmapped granule back
        keep = []
        try:
            while True:
                keep.append(torch.empty(10 * MiB, dtype=torch.uint8, device="dipu"))
        except torch.OutOfMemoryError as e:
            message = str(e)
        assert "expandable_segments:True lets" not in message, message
        assert len(keep) >= 9, len(keep)  # 128 MiB: the segment used nearly all of it
        del keep
        torch.dipu.empty_cache()
        z = torch.ones(20 * MiB // 4, device="dipu")  # the process goes on
        assert z.sum().item() == 20 * MiB // 4
        print("ok")
    """
    env = {"DIPU_VENDOR": vendor, "PYTORCH_ALLOC_CONF": "expandable_segments:True", "DIPU_SIM_MEMORY": "128M",
           "DIPU_REFC_MEMORY_MB": "128"}
    if vendor == "refc":
        del env["DIPU_SIM_MEMORY"]  # a DIPU_SIM_* switch would select the sim (tests/conftest.py)
    assert python(code, env=env).stdout.strip() == "ok"


def test_a_vendor_without_virtual_memory_warns_naming_it_and_keeps_plain_segments(python):
    code = """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch, dipu
            x = torch.ones(10, device="dipu")
        print([str(w.message) for w in caught if "expandable" in str(w.message)])
        print(torch.dipu.memory._snapshot()["allocator_settings"]["expandable_segments"],
              {s["is_expandable"] for s in torch.dipu.memory_snapshot()}, x.sum().item())
    """
    env = {"PYTORCH_ALLOC_CONF": "expandable_segments:True", "DIPU_SIM_VIRTUAL_MEMORY": "0"}
    out = python(code, env=env).stdout.splitlines()
    assert "expandable_segments:True: the sim vendor's runtime has no virtual-memory methods" in out[0]
    assert out[1] == "False {False} 10.0"


def test_the_snapshot_and_its_history_are_readable_by_memory_viz(expandable):
    torch.dipu.memory._record_memory_history(max_entries=1000)
    try:
        with torch.dipu.stream(torch.dipu.Stream()):
            x = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
            y = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
            del y
            torch.dipu.empty_cache()
            snapshot = torch.dipu.memory._snapshot()
    finally:
        torch.dipu.memory._record_memory_history(enabled=None)
    seg = next(s for s in snapshot["segments"] if s["address"] == x.data_ptr())
    assert seg["is_expandable"] is True and seg["total_size"] == sum(b["size"] for b in seg["blocks"]) == 4 * MiB
    actions = [e["action"] for e in snapshot["device_traces"][0] if e["stream"] == seg["stream"]]
    assert actions.count("segment_map") == 2 and actions.count("segment_unmap") == 1, actions
    assert snapshot["allocator_settings"]["expandable_segments"] is True
    assert memory_viz.calc_active(seg) == 3 * MiB
    assert f"seg_{seg['address']}" in memory_viz.segments(snapshot, format_flamegraph=lambda text: text)
    assert "segments: " in memory_viz.segsum(snapshot)
    assert "<html" in memory_viz.segment_plot(snapshot).lower()
    assert "<html" in memory_viz.trace_plot(snapshot).lower()
    del x


def test_fragmentation_advice_names_expandable_segments_only_while_they_are_off(python):
    code = """
        import torch, dipu
        MiB = 1 << 20
        with torch.dipu.stream(torch.dipu.Stream()):
            blocks = []
            try:
                while True:
                    blocks.append(torch.empty(5 * MiB, dtype=torch.uint8, device="dipu"))
            except torch.OutOfMemoryError:
                pass
            del blocks[::2]
            try:
                torch.empty(18 * MiB, dtype=torch.uint8, device="dipu")
            except torch.OutOfMemoryError as e:
                print(e)
    """
    out = python(code, env={"DIPU_SIM_MEMORY": "256M"}).stdout
    assert "the cache is fragmented; setting PYTORCH_ALLOC_CONF=expandable_segments:True lets one segment per " \
           "stream grow instead (or max_split_size_mb:<MiB> keeps large blocks from being split)." in out
    out = python(code, env={"DIPU_SIM_MEMORY": "256M", "PYTORCH_ALLOC_CONF": "expandable_segments:True"}).stdout
    assert "fragmented; setting PYTORCH_ALLOC_CONF=max_split_size_mb:<MiB>" in out and "expandable" not in out


def test_a_vendor_implementing_part_of_the_virtual_memory_methods_is_refused():
    class Partial(runtime.DeviceRuntime):
        def device_count(self): return 1
        def set_device(self, index): pass
        def synchronize_device(self, index): pass
        def device_properties(self, index): return runtime.DeviceProperties("partial", 1 << 20)
        def malloc(self, index, nbytes): return 0
        def free(self, index, ptr): pass
        def memcpy_h2d(self, index, dst, src, nbytes): pass
        def memcpy_d2h(self, index, dst, src, nbytes): pass
        def memcpy_d2d(self, dst_index, dst, src_index, src, nbytes): pass
        def vm_reserve(self, index, nbytes): return 0
        def vm_map(self, index, ptr, nbytes): return False

    with pytest.raises(TypeError, match="implements the virtual-memory methods vm_reserve, vm_map but not "
                                        "vm_granularity, vm_unmap, vm_release: all of them or none"):
        runtime.check_runtime_class("partial", Partial)


def test_the_sim_switch_is_checked(python):
    proc = python("import dipu", env={"DIPU_SIM_VIRTUAL_MEMORY": "yes"}, check=False)
    assert proc.returncode != 0 and "DIPU_SIM_VIRTUAL_MEMORY='yes' must be 0 or 1" in proc.stderr


def test_the_sim_refuses_a_map_outside_its_ranges():
    vendor = dipu.vendor()
    if vendor.name != "sim":
        pytest.skip("the sim vendor's own checks")
    with pytest.raises(ValueError, match="outside every range reserved on sim device 0"):
        vendor.vm_map(0, 1 << 40, 2 * MiB)
    with pytest.raises(ValueError, match="must be positive multiples of 2097152 bytes"):
        vendor.vm_map(0, 1 << 40, 4096)


def test_taken_results_count_against_the_device_capacity(python):
    """Note [Taken results]: ATen's result memory an output takes is dipu's as much as the vendor's is, so the
    vendor's allocations and the taken memory together stay within the device's capacity."""
    code = """
        import torch, dipu
        MiB = 1 << 20
        a = torch.rand(24 * MiB // 4).to("dipu")     # a 24 MiB segment of the vendor's
        (r,) = torch._foreach_sqrt([a])               # 24 MiB taken from ATen's result
        assert torch.dipu.memory_reserved() >= 48 * MiB
        free, total = torch.dipu.mem_get_info()
        assert free >= 36 * MiB                       # the vendor itself has room for 20 MiB more ...
        try:
            torch.empty(20 * MiB, dtype=torch.uint8, device="dipu")
            print("allocated past the capacity")
        except torch.OutOfMemoryError:
            print("refused")                          # ... but the device, counting the taken bytes, has not
        del r
        b = torch.empty(20 * MiB, dtype=torch.uint8, device="dipu")  # the taken memory went back
        torch.dipu.set_per_process_memory_fraction(0.6)  # 38.4 MiB: a take must fit it as well
        try:
            (r,) = torch._foreach_sqrt([a])
            print("taken past the cap", torch.dipu.memory_reserved() // MiB)
        except torch.OutOfMemoryError:
            print("refused")
    """
    out = python(code, env={"DIPU_SIM_MEMORY": "64M"}).stdout.split("\n")
    assert out[:2] == ["refused", "refused"], out


def test_placement_first_fit_for_large_requests_and_the_tail_kept_for_last(expandable):
    """Note [Placement in expandable segments]: a large request takes the lowest free block that fits, not the
    smallest; a small one takes the best fit other than the free block at the segment's end, which can grow."""
    with torch.dipu.stream(torch.dipu.Stream()):
        a, b, c, d = (torch.empty(n * MiB, dtype=torch.uint8, device="dipu") for n in (6, 2, 4, 2))
        base, third = a.data_ptr(), c.data_ptr()
        del a, c  # free: 6 MiB at the start, 4 MiB in the middle
        before = stats()["num_device_alloc"]
        x = torch.empty(3 * MiB + MiB // 2, dtype=torch.uint8, device="dipu")
        assert x.data_ptr() == base, "the best fit (the 4 MiB block) was taken instead of the lowest"
        y = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
        assert y.data_ptr() == third
        assert stats()["num_device_alloc"] == before
        del b, d, x, y
    with torch.dipu.stream(torch.dipu.Stream()):
        p = torch.empty(MiB, dtype=torch.uint8, device="dipu")
        q = torch.empty(MiB // 2, dtype=torch.uint8, device="dipu")  # the small segment: 2 MiB, 512 KiB free at its end
        start = p.data_ptr()
        assert segment_of(start)["total_size"] == 2 * MiB
        del p  # 1 MiB free at the start
        r = torch.empty(MiB // 4, dtype=torch.uint8, device="dipu")
        assert r.data_ptr() == start, "the segment's end (the best fit) was taken instead of the free block before it"
        del q, r


def test_a_borrowed_block_lies_at_the_top_of_its_free_block(expandable):
    """Note [Placement in expandable segments]: a small request in the large segment's free block (Note [Borrowing
    between pools]) takes that block's last bytes, so the rest stays one block next to its free neighbours."""
    with torch.dipu.stream(torch.dipu.Stream()):
        a, b = (torch.empty(2 * MiB, dtype=torch.uint8, device="dipu") for _ in range(2))
        start = a.data_ptr()
        del a  # 2 MiB free at the start of the large segment; the small pool has nothing
        before = stats()
        s = torch.empty(MiB // 2, dtype=torch.uint8, device="dipu")
        assert s.data_ptr() == start + 2 * MiB - MiB // 2
        assert stats()["num_device_alloc"] == before["num_device_alloc"]
        blocks = [(blk["size"], blk["state"]) for blk in segment_of(start)["blocks"]]
        assert blocks == [(3 * MiB // 2, "inactive"), (MiB // 2, "active_allocated"), (2 * MiB, "active_allocated")]
        del s
        assert [(blk["size"], blk["state"]) for blk in segment_of(start)["blocks"]][0] == (2 * MiB, "inactive")
        del b
