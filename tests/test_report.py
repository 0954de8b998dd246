"""The run report (dipu/report, dipu/csrc/op_stats.cpp): `python -m dipu.report` over real runs, checked
against what the runs themselves saw (dipu.fallback_counts(), the op library), plus its merge, compare,
bad input and the HTML in a real browser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import dipu
from dipu.report import merge
from dipu.report.compare import compare
from dipu.report.compare import load as load_report
from test_autocompare import FAULTY_GELU  # the torch op library with diopiGeluBackward 1% wrong

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CHROMIUM = Path("/usr/bin/chromium")
CLEARED = ("DIPU_AUTOCOMPARE_OPS_LIST", "DIPU_DIOPI_IMPL", "DIPU_FORCE_FALLBACK_OPS_LIST", "DIPU_REPORT",
           "DIPU_DUMP_OP_ARGS", "DIPU_AUTOCOMPARE_STRICT")

# One small CNN step and a few ops, then the process's own view of the fallback, for the report to match.
CNN_STEP = f"""
import json, sys, warnings, torch, torch.nn.functional as F, dipu
warnings.filterwarnings("ignore")
sys.path.insert(0, {str(EXAMPLES)!r})
from models import SmallCNN
torch.manual_seed(0)
model = SmallCNN(in_channels=3, num_classes=4, width=4).to("dipu")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
images, labels = torch.randn(4, 3, 8, 8).to("dipu"), torch.tensor([0, 1, 2, 3]).to("dipu")
loss = F.cross_entropy(model(images), labels)
loss.backward()
optimizer.step()
print("FALLBACK " + json.dumps(dipu.fallback_counts()))
"""

GPT_STEP = f"""
import sys, torch, dipu
sys.path.insert(0, {str(EXAMPLES)!r})
from models import GPT, GPTConfig
torch.manual_seed(0)
model = GPT(GPTConfig(vocab_size=16, seq_len=8, n_layer=1, n_head=2, d_model=16, dropout=0.0)).to("dipu")
tokens = torch.randint(16, (4, 9)).to("dipu")
_, loss = model(tokens[:, :-1], tokens[:, 1:])
loss.backward()
"""

# A library whose diopiMul is wrong but never called by the program that uses it.
WRONG_MUL = """
from dipu import _C
from dipu.diopi import SUCCESS, OpLibrary
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("wrong_mul", base=reference)

@library.register
def diopiMul(ctx, out, input, other):
    _C.alias(out, ctx.device).zero_()
    return SUCCESS

@library.register
def diopiAdd(ctx, out, input, other, alpha):
    return reference.get("diopiAdd")(ctx, out, input, other, alpha)
"""


# diopiNeg for float32 only (Note [Declared dtypes]): float64 calls answer FORCE_FALLBACK.
FLOAT_NEG = """
import torch
from dipu.diopi import OpLibrary
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("float_neg", base=reference)

@library.register(dtypes=(torch.float32,))
def diopiNeg(ctx, out, input):
    return reference.get("diopiNeg")(ctx, out, input)
"""


# A vendor's op library with a slow kernel (diopiMul sleeps 10 ms), a wrong one (diopiExp returns its input)
# and one that kills the process (diopiAbs): the run report and the conformance certificate must name each
# (tests/test_conformance_certificate.py uses it too).
SLOW_WRONG = """
import os, time
from dipu import _C
from dipu.diopi import SUCCESS, OpLibrary
from dipu.diopi_impl.torch import library as reference

library = OpLibrary("slow_wrong", base=reference)

@library.register
def diopiMul(ctx, out, input, other):
    time.sleep(0.01)
    return reference.get("diopiMul")(ctx, out, input, other)

@library.register
def diopiExp(ctx, out, input):
    _C.alias(out, ctx.device).copy_(_C.alias(input, ctx.device))
    return SUCCESS

@library.register
def diopiAbs(ctx, out, input):
    os.abort()
"""

SLOW_PROGRAM = """
import torch, dipu
x = torch.randn(64, 64).to("dipu")
for _ in range(10):
    x * x
    x + x
    x.sub(x)
