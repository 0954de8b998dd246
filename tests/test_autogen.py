"""The generator: golden output, exact error messages, --check, reproducibility."""

import re
import textwrap
from pathlib import Path

import pytest
import torch

from dipugen import __main__ as autogen
from dipugen import REFERENCE_TORCH, emit, schemas, spec
from dipugen.shape_rules import SHAPE_RULES

HERE = Path(__file__).parent / "autogen"
RELU = "- op: relu\n"
ADD_OUT = "- op: add.out\n"


def generate(tmp_path, yaml_path, *extra) -> int:
    return autogen.main(["--yaml", str(yaml_path), "--out", str(tmp_path / "out"), *extra])


#: What tests/autogen/expected/aten_library.cpp is generated from: functions of the torch op library, each with the
#: ATen schema it applies (torch 2.13's), of every kind the emitter converts (out=, scalar, in-place, generator,
#: lists, optional dtype).
ATEN_LIBRARY_PAIRS = [
    ("diopiAdd", "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"),
    ("diopiAddScalar", "add.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> Tensor(a!)"),
    ("diopiBernoulli", "bernoulli.out(Tensor self, *, Generator? generator=None, Tensor(a!) out) -> Tensor(a!)"),
    ("diopiForeachAddInpScalarList", "_foreach_add_.ScalarList(Tensor(a!)[] self, Scalar[] scalars) -> ()"),
    ("diopiForeachNorm", "_foreach_norm.Scalar(Tensor[] self, Scalar ord=2, ScalarType? dtype=None) -> Tensor[]"),
    ("diopiReluInp", "relu_(Tensor(a!) self) -> Tensor(a!)"),
    ("diopiUniformInp", "uniform_(Tensor(a!) self, float from=0., float to=1., *, Generator? generator=None) -> "
                        "Tensor(a!)"),
]


def golden(name: str) -> str:
    return (HERE / "expected" / name).read_text()


def test_small_spec_generates_exactly_the_golden_files(tmp_path):
    """Every emitter's output is reviewed here (the C header is checked in: see the test below), and it is the
    same under every torch of the supported range but for the version it names."""
    assert generate(tmp_path, HERE / "small.yaml", "--cpp-wrappers", str(tmp_path / "cpp_wrappers.cpp")) == 0
    produced = {p.name: p.read_text() for p in (tmp_path / "out").iterdir()}
    assert produced.keys() == {"__init__.py", "wrappers.py"}
    installed = ".".join(map(str, schemas.installed_torch()))
    produced["__init__.py"] = produced["__init__.py"].replace(
        f'TORCH_VERSION = "{installed}"', f'TORCH_VERSION = "{REFERENCE_TORCH}"', 1)
    for name in produced:
        assert produced[name] == golden(name), f"{name} differs from tests/autogen/expected/{name}"
    assert (tmp_path / "cpp_wrappers.cpp").read_text() == golden("cpp_wrappers.cpp")


#: The at::cpu:: functions the golden file may call, as torch's ATen/ops/<op>_cpu_dispatch.h declare them (types
#: unspaced): add.out's and relu_'s kernels; bernoulli's stays on at::_ops (its generator's type differs here).
CPU_KERNELS = {"add": {"add_outf": {("constat::Tensor&", "constat::Tensor&", "constat::Scalar&", "at::Tensor&")}},
               "relu": {"relu_": {("at::Tensor&",)}},
               "bernoulli": {"bernoulli_outf": {("constat::Tensor&", "at::Generator", "at::Tensor&")}}}


def test_the_torch_op_library_s_direct_functions_are_the_golden_file():
    from dipugen.dest import aten_library
    from dipugen.proto import FUNCTIONS

    text = aten_library.render([(FUNCTIONS[n], schema) for n, schema in ATEN_LIBRARY_PAIRS], "tests/test_autogen.py",
                               aten_library.CpuKernels(declared=CPU_KERNELS))
    assert text == golden("aten_library.cpp")


