"""Building a C library (an op library, or a vendor's runtime plug-in such as vendor/refc) from its
sources with the machine's C compiler, cached like the native core.

Note [C op library cache]
``build(name, source_dir)`` compiles every ``*.c`` of ``source_dir`` (with its ``*.h``, dipu's
``diopi/diopirt.h`` and, once generated, ``diopi/functions.h`` on the include path) into
``lib<name>.so`` under ``$DIPU_CACHE_DIR/c_libraries/<name>-<hash>/``, the hash covering the
sources, the headers, the compiler and its flags, so an edit rebuilds it and nothing else does.
The native core's lock and ready-or-build step (``_native.ensure_built``) make concurrent first
uses build it once and never see a half-written file. The compiler is ``$CC``, else ``cc``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from dipu import _native

INCLUDE = Path(__file__).resolve().parents[1] / "include"
#: Note [C library compiler flags]
#: The build is cached and may be shared across machines, so nothing targets this machine's CPU
#: (no -march=native: the baseline of the architecture, SSE2 on x86-64). Each optimization flag keeps
#: IEEE semantics (NaN, infinities, signed zeros, rounding), unlike -ffast-math:
#:   -O3                  vectorizes and unswitches loops; changes no value.
#:   -fno-trapping-math   lets a loop with ``c ? a : b`` selects be if-converted and vectorized. It assumes
#:                        no one reads or traps on the floating-point exception flags (fenv), which neither
#:                        torch nor a DIOPI caller does; every computed value is the same.
#:   -fno-math-errno      lets sqrt compile to the instruction (and vectorize) instead of a call that also
#:                        sets errno for a negative argument; the value, NaN included, is the same.
#:   -ffp-contract=off    no fused multiply-adds the source does not write: the same rounding from every
#:                        compiler and architecture (gcc's default in ISO C mode, not clang's).
FLAGS = ["-shared", "-fPIC", "-pthread", "-O3", "-fno-trapping-math", "-fno-math-errno", "-ffp-contract=off",
         "-std=c11", "-Wall", "-Wno-unused-parameter"]


def compiler() -> str:
    return _native.compiler("C", "building a C library")


def _inputs(source_dir: Path) -> list[Path]:
    return sorted(p for p in source_dir.iterdir() if p.suffix in (".c", ".h")) + sorted(INCLUDE.rglob("*.h"))


def library_file(name: str, source_dir: Path) -> Path:
    """Where ``build`` puts the library built from ``source_dir`` as it is now."""
    digest = hashlib.sha256(" ".join([compiler(), *FLAGS]).encode())
    for path in _inputs(source_dir):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return _native.cache_root() / "c_libraries" / f"{name}-{digest.hexdigest()[:12]}" / f"lib{name}.so"


def build(name: str, source_dir: Path | str) -> Path:
    """The path of ``lib<name>.so`` built from ``source_dir`` (Note [C op library cache])."""
    source_dir = Path(source_dir)
    target = library_file(name, source_dir)
    target.parent.mkdir(parents=True, exist_ok=True)

    def compile_into(path: Path) -> None:
        sources = [str(p) for p in sorted(source_dir.glob("*.c"))]
        with tempfile.TemporaryDirectory(dir=path.parent) as work:
            built = Path(work) / path.name
            result = subprocess.run([compiler(), *FLAGS, f"-I{source_dir}", f"-I{INCLUDE}", *sources, "-o",
                                     str(built), "-lm"], capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"dipu: building the C op library {name} from {source_dir} failed:\n"
                                   f"{result.stderr}")
            os.replace(built, path)

    return _native.ensure_built(target, compile_into, f"the C library {name}")
