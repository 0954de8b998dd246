"""The simulated vendor's collectives: gloo, run on zero-copy CPU aliases of device memory.

Simulated device memory is host memory, so gloo can read and write it in place:
no staging copies, and gloo's own asynchronous works are returned as they are
(the simulated streams execute synchronously, so a collective launched after a
kernel already sees its result; see Note [Collective contract]).
"""

from __future__ import annotations

from dipu.distributed.collectives import GlooCommunicator


class SimCommunicator(GlooCommunicator):
    zero_copy = True

    def __init__(self, store, rank, world_size, device_index, timeout):
        super().__init__(store, rank, world_size, device_index, timeout)
        from dipu._core import _C  # built after the vendor loads, before any communicator exists

        self._alias = _C.alias

    def to_host(self, tensor):
        return self._alias(tensor, self.device_index)
