"""The torch op library object, alone in a leaf module: the family modules register into it and the
package re-exports it, so neither imports the other back."""

from dipu.diopi import OpLibrary

library = OpLibrary("torch", native_alias=True)  # its kernels compute with ATen on native_alias views