def test_the_cpu_kernels_are_read_from_torch_s_own_headers():
    """Note [ATen's CPU kernels without the dispatcher]: the installed torch's headers name add.out's CPU kernel
    with the types torchgen gives its schema, and none for an op whose CPU kernel is composite."""
    from dipugen.dest import aten_library

    kernels = aten_library.CpuKernels(Path(torch.__file__).parent / "include")
    assert ("constat::Tensor&", "constat::Tensor&", "constat::Scalar&", "at::Tensor&") in kernels("add")["add_outf"]
    assert kernels("_foreach_add") == {}
    from torchgen.model import FunctionSchema

    def cpu_function(schema: str):
        return aten_library._cpu_function(FunctionSchema.parse(schema), kernels)

    assert cpu_function("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)") == \
        "add_outf"
    # only the Tensor overload of remainder has a CPU kernel: the Scalar one is composite
    assert cpu_function("remainder.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)") is None


def test_second_run_changes_nothing(tmp_path, capsys):
    assert generate(tmp_path, HERE / "small.yaml") == 0
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()}
    capsys.readouterr()
    assert generate(tmp_path, HERE / "small.yaml") == 0
    assert capsys.readouterr().out == ""
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()} == mtimes


def test_check_names_a_stale_file(tmp_path, capsys):
    assert generate(tmp_path, HERE / "small.yaml") == 0
    assert generate(tmp_path, HERE / "small.yaml", "--check") == 0
    wrappers = tmp_path / "out" / "wrappers.py"
    wrappers.write_text(wrappers.read_text() + "# edited by hand\n")
    capsys.readouterr()
    assert generate(tmp_path, HERE / "small.yaml", "--check") == 1
    assert capsys.readouterr().err == f"stale: {wrappers}\nrun `python -m dipugen` to regenerate\n"
    assert wrappers.read_text().endswith("# edited by hand\n")  # --check writes nothing


def test_check_names_a_missing_file(tmp_path, capsys):
    assert generate(tmp_path, HERE / "small.yaml") == 0
    (tmp_path / "out" / "__init__.py").unlink()
    assert generate(tmp_path, HERE / "small.yaml", "--check") == 1
    assert capsys.readouterr().err.splitlines()[0] == f"stale: {tmp_path / 'out' / '__init__.py'}"


def test_the_checked_in_c_header_is_up_to_date_and_nothing_else_is_generated_in_the_checkout(capsys):
    """Note [Generated code per torch version]: the C header is the one generated file in the repository."""
    assert autogen.main(["--check"]) == 0
    assert "stale" not in capsys.readouterr().err
    assert not (Path(dipu_package_dir()) / "_generated").exists()


def dipu_package_dir() -> str:
    import dipu

    return dipu.__path__[0]


def test_help_documents_the_options(capsys):
    with pytest.raises(SystemExit):
        autogen.main(["--help"])
    out = capsys.readouterr().out
    for option in ("--check", "--yaml", "--out", "--cpp-wrappers"):
        assert option in out


def error_of(tmp_path, text: str) -> str:
    path = tmp_path / "diopi_functions.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(spec.SpecError) as info:
        emit.render(spec.load(path), path.name)
    return str(info.value)


