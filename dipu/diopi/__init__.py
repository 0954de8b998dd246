"""The DIOPI runtime (status codes, context) and the op-library registry.

Op libraries (``diopi_impl/<name>/``) import from here: ``OpLibrary`` to
declare their functions, ``Status`` / ``SUCCESS`` to answer, and the
``Context`` they receive as ``ctx``.
"""

from dipu.diopi.library import OpLibrary, load_library
from dipu.diopi.runtime import SUCCESS, Context, Status, get_last_error, set_last_error

__all__ = ["OpLibrary", "load_library", "SUCCESS", "Context", "Status", "get_last_error", "set_last_error"]
