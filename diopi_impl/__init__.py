"""Op libraries, installed as ``dipu.diopi_impl`` (Note [Installed import names] in pyproject.toml).

Each sub-package is one op library implementing a subset of the DIOPI proto
(``dipu.diopi.FUNCTIONS``, declared in dipu/diopi/proto.py), e.g. ``dipu.diopi_impl.torch``
(ATen kernels on zero-copy native aliases, one module per op family). An op library uses
only ``dipu.diopi``, the op-library API: the library base, the runtime it calls (context,
status codes), native aliases and generators, and the blockwise attention algorithm.
"""