ERRORS = [
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  interfce: x\n",
     "diopi_functions.yaml:1: relu: unknown key 'interfce' (allowed: autocompare, calls, fallback, impl, "
     "interface, op, register, returns, scalar_interface, shape, strides, torch, unused, variants, writes)"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  autocompare: 'no'\n",
     "diopi_functions.yaml:1: relu: 'autocompare' must be a bool, got str"),
    (RELU + "  interface: [diopiRelu]\n",
     "diopi_functions.yaml:1: relu: 'interface' must be a string, got list"),
    (RELU, "diopi_functions.yaml:1: relu: missing required key 'interface'"),
    ("- interface: diopiRelu(ctx, out, self)\n", "diopi_functions.yaml:1: missing required key 'op'"),
    ("- op: 'relu(Tensor self) -> Tensor'\n  interface: diopiRelu(ctx, out, self)\n",
     "diopi_functions.yaml:1: 'op' must name an aten op and its overload, like add.out or relu, "
     "got 'relu(Tensor self) -> Tensor'"),
    # an argument the schema does not have (torch renamed it): never bound to something else
    (RELU + "  interface: diopiRelu(ctx, out, input)\n",
     "diopi_functions.yaml:1: relu: interface: 'input' is neither an argument nor an output"),
    # an argument the call does not take: never dropped silently
    (ADD_OUT + "  interface: diopiAdd(ctx, out, self, other, 1)\n",
     "diopi_functions.yaml:1: add.out: diopiAdd is not passed 'alpha' of add.out(Tensor self, Tensor other, *, "
     "Scalar alpha=1, Tensor(a!) out) -> Tensor(a!): pass it, or list it under 'unused' if the call does not need it"),
    (ADD_OUT + "  interface: diopiAdd(ctx, out, self, other, alpha)\n  unused: [beta]\n",
     "diopi_functions.yaml:1: add.out: 'unused' names 'beta', which is not an argument of add.out(Tensor self, "
     "Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"),
    (ADD_OUT + "  interface: diopiAdd(ctx, out, self, other, alpha)\n  unused: [alpha]\n",
     "diopi_functions.yaml:1: add.out: 'unused' names 'alpha', which the interface passes"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  torch: 'since 2.14'\n",
     "diopi_functions.yaml:1: relu: 'torch' must be version clauses like '>=2.14' or '>=2.13, <2.15', "
     "got 'since 2.14'"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  torch: '>=2.0'\n" + RELU
     + "  interface: diopiRelu(ctx, out, self)\n  torch: '<99'\n",
     "diopi_functions.yaml:4: relu: duplicate entry (first at line 1; entries for one op need torch ranges that "
     "do not overlap)"),
    ("- op: relu\n  interface: diopiRelu\n  impl: dipu.ops.dropout.native_dropout\n",
     "diopi_functions.yaml:1: relu: impl 'dipu.ops.dropout.native_dropout' takes (diopi, ctx, input, p, train), "
     "but is called with (diopi, ctx, self)"),
    ("- op: relu.nope\n  interface: diopiRelu(ctx, out, self)\n",
     f"diopi_functions.yaml:1: relu.nope: aten::relu.nope does not exist in the installed torch {torch.__version__}"),
    (RELU + "  interface: diopiRelux(ctx, out, self)\n",
     "diopi_functions.yaml:1: relu: interface: unknown DIOPI function 'diopiRelux'"),
    (RELU + "  interface: diopiRelu(ctx, out)\n",
     "diopi_functions.yaml:1: relu: interface: diopiRelu takes 3 arguments (ctx, out, input), got 2"),
    (RELU + "  interface: diopiRelu(out, self, self)\n",
     "diopi_functions.yaml:1: relu: interface: the first argument of diopiRelu must be ctx, got 'out'"),
    (ADD_OUT + "  interface: diopiAdd(ctx, out, self, other, other)\n",
     "diopi_functions.yaml:1: add.out: interface: diopiAdd parameter 'alpha' (Scalar) cannot take 'other' (Tensor)"),
    (ADD_OUT + "  interface: diopiAdd(ctx, self, out, other, alpha)\n",
     "diopi_functions.yaml:1: add.out: interface: diopiAdd parameter 'out' (Tensor(a!)) cannot take 'self' (Tensor)"),
    (RELU + "  interface: diopiRelu(ctx, out, x)\n",
     "diopi_functions.yaml:1: relu: interface: 'x' is neither an argument nor an output"),
    (RELU + "  interface: diopiRelu(ctx, out, None)\n",
     "diopi_functions.yaml:1: relu: interface: diopiRelu parameter 'input' (Tensor) cannot take None"),
    ("- op: native_layer_norm\n"
     "  interface: diopiLayerNorm(ctx, out0, out1, out2, input, input, bias, normalized_shape, eps)\n"
     "  returns: [out0, out1]\n",
     "diopi_functions.yaml:1: native_layer_norm: 'returns' must list 3 identifiers, one per returned tensor"),
    ("- op: native_layer_norm\n"
     "  interface: diopiMm(ctx, out0, weight, input)\n",
     "diopi_functions.yaml:1: native_layer_norm: interface: diopiMm parameter 'input' (Tensor) cannot take "
     "'weight' (Tensor?): it may be None"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  shape: nope\n",
     "diopi_functions.yaml:1: relu: unknown shape rule 'nope' (known: meta, " + ", ".join(sorted(SHAPE_RULES))
     + ")"),
    # a public helper of dipu/ops/shape_rules.py is not a rule (Note [Shape rules are a table])
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  shape: max_pool2d_size\n",
     "diopi_functions.yaml:1: relu: unknown shape rule 'max_pool2d_size' (known: meta, "
     + ", ".join(sorted(SHAPE_RULES)) + ")"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  strides: channels_last\n",
     "diopi_functions.yaml:1: relu: 'strides' must be 'contiguous' or {format_of: <tensor argument>}, "
     "got 'channels_last'"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  strides: [contiguous]\n",
     "diopi_functions.yaml:1: relu: 'strides' must be a string or a mapping, got list"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  strides: {format_of: input}\n",
     "diopi_functions.yaml:1: relu: 'strides' format_of names 'input', which is not a tensor argument of "
     "relu(Tensor self) -> Tensor"),
    ("- op: relu_\n  interface: diopiReluInp(ctx, self)\n  strides: contiguous\n",
     "diopi_functions.yaml:1: relu_: 'strides' describes the outputs of a functional kernel, which this entry "
     "does not generate"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  calls: [diopiReluInp]\n",
     "diopi_functions.yaml:1: relu: 'calls' names the further DIOPI functions of an impl kernel: it needs impl"),
    ("- op: convolution_overrideable\n  interface: diopiConvolution2d\n  impl: dipu.ops.convolution.convolution\n"
     "  calls: [diopiConvTranspose2x]\n",
     "diopi_functions.yaml:1: convolution_overrideable: calls: unknown DIOPI function 'diopiConvTranspose2x'"),
    ("- op: convolution_overrideable\n  interface: diopiConvolution2d\n  impl: dipu.ops.convolution.convolution\n",
     "diopi_functions.yaml:1: convolution_overrideable: impl 'dipu.ops.convolution.convolution' takes (diopi, "
     "diopi_transposed, ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups), "
     "but is called with (diopi, ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding, "
     "groups)"),
    (RELU + "  interface: diopiRelu\n  impl: dipu.ops.nowhere.relu\n",
     "diopi_functions.yaml:1: relu: impl 'dipu.ops.nowhere.relu' names no function (expected a function in a "
     "module of this repository)"),
    (ADD_OUT + "  interface: diopiAdd(ctx, out, self, other, alpha)\n  variants: [inplace, sideways]\n",
     "diopi_functions.yaml:1: add.out: unknown variant 'sideways' (known: out, functional, inplace)"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n" + RELU + "  interface: diopiRelu(ctx, out, self)\n",
     "diopi_functions.yaml:3: relu: duplicate entry (first at line 1; entries for one op need torch ranges that "
     "do not overlap)"),
    (ADD_OUT + "  interface: diopiAdd(ctx, out, self, other, alpha)\n  shape: binary\n"
     "- op: add.Tensor\n"
     "  interface: diopiAdd(ctx, out, self, other, alpha)\n  shape: binary\n",
     "diopi_functions.yaml:4: add.Tensor: generates add.Tensor, which the entry at line 1 generates too"),
    ("relu: 1\n", "diopi_functions.yaml:1: expected a list of entries (mappings)"),
    ("# nothing yet\n", "diopi_functions.yaml:1: expected a list of entries (mappings)"),
    ("\n\nrelu: 1\n", "diopi_functions.yaml:3: expected a list of entries (mappings)"),
    # PyYAML keeps the last of two equal keys: the entry would silently call diopiRelu(ctx, out, out)
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  interface: diopiRelu(ctx, out, out)\n",
     "diopi_functions.yaml:3: duplicate key 'interface' (first at line 2)"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n  shape: [unary\n",
     "diopi_functions.yaml:4: invalid YAML: did not find expected ',' or ']' "
     "(while parsing a flow sequence at line 3)"),
    (RELU + "  interface: 'diopiRelu(ctx, out, self)\n",
     "diopi_functions.yaml:3: invalid YAML: found unexpected end of stream (while scanning a quoted scalar at line 2)"),
    (RELU + "  interface: diopiRelu(ctx, out, self): x\n",
     "diopi_functions.yaml:2: invalid YAML: mapping values are not allowed in this context"),
    (RELU + "  interface: !!python/name:os.system\n",
     "diopi_functions.yaml:2: invalid YAML: could not determine a constructor for the tag "
     "'tag:yaml.org,2002:python/name:os.system'"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n- relu\n",
     "diopi_functions.yaml:3: expected an entry (a mapping of op, interface, ...), got a scalar"),
    (RELU + "  interface: diopiRelu(ctx, out, self)\n- [relu, diopiRelu]\n",
     "diopi_functions.yaml:3: expected an entry (a mapping of op, interface, ...), got a list"),
]


