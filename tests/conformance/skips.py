"""Functions an op library implements but the conformance suite does not run, with the reason.

``SKIPS[library][function] = reason``. Every skip states why; the suite prints
them, and a function without cases and without a skip fails the suite.
"""

SKIPS: dict[str, dict[str, str]] = {
    "torch": {},
}

# ---- optimizers (_foreach_, fused Adam), AMP: functions that update whole tensor lists in place. The proto
# has no kind for a written Tensor[] (Tensor(a!)[]), so the runner would take each list for a read-only input;
# tests/test_optim_amp_random.py checks every one of them against CPU through torch's API instead.
from diopi_impl.proto import FUNCTIONS as _FUNCTIONS  # noqa: E402

SKIPS["torch"].update({
    name: "updates a tensor list in place, which the runner cannot check (see tests/test_optim_amp_random.py)"
    for name in _FUNCTIONS
    if name.startswith("diopiFused") or name == "diopiAmpForeachNonFiniteCheckAndUnscaleInp"
    or name.startswith("diopiForeach") and "Inp" in name
})
