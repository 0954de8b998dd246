"""The collectives of a C runtime plug-in: dicl on the ``xccl_*`` functions of its table.

Note [A plug-in's collectives]
A runtime plug-in (Note [C runtime plug-ins]) that fills the ``xccl_*`` group of
``C_DeviceInterface`` gets :class:`XcclCommunicator` as its communicator (Note [Collective
contract]), unless its runtime names another one or ``DIPU_XCCL=0``. What it needs: the unique
id pair, ``xccl_comm_init_rank``, ``xccl_destroy_comm`` and ``xccl_all_reduce``; rank 0 makes the
unique id and shares it through the group's c10d store, every rank then creates its communicator
(one per process group and device). The collectives run on the communicator's own stream, ordered
with the caller's stream by events (Note [Collectives on a plug-in's streams] in
dipu/csrc/xccl.cpp), on the dipu tensors' memory: no host copies.

What the ABI cannot express runs through gloo on host copies, as a vendor without collectives
does: the bitwise reduce ops (BAND, BOR, BXOR), reductions of a dtype with no ``C_DataType``
(and complex products, minima and maxima; a complex sum is a sum of its real parts), point-to-
point messages with a nonzero tag (the ABI has no tags), and every function the plug-in leaves
null. Each such call is counted in :data:`HOST_FALLBACKS` and the first of each kind warns,
naming it. AVG and PREMUL_SUM never reach the plug-in (Note [Reduce ops the core builds]);
``reduce``, ``gather`` and ``scatter`` are built by the process group from the primitives.

A plug-in's claim is checked, not trusted: PaddleCustomDevice's CustomCPU fills
``xccl_all_reduce`` with a function that only waits for the other ranks. So a new communicator
first all-reduces a few known values; if any rank sees a wrong sum, every rank warns and the
communicator runs everything through host copies.

Completion: on a vendor whose memory the host computes on (``native_device_type == "cpu"``, as
refc), ``wait()`` blocks the host until the collective is done, since those kernels are not
queued on streams; elsewhere it makes the current stream wait. Every wait on the host is bounded by
the group's ``timeout``: past it the communicator is destroyed (the plug-in should then abort
what is still running, as refc does) and the wait raises, naming the collective. Futures complete
on one watcher thread per communicator.
"""

from __future__ import annotations

import collections
import datetime
import os
import queue
import threading
import warnings

import torch
import torch.distributed as dist

from dipu.distributed import collectives
from dipu._core import vendor
from dipu.runtime import PluginRuntime

#: The functions dicl needs before it uses a plug-in's collectives at all.
REQUIRED = ("xccl_get_unique_id_size", "xccl_get_unique_id", "xccl_comm_init_rank", "xccl_destroy_comm",
            "xccl_all_reduce")

#: Calls that ran through gloo on host copies instead of the plug-in, by collective and reason.
HOST_FALLBACKS: collections.Counter = collections.Counter()
_warned: set = set()

# C_DataType of custom_runtime.h.
_C_TYPES = {torch.bool: 1, torch.uint8: 2, torch.uint16: 3, torch.uint32: 4, torch.uint64: 5, torch.int8: 6,
            torch.int16: 7, torch.int32: 8, torch.int64: 9, torch.float16: 10, torch.float32: 11,
            torch.float64: 12, torch.bfloat16: 13, torch.complex64: 14, torch.complex128: 15}
_UINT8 = 2
# C_CCLReduceOp of custom_runtime.h; AVG (1) is built by the process group.
_C_OPS = {"SUM": 0, "MAX": 2, "MIN": 3, "PRODUCT": 4}


def plugin_of(runtime):
    """The loaded plug-in (``dipu._C.RuntimePlugin``) of a C runtime; None for a Python one."""
    return runtime.plugin if isinstance(runtime, PluginRuntime) else None


def usable(runtime) -> bool:
    """Whether ``runtime`` is a plug-in whose collectives dicl uses (Note [A plug-in's collectives])."""
    plugin = plugin_of(runtime)
    if plugin is None or os.environ.get("DIPU_XCCL", "1") == "0":
        return False
    return set(REQUIRED) <= set(plugin.functions())


def _count_fallback(collective: str, reason: str) -> None:
    HOST_FALLBACKS[(collective, reason)] += 1
    if (collective, reason) not in _warned:
        _warned.add((collective, reason))
        warnings.warn(f"dicl: {collective} runs through gloo on host copies on vendor '{vendor().name}': "
                      f"{reason}", stacklevel=4)


