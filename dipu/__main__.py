"""``python -m dipu``: what a bug report needs to say about this installation.
``python -m dipu conformance``: the conformance certificate (Note [The conformance certificate] in
dipu/conformance/__init__.py).
``python -m dipu build``: build ahead of time what dipu compiles on first use (Note [Build progress] in
dipu/_native.py).

Versions, the vendor (and its plug-in for a runtime in C), its devices, the op library and how much
of the DIOPI proto it implements, the native core's cache, and the DIPU_* variables set. Every
section is printed even when another fails: the failure is reported in its place, since a broken
installation is when this is run. ``--missing`` lists, per DIOPI function the op library lacks, the
ops that run on the CPU fallback because of it; ``--python-wrappers``, by reason, the kernels that run their
Python wrapper instead of a C++ one (the generator emits none, the op library's function is Python's, ...).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from importlib import metadata

import torch

from dipu import _native
from dipu._core import vendor
from dipu.diopi.proto import FUNCTIONS
from dipu.kernels.registry import registration
from dipu.runtime import plugin_of


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def implemented(library) -> set[str]:
    """The DIOPI functions of the proto ``library`` implements, its base libraries' included."""
    names = set()
    while library is not None:
        names.update(library.functions)
        library = library.base
    return names & set(FUNCTIONS)


def _versions() -> list[str]:
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"
    return [f"dipu {_version('dipu')} ({os.path.dirname(__file__)})",
            f"torch {torch.__version__} ({build} build), Python {platform.python_version()}, "
            f"{platform.system()} {platform.machine()}"]


def _vendor() -> list[str]:
    runtime = vendor()
    cls = type(runtime)
    lines = [f"vendor: {runtime.name} ({cls.__module__}.{cls.__qualname__})"]
    plugin = plugin_of(runtime)
    if plugin is not None:
        major, minor, patch = plugin.version
        lines.append(f"  runtime plug-in in C: {plugin.path} (device type {plugin.device_type}, "
                     f"ABI {major}.{minor}.{patch}, {len(plugin.functions())} functions)")
    memory = "addressable as " + runtime.native_device_type if runtime.native_device_type else "opaque"
    lines.append(f"  memory: {memory}"
                 f"; collectives: {runtime.collectives.__name__ if runtime.collectives else 'gloo on host copies'}"
                 f"; torch.compile: {runtime.compiler_backend or 'no compiler (aot_eager through dipu kernels)'}")
    return lines


def _devices() -> list[str]:
    count = torch.dipu.device_count()  # type: ignore[attr-defined]  # torch.dipu: registered at run time
    lines = [f"devices: {count}"]
    for index in range(count):
        props = torch.dipu.get_device_properties(index)  # type: ignore[attr-defined]  # as above
        free, total = torch.dipu.mem_get_info(index)  # type: ignore[attr-defined]  # as above
        lines.append(f"  dipu:{index}: {props.name}, capability {props.major}.{props.minor}, "
                     f"{props.multi_processor_count} processors, {total / 2**30:.1f} GiB "
                     f"({free / 2**30:.1f} GiB free)")
    return lines


def _op_library() -> list[str]:
    library = registration.library
    if library is None:
        return ["op library: none (a runtime only: every op runs on the CPU fallback)"]
    names = implemented(library)
    layers, layer = [], registration.library  # library, typed OpLibrary | None: the walk ends on None
    while layer is not None:
        layers.append(f"{layer.name} ({len(set(layer.functions) & set(FUNCTIONS))} functions)")
        layer = layer.base
    lines = [f"op library: {' over '.join(layers)}"]
    missing = registration.missing
    lines += [f"  implements {len(names)} of the {len(FUNCTIONS)} DIOPI functions of the proto "
              f"({100 * len(names) / len(FUNCTIONS):.0f}%)",
              f"  aten kernels registered: {len(registration.kernels)}, "
              f"{len(registration.cpp_kernels)} of them through generated C++ wrappers",
              f"  {sum(map(len, missing.values()))} ops run on the CPU fallback for want of {len(missing)} "
              "DIOPI functions (--missing lists them)" if missing else
              "  every DIOPI function the spec calls is there"]
    return lines


