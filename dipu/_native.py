"""Build (once) and load the native core, dipu/csrc, against the installed torch.

Note [Native core cache]
The extension is compiled at first import (Note [Compiling dipu's libraries]) and
cached under ``$DIPU_CACHE_DIR`` (default ``~/.cache/dipu``) in a directory
keyed by the torch version and build, the Python version and a hash of the
sources, so upgrading torch or editing csrc rebuilds it. An exclusive file
lock serializes concurrent first imports; the build goes to a private
directory that is renamed into place, so readers never see a half-written
library.

Note [Stale cache entries]
Every change of the sources (a dipu upgrade) makes new entries, 20 to 70 MB each,
and nothing else would ever delete the old ones. A load marks its entry used (it
touches the entry's ``.used`` file; the library's own modification time stays its
build's, which tells a rebuild); a build then removes the entries of the same kind,
torch build and Python (the same directory name but for its hash) that no process
has loaded for ``STALE_DAYS``. An entry another dipu installation still uses is
loaded, so kept; a process that had mapped a removed library keeps running, and a
later one rebuilds it. A cache dipu cannot write is left as it is.

Note [The native core in parts]
Each file of dipu/csrc includes ATen's headers, and most of them pybind11's and torch's Python headers too, which
cost a compiler 6 s (ATen's) to 15 s (with the Python ones) before it reads a line of dipu; compiled one by one,
the core's 21 files spent most of their time on them (about 8 minutes of CPU, 12 minutes on a loaded 2-core
machine). So the core is compiled in as many parts as the build runs compilers at once (``build_jobs``), each a
file that includes some of the sources: the headers are read once per part. The files that read Python's headers
(python.h) go to parts of their own, so that the others' parts skip those headers: on 2 cores, one part of each
kind, which are of about the same size. Those files are the module's bindings, the vendors' runtimes (Python, C
plug-in, CUDA), the report, the CPU fallback and the Python wrappers' entry points: no kernel's C++ path runs
them, so their parts compile at -O1 (``PYTHON_PARTS_OPTIMIZATION``), the others' at -O2. Measured on the 2-core
development machine (2026-12-02): the Python part took 24 s instead of 30 (the longer of the two, so the core is
built that much sooner); bench_op_latency's cases did not move beyond their noise (median change -1%), and with
DIPU_CPP_WRAPPERS=0, where every op takes the Python wrappers' entry points, they cost 3% more (median of the
cases). The sources are written to allow the parts: no two of them define the same name, even in an anonymous
namespace, which tests/test_native_build.py checks by compiling them as one part; and no file
defines a macro for the headers it includes, which a part has read already by then. The core is compiled with
NDEBUG, as torch's release libraries are, so that the inline code of torch's headers checks what those libraries
expect (RecordFunction::inputs() checks a flag only a debug build of torch sets).

Note [Compiling dipu's libraries]
Every C++ library dipu builds (the native core, the C++ wrappers, the C++ op library) is compiled by
``compile_library``: its translation units all at once (a library is split into about as many as the build runs
compilers, ``build_jobs``), each with flags of its own after the common ones (the core's parts differ in
optimization), then linked. The flags against torch are ``torch_flags``, those torch.utils.cpp_extension gives an
extension without CUDA (the torch versions dipu supports add no pybind11 ABI flags), so no library needs ninja or
imports torch.utils.cpp_extension. A failed compile raises with the command and the compiler's last 4,000
characters.

Note [Torch's headers, op by op]
<ATen/ATen.h> declares every one of ATen's 2,000-odd ops (ATen/Functions.h): 5.8 s of a compiler's time on the 2-core
development machine before it reads a line of dipu, in every translation unit. dipu's sources include
<ATen/core/Tensor.h> (the Tensor class and its methods) and, for each at:: function they call, the op's own
<ATen/ops/<op>.h> (the generated wrappers, <op>_ops.h or <op>_meta_dispatch.h of the meta kernel they call); every
library is compiled with AT_PER_OPERATOR_HEADERS, torch's own switch that makes its headers do the same (without it,
<ATen/ExpandUtils.h> alone includes every op). A missing header is a compile error naming the function, never a
silent change. Only autocast.cpp still reads every op, through <ATen/autocast_mode.h>, whose op lists name them.
Measured on that machine (2026-12-03, the first import with a cold cache, one run each): the C++ op library's unit
took 12.0 s of CPU instead of 14.6, the wrappers' parts 17.1 and 17.8 instead of 19.4 and 20.0 and their support
part 14.4 instead of 16.4; the whole import 56.3 s and 107.5 s of CPU instead of 60.6 and 115.6.

Note [Builds side by side]
A cold cache builds three libraries at the first import: the native core, the C++ op library of the default vendor
(diopi_impl/torch_cpp) and the C++ wrappers its functions are installed with. The core comes first (everything else
loads into it) and keeps every core busy with its parts; the op library is one file (its generated and hand-written
halves read torch's headers once), which would leave cores idle, so the wrappers start compiling in a thread when
the op library does (cpp_wrappers.build_in_background, from cpp_build.twin), and the two share the machine. The
thread only compiles: their text is generated first, in the importing thread. A thread that imported a module while
``import torch`` (which loads dipu) is still running would wait for that import to finish, and the import for the
thread. The generated C++ of both (one function per kernel, each a few calls) is compiled at ``-Og``
(``GENERATED_OPTIMIZATION``): ``-O1`` took a third less time than ``-O2``, and ``-Og`` a quarter less than ``-O1``
(the wrappers' generated parts 15.5 and 16.4 s of CPU instead of 18.9 and 21.6, the op library 9.5 instead of 12.2;
2026-12-03) for the same speed: bench_op_latency's 46 cases, 3 runs of each build alternating, took 0.99 of -O1's time
(median of the cases; the 4-element add 1.41 us against 1.37, the widest change within 10%).
Measured with benchmarks/bench_import.py --cold on the 2-core development machine (2026-12-03, alternating with the
code of the day before, median of 3 each): the first import took 51 s and 95 s of CPU (the core 23 s, then the op
library 17 s beside the wrappers 25 s), against 65 s and 124 s, with torch's headers op by op (Note [Torch's headers,
op by op]), the wrappers without Python's headers (Note [The C++ wrappers' way to Python]) and -Og; on 2026-12-02,
79 s and 144 s before that day's changes; 125 s and 219 s before that, built one after the other at -O2 with
torch's boxed adapters.

Note [Build progress]
Each part dipu compiles or generates on a cold cache (the native core, the generated op kernels, the C++ op
library, the C++ wrappers, a C library) says on stderr when it starts and, when it is done, how long it took,
so that a first ``import torch`` that takes a while says why. ``BUILDS`` keeps what the process found or built;
``python -m dipu build`` builds ahead of time what the configured vendor uses (for an image or a CI cache) and
lists each part, its time and its place in the cache.

Note [Sanitizer builds]
``DIPU_SANITIZE=address`` or ``DIPU_SANITIZE=thread`` builds the native core with AddressSanitizer
or ThreadSanitizer (``-fsanitize=...``, debug info, ``-O1``, frame pointers) to find memory errors
and data races in it (the allocator is called from every thread that frees a tensor). The
sanitizer is part of the cache key, so a sanitized core sits beside the normal one and never
replaces it. Python and torch are not sanitized, so the sanitizer's runtime must be loaded
first: ``LD_PRELOAD`` names it (and libstdc++, which the runtime's interceptors resolve); see
docs/vendor-guide.md, "Sanitizer builds". Loading a sanitized core without its runtime fails here with that
command rather than with the loader's message.
What their first runs found: AddressSanitizer, a heap-use-after-free in the allocator's free()
under threads (Note [Block ownership] in dipu/csrc/allocator.cpp); ThreadSanitizer, only glibc's
release of an exited thread's dynamic TLS (suppressed in tests/tsan.supp). Under ASan, torch's own
C++ unwinder (memory history with stacks="all") can fault, so sanitized runs record Python stacks.

Note [The C++ runtime of dipu's libraries]
A compiler that has libstdc++'s static archive but not the link to its shared library (Ubuntu's GCC 13.3
on the NVIDIA H100 machines we test on) links libstdc++ statically into every library it builds, without
a word. dipu_C.so then carried, and exported, a second copy of the C++ runtime beside the one torch runs
on: every ``c10::str`` of a number in the core crashed (its stream met the process's locale), and
cuDNN's calls into the C++ runtime bound to dipu's copy and crashed at the first convolution. So every
C++ library dipu builds (the native core, the C++ wrappers, the torch op library in C++) links the
libstdc++ the process already runs, the one torch loaded (read from /proc/self/maps), named before the
compiler's own ``-lstdc++`` so that no member of the archive is pulled in; and ``--exclude-libs,ALL``
keeps whatever a static archive does contribute out of the library's exported symbols, where it would
interpose on other libraries. tests/test_native_build.py recreates that compiler with -static-libstdc++.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch

CSRC = Path(__file__).parent / "csrc"
#: dipu's public C headers: dipu/custom_runtime.h (runtime plug-ins) and diopi/ (op libraries).
INCLUDE = Path(__file__).parent / "include"
NAME = "dipu_C"


def _sources() -> list[Path]:
    # The generated prototypes (diopi/functions.h) are for op libraries; the core does not include
    # them, so regenerating them does not rebuild it.
    headers = [p for p in sorted(INCLUDE.rglob("*.h")) if p.name != "functions.h"]
    return sorted(p for p in CSRC.iterdir() if p.suffix in (".cpp", ".h")) + headers


#: DIPU_SANITIZE value -> (compiler and linker flag, runtime library, its init symbol, cache key tag).
SANITIZERS = {
    "address": ("-fsanitize=address", "libasan.so", "__asan_init", "asan"),
    "thread": ("-fsanitize=thread", "libtsan.so", "__tsan_init", "tsan"),
}


def sanitizer() -> str | None:
    """The sanitizer named by ``DIPU_SANITIZE`` (Note [Sanitizer builds]); None when unset or empty."""
    name = os.environ.get("DIPU_SANITIZE", "").strip().lower()
    if not name:
        return None
    if name not in SANITIZERS:
        raise ValueError(f"DIPU_SANITIZE={name!r} names no sanitizer; use one of "
                         f"{', '.join(SANITIZERS)} (or leave it unset for the normal build)")
    return name


def cache_dir() -> Path:
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(str(path.relative_to(CSRC.parent)).encode())
        digest.update(path.read_bytes())
    digest.update(" ".join(cxx_runtime_flags()).encode())  # a core linked otherwise is rebuilt
    digest.update(f"{PYTHON_PARTS_OPTIMIZATION} {CORE_OPTIMIZATION}".encode())  # or compiled otherwise
    sanitize = sanitizer()
    key = "-".join([
        f"torch{torch.__version__}",
        (torch.version.git_version or "nogit")[:10],
        f"py{sys.version_info.major}{sys.version_info.minor}",
        digest.hexdigest()[:12],
    ] + ([SANITIZERS[sanitize][3]] if sanitize else []))
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


def cxx_runtime_flags() -> list[str]:
    """Linker flags of every C++ library dipu builds (Note [The C++ runtime of dipu's libraries])."""
    return ["-Wl,--exclude-libs,ALL", *_loaded_libstdcxx()]  # a copy: callers may extend it


@functools.cache
def _loaded_libstdcxx() -> list[str]:
    """The path of the libstdc++ this process runs on, as a one-element list (empty where none is mapped)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if Path(path).name.startswith("libstdc++.so") and os.path.isfile(path):
                    return [path]
    except OSError:
        pass
    return []


#: Per language: the variable that names its compiler, the default, and the packages that install one.
_COMPILERS = {"C": ("CC", "cc", "gcc", "gcc", "gcc or clang"),
              "C++17": ("CXX", "c++", "g++", "gcc-c++", "g++ or clang++")}


def compiler(language: str, building: str) -> str:
    """The compiler of ``language`` ("C" or "C++17") that ``building`` (what is being built) needs: $CC or $CXX,
    or an error saying what to install. The one rule for the native core and the C and C++ op libraries."""
    variable, default, debian, fedora, names = _COMPILERS[language]
    name = os.environ.get(variable, default)
    if shutil.which(name) is None:
        raise RuntimeError(
            f"dipu: {building} needs a {language} compiler, and '{name}' was not found. Install one "
            f"(Debian/Ubuntu: apt install {debian}; Fedora: dnf install {fedora}; macOS: xcode-select --install; "
            f"{names}) or point {variable} at it."
        )
    return name


def kineto_includes() -> list[Path]:
    """Kineto's plugin headers (Note [Device timeline]), where the torch wheel ships them."""
    return [p for p in [Path(torch.__file__).parent / "include" / "kineto"] if p.is_dir()]


def core_defines() -> list[str]:
    """The macros every part of the core is compiled with: NDEBUG (Note [The native core in parts]) and, where
    Kineto's headers are, USE_KINETO, as torch's libraries are built: one definition for the whole core, not one
    file's #define reaching the files after it in a part."""
    return ["-DNDEBUG", *(["-DUSE_KINETO"] if kineto_includes() else [])]


#: Note [Builds side by side]: the optimization level of the generated C++ (the wrappers, the C++ op library).
GENERATED_OPTIMIZATION = "-Og"


#: Note [The native core in parts]: the optimization of the parts that read Python's headers, and of the others.
PYTHON_PARTS_OPTIMIZATION, CORE_OPTIMIZATION = "-O1", "-O2"


def _build(target: Path) -> None:
    cflags, ldflags = torch_flags(NAME)
    cflags += ["-fvisibility=hidden", *core_defines(), *(f"-I{p}" for p in kineto_includes())]
    sanitize = sanitizer()
    if sanitize:
        flag = SANITIZERS[sanitize][0]
        cflags += ["-g", "-fno-omit-frame-pointer", flag]
        ldflags = [flag, *ldflags]
    work = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        # a sanitized core is all -O1 (Note [Sanitizer builds])
        units = [(unit, ["-O1" if sanitize else PYTHON_PARTS_OPTIMIZATION if python else CORE_OPTIMIZATION])
                 for unit, python in _in_parts(work, build_jobs())]
        compile_library(work / f"{NAME}.so", units, cflags, ldflags, "building the native core")
        os.replace(work / f"{NAME}.so", target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def torch_flags(python_module: str | None = None) -> tuple[list[str], list[str]]:
    """Note [Compiling dipu's libraries]: the compiler's and the linker's flags of a library built against the
    installed torch (its headers, its libraries, the C++ runtime it runs on), as torch.utils.cpp_extension gives them
    to an extension without CUDA; with ``python_module``, the library is that Python extension module (Python's
    headers, torch's Python library). Where torch and Python are installed is only in the -I, -isystem and -L
    flags, which cache keys leave out."""
    root = Path(torch.__file__).parent
    includes = [root / "include", root / "include" / "torch" / "csrc" / "api" / "include"]
    # AT_PER_OPERATOR_HEADERS: torch's own headers include each op's header they need, not every op's (Note [Torch's
    # headers, op by op])
    cflags = ["-fPIC", "-std=c++20", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
              "-DAT_PER_OPERATOR_HEADERS"]
    libraries = ["-lc10", "-ltorch_cpu"]
    if python_module is not None:
        includes.append(Path(sysconfig.get_path("include", scheme="posix_prefix")))
        cflags += [f"-DTORCH_EXTENSION_NAME={python_module}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
        libraries += ["-ltorch", "-ltorch_python"]
    cflags += [f"-isystem{path}" for path in includes]
    return cflags, ["-shared", f"-L{root / 'lib'}", *libraries, *cxx_runtime_flags()]


def compile_library(target: Path, units: Sequence[tuple[Path, Sequence[str]]], cflags: Sequence[str],
                    ldflags: Sequence[str], building: str) -> None:
    """Note [Compiling dipu's libraries]: compile each unit (a source, and flags of its own after ``cflags``) beside
    the others, all at once, into an object in the target's directory, and link the objects into ``target`` with
    ``ldflags``; a failure raises, naming ``building`` (what is being built) with the compiler's last words. The
    wrappers' three units on two cores, beside the op library's one: all four at once took 38 s where two at a time
    took 44 (the support part waited alone for a free core)."""
    cxx = compiler("C++17", building)

    def run(command: list[str]) -> None:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"dipu: {building} failed: {' '.join(command)}\n{result.stderr[-4000:]}")

    objects = [target.parent / f"{source.stem}.o" for source, _ in units]
    with concurrent.futures.ThreadPoolExecutor(len(units), thread_name_prefix="dipu-compile") as pool:
        list(pool.map(run, ([cxx, *cflags, *flags, "-c", str(source), "-o", str(obj)]
                            for (source, flags), obj in zip(units, objects))))
    run([cxx, *map(str, objects), *ldflags, "-o", str(target)])


def build_jobs() -> int:
    """How many compilers a build runs at once: one per core, at most 16, or $MAX_JOBS (torch.utils.cpp_extension's
    variable)."""
    jobs = os.environ.get("MAX_JOBS", "").strip()
    if jobs.isdigit() and int(jobs) > 0:
        return int(jobs)
    return max(1, min(16, len(os.sched_getaffinity(0))))


def _reads_python(path: Path, seen: frozenset[Path] = frozenset()) -> bool:
    """Whether a source of the core includes python.h (pybind11's and torch's Python headers), itself or through
    the core's own headers."""
    if path.name == "python.h":
        return True
    for name in re.findall(r'^#include "([^"]+)"', path.read_text(), re.MULTILINE):
        included = (path.parent / name).resolve()
        if included not in seen and included.is_file() and _reads_python(included, seen | {included}):
            return True
    return False


def _in_parts(directory: Path, parts: int) -> list[tuple[Path, bool]]:
    """Note [The native core in parts]: files in `directory` that include the core's sources, `parts` of them (fewer
    where the core has fewer files), of about equal size; the files that read Python's headers apart from those that
    do not, each kind in a share of the parts as large as its share of the sources; each with whether it holds only
    files that read Python's headers."""
    files = sorted((p for p in _sources() if p.suffix == ".cpp"), key=lambda p: (-p.stat().st_size, p.name))
    python = {p for p in files if _reads_python(p)}
    kinds = [kind for kind in ([p for p in files if p in python], [p for p in files if p not in python]) if kind]
    if parts < len(kinds):
        kinds = [files]
    size = [sum(p.stat().st_size for p in kind) for kind in kinds]
    shares = [max(1, min(len(kind), round(parts * s / sum(size)))) for kind, s in zip(kinds, size)]
    while sum(shares) > parts:  # rounding up gave one part too many: the kind with the most gives one up
        shares[shares.index(max(shares))] -= 1
    groups: list[list[Path]] = []
    for kind, share in zip(kinds, shares):  # (the Python kind first)
        kind_groups: list[list[Path]] = [[] for _ in range(share)]
        sizes = [0] * share
        for path in kind:  # the largest first, each to the smallest part so far
            smallest = sizes.index(min(sizes))
            kind_groups[smallest].append(path)
            sizes[smallest] += path.stat().st_size
        groups += kind_groups
    units = []
    for number, group in enumerate(groups, 1):
        units.append((directory / f"{NAME}_{number}.cpp", all(path in python for path in group)))
        units[-1][0].write_text("".join(f'#include "{path}"\n' for path in sorted(group)))
    return units


#: Note [Stale cache entries]: the days after which an entry no process loaded is removed, and the file whose
#: modification time says when one last did.
STALE_DAYS = 14
USED_MARK = ".used"
_ENTRY = re.compile(r"^(.*)-[0-9a-f]{12}(-[a-z]+)?$")  # <kind and torch build>-<hash>[-<sanitizer>]


#: What this process found in the cache or built, in order (Note [Build progress]): (what, where, the seconds
#: spent building it or None where it was cached).
BUILDS: list[tuple[str, Path, float | None]] = []


def ensure_built(target: Path, build=None, what: str | None = None) -> Path:
    """Build `target` unless it exists, saying so (Note [Build progress]: `what` is built, its file name if not
    given); concurrent callers build it once. A build removes stale entries of its kind (Note [Stale cache
    entries]); a load marks its entry used."""
    entry = target if _ENTRY.match(target.name) else target.parent
    what = what or target.name
    seconds = None
    if not target.exists():
        with _locked(target.parent / ".lock"):
            if not target.exists():
                _say(f"dipu: building {what} for torch {torch.__version__} (once per torch and dipu version)...")
                start = time.perf_counter()
                (build or _build)(target)
                seconds = time.perf_counter() - start
                _say(f"dipu: built {what} in {seconds:.1f} s")
                _remove_stale_siblings(entry)
    elif entry.is_dir():
        with contextlib.suppress(OSError):
            (entry / USED_MARK).touch()
    BUILDS.append((what, target, seconds))
    return target


def _say(line: str) -> None:
    """A progress line on stderr, written whole (two builds side by side print from two threads)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _remove_stale_siblings(entry: Path) -> None:
    match = _ENTRY.match(entry.name)
    if match is None:
        return
    deadline = time.time() - STALE_DAYS * 86400
    for sibling in entry.parent.iterdir():
        other = _ENTRY.match(sibling.name)
        if sibling == entry or other is None or other.groups() != match.groups() or not sibling.is_dir():
            continue
        with contextlib.suppress(OSError):  # an entry is the directory, or a library in it
            if max(f.stat().st_mtime for f in (sibling, *sibling.iterdir())) < deadline:
                shutil.rmtree(sibling)


def _check_sanitizer_runtime() -> None:
    """A sanitized core needs its runtime loaded before Python (Note [Sanitizer builds])."""
    name = sanitizer()
    if name is None:
        return
    _, library, init_symbol, _ = SANITIZERS[name]
    import ctypes

    if not hasattr(ctypes.CDLL(None), init_symbol):
        cxx = os.environ.get("CXX", "c++")
        raise RuntimeError(
            f"dipu: DIPU_SANITIZE={name} loads a native core built with -fsanitize={name}, whose "
            f"runtime must be loaded before Python: run with LD_PRELOAD=\"$({cxx} "
            f"-print-file-name={library}) $({cxx} -print-file-name=libstdc++.so)\" "
            "(docs/vendor-guide.md: Sanitizer builds)"
        )


def load():
    """Return the native module ``dipu._C``, building it first if needed."""
    _check_sanitizer_runtime()
    target = ensure_built(cache_dir() / f"{NAME}.so", what="the native core")
    spec = importlib.util.spec_from_file_location(NAME, target)
    if spec is None or spec.loader is None:
        raise ImportError(f"dipu: cannot load the native core {target}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
