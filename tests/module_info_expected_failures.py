"""Expected failures of tests/test_module_info.py (PyTorch's ModuleInfo database on dipu), each with its reason.
Strict, as tests/opinfo_expected_failures.py is: an entry whose compared inputs all agree with the CPU fails the
test. ``python -m dipu conformance`` reads this file too and reports an entry's failure as an ``expected
failure`` rather than a regression.

The passes are those of dipu/conformance/suites.py: ``forward train``, ``backward train``, and, for the modules
whose evaluation mode differs (``train_and_eval_differ``), ``forward eval`` and ``backward eval``.
"""

# reason id -> the reason
REASONS: dict[str, str] = {}

# (module name, dtype, pass) -> (reason id, index of the first failing input)
EXPECTED_FAILURES: dict[tuple[str, str, str], tuple[str, int]] = {}
