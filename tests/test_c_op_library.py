"""C op libraries (dipu/diopi/c_library.py, dipu/csrc/diopi_rt.cpp): a DIOPI library written in C,
compiled here with the machine's C compiler against DeepLink's own headers (when a snapshot of
DeepLink-org/DIOPI is at hand) and against dipu's, loaded with DIPU_DIOPI_IMPL in fresh processes.

The library (tests/c_libraries/tiny_diopi.c) does float32 add, mul, relu, mm and nonzero on
contiguous tensors, and answers diopiForceFallbackToCPU for the rest."""

import json
import re
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "c_libraries" / "tiny_diopi.c"
DIPU_INCLUDE = ROOT / "dipu" / "include"
# A snapshot of DeepLink-org/DIOPI (a bare git directory) where the development machine has one.
DEEPLINK = Path(os.environ.get("DIPU_DEEPLINK_DIOPI_GIT", "/work/.mirror/DeepLink-org+DIOPI/repo"))
COMPILER = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
TEST_VARS = ("DIPU_DIOPI_IMPL", "DIPU_DUMP_OP_ARGS", "DIPU_AUTOCOMPARE_OPS_LIST", "DIPU_FORCE_FALLBACK_OPS_LIST",
             "DIPU_AUTOCOMPARE_VERBOSE", "DIPU_AUTOCOMPARE_STRICT")

pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C compiler")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for var in TEST_VARS:
        monkeypatch.delenv(var, raising=False)


def deeplink_headers(directory: Path) -> Path | None:
    """DeepLink's proto headers, extracted from the snapshot into ``directory`` (None without one)."""
    if not (DEEPLINK / "HEAD").exists():
        return None
    for name in ("diopirt.h", "functions.h"):
        text = subprocess.run(["git", "--git-dir", str(DEEPLINK), "show", f"HEAD:proto/include/diopi/{name}"],
                              capture_output=True, text=True, check=True).stdout
        (directory / "diopi").mkdir(parents=True, exist_ok=True)
        (directory / "diopi" / name).write_text(text)
    return directory


def compile_library(tmp_path: Path, headers: str, source: Path = SOURCE, defines=()) -> Path:
    """``source`` built as a shared library against ``headers``: "deeplink", "dipu" or "plain" (dipu's
    diopirt.h alone, for a library declaring its functions itself)."""
    if headers == "deeplink":
        include = deeplink_headers(tmp_path / "deeplink")
        if include is None:
            pytest.skip("no snapshot of DeepLink-org/DIOPI here (CI compiles against dipu's headers)")
        flags = [f"-I{include}", "-DWITH_FUNCTIONS_H"]
    else:  # dipu's diopirt.h, and the generated functions.h once there is one ("plain": diopirt.h only)
        flags = [f"-I{DIPU_INCLUDE}", "-std=c11", "-pedantic"]
        if headers == "dipu" and (DIPU_INCLUDE / "diopi" / "functions.h").exists():
            flags.append("-DWITH_FUNCTIONS_H")
    target = tmp_path / f"lib{source.stem}_{headers}{''.join(d.split('=')[0] for d in defines)}.so"
    subprocess.run([COMPILER, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", *flags,
                    *(f"-D{d}" for d in defines), str(source), "-o", str(target)], check=True)
    return target


