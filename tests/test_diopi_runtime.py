"""The DIOPI runtime: the proto, op-library registration, status codes and the context."""

import textwrap

import pytest
import torch

from conftest import run_python
from dipu.diopi.proto import FUNCTIONS
from dipu.diopi_impl.torch import library as torch_library
from dipu.diopi import KEPT_DIMS, OUTPUT_DTYPE, SUCCESS, OpLibrary, Status, load_library
from dipu.kernels.support import contexts


def test_proto_puts_ctx_first_then_outputs():
    outputs_last = {"diopiLinalgQR"}  # DeepLink's order (Note [DeepLink's spellings] in dipu/diopi/proto.py)
    for function in FUNCTIONS.values():
        assert function.param_names[0] == "ctx"
        assert function.params[-1 if function.name in outputs_last else 0].kind.is_output, function.name
        assert len(set(function.param_names)) == len(function.param_names), function.name
    assert str(FUNCTIONS["diopiAdd"]) == "diopiAdd(ctx, Tensor(a!) out, Tensor input, Tensor other, Scalar alpha)"


def test_the_torch_library_implements_the_whole_proto():
    """All of it but the functions whose ATen op the installed torch lacks (Note [ATen ops a torch lacks] in
    diopi_impl/torch/_table.py; on the newer torchs of the supported range, none)."""
    from dipu.diopi_impl.torch._table import LACKING

    assert sorted(torch_library.functions) == sorted(set(FUNCTIONS) - set(LACKING))


def test_registering_a_function_outside_the_proto_fails():
    library = OpLibrary("test")

    def diopiFrobnicate(ctx, out, input):
        return SUCCESS

    with pytest.raises(TypeError, match=r"^op library 'test': diopiFrobnicate is not declared in the DIOPI proto$"):
        library.register(diopiFrobnicate)


def test_registering_a_different_parameter_list_fails():
    library = OpLibrary("test")

    def diopiAdd(ctx, out, input, other):
        return SUCCESS

    with pytest.raises(TypeError) as info:
        library.register(diopiAdd)
    assert str(info.value) == ("op library 'test': diopiAdd(ctx, out, input, other) does not match the DIOPI "
                               "proto diopiAdd(ctx, out, input, other, alpha)")


def test_registering_twice_fails_and_base_libraries_fill_gaps():
    library = OpLibrary("test", base=torch_library)

    def diopiNeg(ctx, out, input):
        return SUCCESS

    library.register(diopiNeg)
    with pytest.raises(TypeError, match=r"^op library 'test': diopiNeg is registered twice$"):
        library.register(diopiNeg)
    assert library.get("diopiNeg") is diopiNeg
    assert library.get("diopiAdd") is torch_library.get("diopiAdd")
    assert OpLibrary("empty").get("diopiAdd") is None


def test_loading_libraries_by_name():
    assert load_library("torch") is torch_library
    with pytest.raises(RuntimeError) as info:
        load_library("nowhere")
    assert str(info.value) == ("no DIOPI op library named 'nowhere' (no entry point in 'dipu.diopi_impls', "
                               "no module dipu.diopi_impl.nowhere or nowhere)")


def test_status_values_and_texts_follow_diopi():  # a C library returns diopiError_t's values as they are
    assert {s.text: int(s) for s in (Status.SUCCESS, Status.ERROR_OCCURRED, Status.NOT_IMPLEMENTED,
                                     Status.FORCE_FALLBACK, Status.DTYPE_NOT_SUPPORTED)} == {
        "diopiSuccess": 0, "diopiErrorOccurred": 1, "diopiNoImplement": 13, "diopiForceFallbackToCPU": 14,
        "diopiDtypeNotSupported": 1000}
    assert len(Status) == 16 and all(isinstance(s.text, str) for s in Status)
    assert not Status.SUCCESS and all(s for s in Status if s is not Status.SUCCESS)


def test_context_allocates_on_its_device_and_reports_the_stream():
    ctx = contexts[0]
    tensor = ctx.require_tensor((2, 3), torch.int32)
    assert (tensor.device, tensor.shape, tensor.dtype) == (torch.device("dipu:0"), (2, 3), torch.int32)
    assert ctx.stream is None  # the default stream
    stream = torch.dipu.Stream()
    with torch.dipu.stream(stream):
        assert ctx.stream is not None


STATUS_LIBRARY = """
from dipu.diopi import OpLibrary, Status
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("statuses", base=reference)

@library.register
def diopiMul(ctx, out, input, other):
    ctx.set_last_error("int8 is not supported")
    return Status.DTYPE_NOT_SUPPORTED

@library.register
def diopiSub(ctx, out, input, other, alpha):
    return Status.FORCE_FALLBACK

@library.register
def diopiNeg(ctx, out, input):
    return Status.NOT_IMPLEMENTED
"""


