"""The native core's build cache: keyed by torch and sources, safe under concurrency."""

import graphlib
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch

from dipu import _native


def test_cache_key_follows_torch_version_and_sources(monkeypatch, tmp_path):
    monkeypatch.setenv("DIPU_CACHE_DIR", str(tmp_path))
    first = _native.cache_dir()
    assert first.parent == tmp_path and torch.__version__ in first.name
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    assert _native.cache_dir() != first


def test_concurrent_first_builds_run_once_and_never_expose_a_partial_file(tmp_path):
    target = tmp_path / "key" / "core.so"
    code = textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from dipu import _native

        def build(target):
            with open({str(tmp_path / "builds.log")!r}, "a") as log:
                log.write(f"{{os.getpid()}}\\n")
            partial = target.with_suffix(".tmp")
            partial.write_text("half")
            time.sleep(0.5)
            partial.write_text("complete")
            os.replace(partial, target)

        path = _native.ensure_built(Path({str(target)!r}), build, "the test part")
        print(path.read_text())
    """)
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, **env}) for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert [out.strip() for out, _ in results] == ["complete"] * 4
    assert len((tmp_path / "builds.log").read_text().split()) == 1
    # Note [Build progress]: the process that built says what and how long; the others say nothing of it
    progress = [line for _, err in results for line in err.splitlines() if "the test part" in line]
    assert len(progress) == 2, progress
    assert re.fullmatch(r"dipu: building the test part for torch \S+ \(once per torch and dipu version\)\.\.\.",
                        progress[0]), progress
    assert re.fullmatch(r"dipu: built the test part in \d+\.\d s", progress[1]), progress


def test_python_m_dipu_build_lists_each_part_and_the_cache():
    """Note [Build progress]: what the vendor uses is built (cached here: the suite has built it), each part listed
    with its place in the cache."""
    proc = subprocess.run([sys.executable, "-m", "dipu", "build"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    parts = [line.split(":")[0] for line in lines[:-1]]
    assert parts[0] == "the native core" and "the op kernels (generated Python)" in parts, lines
    for line in lines[:-1]:
        assert re.search(r": (cached|built in \d+\.\d s), \d+ MiB in ", line), line
        assert Path(line.rsplit(" MiB in ", 1)[1]).is_dir()
    assert lines[-1].startswith(f"cache: {_native.cache_root()} (") and "DIPU_CACHE_DIR" in lines[-1]
    bad = subprocess.run([sys.executable, "-m", "dipu", "build", "--nonsense"], capture_output=True, text=True,
                         timeout=600)
    assert bad.returncode == 2 and "unrecognized arguments: --nonsense" in bad.stderr


def test_the_cpp_library_cache_key_does_not_depend_on_where_torch_and_dipu_are(tmp_path, monkeypatch):
    """Note [C++ op library cache]: one torch build in two virtual environments, or dipu's sources in two places,
    share one library; a change of the sources' text does not."""
    from dipu.diopi import cpp_build

    here = Path(__file__).resolve().parents[1] / "diopi_impl" / "torch_cpp"
    copies = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for path in here.iterdir():
            if path.suffix in (".cpp", ".h"):
                (tmp_path / name / path.name).write_bytes(path.read_bytes())
        copies.append(sorted((tmp_path / name).glob("*.cpp")))
    pairs = [("diopiAdd", "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)", ())]
    first = cpp_build.library_file("torch_cpp", pairs, copies[0])
    assert cpp_build.library_file("torch_cpp", pairs, copies[1]) == first
    monkeypatch.setattr(torch, "__file__", str(tmp_path / "elsewhere" / "torch" / "__init__.py"))
    assert cpp_build.library_file("torch_cpp", pairs, copies[0]) == first
    copies[1][0].write_text(copies[1][0].read_text() + "\n// changed\n")
    assert cpp_build.library_file("torch_cpp", pairs, copies[1]) != first


# ---- the native core's file graph: no include cycle, no two files using each other -------------
CSRC = _native.CSRC


def _code(path) -> str:
    """The C++ of `path` without comments and string literals, which name things they do not use."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def include_graph() -> dict[str, set[str]]:
    """File -> the dipu/csrc files it includes with #include "..."."""
    return {path.name: set(re.findall(r'^\s*#\s*include\s+"([^"]+)"', path.read_text(), re.M))
            for path in sorted(CSRC.iterdir()) if path.suffix in (".cpp", ".h")}