COMPUTE = """
import json, torch, dipu
torch.manual_seed(0)
x, y, m = torch.randn(5, 6), torch.randn(5, 6), torch.randn(6, 3)
dx, dy, dm = x.to("dipu"), y.to("dipu"), m.to("dipu")
v = torch.tensor([0.0, 1.5, 0.0, -2.0])
results = {
    "add": torch.equal((dx + dy).cpu(), x + y),
    # x + 3 * y: torch's CPU kernel may fuse the multiply-add (one rounding fewer): a few ulps apart
    "add_alpha": torch.allclose(torch.add(dx, dy, alpha=3).cpu(), torch.add(x, y, alpha=3), rtol=1e-6, atol=1e-6),
    "mul": torch.equal((dx * dy).cpu(), x * y),
    "relu": torch.equal(torch.relu(dx).cpu(), torch.relu(x)),
    "mm": torch.allclose((dx @ dm).cpu(), x @ m, rtol=1e-6, atol=1e-6),
    "nonzero": torch.equal(torch.nonzero(v.to("dipu")).cpu(), torch.nonzero(v)),
}
native = dict(dipu.fallback_counts())
results["add64"] = torch.equal((dx.double() + dy.double()).cpu(), x.double() + y.double())
results["sub"] = torch.equal((dx - dy).cpu(), x - y)  # not in the library: the Python library's
print(json.dumps({"results": results, "native": native, "after": dipu.fallback_counts()}))
"""


@pytest.mark.parametrize("headers", ["deeplink", "dipu"])
def test_a_c_library_computes_and_leaves_the_rest_to_the_python_library_and_the_fallback(
        python, tmp_path, headers):
    library = compile_library(tmp_path, headers)
    out = json.loads(python(COMPUTE, env={"DIPU_DIOPI_IMPL": str(library)}).stdout.strip().splitlines()[-1])
    assert all(out["results"].values()), out["results"]
    # add, mul, relu, mm and nonzero ran in C: nothing went through the CPU fallback until the
    # float64 add, which the library answers diopiForceFallbackToCPU.
    assert out["native"] == {}, out["native"]
    assert out["after"] == {"add.Tensor": 1}, out["after"]


def test_the_c_functions_are_the_ones_called(python, tmp_path):
    """A diopiMul 1% wrong is named by autocompare; the level-1 dump names the DIOPI functions."""
    library = compile_library(tmp_path, "dipu", defines=["MUL_FACTOR=1.01f"])
    code = """
        import torch, dipu
        x = torch.rand(4, 8, device="dipu") + 1
        with dipu.autocompare("mul.*|add.*") as run:
            x * x; x + x
        print("mismatched:", sorted({m.op for m in run.mismatches}))
    """
    out = python(code, env={"DIPU_DIOPI_IMPL": str(library)}).stdout
    assert "mismatched: ['mul.Tensor']" in out, out
    dump = python("import torch; x = torch.ones(3, device='dipu'); x * x; torch.relu(x)",
                  env={"DIPU_DIOPI_IMPL": str(library), "DIPU_DUMP_OP_ARGS": "1"}).stdout
    assert ":mul.Tensor  diopiMul" in dump and ":relu  diopiRelu" in dump, dump


def test_a_vendor_naming_a_c_library_gets_the_fallback_for_what_it_lacks(python, tmp_path):
    """Without a Python library under it, a function the C library lacks is the CPU fallback's."""
    library = compile_library(tmp_path, "dipu")
    code = f"""
        import torch, dipu
        from dipu._core import vendor
        from dipu.kernels import registry
        vendor().diopi_impl = {str(library)!r}
        registry.register_active()
        x = torch.tensor([1.0, -2.0], device="dipu")
        dipu.reset_fallback_counts()
        assert torch.equal((x + x).cpu(), torch.tensor([2.0, -4.0]))
        assert torch.equal((x - x).cpu(), torch.zeros(2))
        print(sorted(dipu.fallback_counts()))
    """
    ran_on_cpu = python(code).stdout.strip().splitlines()[-1]
    assert ran_on_cpu in ("['sub.out']", "['sub.Tensor']"), ran_on_cpu  # sub.Tensor runs as sub.out


def test_a_status_error_carries_the_library_s_message(python, tmp_path):
    library = compile_library(tmp_path, "dipu")
    code = """
        import torch
        try:
            torch.mm(torch.ones(2, 3, device="dipu"), torch.ones(4, 2, device="dipu"))
        except RuntimeError as error:
            print(error)
    """
    out = python(code, env={"DIPU_DIOPI_IMPL": str(library)}).stdout
    assert "diopiMm failed with diopiErrorOccurred" in out and "input is 2x3, mat2 is 4x2" in out, out


