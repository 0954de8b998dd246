"""Autocompare: run dipu kernels on the CPU too and name the first one that computes wrong values.

``DIPU_AUTOCOMPARE_OPS_LIST`` (regexes of op names) wraps the matching generated kernels when they are
registered (Note [Autocompare as a switch], dipu/kernels/registry.py); from Python,
``with dipu.autocompare(".*") as run:`` does the same for a block and ``run.mismatches`` /
``run.first_mismatch`` say what differed.

Note [Judging a tensor as a whole]
Element-wise ``allclose`` with an absolute floor hides a 1% error in small gradients (the floor swamps
them) and flags harmless rounding in elements that cancelled to near zero. Accuracy tools of other
vendor stacks judge a tensor as a whole, and so do we: an output agrees with the CPU's when

    max|dipu - cpu| <= rtol * max|cpu| + atol     and     cosine(dipu, cpu) >= min_cosine

with rtol and min_cosine per dtype (``TOLERANCES``; complex tensors use their real dtype's),
``atol`` 0 by default, NaN and inf at the same positions, and the figures taken over the finite
elements. The first test scales with the data, so it sees a uniformly 1% wrong kernel; the cosine
sees errors spread over the small elements that stay under rtol * max. Integer and bool tensors
must be equal. Each op is compared on host copies of the dipu inputs, so an error never propagates
into the ops after it: the first mismatch is the first wrong kernel.

Note [Autocompare output]
Every compared call gets a number (one count across all ops, "call #N"). By default only mismatches are
printed (the first ``PRINT_LIMIT`` of each op), plus one ``first mismatch`` line naming the call,
the op, its arguments and the error figures, and a summary at exit. ``DIPU_AUTOCOMPARE_VERBOSE=1``
prints DIPU's line for every compared output (``autocompare:    add.out out: allclose``).
"""

from __future__ import annotations

import atexit
import dataclasses
import math
import os
import sys
import types
import warnings

import torch

from dipu._core import vendor
from dipu.kernels.fallback import cpu_reference
from dipu.kernels.registry import registration
from dipu.kernels.switches import OpPatterns, autocompare_patterns, env_flag

#: dtype -> (rtol: max|dipu - cpu| relative to max|cpu|, min_cosine); see Note [Judging a tensor as a whole].
#: One rounding of the largest element costs about half the dtype's eps relative to max|cpu|.
TOLERANCES = {
    torch.float64: (1e-7, 1 - 1e-10),
    torch.float32: (1e-4, 1 - 1e-6),
    torch.float16: (5e-3, 1 - 1e-4),
    torch.bfloat16: (1.6e-2, 1 - 1e-3),  # eps 7.8e-3: bfloat16 cannot resolve a 1% error reliably
}
#: Note [TF32 on a CUDA vendor]
#: On a vendor that computes on CUDA, ATen runs float32 convolutions in TF32 while
#: ``torch.backends.cudnn.allow_tf32`` is on (PyTorch's default) and float32 matrix products while
#: ``torch.backends.cuda.matmul.allow_tf32`` is (off by default), as native CUDA does. TF32 keeps float16's
#: 10-bit mantissa, so those outputs are judged with float16's tolerances: the dipu kernel is right when it
#: computes as native CUDA would, not as strict float32 would.
_MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "_addmm_activation"})


def _tf32(op_name: str) -> bool:
    """Whether CUDA may have computed this op's float32 outputs in TF32 (Note [TF32 on a CUDA vendor])."""
    base = op_name.split(".")[0]
    if "convolution" in base:
        allowed = torch.backends.cudnn.allow_tf32
    elif base in _MATMUL_OPS:
        allowed = torch.backends.cuda.matmul.allow_tf32
    else:
        return False
    return allowed and vendor().native_device_type == "cuda"


PRINT_LIMIT = 10  # mismatch lines printed per op (all of them with DIPU_AUTOCOMPARE_VERBOSE)
PREFIX = "autocompare:    "


def _env_float(name: str) -> float | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name}: expected a number, got {text!r}") from None


