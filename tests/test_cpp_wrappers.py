"""The generated C++ wrappers (Note [Generated C++ wrappers] in scripts/autogen/dest/cpp_wrappers.py): what the
emitter writes, and, with a C op library compiled here, that the C++ path serves the calls it should, gives
the Python path's results, hands failures and hooks to the Python wrappers, and stays out of the way when
switched off. The C library is built from the source below with the machine's C compiler against dipu's
diopirt.h; the processes that load it are fresh (DIPU_DIOPI_IMPL is read at import). The first one builds the
wrapper extension (cached afterwards, Note [C++ wrapper cache])."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIPU_INCLUDE = ROOT / "dipu" / "include"
COMPILER = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
TEST_VARS = ("DIPU_DIOPI_IMPL", "DIPU_DUMP_OP_ARGS", "DIPU_AUTOCOMPARE_OPS_LIST", "DIPU_FORCE_FALLBACK_OPS_LIST",
             "DIPU_CPP_WRAPPERS", "DIPU_SYNC_EXEC_MODE", "DIPU_CHECK_TENSOR_DEVICE")

# float32, contiguous, one shape for every operand; anything else: diopiForceFallbackToCPU. diopiSub always
# fails with a message; calls counts the calls that reached the library.
LIBRARY = r"""
#include <diopi/diopirt.h>
#include <stdio.h>

static char last_error[128];
const char* diopiGetLastErrorString(void) { return last_error; }
long long cw_calls = 0;

static float* floats(diopiConstTensorHandle_t t, int64_t* numel) {
    diopiDtype_t dtype; diopiSize_t shape, stride; const void* data; int64_t expected = 1;
    diopiGetTensorDtype(t, &dtype); diopiGetTensorShape(t, &shape); diopiGetTensorStride(t, &stride);
    if (dtype != diopi_dtype_float32) return NULL;
    for (int64_t d = shape.len - 1; d >= 0; --d) {
        if (shape.data[d] != 1 && stride.data[d] != expected) return NULL;
        expected *= shape.data[d];
    }
    diopiGetTensorNumel(t, numel); diopiGetTensorDataConst(t, &data);
    return (float*)data;
}

diopiError_t diopiAdd(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other, const diopiScalar_t* alpha) {
    int64_t n, na, nb; float *o = floats(out, &n), *x = floats(input, &na), *y = floats(other, &nb);
    float a = alpha->stype == diopi_dtype_float64 ? (float)alpha->fval : (float)alpha->ival;
    (void)ctx; ++cw_calls;
    if (!o || !x || !y || na != n || nb != n) return diopiForceFallbackToCPU;
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] + a * y[i];
    return diopiSuccess;
}

diopiError_t diopiAddScalar(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                            const diopiScalar_t* other, const diopiScalar_t* alpha) {
    int64_t n, na; float *o = floats(out, &n), *x = floats(input, &na);
    float v = other->stype == diopi_dtype_float64 ? (float)other->fval : (float)other->ival;
    float a = alpha->stype == diopi_dtype_float64 ? (float)alpha->fval : (float)alpha->ival;
    (void)ctx; ++cw_calls;
    if (!o || !x || na != n) return diopiForceFallbackToCPU;
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] + a * v;
    return diopiSuccess;
}

diopiError_t diopiMul(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other) {
    int64_t n, na, nb; float *o = floats(out, &n), *x = floats(input, &na), *y = floats(other, &nb);
    (void)ctx; ++cw_calls;
    if (!o || !x || !y || na != n || nb != n) return diopiForceFallbackToCPU;
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] * y[i];
    return diopiSuccess;
}

diopiError_t diopiReluInp(diopiContextHandle_t ctx, diopiTensorHandle_t input) {
    int64_t n; float* x = floats(input, &n);
    (void)ctx; ++cw_calls;
    if (!x) return diopiForceFallbackToCPU;
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0 ? x[i] : 0;
    return diopiSuccess;
}

diopiError_t diopiMm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                     diopiConstTensorHandle_t mat2) {
    int64_t n, na, nb; float *o = floats(out, &n), *a = floats(input, &na), *b = floats(mat2, &nb);
    diopiSize_t sa, sb;
    (void)ctx; ++cw_calls;
    if (!o || !a || !b) return diopiForceFallbackToCPU;
    diopiGetTensorShape(input, &sa); diopiGetTensorShape(mat2, &sb);
    int64_t rows = sa.data[0], inner = sa.data[1], cols = sb.data[1];
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            float sum = 0;
            for (int64_t k = 0; k < inner; ++k) sum += a[i * inner + k] * b[k * cols + j];
            o[i * cols + j] = sum;
        }
    return diopiSuccess;
}

diopiError_t diopiSub(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other, const diopiScalar_t* alpha) {
    (void)ctx; (void)out; (void)input; (void)other; (void)alpha; ++cw_calls;
    snprintf(last_error, sizeof last_error, "sub refuses on purpose");
    return diopiErrorOccurred;
}
"""

pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C compiler")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for var in TEST_VARS:
        monkeypatch.delenv(var, raising=False)


#: What LIBRARY exports of the proto.
FUNCTIONS = frozenset({"diopiAdd", "diopiAddScalar", "diopiMul", "diopiReluInp", "diopiMm", "diopiSub"})


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    """LIBRARY, compiled; and its wrapper extension built here, where no subprocess timeout applies (the first
    build takes minutes on a busy machine; later ones find it in the cache)."""
    from dipu.kernels import cpp_wrappers

    cpp_wrappers.build()
    directory = tmp_path_factory.mktemp("cwrap")
    source = directory / "cwrap_diopi.c"
    source.write_text(LIBRARY)
    target = directory / "libcwrap_diopi.so"
    subprocess.run([COMPILER, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-std=c11", f"-I{DIPU_INCLUDE}",
                    str(source), "-o", str(target)], check=True)
    return target


# ---- the emitter -----------------------------------------------------------------------------------------

SPEC = """
- op: add.out
  interface: diopiAdd(ctx, out, self, other, alpha)
  scalar_interface: diopiAddScalar(ctx, out, self, other, alpha)
  shape: binary
- op: mm.out
  interface: diopiMm(ctx, out, self, mat2)
  shape: mm
- op: relu_
  interface: diopiReluInp(ctx, self)
- op: addmv.out
  interface: diopiAddmv(ctx, out, self, mat, vec, beta, alpha)
"""


#: Wrappers of the same text as add's (Note [Wrappers sharing a body]).
SUB = """
- op: sub.out
  interface: diopiSub(ctx, out, self, other, alpha)
  scalar_interface: diopiSubScalar(ctx, out, self, other, alpha)
  shape: binary
"""


def emitted(tmp_path, functions=None, spec_text=SPEC):
    """The emitter's text for ``spec_text``, with the generator's own kernels and templates."""
    code = f"""
        import sys
        from pathlib import Path
        from dipugen import kernels, spec
        from dipugen.dest import cpp_wrappers
        path = Path({str(tmp_path / 'spec.yaml')!r})
        found = kernels.expand_all(spec.load(path), path.name)
        sys.stdout.write(cpp_wrappers.render(found, path.name, {functions!r}))
        print("\\n//REASONS " + repr(sorted(cpp_wrappers.explain(found).items())))
    """
    (tmp_path / "spec.yaml").write_text(spec_text)
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          check=True, cwd=ROOT).stdout


def test_the_wrappers_in_parts_are_the_wrappers_in_one_file(tmp_path):
    """The build compiles the wrappers in one file per core (Note [The wrappers in parts]): every wrapper lands
    in exactly one part, and each part is a whole translation unit with its own table; wrappers of the same text
    share a body (Note [Wrappers sharing a body])."""
    code = f"""
        from pathlib import Path
        from dipugen import kernels, spec
        from dipugen.dest import cpp_wrappers
        path = Path({str(tmp_path / 'spec.yaml')!r})
        found = kernels.expand_all(spec.load(path), path.name)
        whole = cpp_wrappers.render(found, path.name)
        parts = cpp_wrappers.render_parts(found, path.name, None, 3)
        registered = lambda text: [line for line in text.splitlines() if line.startswith("    entry(")]
        assert len(parts) == 3 and all(registered(p) for p in parts), parts
        assert sorted(sum((registered(p) for p in parts), [])) == registered(whole)
        assert all('#include "wrapper_support.h"' in p and "const Table kTable(" in p for p in parts)
        assert "Part 2 of 3" in parts[1] and "Part" not in whole
        # sub's wrappers are add's but for the op (Note [Wrappers sharing a body]); a part holds whole bodies
        assert '    entry("sub.Tensor", k_sub_Tensor, &dipu_add_Tensor),' in registered(whole)
        assert '    entry("sub_.Tensor", k_sub__Tensor, &dipu_add__Tensor),' in registered(whole)
        bodies = whole.count("(Kernel& kern")
        assert bodies == len(registered(whole)) - 3
        assert len(cpp_wrappers.render_parts(found, path.name, None, 100)) == bodies
    """
    (tmp_path / "spec.yaml").write_text(SPEC + SUB)
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, check=True, cwd=ROOT)


def test_the_emitter_writes_one_typed_kernel_per_supported_kernel(tmp_path):
    text = emitted(tmp_path)
    registered = [line.split('"')[1] for line in text.splitlines() if line.startswith("    entry(")]
    # add.out makes its functional and in-place siblings; addmv's shapes come from its meta kernel, ATen's C++ one
    # called past the dispatcher (Note [Meta shapes in C++]), the functional one's for the out= one too; the
    # in-place one needs none (trusted, as its Python wrapper trusts it)
    assert registered == ["add.Tensor", "add.out", "add_.Tensor", "addmv", "addmv.out", "addmv_", "mm", "mm.out",
                          "relu_"], registered
    call = "meta_specs(kern, specs, [&] { return at::meta::addmv(meta(self), meta(mat), meta(vec), beta, alpha); })"
    addmv = text[text.index("at::Tensor dipu_addmv("):text.index("// addmv.out(")]
    assert call in addmv and "at::Tensor out = empty(specs[0]);" in addmv
    assert "#include <ATen/ops/addmv_meta_dispatch.h>" in text and "meta_op" not in addmv
    addmv_out = text[text.index("at::Tensor & dipu_addmv_out("):text.index("// addmv_(")]
    assert call in addmv_out and "if (out.sizes() != c10::IntArrayRef(specs[0].shape)) out.resize_(specs[0].shape);" \
        in addmv_out
    functional = text[text.index("at::Tensor dipu_add_Tensor("):text.index("// add.out(")]
    # the dispatcher's C++ signature, the C++ shape rule, a new output, the C call with C values, status
    assert "(Kernel& kern, const at::Tensor & self, const at::Tensor & other, const at::Scalar & alpha)" in functional
    assert "rules::binary(spec, self, other, alpha)" in functional
    # an elementwise kernel lays out a strided call's output itself (Note [Elementwise strides in C++])
    assert "!(contiguous(self) && contiguous(other)) && !elementwise_strides(spec, self, other)" in functional
    assert "at::Tensor out = empty(spec);" in functional
    assert "(diopi::handle(ctx), c_out(out), c_in(self), c_in(other), alpha_c.get())" in functional
    assert "if (C10_UNLIKELY(status != diopiSuccess))" in functional
    # the function pointer's C types are those of dipu's functions.h
    assert ("using fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, "
            "diopiConstTensorHandle_t, diopiConstTensorHandle_t, const diopiScalar_t*);") in functional
    out_kernel = text[text.index("at::Tensor & dipu_add_out("):text.index("// add_.Tensor(")]
    assert "out.resize_(spec.shape)" in out_kernel and "return out;" in out_kernel
    inplace = text[text.index("at::Tensor & dipu_add__Tensor("):text.index("// mm(")]
    assert "self.sizes() != c10::IntArrayRef(spec.shape)" in inplace  # a mismatch goes to the Python wrapper
    assert "c_out(self), c_in(self)" in inplace


def test_the_emitter_writes_only_what_the_library_provides(tmp_path):
    text = emitted(tmp_path, frozenset({"diopiMm"}))
    registered = [line.split('"')[1] for line in text.splitlines() if line.startswith("    entry(")]
    assert registered == ["mm", "mm.out"], registered


SEVERAL_OUTPUTS = """
- op: native_layer_norm
  interface: diopiLayerNorm(ctx, out, save_mean, save_invstd, input, weight, bias, normalized_shape, eps)
  returns: [out, save_mean, save_invstd]
  shape: native_layer_norm