def test_a_tensor_of_another_device_is_refused_and_a_cpu_scalar_moved_before_the_c_call(python):
    """Note [Tensors a C library is handed]: the library (the reference C one) never reads host memory as the
    device's."""
    code = """
        import torch, dipu
        x = torch.rand(2, 3, device="dipu")
        for name, call in [("other of diopiAdd", lambda: x + torch.ones(2, 3)),
                           ("mat2 of diopiMm", lambda: torch.mm(x, torch.ones(3, 2))),
                           ("out of diopiAdd", lambda: torch.add(x, x, out=torch.empty(2, 3)))]:
            try:
                call()
                raise AssertionError(name + ": no error")
            except RuntimeError as error:
                assert str(error) == ("Expected all tensors to be on the same device, but found at least two "
                                      f"devices, dipu:0 and cpu! (when checking argument {name})"), str(error)
        dipu.reset_fallback_counts()
        scaled = x * torch.tensor(3.0)  # a 0-dim CPU tensor stands beside any device's, as in ATen
        assert torch.equal(scaled.cpu(), x.cpu() * 3) and dipu.fallback_counts() == {}
        print("ok")
    """
    assert python(code, env={"DIPU_DIOPI_IMPL": "ref_c"}).stdout.strip().endswith("ok")


def test_the_runtime_functions_answer_from_the_call(python, tmp_path):
    """diopiNormalInp in the tiny library is a probe writing what the runtime tells it (see its source)."""
    library = compile_library(tmp_path, "dipu")
    code = """
        import torch
        base = torch.zeros(16, device="dipu:1")
        with torch.dipu.device(1), torch.profiler.profile() as profile:
            base[3:15].normal_()
        print(base[3:13].tolist())
        print(any(event.name == "tiny_probe" for event in profile.events()))
    """
    lines = python(code, env={"DIPU_DIOPI_IMPL": str(library)}).stdout.strip().splitlines()
    stream_is_default, offset, nbytes, itemsize, device, state_numel, index, sparse, offset_from_pointers, \
        recorded = eval(lines[-2])
    assert (stream_is_default, offset, nbytes, itemsize, device, index, sparse, offset_from_pointers, recorded) == \
        (1, 3, 64, 4, 1, 1, 0, 3, 1)
    assert state_numel > 0  # the generator's state, read and written back
    assert lines[-1] == "True"  # diopiRecordStart/End made a profiler range


