"""Target of PyTorch's device-backend autoload (entry-point group torch.backends).

Importing this module imports the ``dipu`` package, which registers the device.
It is a module of its own, not an attribute of ``dipu``, because ``import dipu``
imports torch, whose autoload then runs while ``dipu`` is still half-initialized.
"""


def load() -> None:
    """Nothing left to do: importing dipu did the work."""
