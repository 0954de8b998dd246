"""The vendor collective contract: what a vendor's communication library provides.

A vendor that has one (NCCL, HCCL, a DICL library: DIPU's ``diclapis.h``)
subclasses :class:`Communicator` and names the class in its runtime's
``collectives`` attribute (see :class:`dipu.runtime.DeviceRuntime`); a C runtime
plug-in that fills the ``xccl_*`` group of its table gets
:class:`dipu.distributed.xccl.XcclCommunicator` without writing any (Note [A plug-in's collectives]).
The ``dicl`` process group (:mod:`dipu.distributed`) creates one communicator
per process group and rank, and turns every ``torch.distributed`` call into the
few primitive operations below. A vendor without one gets
:class:`HostCopyCommunicator`: the collectives run through gloo on host copies.

Note [Collective contract]
The primitives take dipu tensors, dense and contiguous, all on the device the
communicator was created for, and return a *work* object: anything with
``wait()`` and ``get_future()`` as ``torch.distributed.Work`` has them (gloo's
and NCCL's works qualify). The contract for a work:
- the collective reads its inputs only after the work already queued on the
  current dipu stream when the primitive was called (the caller may launch a
  collective right after the kernel that produced its input);
- ``wait()`` returns once the outputs are usable by any work queued afterwards
  on the *current* dipu stream (a vendor with asynchronous streams makes that
  stream wait on an event; it need not block the host), and raises on failure;
- ``get_future()`` is a ``torch.futures.Future`` that completes (or fails) when
  the collective does; the value is ignored;
- a peer that has died or never arrives makes ``wait()`` raise once the
  communicator's ``timeout`` has passed, never hang.
Reduce ops are ``torch.distributed.ReduceOp.RedOpType`` values: SUM, PRODUCT,
MIN, MAX, BAND, BOR, BXOR. AVG and PREMUL_SUM never reach a vendor: the
process group builds them from SUM (see Note [Reduce ops the core builds]), so
results match across vendors. The list forms of PyTorch's API (``all_gather``
into a list, ``alltoall``, ``gather``, ``scatter``, coalesced calls) are built
by the process group from these primitives as well.
"""

from __future__ import annotations

import abc
import datetime
import threading
from typing import TYPE_CHECKING

import torch

#: The reduce ops a vendor's all_reduce and reduce_scatter must support.
VENDOR_REDUCE_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")


class Communicator(abc.ABC):
    """One rank's endpoint in one process group, on one dipu device.

    Constructed by the ``dicl`` process group on every rank of the group, at the
    group's first dipu collective, as ``cls(store, rank, world_size, device_index,
    timeout)``: ``store`` is a ``torch.distributed.Store`` private to this
    communicator, through which the ranks exchange what their library needs to
    connect (rank 0 publishes its unique id, the others read it: the
    ``ncclGetUniqueId``/``ncclCommInitRank`` pattern); ``timeout`` is the
    ``timeout=`` of ``init_process_group``/``new_group`` and bounds every wait.
    Methods are called from the thread that issues the ``torch.distributed``
    call; see Note [Collective contract] for what a returned work promises.
    """

    def __init__(self, store, rank: int, world_size: int, device_index: int,
                 timeout: datetime.timedelta):
        self.rank, self.world_size, self.device_index, self.timeout = rank, world_size, device_index, timeout

    @abc.abstractmethod
    def all_reduce(self, tensor: torch.Tensor, op) -> object:
        """Reduce ``tensor`` across ranks with ``op``, in place on every rank."""

    @abc.abstractmethod
    def broadcast(self, tensor: torch.Tensor, root: int) -> object:
        """Copy ``tensor`` of rank ``root`` into ``tensor`` of every other rank."""

    @abc.abstractmethod
    def all_gather(self, output: torch.Tensor, input: torch.Tensor) -> object:
        """Concatenate every rank's ``input`` along dim 0 into ``output`` (world_size x input), in rank order."""

    @abc.abstractmethod
    def reduce_scatter(self, output: torch.Tensor, input: torch.Tensor, op) -> object:
        """Reduce ``input`` (world_size x output) across ranks with ``op``; rank r keeps chunk r in ``output``."""

    @abc.abstractmethod
    def all_to_all(self, output: torch.Tensor, input: torch.Tensor,
                   output_split_sizes: list[int], input_split_sizes: list[int]) -> object:
        """Send dim-0 chunk i of ``input`` to rank i; receive rank i's chunk into dim-0 chunk i of ``output``.

        Split sizes count rows of dim 0, one per rank; both lists are given in
        full (the process group fills in equal splits when the caller gave none).
        """

    @abc.abstractmethod
    def send(self, tensor: torch.Tensor, peer: int, tag: int) -> object:
        """Send ``tensor`` to rank ``peer``; matched by the ``recv`` with the same ``tag`` there."""

    @abc.abstractmethod
    def recv(self, tensor: torch.Tensor, peer: int, tag: int) -> object:
        """Receive into ``tensor`` what rank ``peer`` sends with ``tag``."""

    @abc.abstractmethod
    def barrier(self) -> object:
        """A work that completes once every rank has called ``barrier``."""

    def shutdown(self) -> None:
        """Release the library's resources (process-group destruction); no calls follow."""


