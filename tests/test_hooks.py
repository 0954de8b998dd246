"""Debug hooks (docs/reference.md, "Environment variables"), each observed from a fresh interpreter's output."""

import re
import textwrap

import pytest

from conftest import run_python

HOOK_VARS = ("DIPU_DUMP_OP_ARGS", "DIPU_FORCE_FALLBACK_OPS_LIST", "DIPU_AUTOCOMPARE_OPS_LIST",
             "DIPU_CHECK_TENSOR_DEVICE", "DIPU_SYNC_EXEC_MODE", "DIPU_DIOPI_IMPL", "DIPU_AUTOCOMPARE_STRICT")
# Autocompare's tests: tests/test_autocompare.py.


@pytest.fixture(autouse=True)
def clean_hook_environment(monkeypatch):
    for var in HOOK_VARS:
        monkeypatch.delenv(var, raising=False)


def run(code: str, check: bool = True, **kwargs):
    return run_python(code, check=check, **kwargs)


def test_dump_levels_follow_the_variable_at_run_time():
    out = run("""
        import os, torch, dipu
        a = torch.arange(12.).reshape(3, 4).to("dipu")
        b = torch.ones(3, 4, device="dipu")
        o = torch.empty(3, 4, device="dipu")
        for level in ("1", "2", "3", "0"):
            os.environ["DIPU_DUMP_OP_ARGS"] = level
            print(f"== level {level}")
            torch.add(a, b, alpha=2, out=o)
    """).stdout
    sections = dict(re.findall(r"== level (\d)\n(.*?)(?=== level|\Z)", out, re.S))
    assert sections["1"] == "[dipu_add_out]:add.out  diopiAdd\n"
    level2 = sections["2"].splitlines()
    assert level2[0] == "[dipu_add_out]:add.out  diopiAdd"
    assert re.fullmatch(r"\tadd\.out: self:numel:12, sizes:\[3, 4\], stride:\[4, 1\], is_view:0, "
                        r"dtype=float32, device=dipu:0, data_ptr:0x[0-9a-f]+", level2[1])
    assert level2[3] == "\tadd.out: alpha:2"
    assert level2[4].startswith("\tadd.out: out:numel:12, sizes:[3, 4]")
    assert level2[5] == level2[4]  # the output, after the kernel ran (resized in place: same metadata)
    assert len(level2) == 6
    level3 = sections["3"]
    assert "\tadd.out: self:tensor([[ 0.,  1.,  2.,  3.],\n" in level3
    assert "\tadd.out: alpha:2\n" in level3
    assert level3.endswith("\tadd.out: out:tensor([[ 2.,  3.,  4.,  5.],\n"
                           "        [ 6.,  7.,  8.,  9.],\n        [10., 11., 12., 13.]])\n")
    assert sections["0"] == ""


def test_dump_follows_every_way_os_environ_changes_the_variable():
    """The C++ wrappers hear of DIPU_DUMP_OP_ARGS through os.environ (Note [Hooks cost nothing unless asked
    for]): each of its mutating methods turns dumps on or off for the next op."""
    out = run("""
        import os, torch, dipu
        a = torch.ones(4, device="dipu")
        changes = [("update", lambda: os.environ.update(DIPU_DUMP_OP_ARGS="1")),
                   ("pop", lambda: os.environ.pop("DIPU_DUMP_OP_ARGS")),
                   ("setdefault", lambda: os.environ.setdefault("DIPU_DUMP_OP_ARGS", "1")),
                   ("set 0", lambda: os.environ.__setitem__("DIPU_DUMP_OP_ARGS", "0")),
                   ("set 1", lambda: os.environ.__setitem__("DIPU_DUMP_OP_ARGS", "1")),
                   ("del", lambda: os.environ.__delitem__("DIPU_DUMP_OP_ARGS"))]
        for name, change in changes:
            change()
            print(f"== {name}")
            a + a
    """).stdout
    sections = dict(re.findall(r"== (.+?)\n(.*?)(?=== |\Z)", out, re.S))
    dumped = {name: "add.Tensor" in text for name, text in sections.items()}
    assert dumped == {"update": True, "pop": False, "setdefault": True, "set 0": False, "set 1": True,
                      "del": False}


