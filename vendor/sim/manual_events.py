"""The sim vendor's test mode ``DIPU_SIM_EVENTS=manual``: streams whose work completes when a test says so.

Note [Manual events]
The sim device computes synchronously, so under the contract's default stream and event methods
every event has completed by the time anyone asks, and no test could tell a core that waits for
its streams from one that does not (the allocator's record_stream deferral, Stream.wait_stream).
In this mode the sim vendor implements every stream and event method itself, as an asynchronous
device would: each stream is a queue of recorded events and waits, and nothing on it completes
until the test runs the queue (``vendor().advance(index, stream)``, ``vendor().complete_all()``)
or a synchronize call waits for it. Data is still computed at once; what the test observes is
when the core believes work is done. A wait for an event of another stream holds the waiting
stream's later events back until that event completes: ``advance`` stops there, a synchronize
runs the other stream first (a device would).
"""

from __future__ import annotations

import threading
import time


class ManualEvent:
    """A vendor event: pending from its record until the recording stream's queue reaches it."""

    __slots__ = ("device", "timing", "generation", "pending", "timestamp")

    def __init__(self, device: int, timing: bool):
        self.device, self.timing = device, timing
        self.generation = 0  # numbers the records; the event's state is its latest record's
        self.pending: dict[int, ManualStream] = {}  # generation -> the stream whose queue holds it
        self.timestamp: float | None = None

    @property
    def completed(self) -> bool:
        """Whether the latest record has run (an event never recorded counts as completed, as CUDA's)."""
        return self.generation not in self.pending


class ManualStream:
    """A vendor stream: the recorded events and waits its queue has not yet run past."""

    __slots__ = ("device", "priority", "queue")

    def __init__(self, device: int, priority: int = 0):
        self.device, self.priority = device, priority
        self.queue: list[tuple[str, ManualEvent, int]] = []  # ("record" | "wait", event, generation)


class ManualEvents:
    """Queued streams and events that complete on the test's word (Note [Manual events]): mixed
    into the sim vendor (vendor/sim/__init__.py), whose ``count`` of devices it reads."""

    count: int

    def __init__(self):
        super().__init__()
        self._queue_lock = threading.RLock()
        self._default_streams = [ManualStream(i) for i in range(self.count)]
        self._streams: list[ManualStream] = list(self._default_streams)

    # ---- for tests: letting the device run ------------------------------------------------
    def advance(self, index: int, stream: object) -> bool:
        """Run ``stream``'s queue (None: the default stream of device ``index``) up to its first
        wait for an event not yet completed; True when the queue is empty."""
        with self._queue_lock:
            return self._run(self._stream(index, stream), until=None, blocking=False)

    def complete_all(self) -> None:
        """Run every stream of every device to its end."""
        with self._queue_lock:
            for stream in self._streams:
                self._run(stream, until=None, blocking=True)

    def pending_events(self) -> int:
        """How many recorded events have not completed."""
        with self._queue_lock:
            return sum(kind == "record" for s in self._streams for kind, _, _ in s.queue)

    # ---- the contract's stream and event methods ----------------------------------------------
    def create_stream(self, index: int, priority: int = 0) -> object:
        stream = ManualStream(index, priority)
        with self._queue_lock:
            self._streams.append(stream)
        return stream

    def destroy_stream(self, index: int, stream: object) -> None:
        with self._queue_lock:
            self._run(stream, until=None, blocking=True)
            self._streams.remove(stream)

    def synchronize_device(self, index: int) -> None:
        with self._queue_lock:
            for stream in self._streams:
                if stream.device == index:
                    self._run(stream, until=None, blocking=True)

    def synchronize_stream(self, index: int, stream: object) -> None:
        with self._queue_lock:
            self._run(self._stream(index, stream), until=None, blocking=True)

    def query_stream(self, index: int, stream: object) -> bool:
        with self._queue_lock:
            return not self._stream(index, stream).queue

    def stream_wait_event(self, index: int, stream: object, event: object) -> None:
        with self._queue_lock:
            if not event.completed:
                self._stream(index, stream).queue.append(("wait", event, event.generation))

    def create_event(self, index: int, enable_timing: bool) -> object:
        return ManualEvent(index, enable_timing)

    def destroy_event(self, index: int, event: object) -> None:
        pass

    def record_event(self, index: int, event: object, stream: object) -> None:
        with self._queue_lock:
            target = self._stream(index, stream)
            event.generation += 1
            event.pending[event.generation] = target
            event.timestamp = time.perf_counter()
            target.queue.append(("record", event, event.generation))

    def synchronize_event(self, index: int, event: object) -> None:
        with self._queue_lock:
            if not event.completed:
                self._run(event.pending[event.generation], until=(event, event.generation), blocking=True)

    def query_event(self, index: int, event: object) -> bool:
        with self._queue_lock:
            return event.completed

    def event_elapsed_time(self, index: int, start: object, end: object) -> float:
        if start.timestamp is None or end.timestamp is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end.timestamp - start.timestamp) * 1000.0

    # ---- the queues ---------------------------------------------------------------------------
    def _stream(self, index: int, stream: object) -> ManualStream:
        return self._default_streams[index] if stream is None else stream

    def _run(self, stream: ManualStream, until, blocking: bool) -> bool:
        """Run ``stream``'s queue in order until it is empty or ``until`` (event, generation) has
        completed. A wait for a pending event stops the run unless ``blocking``, where the awaited
        event's stream runs first. Returns whether the queue is empty."""
        while stream.queue:
            kind, event, generation = stream.queue[0]
            if kind == "wait" and generation in event.pending:
                if not blocking:
                    return False
                self._run(event.pending[generation], until=(event, generation), blocking=True)
            stream.queue.pop(0)
            if kind == "record":
                event.pending.pop(generation, None)
            if until is not None and until[1] not in until[0].pending:
                break
        return not stream.queue