def check_communicator_class(vendor: str, cls: type) -> None:
    """Fail at once, naming every missing primitive, for an incomplete vendor communicator."""
    if not (isinstance(cls, type) and issubclass(cls, Communicator)):
        raise TypeError(f"dipu vendor '{vendor}': collectives = {cls!r} is not a subclass of "
                        "dipu.distributed.collectives.Communicator")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise TypeError(
            f"dipu vendor '{vendor}' ({cls.__module__}.{cls.__qualname__}) does not implement "
            f"the required collective methods: {', '.join(missing)}"
        )


if TYPE_CHECKING:  # the checker reads torch's stubs, which always declare it
    from torch.distributed import _Work as _WorkBase
else:
    _WorkBase = torch.distributed._Work if torch.distributed.is_available() else object


class ChainedWork(_WorkBase):
    """Other works, then ``finish``, then ``result``: one ``torch.distributed`` call's work.

    ``wait()`` waits for every inner work (a vendor's wait orders the current dipu
    stream; see Note [Collective contract]) and runs ``finish`` once; the future
    completes with ``result`` (the caller's tensors, what DDP's reducer reads) once
    every inner work has and ``finish`` has run, on whichever thread gets there first.
    """

    def __init__(self, works: list, result: list, finish=None):
        super().__init__()
        self._works, self._result, self._finish = works, result, finish
        self._lock = threading.Lock()
        self._finished = False
        self._future: torch.futures.Future | None = None

    def _complete(self) -> None:
        with self._lock:
            if not self._finished:
                if self._finish is not None:
                    self._finish()
                self._finished = True

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        for work in self._works:
            work.wait()
        self._complete()
        return True

    def is_completed(self) -> bool:
        return self._finished

    def get_future(self) -> torch.futures.Future:
        if self._future is None:
            self._future = torch.futures.Future()
            futures = [work.get_future() for work in self._works]
            torch.futures.collect_all(futures).add_done_callback(self._resolve)
        return self._future

    def _resolve(self, collected) -> None:
        own = self._future
        assert own is not None, "get_future() makes the future before it adds this callback"
        try:
            for future in collected.value():
                future.wait()  # raises the collective's error
            self._complete()
        except Exception as error:  # noqa: BLE001 -- handed to whoever waits on the future
            own.set_exception(error)
        else:
            own.set_result(self._result)


class GlooCommunicator(Communicator):
    """Runs each primitive with gloo on host tensors that :meth:`to_host` gives.

    A subclass whose device memory is host memory returns zero-copy aliases
    (the simulated vendor); :class:`HostCopyCommunicator` copies.
    """

    #: Whether :meth:`to_host` returns the dipu tensor's own memory (nothing to write back).
    zero_copy = False

    def __init__(self, store, rank, world_size, device_index, timeout):
        super().__init__(store, rank, world_size, device_index, timeout)
        self.gloo = torch.distributed.ProcessGroupGloo(store, rank, world_size, timeout)

    def to_host(self, tensor: torch.Tensor) -> torch.Tensor:
        """A CPU tensor holding ``tensor``'s values (its own memory when ``zero_copy``)."""
        # vendor streams may still be writing it; torch.dipu: not importable here (vendors import this module)
        torch.dipu.synchronize(tensor.get_device())  # type: ignore[attr-defined]  # registered at run time
        return tensor.cpu()

    def _done(self, work, written: list[tuple[torch.Tensor, torch.Tensor]]):
        if self.zero_copy:
            return work

        def copy_back():
            for device_tensor, host in written:
                device_tensor.copy_(host)

        # Asynchronous like gloo's own work: a send waits for the peer's recv, so waiting
        # here would deadlock batch_isend_irecv (both ranks send first).
        return ChainedWork([work], [], copy_back if written else None)

    @staticmethod
    def _reduce_options(options_type, op):
        options = options_type()
        options.reduceOp = torch.distributed.ReduceOp(op)
        return options

    def all_reduce(self, tensor, op):
        host = self.to_host(tensor)
        options = self._reduce_options(torch.distributed.AllreduceOptions, op)
        return self._done(self.gloo.allreduce([host], options), [(tensor, host)])

    def broadcast(self, tensor, root):
        host = self.to_host(tensor)
        options = torch.distributed.BroadcastOptions()
        options.rootRank, options.rootTensor = root, 0
        return self._done(self.gloo.broadcast([host], options), [(tensor, host)])

    def all_gather(self, output, input):
        host_out, host_in = self.to_host(output), self.to_host(input)
        return self._done(self.gloo._allgather_base(host_out, host_in), [(output, host_out)])

    def reduce_scatter(self, output, input, op):
        host_out, host_in = self.to_host(output), self.to_host(input)
        options = self._reduce_options(torch.distributed.ReduceScatterOptions, op)
        return self._done(self.gloo._reduce_scatter_base(host_out, host_in, options), [(output, host_out)])

    def all_to_all(self, output, input, output_split_sizes, input_split_sizes):
        host_out, host_in = self.to_host(output), self.to_host(input)
        work = self.gloo.alltoall_base(host_out, host_in, output_split_sizes, input_split_sizes,
                                       torch.distributed.AllToAllOptions())
        return self._done(work, [(output, host_out)])

    def send(self, tensor, peer, tag):
        return self._done(self.gloo.send([self.to_host(tensor)], peer, tag), [])

    def recv(self, tensor, peer, tag):
        host = self.to_host(tensor)
        return self._done(self.gloo.recv([host], peer, tag), [(tensor, host)])

    def barrier(self):
        return self._done(self.gloo.barrier(torch.distributed.BarrierOptions()), [])


class HostCopyCommunicator(GlooCommunicator):
    """The communicator of a vendor without collectives: gloo on host copies, written back on completion."""
