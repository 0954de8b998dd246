"""``dipu.collectives``, where the vendor collective contract was imported from before it moved to
:mod:`dipu.distributed.collectives`: kept so that vendor runtimes written against it (``from dipu.collectives
import Communicator``) still import. The name is the module itself, not a copy of its names."""

import sys

from dipu.distributed import collectives

sys.modules[__name__] = collectives
