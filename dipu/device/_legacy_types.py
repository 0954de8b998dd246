"""The legacy typed-tensor classes: ``torch.dipu.FloatTensor`` and its siblings.

Note [Legacy tensor types]
torch creates torch.cuda.FloatTensor and its siblings in C++ (torch/csrc/tensor/python_tensor.cpp) for the
backends of torch::utils::all_declared_types(): CPU, CUDA and their sparse layouts, never PrivateUse1, and
torch.utils.backend_registration generates no such classes either. Yet ``x.type()`` names dipu tensors
``torch.dipu.FloatTensor`` and ``x.type("torch.dipu.FloatTensor")`` already works (torch parses the
PrivateUse1 backend name). So dipu defines the classes here with the behaviour of torch's ``tensortype``:
``isinstance`` matches device type and dtype, ``dtype``/``layout``/``is_cuda``/``is_sparse`` on the class,
calling the class follows torch's legacy constructor, and ``x.type(cls)`` works because torch reads the
class's C-level name (``tp_name``, which is ``__name__`` for a Python class) as the type string.
"""

from __future__ import annotations

import torch

from dipu.device._devices import _TYPE, _get_device_index

_LEGACY_TYPES = {
    "Double": torch.float64, "Float": torch.float32, "Half": torch.float16, "BFloat16": torch.bfloat16,
    "Long": torch.int64, "Int": torch.int32, "Short": torch.int16, "Char": torch.int8, "Byte": torch.uint8,
    "Bool": torch.bool,
}


class _TensorType(type):
    """The metaclass of ``torch.dipu.<Scalar>Tensor``, mirroring ``torch.tensortype``."""

    # each class's own, from _legacy_type's namespace
    _dtype: torch.dtype
    _cpu_class: type

    dtype = property(lambda cls: cls._dtype)
    layout = property(lambda cls: torch.strided)
    is_cuda = property(lambda cls: False)
    is_xpu = property(lambda cls: False)
    is_sparse = property(lambda cls: False)
    is_sparse_csr = property(lambda cls: False)

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, torch.Tensor) and obj.device.type == _TYPE and obj.dtype == cls._dtype
                and obj.layout == torch.strided)

    def __call__(cls, *args, device=None):
        """torch's legacy constructor: sizes (uninitialized), data, a tensor of this type (an alias), a storage."""
        if device is not None and torch.device(device).type != _TYPE:
            raise RuntimeError(f"legacy constructor expects device type: {_TYPE} but device type: "
                               f"{torch.device(device).type} was passed")
        target = torch.device(_TYPE, _get_device_index(device))
        if len(args) == 1 and isinstance(args[0], torch.Tensor):
            if not isinstance(args[0], cls):
                raise TypeError(f"expected {cls.__name__} (got {args[0].type()})")
            return torch.ops.aten.alias(args[0])
        if len(args) == 1 and isinstance(args[0], (torch.UntypedStorage, torch.TypedStorage)):
            return torch.empty(0, dtype=cls._dtype, device=args[0].device).set_(args[0])
        if args and all(isinstance(a, int) for a in args) or len(args) == 1 and isinstance(args[0], torch.Size):
            return torch.empty(*args, dtype=cls._dtype, device=target)
        return cls._cpu_class(*args).to(target)


def _legacy_type(name: str, dtype: torch.dtype) -> _TensorType:
    cls = _TensorType(f"torch.{_TYPE}.{name}Tensor", (), {
        "_dtype": dtype, "_cpu_class": getattr(torch, f"{name}Tensor"), "__module__": f"torch.{_TYPE}",
        "__doc__": f"``torch.{_TYPE}.{name}Tensor``: the legacy class of {dtype} dipu tensors (see Note "
                   f"[Legacy tensor types])."})
    cls.__qualname__ = f"{name}Tensor"
    torch._tensor_classes.add(cls)  # type: ignore[arg-type]  # legacy classes are no Tensor subclasses (torch's own neither)
    return cls


DoubleTensor, FloatTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, CharTensor, \
    ByteTensor, BoolTensor = (_legacy_type(name, dtype) for name, dtype in _LEGACY_TYPES.items())