class XcclWork(collectives._WorkBase):
    """One collective queued on a plug-in's stream (Note [A plug-in's collectives])."""

    def __init__(self, communicator: XcclCommunicator, name: str, event, tensors: list):
        super().__init__()
        self._communicator, self._name, self._event, self._tensors = communicator, name, event, tensors
        self._future: torch.futures.Future | None = None

    def _wait_host(self) -> None:
        timeout = self._communicator.timeout.total_seconds()
        try:
            finished = self._event.wait_host(timeout)
        except RuntimeError as error:
            raise RuntimeError(f"dicl {self._name} failed on {self._communicator.where()}: {error}") from None
        if not finished:
            self._communicator.abort()
            raise RuntimeError(
                f"dicl {self._name} timed out on {self._communicator.where()} after {timeout:g} s (the group's "
                "timeout): a rank died or called another collective; the communicator was aborted")
        self._tensors = []

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        if self._communicator.host_computes:
            self._wait_host()
        else:
            self._event.wait_stream()
        return True

    def is_completed(self) -> bool:
        return self._event.query()

    def get_future(self) -> torch.futures.Future:
        if self._future is None:
            self._future = torch.futures.Future()
            self._communicator.watch(self)
        return self._future

    def _settle(self) -> None:
        """On the watcher thread: wait on the host, then complete the future."""
        future = self._future
        assert future is not None, "get_future() makes the future before it asks the watcher to settle it"
        try:
            self._wait_host()
        except Exception as error:  # noqa: BLE001 -- handed to whoever waits on the future
            future.set_exception(error)
        else:
            future.set_result(None)