@pytest.mark.parametrize("text, message", ERRORS, ids=[m.split(": ", 2)[-1][:40] for _, m in ERRORS])
def test_spec_errors_are_exact(tmp_path, text, message):
    assert error_of(tmp_path, text) == message


def test_an_entry_outside_its_torch_range_is_left_out(tmp_path):
    path = tmp_path / "diopi_functions.yaml"
    path.write_text(RELU + "  interface: diopiRelu(ctx, out, self)\n  torch: '<2.0'\n"
                    + RELU + "  interface: diopiRelu(ctx, out, self)\n  torch: '>=2.0, <99'\n")
    (entry,) = spec.load(path)
    assert entry.line == 4


def test_a_torch_whose_schema_does_not_fit_leaves_the_op_out_and_reports_it(tmp_path, capsys):
    """What dipu does at import under a torch the spec does not fully fit (tests/test_torch_versions.py)."""
    path = tmp_path / "diopi_functions.yaml"
    path.write_text(RELU + "  interface: diopiRelu(ctx, out, input)\n" + ADD_OUT
                    + "  interface: diopiAdd(ctx, out, self, other, alpha)\n  shape: binary\n")
    entries, unmatched = spec.load_lenient(path)
    assert [e.name for e in entries] == ["add.out"]
    assert unmatched == {
        "relu": "diopi_functions.yaml:1: relu: interface: 'input' is neither an argument nor an output"}
    files = emit.render(entries, path.name, unmatched=unmatched)
    assert "    'relu': \"diopi_functions.yaml:1: relu: interface: 'input' is neither an argument nor an output\",\n" \
        in files["__init__.py"]
    assert "dipu_relu" not in files["wrappers.py"]