def import_error(python, value: str) -> str:
    """The last line of the traceback of ``import dipu`` with DIPU_DIOPI_IMPL=value."""
    proc = python("import dipu", env={"DIPU_DIOPI_IMPL": value, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, check=False)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr.strip().splitlines()[-1]


def test_unusable_libraries_are_refused_naming_the_file_and_the_variable(python, tmp_path):
    missing = tmp_path / "libnothere.so"
    assert import_error(python, str(missing)).endswith(
        f"DIPU_DIOPI_IMPL={missing}: the C op library {missing} does not exist")

    unrelated = tmp_path / "unrelated.c"
    unrelated.write_text("int answer(void) { return 42; }\n")
    message = import_error(python, str(compile_library(tmp_path, "dipu", unrelated)))
    assert f"DIPU_DIOPI_IMPL={tmp_path}" in message and "exports no DIOPI function" in message, message

    unresolved = tmp_path / "unresolved.c"
    unresolved.write_text("int diopiNoSuchRuntimeFunction(void);\n"
                          "int diopiAdd(void) { return diopiNoSuchRuntimeFunction(); }\n")
    message = import_error(python, str(compile_library(tmp_path, "dipu", unresolved)))
    assert "cannot load the C op library" in message and "diopiNoSuchRuntimeFunction" in message, message


def test_the_headers_compile_as_c_and_cxx(tmp_path):
    """dipu's diopirt.h (and functions.h when generated) is valid C11 and C++11, its asserts hold."""
    source = tmp_path / "headers.c"
    source.write_text("#include <diopi/diopirt.h>\n"
                      + ("#include <diopi/functions.h>\n" if (DIPU_INCLUDE / "diopi" / "functions.h").exists() else "")
                      + "int main(void) { "
                        "return diopiForceFallbackToCPU == 14 && diopi_dtype_float32 == 9 ? 0 : 1; }\n")
    subprocess.run([COMPILER, "-std=c11", "-Wall", "-Werror", "-pedantic", f"-I{DIPU_INCLUDE}", str(source),
                    "-o", str(tmp_path / "c")], check=True)
    subprocess.run([str(tmp_path / "c")], check=True)
    cxx = shutil.which("c++")
    if cxx:
        subprocess.run([cxx, "-std=c++11", "-Wall", "-Werror", "-x", "c++", f"-I{DIPU_INCLUDE}", str(source),
                        "-o", str(tmp_path / "cxx")], check=True)
        subprocess.run([str(tmp_path / "cxx")], check=True)


FUSED_ADAMW = """
import ctypes, json, torch, dipu
calls = ctypes.c_longlong.in_dll(ctypes.CDLL({library!r}), "fused_adamw_calls")

def step(device, amp):
    lists = [[torch.full((3,), value, device=device)] for value in (1.0, 2.0, 0.0, 0.0)]
    steps = [torch.ones((), device=device)]  # the optimizer counts the step before calling it
    scaler = dict(grad_scale=torch.tensor(2.0, device=device), found_inf=torch.tensor(0.0, device=device))
    torch._fused_adamw_(*lists, [], steps, lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8,
                        amsgrad=False, maximize=False, **(scaler if amp else {{}}))
    return lists[0][0].cpu()

r = {{}}
for amp in (False, True):
    before = calls.value
    same = torch.equal(step("dipu", amp), step("cpu", amp))
    r[f"amp={{amp}}"] = [calls.value - before, same]
r["fallback"] = dipu.fallback_counts()
print(json.dumps(r))
"""


def test_a_deeplink_fused_adamw_is_not_called_under_amp(python, tmp_path):
    """A DeepLink-form diopiFusedAdamW would ignore grad_scale and found_inf: with them, the CPU fallback takes
    the step instead (Note [diopiFusedAdamW under AMP]); without them, the library is called."""
    library = compile_library(tmp_path, "plain", ROOT / "tests" / "c_libraries" / "deeplink_fused_adamw.c")
    out = json.loads(python(FUSED_ADAMW.format(library=str(library)), env={"DIPU_DIOPI_IMPL": str(library)})
                     .stdout.strip().splitlines()[-1])
    assert out["amp=False"] == [1, True], out
    assert out["amp=True"] == [0, True], out
    assert out["fallback"] == {"_fused_adamw_": 2}, out


# ---- the reference C op library (diopi_impl/ref_c, DIPU_DIOPI_IMPL=ref_c) ---------------------------
GPT_STEPS = """
import collections, json, sys, torch
sys.path.insert(0, {examples!r})
from models import GPT, GPTConfig
from dipu.diopi import c_library
from dipu.diopi.context import Status
from dipu.kernels import registry
import dipu

served = collections.Counter()  # how each DIOPI call was served
make = c_library.trampoline

def counting(function, address, *last_error, **options):
    call = make(function, address, *last_error, **options)
    def counted(ctx, *args):
        status = call(ctx, *args)
        served["C" if status == Status.SUCCESS else "C refused"] += 1
        return status
    counted.c_address = address
    return counted

c_library.trampoline = counting
from dipu.diopi.library import OpLibrary
original_get = OpLibrary.get

def get(self, name):  # the Python library's functions, counted too
    function = original_get(self, name)
    if function is None or hasattr(function, "c_address") or hasattr(function, "counted"):
        return function
    def counted(*args):
        served["Python"] += 1
        return function(*args)
    counted.counted = True
    return counted

OpLibrary.get = get
registry.register_active()  # again, with counting functions

def train(device):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=32, seq_len=16, n_layer=1, n_head=2, d_model=32, dropout=0.1)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    data = torch.randint(0, 32, (4, 17), generator=torch.Generator().manual_seed(1)).to(device)
    losses = []
    for step in range(3):
        torch.manual_seed(step)
        _, loss = model(data[:, :-1], data[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses

cpu = train("cpu")
dipu.reset_fallback_counts()
from dipu.kernels import cpp_wrappers
cpp_wrappers.reset_fast_calls()
on_dipu = train("dipu")
served["C via C++ wrappers"] = sum(cpp_wrappers.fast_calls().values())  # calls no trampoline saw
print(json.dumps({{"cpu": cpu, "dipu": on_dipu, "served": served, "fallback": dipu.fallback_counts()}}))
"""


def test_the_reference_c_library_trains_the_example_gpt_as_the_cpu(python):
    """Most DIOPI calls of a GPT training step run in ref_c, and the losses are the CPU's within float32
    rounding: each kernel computes in double and rounds once (Note [Reference C library numerics]), so
    the losses of three AdamW steps differ from the CPU's by about 1e-6 relative; 1e-4 leaves room for
    that and still fails on a kernel 1% off."""
    code = GPT_STEPS.format(examples=str(ROOT / "examples"))
    out = json.loads(python(code, env={"DIPU_DIOPI_IMPL": "ref_c"}).stdout.strip().splitlines()[-1])
    for cpu, on_dipu in zip(out["cpu"], out["dipu"]):
        assert abs(cpu - on_dipu) <= 1e-4 * abs(cpu), (out["cpu"], out["dipu"])
    # Most calls run in C; the rest are dropout (random: the Python library's, which follows the CPU's
    # generator) and the functions whose C form differs until the proto is DeepLink's.
    served = out["served"]
    in_c = served.get("C", 0) + served.get("C via C++ wrappers", 0)
    assert in_c >= 0.8 * sum(served.values()), served
    assert sum(out["fallback"].values()) <= served.get("C refused", 0), out["fallback"]


FAST_PATHS = """
import json, torch, dipu
torch.manual_seed(0)
def both(fn, *tensors):
    return fn(*tensors), fn(*(t.to("dipu") for t in tensors)).cpu()
def exact(fn, *tensors):
    cpu, on_dipu = both(fn, *tensors)
    return torch.equal(cpu, on_dipu)
def close(fn, *tensors, rtol):
    cpu, on_dipu = both(fn, *tensors)
    return torch.allclose(cpu, on_dipu, rtol=rtol, atol=rtol * cpu.abs().max().item())
a, b, c = torch.randn(37, 70), torch.randn(37, 70), torch.randn(70, 19)
r = {
    # one correctly rounded float operation: the dense loops give the CPU's bits
    "add": exact(torch.add, a, b), "sub": exact(torch.sub, a, b), "mul": exact(torch.mul, a, b),
    "div": exact(torch.div, a, b), "relu": exact(torch.relu, a),
    # ref_c's sqrt is correctly rounded (numpy's bits); the CPU's vectorized one is not always: 1 ulp
    "sqrt": close(torch.sqrt, a.abs(), rtol=2.4e-7),
    "masked_fill": exact(lambda x, m: x.masked_fill(m, -1.5), a, a > 0.3),
    # float accumulation over k = 70 (and the tile's remainders: 37 rows, 19 columns; a transposed mat2)
    "mm": close(torch.mm, a, c, rtol=1e-5),
    "mm_transposed": close(lambda x, y: x @ y.t(), a, b, rtol=1e-5),
    "bmm": close(torch.bmm, a.view(1, 37, 70).expand(3, 37, 70).contiguous(), c.expand(3, 70, 19).contiguous(), rtol=1e-5),
    "addmm": close(lambda bias, x, y: torch.addmm(bias, x, y), c[0], a, c, rtol=1e-5),
    # ref_expf within 1.1 ulp, sums in double
    "softmax": close(lambda x: torch.softmax(x * 8, -1), a, rtol=1e-5),
    "log_softmax": close(lambda x: torch.log_softmax(x * 8, -1), a, rtol=1e-5),
    "softmax_masked": close(lambda x: torch.softmax(x.masked_fill(x > 1, float("-inf")), -1), a, rtol=1e-5),
    # block reductions in double: all, leading, trailing and middle dims
    "sum": close(torch.sum, a, rtol=1e-6),
    "sum_0": close(lambda x: x.sum(0), a, rtol=1e-6),
    "mean_1": close(lambda x: x.mean(1), a, rtol=1e-6),
    "sum_middle": close(lambda x: x.view(37, 7, 10).sum(1), a, rtol=1e-6),
    # a 0-dim tensor takes dim 0 or -1, as on the CPU
    "sum_0dim_last": close(lambda x: x.sum(-1), a[0, 0], rtol=1e-6),
    "mean_0dim_last": close(lambda x: x.mean([-1]), a[0, 0], rtol=1e-6),
}
r["fallback"] = dipu.fallback_counts()
print(json.dumps(r))
"""  # noqa: E501


def test_the_reference_c_library_s_fast_paths_give_the_cpu_s_results(python):
    """Contiguous float32 operands take ref_c's float loops (Note [Reference C library fast paths]): exactly the
    CPU's result where one float operation is correctly rounded; float GEMM accumulation within 1e-5 of the
    largest value (about sqrt(70) float32 ulps is 5e-7); softmax within 1e-5 (ref_expf is within 1.1 ulp);
    sums within 1e-6 (double accumulators against the CPU's float ones)."""
    out = json.loads(python(FAST_PATHS, env={"DIPU_DIOPI_IMPL": "ref_c"}).stdout.strip().splitlines()[-1])
    assert out.pop("fallback") == {}
    assert [case for case, ok in out.items() if not ok] == [], out


def test_a_c_library_is_built_once_per_version_of_its_sources(tmp_path, monkeypatch):
    from dipu.diopi import c_build

    monkeypatch.setenv("DIPU_CACHE_DIR", str(tmp_path / "cache"))
    sources = tmp_path / "lib"
    sources.mkdir()
    (sources / "one.c").write_text("int diopiAnswer(void) { return 1; }\n")
    first = c_build.build("answer", sources)
    built_at = first.stat().st_mtime_ns
    assert c_build.build("answer", sources) == first and first.stat().st_mtime_ns == built_at
    (sources / "one.c").write_text("int diopiAnswer(void) { return 2; }\n")
    second = c_build.build("answer", sources)
    assert second != first and second.exists() and first.exists()
    (sources / "one.c").write_text("int diopiAnswer(void) { return }\n")
    with pytest.raises(RuntimeError, match="building the C op library answer .* failed"):
        c_build.build("answer", sources)


def deeplink_runtime_header(tmp_path) -> str:
    include = deeplink_headers(tmp_path)
    if include is None:
        pytest.skip("no snapshot of DeepLink-org/DIOPI here")
    return (include / "diopi" / "diopirt.h").read_text()


def test_the_runtime_abi_is_deeplink_s(tmp_path):
    """Every enumerator of DeepLink's diopirt.h has its value in dipu's, and the native core exports
    every runtime function DeepLink's declares (a library may call any of them)."""
    import ctypes

    from dipu import _native

    theirs = deeplink_runtime_header(tmp_path)
    ours = (DIPU_INCLUDE / "diopi" / "diopirt.h").read_text()
    enumerator = re.compile(r"\b(diopi\w+|Contiguous|ChannelsLast\w*|Preserve)\s*=\s*(\d+)")
    values = dict(enumerator.findall(theirs))
    assert len(values) > 30 and values == dict(enumerator.findall(ours))
    declared = set(re.findall(r"\b(diopi\w+)\s*\(", theirs))
    assert len(declared) > 25  # the scan found the declarations
    core = ctypes.CDLL(str(_native.cache_dir() / f"{_native.NAME}.so"))
    assert sorted(name for name in declared if not hasattr(core, name)) == []