def test_dump_shows_every_result_of_a_functional_op():
    out = run("""
        import torch, dipu
        x = torch.arange(12.).reshape(3, 4).to("dipu")
        torch.ops.aten.native_layer_norm(x, [4], None, None, 1e-5)
    """, env={"DIPU_DUMP_OP_ARGS": "2"}).stdout.splitlines()
    assert out[0] == "[dipu_native_layer_norm]:native_layer_norm  diopiLayerNorm"
    assert [line.split(":numel")[0] for line in out[-3:]] == [
        "\tnative_layer_norm: out", "\tnative_layer_norm: save_mean", "\tnative_layer_norm: save_invstd"]
    assert ", sizes:[3, 1], " in out[-1]


@pytest.mark.parametrize("level", ["foo", "9", "-1", "2.0"])
def test_invalid_dump_level_fails_at_import_naming_the_variable(level):
    proc = run("import dipu", check=False, env={"DIPU_DUMP_OP_ARGS": level})
    assert proc.stderr.splitlines()[-1] == (
        f"ValueError: DIPU_DUMP_OP_ARGS={level!r}: expected 0 (off), 1 (op and DIOPI function), "
        "2 (plus arguments and results) or 3 (plus tensor values)")


def test_dump_level_zero_with_spaces_prints_nothing():
    out = run("""
        import torch, dipu
        torch.ones(2, device="dipu") + 1
    """, env={"DIPU_DUMP_OP_ARGS": " 0 "}).stdout
    assert out == ""


FALLBACK_PROBE = """
    import torch, dipu
    from dipu.kernels.registry import registered_ops
    names = set(registered_ops())
    print("registered:", sorted(n for n in {probes} if n in names))
    a = torch.arange(6.).to("dipu"); b = torch.full((6,), 2.0, device="dipu")
    mask = (torch.arange(6) % 2 == 0).to("dipu")
    dipu.reset_fallback_counts()
    results = [torch.add(a, b, out=torch.empty(6, device="dipu")), a + b, a * b,
               torch.ops.aten.add.Scalar(a, 3), a.clone().masked_fill_(mask, 7.0)]
    expected = [torch.arange(6.) + 2, torch.arange(6.) + 2, torch.arange(6.) * 2, torch.arange(6.) + 3,
                torch.arange(6.).masked_fill_(torch.arange(6) % 2 == 0, 7.0)]
    assert all(torch.equal(r.cpu(), e) for r, e in zip(results, expected))
    print("fallbacks:", sorted(dipu.fallback_counts()))
"""
PROBES = ["add.out", "add.Tensor", "add_.Tensor", "add.Scalar", "mul.Tensor", "masked_fill_.Scalar",
          "masked_fill_.Tensor"]


def probe_fallbacks(env=None, cwd=None):
    lines = run(FALLBACK_PROBE.format(probes=PROBES), env=env, cwd=cwd).stdout.splitlines()
    return lines[0], lines[1]


def test_no_forced_fallback_by_default():
    assert probe_fallbacks() == (f"registered: {sorted(PROBES)}", "fallbacks: []")


def test_force_fallback_by_spec_entry_covers_every_op_it_generates():
    # add.Tensor and add_.Tensor are generated from the add.out entry (as in DIPU's guide: `x + x` is add.out)
    registered, fallbacks = probe_fallbacks({"DIPU_FORCE_FALLBACK_OPS_LIST": "add.out"})
    assert registered == f"registered: {sorted(set(PROBES) - {'add.out', 'add.Tensor', 'add_.Tensor'})}"
    assert fallbacks == "fallbacks: ['add.out']"  # a + b: add.Tensor, without a kernel, runs add.out


def test_force_fallback_by_registered_name():
    registered, fallbacks = probe_fallbacks({"DIPU_FORCE_FALLBACK_OPS_LIST": "add.Tensor"})
    assert registered == f"registered: {sorted(set(PROBES) - {'add.Tensor'})}"
    assert fallbacks == "fallbacks: []"  # a + b: add.Tensor, without a kernel, runs add.out, still native


