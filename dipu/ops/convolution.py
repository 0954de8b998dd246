"""Convolution kernels: ``impl:`` logic for convolution_overrideable and its backward.

ATen routes convolutions on dipu to the ``*_overrideable`` ops with every
parameter already expanded to one value per spatial dim. DIOPI's convolution
functions take no ``transposed`` flag: transposed convolutions call
diopiConvTranspose2d(Backward) instead (the CPU has no
``convolution_overrideable`` to fall back to), which the registry binds and
passes in like the main function (``calls:`` in diopi_functions.yaml); where
the op library lacks them, the function passed answers force-fallback.

Outputs and gradients take the memory format the CPU kernels choose: channels_last (3d) when the input or
the weight is (see Note [Memory formats of outputs] in dipu/ops/memory_format.py).

Note [Convolution layouts under fake tensors]
``torch.compile`` plans buffers from fake tensors, and torch's fake convolution asks
``torch._C._conv_determine_backend_memory_format`` which layout the selected backend produces. For the
``Overrideable`` backend (every PrivateUse1 device) it answers contiguous whatever the inputs, but dipu's kernels,
and the CPU fallback they stand in for, keep channels_last. Inductor's layout optimization makes conv inputs
channels_last, so a compiled CNN asserted contiguous strides on a channels_last output and stopped.
:func:`register_fake_layouts` wraps torch's fake convolution (forward and backward) so that on dipu it
returns the layout :func:`_memory_format` gives the real kernels: one rule for both. It acts on static
shapes only; with symbolic shapes torch's fake kernel keeps its own answer, as it does on the CPU.
"""

from __future__ import annotations

import torch
from torch._subclasses import fake_impls

from dipu._core import _C
from dipu.ops.memory_format import empty, memory_format


def _transposed_output_size(input, weight, stride, padding, dilation, output_padding, groups) -> list[int]:
    spatial = [
        (size - 1) * step - 2 * pad + dil * (kernel - 1) + extra + 1
        for size, kernel, step, pad, dil, extra in zip(input.shape[2:], weight.shape[2:], stride, padding, dilation,
                                                       output_padding)
    ]
    return [input.shape[0], weight.shape[1] * groups, *spatial]


def _output_size(input, weight, stride, padding, dilation) -> list[int]:
    spatial = [
        (size + 2 * pad - dil * (kernel - 1) - 1) // step + 1
        for size, kernel, step, pad, dil in zip(input.shape[2:], weight.shape[2:], stride, padding, dilation)
    ]
    return [input.shape[0], weight.shape[0], *spatial]


def _memory_format(input, weight):
    """ATen's choice for CPU convolutions: channels_last when the input or the weight is."""
    layout = memory_format(input)
    return layout if layout is not torch.contiguous_format else memory_format(weight)


def convolution(diopi, diopi_transposed, ctx, input, weight, bias, stride, padding, dilation, transposed,
                output_padding, groups):
    layout = _memory_format(input, weight)
    if transposed:
        out = empty(_transposed_output_size(input, weight, stride, padding, dilation, output_padding, groups),
                    input.dtype, ctx.device, layout)
        return diopi_transposed(ctx, out, input, weight, bias, stride, padding, output_padding, groups, dilation), out
    out = empty(_output_size(input, weight, stride, padding, dilation), input.dtype, ctx.device, layout)
    return diopi(ctx, out, input, weight, bias, stride, padding, dilation, groups), out


def convolution_backward(diopi, diopi_transposed, ctx, grad_output, input, weight, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask):
    d = ctx.device
    layout = _memory_format(input, weight)
    grad_input = empty(input.shape, input.dtype, d, layout) if output_mask[0] else None
    grad_weight = empty(weight.shape, weight.dtype, d, layout) if output_mask[1] else None
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    grad_bias = _C.empty([channels], weight.dtype, d) if output_mask[2] else None
    bias_sizes = [channels] if output_mask[2] else None  # DIOPI's sign that the forward had a bias
    if transposed:
        status = diopi_transposed(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, bias_sizes,
                                  stride, padding, dilation, output_padding, groups)
        return status, (grad_input, grad_weight, grad_bias)
    status = diopi(ctx, grad_input, grad_weight, grad_bias, grad_output, input, weight, bias_sizes, stride,
                   padding, dilation, groups)
    return status, (grad_input, grad_weight, grad_bias)


#: torch's fake-tensor convolutions (Note [Convolution layouts under fake tensors]).
_FAKE_CONVOLUTIONS = (
    torch.ops.aten.convolution.default,
    torch.ops.aten._convolution.default,
    torch.ops.aten._convolution.deprecated,
    torch.ops.aten.convolution_backward.default,
)


def register_fake_layouts() -> None:
    """Make torch's fake convolutions on dipu return the layout dipu's kernels do (once per process)."""
    for op in _FAKE_CONVOLUTIONS:
        torch_fake = fake_impls.op_implementations_dict.get(op)
        if torch_fake is None or getattr(torch_fake, "_dipu_layout", False):
            continue
        fake_impls.op_implementations_dict[op] = _fake_in_dipu_layout(op, torch_fake)


def _fake_in_dipu_layout(op, torch_fake):
    names = [argument.name for argument in op._schema.arguments]

    def fake(fake_mode, func, *args, **kwargs):
        result = torch_fake(fake_mode, func, *args, **kwargs)
        named = {**dict(zip(names, args)), **kwargs}
        input, weight = named["input"], named["weight"]
        if input.fake_device.type != "dipu" or not _static(input, weight):
            return result
        layout = _memory_format(input, weight)
        if isinstance(result, tuple):  # convolution_backward: grad_input, grad_weight follow; grad_bias is 1-d
            return (_in_layout(fake_mode, result[0], layout), _in_layout(fake_mode, result[1], layout), result[2])
        return _in_layout(fake_mode, result, layout)

    fake._dipu_layout = True
    return fake


def _static(*tensors) -> bool:
    return all(isinstance(size, int) for tensor in tensors for size in tensor.shape)


def _in_layout(fake_mode, tensor, layout):
    if tensor is None or tensor.is_contiguous(memory_format=layout):
        return tensor
    with fake_mode:
        return tensor.contiguous(memory_format=layout)
