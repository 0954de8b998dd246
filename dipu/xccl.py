"""``dipu.xccl``, where a C plug-in's communicator was imported from before it moved to
:mod:`dipu.distributed.xccl`: kept so that code written against it (``dipu.xccl.HOST_FALLBACKS``) still
imports. The name is the module itself, not a copy of its names."""

import sys

from dipu.distributed import xccl

sys.modules[__name__] = xccl
