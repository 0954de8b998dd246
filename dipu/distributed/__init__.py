"""``torch.distributed`` on dipu tensors.

- ``process_group.py``: the ``dicl`` backend and its process group (Note [The dicl process group]),
  registered when dipu is imported;
- ``collectives.py``: the vendor collective contract, the :class:`~dipu.distributed.collectives.Communicator`
  a vendor's runtime names in ``collectives`` (Note [Collective contract]);
- ``xccl.py``: the communicator of a C runtime plug-in's ``xccl_*`` functions (Note [A plug-in's collectives]).

The package imports nothing itself: a vendor runtime imports ``dipu.distributed.collectives`` while dipu is
still loading its native core (dipu/_core.py), before the process group, which needs the core and
``torch.distributed``, can be imported. The process group's public names (``dipu.distributed.register``,
``DiclProcessGroup``, ``BACKEND_NAME``, ``ReduceOp``) are looked up in ``process_group.py`` on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dipu.distributed.process_group import BACKEND_NAME, DiclProcessGroup, ReduceOp, register

__all__ = ["BACKEND_NAME", "DiclProcessGroup", "ReduceOp", "register"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from dipu.distributed import process_group

        return getattr(process_group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
