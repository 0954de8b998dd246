"""Functions an op library implements but the conformance suite does not run, with the reason.

``SKIPS[library][function] = reason``. Every skip states why; the suite prints
them, and a function without cases and without a skip fails the suite.
"""

SKIPS: dict[str, dict[str, str]] = {
    "torch": {},
}