- op: native_layer_norm_backward
  interface: diopiLayerNormBackward(ctx, grad_input, grad_weight, grad_bias, grad_out, input, weight, bias, mean, rstd, normalized_shape)
  strides: contiguous
  unused: [output_mask]
  returns: [grad_input, grad_weight, grad_bias]
- op: _thnn_fused_gru_cell
  interface: diopiGruCell(ctx, hy, workspace, input_gates, hidden_gates, hx, input_bias, hidden_bias)
  returns: [hy, workspace]
  shape: fused_gru_cell
- op: multilabel_margin_loss_forward.output
  interface: diopiMultilabelMarginLoss(ctx, output, is_target, self, target, reduction)
  shape: multilabel_margin_loss
"""  # noqa: E501  (one spec line per interface, as diopi_functions.yaml has them)


def test_the_emitter_writes_kernels_with_several_outputs_where_a_cpp_rule_gives_their_shapes(tmp_path):
    """Note [Several outputs in C++]: one Spec per output, an unwanted one undefined (NULL to C), the tuple
    returned; native_layer_norm_backward's meta shapes through its C++ twin, the fused GRU cell's through its rule's;
    the multilabel margin loss (no C++ rule) not."""
    text = emitted(tmp_path, spec_text=SEVERAL_OUTPUTS)
    registered = [line.split('"')[1] for line in text.splitlines() if line.startswith("    entry(")]
    assert registered == ["_thnn_fused_gru_cell", "native_layer_norm", "native_layer_norm_backward"], registered
    assert "rules::fused_gru_cell(specs, input_gates, hidden_gates, hx, input_bias, hidden_bias)" in text
    assert "('multilabel_margin_loss_forward.output', 'shape rule multilabel_margin_loss has no C++ twin')" in text
    backward = text[text.index("dipu_native_layer_norm_backward("):]
    assert "rules::native_layer_norm_backward(specs, grad_out, input, normalized_shape" in backward
    assert ("at::Tensor grad_weight = specs[1].wanted ? empty(specs[1].shape, specs[1].dtype) : at::Tensor();"
            in backward)
    assert "c_out(grad_input), c_out(grad_weight), c_out(grad_bias), c_in(grad_out)" in backward
    assert "return ::std::tuple<at::Tensor,at::Tensor,at::Tensor>(grad_input, grad_weight, grad_bias);" in backward
    assert "kern.python_tensors(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)" in backward
    forward = text[text.index("dipu_native_layer_norm("):text.index("// native_layer_norm_backward(")]
    assert "contiguous(input) && contiguous(weight) && contiguous(bias)" in forward  # else its stride rule


# ---- the C++ path, with a C library ------------------------------------------------------------------

CALLS = """
import contextlib, io, json, os, torch, dipu
from dipu.kernels import cpp_wrappers, registry
torch.manual_seed(0)
x, y, m = torch.randn(5, 6), torch.randn(5, 6), torch.randn(6, 3)
dx, dy, dm = x.to("dipu"), y.to("dipu"), m.to("dipu")
r = {"installed": sorted(registry.registration.cpp_kernels)}
cpp_wrappers.reset_fast_calls()
dipu.reset_fallback_counts()
r["add"] = torch.equal((dx + dy).cpu(), x + y)
r["add_alpha"] = torch.allclose(torch.add(dx, dy, alpha=3).cpu(), torch.add(x, y, alpha=3))
r["mul"] = torch.equal((dx * dy).cpu(), x * y)
r["add_number"] = torch.equal((dx + 2).cpu(), x + 2)  # a wrapped number: diopiAddScalar
r["mm"] = torch.allclose((dx @ dm).cpu(), x @ m, rtol=1e-5, atol=1e-5)
z = dx.clone(); z.add_(dy, alpha=2); r["add_"] = torch.allclose(z.cpu(), x + 2 * y)
out = torch.empty(0, device="dipu"); torch.add(dx, dy, out=out); r["add_out"] = torch.equal(out.cpu(), x + y)
z = dx.clone(); z.relu_(); r["relu_"] = torch.equal(z.cpu(), x.relu())
r["fast"] = cpp_wrappers.fast_calls()
r["no_fallback"] = dipu.fallback_counts()

cpp_wrappers.reset_fast_calls()
r["float64"] = torch.equal((dx.double() + dy.double()).cpu(), x.double() + y.double())  # the library refuses
r["broadcast"] = torch.equal((dx + dy[0]).cpu(), x + y[0])  # so it does with another shape
r["strided"] = torch.equal((dx.t() * dy.t()).cpu(), x.t() * y.t())  # the Python path's stride rules
r["scalar"] = torch.equal((dx * 2).cpu(), x * 2)  # a wrapped number: the C++ torch library's diopiMulScalar
r["after_refusals"] = cpp_wrappers.fast_calls()
r["fallbacks"] = dipu.fallback_counts()
steps = torch.zeros((), dtype=torch.long, device="dipu")
steps.add_(1)  # a wrapped number the library's diopiAddScalar refuses (int64): the fallback gets it as a tensor
r["refused_number"] = steps.item() == 1
try:
    dx - dy
    r["sub"] = "no error"
except RuntimeError as error:
    r["sub"] = str(error)

def fast_while(hook):
    cpp_wrappers.reset_fast_calls()
    with hook:
        ok = torch.equal((dx + dy).cpu(), x + y)
    return ok, cpp_wrappers.fast_calls().get("add.Tensor", 0)

@contextlib.contextmanager
def dumping():
    os.environ["DIPU_DUMP_OP_ARGS"] = "1"
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            yield
    finally:
        del os.environ["DIPU_DUMP_OP_ARGS"]
        r["dumped"] = printed.getvalue()

