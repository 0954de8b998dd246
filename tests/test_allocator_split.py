"""The caching allocator splits and merges blocks (Note [Splitting blocks] in dipu/csrc/allocator.cpp), takes
PYTORCH_ALLOC_CONF's keys (Note [Allocator settings] in dipu/_alloc_conf.py), and says what it holds when it
runs out of memory. Each test allocates on a stream of its own, whose pool starts empty."""

import gc

import pytest
import torch
import torch.cuda._memory_viz as memory_viz

import dipu
from dipu import _alloc_conf

MiB = 1 << 20


@pytest.fixture(autouse=True)
def empty_pools():
    """Stream ids come from a pool (Note [Stream ids]): a new Stream may be one an earlier test cached blocks on."""
    gc.collect()
    torch.dipu.empty_cache()


def stats(device=0):
    return torch.dipu.memory_stats(device)


def blocks_of_segment(ptr):
    """The (address, size, state) of each block of the segment holding ``ptr``, and the segment."""
    for seg in torch.dipu.memory_snapshot():
        if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
            return [(b["address"], b["size"], b["state"]) for b in seg["blocks"]], seg
    return [], None


def test_a_block_is_split_and_the_rest_serves_the_next_request_without_a_device_malloc():
    with torch.dipu.stream(torch.dipu.Stream()):
        before = stats()["num_device_alloc"]
        x = torch.empty(5 * MiB, dtype=torch.uint8, device="dipu")
        assert stats()["num_device_alloc"] == before + 1
        y = torch.empty(3 * MiB + 100, dtype=torch.uint8, device="dipu")
        z = torch.empty(6 * MiB, dtype=torch.uint8, device="dipu")
        assert stats()["num_device_alloc"] == before + 1, "the segment's remainder was not used"
        assert y.data_ptr() == x.data_ptr() + 5 * MiB
        assert z.data_ptr() == y.data_ptr() + 3 * MiB + 512
        blocks, seg = blocks_of_segment(x.data_ptr())
        assert seg["total_size"] == 20 * MiB and seg["segment_type"] == "large"
        assert [(size, state) for _, size, state in blocks] == [
            (5 * MiB, "active_allocated"), (3 * MiB + 512, "active_allocated"), (6 * MiB, "active_allocated"),
            (6 * MiB - 512, "inactive")]
        assert stats()["inactive_split_bytes.large_pool.current"] >= 6 * MiB - 512


def test_freed_neighbours_merge_and_a_wholly_free_segment_is_released():
    with torch.dipu.stream(torch.dipu.Stream()):
        x = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
        y = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
        z = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
        start = x.data_ptr()
        del y
        blocks, _ = blocks_of_segment(start)
        assert [state for _, _, state in blocks] == ["active_allocated", "inactive", "active_allocated", "inactive"]
        del x  # merges with the freed y
        blocks, _ = blocks_of_segment(start)
        assert [(size, state) for _, size, state in blocks] == [
            (8 * MiB, "inactive"), (4 * MiB, "active_allocated"), (8 * MiB, "inactive")]
        reserved = torch.dipu.memory_reserved()
        torch.dipu.empty_cache()  # the segment is not released while z lives in it
        assert blocks_of_segment(start)[1] is not None
        del z
        blocks, seg = blocks_of_segment(start)
        assert blocks == [(start, 20 * MiB, "inactive")], "the free blocks of the segment did not merge"
        torch.dipu.empty_cache()
        assert blocks_of_segment(start)[1] is None
        assert torch.dipu.memory_reserved() <= reserved - 20 * MiB


