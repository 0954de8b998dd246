"""DIOPI: the device-independent operator interface dipu calls into.

``proto`` declares every standard function (name, parameter order and kinds);
each sub-package is one op library implementing a subset of them, e.g.
``diopi_impl.torch`` (ATen kernels on zero-copy native aliases). See
``dipu.diopi`` for the runtime (context, status codes) and library registry.
"""