r["dump"] = fast_while(dumping())
r["autocompare"] = fast_while(dipu.autocompare("add.*"))
r["profiler"] = fast_while(torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]))
activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
r["timeline"] = fast_while(torch.profiler.profile(activities=activities)) if dipu._C.has_device_timeline() else None
r["after_hooks"] = fast_while(contextlib.nullcontext())
print(json.dumps(r))
"""


def run_calls(python, library, **env) -> dict:
    stdout = python(CALLS, env={"DIPU_DIOPI_IMPL": str(library), **env}).stdout
    return json.loads(stdout.strip().splitlines()[-1])


def test_the_cpp_path_serves_the_library_s_functions_with_the_python_path_s_results(python, library):
    r = run_calls(python, library)
    for op in ("add.Tensor", "add.out", "add_.Tensor", "mul.Tensor", "mm", "relu_"):
        assert op in r["installed"], r["installed"]
    assert "sub.Tensor" in r["installed"]
    for case in ("add", "add_alpha", "mul", "add_number", "mm", "add_", "add_out", "relu_"):
        assert r[case] is True, case
    assert r["fast"] == {"add.Tensor": 3, "mul.Tensor": 1, "mm": 1, "add_.Tensor": 1, "add.out": 1, "relu_": 1}, \
        r["fast"]
    assert r["no_fallback"] == {}, r["no_fallback"]


def test_what_the_cpp_path_cannot_finish_the_python_wrapper_does(python, library):
    r = run_calls(python, library)
    for case in ("float64", "broadcast", "strided", "scalar", "refused_number"):
        assert r[case] is True, case
    # the refused float64 and broadcast adds ran once more through the Python wrapper, then on the CPU; so did
    # the strided mul, which the library refuses too (non-contiguous); x * 2 is diopiMulScalar, which the library
    # lacks and the C++ torch library beneath it has: the C++ path with that library's function
    assert r["after_refusals"] == {"mul.Tensor": 1}, r["after_refusals"]
    assert r["fallbacks"] == {"add.Tensor": 2, "mul.Tensor": 1}, r["fallbacks"]
    assert "diopiSub failed" in r["sub"] and "sub refuses on purpose" in r["sub"], r["sub"]


def test_a_hook_switched_on_at_run_time_routes_through_the_python_wrapper(python, library):
    r = run_calls(python, library)
    assert r["dump"] == [True, 0], r["dump"]
    assert "[dipu_add_Tensor]:add.Tensor  diopiAdd" in r["dumped"], r["dumped"]
    assert r["autocompare"] == [True, 0], r["autocompare"]
    assert r["profiler"] == [True, 1], r["profiler"]  # profiling the CPU alone measures the C++ path itself
    assert r["timeline"] in ([True, 0], None), r["timeline"]  # dipu's device timeline: the Python path feeds it
    assert r["after_hooks"] == [True, 1], r["after_hooks"]  # and back on the C++ path once they are off


def test_switched_off_every_op_takes_the_python_wrapper(python, library):
    r = run_calls(python, library, DIPU_CPP_WRAPPERS="0")
    assert r["installed"] == [] and r["fast"] == {}, r
    assert all(r[case] is True for case in ("add", "mul", "mm", "add_", "add_out", "relu_", "float64"))


def test_without_a_c_library_nothing_is_built_or_installed(python):
    """The Python torch library alone (DIPU_DIOPI_IMPL=torch, the reference): no C function, no C++ wrapper."""
    stdout = python("import dipu\nfrom dipu.kernels import cpp_wrappers, registry\n"
                    "print(cpp_wrappers.module() is None, registry.registration.cpp_kernels)",
                    env={"DIPU_DIOPI_IMPL": "torch"}).stdout
    assert stdout.strip().splitlines()[-1] == "True []", stdout


def test_wrappers_that_cannot_be_built_leave_the_library_to_the_python_wrappers(monkeypatch):
    from dipu.kernels import cpp_wrappers

    def broken():
        raise RuntimeError("Error building extension 'dipu_cwrap'")

    monkeypatch.setattr(cpp_wrappers, "load", broken)
    with pytest.warns(UserWarning, match="run through the Python wrappers.*Error building extension"):
        assert cpp_wrappers.install({"add.Tensor": (None, None)}, {"diopiAdd": 1}) == []


def test_the_wrappers_library_reads_no_python_and_links_no_python_library():
    """Note [The C++ wrappers' way to Python]: its sources include no Python header (5 s of each build) and the
    library needs no Python library; the Python path is the core's function, which the error tests above go
    through."""
    from dipu.kernels import cpp_wrappers

    sources = sorted((ROOT / "dipu" / "kernels" / "cpp").iterdir())
    for source in [*sources, ROOT / "dipu" / "csrc" / "python_wrapper_call.h"]:
        includes = re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', source.read_text(), re.M)
        assert not [i for i in includes if "pybind" in i or "python" in i.lower() and i != "python_wrapper_call.h"], \
            (source.name, includes)
    dynamic = subprocess.run(["readelf", "-d", str(cpp_wrappers.build())], capture_output=True, text=True,
                             check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    assert "libc10.so" in needed and not [n for n in needed if "python" in n], needed


def test_sync_mode_reaches_the_cpp_path(python, library):
    code = """
        import torch, dipu
        from dipu.kernels import cpp_wrappers
        x = torch.ones(3, device="dipu")
        y = x + x
        print(cpp_wrappers.module().sync(), cpp_wrappers.fast_calls().get("add.Tensor", 0), y.cpu().tolist())
    """
    for value, expected in (("1", "True 1 [2.0, 2.0, 2.0]"), ("0", "False 1 [2.0, 2.0, 2.0]")):
        out = python(code, env={"DIPU_DIOPI_IMPL": str(library), "DIPU_SYNC_EXEC_MODE": value}).stdout
        assert out.strip().splitlines()[-1] == expected, out


# ---- several outputs, and the activations that were impl kernels, with the reference C library ------------

REF_C_CALLS = """
import contextlib, io, json, os, torch, torch.nn.functional as F, dipu
from dipu.kernels import cpp_wrappers
torch.manual_seed(0)
x, w, b, g = torch.randn(4, 6, 8), torch.randn(8), torch.randn(8), torch.randn(4, 6, 8)
r = {}

def layer_norm(device, affine, input_grad):
    xx = x.to(device).detach().requires_grad_(input_grad)  # leaves on either device
    ww, bb = (w.to(device).detach().requires_grad_(), b.to(device).detach().requires_grad_()) if affine else (None, None)
    y = F.layer_norm(xx, (8,), ww, bb)
    y.backward(g.to(device))
    return [None if t is None else t.detach().cpu() for t in (y, xx.grad, ww if ww is None else ww.grad,
                                                              bb if bb is None else bb.grad)]

def compare(cpu, on_dipu):  # ref_c computes in double: within float32 rounding of the CPU's
    return [a is None and d is None or a is not None and d is not None and
            torch.allclose(a, d, rtol=1e-5, atol=1e-5) for a, d in zip(cpu, on_dipu)]

def fast(names):
    return {op: n for op, n in cpp_wrappers.fast_calls().items() if any(name in op for name in names)}

cpp_wrappers.reset_fast_calls()
for affine, input_grad in ((True, True), (True, False), (False, True)):
    r[f"affine={affine} input_grad={input_grad}"] = compare(layer_norm("cpu", affine, input_grad),
                                                             layer_norm("dipu", affine, input_grad))
r["fast"] = fast(["layer_norm"])
cpp_wrappers.reset_fast_calls()
os.environ["DIPU_DUMP_OP_ARGS"] = "1"
with contextlib.redirect_stdout(io.StringIO()) as printed:
    r["dumped_same"] = compare(layer_norm("cpu", True, True), layer_norm("dipu", True, True))
del os.environ["DIPU_DUMP_OP_ARGS"]
r["dumped"] = [line for line in printed.getvalue().splitlines() if "layer_norm" in line]
r["fast_while_dumping"] = fast(["layer_norm"])
strided = x.transpose(0, 1).to("dipu")  # the Python path lays out its outputs
r["strided"] = torch.allclose(F.layer_norm(strided, (8,)).cpu(), F.layer_norm(x.transpose(0, 1), (8,)), atol=1e-5)

cpp_wrappers.reset_fast_calls()
xr = torch.randn(5, 6, requires_grad=True)
dxr = xr.detach().to("dipu").requires_grad_()
torch.relu(dxr).backward(g[0, :5, :6].to("dipu"))
torch.relu(xr).backward(g[0, :5, :6])
r["relu"] = [torch.equal(torch.relu(dxr).cpu(), torch.relu(xr)), torch.equal(dxr.grad.cpu(), xr.grad)]
r["relu_fast"] = fast(["relu", "threshold"])
channels_last = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
y = torch.relu(channels_last.to("dipu"))
r["relu_channels_last"] = [y.is_contiguous(memory_format=torch.channels_last), torch.equal(y.cpu(), channels_last.relu())]
print(json.dumps(r))
"""  # noqa: E501


def test_layer_norm_and_relu_take_the_cpp_path_with_the_reference_c_library(python):
    """native_layer_norm and its backward (several outputs, Note [Several outputs in C++]) and relu and
    threshold_backward (once impl kernels) are served by C++ wrappers: the CPU's results, an absent weight's
    gradient None as on the CPU, the hooks and a strided input through the Python wrapper."""
    r = json.loads(python(REF_C_CALLS, env={"DIPU_DIOPI_IMPL": "ref_c"}).stdout.strip().splitlines()[-1])
    for case in ("affine=True input_grad=True", "affine=True input_grad=False", "affine=False input_grad=True"):
        assert r[case] == [True] * 4, (case, r[case])
    assert r["fast"] == {"native_layer_norm": 3, "native_layer_norm_backward": 3}, r["fast"]
    assert r["dumped_same"] == [True] * 4 and r["fast_while_dumping"] == {}, r
    assert any("diopiLayerNorm " in line or line.endswith("diopiLayerNorm") for line in r["dumped"]), r["dumped"]
    assert any("diopiLayerNormBackward" in line for line in r["dumped"]), r["dumped"]
    assert r["strided"] is True
    assert r["relu"] == [True, True], r["relu"]
    assert r["relu_fast"] == {"relu": 2, "threshold_backward": 1}, r["relu_fast"]
    assert r["relu_channels_last"] == [True, True], r["relu_channels_last"]


# ---- the hand-written twins of impl kernels (dipu/kernels/cpp/impl_kernels.cpp), with the C++ torch library ----

IMPL_CALLS = """
import json, torch, torch.nn.functional as F, dipu
from dipu.kernels import cpp_wrappers
torch.manual_seed(0)
cl = torch.channels_last

def same(cpu, on_dipu):
    return cpu.shape == on_dipu.shape and cpu.dtype == on_dipu.dtype and cpu.stride() == on_dipu.stride() and \\
        torch.allclose(cpu, on_dipu.cpu(), rtol=1e-4, atol=1e-5)

def step(device, layout, fn, *tensors):
    leaves = [t.to(device).contiguous(memory_format=layout if t.dim() == 4 else torch.contiguous_format).detach()
              .requires_grad_() for t in tensors]
    out = fn(*leaves)
    out.backward(torch.ones_like(out))
    return [out.detach()] + [leaf.grad for leaf in leaves]

cases = {
    "conv": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), (2, 3, 9, 8), (4, 3, 3, 3), (4,)),
    "conv no bias, groups": (lambda x, w: F.conv2d(x, w, padding=(1, 0), groups=2), (2, 4, 7, 6), (6, 2, 3, 2)),
    "conv1d": (lambda x, w: F.conv1d(x, w, dilation=2), (2, 3, 11), (5, 3, 3)),
    "batch norm": (lambda x, w, b: F.batch_norm(x, torch.zeros(3, device=x.device), torch.ones(3, device=x.device),
                                                 w, b, training=True), (4, 3, 5, 6), (3,), (3,)),
    "max pool": (lambda x: F.max_pool2d(x, 3, 2, 1), (2, 3, 9, 10)),
    "max pool ceil": (lambda x: F.max_pool2d(x, 2, ceil_mode=True), (2, 3, 7, 7)),
    "adaptive avg pool": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), (2, 3, 7, 8)),
    "cat": (lambda x, y: torch.cat([x, y], 1), (2, 3, 4, 5), (2, 2, 4, 5)),
    "conv transposed": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                        (2, 3, 5, 6), (3, 4, 3, 3), (4,)),
    "conv transposed, groups": (lambda x, w: F.conv_transpose2d(x, w, groups=3, dilation=(2, 1)), (2, 6, 4, 5),
                                (6, 2, 3, 2)),
    "conv_transpose1d": (lambda x, w: F.conv_transpose1d(x, w, stride=3), (2, 3, 7), (3, 5, 2)),
    "instance norm": (lambda x: F.instance_norm(x), (2, 3, 5, 6)),  # batch norm without an affine weight
}
r = {}
for layout in (torch.contiguous_format, cl):
    for name, (fn, *shapes) in cases.items():
        tensors = [torch.randn(s) for s in shapes]
        applies = layout is torch.contiguous_format or len(shapes[0]) == 4
        if not applies:
            continue
        cpu_results, dipu_results = step("cpu", layout, fn, *tensors), step("dipu", layout, fn, *tensors)
        r[f"{name} {layout}"] = [same(c, d) for c, d in zip(cpu_results, dipu_results)]
