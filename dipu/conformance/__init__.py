"""``python -m dipu conformance``: the conformance certificate of a vendor's port.

Note [The conformance certificate]
One command runs, against the active vendor and op library, dipu's own conformance cases and PyTorch's
OpInfo, ModuleInfo and OptimizerInfo databases for the installed torch (dipu/conformance/suites.py),
each compared with the CPU (dipu/conformance/compare.py, which tests/test_opinfo.py shares). Items (an
op, a module, an optimizer, a DIOPI function) run in worker subprocesses (dipu/conformance/worker.py),
a batch per worker; each writes a ``start`` line to ``journal.jsonl`` before an item and an ``end``
line after it, fsynced, so when a kernel kills the worker the parent names the item that was running
as a ``crash`` and starts a new worker on the rest of the batch. The journal is also what makes a run
resumable: items it has ended are not run again (``--fresh`` starts over). ``--budget`` (seconds,
default 780, so that ``--suites opinfo,modules,optim`` fits 15 minutes on two cores) stops starting
items; those not started are ``skipped`` and a later run resumes them. Measured on the default vendor (sim,
torch_cpp): all 831 items of those three suites in 572 s, 9 min 45 s of wall time with the start, on two
cores other jobs shared (load 3 to 9), so the default budget cuts nothing there, and the samples agreeing
are tests/test_opinfo.py's (1869 of 1871, float32 forward) and tests/test_module_info.py's with
DIPU_MODULE_INFO_SAMPLES=3 (318 of 318 forward train, ...).
Each item gets a verdict per dtype and pass (forward/backward; train/eval; an optimizer's
default/foreach/fused; the cases of one dtype):
- ``agrees``: every sample (the first ``--samples``, default 3; the cases and optimizer
  configurations: all) matches the CPU within torch's ``assertEqual`` tolerances for the dtype (the
  OpInfo's own overrides included), or both devices refused it with the same error type;
- ``fallback``: agrees, but some of its calls ran on the CPU fallback (named);
- ``mismatch``: the first differing sample, with its largest absolute and relative errors and the
  tolerances they exceeded;
- ``error``: dipu raised where the CPU did not, or raised another type (both types given);
- ``crash``: the worker died in it (or ran past the budget by two minutes and was killed);
- ``skipped``: with the reason (no CPU support for the dtype declared, no case, the budget, an op dipu's
  own suite does not compare either: uninitialized memory);
- ``expected failure``: a ``mismatch``, ``error`` or ``crash`` that dipu's own suite lists as expected
  (tests/opinfo_expected_failures.py, tests/module_info_expected_failures.py, read where dipu runs from its
  source tree), with the listed reason and what it was; a listed pass that agrees says so in the summary.
``--baseline OLD.json`` (read before anything runs) compares per (suite, item, dtype, pass): a verdict that
was ``agrees`` or ``fallback`` and is now ``mismatch``, ``error`` or ``crash`` regressed, and the exit status
is then 1. A verdict about a whole item (a crash, the budget: dtype and pass ``*``) stands for each of the
item's passes the other certificate judged, so an op that agreed and now crashes regressed; an expected
failure never regresses.
"""
