"""``torch.distributed`` on dipu tensors: the ``dicl`` backend.

Registered when dipu is imported, so on a machine whose accelerator is dipu
``dist.init_process_group()`` with no backend name picks it, as do
``init_process_group("dicl")`` and ``init_process_group("cpu:gloo,dipu:dicl")``.
DDP, FSDP2 (``fully_shard``) and ``torch.distributed`` object collectives then
run on dipu tensors; torchrun and c10d stores do the launching and rendezvous.

Note [The dicl process group]
PyTorch lets Python implement a whole ``ProcessGroup`` (its ``PyProcessGroup``
trampoline forwards the C++ virtual calls that DDP's reducer and
``_broadcast_coalesced`` make: allreduce, broadcast, allgather, ...), but not a
per-device ``Backend`` (``torch._C._distributed_c10d.Backend`` has no Python
constructor). So ``DiclProcessGroup`` is the process group for every device:
CPU tensors go to a gloo group it owns (as ``cpu:gloo`` would), dipu tensors
to the vendor's :class:`~dipu.distributed.collectives.Communicator`, created at the first
dipu collective on the device of its tensors (on every rank, as NCCL creates
its communicators). Each ``ProcessGroup`` method checks its tensors, then maps
the call onto the few primitives of Note [Collective contract]; the works it
returns wait on the vendor's work and then finish what the mapping left (copy
a flat buffer into the caller's list, divide for AVG), and their futures carry
the caller's dipu tensors, which is what DDP's reducer reads.

DTensor and ``torch.distributed._functional_collectives`` reach the same methods
(tests/test_distributed.py checks ``full_tensor`` and a Shard-to-Replicate
redistribution).
"""

from __future__ import annotations

import datetime
import zlib
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions  # not re-exported by torch.distributed

from dipu._core import vendor
from dipu.distributed import collectives, xccl
from dipu.distributed.collectives import ChainedWork

#: The name users pass to init_process_group ("cpu:gloo,dipu:dicl"); DIPU calls its library DICL.
BACKEND_NAME = "dicl"

ReduceOp = dist.ReduceOp
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_DTYPES = {zlib.crc32(str(t).encode()): t for t in vars(torch).values() if isinstance(t, torch.dtype)}
_MAX_CHECKED_DIMS = 8


def _one(op: str, tensors: list) -> torch.Tensor:
    if len(tensors) != 1:
        raise ValueError(f"dicl {op}: expected one tensor per rank, got {len(tensors)}")
    return tensors[0]