cpp_wrappers.reset_fast_calls()
x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
F.conv2d(x.to("dipu"), w.to("dipu"))
y = F.conv_transpose2d(x.to("dipu"), w.transpose(0, 1).to("dipu"))  # transposed: diopiConvTranspose2d
r["transposed"] = same(F.conv_transpose2d(x, w.transpose(0, 1)), y)
bn = torch.nn.BatchNorm2d(3).to("dipu").eval()
r["batch norm eval"] = same(torch.nn.BatchNorm2d(3).eval()(x), bn(x.to("dipu")))
F.max_pool2d(x.to("dipu"), 2)
F.adaptive_avg_pool2d(x.to("dipu"), 3)
r["cat"] = [same(torch.cat([x, 2 * x[:1]], 0), torch.cat([x.to("dipu"), 2 * x[:1].to("dipu")], 0)),
            same(torch.cat([x[:, :1], x.transpose(2, 3)], 1),
                 torch.cat([x[:, :1].to("dipu"), x.transpose(2, 3).to("dipu")], 1)),
            same(torch.cat([x, x.double()], -1), torch.cat([x.to("dipu"), x.double().to("dipu")], -1)),
            same(torch.cat([torch.empty(0), x.transpose(1, 2)], -2),  # a key/value cache's first step
                 torch.cat([torch.empty(0).to("dipu"), x.to("dipu").transpose(1, 2)], -2))]
wanted = ("conv", "norm", "pool", "cat")
r["fast"] = {op: n for op, n in cpp_wrappers.fast_calls().items() if any(k in op for k in wanted)}
# the C++ twins of meta kernels (CPP_META_TWINS): the meta kernel's shapes, dtypes and strides, and the CPU's values
cpp_wrappers.reset_fast_calls()
table, ids, logits, weight = torch.randn(10, 4), torch.tensor([[1, 3, 3], [0, 9, 2]]), torch.randn(5, 7), torch.rand(7)
heads = torch.randn(2, 3, 4, 5)
twins = {}
for device in ("cpu", "dipu"):
    t = table.to(device).detach().requires_grad_()
    rows = F.embedding(ids.to(device), t)
    rows.backward(torch.ones_like(rows))
    x, target = logits.to(device), torch.tensor([1, 0, 6, 2, 2]).to(device)
    twins[device] = [rows.detach(), t.grad, torch.index_select(x, 1, torch.tensor([4, 0]).to(device)),
                     torch.index_select(x, 0, torch.tensor(3).to(device)), F.nll_loss(x, target),
                     F.nll_loss(x, target, reduction="none"), F.nll_loss(x[0], target[0]),
                     F.nll_loss(x, target, weight=weight.to(device), reduction="sum"),
                     x.argmax(1), x.argmin(0, keepdim=True), x.argmax(), x.argmax(keepdim=True), x.argmin(-1),
                     x[0, 0].argmax(0), torch.empty(0, 3).to(device).argmax(1),
                     torch.stack([x, 2 * x]), torch.stack([x[0], x[1], x[2]], -1), torch.stack([x[0, 0]], 0),
                     torch.stack([x, x.double()], 1), torch.stack([x.t(), x.t()]),
                     torch.stack([heads.to(device).transpose(1, 2)] * 3),  # attention's q, k, v gradients
                     torch.stack([heads.to(device).contiguous(memory_format=torch.channels_last)] * 2, 1)]
r["meta twins"] = [same(c, d) for c, d in zip(twins["cpu"], twins["dipu"])]
r["meta twins fast"] = {op: n for op, n in cpp_wrappers.fast_calls().items()
                        if op in ("embedding", "embedding_dense_backward", "index_select", "nll_loss_forward",
                                  "argmax", "argmin", "stack")}
errors = []
for device in ("cpu", "dipu"):  # a reduction over no elements: the C++ rule leaves it to the CPU's error
    try:
        torch.empty(0, 3).to(device).argmax(0)
    except IndexError as e:
        errors.append(str(e).splitlines()[0])
r["argmax of nothing"] = errors
# Tensor?[] indices (index.Tensor, index_put_ and the rest): None entries, masks, a CPU index (the Python path)
cpp_wrappers.reset_fast_calls()
source, mask = torch.randn(2, 3, 4), torch.tensor([True, False, True, True])
indexed = {}
for device in ("cpu", "dipu"):
    x = source.to(device).detach().requires_grad_()
    rows = torch.tensor([2, 0, 2]).to(device)
    got = [x[:, rows], x[..., mask.to(device)], x[x.detach() > 0], x[1, rows], x[:, torch.tensor([1])]]
    sum(g.sum() for g in got).backward()
    t = torch.zeros(5, 3).to(device)
    t.index_put_((torch.tensor([0, 0, 4]).to(device),), torch.ones(3).to(device), accumulate=True)
    put = t.index_put((torch.tensor([1]).to(device), torch.tensor([2]).to(device)), torch.tensor(7.0).to(device))
    indexed[device] = [g.detach() for g in got] + [x.grad, t, put]
