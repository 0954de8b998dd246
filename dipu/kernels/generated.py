"""The generated kernels for the installed torch, generated at first import and cached.

Note [Generated code per torch version]
The Python kernels (the package dipu._generated) are built, not committed, as torchgen's and DIPU's are:
at the first import under a torch, dipu runs the generator against that torch's schemas (Note [The spec
follows the installed torch] in scripts/autogen/spec.py) and caches the package beside the native core
(Note [Native core cache]), keyed by the torch build and a hash of the spec, the generator and the proto
(Note [Generation at run time] in dipu/_generation.py). Entries that do not fit that torch are reported
once and their ops run through the CPU fallback. On a cold cache this costs about 2.5 s of generation
and 1 s of compiling on this project's 2-core machine, once per torch; a warm import generates nothing
and imports nothing of the generator. What the generator emits is reviewed through its golden files
(tests/autogen/expected, for the reference torch ``REFERENCE_TORCH`` in scripts/autogen/__init__.py).

Note [Compiled generated code]
The generated module is about 35k lines; compiling it costs about a second,
and with PYTHONDONTWRITEBYTECODE=1 Python would pay that on every import. So
the package is loaded through a loader that keeps the compiled code in the
cache directory, keyed by a hash of the source, whatever that variable says.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import tempfile
import warnings
from pathlib import Path

import torch

from dipu import _generation, _native

PACKAGE = "dipu._generated"


def _generated_dir() -> Path:
    """The cached package for the installed torch, generating it first if it is not there."""
    digest = hashlib.sha256()
    for path in _generation.inputs("python kernels"):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    key = f"generated-torch{torch.__version__}-{(torch.version.git_version or 'nogit')[:10]}-{digest.hexdigest()[:12]}"
    target = _native.cache_root() / key

    def build(directory: Path) -> None:
        files = _generation.python_kernels()
        work = Path(tempfile.mkdtemp(prefix="generating-", dir=directory.parent))
        for name, text in files.items():
            (work / name).write_text(text)
        os.replace(work, directory)

    return _native.ensure_built(target, build, "the op kernels (generated Python)")


class _CachedCodeLoader(importlib.machinery.SourceFileLoader):
    """Note [Compiled generated code]."""

    def get_code(self, fullname):
        source = self.get_data(self.path)
        key = hashlib.sha256(source + self.path.encode() + sys.version.encode()).hexdigest()[:16]
        cached = _native.cache_root() / "code" / f"{fullname}-{key}.marshal"
        try:
            return marshal.loads(cached.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = self.source_to_code(source, self.path)
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=cached.parent)
            with os.fdopen(handle, "wb") as file:
                file.write(marshal.dumps(code))
            os.replace(temporary, cached)
        except OSError:
            pass  # a read-only cache only costs the compile
        return code


def _load(directory: Path):
    """Import the generated package in ``directory`` as dipu._generated."""
    for name in ("wrappers", "__init__"):
        fullname = PACKAGE if name == "__init__" else f"{PACKAGE}.{name}"
        path = directory / f"{name}.py"
        spec = importlib.util.spec_from_file_location(
            fullname, path, loader=_CachedCodeLoader(fullname, str(path)),
            submodule_search_locations=[str(directory)] if name == "__init__" else None)
        if spec is None or spec.loader is None:
            raise ImportError(f"dipu: cannot load the generated {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[fullname] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[fullname]
            raise
    package = sys.modules[PACKAGE]
    package.wrappers = sys.modules[f"{PACKAGE}.wrappers"]  # type: ignore[attr-defined]  # a submodule, set at run time
    return package


def load():
    """dipu._generated for the installed torch (Note [Generated code per torch version])."""
    package = _load(_generated_dir())
    _warn_unmatched(package)
    return package


def _warn_unmatched(package) -> None:
    if package.UNMATCHED:
        warnings.warn(
            f"dipu: {len(package.UNMATCHED)} op(s) of diopi_functions.yaml do not fit torch {torch.__version__}'s "
            f"schemas and run through the CPU fallback: {'; '.join(package.UNMATCHED.values())}", stacklevel=3)
