"""Reference kernels: see the module docstring of diopi_impl.torch."""

from diopi_impl.torch import library  # noqa: F401
