"""Op libraries, installed as ``dipu.diopi_impl`` (Note [Installed import names] in pyproject.toml).

Each sub-package is one op library implementing a subset of the DIOPI proto
(``dipugen.proto``, scripts/autogen/proto.py), e.g. ``dipu.diopi_impl.torch`` (ATen kernels on
zero-copy native aliases). See ``dipu.diopi`` for the runtime (context, status
codes) and library registry.
"""