def test_failed_status_raises_and_force_fallback_runs_on_cpu(tmp_path):
    (tmp_path / "status_ops.py").write_text(STATUS_LIBRARY)
    out = run_python(textwrap.dedent("""
        import torch, dipu
        a = torch.arange(4.).to("dipu")
        for fn in (lambda: a * a, lambda: -a):
            try:
                fn()
            except RuntimeError as error:
                print(error)
        dipu.reset_fallback_counts()
        print((a - a).cpu().tolist(), dipu.fallback_counts())
    """), env={"DIPU_DIOPI_IMPL": "status_ops", "PYTHONPATH": str(tmp_path)}).stdout
    assert out.splitlines() == [
        "mul.Tensor: diopiMul failed with diopiDtypeNotSupported: int8 is not supported",
        "neg: diopiNeg failed with diopiNoImplement",
        "[0.0, 0.0, 0.0, 0.0] {'sub.Tensor': 1}",
    ]


def test_declared_dtypes_send_other_dtypes_to_the_fallback(tmp_path):
    (tmp_path / "float_add_ops.py").write_text(textwrap.dedent("""
        import torch
        from dipu.diopi import OpLibrary
        from dipu.diopi_impl.torch import library as reference

        library = OpLibrary("float_add", base=reference)
        library.register(reference.functions["diopiAdd"], dtypes=(torch.float32,))
    """))
    out = run_python(textwrap.dedent("""
        import torch, dipu
        from dipu.diopi.library import load_library
        assert load_library("float_add_ops").supported_dtypes("diopiAdd") == {torch.float32}
        f = torch.arange(4.0).to("dipu")
        i = torch.arange(4).to("dipu")
        assert torch.equal((f + f).cpu(), torch.arange(4.0) * 2)
        print("float:", dipu.fallback_counts())
        assert torch.equal((i + i).cpu(), torch.arange(4) * 2)
        print("int:", dipu.fallback_counts())
    """), env={"DIPU_DIOPI_IMPL": "float_add_ops", "PYTHONPATH": str(tmp_path)}).stdout
    assert out.splitlines() == ["float: {}", "int: {'add.Tensor': 1}"]


def test_declaring_dtypes_needs_a_tensor_input():
    library = OpLibrary("bad")
    with pytest.raises(TypeError, match="diopiNormalInp declares dtypes but has no tensor input"):
        @library.register(dtypes=(torch.float32,))
        def diopiNormalInp(ctx, inout, mean, std, generator):
            pass


def test_table_made_functions_are_checked_against_the_aten_op_they_apply():
    """Note [Table-made functions are checked against ATen]: a closure given the proto's signature passes
    the signature check by construction; pairing it with an ATen op whose arguments do not fit fails."""
    def diopiAtan2(ctx, out, input, other):
        return SUCCESS

    OpLibrary("fits").register(diopiAtan2, aten=torch.ops.aten.atan2.out)
    with pytest.raises(TypeError) as info:
        OpLibrary("drifted").register(diopiAtan2, aten=torch.ops.aten.fmod.Scalar_out)
    assert str(info.value) == (
        "op library 'drifted': diopiAtan2(ctx, Tensor(a!) out, Tensor input, Tensor other) does not fit the ATen op "
        "it applies: aten::fmod.Scalar_out its argument 'other' (number) cannot be passed to Tensor other")

    def diopiForeachAddInpScalarList(ctx, inputs, scalars):
        return SUCCESS

    OpLibrary("fits").register(diopiForeachAddInpScalarList, aten=torch.ops.aten._foreach_add_)  # a packet
    with pytest.raises(TypeError, match=r"aten::_foreach_add_\.List takes 0 output\(s\) and 3 input\(s\)"):
        OpLibrary("drifted").register(diopiForeachAddInpScalarList, aten=torch.ops.aten._foreach_add_.List)


