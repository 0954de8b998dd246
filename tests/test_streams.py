"""Streams and events backed by the vendor runtime."""

import pytest
import torch


def test_current_default_and_new_streams():
    default = torch.dipu.default_stream()
    assert default.stream_id == 0 and default.device == torch.device("dipu:0")
    assert torch.dipu.current_stream() == default
    s = torch.dipu.Stream()
    assert isinstance(s, torch.dipu.Stream) and s.stream_id != 0
    with torch.dipu.stream(s):
        assert torch.dipu.current_stream() == s
    assert torch.dipu.current_stream() == default


def test_stream_on_second_device_switches_device():
    with torch.dipu.device(1):
        s = torch.dipu.Stream()
    assert s.device == torch.device("dipu:1")
    with torch.dipu.stream(s):
        assert torch.dipu.current_device() == 1
        assert torch.dipu.current_stream() == s
    assert torch.dipu.current_device() == 0
    assert torch.dipu.current_stream(1).stream_id == 0


def test_set_stream():
    s = torch.dipu.Stream()
    torch.dipu.set_stream(s)
    try:
        assert torch.dipu.current_stream() == s
    finally:
        torch.dipu.set_stream(torch.dipu.default_stream())


def test_stream_pool_is_bounded():
    ids = {torch.dipu.Stream().stream_id for _ in range(100)}
    assert len(ids) == 32


def test_events_synchronize_query_and_time():
    start = torch.dipu.Event(enable_timing=True)
    end = torch.dipu.Event(enable_timing=True)
    x = torch.randn(64, 64, device="dipu")
    start.record()
    for _ in range(3):
        x = x + 1
    end.record()
    end.synchronize()
    assert end.query() and start.query()
    elapsed = start.elapsed_time(end)
    assert elapsed > 0


def test_event_without_timing_refuses_elapsed_time():
    a, b = torch.dipu.Event(), torch.dipu.Event()
    a.record()
    b.record()
    with pytest.raises(ValueError, match="enable_timing"):
        a.elapsed_time(b)


def test_stream_event_waits_and_sync():
    s = torch.dipu.Stream()
    event = s.record_event()
    torch.dipu.current_stream().wait_event(event)
    s.wait_stream(torch.dipu.current_stream())
    s.synchronize()
    assert s.query()
    torch.dipu.synchronize()
    torch.dipu.synchronize(1)


def test_generic_torch_stream_and_event_apis():
    s = torch.Stream(device="dipu:1")
    assert s.device_type == torch.Stream(device="dipu").device_type
    e = torch.Event(device="dipu:1", enable_timing=True)
    e.record(s)
    e.synchronize()
    assert e.query()


def test_stream_priorities_as_torch_cuda_reports_them():
    """dipu supports priority 0 only (Note [Stream priorities]); others map to it, as torch.cuda maps
    a priority outside its range to the nearest one (FSDP2 asks for -1)."""
    assert torch.dipu.Stream.priority_range() == (0, 0)
    least, greatest = torch.dipu.Stream.priority_range()
    for priority in range(greatest, least + 1):
        assert torch.dipu.Stream(priority=priority).priority == priority
    assert torch.dipu.current_stream().priority == 0 and torch.dipu.default_stream().priority == 0
    for priority in (greatest - 1, least + 1):
        assert torch.dipu.Stream(priority=priority).priority == 0
    with pytest.raises(TypeError, match="priority must be an int"):
        torch.dipu.Stream(priority="high")


def test_stream_order_and_event_completion_under_manual_events(python):
    """Under events that complete only when the test runs a stream (Note [Manual events]), what
    dipu tells the vendor is visible: a wait_stream that never reached the vendor would let s2's
    later work complete before s1's."""
    code = """
        import torch, dipu
        vendor = dipu.vendor()

        def handle(stream):
            return dipu._C.stream_handle(stream.stream_id, stream.device_index)

        s1, s2 = torch.dipu.Stream(), torch.dipu.Stream()
        before = s1.record_event()
        assert not before.query() and not s1.query(), "an event completed before its stream ran"
        s2.wait_stream(s1)
        after = s2.record_event()
        assert not vendor.advance(0, handle(s2)), "s2 ran past its wait for s1"
        assert not after.query()
        assert vendor.advance(0, handle(s1)) and before.query() and s1.query()
        assert not after.query()  # s2 has not run yet...
        assert vendor.advance(0, handle(s2)) and after.query()  # ...and now may

        # Event.wait: the same through a recorded event, across devices.
        other = torch.dipu.Stream(device=1)
        with torch.dipu.device(1):
            e = torch.dipu.Event()
            e.record(other)
        e.wait(s1)
        f = s1.record_event()
        assert not vendor.advance(0, handle(s1)) and not f.query()
        f.synchronize()  # waiting on f runs what f waits for
        assert e.query() and f.query()

        # synchronize() on the current stream and on a device completes what was recorded there.
        g = torch.dipu.Event()
        g.record()
        assert not g.query() and not torch.dipu.current_stream().query()
        torch.dipu.current_stream().synchronize()
        assert g.query()
        h = s2.record_event()
        torch.dipu.synchronize()
        assert h.query() and vendor.pending_events() == 0
        print("ok")
    """
    assert python(code, env={"DIPU_SIM_EVENTS": "manual"}).stdout.strip() == "ok"