def test_errors_reach_the_command_line(tmp_path, capsys):
    path = tmp_path / "diopi_functions.yaml"
    path.write_text(RELU + "  interface: diopiRelux(ctx, out, self)\n")
    assert generate(tmp_path, path) == 1
    assert capsys.readouterr().err == (
        "error: diopi_functions.yaml:1: relu: interface: unknown DIOPI function 'diopiRelux'\n")
    assert not (tmp_path / "out").exists()


def test_non_utf8_spec_names_the_line(tmp_path):
    path = tmp_path / "diopi_functions.yaml"
    path.write_bytes(RELU.encode() + b"  interface: diopiRelu(ctx, out, self)  # caf\xe9\n")
    with pytest.raises(spec.SpecError) as info:
        spec.load(path)
    assert str(info.value) == "diopi_functions.yaml:2: not UTF-8: byte 0xe9 cannot be decoded"


def test_missing_spec_is_one_line_on_the_command_line(tmp_path, capsys):
    missing = tmp_path / "diopi_functions.yaml"
    assert generate(tmp_path, missing) == 1
    assert capsys.readouterr().err == f"error: {missing}: cannot read the op spec: No such file or directory\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("broken", [
    RELU + "  interface: diopiRelu(ctx, out, self)\n  interface: diopiRelux(ctx, out, self)\n",
    RELU + "  interface: [diopiRelu\n",
    "- relu\n",
], ids=["duplicate key", "syntax", "not a mapping"])
def test_a_broken_spec_leaves_the_generated_package_untouched(tmp_path, capsys, broken):
    assert generate(tmp_path, HERE / "small.yaml") == 0
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "out").iterdir()}
    path = tmp_path / "diopi_functions.yaml"
    path.write_text(broken)
    capsys.readouterr()
    assert generate(tmp_path, path) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: diopi_functions.yaml:") and err.count("\n") == 1, err
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "out").iterdir()} == before


def test_writing_leaves_no_temporary_files(tmp_path):
    assert generate(tmp_path, HERE / "small.yaml") == 0
    (tmp_path / "out" / "wrappers.py").write_text("# @generated stale\n")
    assert generate(tmp_path, HERE / "small.yaml") == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["__init__.py", "wrappers.py"]


