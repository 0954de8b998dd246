"""torch.accelerator's memory API on dipu: the allocator is a c10::DeviceAllocator.

Device-agnostic code (and libraries) call ``torch.accelerator.memory_*``; each must report what
``torch.dipu.memory_*`` reports, with torch.cuda's statistic names.
"""

import gc

import pytest
import torch

MiB = 1 << 20

pytestmark = pytest.mark.skipif(not hasattr(torch.accelerator, "memory_stats"),
                                reason="this torch has no torch.accelerator memory API")


def test_accelerator_is_dipu():
    assert torch.accelerator.current_accelerator() == torch.device("dipu")


def test_every_call_reports_what_torch_dipu_reports():
    gc.collect()
    tensors = [torch.empty(3 * MiB, dtype=torch.uint8, device="dipu:1"), torch.ones(1000, device="dipu:1")]
    assert torch.accelerator.memory_allocated(1) == torch.dipu.memory_allocated(1)
    assert torch.accelerator.max_memory_allocated(1) == torch.dipu.max_memory_allocated(1)
    assert torch.accelerator.memory_reserved(1) == torch.dipu.memory_reserved(1)
    assert torch.accelerator.max_memory_reserved(1) == torch.dipu.max_memory_reserved(1)
    assert torch.accelerator.memory_stats(1) == torch.dipu.memory_stats(1)
    assert torch.accelerator.memory_stats("dipu:1") == torch.dipu.memory_stats(1)
    assert torch.accelerator.get_memory_info(1) == torch.dipu.mem_get_info(1)
    del tensors


def test_allocated_bytes_follow_tensors():
    gc.collect()
    base = torch.accelerator.memory_allocated(0)
    x = torch.empty(1000, device="dipu")  # 4000 B, rounded to 4096
    assert torch.accelerator.memory_allocated(0) - base == 4096
    stats = torch.accelerator.memory_stats(0)
    assert stats["allocated_bytes.all.current"] - base == 4096
    assert stats["requested_bytes.all.current"] >= 4000
    del x
    gc.collect()
    assert torch.accelerator.memory_allocated(0) == base


def test_stats_have_torch_cuda_names_and_pools():
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="dipu")   # large pool (> 1 MiB)
    y = torch.empty(1000, dtype=torch.uint8, device="dipu")      # small pool
    stats = torch.accelerator.memory_stats(0)
    for name in ("allocation", "segment", "active", "allocated_bytes", "reserved_bytes", "active_bytes",
                 "requested_bytes", "inactive_split", "inactive_split_bytes"):
        for pool in ("all", "small_pool", "large_pool"):
            for field in ("current", "peak", "allocated", "freed"):
                assert f"{name}.{pool}.{field}" in stats
    for pool in ("all", "small_pool", "large_pool"):
        assert stats[f"allocated_bytes.{pool}.current"] >= 0
    assert stats["allocated_bytes.all.current"] == (stats["allocated_bytes.small_pool.current"]
                                                    + stats["allocated_bytes.large_pool.current"])
    assert stats["allocated_bytes.large_pool.current"] >= 3 * MiB  # x, a block above 1 MiB
    assert stats["num_device_alloc"] >= stats["num_device_free"]
    del x, y


def test_reset_peak_and_accumulated_and_empty_cache():
    x = torch.empty(6 * MiB, dtype=torch.uint8, device="dipu")
    del x
    assert torch.accelerator.max_memory_allocated(0) >= 6 * MiB
    torch.accelerator.reset_peak_memory_stats(0)
    assert torch.accelerator.max_memory_allocated(0) == torch.dipu.memory_allocated(0)
    torch.accelerator.reset_accumulated_memory_stats(0)
    stats = torch.dipu.memory_stats(0)
    assert stats["allocated_bytes.all.allocated"] == 0 and stats["num_device_alloc"] == 0
    torch.accelerator.empty_cache()
    assert torch.dipu.memory_reserved(0) == torch.dipu.memory_allocated(0)


def test_bad_device_index_is_a_clear_error():
    with pytest.raises(RuntimeError, match="dipu"):
        torch.accelerator.memory_allocated(7)