r["indexed"] = [same(c, d) for c, d in zip(indexed["cpu"], indexed["dipu"])]
r["indexed fast"] = {op: n for op, n in cpp_wrappers.fast_calls().items() if "index" in op}
r["fallbacks"] = dipu.fallback_counts()
print(json.dumps(r))
"""


def test_convolution_batch_norm_and_max_pool_take_the_cpp_path_with_the_cpu_s_results_and_layouts(python):
    """The hot path's impl kernels (and cat) have C++ twins: forward and backward give the CPU's values, shapes,
    dtypes and strides (channels_last kept), transposed convolutions included, and what a twin leaves to Python (cat
    of mixed dtypes or layouts) still works. So do the C++ twins of meta kernels (argmax's among them) and the
    kernels taking Tensor?[] indices (Note [Tensor lists in C++])."""
    r = json.loads(python(IMPL_CALLS).stdout.strip().splitlines()[-1])
    cases = {k: v for k, v in r.items() if k not in ("fast", "fallbacks", "transposed", "batch norm eval", "cat",
                                                    "meta twins", "meta twins fast", "argmax of nothing", "indexed",
                                                    "indexed fast")}
    assert len(cases) == 22, cases
    for case, checks in cases.items():
        assert checks == [True] * len(checks), (case, checks)
    assert r["transposed"] is True and r["batch norm eval"] is True
    # cat of tensors ATen lays out contiguously takes the C++ path (transposed ones, a skipped 1-d empty one among
    # them); of two dtypes, the Python one
    assert r["cat"] == [True] * 4, r["cat"]
    assert r["fast"] == {"convolution_overrideable": 2, "native_batch_norm": 1, "max_pool2d_with_indices": 1,
                         "_adaptive_avg_pool2d": 1, "cat": 3}, r["fast"]
    assert r["fallbacks"] == {}, r["fallbacks"]
    assert r["meta twins"] == [True] * 22, r["meta twins"]
    # stack of transposed tensors: C++ (a contiguous output); of two dtypes or channels_last tensors: the Python path
    # (the meta kernel's promotion and layout)
    assert r["meta twins fast"] == {"embedding": 1, "embedding_dense_backward": 1, "index_select": 2,
                                    "nll_loss_forward": 4, "argmax": 5, "argmin": 2, "stack": 5}, r["meta twins fast"]
    # the CPU says "argmax():", the meta kernel behind dipu's Python path "argmax:"
    assert [e.split(" ", 1)[1] for e in r["argmax of nothing"]] == \
        ["Expected reduction dim 0 to have non-zero size."] * 2, r["argmax of nothing"]
    # every index tensor on the device: C++; the CPU index tensor of x[:, torch.tensor([1])]: the Python path
    assert r["indexed"] == [True] * 8, r["indexed"]
    assert r["indexed fast"] == {"index.Tensor": 4, "index_put_": 1, "index_put": 1, "_index_put_impl_": 4}, \
        r["indexed fast"]


STRIDED_CALLS = """
import json, torch, dipu
from dipu.kernels import cpp_wrappers
torch.manual_seed(0)
a, per_channel, other = torch.randn(2, 3, 4, 5), torch.randn(3, 1, 1), torch.randn(5, 4, 3)
column = torch.randn(2, 3, 1, 1)
aten = torch.ops.aten
cl = torch.channels_last
cases = {  # name: (the op whose C++ kernel the last call takes, the call)
    "channels_last + number": ("add.Tensor", lambda t: t(a.to(memory_format=cl)) + 1.5),
    "channels_last * per channel": ("mul.Tensor", lambda t: t(a.to(memory_format=cl)) * t(per_channel)),
    "per channel * channels_last": ("mul.Tensor", lambda t: t(per_channel) * t(a.to(memory_format=cl))),
    "transposed / contiguous": ("div.Tensor", lambda t: t(a.transpose(1, 3)) / t(other)),
    "expanded gradient / 4": ("div.Scalar", lambda t: aten.div.Scalar(t(column).expand(2, 3, 4, 5), 4)),
    "sliced * 2": ("mul.Tensor", lambda t: t(a)[:, :, ::2] * 2),
    "permuted * 0-dim tensor": ("mul.Tensor", lambda t: t(a.permute(2, 0, 3, 1)) * t(torch.tensor(3.0))),
    "exp of permuted": ("exp", lambda t: torch.exp(t(a.permute(2, 0, 3, 1)))),
    "compare of transposed": ("gt.Scalar", lambda t: t(a.transpose(2, 3)) > 0.5),
    "addcmul of layouts": ("addcmul", lambda t: torch.addcmul(t(a), t(a.to(memory_format=cl)),
                                                              t(a.transpose(1, 3)).transpose(1, 3), value=0.5)),
    "broadcast of two strided": ("add.Tensor", lambda t: t(a.transpose(0, 1))[:1] + t(a.transpose(0, 1))),
}
r = {}
for name, (op, fn) in cases.items():
    cpu = fn(lambda x: x)
    cpp_wrappers.reset_fast_calls()
    on_dipu = fn(lambda x: x.to("dipu"))
    r[name] = [cpu.stride() == on_dipu.stride(), cpu.dtype == on_dipu.dtype, torch.equal(cpu, on_dipu.cpu()),
               cpp_wrappers.fast_calls().get(op, 0) > 0]
print(json.dumps(r))
"""


def test_elementwise_kernels_given_strided_inputs_lay_out_their_outputs_as_the_cpu_in_cpp(python):
    """Note [Elementwise strides in C++]: channels_last, transposed, sliced and expanded operands, alone or with
    numbers, per-channel tensors and 0-dim tensors, give the CPU's strides and values, on the C++ path."""
    r = json.loads(python(STRIDED_CALLS).stdout.strip().splitlines()[-1])
    for case, checks in r.items():
        assert checks == [True] * 4, (case, "[strides, dtype, values, served in C++]", checks)


TRAINING_PATHS = """
import json, sys, torch, torch.nn.functional as F, dipu
sys.path.insert(0, {examples!r})
from models import GPT, GPTConfig, resnet50_like
from dipu.kernels import cpp_wrappers
from dipu.report.collect import op_records

def train(model, batch, loss_fn, optimizer, autocast=None, scaler=None):
    model, batch = model.to("dipu"), [t.to("dipu") for t in batch]
    opt = optimizer(model.parameters())
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("dipu", dtype=autocast or torch.float32, enabled=autocast is not None):
            loss = loss_fn(model, *batch)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    return model

torch.manual_seed(0)
images, labels = torch.randn(4, 3, 32, 32), torch.randint(10, (4,))
classify = lambda model, x, y: F.cross_entropy(model(x), y)
for sgd in ({{}}, {{"foreach": False}}, {{"fused": True}}):
    train(resnet50_like(10), (images, labels), classify, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, **sgd))
model = train(resnet50_like(10), (images, labels), classify, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
              torch.float16, torch.amp.GradScaler("dipu"))
x = images.to("dipu")
order = torch.randperm(4).to("dipu")
(model(x[order]).argmax(1) == labels.to("dipu")[order]).sum().item()  # examples/train.py's batching and accuracy
config = GPTConfig(vocab_size=64, seq_len=16, n_layer=2, n_head=2, d_model=32, dropout=0.1)
tokens = torch.randint(64, (4, 17))
language = lambda model, inputs, targets: model(inputs, targets)[1]
for adamw, autocast in (({{}}, None), ({{"foreach": False}}, None), ({{"fused": True}}, torch.bfloat16)):
    train(GPT(config), (tokens[:, :-1], tokens[:, 1:]), language, lambda p: torch.optim.AdamW(p, lr=1e-3, **adamw),
          autocast)

class Block(torch.nn.Module):  # a conv net of GroupNorm and padding, as image generators and U-Nets are built
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.body = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 8, 3), nn.GroupNorm(4, 8), nn.SiLU(),
                                  nn.ReplicationPad2d(1), nn.Conv2d(8, 8, 3), nn.GroupNorm(2, 8), nn.SiLU())
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        return self.head(F.pad(self.body(x), (1, 1, 1, 1)).mean((2, 3)))

for foreach in (None, False):  # clip_grad_norm_'s two paths: _foreach_norm, and linalg_vector_norm per tensor
    model = Block().to("dipu")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = images[:, :, :16, :16].to("dipu"), labels.to("dipu")
    for _ in range(2):
        opt.zero_grad()
        out = model(x)
        F.cross_entropy(out, y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=foreach)
        opt.step()
    (out.max(1).indices == y).sum().item()
fast = cpp_wrappers.fast_calls()
records = op_records()
native = {{name: r for name, r in records.items() if r["category"] == "native"}}
print(json.dumps({{"kernels": len(native), "python": {{n: [r["calls"], fast.get(n, 0)] for n, r in native.items()
                                                      if fast.get(n, 0) < r["calls"]}},
                  "fallbacks": {{n: r["fallback_calls"] for n, r in records.items() if r["fallback_calls"]}}}}))
"""


def test_resnet_gpt_and_group_norm_training_steps_take_no_python_wrapper(python, tmp_path):
    """Every call of a dipu kernel in a ResNet-50-like and a GPT training step (SGD with momentum for-loop,
    foreach and fused, fp16 autocast with GradScaler; AdamW for-loop, foreach and fused under bf16 autocast;
    train.py's x[order] batching and argmax accuracy) and in a conv net of GroupNorm and reflection, replication and
    constant padding (clip_grad_norm_ both ways, max(1) accuracy) is served by a C++ wrapper: the run report's native
    ops against dipu.kernels.cpp_wrappers.fast_calls()."""
    code = TRAINING_PATHS.format(examples=str(ROOT / "examples"))
    r = json.loads(python(code, env={"DIPU_REPORT": str(tmp_path)}).stdout.strip().splitlines()[-1])
    assert r["kernels"] > 30, r
    assert r["python"] == {}, f"calls of these ops took the Python wrapper ([calls, C++ calls]): {r['python']}"
    assert r["fallbacks"] == {}, r["fallbacks"]


LAYER_NORM_BITS = """
import json, torch, torch.nn.functional as F, dipu
from dipu.kernels import cpp_wrappers

def run(device, shape, norm, dtype, weight, bias):
    g = torch.Generator().manual_seed(1)
    x, dy = torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype)
    params = [torch.randn(norm, generator=g).to(dtype).to(device).requires_grad_() if p else None
              for p in (weight, bias)]
    leaf = x.to(device).requires_grad_()
    y, mean, rstd = torch.native_layer_norm(leaf, norm, *params, 1e-5)
    y.backward(dy.to(device))
    return [t.detach().cpu() for t in (y, mean, rstd, leaf.grad, *(p.grad for p in params if p is not None))]

r = {"same": [], "fast": {}}
for shape, norm, dtype in (((64, 1000), (1000,), torch.float32), ((4, 6, 8), (6, 8), torch.float32),
                           ((3, 40), (40,), torch.float64), ((8, 32), (32,), torch.bfloat16),
                           ((8, 32), (32,), torch.float16)):
    for weight, bias in ((True, True), (True, False), (False, False)):
        cpu, on_dipu = run("cpu", shape, norm, dtype, weight, bias), run("dipu", shape, norm, dtype, weight, bias)
        r["same"].append(all(c.shape == d.shape and c.dtype == d.dtype and torch.equal(c, d)
                             for c, d in zip(cpu, on_dipu)))
r["fast"] = {op: n for op, n in cpp_wrappers.fast_calls().items() if "layer_norm" in op}
print(json.dumps(r))
"""


@pytest.mark.parametrize("capability", ["machine", "default"])
def test_layer_norm_on_the_torch_library_gives_the_cpu_s_bits_with_its_cpu_kernel(python, capability):
    """The default library writes layer norm straight into its outputs with the CPU kernel ATen would pick
    (Note [ATen's CPU kernels, called directly] in diopi_impl/torch_cpp/cpu_kernels.h): the CPU's bits in
    every dtype, with and without weight and bias, whether ATEN_CPU_CAPABILITY holds ATen to its DEFAULT
    kernels (whose rounding differs from AVX2's on a 1000-wide row) or not."""
    env = {"ATEN_CPU_CAPABILITY": "default"} if capability == "default" else {}
    r = json.loads(python(LAYER_NORM_BITS, env=env).stdout.strip().splitlines()[-1])
    assert r["same"] == [True] * 15, r["same"]
    assert r["fast"] == {"native_layer_norm": 15, "native_layer_norm_backward": 15}, r["fast"]


LAZY_BITS = """
import json, torch, dipu
from dipu.diopi.context import Context
from dipu.kernels import registry
library = registry.registration.library
x = torch.randn(4, dtype=torch.complex64)
r = torch.randn(4)
ctx = Context(0)
results = {"library": library.name}
out = torch.empty(4, device="dipu")
negative = torch._neg_view(r.to("dipu"))
status = library.get("diopiAdd")(ctx, out, negative, r.to("dipu"), 1)
results["neg"] = [status, torch.equal(out.cpu(), torch._neg_view(r) + r)]
out = torch.empty(4, dtype=torch.complex64, device="dipu")
conjugate = x.to("dipu").conj()
status = library.get("diopiMul")(ctx, out, conjugate, x.to("dipu"))
results["conj"] = [status, torch.allclose(out.cpu(), x.conj() * x)]
print(json.dumps(results))
"""


def test_the_cpp_torch_library_honours_conjugate_and_negative_bits_given_to_it(python):
    """A function of the default library handed a lazily negated or conjugated view (by a C caller, a Python
    library building on it) computes with the bit, as the dispatcher resolves it (Note [ATen's CPU kernels
    without the dispatcher] in scripts/autogen/dest/aten_library.py): its CPU kernel alone would ignore it."""
    r = json.loads(python(LAZY_BITS).stdout.strip().splitlines()[-1])
    assert r == {"library": "torch_cpp", "neg": [0, True], "conj": [0, True]}, r


RANDOM_CALLS = """
import json, torch, torch.nn.functional as F, dipu
from dipu.kernels import cpp_wrappers
x = torch.randn(6, 7)
cpp_wrappers.reset_fast_calls()
draws = {}
for device in ("cpu", "dipu"):
    torch.manual_seed(3)
    leaf = x.detach().to(device).requires_grad_()
    y = F.dropout(leaf, 0.3)
    y.backward(torch.ones_like(y))
    mine = torch.Generator(device).manual_seed(5)
    draws[device] = [y.detach(), leaf.grad, F.dropout(x.to(device), 0.5),
                     F.dropout(x.to(device).t(), 0.5),  # not contiguous: the Python path
                     torch.empty(5, device=device).uniform_(-2, 3), torch.empty(5, device=device).normal_(1, 2),
                     torch.bernoulli(torch.full((9,), 0.4, device=device)),
                     torch.rand(4, device=device, generator=mine),
                     torch.randn(3, 2, device=device).exponential_()]
r = {"same": [torch.equal(c, d.cpu()) for c, d in zip(draws["cpu"], draws["dipu"])]}
r["fast"] = {op: n for op, n in cpp_wrappers.fast_calls().items()
             if any(k in op for k in ("dropout", "uniform", "normal", "bernoulli", "exponential"))}
# functional _foreach_ ops, whose DIOPI functions allocate their outputs (Note [Outputs a function allocates, in C++])
cpp_wrappers.reset_fast_calls()
parts = [torch.rand(3, 4) + 0.5, torch.rand(5) + 0.5, torch.rand(2, 2, dtype=torch.float64) + 0.5]
lists = {}
for device in ("cpu", "dipu"):
    xs = [t.to(device) for t in parts]
    lists[device] = [*torch._foreach_sqrt(xs), *torch._foreach_add(xs, xs, alpha=2), *torch._foreach_norm(xs),
                     *torch._foreach_norm(xs, 3, dtype=torch.float64), *torch._foreach_mul(xs, 1.5)]
r["foreach"] = [c.dtype == d.dtype and c.stride() == d.stride() and torch.allclose(c, d.cpu())
                for c, d in zip(lists["cpu"], lists["dipu"])]
r["foreach fast"] = {op: n for op, n in cpp_wrappers.fast_calls().items() if op.startswith("_foreach")}
# arange's C++ shape rule (a GPT's positions), and a fused optimizer step with an empty list (no amsgrad)
cpp_wrappers.reset_fast_calls()
ranges = {d: [torch.arange(5, device=d), torch.arange(1, 4, 0.5, device=d), torch.arange(0, 10, 3, device=d),
              torch.arange(2.5, device=d), torch.arange(3, 3, device=d)] for d in ("cpu", "dipu")}
r["arange"] = [c.dtype == d.dtype and torch.equal(c, d.cpu()) for c, d in zip(ranges["cpu"], ranges["dipu"])]
steps = {}
for device in ("cpu", "dipu"):
    params = [torch.ones(3, device=device, requires_grad=True), torch.ones(2, 2, device=device, requires_grad=True)]
    for q in params:
        q.grad = torch.full_like(q, 0.5)
    torch.optim.AdamW(params, lr=0.1, fused=True).step()
    torch.optim.Adagrad(params, lr=torch.tensor(0.1, device=device), lr_decay=0.01, weight_decay=0.1, fused=True).step()
    steps[device] = params
r["fused"] = [torch.allclose(c.detach(), d.detach().cpu()) for c, d in zip(steps["cpu"], steps["dipu"])]
r["arange fast"] = {op: n for op, n in cpp_wrappers.fast_calls().items() if "arange" in op or "fused" in op}
try:
    torch.empty(3, device="dipu").uniform_(generator=torch.Generator())
except RuntimeError as error:
    r["cpu generator"] = str(error).splitlines()[0]
r["fallbacks"] = dipu.fallback_counts()
print(json.dumps(r))
"""


def test_dropout_random_arange_and_optimizer_ops_take_the_cpp_path_with_the_cpu_s_results(python):
    """Dropout and the random kernels run in C++ (Note [Generators in C++]) and draw from the dipu generator's
    native generator, so one seed gives the CPU's numbers, with the default generator and a generator given;
    the functional _foreach_ ops, whose functions allocate their outputs, arange, and fused optimizer steps
    (AdamW with an empty list, Adagrad with a tensor lr) run in C++ with the CPU's results."""
    r = json.loads(python(RANDOM_CALLS).stdout.strip().splitlines()[-1])
    assert r["foreach"] == [True] * 15, r["foreach"]
    assert r["arange"] == [True] * 5 and r["fused"] == [True, True], (r["arange"], r["fused"])
    assert r["arange fast"] == {"arange.start_out": 5, "_fused_adamw_": 1, "_fused_adagrad_.tensor_lr": 1}, \
        r["arange fast"]
    assert r["foreach fast"] == {"_foreach_sqrt": 1, "_foreach_add.List": 1, "_foreach_norm.Scalar": 2,
                                 "_foreach_mul.Scalar": 1}, r["foreach fast"]
    assert r["same"] == [True] * 9, r["same"]
    assert r["fast"].get("native_dropout") == 2 and r["fast"].get("native_dropout_backward") == 1, r["fast"]
    assert {"uniform_", "normal_", "exponential_"} <= set(r["fast"]), r["fast"]
    assert "generator" in r["cpu generator"] and "cpu" in r["cpu generator"], r["cpu generator"]
    assert r["fallbacks"] == {}, r["fallbacks"]


def test_a_cpp_op_library_that_cannot_be_loaded_leaves_its_python_twin_serving(monkeypatch):
    """A built twin this process cannot load (a symbol this torch lacks) is a warning, and the Python library
    serves every op (Note [C++ op library cache] in dipu/diopi/cpp_build.py), as when no compiler is found."""
    from dipu.diopi import c_library, cpp_build
    from dipu.diopi_impl import torch_cpp
    from dipu.diopi_impl.torch import library as python_library

    def unloadable(path, source, dipu_header=False):
        raise c_library.CLibraryError(f"{source}: undefined symbol: _ZN2at6native16DispatchStubImpl")

    monkeypatch.setattr(c_library, "load", unloadable)
    with pytest.warns(UserWarning, match="could not be built or loaded, so op library 'torch' serves every op"):
        assert cpp_build.twin("torch_cpp", python_library, torch_cpp.HANDWRITTEN) is python_library


REDUCTION_CALLS = """
import json, torch, dipu
from dipu.kernels import cpp_wrappers
x = torch.randn(5, 6)
m = x > 0
calls = {
    "max.dim": lambda t, b: t.max(1), "min.dim": lambda t, b: t.min(0, keepdim=True), "amin": lambda t, b: t.amin(1),
    "cumsum": lambda t, b: t.cumsum(1, dtype=torch.float64), "any.dim": lambda t, b: b.any(1),
    "all.dim": lambda t, b: b.all(0, keepdim=True), "any": lambda t, b: b.any(), "all": lambda t, b: b.all(),
}
cpp_wrappers.reset_fast_calls()
same = {}
for op, call in calls.items():
    got, want = call(x.to("dipu"), m.to("dipu")), call(x, m)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    same[op] = all(g.device.type == "dipu" and torch.equal(g.cpu(), w) for g, w in zip(got, want))
print(json.dumps({"same": same, "fast": cpp_wrappers.fast_calls(), "fallbacks": dipu.fallback_counts()}))
"""


def test_reductions_with_a_derived_keepdim_or_an_optional_dim_take_the_cpp_path_with_the_cpu_s_results(python):
    """The torch library's derived rows (Note [Derived arguments] in dipu/diopi/library.py) are in its C++ twin, so
    max/min/amin over a dim and cumsum with a dtype run in C++; DIOPI's optional dim passes by address, so
    any/all over a dim and over everything run in C++ too; each with the CPU's values, kept dims and dtype."""
    r = json.loads(python(REDUCTION_CALLS).stdout.strip().splitlines()[-1])
    assert all(r["same"].values()), r["same"]
    assert set(r["fast"]) == set(r["same"]), r["fast"]
    assert r["fallbacks"] == {}, r["fallbacks"]


BOXED_CALLS = """
import json, torch, dipu
from dipu.kernels import cpp_wrappers, registry
aten = torch.ops.aten
x, y = torch.randn(4, 5), torch.randn(4, 5)
a, b = x.to("dipu"), y.to("dipu")
cpp_wrappers.reset_fast_calls()
same = {}
with torch.inference_mode():  # no autograd kernel unboxes the call on its way: the dipu kernel is called boxed
    same["add.Tensor"] = torch.equal(aten.add.Tensor(a, b, alpha=2).cpu(), x + 2 * y)
    values, indices = aten.max.dim(a, 1, True)
    want = x.max(1, True)
    same["max.dim"] = torch.equal(values.cpu(), want.values) and torch.equal(indices.cpu(), want.indices)
    c = a.clone()
    same["add_.Tensor"] = aten.add_.Tensor(c, b) is c and torch.equal(c.cpu(), x + y)
    out = torch.empty(0, device="dipu")
    same["add.out"] = aten.add.out(a, b, out=out) is out and torch.equal(out.cpu(), x + y)
    parts = [a.clone(), b.clone()]
    same["_foreach_add_.Scalar"] = aten._foreach_add_.Scalar(parts, 1.0) is None and torch.equal(parts[1].cpu(), y + 1)
boxed = cpp_wrappers.fast_calls()
cpp_wrappers.reset_fast_calls()
mask = a > 0
same["bitwise_not"] = torch.equal((~mask).cpu(), ~(x > 0))  # autograd's boxed not-implemented fallback on its way
a + b
print(json.dumps({"same": same, "boxed fast": boxed, "fast": cpp_wrappers.fast_calls(),
                  "installed": sorted(set(same) & set(registry.registration.cpp_kernels))}))
"""


def test_a_boxed_call_of_a_cpp_wrapper_s_op_takes_the_cpp_path_with_the_cpu_s_answer(python):
    """Note [Boxed calls of a C++ wrapper]: called boxed (torch.ops in inference mode; an op whose autograd kernel is
    torch's boxed not-implemented fallback, as a mask's ~), an op whose C++ wrapper is installed returns what the CPU
    returns, in the schema's form (a tensor, a tuple, the tensor written, None), from the C++ path."""
    r = json.loads(python(BOXED_CALLS).stdout.strip().splitlines()[-1])
    assert r["installed"] == sorted(r["same"]), r["installed"]
    assert all(r["same"].values()), r["same"]
    assert r["boxed fast"] == {"add.Tensor": 1, "max.dim": 1, "add_.Tensor": 1, "add.out": 1,
                               "_foreach_add_.Scalar": 1}, r["boxed fast"]
    assert r["fast"] == {"gt.Scalar": 1, "bitwise_not": 1, "add.Tensor": 1}, r["fast"]


MODEL_OPS = """
import json, torch, torch.nn.functional as F, dipu
from dipu.kernels import cpp_wrappers
torch.manual_seed(0)
x, v = torch.randn(2, 6, 5, 7), torch.randn(7)
w, b, p = torch.linspace(0.5, 1.5, 6), torch.linspace(-1, 1, 6), torch.rand(2, 6, 5, 7)
target, pos = torch.rand(2, 6, 5, 7), torch.rand(7) + 0.5
cases = {
    "pad": lambda x: [F.pad(x, (1, 2, 0, 3), value=0.5), F.pad(x, (1, 2)), F.pad(x.long(), (1, 1), value=3),
                      F.pad(x, (1, 2, 2, 1), mode="reflect"), F.pad(x[0], (2, 3), mode="reflect"),
                      F.pad(x[None], (1, 0, 1, 2, 0, 1), mode="reflect"), F.pad(x, (1, 2, 2, 1), mode="replicate"),
                      F.pad(x[0], (0, 3), mode="replicate"), F.pad(x.contiguous(memory_format=torch.channels_last),
                                                                   (1, 1, 1, 1), mode="reflect")],
    "over a dim": lambda x: [*x.max(1), *x.min(-1, keepdim=True), *x.median(2), *x.round().mode(1),
                             *x.nanmedian(0, keepdim=True), x[0, 0, 0].max(0).values],
    "norms": lambda x: [torch.linalg.vector_norm(x, 2.0, (1, 2)), x.norm(), torch.linalg.vector_norm(x, 1, -1, True),
                        torch.linalg.vector_norm(x, float("inf")), torch.linalg.vector_norm(x, dtype=torch.float64)],
    "group norm": lambda x: [*torch.native_group_norm(x, w.to(x.device), b.to(x.device), 2, 6, 35, 3, 1e-5),
                             F.group_norm(x[:, :, 0], 2), F.group_norm(x, 6, w.to(x.device))],
    "losses": lambda x: [F.binary_cross_entropy(p.to(x.device), target.to(x.device)),
                         F.binary_cross_entropy(p.to(x.device), target.to(x.device), reduction="none"),
                         F.binary_cross_entropy(p.to(x.device), target.to(x.device), weight=target[0, 0].to(x.device)),
                         F.binary_cross_entropy_with_logits(x, target.to(x.device), pos_weight=pos.to(x.device)),
                         F.binary_cross_entropy_with_logits(x, target.to(x.device), reduction="sum"),
                         F.logsigmoid(x), F.cross_entropy(x, x.argmax(1)),
                         F.nll_loss(x, x.argmin(1), reduction="none", weight=w.to(x.device))],
    "statistics": lambda x: [x.var(), x.var((1, 2), keepdim=True), x.std(-1, correction=0), x.std((0, 3)),
                             x.double().var(1), torch.complex(x.cpu(), x.cpu()).to(x.device).var(2)],
    "shapes": lambda x: [x.repeat(2, 1, 1, 2), x[0, 0].repeat(3, 1, 2), x[0, 0, 0].repeat(0),
                         torch.dot(v.to(x.device), v.to(x.device)), torch.mv(x[0, 0], v.to(x.device)),
                         x[0, 0].double() @ v.double().to(x.device),
                         torch.baddbmm(x[0, :, :, :5], x[1, :, :, :4], x[0, :, :4, :5], beta=0.5, alpha=2),
                         torch.baddbmm(x[1, :, :, :3], x[0], x[1].transpose(1, 2)[:, :, :3].contiguous())],
    "sorting and indexing": lambda x: [
        *x.sort(1), *x.sort(dim=-1, descending=True, stable=True), F.one_hot(x[0, 0].argmax(0), 7),
        x.scatter(2, x.argsort(2)[:, :, :2].contiguous(), 1.0),
        x.index_fill(1, torch.tensor([0, 4]).to(x.device), -2.0), x.masked_scatter(x > 0, -x),
        torch.addmv(v[:5].to(x.device), x[0, 0], v.to(x.device)), torch.isin(x.round(), x[0, 0, 0].round()),
        torch.isin(x.round().long(), x[1, 2, 3].round().long(), invert=True)],
    "statistics and mean": lambda x: [*torch.var_mean(x, (1, 2)), *torch.std_mean(x, -1, keepdim=True),
                                      x.logsumexp(1), x.logsumexp((0, 3), keepdim=True), x.prod(1), x.prod(),
                                      *torch.aminmax(x, dim=1)],
    "out=": lambda x: [torch.amax(x, 1, out=torch.empty(0, device=x.device)),
                       torch.cat([x, x], 1, out=torch.empty(2, 12, 5, 7, device=x.device)),
                       torch.cumsum(x, 2, out=torch.empty(0, device=x.device)),
                       torch.clamp(x, -0.5, 0.5, out=torch.empty(2, 6, 5, 7, device=x.device)),
                       torch.stack([x[0], x[1]], out=torch.empty(0, device=x.device)),
                       torch.gather(x, 3, x.argsort(3)[..., :3].contiguous(), out=torch.empty(0, device=x.device)),
                       torch._C._nn.upsample_nearest2d(x, [10, 14], out=torch.empty(0, device=x.device)),
                       torch.index_select(x, 1, torch.tensor([4, 0]).to(x.device),
                                          out=torch.empty(0, device=x.device))],
}
r = {"same": {}, "fast": {}}
for name, case in cases.items():
    cpp_wrappers.reset_fast_calls()
    on_dipu = case(x.to("dipu"))
    r["fast"][name] = sorted(cpp_wrappers.fast_calls())
    r["same"][name] = [c.shape == d.shape and c.dtype == d.dtype and c.stride() == d.stride() and
                       torch.allclose(c, d.cpu(), rtol=1e-5, atol=1e-5) for c, d in zip(case(x), on_dipu)]
def trained(device):  # autograd's GroupNorm and padding backwards, clip_grad_norm_ per tensor
    torch.manual_seed(1)
    nn = torch.nn
    m = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(6, 8, 3), nn.GroupNorm(4, 8), nn.ReplicationPad2d((1, 0, 1, 0)),
                      nn.SiLU(), nn.AvgPool2d(2)).to(device)
    t = x.to(device).detach().requires_grad_()
    y = F.pad(m(t), (1, 1, 1, 1))
    y.square().sum().backward()
    total = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1, foreach=False)
    e = torch.nn.utils.parametrizations.weight_norm(nn.Linear(7, 3)).to(device)
    F.elu(e(t)).square().sum().backward()
    cell, gru = nn.LSTMCell(7, 5).to(device), nn.GRUCell(7, 5, bias=False).to(device)  # torch's fused cells on dipu
    hidden, state = cell(t[0, 0])
    (hidden.square().sum() + state.sum() + gru(t[0, 1], hidden).square().sum()).backward()
    drawn = torch.randint(3, 9, (4, 5), device=device, generator=torch.Generator(device).manual_seed(2))
    sampled = torch.multinomial(torch.linspace(0.1, 1, 7, device=device), 5,
                                generator=torch.Generator(device).manual_seed(4))
    return [y.detach(), t.grad, total, *(p.grad for p in m.parameters()), *(p.grad for p in e.parameters()), drawn,
            sampled, *(p.grad for p in cell.parameters()), *(p.grad for p in gru.parameters())]
cpp_wrappers.reset_fast_calls()
r["grads"] = [torch.allclose(c, d.cpu(), rtol=1e-4, atol=1e-4) for c, d in zip(trained("cpu"), trained("dipu"))]
r["fast"]["grads"] = sorted(cpp_wrappers.fast_calls())
r["fallbacks"] = dipu.fallback_counts()
print(json.dumps(r))
"""


def test_padding_reductions_over_a_dim_norms_group_norm_losses_and_statistics_take_the_cpp_path(python):
    """Ops of common models beyond ResNet and GPT take the C++ path with the CPU's values, shapes, dtypes and strides:
    padding of each mode (the C++ library's diopiPad, a string literal and a Scalar fill value passed to C),
    average pooling (impl_kernels.cpp's twin of its impl: body), max, min, median and mode over a dim (the max_dim
    twin), vector norms (diopiNorm), group norm forward and backward, the binary cross entropies, var and std,
    repeat, dot and mv (C++ twins of their meta kernels), baddbmm (Scalar factors as DIOPI's floats), sorting,
    scatter, index_fill, masked_scatter, addmv, var_mean, logsumexp, prod, aminmax, isin, weight norm, elu's
    backward, randint, multinomial and the fused LSTM and GRU cells (the C++ library's twins of the Python
    library's functions), and out= kernels given an output of the wrong size; what a twin leaves to the Python
    path (a channels_last reflection pad, an int64 or complex input) gives the CPU's answer too."""
    r = json.loads(python(MODEL_OPS).stdout.strip().splitlines()[-1])
    for name, same in r["same"].items():
        assert same and all(same), (name, same)
    assert r["grads"] and all(r["grads"]), r["grads"]
    fast = r["fast"]
    assert {"constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
            "replication_pad2d"} <= set(fast["pad"]), fast["pad"]
    assert {"max.dim", "min.dim", "median.dim", "mode", "nanmedian.dim"} <= set(fast["over a dim"]), fast
    assert {"linalg_vector_norm"} <= set(fast["norms"]), fast["norms"]
    assert {"native_group_norm"} <= set(fast["group norm"]), fast["group norm"]
    assert {"binary_cross_entropy", "binary_cross_entropy_with_logits", "log_sigmoid_forward",
            "nll_loss2d_forward"} <= set(fast["losses"]), fast["losses"]
    assert {"var.correction", "std.correction"} <= set(fast["statistics"]), fast["statistics"]
    assert {"repeat", "dot", "mv", "baddbmm"} <= set(fast["shapes"]), fast["shapes"]
    assert {"sort.stable", "sort", "scatter.value", "index_fill.int_Scalar", "masked_scatter", "addmv",
            "isin.Tensor_Tensor"} <= set(fast["sorting and indexing"]), fast["sorting and indexing"]
    assert {"var_mean.correction", "std_mean.correction", "logsumexp", "prod", "prod.dim_int",
            "aminmax"} <= set(fast["statistics and mean"]), fast["statistics and mean"]
    # out= kernels: their functional siblings' meta kernels give the shapes (not index_select's, which is Python's,
    # nor cat's and stack's, whose Tensor[] has no meta twin)
    assert {"amax.out", "cumsum.out", "clamp.out", "gather.out", "upsample_nearest2d.out"} <= set(fast["out="]), \
        fast["out="]
    assert {"native_group_norm_backward", "reflection_pad2d_backward", "replication_pad2d_backward",
            "linalg_vector_norm", "_weight_norm_interface", "_weight_norm_interface_backward", "elu_backward",
            "random_.from", "avg_pool2d", "avg_pool2d_backward", "multinomial", "_thnn_fused_lstm_cell",
            "_thnn_fused_lstm_cell_backward_impl", "_thnn_fused_gru_cell", "_thnn_fused_gru_cell_backward"} <= \
        set(fast["grads"]), fast["grads"]
    assert r["fallbacks"] == {}, r["fallbacks"]


def test_a_number_in_the_first_tensor_position_takes_the_cpp_path(python):
    """``1 - x`` is sub(wrapped 1, x) (torch's rsub), ``torch.add(2, x)`` add(wrapped 2, x): the C++ wrapper puts the
    number on the device in the dtype it promotes to, as the Python wrapper does (Note [Wrapped numbers in C++]), and
    gives the CPU's values and dtypes."""
    out = python("""
        import json, torch, dipu
        from dipu.kernels import cpp_wrappers
        x, i, h = torch.randn(4, 5), torch.arange(6), torch.randn(3).half()
        cases = [lambda t: 1 - t, lambda t: 1.5 - t, lambda t: torch.add(2, t, alpha=3), lambda t: torch.mul(2, t),
                 lambda t: (1.0 - (t > 0).float()) * torch.finfo(torch.float32).min]
        same = []
        cpp_wrappers.reset_fast_calls()
        for fn in cases:
            for t in (x, i, h):
                want, got = fn(t), fn(t.to("dipu"))
                same.append(got.dtype == want.dtype and torch.equal(got.cpu(), want))
        print(json.dumps({"same": same, "fast": cpp_wrappers.fast_calls()}))
    """).stdout
    r = json.loads(out.strip().splitlines()[-1])
    assert r["same"] == [True] * 15, r["same"]
    fast = r["fast"]
    assert fast["sub.Tensor"] == 3 * 3 and fast["add.Tensor"] == 3, fast  # 1 - t, 1.5 - t and the mask's 1.0 - t


NON_CONTIGUOUS = """
import json, torch, torch.nn.functional as F, dipu
from dipu.kernels import cpp_wrappers
aten = torch.ops.aten
g = torch.Generator().manual_seed(0)
x0, x1, x2 = (torch.randn(shape, generator=g) for shape in ((2, 3, 4, 5), (2, 5, 4, 3), (1, 1, 1, 5)))
layouts = {"channels_last": lambda d: x0.to(d).contiguous(memory_format=torch.channels_last),
           "transposed": lambda d: x1.to(d).transpose(1, 3), "expanded": lambda d: x2.to(d).expand(2, 3, 4, 5)}
unary = [aten.neg, aten.relu, aten.gelu, lambda x: aten.gelu(x, approximate="tanh"), aten.silu, aten.hardswish,
         aten.floor, aten.sign, lambda x: aten.hardtanh(x, -0.5, 0.5), aten.elu, aten.softplus, aten.mish,
         lambda x: x.sum((0, 2, 3), keepdim=True), lambda x: x.mean(1), lambda x: x.sum(), lambda x: x.amax(1),
         lambda x: aten.native_layer_norm(x, [5], None, None, 1e-5)[0],
         # backwards whose iterator reads self first (Rule.alike): C++ where gradient and input share a layout
         lambda x: aten.threshold_backward(x, x, 0.0), lambda x: aten.leaky_relu_backward(x, x, 0.01, False)]
binary = [aten.gelu_backward, aten.sigmoid_backward, aten.tanh_backward, aten.hardswish_backward,
          lambda g, x: aten.softplus_backward(g, x, 1, 20),
          lambda mask, x: aten.native_dropout_backward(x, mask, 2.0)]
same, served = [], []
contiguous = torch.randn(2, 3, 4, 5, generator=g)
for name, make in layouts.items():
    cases = [(fn, ()) for fn in unary]
    for fn in binary:  # a gradient laid out as the input, and a contiguous one
        cases += [(fn, (lambda d: make(d) * 2,)), (fn, (lambda d: contiguous.to(d),))]
    cases[-2:] = [(binary[-1], (lambda d: make(d) > 0,)), (binary[-1], (lambda d: contiguous.to(d) > 0,))]
    for fn, grad in cases:
        want = fn(*(make_grad("cpu") for make_grad in grad), make("cpu"))
        args = [*(make_grad("dipu") for make_grad in grad), make("dipu")]
        cpp_wrappers.reset_fast_calls()
        got = fn(*args)
        same.append(got.stride() == want.stride() and got.dtype == want.dtype and
                    torch.allclose(got.cpu(), want, rtol=1e-6, atol=1e-7))
        served.append(sum(cpp_wrappers.fast_calls().values()) == 1)
# a contiguous gradient of a channels_last input: the iterator's order decides, so the meta kernel's layout (Python)
x, grad = layouts["channels_last"], torch.randn(2, 3, 4, 5, generator=g)
want = aten.threshold_backward(grad, x("cpu"), 0.0)
cpp_wrappers.reset_fast_calls()
got = aten.threshold_backward(grad.to("dipu"), x("dipu"), 0.0)
mixed = [got.stride() == want.stride(), torch.equal(got.cpu(), want), cpp_wrappers.fast_calls() == {}]
print(json.dumps({"same": same, "served": served, "mixed": mixed}))
"""


def test_pointwise_ops_and_reductions_of_non_contiguous_tensors_take_the_cpp_path(python):
    """A channels_last, transposed or expanded input (a channels_last CNN's activations, ConvNeXt's permuted blocks,
    a reduction's gradient): pointwise ops and their backwards lay out their output as TensorIterator does, and
    reductions and layer norm contiguously, on the C++ path, with the CPU's strides and values."""
    r = json.loads(python(NON_CONTIGUOUS).stdout.strip().splitlines()[-1])
    assert r["same"] == [True] * len(r["same"]), r["same"]
    assert r["served"] == [True] * len(r["served"]), r["served"]
    assert r["mixed"] == [True, True, True], r["mixed"]
