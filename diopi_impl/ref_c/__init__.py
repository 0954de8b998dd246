"""The reference C op library: DIOPI functions in C (this directory's ``*.c``), an independent second
implementation of the proto for the functions a small GPT trains with. Elementwise arithmetic and
activations, mm/bmm/addmm, softmax and log-softmax with their backwards, layer norm, embedding, the
NLL loss, sum and mean, and the optimizers' _foreach_ steps; the rest of the proto is left to the
library it is laid over or to the CPU fallback. Numerics: Note [Reference C library numerics] in
ref_c.h.

``DIPU_DIOPI_IMPL=ref_c`` (the entry point in ``dipu.diopi_impls``) builds it on first use with the
machine's C compiler (cached: Note [C op library cache]) and lays it over the vendor's library.
"""

from pathlib import Path

from dipu.diopi.c_build import build


def library_path() -> Path:
    """The built ``libref_c.so`` (built now if this version of the sources has not been)."""
    return build("ref_c", Path(__file__).parent)
