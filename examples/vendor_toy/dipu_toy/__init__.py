"""dipu's example vendor "toy" (docs/bring-up.md): ``runtime`` (a DeviceRuntime over an arena whose addresses
are not host addresses) and ``ops`` (a DIOPI op library of five functions). Installed beside dipu, it is
found through the entry points in its pyproject.toml: ``DIPU_VENDOR=toy``."""
