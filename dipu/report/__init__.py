"""The run report: how far a vendor's port is along, and what to write next.

    python -m dipu.report -o DIR -- <command ...>      # or DIPU_REPORT=DIR on a plain run
    python -m dipu.report --compare OLD.json NEW.json

writes DIR/report.json and a self-contained DIR/report.html: per aten op that touched dipu, its calls,
host time (self and inclusive; Note [Op statistics] in dipu/csrc/op_stats.cpp) and how it ran; per DIOPI
function of the proto, whether the active op library implements it (by family, with the ops that need it);
"write these next", the missing functions ranked by the host time their ops spent on the CPU fallback; and
autocompare's verdicts when it is on; device time per op and per signature (Note [Device time per kernel] in
dipu/csrc/op_stats.cpp), and the signatures of most device time against a reference device (Note [The
reference device] in dipu/report/reference.py).

Note [How an op ran]
Each op gets one category, checked against real runs (tests/test_report.py):
- ``native``: a generated kernel is registered for it (``registration.kernels``; its ``kernel`` field says
  ``C++`` when the op's generated C++ wrapper serves it, Note [Generated C++ wrappers]);
- ``refused``: a kernel is registered, yet every call of it reached the CPU fallback (the library's
  function, or the dtype guard of Note [Declared dtypes], answered FORCE_FALLBACK); a kernel that refused
  only some calls stays ``native``, its ``fallback_calls`` counting the refusals;
- ``fallback``: no kernel; it ran through the CPU fallback (``dipu.fallback_counts()``);
- ``forced fallback``: the same, because DIPU_FORCE_FALLBACK_OPS_LIST matched the op or its spec entry;
- ``core``: the native core's own PrivateUse1 kernel (views, metadata, empty: dipu/csrc/metadata_ops.cpp;
  copies: dipu/csrc/copies.cpp);
- ``composite``: no PrivateUse1 kernel; ATen decomposes it into other ops (CompositeImplicitAutograd, or
  CompositeExplicitAutograd such as ``_to_copy``), which are listed themselves;
- ``other``: none of these (none has been seen in the tests' runs).

This package is imported at ``import dipu`` only when DIPU_REPORT is set (dipu/__init__.py).
"""