RTOL = _env_float("DIPU_AUTOCOMPARE_RTOL")  # replaces every dtype's rtol
ATOL = _env_float("DIPU_AUTOCOMPARE_ATOL") or 0.0
STRICT = env_flag("DIPU_AUTOCOMPARE_STRICT")
VERBOSE = env_flag("DIPU_AUTOCOMPARE_VERBOSE")


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One output (or input) of one op call that disagrees with the CPU."""

    call: int  # the global call number, as printed
    op: str  # "gelu_backward.grad_input"
    output: str  # "grad_input", "out[1]", or an input the op must not modify
    detail: str  # "max rel err 1.0e-02, cosine 0.99995000, max diff 3.4e-07" or what else differed
    args: str  # the arguments' shapes and dtypes
    rel_err: float | None = None
    cosine: float | None = None

    def __str__(self) -> str:
        return f"call #{self.call}: {self.op} {self.output}: {self.detail}; args: {self.args}"


@dataclasses.dataclass(eq=False)  # each block its own, however alike
class Results:
    """What autocompare saw: over the whole process (``results()``) or in a ``dipu.autocompare`` block."""

    calls: int = 0
    ops: set = dataclasses.field(default_factory=set)
    op_calls: dict = dataclasses.field(default_factory=dict)  # op -> compared calls
    mismatches: list = dataclasses.field(default_factory=list)
    reference_failures: dict = dataclasses.field(default_factory=dict)  # op -> error text

    @property
    def first_mismatch(self) -> Mismatch | None:
        return self.mismatches[0] if self.mismatches else None

    def mismatch_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for mismatch in self.mismatches:
            counts[mismatch.op] = counts.get(mismatch.op, 0) + 1
        return counts

    def summary(self) -> str:
        """Note [What autocompare checked]
        A summary that says "0 mismatches" is only as good as what ran: a wrong kernel that was never called
        is never compared. So the summary names the DIOPI function beside each ATen op
        (``mul_.Scalar -> diopiMulScalar``) and lists the functions of the active op library (its top
        layer: the library a vendor or DIPU_DIOPI_IMPL chose, not the ones it lays over) that no compared
        call reached."""
        text = f"autocompare: {len(self.ops)} ops compared in {self.calls} calls, {len(self.mismatches)} mismatches"
        if self.mismatches:
            text += " (" + ", ".join(f"{_with_diopi(op)} x{n}" for op, n in self.mismatch_counts().items()) + ")"
            text += f"; first mismatch at {self.first_mismatch}"
        if self.reference_failures:
            text += f"; no CPU reference for {', '.join(sorted(self.reference_failures))}"
        library, never = never_ran(self)
        if never:
            shown = ", ".join(never[:NEVER_RAN_SHOWN]) + (f" and {len(never) - NEVER_RAN_SHOWN} more"
                                                           if len(never) > NEVER_RAN_SHOWN else "")
            text += (f"; {len(never)} functions of op library '{library}' never ran under autocompare "
                     f"(not called, or their ops not compared): {shown}")
        return text


NEVER_RAN_SHOWN = 20  # functions named in the summary's never-ran list


def _with_diopi(op_name: str) -> str:
    """``mul_.Scalar -> diopiMulScalar``: the op and the DIOPI function its kernel calls."""
    entry = registration.kernels.get(op_name)
    return f"{op_name} -> {entry[0].diopi}" if entry else op_name


def ran_functions(results: Results) -> set[str]:
    """The DIOPI functions the compared calls of ``results`` reached (each compared op's functions)."""
    found: set[str] = set()
    for name in results.op_calls:
        entry = registration.kernels.get(name)
        if entry:
            found.update(entry[0].functions)
    return found


def never_ran(results: Results) -> tuple[str | None, list[str]]:
    """(the active library's name, its top layer's functions no compared call of ``results`` reached);
    see Note [What autocompare checked]."""
    library = registration.library
    if library is None:
        return None, []
    return library.name, sorted(set(library.functions) - ran_functions(results))


def _mismatch_record(mismatch: Mismatch | None) -> dict | None:
    if mismatch is None:
        return None
    return {**dataclasses.asdict(mismatch), "text": str(mismatch)}


def as_record(results: Results) -> dict:
    """``results`` as the run report stores them (dipu/report)."""
    counts = results.mismatch_counts()
    firsts: dict[str, Mismatch] = {}
    for mismatch in results.mismatches:
        firsts.setdefault(mismatch.op, mismatch)
    ops = {}
    for name in sorted(results.ops):
        entry = registration.kernels.get(name)
        ops[name] = {"calls": results.op_calls.get(name, 0), "mismatches": counts.get(name, 0),
                     "diopi": entry[0].diopi if entry else None,
                     "first_mismatch": _mismatch_record(firsts.get(name))}
    library, never = never_ran(results)
    return {"calls": results.calls, "mismatches": len(results.mismatches), "ops": ops,
            "first_mismatch": _mismatch_record(results.first_mismatch), "library": library,
            "never_ran": never, "ran": sorted(ran_functions(results)),
            "reference_failures": dict(results.reference_failures)}


_process = Results()
_active: list[Results] = [_process]  # the process's results, then one per open dipu.autocompare block
_printed: dict[str, int] = {}  # op -> mismatch lines printed
_calls = 0


def results() -> Results:
    """Everything compared since the process started."""
    return _process


# ---- judging -----------------------------------------------------------------------------------


def judge(actual, expected, tf32: bool = False) -> tuple[bool, str, str, float | None, float | None]:
    """(agree, what differs, sample values, rel_err, cosine) for a dipu value against the CPU's;
    see Note [Judging a tensor as a whole]. ``tf32``: a float32 value may have been computed in TF32 (Note [TF32
    on a CUDA vendor])."""
    if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor):
        same = actual is None and expected is None or actual == expected
        return same, f"dipu: {actual!r}, cpu: {expected!r}", "", None, None
    actual = actual.detach().cpu()
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False, (f"shape/dtype differ: dipu {list(actual.shape)} {actual.dtype}, "
                       f"cpu {list(expected.shape)} {expected.dtype}"), "", None, None
    if torch.equal(actual, expected):
        return True, "", "", 0.0, 1.0
    if not (actual.is_floating_point() or actual.is_complex()):
        differ = int((actual != expected).sum())
        return False, f"{differ} of {actual.numel()} elements differ", _samples(actual, expected), None, None
    if actual.is_complex():
        actual, expected = torch.view_as_real(actual.resolve_conj()), torch.view_as_real(expected.resolve_conj())
    rtol, min_cosine = TOLERANCES.get(torch.float16 if tf32 and actual.dtype == torch.float32 else actual.dtype,
                                      (0.0, 1.0))
    rtol = rtol if RTOL is None else RTOL
    a, e = actual.double().flatten(), expected.double().flatten()
    for name, test in (("NaN", torch.isnan), ("+inf", lambda t: t == math.inf), ("-inf", lambda t: t == -math.inf)):
        if not torch.equal(test(a), test(e)):
            return False, f"{name} at different positions", _samples(actual, expected), None, None
    finite = torch.isfinite(e)
    a, e = a[finite], e[finite]
    diff = (a - e).abs().max().item() if e.numel() else 0.0
    scale = e.abs().max().item() if e.numel() else 0.0
    rel_err = diff / scale if scale else (0.0 if diff == 0 else math.inf)
    if diff <= ATOL:
        cosine = 1.0
    else:
        a, e = a / max(scale, diff), e / max(scale, diff)  # no overflow or underflow in the norms
        norms = (a.norm() * e.norm()).item()
        cosine = (a @ e).item() / norms if norms else 0.0
    agree = diff <= rtol * scale + ATOL and cosine >= min_cosine
    detail = f"max rel err {rel_err:.1e}, cosine {cosine:.8f}, max diff {diff:.1e}"
    return agree, detail, _samples(actual, expected), rel_err, cosine