class XcclCommunicator(collectives.Communicator):
    """dicl's communicator on a plug-in's ``xccl_*`` functions (Note [A plug-in's collectives])."""

    def __init__(self, store, rank, world_size, device_index, timeout):
        super().__init__(store, rank, world_size, device_index, timeout)
        from dipu._core import _C

        self._store, self._plugin = store, plugin_of(vendor())
        self._functions = set(self._plugin.functions())
        self.host_computes = vendor().native_device_type == "cpu"
        self._host = None
        self._broken = None
        self._watcher = None
        if rank == 0:
            store.set("xccl_unique_id", _C.xccl_unique_id(self._plugin))
        unique_id = store.get("xccl_unique_id")  # waits for rank 0, up to the store's timeout
        # Every rank arrives before any creates its communicator, so a rank that never comes
        # fails here after the group's timeout rather than inside the plug-in.
        store.set(f"xccl_joined_{rank}", "1")
        store.wait([f"xccl_joined_{r}" for r in range(world_size)], timeout)
        self.comm = _C.XcclComm(self._plugin, device_index, world_size, rank, unique_id)
        self._self_test()

    def where(self) -> str:
        return f"dipu:{self.device_index} (rank {self.rank} of {self.world_size})"

    def _self_test(self) -> None:
        device = torch.device("dipu", self.device_index)
        values = torch.tensor([self.rank + 1, 1, -(self.rank + 1)], dtype=torch.int32, device=device)
        n = self.world_size
        expected = [n * (n + 1) // 2, n, -(n * (n + 1) // 2)]
        try:
            self.all_reduce(values, dist.ReduceOp.SUM).wait()
            got: list[int] | str = values.cpu().tolist()
        except RuntimeError as error:
            got = f"an error ({error})"
        self._store.set(f"xccl_self_test_{self.rank}", "ok" if got == expected else "wrong")
        verdicts = [self._store.get(f"xccl_self_test_{r}").decode() for r in range(self.world_size)]
        if all(v == "ok" for v in verdicts):
            return
        self._broken = (f"its xccl_all_reduce failed dipu's self-test (the sum of {expected[0]} over "
                        f"{n} ranks gave {got} on rank {self.rank})")
        warnings.warn(f"dicl: vendor '{vendor().name}' claims collectives, but {self._broken}; every "
                      "collective runs through gloo on host copies (DIPU_XCCL=0 says so without the test)",
                      stacklevel=2)

    # ---- the host path -----------------------------------------------------------------------

    def _host_path(self, collective: str, reason: str | None = None) -> collectives.Communicator:
        _count_fallback(collective, reason or self._broken)
        if self._host is None:  # every rank gets here at the same call: the decision depends on
            # the call's arguments and the table, which all ranks share
            self._host = collectives.HostCopyCommunicator(dist.PrefixStore("host", self._store), self.rank,
                                                          self.world_size, self.device_index, self.timeout)
        return self._host

    def _missing(self, function: str) -> str | None:
        if self._broken:
            return self._broken
        if function not in self._functions:
            return f"the plug-in leaves {function} null"
        return None

    @staticmethod
    def _reduction(tensor: torch.Tensor, op) -> tuple[torch.Tensor, int, int] | str:
        """(the tensor as the plug-in reduces it, its C_DataType, its C_CCLReduceOp), or why not."""
        name = op.name
        if name not in _C_OPS:
            return f"the ABI has no reduce op {name}"
        if tensor.is_complex():
            if name != "SUM":
                return f"{name} of complex numbers"
            tensor = torch.view_as_real(tensor)
        if tensor.dtype not in _C_TYPES:
            return f"the ABI has no data type for {tensor.dtype}"
        return tensor, _C_TYPES[tensor.dtype], _C_OPS[name]

    @staticmethod
    def _movable(tensor: torch.Tensor) -> tuple[torch.Tensor, int]:
        """The tensor as moved bytes-for-bytes, with its C_DataType (bytes where it has none)."""
        if tensor.dtype in _C_TYPES:
            return tensor, _C_TYPES[tensor.dtype]
        return tensor.view(-1).view(torch.uint8), _UINT8

    def _work(self, name: str, event, tensors: list) -> XcclWork:
        return XcclWork(self, name, event, tensors)

    # ---- the primitives --------------------------------------------------------------------------

    def all_reduce(self, tensor, op):
        why = self._missing("xccl_all_reduce")
        reduction = self._reduction(tensor, op)
        if why or isinstance(reduction, str):
            return self._host_path("all_reduce", why or reduction).all_reduce(tensor, op)
        flat, ctype, cop = reduction
        return self._work("all_reduce", self.comm.all_reduce(flat, flat, flat.numel(), ctype, cop), [tensor])

    def broadcast(self, tensor, root):
        if why := self._missing("xccl_broadcast"):
            return self._host_path("broadcast", why).broadcast(tensor, root)
        flat, ctype = self._movable(tensor)
        return self._work("broadcast", self.comm.broadcast(flat, flat.numel(), ctype, root), [tensor])

    def all_gather(self, output, input):
        if why := self._missing("xccl_all_gather"):
            return self._host_path("all_gather", why).all_gather(output, input)
        flat_in, ctype = self._movable(input)
        flat_out, _ = self._movable(output)
        return self._work("all_gather", self.comm.all_gather(flat_in, flat_out, flat_in.numel(), ctype),
                          [output, input])

    def reduce_scatter(self, output, input, op):
        why = self._missing("xccl_reduce_scatter")
        reduction = self._reduction(input, op)
        if why or isinstance(reduction, str):
            return self._host_path("reduce_scatter", why or reduction).reduce_scatter(output, input, op)
        flat_in, ctype, cop = reduction
        flat_out = torch.view_as_real(output) if output.is_complex() else output
        event = self.comm.reduce_scatter(flat_in, flat_out, flat_out.numel(), ctype, cop)
        return self._work("reduce_scatter", event, [output, input])

    def all_to_all(self, output, input, output_split_sizes, input_split_sizes):
        if why := self._missing("xccl_all_to_all"):
            return self._host_path("all_to_all", why).all_to_all(output, input, output_split_sizes,
                                                                 input_split_sizes)
        flat_in, ctype = self._movable(input)
        flat_out, _ = self._movable(output)

        def layout(tensor, flat, splits):
            rows = tensor.shape[0] if tensor.dim() else 1
            per_row = flat.numel() // rows if rows else 0
            counts = [s * per_row for s in splits]
            offsets = [sum(counts[:j]) for j in range(len(counts))]
            return offsets, counts

        in_offsets, in_counts = layout(input, flat_in, input_split_sizes)
        out_offsets, out_counts = layout(output, flat_out, output_split_sizes)
        event = self.comm.all_to_all(flat_in, in_offsets, in_counts, flat_out, out_offsets, out_counts, ctype,
                                     self.rank)
        return self._work("all_to_all", event, [output, input])

    def send(self, tensor, peer, tag):
        why = self._missing("xccl_send") or (f"the ABI has no message tags (tag {tag})" if tag else None)
        if why:
            return self._host_path("send", why).send(tensor, peer, tag)
        flat, ctype = self._movable(tensor)
        return self._work("send", self.comm.send(flat, flat.numel(), ctype, peer), [tensor])

    def recv(self, tensor, peer, tag):
        why = self._missing("xccl_recv") or (f"the ABI has no message tags (tag {tag})" if tag else None)
        if why:
            return self._host_path("recv", why).recv(tensor, peer, tag)
        flat, ctype = self._movable(tensor)
        return self._work("recv", self.comm.recv(flat, flat.numel(), ctype, peer), [tensor])

    def barrier(self):
        if self._broken:
            return self._host_path("barrier").barrier()
        return self.all_reduce(torch.zeros(1, device=torch.device("dipu", self.device_index)),
                               dist.ReduceOp.SUM)

    # ---- completion and shutdown -----------------------------------------------------------------

    def watch(self, work: XcclWork) -> None:
        """Completes ``work``'s future once it is done, on this communicator's watcher thread."""
        if self._watcher is None:
            self._watcher = queue.SimpleQueue()
            threading.Thread(target=self._watch, args=(self._watcher,), daemon=True,
                             name=f"dicl xccl watcher {self.where()}").start()
        self._watcher.put(work)

    @staticmethod
    def _watch(works: queue.SimpleQueue) -> None:
        while (work := works.get()) is not None:
            work._settle()

    def abort(self) -> None:
        """Destroys the plug-in's communicator while a collective may still run (a timeout)."""
        self.comm.destroy()

    def shutdown(self) -> None:
        if self._watcher is not None:
            self._watcher.put(None)
        self.comm.destroy()
        if self._host is not None:
            self._host.shutdown()
