"""The fused LSTM and GRU cells.

Note [Fused recurrent cells]
ATen's LSTM and GRU run their cells through _thnn_fused_lstm_cell / _thnn_fused_gru_cell on every device but
the CPU, which has no such kernels (so no CPU fallback either). These compute what the CUDA kernels do, with
ATen math on the aliases: gates in (input, forget, cell, output) order for the LSTM and (reset, input, new) for
the GRU, and the same workspace layout, so the backward functions can read what the forwards saved. The C++ op
library (diopi_impl/torch_cpp/handwritten.cpp) makes the same ATen calls in the same order, so nn.LSTMCell and
nn.GRUCell take the C++ path with these bits.

Their results agree with the CPU's within float32's tolerance but not bit for bit, and no cell can make them:
ATen chooses another computation for every device but the CPU before any dipu kernel runs (RNN.cpp). The CPU
projects the whole sequence's input at once with the bias inside one addmm, runs the gates as separate
elementwise ops (LSTM through oneDNN where it can) and lets autograd sum each step's gradients; off the CPU
each step projects its input without the bias, the fused cell adds both biases, and its backward is the
closed form above. The same sums in another order round differently (ModuleInfo's float32 training samples of
GRU and LSTM: every gradient within assertEqual's rtol 1.3e-6 and atol 1e-5, up to 1.1e-4 relative on
elements above 1e-3, none bit for bit; CUDA's own kernels differ from the CPU's in the same way).
tests/test_nn_ops.py compares them in float64 and over ModuleInfo's float32 samples.
"""

import torch

from dipu.diopi import SUCCESS
from dipu.diopi import native_alias as alias
from ._library import library

aten = torch.ops.aten


def _gates(input_gates, hidden_gates, input_bias, hidden_bias, d):
    gates = alias(input_gates, d) + alias(hidden_gates, d)
    if input_bias is not None:
        gates = gates + alias(input_bias, d) + alias(hidden_bias, d)
    return gates


@library.register(aten=aten._thnn_fused_lstm_cell.out)
def diopiLstmCell(ctx, hy, cy, workspace, input_gates, hidden_gates, cx, input_bias, hidden_bias):
    d = ctx.device
    i, f, g, o = _gates(input_gates, hidden_gates, input_bias, hidden_bias, d).chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c = alias(cy, d)
    torch.addcmul(f * alias(cx, d), i, g, out=c)
    torch.mul(o, c.tanh(), out=alias(hy, d))
    torch.cat((i, f, g, o), 1, out=alias(workspace, d))
    return SUCCESS


@library.register
def diopiLstmCellBackward(ctx, grad_gates, grad_cx, grad_bias, grad_hy, grad_cy, cx, cy, workspace, has_bias):
    d = ctx.device
    i, f, g, o = alias(workspace, d).chunk(4, 1)
    tanh_cy = alias(cy, d).tanh()
    d_cy = torch.zeros_like(tanh_cy) if grad_cy is None else alias(grad_cy, d).clone()
    if grad_hy is not None:
        ghy = alias(grad_hy, d)
        d_cy += ghy * o * (1 - tanh_cy * tanh_cy)
        d_o = ghy * tanh_cy * o * (1 - o)
    else:
        d_o = torch.zeros_like(o)
    gates = alias(grad_gates, d)
    torch.cat((d_cy * g * i * (1 - i), d_cy * alias(cx, d) * f * (1 - f), d_cy * i * (1 - g * g), d_o), 1, out=gates)
    torch.mul(d_cy, f, out=alias(grad_cx, d))
    if grad_bias is not None:
        torch.sum(gates, 0, out=alias(grad_bias, d))
    return SUCCESS


@library.register(aten=aten._thnn_fused_gru_cell.out)
def diopiGruCell(ctx, hy, workspace, input_gates, hidden_gates, hx, input_bias, hidden_bias):
    d = ctx.device
    ig, hg = alias(input_gates, d), alias(hidden_gates, d)
    if input_bias is not None:
        ig, hg = ig + alias(input_bias, d), hg + alias(hidden_bias, d)
    ir, ii, in_ = ig.chunk(3, 1)
    hr, hi, hn = hg.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (ii + hi).sigmoid()
    n = torch.addcmul(in_, r, hn).tanh()
    h_minus_n = alias(hx, d) - n
    torch.addcmul(n, z, h_minus_n, out=alias(hy, d))
    torch.cat((r, z, n, hn, h_minus_n), 1, out=alias(workspace, d))
    return SUCCESS


@library.register(aten=aten._thnn_fused_gru_cell_backward.out)
def diopiGruCellBackward(ctx, grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias,
                              grad_hy, workspace, has_bias):
    d = ctx.device
    r, z, n, hn, h_minus_n = alias(workspace, d).chunk(5, 1)
    go = alias(grad_hy, d)
    d_n = go * (1 - z) * (1 - n * n)
    d_r = d_n * hn * r * (1 - r)
    d_z = go * h_minus_n * z * (1 - z)
    gi, gh = alias(grad_input_gates, d), alias(grad_hidden_gates, d)
    torch.cat((d_r, d_z, d_n), 1, out=gi)
    torch.cat((d_r, d_z, d_n * r), 1, out=gh)
    torch.mul(go, z, out=alias(grad_hx, d))
    if grad_input_bias is not None:
        torch.sum(gi, 0, out=alias(grad_input_bias, d))
    if grad_hidden_bias is not None:
        torch.sum(gh, 0, out=alias(grad_hidden_bias, d))
    return SUCCESS
