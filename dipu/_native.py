"""Build (once) and load the native core, dipu/csrc, against the installed torch.

Note [Native core cache]
The extension is compiled with torch.utils.cpp_extension at first import and
cached under ``$DIPU_CACHE_DIR`` (default ``~/.cache/dipu``) in a directory
keyed by the torch version and build, the Python version and a hash of the
sources, so upgrading torch or editing csrc rebuilds it. An exclusive file
lock serializes concurrent first imports; the build goes to a private
directory that is renamed into place, so readers never see a half-written
library.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

CSRC = Path(__file__).parent / "csrc"
NAME = "dipu_C"


def _sources() -> list[Path]:
    return sorted(p for p in CSRC.iterdir() if p.suffix in (".cpp", ".h"))


def cache_dir() -> Path:
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    key = "-".join([
        f"torch{torch.__version__}",
        (torch.version.git_version or "nogit")[:10],
        f"py{sys.version_info.major}{sys.version_info.minor}",
        digest.hexdigest()[:12],
    ])
    return cache_root() / key


def cache_root() -> Path:
    """``$DIPU_CACHE_DIR``, default ``~/.cache/dipu``: the native core and the generated kernels."""
    return Path(os.environ.get("DIPU_CACHE_DIR") or Path.home() / ".cache" / "dipu")


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check_compiler() -> None:
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        raise RuntimeError(
            f"dipu: building the native core needs a C++17 compiler, and '{compiler}' was not "
            "found. Install one (Debian/Ubuntu: apt install g++; Fedora: dnf install gcc-c++; "
            "macOS: xcode-select --install) or point CXX at it."
        )


def _build(target: Path) -> None:
    _check_compiler()
    from torch.utils import cpp_extension

    print(f"dipu: building the native core for torch {torch.__version__} "
          f"(first import only, about a minute)...", file=sys.stderr, flush=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        cpp_extension.load(
            name=NAME,
            sources=[str(p) for p in _sources() if p.suffix == ".cpp"],
            build_directory=str(work),
            extra_cflags=["-O2", "-fvisibility=hidden"],
            # Kineto's plugin headers (Note [Device timeline]), where the torch wheel ships them.
            extra_include_paths=[str(p) for p in [Path(torch.__file__).parent / "include" / "kineto"]
                                 if p.is_dir()],
            verbose=False,
            is_python_module=True,
        )
        built = next(work.glob(f"{NAME}*.so"))
        os.replace(built, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ensure_built(target: Path, build=None) -> Path:
    """Build `target` unless it exists; concurrent callers build it once."""
    if not target.exists():
        with _locked(target.parent / ".lock"):
            if not target.exists():
                (build or _build)(target)
    return target


def load():
    """Return the native module ``dipu._C``, building it first if needed."""
    target = ensure_built(cache_dir() / f"{NAME}.so")
    spec = importlib.util.spec_from_file_location(NAME, target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
