"""dipu follows the installed torch: kernels generated for its schemas, entries that do not fit reported.

CI runs the whole suite on the oldest and the newest torch of the declared range (.ci/run); these
tests check the mechanism itself (Note [Generated code per torch version] in dipu/kernels/generated.py).
"""

import importlib.metadata
import re
from pathlib import Path

import pytest
import torch

import dipu
from dipu import _native
from dipu.kernels import generated as generated_kernels
from dipugen import REFERENCE_TORCH, schemas

INSTALLED = torch.__version__.split("+")[0]


def test_the_loaded_kernels_are_generated_for_the_installed_torch():
    generated = dipu._generated
    assert generated.TORCH_VERSION == INSTALLED
    # generated at first import, cached beside the native core (nothing generated is in the package)
    assert Path(generated.__file__).parent.parent == dipu._native.cache_root()


def test_the_declared_range_contains_the_installed_and_the_reference_torch():
    (requirement,) = [r for r in importlib.metadata.requires("dipu") if r.startswith("torch")]
    clauses = re.findall(r"(>=|<)\s*([\d.]+)", requirement)
    assert {op for op, _ in clauses} == {">=", "<"}, requirement

    def release(text):
        return tuple(int(p) for p in text.split("."))

    for version in (INSTALLED, REFERENCE_TORCH):
        for op, bound in clauses:
            assert (release(version) >= release(bound)) == (op == ">="), (version, requirement)


def test_renamed_argument_entries_fit_this_torch():
    """_cdist_backward's first argument is grad before torch 2.14 and grad_output after: the spec's two
    version-ranged entries must leave exactly one that fits, so the op is registered either way."""
    generated = dipu._generated
    assert "_cdist_backward" not in generated.UNMATCHED
    assert any(op.name == "_cdist_backward" for op in generated.OPS)
    x = torch.randn(5, 3, dtype=torch.float64)
    y = torch.randn(4, 3, dtype=torch.float64)
    grads = []
    for device in ("cpu", "dipu"):
        a = x.to(device).detach().requires_grad_()
        torch.cdist(a, y.to(device)).sum().backward()
        grads.append(a.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])


def test_another_torch_gets_its_own_kernels_and_a_report(tmp_path, monkeypatch):
    """As if torch 2.99 were installed, with the schemas of this one: the '>=2.14' entries apply and, on a
    torch older than 2.14, do not fit (grad_output is not an argument), so they are reported and left out."""
    monkeypatch.setenv("DIPU_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(schemas, "installed_torch", lambda: (2, 99, 0))
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    directory = generated_kernels._generated_dir()
    assert directory.parent == tmp_path and directory.name.startswith("generated-torch2.99.0-")
    init = (directory / "__init__.py").read_text()
    wrappers = (directory / "wrappers.py").read_text()
    assert 'TORCH_VERSION = "2.99.0"' in init
    fits = "grad_output" in str(torch.ops.aten._cdist_backward.default._schema)
    for op in ("_cdist_backward", "_pdist_backward"):
        assert (f"    '{op}': " in init) is not fits
        assert (f"def make_{op}(" in wrappers) is fits
    compile(wrappers, "wrappers.py", "exec")  # what dipu would import
    def files():  # what was generated; not the mark a load leaves (Note [Stale cache entries] in dipu/_native.py)
        return {p: p.stat().st_mtime_ns for p in directory.iterdir() if p.name != _native.USED_MARK}

    before = files()
    assert generated_kernels._generated_dir() == directory  # cached: generated once
    assert files() == before
    assert (directory / _native.USED_MARK).exists()  # and marked used


def test_import_names_the_entries_that_do_not_fit():
    """The warning text dipu prints at import when entries do not fit the installed torch."""
    package = type("Generated", (), {"UNMATCHED": {"relu": "diopi_functions.yaml:9: relu: ..."}})
    with pytest.warns(UserWarning, match=r"dipu: 1 op\(s\) of diopi_functions.yaml do not fit torch .* CPU "
                                         r"fallback: diopi_functions.yaml:9: relu: \.\.\."):
        generated_kernels._warn_unmatched(package)


def test_compiled_generated_code_is_cached(tmp_path, monkeypatch):
    """Note [Compiled generated code]: the generated module compiles once, whatever
    PYTHONDONTWRITEBYTECODE says."""
    monkeypatch.setenv("DIPU_CACHE_DIR", str(tmp_path))
    source = tmp_path / "module.py"
    source.write_text("VALUE = 41 + 1\n")
    loader = generated_kernels._CachedCodeLoader("dipu_test_module", str(source))
    assert eval(loader.get_code("dipu_test_module"), {}) is None
    (cached,) = (tmp_path / "code").iterdir()
    namespace = {}
    exec(loader.get_code("dipu_test_module"), namespace)
    assert namespace["VALUE"] == 42
    assert list((tmp_path / "code").iterdir()) == [cached]


def test_op_library_tables_leave_out_what_this_torch_lacks(monkeypatch):
    """Note [ATen ops a torch lacks]: a table function whose ATen op the installed torch lacks (torch 2.11 has
    no _foreach_clone) is left out with one warning worded as the spec's, instead of failing the import."""
    from dipu.diopi_impl.torch import _table

    monkeypatch.setattr(_table, "LACKING", {})
    assert _table.aten_overload("diopiForeachAdd", "_foreach_add", "List") is torch.ops.aten._foreach_add.List
    assert _table.aten_overload("diopiNoSuch", "_no_such_op") is None
    assert _table.aten_overload("diopiAddNoSuch", "add", "no_such_overload") is None
    assert _table.LACKING == {"diopiNoSuch": "aten::_no_such_op", "diopiAddNoSuch": "aten::add.no_such_overload"}
    with pytest.warns(UserWarning) as record:
        _table.warn_lacking()
    assert str(record[0].message) == (
        f"dipu: 2 function(s) of op library 'torch' apply ATen ops torch {torch.__version__} lacks and run "
        "through the CPU fallback: diopiAddNoSuch (aten::add.no_such_overload); diopiNoSuch (aten::_no_such_op)")


def test_every_function_this_torch_has_an_op_for_is_in_the_library():
    from dipu.diopi import FUNCTIONS
    from dipu.diopi_impl.torch import _table, library

    foreach = {name for name in FUNCTIONS if name.startswith("diopiForeach")}
    assert foreach - set(library.functions) == set(_table.LACKING) & foreach
    assert ("diopiForeachClone" in _table.LACKING) is not hasattr(torch.ops.aten, "_foreach_clone")