def test_a_cached_block_serves_requests_of_other_sizes():
    """Before splitting, a block served only requests up to 25% smaller than itself: each new size was a malloc."""
    with torch.dipu.stream(torch.dipu.Stream()):
        big = torch.empty(16 * MiB, dtype=torch.uint8, device="dipu")
        small = torch.empty(100, device="dipu")
        del big, small
        before = stats()["num_device_alloc"]
        for _ in range(3):
            parts = [torch.empty(n * MiB // 2, dtype=torch.uint8, device="dipu") for n in (11, 7, 5, 3, 2, 3)]
            del parts
            smalls = [torch.empty(n * 1000, dtype=torch.uint8, device="dipu") for n in range(1, 100, 7)]
            del smalls
        assert stats()["num_device_alloc"] == before


def test_a_small_request_takes_free_space_of_a_large_segment_before_a_new_small_segment(python):
    """Note [Borrowing between pools]: with no free block in the small pool, a small request takes the best fit
    among the large segments' free blocks of its stream, without a device malloc; the block counts in the large
    pool. A free small block is still taken first, and a large segment's free block on another stream is not."""
    code = """
        import torch, dipu
        MiB = 1 << 20
        stats = torch.dipu.memory_stats

        def segment_of(ptr):
            for seg in torch.dipu.memory_snapshot():
                if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
                    return seg

        big = torch.empty(6 * MiB, dtype=torch.uint8, device="dipu")  # a 20 MiB large segment, 14 MiB free
        before = stats()
        a = torch.empty(MiB // 2, dtype=torch.uint8, device="dipu")
        assert a.data_ptr() == big.data_ptr() + 6 * MiB
        assert stats()["num_device_alloc"] == before["num_device_alloc"]
        assert stats()["segment.small_pool.current"] == before["segment.small_pool.current"] == 0
        assert stats()["allocated_bytes.large_pool.current"] - before["allocated_bytes.large_pool.current"] == MiB // 2
        other = torch.dipu.Stream()
        with torch.dipu.stream(other):
            b = torch.empty(MiB // 2, dtype=torch.uint8, device="dipu")  # the free space is the other stream's
            seg = segment_of(b.data_ptr())
            assert seg["segment_type"] == "small" and seg["stream"] == other.stream_id, seg
            c = torch.empty(MiB // 4, dtype=torch.uint8, device="dipu")  # the small segment's rest comes first
            assert c.data_ptr() == b.data_ptr() + MiB // 2
            del b, c
        del a, big
        torch.dipu.empty_cache()  # the large segment is whole again and goes back
        assert stats()["reserved_bytes.all.current"] == 0, stats()["reserved_bytes.all.current"]
        print("ok")
    """
    assert python(code).stdout.strip() == "ok"


def test_record_stream_on_a_split_block_holds_it_and_keeps_neighbours_from_merging(python):
    code = """
        import torch, dipu
        MiB = 1 << 20

        def states(ptr):
            for seg in torch.dipu.memory_snapshot():
                if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
                    return [(b["size"] // MiB, b["state"]) for b in seg["blocks"]]

        side = torch.dipu.Stream(device=1)
        side_handle = dipu._C.stream_handle(side.stream_id, 1)
        x = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
        y = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
        ptr = y.data_ptr()
        y.record_stream(side)
        del y
        del x  # its neighbour y waits for the side stream: no merge with it
        assert states(ptr) == [(4, "inactive"), (4, "active_pending_free"), (12, "inactive")], states(ptr)
        w = torch.empty(4 * MiB, dtype=torch.uint8, device="dipu")
        assert w.data_ptr() != ptr
        del w
        assert dipu.vendor().advance(1, side_handle)
        w = torch.empty(20 * MiB - 512, dtype=torch.uint8, device="dipu")  # the whole segment, merged again
        assert w.data_ptr() == ptr - 4 * MiB, states(ptr)
        print("ok")
    """
    assert python(code, env={"DIPU_SIM_EVENTS": "manual"}).stdout.strip() == "ok"


def test_memory_fraction_caps_segments_not_just_blocks(python):
    code = """
        import torch
        MiB = 1 << 20
        torch.dipu.set_per_process_memory_fraction(0.05, 1)  # 51.2 MiB of 1 GiB
        with torch.dipu.device(1):
            a = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")   # a 20 MiB segment
            b = torch.empty(15 * MiB, dtype=torch.uint8, device="dipu")  # its remainder
            c = torch.empty(16 * MiB, dtype=torch.uint8, device="dipu")  # a second segment, of its size
            assert torch.dipu.memory_reserved() == 36 * MiB, torch.dipu.memory_reserved()
            try:
                torch.empty(16 * MiB, dtype=torch.uint8, device="dipu")  # 52 MiB would pass the cap
            except torch.OutOfMemoryError as e:
                print(e)
    """
    out = python(code, env={"DIPU_SIM_MEMORY": "1G"}).stdout
    assert "tried to allocate 16.00 MiB" in out
    assert "this process may reserve at most 51.20 MiB of it (torch.dipu.set_per_process_memory_fraction)" in out


def test_pytorch_alloc_conf_keys(python):
    code = """
        import torch, dipu
        MiB = 1 << 20
        s = torch.dipu.memory_stats()
        print("max_split", s["max_split_size"] // MiB)
        settings = torch.dipu.memory._snapshot()["allocator_settings"]
        print("gc", settings["garbage_collection_threshold"], "div", settings["roundup_power2_divisions"][2])
        base = torch.dipu.memory_allocated()
        x = torch.empty(MiB + MiB // 4 + 1, dtype=torch.uint8, device="dipu")  # [1, 2) MiB in 2 steps of 512 KiB
        print("rounded", (torch.dipu.memory_allocated() - base) / MiB)
        big = torch.empty(80 * MiB, dtype=torch.uint8, device="dipu")
        s = torch.dipu.memory_stats()
        print("oversize", s["oversize_allocations.current"], s["oversize_segments.current"])
        ptr = big.data_ptr()
        del big
        mid = torch.empty(30 * MiB, dtype=torch.uint8, device="dipu")  # below max_split: not from the 80 MiB block
        print("mid from oversize", mid.data_ptr() == ptr)
        again = torch.empty(70 * MiB, dtype=torch.uint8, device="dipu")  # oversize, < 20 MiB smaller: reused whole
        print("reused", again.data_ptr() == ptr, (torch.dipu.memory_allocated() - base) // MiB)
        print("backend", torch.dipu.memory.get_allocator_backend())
    """
    env = {"PYTORCH_ALLOC_CONF": "max_split_size_mb:40,garbage_collection_threshold:0.5,expandable_segments:False,"
                                 "roundup_power2_divisions:[1:2,2:4,>:8]",
           "PYTORCH_DIPU_ALLOC_CONF": "max_split_size_mb:64,backend:caching"}
    out = python(code, env=env).stdout.splitlines()
    assert out == ["max_split 64", "gc 0.5 div 4", "rounded 1.5", "oversize 1 1", "mid from oversize False",
                   "reused True 111", "backend caching"]


def test_raw_backend_from_the_dipu_variable(python):
    code = """
        import torch
        for _ in range(3):
            x = torch.empty(1000, device="dipu")
            del x
        s = torch.dipu.memory_stats()
        print(torch.dipu.memory.get_allocator_backend(), s["num_device_alloc"], s["num_device_free"])
    """
    out = python(code, env={"PYTORCH_DIPU_ALLOC_CONF": "backend:raw"}).stdout.split()
    assert out[0] == "raw" and int(out[1]) >= 3 and int(out[1]) - int(out[2]) <= 1


def test_garbage_collection_threshold_returns_old_free_segments(python):
    code = """
        import torch
        MiB = 1 << 20
        torch.dipu.set_per_process_memory_fraction(0.5)  # 512 MiB of 1 GiB; the threshold: 256 MiB
        a = torch.empty(100 * MiB, dtype=torch.uint8, device="dipu")
        b = torch.empty(100 * MiB, dtype=torch.uint8, device="dipu")
        del a, b
        c = torch.empty(150 * MiB, dtype=torch.uint8, device="dipu")
        s = torch.dipu.memory_stats()
        print(s["num_device_free"], torch.dipu.memory_reserved() // MiB)
    """
    env = {"DIPU_SIM_MEMORY": "1G"}
    assert python(code, env={**env, "PYTORCH_ALLOC_CONF": "garbage_collection_threshold:0.5"}).stdout.split() == \
        ["1", "250"]
    assert python(code, env=env).stdout.split() == ["0", "350"]


@pytest.mark.parametrize("text, message", [
    ("foo:1", "PYTORCH_ALLOC_CONF: unknown key 'foo'; dipu's allocator takes backend, expandable_segments, "
              "garbage_collection_threshold, max_split_size_mb, roundup_power2_divisions"),
    ("max_split_size_mb:10", "PYTORCH_ALLOC_CONF: max_split_size_mb: 10 is too small; it must be more than 20"),
    ("max_split_size_mb:lots", "PYTORCH_ALLOC_CONF: max_split_size_mb: 'lots' is not an integer"),
    ("garbage_collection_threshold:1.5", "PYTORCH_ALLOC_CONF: garbage_collection_threshold: 1.5 is not between"),
    ("roundup_power2_divisions:3", "PYTORCH_ALLOC_CONF: roundup_power2_divisions: 3 divisions: the number of "
                                   "divisions must be a power of two"),
    ("roundup_power2_divisions:[256:2,64:4]", "roundup_power2_divisions: sizes must increase"),
    ("expandable_segments:maybe", "PYTORCH_ALLOC_CONF: expandable_segments: 'maybe' is not True or False"),
    ("backend:cudaMallocAsync", "PYTORCH_ALLOC_CONF: backend: 'cudaMallocAsync' is not one of caching, raw"),
    ("max_split_size_mb", "PYTORCH_ALLOC_CONF: key 'max_split_size_mb' has no value"),
])
def test_a_bad_setting_names_its_key(text, message):
    with pytest.raises(ValueError) as info:
        _alloc_conf.parse(text, "PYTORCH_ALLOC_CONF")
    assert message in str(info.value)


def test_a_bad_environment_fails_the_import_naming_the_variable(python):
    proc = python("import torch, dipu", env={"PYTORCH_DIPU_ALLOC_CONF": "max_split_size:100"}, check=False)
    assert proc.returncode != 0
    assert "PYTORCH_DIPU_ALLOC_CONF: unknown key 'max_split_size'" in proc.stderr


def test_set_allocator_settings_at_run_time():
    saved = _alloc_conf.current
    try:
        torch.dipu.memory._set_allocator_settings("max_split_size_mb:128, roundup_power2_divisions:4")
        assert stats()["max_split_size"] == 128 * MiB
        torch.dipu.memory._set_allocator_settings("garbage_collection_threshold:0.9")
        assert stats()["max_split_size"] == 128 * MiB  # keys not named keep their value
        assert torch.dipu.memory._snapshot()["allocator_settings"]["garbage_collection_threshold"] == 0.9
        with pytest.raises(ValueError, match="_set_allocator_settings: unknown key 'bogus'"):
            torch.dipu.memory._set_allocator_settings("bogus:1")
        with pytest.raises(ValueError, match="backend: the allocator backend is chosen at start-up"):
            torch.dipu.memory._set_allocator_settings("backend:raw")
    finally:
        _alloc_conf.apply(dipu._C, saved)
    assert stats()["max_split_size"] == -1


def test_set_allocator_settings_with_the_cuda_spelling_under_mock_cuda(python):
    code = """
        import torch, dipu
        torch.cuda.memory._set_allocator_settings("max_split_size_mb:32")
        print(torch.cuda.memory_stats()["max_split_size"] >> 20)
    """
    assert python(code, env={"DIPU_MOCK_CUDA": "1"}).stdout.strip() == "32"


def test_out_of_memory_names_fragmentation(python):
    code = """
        import torch
        MiB = 1 << 20
        blocks = []
        try:
            while True:
                blocks.append(torch.empty(5 * MiB, dtype=torch.uint8, device="dipu"))
        except torch.OutOfMemoryError:
            pass
        del blocks[::2]  # 5 MiB holes: half the memory is free, but in pieces
        try:
            torch.empty(18 * MiB, dtype=torch.uint8, device="dipu")  # more than the device has left
        except torch.OutOfMemoryError as e:
            print(e)
    """
    out = python(code, env={"DIPU_SIM_MEMORY": "256M"}).stdout
    assert "dipu out of memory on sim device dipu:0: tried to allocate 18.00 MiB. The device has a total capacity " \
           "of 256.00 MiB of which" in out
    assert " is reserved but unallocated. Reserved but unallocated memory is large: the cache is fragmented; " \
           "setting PYTORCH_ALLOC_CONF=expandable_segments:True" in out  # Note [Expandable segments]


def test_snapshot_segments_show_their_blocks_and_memory_viz_reads_them(tmp_path):
    gc.collect()
    with torch.dipu.stream(torch.dipu.Stream()):
        x = torch.empty(2 * MiB, dtype=torch.uint8, device="dipu")
        y = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")
        snapshot = torch.dipu.memory._snapshot()
    seg = next(s for s in snapshot["segments"] if s["address"] == x.data_ptr())
    assert seg["is_expandable"] is False
    assert seg["total_size"] == sum(b["size"] for b in seg["blocks"]) == 20 * MiB
    assert seg["allocated_size"] == 5 * MiB and seg["active_size"] == 5 * MiB
    assert [b["address"] for b in seg["blocks"]][:2] == [x.data_ptr(), y.data_ptr()]
    assert memory_viz.calc_active(seg) == 5 * MiB
    assert f"seg_{seg['address']}" in memory_viz.segments(snapshot, format_flamegraph=lambda text: text)
    assert "segments: " in memory_viz.segsum(snapshot)
    assert "<html" in memory_viz.segment_plot(snapshot).lower()
    del x, y