def _missing() -> list[str]:
    lines = ["DIOPI functions the op library lacks, and the ops that run on the CPU fallback for it:"]
    for function, ops in sorted(registration.missing.items(), key=lambda item: (-len(item[1]), item[0])):
        lines.append(f"  {function}: {', '.join(sorted(ops))}")
    return lines if registration.missing else ["the op library lacks none of the DIOPI functions the spec calls"]


def _python_wrappers() -> list[str]:
    left = registration.left_to_python()
    if not left:
        return ["every registered kernel runs its C++ wrapper"]
    by_reason: dict[str, list[str]] = {}
    for op, reason in left.items():  # "why: detail"
        why, _, detail = reason.partition(": ")
        by_reason.setdefault(why, []).append(f"{op} ({detail})" if detail else op)
    lines = [f"kernels on their Python wrapper: {len(left)} of {len(registration.kernels)} registered, by reason:"]
    for why, ops in sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0])):
        lines.append(f"  {why} ({len(ops)}): {'; '.join(sorted(ops))}")
    return lines


def _environment() -> list[str]:
    lines = [f"native core: {_native.cache_dir()}"
             + (f" (sanitizer: {_native.sanitizer()})" if _native.sanitizer() else "")]
    variables = sorted((k, v) for k, v in os.environ.items() if k.startswith("DIPU_"))
    lines.append("DIPU_* variables: " + ("none set" if not variables else ""))
    lines += [f"  {k}={v}" for k, v in variables]
    return lines


def _certificate_environment() -> list[str]:
    lines = []
    for section in (_versions, _vendor, _op_library, _environment):
        try:
            lines += section()
        except Exception as error:  # noqa: BLE001  (as in main: said in its place)
            lines.append(f"{section.__name__.strip('_')}: failed: {type(error).__name__}: {error}")
    return lines


def _size(path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def build(argv: list[str]) -> int:
    """``python -m dipu build``: what the configured vendor compiles or generates on first use, built now (the
    import of this module did that) and listed with its time and place (Note [Build progress] in
    dipu/_native.py)."""
    argparse.ArgumentParser(prog="python -m dipu build", description=(
        "Build ahead of time what dipu compiles on first use for this torch and vendor (for an image or a CI "
        "cache); DIPU_CACHE_DIR says where (default ~/.cache/dipu).")).parse_args(argv)
    from dipu.kernels import cpp_wrappers

    _op_library()  # every layer of the op library is loaded, and the C++ wrappers where a C library asks
    if cpp_wrappers.enabled() and registration.cpp_kernels:
        cpp_wrappers.build()
    seen = set()
    for what, path, seconds in _native.BUILDS:
        if path in seen:
            continue
        seen.add(path)
        done = f"built in {seconds:.1f} s" if seconds is not None else "cached"
        entry = path if path.is_dir() else path.parent
        print(f"{what}: {done}, {_size(entry) / 2**20:.0f} MiB in {entry}")
    root = _native.cache_root()
    print(f"cache: {root} ({_size(root) / 2**20:.0f} MiB in all; DIPU_CACHE_DIR moves it), "
          f"for torch {torch.__version__} and vendor {vendor().name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["conformance"]:
        from dipu.conformance.cli import main as conformance

        return conformance(argv[1:], _certificate_environment())
    if argv[:1] == ["build"]:
        return build(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m dipu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--missing", action="store_true",
                        help="list the DIOPI functions the op library lacks and the ops waiting for each")
    parser.add_argument("--python-wrappers", action="store_true",
                        help="list the kernels that run their Python wrapper instead of a C++ one, and why")
    args = parser.parse_args(argv)
    sections = [_versions, _vendor, _devices, _op_library, _environment] + ([_missing] if args.missing else []) \
        + ([_python_wrappers] if args.python_wrappers else [])
    failed = False
    for section in sections:
        try:
            lines = section()
        except Exception as error:  # report it in its place and go on: see the module docstring
            failed = True
            lines = [f"{section.__name__.strip('_')}: failed: {type(error).__name__}: {error}"]
        print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