def test_the_shape_rule_table_is_the_runtime_s():
    """Note [Shape rules are a table]: the generator reads dipu/ops/shape_rules.py's RULES (one module object, the
    leaf the runtime imports too); each rule is a function there, and the C++ twins are derived from the table."""
    import inspect

    from dipu.ops import shape_rules
    from dipugen.dest import cpp_wrappers

    assert list(SHAPE_RULES) == list(shape_rules.RULES) and shape_rules.__all__ == sorted(shape_rules.RULES)
    for name, rule in shape_rules.RULES.items():
        assert inspect.isfunction(getattr(shape_rules, name)), name
        assert SHAPE_RULES[name].elementwise is rule.elementwise
    assert {"unary", "binary", "native_layer_norm"} <= cpp_wrappers.CPP_SHAPE_RULES
    assert "eye" not in cpp_wrappers.CPP_SHAPE_RULES and "eye" in SHAPE_RULES
    assert cpp_wrappers.CPP_MULTI_RULES == {  # an overload's twin by its C++ name (Note [Meta shapes in C++])
        "_weight_norm_interface", "_weight_norm_interface_backward", "fused_gru_cell", "fused_gru_cell_backward",
        "fused_lstm_cell", "fused_lstm_cell_backward", "max_dim", "native_group_norm",
        "log_sigmoid_forward", "native_group_norm_backward", "native_layer_norm", "native_layer_norm_backward",
        "nll_loss2d_forward", "nll_loss_forward", "sort",
        "sort_stable", "std_mean_correction", "var_mean_correction"}
    assert cpp_wrappers.CPP_META_TWINS == set(shape_rules.CPP_META_TWINS)


def test_the_generator_imports_nothing_of_dipu():
    """Note [The generator does not import dipu]: no module of dipugen names dipu in an import (but for the type
    checker's, under ``if TYPE_CHECKING:``, which never runs)."""
    import ast

    root = Path(spec.__file__).parent
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for_checker = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                       for statement in node.body for inner in ast.walk(statement)}
        for node in ast.walk(tree):
            if id(node) in for_checker:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            else:
                continue
            assert not any(name == "dipu" or name.startswith("dipu.") for name in names), (path, names)


def test_the_generator_reads_the_runtimes_proto_without_its_package():
    """Note [The generator reads the runtime's proto]: the generator loads the proto's two leaf modules and the
    shape-rule table and no other module of dipu (so dipu/__init__.py never runs), and shares them with the
    runtime in one process."""
    import os
    import subprocess
    import sys

    from dipu.diopi import c_form, proto
    from dipugen import proto as generator_proto

    code = "import sys, dipugen.spec; print(sorted(n for n in sys.modules if n.split('.')[0] == 'dipu'))"
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    loaded = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert loaded.stdout == "['dipu.diopi.c_form', 'dipu.diopi.proto', 'dipu.ops.shape_rules']\n"
    assert generator_proto.Kind is proto.Kind and generator_proto.FUNCTIONS is proto.FUNCTIONS
    assert generator_proto.c_parameters is c_form.c_parameters


def test_the_op_spec_is_package_data():
    """Note [The op spec is package data]: the generator reads the spec from its own package, which holds the
    repository's file."""
    assert spec.SPEC.parent == Path(spec.__file__).parent
    assert spec.SPEC.read_bytes() == (Path(__file__).parents[1] / "diopi_functions.yaml").read_bytes()


def test_an_impl_kernel_gets_the_functions_its_entry_calls(tmp_path):
    """``calls:`` functions follow the entry's own in the table and in the impl call (Kernel.functions)."""
    path = tmp_path / "diopi_functions.yaml"
    path.write_text("- op: convolution_overrideable\n  interface: diopiConvolution2d\n"
                    "  impl: dipu.ops.convolution.convolution\n  calls: [diopiConvTranspose2d]\n")
    files = emit.render(spec.load(path), path.name)
    assert "('diopiConvolution2d', 'diopiConvTranspose2d')" in files["__init__.py"]
    assert "def make_convolution_overrideable(op, diopiConvolution2d, diopiConvTranspose2d):" in files["wrappers.py"]
    assert "impl_dipu_ops_convolution_convolution(diopiConvolution2d, diopiConvTranspose2d, contexts[d], " \
        in files["wrappers.py"]


def test_the_cpp_wrappers_template_only_substitutes_and_loops():
    """Decisions live in the emitter (docs/architecture.md, The generator): the template of the C++ wrappers has no
    branching or assigning tag, so what a wrapper does is read in one place, dest/cpp_wrappers.py."""
    text = (Path(emit.TEMPLATES) / "cpp_wrappers.cpp.j2").read_text()
    tags = re.findall(r"{%-?\s*(\w+)", text)
    assert tags and set(tags) <= {"for", "endfor"}, sorted(set(tags))