def test_a_derived_argument_is_left_out_of_the_check_and_must_be_the_overloads():
    """Note [Derived arguments]: diopiCumsum declares no dtype; deriving cumsum.out's dtype from the output makes the
    pairing fit, and a derived name the overload lacks, or a rule nobody defined, fails at registration."""
    def diopiCumsum(ctx, out, input, dim):
        return SUCCESS

    with pytest.raises(TypeError, match=r"cumsum\.out takes 1 output\(s\) and 3 input\(s\)"):
        OpLibrary("underived").register(diopiCumsum, aten=torch.ops.aten.cumsum.out)
    library = OpLibrary("derives")
    library.register(diopiCumsum, aten=torch.ops.aten.cumsum.out, direct=True, derived={"dtype": OUTPUT_DTYPE})
    assert library.derived == {"diopiCumsum": {"dtype": OUTPUT_DTYPE}}
    with pytest.raises(TypeError, match=r"aten::cumsum\.out has no argument keepdim to derive"):
        OpLibrary("wrong").register(diopiCumsum, aten=torch.ops.aten.cumsum.out, derived={"keepdim": KEPT_DIMS})
    with pytest.raises(TypeError, match=r"derived arguments need aten= and rules among"):
        OpLibrary("wrong").register(diopiCumsum, aten=torch.ops.aten.cumsum.out, derived={"dtype": "input_dtype"})


def test_a_copied_result_pairs_the_output_with_the_functional_overload_s_one_result():
    """Note [Copies of a functional result] in diopi_impl/torch/_table.py: with copied=True the output stands for
    what the functional overload returns; without it, or with an out= overload, the pairing does not fit."""
    def diopiMSELoss(ctx, out, input, target, reduction):
        return SUCCESS

    OpLibrary("copies").register(diopiMSELoss, aten=torch.ops.aten.mse_loss.default, direct=True, copied=True)
    with pytest.raises(TypeError, match=r"aten::mse_loss\.default takes 0 output\(s\) and 3 input\(s\)"):
        OpLibrary("uncopied").register(diopiMSELoss, aten=torch.ops.aten.mse_loss.default)
    with pytest.raises(TypeError, match=r"takes 1 out= argument\(s\), not one result to copy"):
        OpLibrary("wrong").register(diopiMSELoss, aten=torch.ops.aten.mse_loss.out, copied=True)
    # the row computes what the CPU does, in the output's alias
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    out = torch.empty((), device="dipu")
    assert torch_library.get("diopiMSELoss")(contexts[0], out, x.to("dipu"), y.to("dipu"), 1) == SUCCESS
    torch.testing.assert_close(out.cpu(), torch.nn.functional.mse_loss(x, y))


def test_derived_arguments_follow_the_outputs():
    """The table's derived rows compute keepdim and dtype from the outputs as the rules say: a kept or dropped dim
    and a widened cumsum, each as the CPU computes them (the C++ twin's are in the conformance suite)."""
    x = torch.randn(3, 4)
    ctx = contexts[0]
    for keep in (False, True):
        shape = (3, 1) if keep else (3,)
        values, indices = torch.empty(shape, device="dipu"), torch.empty(shape, dtype=torch.long, device="dipu")
        assert torch_library.get("diopiMax")(ctx, values, indices, x.to("dipu"), 1) == SUCCESS
        expected = x.max(1, keepdim=keep)
        assert torch.equal(values.cpu(), expected.values) and torch.equal(indices.cpu(), expected.indices)
    out = torch.empty(3, 4, dtype=torch.float64, device="dipu")
    assert torch_library.get("diopiCumsum")(ctx, out, x.to("dipu"), 1) == SUCCESS
    assert torch.equal(out.cpu(), x.cumsum(1, dtype=torch.float64))


def test_the_table_builder_checks_every_function_it_makes_against_aten():
    """Note [Table-made functions] in diopi_impl/torch/_table.py: a table row pairing a declaration with an ATen
    op it does not fit fails when the library is imported, before anything is registered."""
    from dipu.diopi_impl.torch._table import foreach_function, out_function

    registered = dict(torch_library.functions)
    with pytest.raises(TypeError, match=r"^op library 'torch': diopiAtan2\(.*\) does not fit the ATen op it applies: "
                                        r"aten::fmod\.Scalar_out its argument 'other' \(number\) cannot be passed"):
        out_function("diopiAtan2", torch.ops.aten.fmod.Scalar_out)
    with pytest.raises(TypeError, match=r"aten::_foreach_add_\.List takes 0 output\(s\) and 3 input\(s\)"):
        foreach_function("diopiForeachAddInpScalarList", torch.ops.aten._foreach_add_.List)
    assert torch_library.functions == registered


def test_the_reference_library_uses_only_the_op_library_api():
    """diopi_impl imports nothing of dipu but dipu.diopi (what every op library sees), nor the generator."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "diopi_impl"
    private = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            private += [f"{path.relative_to(root)}: {name}" for name in names
                        if name.split(".")[0] in ("dipu", "dipugen") and not (name + ".").startswith("dipu.diopi.")]
    assert not private, private