def use_graph() -> dict[str, set[str]]:
    """.cpp file -> the .cpp files defining functions or globals (declared in a header) it uses."""
    headers = "\n".join(_code(path) for path in sorted(CSRC.glob("*.h")))
    declared = set(re.findall(r"^\s*(?:extern\s+)?[\w:<>,*& ]+?[\s*&](\w+)\s*\([^;{}]*\)\s*(?:const\s*|noexcept\s*)*;",
                              headers, re.M))
    declared |= set(re.findall(r"^\s*extern\s+[\w:<>, ]+\s(\w+)\s*;", headers, re.M))
    sources = {path.name: _code(path) for path in sorted(CSRC.glob("*.cpp"))}
    # A definition starts a line at namespace scope (no indentation): `type name(...) {` or `type name{...};`.
    defined_in = {name: file for file, code in sources.items() for name in declared
                  if re.search(rf"^(?!return\b)\w[^;\n(]*[\s*&]{name}\s*[({{]", code, re.M)}
    return {file: {defined_in[name] for name in defined_in
                   if defined_in[name] != file and re.search(rf"\b{name}\b", code)}
            for file, code in sources.items()}


def test_a_build_removes_the_entries_of_its_kind_nothing_loaded_for_weeks(tmp_path):
    """Note [Stale cache entries]: old builds of the same kind, torch and Python go; a recently loaded one, other
    kinds, other torches and the sanitized builds stay, and a load marks its entry used."""
    old = time.time() - (_native.STALE_DAYS + 1) * 86400

    def entry(name: str, age: float | None = old) -> Path:
        (tmp_path / name).mkdir()
        library = tmp_path / name / "lib.so"
        library.write_bytes(b"x")
        if age is not None:
            os.utime(library, (age, age))
            os.utime(tmp_path / name, (age, age))
        return library

    stale = entry("torch_cpp-torch2.13.0+cpu-cf30153c4c-py311-aaaaaaaaaaaa")
    recent = entry("torch_cpp-torch2.13.0+cpu-cf30153c4c-py311-bbbbbbbbbbbb", age=None)
    loaded = entry("torch_cpp-torch2.13.0+cpu-cf30153c4c-py311-cccccccccccc")
    kept = [entry("torch_cpp-torch2.11.0+cu130-70d99e998b-py311-dddddddddddd"),  # another torch
            entry("torch2.13.0+cpu-cf30153c4c-py311-eeeeeeeeeeee"),  # another kind: the core
            entry("torch_cpp-torch2.13.0+cpu-cf30153c4c-py311-ffffffffffff-asan")]  # a sanitized build
    _native.ensure_built(loaded)  # found: marked used, nothing built or removed
    assert stale.exists() and loaded.stat().st_mtime == old  # the library itself is untouched
    built = tmp_path / "torch_cpp-torch2.13.0+cpu-cf30153c4c-py311-123456789abc" / "lib.so"
    built.parent.mkdir()
    _native.ensure_built(built, lambda target: target.write_bytes(b"new"))
    assert built.read_bytes() == b"new"
    assert not stale.parent.exists()
    assert recent.exists() and loaded.exists() and all(k.exists() for k in kept)