def _samples(actual: torch.Tensor, expected: torch.Tensor) -> str:
    return f", dipu: {actual.flatten()[:5].tolist()}, cpu: {expected.flatten()[:5].tolist()}"


def _describe_args(names, values) -> str:
    parts = []
    for name, value in zip(names, values):
        if isinstance(value, torch.Tensor):
            parts.append(f"{name} {list(value.shape)} {str(value.dtype).removeprefix('torch.')}")
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
            parts.append(f"{name} {len(value)} tensors of {list(value[0].shape)} "
                         f"{str(value[0].dtype).removeprefix('torch.')}")
        else:
            parts.append(f"{name}={value!r}")
    return ", ".join(parts)


# ---- the wrapper -------------------------------------------------------------------------------


def _to_host(value):
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_host(v) for v in value)
    return value


def _unchanged(value: torch.Tensor, original: torch.Tensor) -> bool:
    return torch.equal(value.detach().cpu(), original) or (
        original.is_floating_point() and torch.allclose(value.detach().cpu(), original, equal_nan=True))


class _Call:
    """One compared call: records and prints what disagrees."""

    def __init__(self, op, names, values):
        global _calls
        _calls += 1
        self.number, self.op, self.names, self.values = _calls, op, names, values
        self.agree = True
        self.tf32 = _tf32(op.name)
        for results in _active:
            results.calls += 1
            results.ops.add(op.name)
            results.op_calls[op.name] = results.op_calls.get(op.name, 0) + 1

    def check(self, label: str, actual, expected) -> None:
        if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)) and len(actual) == len(expected):
            for index, (a, e) in enumerate(zip(actual, expected)):  # a tensor list: one line per element
                self.check(f"{label}[{index}]", a, e)
            return
        agree, detail, samples, rel_err, cosine = judge(actual, expected, self.tf32)
        if agree:
            if VERBOSE:
                print(f"{PREFIX}{self.op.name} {label}: allclose", flush=True)
            return
        self.mismatch(label, detail, samples, rel_err, cosine)

    def mismatch(self, label: str, detail: str, samples: str = "", rel_err=None, cosine=None) -> None:
        self.agree = False
        name = self.op.name
        found = Mismatch(self.number, name, label, detail, _describe_args(self.names, self.values), rel_err, cosine)
        first = _process.first_mismatch is None
        for results in _active:
            results.mismatches.append(found)
        printed = _printed[name] = _printed.get(name, 0) + 1
        if VERBOSE or printed <= PRINT_LIMIT:
            print(f"{PREFIX}{name} {label}: not_close, call #{self.number}, {detail}{samples}", flush=True)
        if printed == PRINT_LIMIT and not VERBOSE:
            print(f"{PREFIX}{name}: further mismatches of this op are counted, not printed "
                  f"(DIPU_AUTOCOMPARE_VERBOSE=1 prints all)", flush=True)
        if first:
            print(f"autocompare: first mismatch at {found}", flush=True)

    def reference_failed(self, error: Exception) -> None:
        name = self.op.name
        first = all(name not in results.reference_failures for results in _active)
        for results in _active:
            results.reference_failures.setdefault(name, str(error).splitlines()[0] if str(error) else repr(error))
        if VERBOSE or first:
            print(f"{PREFIX}{name}: the CPU reference failed: {error}", flush=True)