class DiclProcessGroup(dist.ProcessGroup):
    """The ``dicl`` process group; see Note [The dicl process group]."""

    def __init__(self, store, rank: int, size: int, timeout: datetime.timedelta):
        super().__init__(rank, size)  # type: ignore[call-arg]  # torch's stub has only (store, rank, size)
        self._rank, self._size, self._timeout = rank, size, timeout
        self._store = store
        # Connecting gloo here makes init_process_group itself fail after `timeout`
        # when a rank never joins.
        # Any: torch's stub of gloo's Backend base lacks send, recv, recv_anysource and _allgather_base, which
        # the binding has; None once shut down, when no collective reaches it.
        self._host: Any = dist.ProcessGroupGloo(dist.PrefixStore("cpu", store), rank, size, timeout)
        self._communicator: collectives.Communicator | None = None
        self._device_index: int | None = None
        self._group_name = self._group_desc = ""

    #: Whether new groups may be split from this one's communicator (NCCL's ncclCommSplit).
    #: ``init_process_group(device_id=...)`` and ``new_group`` ask; dicl groups connect on their own.
    supports_splitting = False

    # PyTorch keeps a group's name in its per-device backends, which this group has none of.
    def _get_backend(self, device):
        """This group itself for every device: it routes CPU tensors to gloo and dipu tensors to the
        communicator. torch 2.15's batch_isend_irecv asks the group for a device's backend (to read its
        supports_coalescing), which a Python process group has none of registered."""
        return self

    def getBackendName(self) -> str:  # noqa: N802 -- PyTorch's names
        return BACKEND_NAME

    def getGroupName(self) -> str:  # noqa: N802
        return self._group_name

    def setGroupName(self, name: str) -> None:  # noqa: N802
        self._group_name = name

    def getGroupDesc(self) -> str:  # noqa: N802
        return self._group_desc

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        self._group_desc = desc

    def shutdown(self) -> None:
        """destroy_process_group: release the vendor communicator and the host gloo group."""
        if self._communicator is not None:
            self._communicator.shutdown()
            self._communicator = None
        # Now, while the interpreter is whole: a gloo group left to interpreter teardown can abort the
        # process there (std::terminate) when its worker threads still hold work with tensors.
        self._host = None

    # ---- routing ------------------------------------------------------------------------------

    def _route(self, op: str, tensors, uniform: torch.Tensor | None = None) -> collectives.Communicator | None:
        """The communicator for dipu tensors, or None when all of them are CPU tensors (gloo).

        ``uniform``: a tensor whose dtype and shape every rank must agree on (checked under
        TORCH_DISTRIBUTED_DEBUG=DETAIL; see Note [Mismatched collectives]).
        """
        types = {t.device.type for t in tensors}
        if types <= {"cpu"}:
            return None
        if types != {"dipu"}:
            raise ValueError(f"dicl {op}: tensors are on {', '.join(sorted(types))}; "
                             "expected all on dipu or all on cpu")
        indices = {t.get_device() for t in tensors}
        if len(indices) != 1:
            raise ValueError(f"dicl {op}: tensors are on devices {sorted(indices)}; expected one dipu device")
        for tensor in tensors:
            if not tensor.is_contiguous():
                raise ValueError(f"dicl {op}: tensors must be contiguous (got sizes {list(tensor.shape)}, "
                                 f"strides {list(tensor.stride())})")
        communicator = self._communicator_for(op, indices.pop())
        if uniform is not None and dist.get_debug_level() == dist.DebugLevel.DETAIL:
            self._check_across_ranks(op, uniform)
        return communicator

    # Note [Mismatched collectives]
    # A rank calling another collective, or the same one with another shape, leaves gloo
    # reading a message of the wrong size: it aborts the process (std::terminate), on CPU
    # tensors as on dipu ones, and NCCL hangs until the timeout. PyTorch's answer is
    # TORCH_DISTRIBUTED_DEBUG=DETAIL, whose wrapper group compares every call across
    # ranks first; it wraps only per-device backends, so this group does the same
    # itself: one small all_gather of (op, dtype, shape) on the host gloo group.

    def _check_across_ranks(self, op: str, tensor: torch.Tensor) -> None:
        shape = list(tensor.shape)
        if len(shape) > _MAX_CHECKED_DIMS:
            shape = shape[:_MAX_CHECKED_DIMS - 1] + [tensor.numel()]
        mine = [zlib.crc32(op.encode()), zlib.crc32(str(tensor.dtype).encode()), len(shape)]
        mine += shape + [0] * (_MAX_CHECKED_DIMS - len(shape))
        mine_tensor = torch.tensor(mine, dtype=torch.int64)
        everyone = torch.empty(self._size * len(mine), dtype=torch.int64)
        self._host._allgather_base(everyone, mine_tensor, AllgatherOptions()).wait()
        rows = everyone.view(self._size, len(mine)).tolist()
        if all(row == mine for row in rows):
            return
        names = {zlib.crc32(name.encode()): name for name in _CHECKED_OPS}

        def describe(row):
            what = names.get(row[0], "another collective")
            return f"{what} on {_DTYPES.get(row[1], '?')} {row[3:3 + row[2]]}"

        calls = "; ".join(f"rank {r}: {describe(row)}" for r, row in enumerate(rows))
        raise RuntimeError(f"dicl {op}: ranks disagree on the collective (TORCH_DISTRIBUTED_DEBUG=DETAIL): {calls}")

    def _communicator_for(self, op: str, index: int) -> collectives.Communicator:
        if self._communicator is None:
            cls = vendor().collectives or (
                xccl.XcclCommunicator if xccl.usable(vendor()) else collectives.HostCopyCommunicator)
            store = dist.PrefixStore("dipu", self._store)
            self._communicator = cls(store, self._rank, self._size, index, self._timeout)
            self._device_index = index
        elif index != self._device_index:
            raise ValueError(f"dicl {op}: this process group communicates on dipu:{self._device_index} "
                             f"(its first dipu collective), got a tensor on dipu:{index}; use one "
                             "device per rank (torch.dipu.set_device(local_rank))")
        return self._communicator

    # ---- reduce ops --------------------------------------------------------------------------
    # Note [Reduce ops the core builds]
    # AVG and PREMUL_SUM (FSDP2 reduce-scatters gradients with them) are SUM with a
    # division after it or a multiplication before it, done here on dipu tensors, so
    # every vendor supports them and integer AVG truncates as NCCL's does. The
    # multiplication happens on a copy wherever the caller's input is not also the output.

    def _vendor_op(self, op: str, reduce_op, dtype: torch.dtype):
        """(vendor op, factor to multiply the input by or None, divisor after or None)."""
        # torch's stub of ReduceOp lacks the binding's .op
        kind = reduce_op.op if isinstance(reduce_op, ReduceOp) else reduce_op  # type: ignore[attr-defined]
        if kind == ReduceOp.AVG:
            return ReduceOp.SUM, None, self._size
        if kind == ReduceOp.PREMUL_SUM:
            _, factor = reduce_op.__getstate__()  # its pickle state: torch 2.11's ReduceOp has no .factor
            return ReduceOp.SUM, factor, None
        if kind.name not in collectives.VENDOR_REDUCE_OPS:
            raise ValueError(f"dicl {op}: unsupported reduce op {kind}")
        if kind in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dtype in _FLOATING:
            raise ValueError(f"dicl {op}: {kind.name} is not defined for {dtype}")
        return kind, None, None

    @staticmethod
    def _divide(tensor: torch.Tensor, divisor: int) -> None:
        if tensor.dtype in _FLOATING or tensor.is_complex():
            tensor.div_(divisor)
        else:
            tensor.copy_(torch.div(tensor, divisor, rounding_mode="trunc"))

    # ---- reductions --------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        opts = opts or dist.AllreduceOptions()
        tensor = _one("allreduce", tensors)
        comm = self._route("allreduce", tensors, uniform=tensor)
        if comm is None:
            return self._host.allreduce(tensors, opts)
        kind, factor, divisor = self._vendor_op("allreduce", opts.reduceOp, tensor.dtype)
        if factor is not None:
            tensor.mul_(factor)
        finish = (lambda: self._divide(tensor, divisor)) if divisor else None
        return ChainedWork([comm.all_reduce(tensor, kind)], [tensor], finish)

    def allreduce_coalesced(self, tensors, opts=None):
        if self._route("allreduce_coalesced", tensors) is None:
            return self._host.allreduce_coalesced(tensors, opts or dist.AllreduceCoalescedOptions())
        options = dist.AllreduceOptions()
        options.reduceOp = (opts or dist.AllreduceCoalescedOptions()).reduceOp
        return self._combine([self.allreduce([t], options) for t in tensors], list(tensors))

    def reduce(self, tensors, opts=None):
        opts = opts or dist.ReduceOptions()
        tensor = _one("reduce", tensors)
        comm = self._route("reduce", tensors, uniform=tensor)
        if comm is None:
            return self._host.reduce(tensors, opts)
        kind, factor, divisor = self._vendor_op("reduce", opts.reduceOp, tensor.dtype)
        scratch = tensor.clone()  # only the root's tensor receives the result
        if factor is not None:
            scratch.mul_(factor)
        root = opts.rootRank

        def finish():
            if self._rank == root:
                if divisor:
                    self._divide(scratch, divisor)
                tensor.copy_(scratch)

        return ChainedWork([comm.all_reduce(scratch, kind)], [tensor], finish)

    def reduce_scatter_single(self, output, input, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        comm = self._route("reduce_scatter_tensor", [output, input], uniform=input)
        if comm is None:
            return self._host._reduce_scatter_base(output, input, opts)
        if input.numel() != output.numel() * self._size:
            raise ValueError(f"dicl reduce_scatter_tensor: input has {input.numel()} elements, expected "
                             f"world_size ({self._size}) x output ({output.numel()})")
        if input.dtype != output.dtype:
            raise ValueError(f"dicl reduce_scatter_tensor: input is {input.dtype}, output {output.dtype}")
        kind, factor, divisor = self._vendor_op("reduce_scatter_tensor", opts.reduceOp, input.dtype)
        if factor is not None:
            input = input * factor
        finish = (lambda: self._divide(output, divisor)) if divisor else None
        work = comm.reduce_scatter(output.view(-1), input.view(-1), kind)
        return ChainedWork([work], [output], finish)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, outputs, input_lists, opts=None):
        output = _one("reduce_scatter", outputs)
        inputs = _one("reduce_scatter", input_lists)
        if self._route("reduce_scatter", [output, *inputs]) is None:
            return self._host.reduce_scatter(outputs, input_lists, opts or dist.ReduceScatterOptions())
        self._check_list("reduce_scatter", inputs, output)
        flat = torch.cat([t.reshape(-1) for t in inputs])
        work = self.reduce_scatter_single(output, flat, opts)
        return ChainedWork([work], [output])

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        if self._route("reduce_scatter_tensor_coalesced", [*outputs, *inputs]) is None:
            works = [self._host._reduce_scatter_base(o, i, opts or dist.ReduceScatterOptions())
                     for o, i in zip(outputs, inputs)]
            return self._combine(works, list(outputs))
        works = [self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._combine(works, list(outputs))

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced  # the name torch 2.11's trampoline calls

    # ---- data movement -----------------------------------------------------------------------

    def broadcast(self, tensors, opts=None):
        opts = opts or dist.BroadcastOptions()
        tensor = _one("broadcast", tensors)
        comm = self._route("broadcast", tensors, uniform=tensor)
        if comm is None:
            return self._host.broadcast(tensors, opts)
        return ChainedWork([comm.broadcast(tensor, opts.rootRank)], [tensor])

    def all_gather_single(self, output, input, opts=None):
        comm = self._route("all_gather_into_tensor", [output, input], uniform=input)
        if comm is None:
            return self._host._allgather_base(output, input, opts or AllgatherOptions())
        if output.numel() != input.numel() * self._size:
            raise ValueError(f"dicl all_gather_into_tensor: output has {output.numel()} elements, expected "
                             f"world_size ({self._size}) x input ({input.numel()})")
        if input.dtype != output.dtype:
            raise ValueError(f"dicl all_gather_into_tensor: input is {input.dtype}, output {output.dtype}")
        return ChainedWork([comm.all_gather(output.view(-1), input.view(-1))], [output])

    _allgather_base = all_gather_single

    def allgather(self, output_lists, inputs, opts=None):
        input = _one("allgather", inputs)
        outputs = _one("allgather", output_lists)
        comm = self._route("allgather", [input, *outputs], uniform=input)
        if comm is None:
            return self._host.allgather(output_lists, inputs, opts or AllgatherOptions())
        self._check_list("allgather", outputs, input)
        flat = torch.empty(self._size * input.numel(), dtype=input.dtype, device=input.device)
        work = comm.all_gather(flat, input.view(-1))
        return ChainedWork([work], [outputs], lambda: self._unflatten(flat, outputs))

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        if self._route("allgather_coalesced", list(inputs)) is None:
            return self._host.allgather_coalesced(output_lists, inputs, opts or AllgatherOptions())
        works = [self.allgather([outputs], [t]) for outputs, t in zip(output_lists, inputs)]
        return self._combine(works, list(output_lists))

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        works = [self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._combine(works, list(outputs))

    allgather_into_tensor_coalesced = all_gather_single_coalesced  # the name torch 2.11's trampoline calls

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        comm = self._route("all_to_all_single", [output, input])
        if comm is None:
            return self._host.alltoall_base(output, input, output_split_sizes, input_split_sizes,
                                            opts or dist.AllToAllOptions())
        out_splits = self._splits("output", output, output_split_sizes)
        in_splits = self._splits("input", input, input_split_sizes)
        return ChainedWork([comm.all_to_all(output, input, out_splits, in_splits)], [output])

    alltoall_base = all_to_all_single

    def alltoall(self, outputs, inputs, opts=None):
        """The list form on flat buffers, for CPU tensors too: torch 2.11's gloo has only the flat form."""
        comm = self._route("all_to_all", [*outputs, *inputs])
        if len(outputs) != self._size or len(inputs) != self._size:
            raise ValueError(f"dicl all_to_all: expected {self._size} input and output tensors, "
                             f"got {len(inputs)} and {len(outputs)}")
        flat_in = torch.cat([t.reshape(-1) for t in inputs])
        flat_out = torch.empty(sum(t.numel() for t in outputs), dtype=flat_in.dtype, device=flat_in.device)
        out_splits, in_splits = [t.numel() for t in outputs], [t.numel() for t in inputs]
        if comm is None:
            work = self._host.alltoall_base(flat_out, flat_in, out_splits, in_splits, opts or dist.AllToAllOptions())
        else:
            work = comm.all_to_all(flat_out, flat_in, out_splits, in_splits)
        return ChainedWork([work], list(outputs), lambda: self._unflatten(flat_out, outputs))

    def gather(self, output_lists, inputs, opts=None):
        opts = opts or dist.GatherOptions()
        input = _one("gather", inputs)
        root = opts.rootRank
        outputs = output_lists[0] if output_lists else []
        comm = self._route("gather", [input, *outputs])
        if comm is None:
            return self._host.gather(output_lists, inputs, opts)
        n = input.numel()
        if self._rank == root:
            self._check_list("gather", outputs, input)
            flat = torch.empty(self._size * n, dtype=input.dtype, device=input.device)
            out_splits = [n] * self._size
        else:
            flat = torch.empty(0, dtype=input.dtype, device=input.device)
            out_splits = [0] * self._size
        in_splits = [n if r == root else 0 for r in range(self._size)]
        work = comm.all_to_all(flat, input.view(-1), out_splits, in_splits)
        finish = (lambda: self._unflatten(flat, outputs)) if self._rank == root else None
        return ChainedWork([work], [outputs], finish)

    def scatter(self, outputs, input_lists, opts=None):
        opts = opts or dist.ScatterOptions()
        output = _one("scatter", outputs)
        root = opts.rootRank
        inputs = input_lists[0] if input_lists else []
        comm = self._route("scatter", [output, *inputs])
        if comm is None:
            return self._host.scatter(outputs, input_lists, opts)
        n = output.numel()
        if self._rank == root:
            self._check_list("scatter", inputs, output)
            flat = torch.cat([t.reshape(-1) for t in inputs])
            in_splits = [n] * self._size
        else:
            flat = torch.empty(0, dtype=output.dtype, device=output.device)
            in_splits = [0] * self._size
        out_splits = [n if r == root else 0 for r in range(self._size)]
        return ChainedWork([comm.all_to_all(output.view(-1), flat, out_splits, in_splits)], [output])

    def send(self, tensors, dst: int, tag: int):
        tensor = _one("send", tensors)
        comm = self._route("send", tensors)
        if comm is None:
            return self._host.send(tensors, dst, tag)
        return ChainedWork([comm.send(tensor, dst, tag)], [tensor])

    def recv(self, tensors, src: int, tag: int):
        tensor = _one("recv", tensors)
        comm = self._route("recv", tensors)
        if comm is None:
            return self._host.recv(tensors, src, tag)
        return ChainedWork([comm.recv(tensor, src, tag)], [tensor])

    def recv_anysource(self, tensors, tag: int):
        if self._route("recv", tensors) is None:
            return self._host.recv_anysource(tensors, tag)
        raise NotImplementedError("dicl recv: receiving dipu tensors from any source is not supported; "
                                  "name the source rank")

    def barrier(self, opts=None):
        if self._communicator is not None:
            return ChainedWork([self._communicator.barrier()], [])
        return self._host.barrier(opts or dist.BarrierOptions())

    # ---- helpers ---------------------------------------------------------------------------------

    def _check_list(self, op: str, tensors: list, like: torch.Tensor) -> None:
        if len(tensors) != self._size:
            raise ValueError(f"dicl {op}: expected a list of world_size ({self._size}) tensors, got {len(tensors)}")
        for tensor in tensors:
            if tensor.numel() != like.numel() or tensor.dtype != like.dtype:
                raise ValueError(f"dicl {op}: list tensors must match {list(like.shape)} {like.dtype}, "
                                 f"got {list(tensor.shape)} {tensor.dtype}")

    def _splits(self, name: str, tensor: torch.Tensor, splits: list[int]) -> list[int]:
        rows = tensor.shape[0] if tensor.dim() else 1
        if not splits:
            if rows % self._size:
                raise ValueError(f"dicl all_to_all_single: {name} dim 0 ({rows}) is not divisible by "
                                 f"world_size ({self._size}); pass split sizes")
            return [rows // self._size] * self._size
        if len(splits) != self._size or sum(splits) != rows:
            raise ValueError(f"dicl all_to_all_single: {name} split sizes {list(splits)} must be "
                             f"{self._size} values summing to dim 0 ({rows})")
        return list(splits)

    @staticmethod
    def _unflatten(flat: torch.Tensor, outputs: list) -> None:
        offset = 0
        for tensor in outputs:
            tensor.copy_(flat[offset:offset + tensor.numel()].view(tensor.shape))
            offset += tensor.numel()

    @staticmethod
    def _combine(works: list, result: list) -> ChainedWork:
        return ChainedWork(works, result)


_CHECKED_OPS = ("allreduce", "reduce", "reduce_scatter_tensor", "broadcast", "all_gather_into_tensor", "allgather")


def _create_process_group(store, rank: int, size: int, timeout: datetime.timedelta) -> DiclProcessGroup:
    return DiclProcessGroup(store, rank, size, timeout)


def register() -> None:
    """Make ``dicl`` the default ``torch.distributed`` backend of dipu tensors."""
    if dist.is_available() and BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create_process_group, devices=["dipu"])