def test_force_fallback_patterns_match_whole_names_not_prefixes():
    """``add`` and ``add.out`` prefix addmm, addcmul, addcdiv, addbmm, addmv, addr: none of those is dropped;
    ``add`` names no op (ops are named with their overload), so only ``add.out``'s family goes."""
    out = run("""
        from dipu.kernels.registry import registered_ops
        print(sorted(name for name in registered_ops() if name.startswith("add")))
    """, env={"DIPU_FORCE_FALLBACK_OPS_LIST": "add, add.out, add_"}).stdout
    kept = eval(out.splitlines()[-1])
    assert not {"add.out", "add.Tensor", "add_.Tensor"} & set(kept)
    assert {"addmm", "addmm.out", "addmm_", "addcmul", "addcmul.out", "addcmul_", "addcdiv.out", "addbmm.out",
            "addmv.out", "addr.out", "add.Scalar_out"} <= set(kept), kept


def test_force_fallback_by_pattern_with_whitespace():
    registered, fallbacks = probe_fallbacks({"DIPU_FORCE_FALLBACK_OPS_LIST": " .*.Scalar , mul.Tensor "})
    assert registered == "registered: ['add.Tensor', 'add.out', 'add_.Tensor', 'masked_fill_.Tensor']"
    # add.Scalar and mul.Tensor decompose (to add.Tensor, to mul.out) for backends without a kernel
    assert fallbacks == "fallbacks: ['masked_fill_.Scalar']"


def test_force_fallback_from_the_config_file(tmp_path):
    (tmp_path / ".dipu_force_fallback_op_list.config").write_text("# ops to keep on CPU\nadd.out\n  mul.Tensor\n")
    registered, fallbacks = probe_fallbacks(cwd=tmp_path)
    assert registered == "registered: ['add.Scalar', 'masked_fill_.Scalar', 'masked_fill_.Tensor']"
    assert fallbacks == "fallbacks: ['add.out']"


def test_force_fallback_everything_still_trains_correctly():
    out = run("""
        import torch, dipu
        from dipu.kernels.registry import registered_ops
        assert registered_ops() == []
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        x, y = torch.randn(5, 4), torch.tensor([0, 1, 1, 0, 1])
        def train(device):
            m = __import__("copy").deepcopy(model).to(device)
            opt = torch.optim.SGD(m.parameters(), lr=0.1, foreach=False)
            for _ in range(2):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(m(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
            return loss.item()
        assert train("cpu") == train("dipu")
        print("fallbacks:", len(dipu.fallback_counts()) > 5)
    """, env={"DIPU_FORCE_FALLBACK_OPS_LIST": ".*"}).stdout
    assert out == "fallbacks: True\n"


def test_invalid_regex_fails_at_import_naming_variable_and_pattern():
    proc = run("import dipu", check=False, env={"DIPU_FORCE_FALLBACK_OPS_LIST": "add.out,[bad"})
    assert proc.returncode != 0
    assert ("ValueError: DIPU_FORCE_FALLBACK_OPS_LIST: invalid regular expression '[bad': "
            "unterminated character set at position 0") in proc.stderr


def test_dumps_and_failures_name_the_scalar_function_that_ran(tmp_path):
    # add_.Tensor with a Python number calls diopiAddScalar, not the entry's diopiAdd: the dump and a
    # failed status say so.
    (tmp_path / "failing_scalar.py").write_text(textwrap.dedent("""
        from dipu.diopi import OpLibrary, Status, set_last_error
        from dipu.diopi_impl.torch import library as reference

        library = OpLibrary("failing_scalar", base=reference)

        @library.register
        def diopiMulScalar(ctx, out, input, other):
            set_last_error("planted")
            return Status.ERROR_OCCURRED
    """))
    out = run("""
        import torch, dipu
        t = torch.zeros(3, dtype=torch.long, device="dipu")
        t.add_(1)
        t.add_(t)
        try:
            t * 2
        except RuntimeError as error:
            print(error)
    """, env={"DIPU_DUMP_OP_ARGS": "1", "DIPU_DIOPI_IMPL": "failing_scalar", "PYTHONPATH": str(tmp_path)}).stdout
    assert out.splitlines() == [
        "[dipu_add__Tensor]:add_.Tensor  diopiAddScalar",
        "[dipu_add__Tensor]:add_.Tensor  diopiAdd",
        "[dipu_mul_Tensor]:mul.Tensor  diopiMulScalar",
        "mul.Tensor: diopiMulScalar failed with diopiErrorOccurred: planted",
    ]


