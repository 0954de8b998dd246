"""The data-driven conformance suite: every DIOPI function of every installed op library.

Cases live in tests/conformance/cases_*.py; skips, each with its reason, in
tests/conformance/skips.py. The totals are printed at the end of the run.
"""

from importlib import metadata

import pytest
import torch

from conformance.runner import FALLBACK, STATS, load_cases, run_case
from conformance.skips import SKIPS
import dipu
from dipu.diopi.library import ENTRY_POINT_GROUP, load_library

CASES = load_cases()
LIBRARY_NAMES = sorted({"torch"} | {ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})
LIBRARIES = {name: load_library(name) for name in LIBRARY_NAMES}


def _implemented(library) -> set[str]:
    """The library's functions and its bases', down to a base the suite runs by its own name (torch_cpp's
    functions, not the Python torch library's again under torch_cpp)."""
    names = set(library.functions)
    while library.base is not None and library.base.name not in LIBRARY_NAMES:
        library = library.base
        names |= set(library.functions)
    return names


def _c_last_error(library_name: str) -> str:
    """What a C library built by its package says about its last failure on this thread."""
    import ctypes
    import importlib

    path = importlib.import_module(f"dipu.diopi_impl.{library_name}").library_path()
    function = ctypes.CDLL(str(path)).diopiGetLastErrorString
    function.restype = ctypes.c_char_p
    return (function() or b"").decode(errors="replace")


PARAMS = [(lib, fn) for lib in LIBRARY_NAMES for fn in sorted(_implemented(LIBRARIES[lib]))]


@pytest.mark.parametrize("library_name, function", PARAMS)
def test_function(library_name, function):
    library = LIBRARIES[library_name]
    # A library that cannot reach this vendor's memory says so (OpLibrary.cannot_run_on): examples/vendor_toy's
    # runs under DIPU_VENDOR=toy only, the torch library not on a vendor with opaque memory.
    reason = library.cannot_run_on(dipu.vendor())
    if reason:
        pytest.skip(f"{reason}; run its cases where it can: DIPU_VENDOR=<vendor> pytest "
                    f"tests/test_conformance.py -k {library_name}-")
    reason = SKIPS.get(library_name, {}).get(function)
    if reason:
        STATS["skipped functions"] += 1
        pytest.skip(reason)
    cases = CASES.get(function, [])
    if not cases:
        pytest.fail(f"{function} is implemented by op library '{library_name}' but has no conformance "
                    f"cases and no skip in tests/conformance/skips.py")
    declared = library.supported_dtypes(function)
    STATS["functions"] += 1
    failures = []
    compared = fell_back = 0
    for case in cases:
        STATS["cases"] += 1
        if declared is not None and case.dtype not in declared:
            STATS["skipped cases"] += 1  # the library declares it does not take this dtype
            continue
        try:
            if run_case(library.get(function), case) is not FALLBACK:
                STATS["passed"] += 1
                compared += 1
                continue
            fell_back += 1
            if library.base is not None and library.base.name in LIBRARY_NAMES and \
                    library.base.get(function) is not None and \
                    run_case(library.base.get(function), case) is not FALLBACK:
                # a twin library (torch_cpp) refusing what the library it is laid over computes: its fallback
                # would hide a wrong argument conversion behind the CPU's result
                raise AssertionError(f"answered diopiForceFallbackToCPU where '{library.base.name}' computes: "
                                     f"{_c_last_error(library_name)}")
        except Exception as error:  # noqa: BLE001  (every failure is reported below)
            STATS["failed"] += 1
            failures.append(f"{case.label}: {type(error).__name__}: {error}")
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures[:10])
    # A function whose every case fell back or was left out for its dtype compared nothing: passing would say
    # the library computes it right when the CPU computed every case.
    assert compared, (f"{function} of op library '{library_name}' compared nothing: of {len(cases)} cases, "
                      f"{fell_back} fell back to the CPU and {len(cases) - fell_back} are in dtypes it does not "
                      f"declare; give it a case it computes, or a skip with its reason in tests/conformance/skips.py")


def test_runner_catches_wrong_values_and_mutated_inputs():
    from conformance.spec import Case, T
    from dipu import _C
    from dipu.diopi import SUCCESS

    case = Case("diopiNeg", {"input": T((3, 4))}, torch.neg)

    def wrong(ctx, out, input):
        _C.alias(out, ctx.device).copy_(_C.alias(input, ctx.device))
        return SUCCESS

    def mutating(ctx, out, input):
        torch.neg(_C.alias(input, ctx.device), out=_C.alias(out, ctx.device))
        _C.alias(input, ctx.device).zero_()
        return SUCCESS

    with pytest.raises(AssertionError, match="output out"):
        run_case(wrong, case)
    with pytest.raises(AssertionError, match="input input was modified"):
        run_case(mutating, case)

    def refuse(input):
        raise RuntimeError("invalid input")

    def accept_anything(ctx, out, input):
        return SUCCESS

    with pytest.raises(AssertionError, match="succeeded where the CPU reference raised RuntimeError"):
        run_case(accept_anything, Case("diopiNeg", {"input": T((3, 4))}, refuse))
    run_case(mutating, Case("diopiNeg", {"input": T((0,), dtype=torch.bool)}, torch.neg))  # ATen refuses: ok