def test_the_native_core_compiles_as_one_part(tmp_path):
    """Note [The native core in parts]: the sources compile together, so every split of them into parts does (no
    name is defined in two files, even in an anonymous namespace)."""
    ((unit, python),) = _native._in_parts(tmp_path, 1)
    assert not python  # one part holds the hot files as well, so it is compiled at the core's optimization
    assert len(unit.read_text().splitlines()) == len(list(CSRC.glob("*.cpp")))
    cflags, _ = _native.torch_flags(_native.NAME)
    flags = [*cflags, "-fsyntax-only", *_native.core_defines(), *(f"-I{p}" for p in _native.kineto_includes())]
    proc = subprocess.run([_native.compiler("C++17", "the test"), *flags, str(unit)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_the_parts_that_read_python_s_headers_are_compiled_apart_and_at_their_own_optimization(tmp_path):
    """Note [The native core in parts]: on two cores, one part holds the files that read Python's headers, the other
    the rest (the hot paths), and only the first is compiled at -O1."""
    units = _native._in_parts(tmp_path, 2)
    assert [python for _, python in units] == [True, False]
    python_part = units[0][0].read_text()
    for name in ("module.cpp", "vendor_python.cpp", "cpu_fallback.cpp"):
        assert f"/{name}\"" in python_part
    for name in ("allocator.cpp", "guard.cpp", "copies.cpp"):
        assert f"/{name}\"" in units[1][0].read_text()
    assert (_native.PYTHON_PARTS_OPTIMIZATION, _native.CORE_OPTIMIZATION) == ("-O1", "-O2")


def test_the_native_core_files_form_no_cycle():
    includes, uses = include_graph(), use_graph()
    for graph in (includes, uses):
        graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle
    # The layering the graphs must show (so that a scan finding nothing cannot pass): the vendor
    # bridge at the bottom, the allocator and the device guard above the streams, the module on top.
    assert includes["vendor_bridge.cpp"] == {"vendor_bridge.h"} and includes["core.h"] == {"vendor_bridge.h"}
    assert uses["vendor_bridge.cpp"] == set()
    assert {"vendor_bridge.cpp", "streams.cpp"} <= uses["allocator.cpp"]
    assert {"vendor_bridge.cpp", "streams.cpp", "allocator.cpp"} <= uses["guard.cpp"]
    assert {"vendor_bridge.cpp", "allocator.cpp", "streams.cpp", "hooks.cpp", "cpu_fallback.cpp"} <= uses["module.cpp"]
    assert not any("module.cpp" in used for used in uses.values())


#: The native core's runtime layer (Note [The core's layers] in dipu/csrc/python.h).
RUNTIME_LAYER = ("vendor_bridge.h", "vendor_bridge.cpp", "core.h", "allocator.cpp", "streams.cpp", "guard.cpp",
                 "hooks.cpp", "diopi_rt.h", "diopi_rt.cpp", "overlap.h", "profiler.cpp")


def test_the_native_core_s_runtime_layer_knows_nothing_of_python():
    """Its files include no pybind, no Python header and not the bindings' python.h, and use neither py:: nor
    the CPython API: the bindings call down into it, never the reverse."""
    for name in RUNTIME_LAYER:
        includes = re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', (CSRC / name).read_text(), re.M)
        assert includes and not [i for i in includes if "pybind" in i or "python" in i.lower()], (name, includes)
        assert not re.search(r"\bpy::|\bpybind11\b|\bPy[A-Z]\w*\(", _code(CSRC / name)), name
    assert "python.h" in include_graph()["module.cpp"]  # so that a scan finding nothing cannot pass


def _needed(library) -> list[str]:
    """The shared libraries ``library`` names (its ELF dynamic section's NEEDED entries)."""
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)


def _exported_cxx_runtime(library) -> list[str]:
    """The C++ runtime's own functions ``library`` exports (a locale facet, stream insertion)."""
    symbols = subprocess.run(["nm", "-D", "--defined-only", "-C", str(library)], capture_output=True, text=True,
                             check=True).stdout
    return [line for line in symbols.splitlines() if "codecvt" in line or "basic_ostream" in line]


def test_libraries_link_the_processes_cxx_runtime_even_where_the_compiler_would_link_it_statically(tmp_path):
    """Note [The C++ runtime of dipu's libraries]: the GPU machines' compiler linked libstdc++ statically into
    dipu's libraries, whose copy then crashed the first number formatted and cuDNN's first convolution.
    -static-libstdc++ recreates that compiler here; dipu's link flags must still give a library that uses the
    process's libstdc++ and exports none of the C++ runtime."""
    source = tmp_path / "number.cpp"
    source.write_text('#include <sstream>\n#include <string>\n'
                      'std::string number(long x) { std::ostringstream s; s << x; return s.str(); }\n')
    plain, fixed = tmp_path / "plain.so", tmp_path / "fixed.so"
    compile_ = ["c++", "-shared", "-fPIC", "-O2", str(source), "-static-libstdc++"]
    subprocess.run([*compile_, "-o", str(plain)], check=True)
    subprocess.run([*compile_, *_native.cxx_runtime_flags(), "-o", str(fixed)], check=True)
    assert not any(n.startswith("libstdc++") for n in _needed(plain)) and _exported_cxx_runtime(plain)  # the bug
    assert any(n.startswith("libstdc++") for n in _needed(fixed)) and not _exported_cxx_runtime(fixed)


def test_the_built_libraries_run_on_the_processes_cxx_runtime():
    """Every library dipu built and this process loaded: the core, the C++ wrappers, the torch op library in C++."""
    (torch.ones(2, device="dipu") + 1).cpu()  # the op library (by default the C++ one) and its wrappers load
    root = str(_native.cache_root().resolve())
    cxx = ("dipu_C.so", "dipu_cwrap.so", "libtorch_cpp.so")  # (a C op library the suite built needs no libstdc++)
    with open("/proc/self/maps") as maps:
        loaded = {line.split()[-1] for line in maps if line.rstrip().endswith(cxx) and root in line}
    assert "dipu_C.so" in {p.rsplit("/", 1)[-1] for p in loaded}, loaded
    for library in loaded:
        assert any(n.startswith("libstdc++") for n in _needed(library)), library
        assert not _exported_cxx_runtime(library), library


def test_each_generated_product_is_keyed_by_its_own_emitter_and_not_the_others():
    """A change to one product's emitter or template rebuilds that product only (``_generation.PRODUCTS``); what
    every emitter reads (the spec, the models, the proto, the C header's parameters) is in every key."""
    from dipu import _generation

    root = _generation.generator_file()
    keys = {product: set(_generation.inputs(product)) for product in _generation.PRODUCTS}
    for product, files in _generation.PRODUCTS.items():
        for name in files:
            assert (root / name).is_file(), name
            assert {p for p, key in keys.items() if root / name in key} == {product}, name
    for shared in ("diopi_functions.yaml", "model.py", "schemas.py", "proto.py", "dest/c_header.py"):
        assert all(root / shared in key for key in keys.values()), shared
    assert all(set(_generation.PROTO_FILES) <= key for key in keys.values())
