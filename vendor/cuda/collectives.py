"""The CUDA vendor's collectives: NCCL, run on zero-copy CUDA aliases of dipu tensors.

PyTorch's own ``ProcessGroupNCCL`` does the work: it exchanges NCCL's unique id
through the store, creates the communicator at the first collective, makes its
NCCL stream wait for the current CUDA stream before reading the inputs, and its
works' ``wait()`` makes the current CUDA stream wait for the NCCL stream. The
CUDA vendor keeps the current CUDA stream equal to the current dipu stream
(``CudaRuntime.set_current_stream``), so that is exactly Note [Collective contract].
Unverified: no GPU has run this yet.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions  # not re-exported by torch.distributed

from dipu.distributed.collectives import Communicator


class NcclCommunicator(Communicator):
    def __init__(self, store, rank, world_size, device_index, timeout):
        super().__init__(store, rank, world_size, device_index, timeout)
        if not dist.is_nccl_available():
            raise RuntimeError("dipu cuda vendor: this torch has no NCCL (torch.distributed.is_nccl_available() "
                               "is False); install a CUDA build of torch")
        from dipu._core import _C  # built after the vendor loads, before any communicator exists

        self._alias = _C.alias
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        self.nccl = dist.ProcessGroupNCCL(store, rank, world_size, options)

    def _cuda(self, tensor: torch.Tensor) -> torch.Tensor:
        return self._alias(tensor, self.device_index)

    @staticmethod
    def _options(options_type, op=None, **fields):
        options = options_type()
        if op is not None:
            options.reduceOp = dist.ReduceOp(op)
        for name, value in fields.items():
            setattr(options, name, value)
        return options

    def all_reduce(self, tensor, op):
        return self.nccl.allreduce([self._cuda(tensor)], self._options(dist.AllreduceOptions, op))

    def broadcast(self, tensor, root):
        options = self._options(dist.BroadcastOptions, rootRank=root, rootTensor=0)
        return self.nccl.broadcast([self._cuda(tensor)], options)

    def all_gather(self, output, input):
        return self.nccl._allgather_base(self._cuda(output), self._cuda(input), AllgatherOptions())

    def reduce_scatter(self, output, input, op):
        return self.nccl._reduce_scatter_base(self._cuda(output), self._cuda(input),
                                              self._options(dist.ReduceScatterOptions, op))

    def all_to_all(self, output, input, output_split_sizes, input_split_sizes):
        return self.nccl.alltoall_base(self._cuda(output), self._cuda(input), output_split_sizes,
                                       input_split_sizes, dist.AllToAllOptions())

    def send(self, tensor, peer, tag):
        return self.nccl.send([self._cuda(tensor)], peer, tag)

    def recv(self, tensor, peer, tag):
        return self.nccl.recv([self._cuda(tensor)], peer, tag)

    def barrier(self):
        return self.nccl.barrier(self._options(dist.BarrierOptions, device_ids=[self.device_index]))

    def shutdown(self):
        self.nccl.shutdown()