# Note [Inputs that alias a written argument]
# An input the op must not write may share its memory with one it writes: ``t -= t`` is ``sub_(t, t)``,
# ``u.add_(u)`` is ``add_(u, u)``. Such an input changes because the written argument does, which is the op
# doing its job, so the "modified this input" check skips inputs whose storage is a written argument's
# (taken before the call: an ``out=`` resize may move the written one's). The written argument is still
# compared with the CPU's, which the reference computes on separate host copies of the arguments as they
# were before the call (for ``sub_``: t - t), so a wrong kernel is still named.


def _storage_of(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def _storages(values) -> frozenset[int]:
    """The storages of the tensors (and tensor lists) among ``values``."""
    found = set()
    for value in values:
        for tensor in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(tensor, torch.Tensor):
                found.add(_storage_of(tensor))
    return frozenset(found)


def wrap(kernel, op):
    """``kernel``, also run on CPU on host copies of its inputs, with every output compared and every
    input the op must not write checked unchanged; ops marked ``autocompare: false`` (random ops)
    come back as they are."""
    if not op.autocompare:
        if VERBOSE:
            print(f"{PREFIX}{op.name}: skipped (autocompare: false, e.g. a random op)", flush=True)
        return kernel
    if not _scopes:  # a dipu.autocompare block gives its results to its caller instead
        _register_summary()
    reference = cpu_reference(op.name)
    written = set(op.written)

    def compared(*args, **kwargs):
        values = args + tuple(kwargs.values())
        names = op.arg_names[: len(args)] + tuple(kwargs)
        before = [_to_host(v) for v in values]
        fresh = _to_host if written else (lambda v: v)  # the reference writes only what the op writes
        host_args = fresh(before[: len(args)])
        host_kwargs = dict(zip(kwargs, fresh(before[len(args):])))
        call = _Call(op, names, values)
        written_storages = _storages(v for name, v in zip(names, values) if name in written) if written else ()
        result = kernel(*args, **kwargs)
        try:
            expected = reference(*host_args, **host_kwargs)
        except Exception as error:  # the comparison must never stop training
            call.reference_failed(error)
            return result
        if op.kind == "functional":
            several = len(op.outputs) > 1  # else a list result is one output (a tensor list)
            results = result if several else (result,)
            expecteds = expected if several else (expected,)
            for name, actual, wanted in zip(op.outputs, results, expecteds):
                call.check(name, actual, wanted)
        host_values = list(host_args) + list(host_kwargs.values())
        for name, value, host_value, original in zip(names, values, host_values, before):
            if name in written:
                call.check(name, value, host_value)
            elif (isinstance(value, torch.Tensor) and not _unchanged(value, original)
                  and _storage_of(value) not in written_storages):  # Note [Inputs that alias a written argument]
                call.mismatch(name, "the op modified this input")
        if not call.agree and STRICT:
            raise RuntimeError(f"autocompare: {op.name} differs from the CPU result at call #{call.number} "
                               f"(DIPU_AUTOCOMPARE_STRICT)")
        return result

    return compared


_summary_registered = False


def _register_summary() -> None:
    global _summary_registered
    if not _summary_registered:
        _summary_registered = True
        atexit.register(print_summary)


def print_summary() -> None:
    """The summary at exit (Note [Autocompare output])."""
    print(_process.summary(), flush=True)


# ---- Python API: dipu.autocompare(...) ------------------------------------------------------------


def switched_on() -> bool:
    """Whether autocompare compares some ops in this process outside ``dipu.autocompare`` blocks."""
    return _summary_registered


def switch_on() -> None:
    """Compare the ops DIPU_AUTOCOMPARE_OPS_LIST names: dipu/__init__.py calls this once the kernels are
    registered (Note [Autocompare as a switch])."""
    _compare(None)


def _compare(patterns: OpPatterns | None) -> bool:
    """Compare the registered kernels ``patterns`` match (None: DIPU_AUTOCOMPARE_OPS_LIST) and no others; False
    when no kernel is registered (every op runs on the CPU fallback: nothing to compare)."""
    patterns = autocompare_patterns() if patterns is None else patterns
    registration.compare(patterns.matches, wrap)
    return bool(registration.kernels)


class Scope:
    """``with dipu.autocompare(ops=".*") as run:`` compares the ops matching ``ops`` (regexes, as in
    DIPU_AUTOCOMPARE_OPS_LIST) inside the block only; ``run`` is the block's :class:`Results`.
    ``verbose`` and ``strict`` act as DIPU_AUTOCOMPARE_VERBOSE and DIPU_AUTOCOMPARE_STRICT do."""

    def __init__(self, ops: str = ".*", *, verbose: bool | None = None, strict: bool | None = None):
        self.patterns = OpPatterns([("dipu.autocompare", ops)])
        self.settings = {key: value for key, value in (("VERBOSE", verbose), ("STRICT", strict)) if value is not None}
        self.results = Results()
        self._saved: dict = {}

    def __enter__(self) -> Results:
        self._saved = {key: globals()[key] for key in self.settings}
        globals().update(self.settings)
        _scopes.append(self)
        _active.append(self.results)
        if not _compare(self.patterns):
            warnings.warn("dipu.autocompare: no dipu kernels are registered (every op runs on the CPU "
                          "fallback), so there is nothing to compare", stacklevel=2)
        return self.results

    def __exit__(self, *exc) -> None:
        _scopes.remove(self)
        _active.remove(self.results)
        globals().update(self._saved)
        _compare(_scopes[-1].patterns if _scopes else None)


_scopes: list[Scope] = []


class _CallableModule(types.ModuleType):
    """The module's class: ``dipu.autocompare(".*")`` opens a :class:`Scope` while ``dipu.autocompare`` stays
    this module (``results()``, ``TOLERANCES``, ...)."""

    def __call__(self, ops: str = ".*", *, verbose: bool | None = None, strict: bool | None = None) -> Scope:
        return Scope(ops, verbose=verbose, strict=strict)


sys.modules[__name__].__class__ = _CallableModule
