"""The code keeps its architecture: layers import downward only (docs/architecture.md, "The layers").

Read from the sources with ``ast``, so the checks see imports inside functions too, which is where cycles used
to hide. The native core's files are checked in tests/test_native_build.py.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Repository folder -> the package name it is installed as (pyproject.toml, Note [Installed import names]).
PACKAGES = {"dipu": "dipu", "vendor": "dipu.vendors", "diopi_impl": "dipu.diopi_impl", "scripts/autogen": "dipugen"}


def _modules() -> dict[str, Path]:
    modules = {}
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = [package, *path.relative_to(REPO / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _known(name: str) -> str | None:
    """The project module ``name`` is, or is inside (``dipu.kernels.op.Op`` -> ``dipu.kernels.op``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, ast.stmt]]:
    """(imported project module, statement) for every import in ``module``, at any depth."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            # `from a import b` imports a.b when that is a module, else a
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found += [(target, node) for target in map(_known, names) if target is not None and target != module]
    return found


def test_the_python_modules_import_without_cycles():
    graph = {module: {target for target, _ in _imports(module)} for module in MODULES}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming a cycle
    # so that a reader finding nothing cannot pass: the layers the graph must show
    assert {"dipu._core", "dipu.kernels.support", "dipu.kernels.op"} <= graph["dipu.kernels.registry"]
    assert graph["dipu.kernels.op"] == set() and graph["dipu.ops.shape_rules"] == set()
    assert not any(target.startswith("dipu.") for target in graph["dipugen"] | graph["dipugen.spec"])


def test_only_the_generation_entry_imports_the_generator():
    """Note [Generation at run time]: the runtime reaches the generator through dipu/_generation.py alone."""
    importers = {module for module in MODULES if module.split(".")[0] == "dipu"
                 and any(target.split(".")[0] == "dipugen" for target, _ in _imports(module))}
    assert importers == {"dipu._generation"}


def test_no_module_below_the_package_root_uses_the_root():
    uses = []
    for module in MODULES:
        if module == "dipu":
            continue
        for target, node in _imports(module):
            if target == "dipu":  # `import dipu`, or `from dipu import <something that is not a module>`
                uses.append(f"{module}: {ast.unparse(node)}")
        tree = ast.parse(MODULES[module].read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "dipu"
                    and f"dipu.{node.attr}" not in MODULES):
                uses.append(f"{module}: {ast.unparse(node)}")
    assert uses == []


def test_the_import_reader_sees_imports_inside_functions():
    found = {target for target, _ in _imports("dipu.kernels.registry")}
    assert "dipu.kernels.op" in found and "dipu._core" in found
    inner = {target for target, node in _imports("dipu.device") if node.col_offset > 0}
    assert "dipu.compile.backend" in inner  # the package's __getattr__ imports it on demand