"""

REPORT_CLEARED = ("DIPU_REPORT_TOP", "DIPU_REPORT_REFERENCE", "DIPU_REPORT_DEVICE_TIME")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for var in CLEARED + REPORT_CLEARED:
        monkeypatch.delenv(var, raising=False)


def library_env(tmp_path: Path, name: str, source: str) -> dict:
    (tmp_path / f"{name}.py").write_text(source)
    return {"DIPU_DIOPI_IMPL": name, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def report_run(out: Path, command: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m dipu.report -o out -- command``."""
    return subprocess.run([sys.executable, "-m", "dipu.report", "-o", str(out), "--", *command],
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300, cwd=REPO)


def script(tmp_path: Path, code: str, name: str = "program.py") -> str:
    path = tmp_path / name
    path.write_text(code)
    return str(path)


def fallback_seen(stdout: str) -> dict:
    line = next(line for line in stdout.splitlines() if line.startswith("FALLBACK "))
    return json.loads(line.removeprefix("FALLBACK "))


def load(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


# ---- real runs ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def forced_run(tmp_path_factory):
    """The CNN step with convolution and relu forced to the CPU fallback."""
    tmp = tmp_path_factory.mktemp("forced")
    env = {"DIPU_FORCE_FALLBACK_OPS_LIST": "convolution_overrideable,relu.*"}
    result = report_run(tmp / "report", [sys.executable, script(tmp, CNN_STEP)], env)
    assert result.returncode == 0, result.stderr
    return result, load(tmp / "report")


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plain")
    result = report_run(tmp / "report", [sys.executable, script(tmp, CNN_STEP)])
    assert result.returncode == 0, result.stderr
    return result, load(tmp / "report"), tmp / "report"


def test_the_convolution_placeholders_are_replayed_as_the_convolutions_they_stand_for(plain_run):
    """convolution_overrideable has no CPU kernel: the reference runs aten.convolution (and its backward) instead,
    as the CPU fallback does (Note [Overrideable ops in the fallback])."""
    rows = [row for row in plain_run[1]["reference"]["signatures"] if "overrideable" in row["op"]]
    assert rows and all(row["error"] is None and row["reference_ns_per_call"] > 0 for row in rows), rows


def test_a_plain_run_reports_every_category_it_saw(plain_run):
    result, report, _ = plain_run
    assert report["schema"] == merge.SCHEMA and len(report["processes"]) == 1
    ops = report["ops"]
    category = {name: op["category"] for name, op in ops.items()}
    # generated kernels (torch op library), the core's own kernels, and decomposed ops, as dispatched
    assert category["convolution_overrideable"] == "native" and ops["convolution_overrideable"]["kernel"] == "C++"
    assert category["addmm"] == "native" and ops["addmm"]["diopi"] == "diopiAddmm"
    assert category["view"] == "core" and category["empty.memory_format"] == "core"
    assert category["linear"] == "composite" and category["cross_entropy_loss"] == "composite"
    assert not [name for name, c in category.items() if c == "other"]
    # the counts of the process's own view: every fallback op of the run, and no other
    seen = fallback_seen(result.stdout)
    assert {n: op["fallback_calls"] for n, op in ops.items() if op["fallback_calls"]} == seen
    assert all(category[n] in ("fallback", "refused") for n in seen)
    # times: inclusive >= self > 0 for every op that ran; a composite op's self time is a small part of it
    for name, op in ops.items():
        assert op["calls"] > 0 and op["inclusive_ns"] >= op["self_ns"] >= 0, name
    assert ops["linear"]["self_ns"] < ops["linear"]["inclusive_ns"]
    assert report["device_time"].startswith("device time from the vendor's timing events")
    assert ops["mm"]["device_calls"] == ops["mm"]["calls"] and ops["mm"]["device_self_ns"] > 0
    assert result.stdout.count("dipu run report: ") == 1 and "  by category: native " in result.stdout


def test_the_coverage_is_the_librarys(plain_run):
    _, report, _ = plain_run
    from dipu.diopi_impl.torch import library
    from dipu.diopi.proto import FUNCTIONS

    coverage = report["coverage"]
    assert coverage["library"] == "torch_cpp" and coverage["total"] == len(FUNCTIONS)
    # torch_cpp is laid over the Python torch library: together they implement what the Python one does
    assert coverage["implemented"] == len(set(library.functions) & set(FUNCTIONS))
    assert sum(f["total"] for f in coverage["families"].values()) == len(FUNCTIONS)
    assert coverage["functions"]["diopiMul"]["family"] == "pointwise"
    assert "mul.Tensor" in coverage["functions"]["diopiMul"]["ops"]
    assert coverage["functions"]["diopiConvolution2d"]["family"] == "convolution"


def test_every_proto_function_has_a_declared_family():
    """Note [Function families]: no default family; an undeclared function is an error saying where to declare it."""
    from dipu.diopi.proto import FUNCTIONS, family_of

    assert all(family_of(name) for name in FUNCTIONS)
    with pytest.raises(ValueError, match=r"^diopiFrobnicate belongs to no family: declare it in FAMILY_RULES "
                                         r"\(Note \[Function families\] in dipu/diopi/proto.py\)$"):
        family_of("diopiFrobnicate")


def test_a_forced_fallback_list_is_reported_as_such(forced_run):
    result, report = forced_run
    ops, seen = report["ops"], fallback_seen(result.stdout)
    forced = {name for name, op in ops.items() if op["category"] == "forced fallback"}
    assert forced == {"convolution_overrideable", "relu", "relu_"} & set(ops) and "convolution_overrideable" in forced
    assert {n: op["fallback_calls"] for n, op in ops.items() if op["fallback_calls"]} == seen
    assert report["forced_fallback_patterns"] == ["convolution_overrideable", "relu.*"]
    # forced ops are a choice, not work to do: "write these next" lists none of them
    assert not forced & {op for item in report["write_next"] for op in item["ops"]}


def test_a_kernel_that_answers_force_fallback_is_refused(tmp_path):
    code = ("import json, torch, dipu\n"
            "torch.ones(3, device='dipu').neg()\n"
            "torch.ones(3, device='dipu', dtype=torch.float64).neg()\n"
            "x = torch.ones(3, device='dipu', dtype=torch.float64)\n"
            "torch.neg(x, out=torch.empty_like(x))\n"
            "print('FALLBACK ' + json.dumps(dipu.fallback_counts()))\n")
    result = report_run(tmp_path / "report", [sys.executable, script(tmp_path, code)],
                        library_env(tmp_path, "float_neg", FLOAT_NEG))
    assert result.returncode == 0, result.stderr
    report = load(tmp_path / "report")
    neg, neg_out = report["ops"]["neg"], report["ops"]["neg.out"]
    # every call refused: refused; some calls refused: native, the refusals counted
    assert (neg_out["category"], neg_out["calls"], neg_out["fallback_calls"]) == ("refused", 1, 1)
    assert (neg["category"], neg["calls"], neg["fallback_calls"]) == ("native", 2, 1)
    assert fallback_seen(result.stdout) == {"neg": 1, "neg.out": 1}
    item = next(item for item in report["write_next"] if item["name"] == "diopiNeg")
    assert item["ops"] == ["neg", "neg.out"] and item["action"].startswith("implemented, but answered FORCE_FALLBACK")
    assert item["fallback_calls"] == 2


def test_compare_shows_what_moved_to_dipu(forced_run, plain_run, tmp_path):
    old, new = forced_run[1], plain_run[1]
    lines = compare(old, new)
    start = lines.index(next(line for line in lines if line.startswith("moved from the CPU fallback")))
    end = lines.index(next(line for line in lines if line.startswith("moved back to the CPU fallback")))
    moved = lines[start + 1:end]
    assert "  convolution_overrideable: forced fallback -> native" in moved
    # a report of another schema: said, and the ops still compared
    other = {**old, "schema": merge.SCHEMA + 1}
    other["ops"] = {**old["ops"], "relu": {"calls": 1}}  # an entry that lacks what is compared
    lines = compare(other, new)
    assert lines[0].startswith("the reports have different schema versions")
    assert any(line.startswith("cannot compare 1 ops whose entries lack") and line.endswith(": relu") for line in lines)
    assert "  convolution_overrideable: forced fallback -> native" in lines
    assert "not compared across schema versions: proto coverage, write these next, autocompare" in lines
    # through the CLI
    (tmp_path / "old.json").write_text(json.dumps(old))
    cli = subprocess.run([sys.executable, "-m", "dipu.report", "--compare", str(tmp_path / "old.json"),
                          str(plain_run[2] / "report.json")], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and "  convolution_overrideable: forced fallback -> native" in cli.stdout


def test_slower_ops_are_found(plain_run):
    new = json.loads(json.dumps(plain_run[1]))
    op = new["ops"]["addmm"]
    op["self_ns"] = op["self_ns"] * 3 + 10_000 * op["calls"]
    lines = compare(plain_run[1], new)
    slower = lines[lines.index(next(line for line in lines if line.startswith("slower"))):]
    assert slower[0] == "slower (host time per call): 1" and slower[1].startswith("  addmm: ")


def test_autocompare_names_the_wrong_kernel_in_the_report(tmp_path):
    env = {"DIPU_AUTOCOMPARE_OPS_LIST": ".*", **library_env(tmp_path, "faulty_gelu", FAULTY_GELU)}
    result = report_run(tmp_path / "report", [sys.executable, script(tmp_path, GPT_STEP)], env)
    assert result.returncode == 0, result.stderr
    report = load(tmp_path / "report")
    compared = report["autocompare"]
    assert compared["first_mismatch"]["op"] == "gelu_backward"
    assert compared["ops"]["gelu_backward"]["mismatches"] >= 1
    assert compared["ops"]["gelu_backward"]["diopi"] == "diopiGeluBackward"
    assert [n for n, op in compared["ops"].items() if op["mismatches"]] == ["gelu_backward"]
    assert sum(op["calls"] for op in compared["ops"].values()) == compared["calls"] > 20
    assert compared["never_ran"] == []  # the faulty library's one function ran
    coverage = report["coverage"]
    assert coverage["layers"] == ["faulty_gelu", "torch"]
    from dipu.diopi_impl.torch import library as reference

    assert coverage["implemented"] == len(set(reference.functions) | {"diopiGeluBackward"})
    assert coverage["functions"]["diopiGeluBackward"]["layer"] == "faulty_gelu"
    assert coverage["functions"]["diopiGelu"]["layer"] == "torch"
    assert "first mismatch: call #" in result.stdout and "gelu_backward" in result.stdout
    html = (tmp_path / "report" / "report.html").read_text()
    assert '<tr class="first"><td>gelu_backward</td>' in html


def test_autocompare_lists_library_functions_that_never_ran(tmp_path):
    code = "import torch, dipu\nx = torch.ones(3, device='dipu')\nprint((x + x).sum().item())\n"
    env = {"DIPU_AUTOCOMPARE_OPS_LIST": ".*", **library_env(tmp_path, "wrong_mul", WRONG_MUL)}
    result = report_run(tmp_path / "report", [sys.executable, script(tmp_path, code)], env)
    assert result.returncode == 0, result.stderr
    summary = [line for line in result.stdout.splitlines() if line.startswith("autocompare: ")][-1]
    assert " 0 mismatches" in summary
    assert summary.endswith("; 1 functions of op library 'wrong_mul' never ran under autocompare "
                            "(not called, or their ops not compared): diopiMul")
    assert load(tmp_path / "report")["autocompare"]["never_ran"] == ["diopiMul"]


def test_the_runtime_only_vendor_puts_everything_on_the_fallback_and_ranks_it(tmp_path):
    result = report_run(tmp_path / "report", [sys.executable, script(tmp_path, CNN_STEP)],
                        {"DIPU_SIM_NATIVE_ALIAS": "0", "DIPU_VENDOR": "sim"})
    assert result.returncode == 0, result.stderr
    report = load(tmp_path / "report")
    seen = fallback_seen(result.stdout)
    assert {n: op["fallback_calls"] for n, op in report["ops"].items() if op["fallback_calls"]} == seen
    assert report["coverage"]["library"] is None and report["coverage"]["implemented"] == 0
    assert report["categories"]["native"]["ops"] == 0
    # ops of the spec are named by the DIOPI function they need; the others need a spec entry first
    assert ("diopiConvolution2d", ["convolution_overrideable"], "implement") in [
        (item["name"], item["ops"], item["action"]) for item in report["write_next"]]
    ranked = report["write_next"]
    assert [item["time_ns"] for item in ranked] == sorted((item["time_ns"] for item in ranked), reverse=True)
    assert {op for item in ranked for op in item["ops"]} == set(seen)
    assert "  write these next:" in result.stdout


# ---- bad input and failing commands -------------------------------------------------------------


def test_a_failing_command_still_reports_and_its_status_comes_back(tmp_path):
    code = "import torch, dipu\nx = torch.ones(3, device='dipu')\ny = x * 2\nraise SystemExit(3)\n"
    result = report_run(tmp_path / "report", [sys.executable, script(tmp_path, code)])
    assert result.returncode == 3
    assert load(tmp_path / "report")["ops"]["mul.Tensor"]["calls"] == 1
    code = "import torch, dipu\nx = torch.ones(3, device='dipu')\ny = x - 1\nraise KeyError('boom')\n"
    result = report_run(tmp_path / "report2", [sys.executable, script(tmp_path, code)])
    assert result.returncode == 1
    report = load(tmp_path / "report2")
    assert report["ops"]["sub.Tensor"]["calls"] == 1 and report["processes"][0]["error"] == "KeyError: 'boom'"
    assert "ended with KeyError: 'boom'" in result.stdout


def test_an_unwritable_directory_fails_before_the_command_runs(tmp_path):
    (tmp_path / "file").write_text("")
    marker = tmp_path / "ran"
    result = report_run(tmp_path / "file" / "report", ["touch", str(marker)])
    assert result.returncode == 2 and not marker.exists()
    # its last line: importing dipu may warn first (on torch 2.11: Note [ATen ops a torch lacks] in _table.py)
    assert result.stderr.splitlines()[-1].startswith("python -m dipu.report: -o: cannot write the run report in ")


def test_an_invalid_dipu_report_value_names_the_variable(tmp_path, python):
    (tmp_path / "file").write_text("")
    result = python("import dipu", env={"DIPU_REPORT": str(tmp_path / "file")}, check=False)
    assert result.returncode != 0
    assert f"DIPU_REPORT='{tmp_path / 'file'}': cannot write the run report in" in result.stderr


def test_a_plain_run_with_dipu_report_writes_the_report(tmp_path, python):
    python("import torch, dipu\ntorch.ones(2, device='dipu').neg()", env={"DIPU_REPORT": str(tmp_path)})
    report = load(tmp_path)
    assert report["ops"]["neg"]["calls"] == 1 and (tmp_path / "report.html").is_file()
    assert len(list((tmp_path / "processes").glob("*.json"))) == 1


def test_every_process_of_a_run_reports_and_ranks_are_kept(tmp_path):
    code = ("import os, subprocess, sys, torch, dipu\n"
            "rank = int(os.environ.get('RANK', 0))\n"
            "x = torch.ones(3, device='dipu')\n"
            "for _ in range(rank + 1): x.neg()\n"
            "if rank == 0:\n"
            "    subprocess.check_call([sys.executable, __file__], env={**os.environ, 'RANK': '1'})\n")
    result = report_run(tmp_path / "report", [sys.executable, script(tmp_path, code)], {"RANK": "0"})
    assert result.returncode == 0, result.stderr
    report = load(tmp_path / "report")
    assert [p["label"] for p in report["processes"]] == ["rank 0", "rank 1"]
    assert report["ops"]["neg"]["calls"] == 3 and report["ops"]["neg"]["per_process"] == {"rank 0": 1, "rank 1": 2}


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="no torchrun")
def test_under_torchrun_every_rank_reports(tmp_path):
    command = ["torchrun", "--nproc-per-node", "2", str(EXAMPLES / "train_ddp.py"), "--epochs", "1", "--steps", "2"]
    result = report_run(tmp_path / "report", command)
    assert result.returncode == 0, result.stderr
    report = load(tmp_path / "report")
    # the ranks, and not the launcher (it loads dipu through torch's autoload but runs no dipu op)
    assert [p["label"] for p in report["processes"]] == ["rank 0", "rank 1"]
    assert all(p["calls"] > 100 for p in report["processes"])
    assert report["ops"]["addmm"]["per_process"].keys() == {"rank 0", "rank 1"}
    # DDP's reducer records ranges of its own (FUNCTION scope, no operator): not ops
    assert not [name for name, op in report["ops"].items() if op["category"] == "other"]


# ---- the native core's statistics, in this process ---------------------------------------------


def test_off_by_default_costs_nothing():
    assert not dipu._C.op_stats_enabled()
    assert "dipu.report.collect" not in sys.modules


def test_self_time_excludes_dipu_children_and_threads_are_counted():
    x = torch.ones(64, 64, device="dipu")
    torch.nn.functional.linear(x, x)  # warm: the first call may load what the kernels need
    dipu._C.op_stats_reset()
    dipu._C.op_stats_enable()
    try:
        torch.nn.functional.linear(x, x)  # linear -> t (-> transpose -> as_strided), matmul -> mm
        cpu = torch.ones(3)
        cpu + cpu  # not a dipu op
        worker = threading.Thread(target=lambda: x.neg())
        worker.start()
        worker.join()
    finally:
        dipu._C.op_stats_disable()
    stats = {name: dict(zip(("calls", "inclusive", "self"), value)) for name, value in dipu._C.op_stats().items()}
    assert "add.Tensor" not in stats and "ones" not in stats and stats["neg"]["calls"] == 1
    # a frame's children time is exactly what its direct dipu children took
    linear = stats["linear"]
    assert linear["inclusive"] - linear["self"] == stats["t"]["inclusive"] + stats["matmul"]["inclusive"]
    assert stats["matmul"]["inclusive"] - stats["matmul"]["self"] == stats["mm"]["inclusive"]
    # the sim's mm computes on CPU tensors (not dipu frames), and its C++ wrapper allocates the output without
    # an op: all that work stays in mm's self time
    assert stats["mm"]["self"] == stats["mm"]["inclusive"] > 0 and stats["linear"]["calls"] == 1
    assert not dipu._C.op_stats_enabled()


def test_a_non_dipu_frame_passes_its_dipu_children_up():
    """outer(dipu tensor) -> middle(CPU tensor: not a dipu op) -> neg and to(dipu): outer's self time excludes
    the dipu ops below middle, which itself is not counted."""
    library = torch.library.Library("dipu_report_test", "DEF")
    try:
        library.define("outer(Tensor x) -> Tensor")
        library.define("middle(Tensor x) -> Tensor")
        ops = torch.ops.dipu_report_test
        library.impl("middle", lambda x: x.to("dipu").neg(), "CompositeImplicitAutograd")
        library.impl("outer", lambda x: ops.middle(x.cpu()), "CompositeImplicitAutograd")
        x = torch.ones(8, device="dipu")
        ops.outer(x)
        dipu._C.op_stats_reset()
        dipu._C.op_stats_enable()
        try:
            ops.outer(x)
        finally:
            dipu._C.op_stats_disable()
    finally:
        library._destroy()
    stats = {name: dict(zip(("calls", "inclusive", "self"), value)) for name, value in dipu._C.op_stats().items()}
    outer = stats["dipu_report_test::outer"]
    assert "dipu_report_test::middle" not in stats
    # outer's dipu children: x.cpu() and, below middle, x.to("dipu") (both to.dtype_layout) and neg
    assert stats["to.dtype_layout"]["calls"] == 2 and stats["neg"]["calls"] == 1
    assert outer["inclusive"] - outer["self"] == stats["to.dtype_layout"]["inclusive"] + stats["neg"]["inclusive"]


@pytest.mark.parametrize("timing", ["events", "synchronize"])
def test_device_time_per_signature(timing):
    """Note [Device time per kernel]: device self time excludes the timed dipu children, exactly; each
    signature keeps its first call's arguments as meta tensors; another thread's calls are counted."""
    x = torch.ones(64, 64, device="dipu")
    torch.nn.functional.linear(x, x)
    dipu._C.op_stats_reset()
    dipu._C.op_stats_enable(timing)
    try:
        torch.nn.functional.linear(x, x)
        worker = threading.Thread(target=lambda: x.neg())
        worker.start()
        worker.join()
    finally:
        dipu._C.op_stats_disable()
    dipu._C.op_stats_drain()
    assert dipu._C.op_stats_device_timing() == timing
    signatures = {s["op"]: s for s in dipu._C.op_stats_signatures()}
    linear, mm = signatures["linear"], signatures["mm"]
    assert linear["signature"] == "linear(f32[64,64], f32[64,64], None)"
    assert mm["device_calls"] == mm["calls"] == 1 and 0 < mm["device_self_ns"] <= mm["device_ns"]
    assert linear["device_ns"] - linear["device_self_ns"] == \
        signatures["t"]["device_ns"] + signatures["matmul"]["device_ns"]
    assert signatures["neg"]["device_calls"] == 1
    args = mm["args"]
    assert [(a.device.type, a.shape, a.dtype) for a in args] == [("meta", (64, 64), torch.float32)] * 2
    dipu._C.op_stats_reset()


def test_the_report_ranks_a_slow_kernel_against_the_cpu(tmp_path):
    out = tmp_path / "report"
    env = {**os.environ, **library_env(tmp_path, "slow_wrong", SLOW_WRONG)}
    result = subprocess.run([sys.executable, "-m", "dipu.report", "-o", str(out), "--top", "3", "--reference", "cpu",
                             "--", sys.executable, script(tmp_path, SLOW_PROGRAM)],
                            env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr
    report = load(out)
    assert report["device_time"].startswith("device time from the vendor's timing events")
    assert report["reference"]["device"] == "cpu"
    ranked = report["reference"]["signatures"]
    assert [row["op"] for row in ranked][0] == "mul.Tensor" and len(ranked) == 3
    first = ranked[0]
    assert first["signature"] == "mul.Tensor(f32[64,64], f32[64,64])" and first["device_calls"] == 10
    assert first["ratio"] > 10 and first["saving_ns"] > 50e6 and first["error"] is None
    assert first["path"] == "Python wrapper -> Python library slow_wrong"
    mul = report["ops"]["mul.Tensor"]
    assert mul["device_calls"] == 10 and mul["device_self_ns"] >= 100e6 and mul["self_ns"] >= 100e6
    assert "slower than the reference (cpu)" in result.stdout and "mul.Tensor(f32[64,64], f32[64,64])" in result.stdout
    html = (out / "report.html").read_text()
    assert "Slower than the reference" in html and "device self ms" in html
    lines = compare(report, report)
    assert any(line.startswith("device time per call changed (per signature): 0 of ") for line in lines)


# ---- merging, from records -------------------------------------------------------------------------


def _record(rank, ops, coverage=None):
    return {"schema": merge.SCHEMA, "kind": "process", "host": "h", "pid": 100 + rank, "rank": rank,
            "ops": ops, "coverage": coverage, "started": "", "argv": ["x"]}


def _op(category, calls, self_ns, fallback_calls=0, functions=(), in_spec=True):
    return {"calls": calls, "inclusive_ns": self_ns, "self_ns": self_ns, "fallback_calls": fallback_calls,
            "category": category, "kernel": None, "diopi": functions[0] if functions else None,
            "functions": list(functions), "in_spec": in_spec}


def test_write_next_ranks_missing_functions_by_fallback_time():
    functions = {name: {"family": "pointwise", "implemented": name == "diopiAdd", "layer": None, "ops": []}
                 for name in ("diopiAdd", "diopiMul", "diopiMulScalar")}
    coverage = {"library": "lib", "layers": ["lib"], "functions": functions}
    ops = {"mul.Tensor": _op("fallback", 2, 1000, 2, ["diopiMul"]),
           "mul_.Tensor": _op("fallback", 1, 5000, 1, ["diopiMul"]),
           "mul.Scalar": _op("fallback", 1, 3000, 1, ["diopiMulScalar"]),
           "add.Tensor": _op("refused", 4, 4000, 1, ["diopiAdd"]),
           "frobnicate": _op("fallback", 1, 500, 1, in_spec=False)}
    other_rank = {"mul.Tensor": _op("fallback", 1, 1000, 1, ["diopiMul"])}
    report = merge.merge([_record(0, ops, coverage), _record(1, other_rank)])
    ranked = [(item["name"], item["time_ns"]) for item in report["write_next"]]
    assert ranked == [("diopiMul", 7000), ("diopiMulScalar", 3000), ("diopiAdd", 1000), ("frobnicate", 500)]
    assert report["write_next"][-1]["action"].startswith("add a spec entry")
    assert report["ops"]["mul.Tensor"]["per_process"] == {"rank 0": 2, "rank 1": 1}
    assert report["coverage"]["families"] == {"pointwise": {"implemented": 1, "total": 3}}
    assert report["categories"]["fallback"]["calls"] == 6


def test_compare_refuses_what_is_not_a_report(tmp_path):
    (tmp_path / "process.json").write_text(json.dumps({"schema": merge.SCHEMA, "kind": "process"}))
    (tmp_path / "broken.json").write_text("{")
    for name, message in (("process.json", "is not a dipu run report"), ("broken.json", "is not JSON"),
                          ("missing.json", "cannot read")):
        with pytest.raises(ValueError, match=message):
            load_report(tmp_path / name)


# ---- the HTML, in a real browser --------------------------------------------------------------------


def test_the_html_is_self_contained(plain_run):
    html = (plain_run[2] / "report.html").read_text()
    assert "<svg" in html and "Proto coverage by family" in html and "Host time by category" in html
    for remote in ("http://", "https://", "//cdn", "@import", "<link", "src="):
        assert remote not in html.replace('xmlns="http://www.w3.org/2000/svg"', ""), remote


#: A directory: the tests that open a page in Chromium keep their screenshots there (report.png,
#: certificate.png); the vendor guide's are taken so: DIPU_SCREENSHOTS=docs/images.
SCREENSHOTS = os.environ.get("DIPU_SCREENSHOTS")
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(),
                                    reason="no /usr/bin/chromium (apt-get install chromium) to open the page in")


def screenshot(page: Path, name: str, tmp_path: Path, size: tuple[int, int]) -> bytes:
    """A headless Chromium's PNG of ``page`` in a window of ``size`` (checked), kept as DIPU_SCREENSHOTS/``name``."""
    png = tmp_path / name
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}",
               f"--window-size={size[0]},{size[1]}", page.as_uri()]
    subprocess.run(command, capture_output=True, timeout=120)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == size
    if SCREENSHOTS:
        shutil.copy(png, Path(SCREENSHOTS) / name)
    return data


@needs_chromium
def test_the_report_opens_in_chromium(plain_run, tmp_path):
    data = screenshot(plain_run[2] / "report.html", "report.png", tmp_path, (1400, 2400))
    # a page that rendered nothing (white) compresses to a few kB; the report's text, tables and charts do not
    assert len(data) > 60_000


def test_the_kernel_path_names_a_c_library_once():
    """A C library laid by path is named "C library /path.so" already: the path says so once."""
    from dipu.diopi import c_library
    from dipu.report.collect import kernel_path

    def diopiMul():
        pass

    diopiMul.__module__ = c_library.__name__

    class Library:
        base = None

        def __init__(self, name):
            self.name, self.functions = name, {"diopiMul": diopiMul}

    record = {"category": "native", "kernel": "C++", "diopi": "diopiMul"}
    assert kernel_path(record, Library("C library /lib/libref_c.so")) == "C++ wrapper -> C library /lib/libref_c.so"
    assert kernel_path(record, Library("torch_cpp")) == "C++ wrapper -> C library torch_cpp"