def test_missing_diopi_function_falls_back_with_a_one_time_message(tmp_path):
    (tmp_path / "partial_ops.py").write_text(textwrap.dedent("""
        from dipu.diopi import OpLibrary
        from dipu.diopi_impl.torch import library as reference

        library = OpLibrary("partial")
        for name, function in reference.functions.items():
            if name != "diopiAdd":
                library.register(function)
    """))
    out = run("""
        import os, torch, dipu
        os.environ["DIPU_DUMP_OP_ARGS"] = "0"
        a = torch.arange(4.).to("dipu")
        for _ in range(3):
            assert torch.equal((a + a).cpu(), torch.arange(4.) * 2)
        print("fallbacks:", dipu.fallback_counts().get("add.Tensor"), dipu.fallback_counts().get("add.out"))
    """, env={"DIPU_DIOPI_IMPL": "partial_ops", "DIPU_DUMP_OP_ARGS": "1", "PYTHONPATH": str(tmp_path)}).stdout
    assert out.splitlines() == [  # one line at import, not one per op
        "dipu: the op library 'partial' lacks 1 of the DIOPI functions the spec calls; their 3 ops run on the "
        "CPU fallback (`python -m dipu --missing` lists them)",
        "fallbacks: " + out.splitlines()[-1].split(": ", 1)[1],
    ]
    counts = out.splitlines()[-1].split(": ", 1)[1]
    assert counts != "None None"


def test_unknown_op_library_names_the_variable():
    proc = run("import dipu", check=False, env={"DIPU_DIOPI_IMPL": " nowhere "})
    assert proc.stderr.splitlines()[-1] == (
        "dipu.diopi.library.LibraryNotFound: DIPU_DIOPI_IMPL=nowhere: no DIOPI op library named 'nowhere' "
        "(no entry point in 'dipu.diopi_impls', no module dipu.diopi_impl.nowhere or nowhere); "
        "installed entry points: ref_c, torch, torch_cpp")


def test_check_tensor_device_names_the_argument():
    proc = run("""
        import torch, dipu
        torch.ones(3, device="dipu") + torch.ones(3)
    """, check=False, env={"DIPU_CHECK_TENSOR_DEVICE": "1"})
    assert "RuntimeError: add.Tensor: argument 'other' is on cpu, expected dipu:0" in proc.stderr


def test_sync_mode_keeps_results_correct():
    out = run("""
        import torch, dipu
        from dipu.kernels import switches as hooks
        a = torch.arange(4.).to("dipu")
        print(hooks.SYNC, (a * a).sum().item())
    """, env={"DIPU_SYNC_EXEC_MODE": "1"}).stdout
    assert out == "True 14.0\n"


def test_an_exception_in_a_diopi_function_names_the_op_and_function(tmp_path):
    (tmp_path / "raising_ops.py").write_text(textwrap.dedent("""
        from dipu.diopi import OpLibrary
        from dipu.diopi_impl.torch import library as reference

        library = OpLibrary("raising", base=reference)

        @library.register
        def diopiMul(ctx, out, input, other):
            raise ValueError("the vendor's own failure")
    """))
    out = run("""
        import torch, dipu
        x = torch.ones(3, device="dipu")
        try:
            x * x
        except ValueError as error:
            print(error, error.__notes__)
    """, env={"PYTHONPATH": str(tmp_path), "DIPU_DIOPI_IMPL": "raising_ops"}).stdout
    assert out.splitlines() == ["the vendor's own failure ['dipu: raised in the kernel of mul.Tensor (dipu_mul_Tensor, "
                                "DIOPI function diopiMul)']"]
