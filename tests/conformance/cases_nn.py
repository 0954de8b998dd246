"""Conformance cases: softmax, losses, normalization, convolution, pooling, padding and resampling (more in
cases_nn_more.py)
(diopi_impl/torch/: activations.py's softmax, losses.py, normalization.py, convolution.py, pooling.py,
resampling.py, embedding.py, recurrent.py, and linalg.py's distances)."""

import torch

from conformance.cases_reduction import reseeded, sweep
from conformance.spec import FLOAT, T

aten = torch.ops.aten
F32_64 = (torch.float32, torch.float64)
ALL_T = ((), (7,), (3, 5), (2, 3, 4), (1, 4, 1, 3), (0, 3))
IMAGES = ((2, 3, 7, 6), (1, 2, 5, 5), (3, 1, 4, 9))

CASES = []


def _with(**extra):
    def make(shape, layout):
        yield {"input": T(shape, layout=layout), **extra}
    return make


# ---- softmax ------------------------------------------------------------------------------------------
for name, fn, backward in (("Softmax", aten._softmax, aten._softmax_backward_data),
                           ("LogSoftmax", aten._log_softmax, aten._log_softmax_backward_data)):
    CASES += sweep(f"diopi{name}", lambda input, dim, fn=fn: fn(input, dim, False), lambda s, l: (
        {"input": T(s, layout=l), "dim": d} for d in ([0, -1] if len(s) < 2 else [0, 1, -1])), FLOAT, ALL_T)
    CASES += sweep(f"diopi{name}Backward", lambda grad_output, output, dim, backward=backward: backward(
        grad_output, output, dim, grad_output.dtype), lambda s, l: (
        {"grad_output": T(s, layout=l), "output": T(s), "dim": d} for d in ([0, -1] if len(s) < 2 else [0, 1, -1])),
        F32_64 + (torch.bfloat16,), ALL_T)

# ---- losses -------------------------------------------------------------------------------------------------


def _nll_args(shape, layout):
    n, c = (shape[0], shape[1]) if len(shape) >= 2 else (None, shape[0])
    target_shape = (() if n is None else (n,)) + tuple(shape[2:])
    for reduction in (0, 1, 2):
        for weight, ignore in ((None, -100), (T((c,), low=0.1, high=2), 1)):
            yield {"input": T(shape, layout=layout), "target": T(target_shape, torch.int64, low=0, high=c),
                   "weight": weight, "reduction": reduction, "ignore_index": ignore}


NLL_SHAPES = ((5,), (4, 5), (0, 3), (2, 3, 4, 5))
CASES += sweep("diopiNLLLossV2", lambda input, target, weight, reduction, ignore_index: tuple(
    (aten.nll_loss2d_forward if input.dim() == 4 else aten.nll_loss_forward)(
        input, target, weight, reduction, ignore_index)), _nll_args, F32_64 + (torch.bfloat16,), NLL_SHAPES)


def _nll_backward_args(shape, layout):
    for args in _nll_args(shape, layout):
        out_shape = args["target"].shape if args["reduction"] == 0 else ()
        yield {"grad_output": T(out_shape), **args, "total_weight": T(())}


def _nll_backward_call(grad_output, input, target, weight, total_weight, reduction, ignore_index):
    backward = aten.nll_loss2d_backward if input.dim() == 4 else aten.nll_loss_backward
    # CPU's functional nll_loss2d_backward allocates grad_input with the input's strides, then demands it contiguous
    return backward(grad_output, input.contiguous(), target, weight, reduction, ignore_index, total_weight)


CASES += sweep("diopiNLLLossV2Backward", _nll_backward_call, _nll_backward_args, F32_64 + (torch.bfloat16,),
               NLL_SHAPES, note="total_weight given")

LOSS_SHAPES = ((), (7,), (3, 5), (2, 3, 4), (0, 3))
for name, fn, attr, values in (("MSELoss", aten.mse_loss, None, (None,)),
                               ("SmoothL1Loss", aten.smooth_l1_loss, "beta", (0.5, 0.0)),
                               ("HuberLoss", aten.huber_loss, "delta", (1.0, 0.3))):
    def _args(shape, layout, attr=attr, values=values):
        for reduction in (0, 1, 2):
            for value in values:
                yield {"input": T(shape, layout=layout), "target": T(shape, layout="sliced"), "reduction": reduction,
                       **({attr: value} if attr else {})}

    CASES += sweep(f"diopi{name}",
                   lambda input, target, reduction, fn=fn, **kw: fn(input, target, reduction, *kw.values()),
                   _args, FLOAT, LOSS_SHAPES)
    backward = getattr(aten, fn.__name__.split(".")[-1] + "_backward")

    def _backward_args(shape, layout, _args=_args):
        for args in _args(shape, layout):
            yield {"grad_output": T(shape if args["reduction"] == 0 else ()), **args}

    CASES += sweep(f"diopi{name}Backward", lambda grad_output, input, target, reduction, backward=backward, **kw:
                   backward(grad_output, input, target, reduction, *kw.values()), _backward_args,
                   F32_64 + (torch.bfloat16,), LOSS_SHAPES)


def _bce_args(shape, layout, grad=False):
    for reduction in (0, 1, 2):
        for weight in (None, T(shape[-1:] if shape else (), low=0.1, high=2)):
            grad_output = {"grad_output": T(shape if reduction == 0 else ())} if grad else {}
            yield {**grad_output, "input": T(shape, layout=layout, low=0.05, high=0.95),
                   "target": T(shape, low=0, high=1), "weight": weight, "reduction": reduction}


CASES += sweep("diopiBCELoss", lambda input, target, weight, reduction: aten.binary_cross_entropy(
    input, target, weight, reduction), _bce_args, F32_64 + (torch.bfloat16,), LOSS_SHAPES)
CASES += sweep("diopiBCELossBackward", lambda grad_output, input, target, weight, reduction:
               aten.binary_cross_entropy_backward(grad_output, input, target, weight, reduction),
               lambda s, l: _bce_args(s, l, True), F32_64 + (torch.bfloat16,), LOSS_SHAPES)
CASES += sweep("diopiBCEWithLogits", lambda input, target, weight, pos_weight, reduction:
               aten.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction),
               lambda s, l: ({**a, "input": T(s, layout=l), "pos_weight": p}
                             for a in _bce_args(s, l)
                             for p in ((None, T(s[-1:] if s else (), low=0.5, high=3)) if a["reduction"] == 1
                                       else (None,))),
               FLOAT, LOSS_SHAPES)

# ---- normalization -------------------------------------------------------------------------------------------
NORM_SHAPES = ((2, 3, 4, 5), (4, 6), (3, 6, 5), (1, 4, 1, 1), (0, 6, 2))
CASES += sweep("diopiLayerNorm", lambda input, weight, bias, normalized_shape, eps: tuple(aten.native_layer_norm(
    input, normalized_shape, weight, bias, eps)), lambda s, l: (
    {"input": T(s, layout=l), "weight": w and T(s[-k:]), "bias": b and T(s[-k:]), "normalized_shape": list(s[-k:]),
     "eps": 1e-5} for k in (1, 2) for w, b in ((True, True), (None, None), (True, None))), F32_64 + (torch.bfloat16,),
    NORM_SHAPES)


def _layer_norm_backward_args(shape, layout):
    for k in (1, 2):
        for w in (True, None):
            stats = shape[:-k] + (1,) * k
            yield {"grad_output": T(shape), "input": T(shape, layout=layout), "weight": w and T(shape[-k:]),
                   "bias": w and T(shape[-k:]), "mean": T(stats), "rstd": T(stats, low=0.5, high=2),
                   "normalized_shape": list(shape[-k:])}


def _layer_norm_backward_given_stats(grad_output, input, weight, bias, mean, rstd, normalized_shape):
    return tuple(aten.native_layer_norm_backward(grad_output, input, normalized_shape, mean, rstd, weight, bias,
                                                 [True, weight is not None, bias is not None]))


CASES += sweep("diopiLayerNormBackward", _layer_norm_backward_given_stats, _layer_norm_backward_args,
               F32_64, NORM_SHAPES, note="given statistics")


def _batch_norm_args(shape, layout):
    c = shape[1]
    for training in (True, False):
        for affine in (True, None):
            for stats in (True, None) if training else (True,):
                yield {"input": T(shape, layout=layout), "weight": affine and T((c,)), "bias": affine and T((c,)),
                       "running_mean": stats and T((c,)), "running_var": stats and T((c,), low=0.5, high=2),
                       "training": training, "momentum": 0.1, "eps": 1e-5}


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    out, mean, invstd = aten.native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)
    if not training:  # evaluation saves no statistics
        mean, invstd = mean.new_empty((0,)), invstd.new_empty((0,))
    return out, mean, invstd


BN_SHAPES = ((2, 3, 4, 5), (4, 6), (3, 6, 5), (5, 2, 1, 3))
CASES += sweep("diopiBatchNorm", _batch_norm, _batch_norm_args, F32_64, BN_SHAPES)


def _batch_norm_backward_args(shape, layout):
    c = shape[1]
    for training in (True, False):
        for affine in (True, None):
            yield {"grad_output": T(shape), "input": T(shape, layout=layout), "weight": affine and T((c,)),
                   "running_mean": T((c,)), "running_var": T((c,), low=0.5, high=2), "save_mean": T((c,)),
                   "save_invstd": T((c,), low=0.5, high=2), "training": training, "eps": 1e-5}


CASES += sweep("diopiBatchNormBackward", lambda grad_output, input, weight, running_mean, running_var, save_mean,
               save_invstd, training, eps: tuple(aten.native_batch_norm_backward(
                   grad_output, input, weight, running_mean, running_var, save_mean, save_invstd, training, eps,
                   [True, True, True])), _batch_norm_backward_args, F32_64, BN_SHAPES, rtol=1e-4, atol=1e-5)


def _group_norm_args(shape, layout):
    for groups in (1, shape[1]):
        for affine in (True, None):
            yield {"input": T(shape, layout=layout), "weight": affine and T((shape[1],)),
                   "bias": affine and T((shape[1],)), "num_groups": groups, "eps": 1e-5}


def _sizes(x):
    hxw = 1
    for s in x.shape[2:]:
        hxw *= s
    return x.shape[0], x.shape[1], hxw


GN_SHAPES = ((2, 4, 3, 5), (3, 6), (2, 2, 7), (1, 4, 1, 1), (0, 4, 2))
# ATen's CPU group norm kernels take contiguous tensors only (group_norm makes them so); the DIOPI functions take any.
CASES += sweep("diopiGroupNorm", lambda input, weight, bias, num_groups, eps: tuple(aten.native_group_norm(
    input.contiguous(), weight, bias, *_sizes(input), num_groups, eps)), _group_norm_args, F32_64 + (torch.bfloat16,),
    GN_SHAPES)


def _group_norm_backward_args(shape, layout):
    for groups in (1, 2):
        for affine in (True, None):
            yield {"grad_output": T(shape), "input": T(shape, layout=layout), "mean": T((shape[0], groups)),
                   "rstd": T((shape[0], groups), low=0.5, high=2), "weight": affine and T((shape[1],)),
                   "num_groups": groups}


CASES += sweep("diopiGroupNormBackward", lambda grad_output, input, mean, rstd, weight, num_groups: tuple(
    aten.native_group_norm_backward(grad_output.contiguous(), input.contiguous(), mean, rstd, weight, *_sizes(input),
                                    num_groups, [True, weight is not None, weight is not None])),
               _group_norm_backward_args, F32_64, GN_SHAPES[:-1],
               rtol=1e-4, atol=1e-5)

# ---- convolution ---------------------------------------------------------------------------------------------
CONV = ((2, 4, 7, 6), (1, 2, 5, 5), (3, 4, 1, 9))


def _conv_args(shape, layout, grad=False):
    n, c, h, w = shape
    for k, stride, padding, dilation, groups, bias in (((3, 3), [1, 1], [1, 1], [1, 1], 1, True),
                                                       ((1, 2), [2, 1], [0, 1], [1, 1], 2, False),
                                                       ((1, 3), [1, 2], [0, 2], [1, 2], 1, True)):
        weight = T((6, c // groups) + k)
        args = {"input": T(shape, layout=layout), "weight": weight, "stride": stride, "padding": padding,
                "dilation": dilation, "groups": groups}
        if grad:
            oh = (h + 2 * padding[0] - dilation[0] * (k[0] - 1) - 1) // stride[0] + 1
            ow = (w + 2 * padding[1] - dilation[1] * (k[1] - 1) - 1) // stride[1] + 1
            yield {"grad_output": T((n, 6, oh, ow)), "bias_sizes": [6] if bias else None, **args}
        else:
            yield {**args, "bias": T((6,)) if bias else None}


CASES += sweep("diopiConvolution2d", lambda input, weight, bias, stride, padding, dilation, groups: aten.convolution(
    input, weight, bias, stride, padding, dilation, False, [0, 0], groups), _conv_args, F32_64,
    CONV, rtol=1e-4, atol=1e-4)
CASES += sweep("diopiConvolution2dBackward", lambda grad_output, input, weight, bias_sizes, stride, padding, dilation,
               groups: tuple(aten.convolution_backward(grad_output, input, weight, [weight.shape[0]], stride, padding,
                                                       dilation, False, [0, 0], groups, [True, True, True])),
    lambda s, l: _conv_args(s, l, True), F32_64, CONV,
    rtol=1e-4, atol=1e-4)

# ---- pooling ----------------------------------------------------------------------------------------------------
POOL = ((2, 3, 7, 6), (1, 2, 5, 5), (3, 9, 4))
POOL_PARAMS = (([2, 2], [], [0, 0], [1, 1], False), ([3, 3], [2, 2], [1, 1], [1, 1], True),
               ([3, 2], [1, 2], [1, 0], [2, 1], False))


def _max_pool_args(shape, layout, grad=False):
    for kernel, stride, padding, dilation, ceil in POOL_PARAMS:
        args = {"input": T(shape, layout=layout), "kernel_size": kernel, "stride": stride, "padding": padding,
                "dilation": dilation, "ceil_mode": ceil}
        yield args


CASES += sweep("diopiMaxPool2dWithIndices", lambda input, kernel_size, stride, padding, dilation, ceil_mode: tuple(
    aten.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)), _max_pool_args,
    FLOAT + (torch.int64,), POOL)


def _max_pool_backward(grad_output, input, kernel_size, stride, padding, dilation, ceil_mode, indices):
    out, idx = aten.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return aten.max_pool2d_with_indices_backward(grad_output, input, kernel_size, stride, padding, dilation, ceil_mode,
                                                 indices)


def _max_pool_backward_args(shape, layout):
    for args in _max_pool_args(shape, layout):
        out, idx = aten.max_pool2d_with_indices(torch.zeros(shape), args["kernel_size"], args["stride"],
                                                args["padding"], args["dilation"], args["ceil_mode"])
        hw = shape[-2] * shape[-1]
        yield {"grad_output": T(tuple(out.shape)), **args, "indices": T(tuple(out.shape), torch.int64, low=0, high=hw)}


CASES += sweep("diopiMaxPool2dBackward", _max_pool_backward, _max_pool_backward_args, F32_64 + (torch.bfloat16,), POOL,
               note="random indices")

AVG_PARAMS = (([2, 2], [], [0, 0], False, True, None), ([3, 3], [2, 2], [1, 1], True, False, None),
              ([3, 2], [1, 2], [1, 0], False, True, 4))


def _avg_args(shape, layout, grad=False):
    for kernel, stride, padding, ceil, include, divisor in AVG_PARAMS:
        args = {"input": T(shape, layout=layout), "kernel_size": kernel, "stride": stride, "padding": padding,
                "ceil_mode": ceil, "count_include_pad": include, "divisor_override": divisor}
        if grad:
            out = aten.avg_pool2d(torch.zeros(shape), kernel, stride, padding, ceil, include, divisor)
            args = {"grad_output": T(tuple(out.shape)), **args}
        yield args


CASES += sweep("diopiAvgPool2d", lambda input, **kw: aten.avg_pool2d(input, *kw.values()), _avg_args,
               FLOAT + (torch.int64,), POOL)
CASES += sweep("diopiAvgPool2dBackward", lambda grad_output, input, **kw: aten.avg_pool2d_backward(
    grad_output, input, *kw.values()), lambda s, l: _avg_args(s, l, True), F32_64 + (torch.bfloat16,), POOL)
ADAPTIVE = ((2, 3, 7, 6), (3, 9, 4), (2, 1, 1))
for size in ([1, 1], [3, 2], [5, 7]):
    CASES += sweep("diopiAdaptiveAvgPool2d", lambda input, output_size: aten._adaptive_avg_pool2d(input, output_size),
                   _with(output_size=size), FLOAT, ADAPTIVE)
    CASES += sweep("diopiAdaptiveAvgPool2dBackward", lambda grad_output, input, s=size:
        aten._adaptive_avg_pool2d_backward(grad_output, input),
        lambda shape, layout, s=size: [{"grad_output": T(shape[:-2] + tuple(s)), "input": T(shape, layout=layout)}],
        F32_64 + (torch.bfloat16,), ADAPTIVE)
    CASES += sweep("diopiAdaptiveMaxPool2dWithIndices",
                   lambda input, output_size: tuple(aten.adaptive_max_pool2d(input, output_size)),
                   _with(output_size=size), FLOAT, ADAPTIVE)
    CASES += sweep("diopiAdaptiveMaxPool2dBackward", lambda grad_output, input, indices:
        aten.adaptive_max_pool2d_backward(grad_output, input, indices),
        lambda shape, layout, s=size: [
        {"grad_output": T(shape[:-2] + tuple(s)), "input": T(shape, layout=layout),
         "indices": T(shape[:-2] + tuple(s), torch.int64, low=0, high=shape[-1] * shape[-2])}],
        F32_64 + (torch.bfloat16,), ADAPTIVE, note="random indices")

# ---- padding ------------------------------------------------------------------------------------------------------
PADS = {1: ([1, 2], [0, 0], [2, 1]), 2: ([1, 2, 0, 1], [2, 2, 2, 2], [0, 1, 1, 0]), 3: ([1, 0, 1, 1, 0, 2],)}
PAD_SHAPES = {1: ((2, 3, 5), (3, 4)), 2: ((2, 3, 5, 6), (3, 4, 4)), 3: ((1, 2, 3, 4, 5), (2, 3, 3, 4))}
for mode in ("reflect", "replicate"):
    for dims, pads in PADS.items():
        CASES += sweep("diopiPad", lambda input, pad, mode, value: torch.nn.functional.pad(input, pad, mode),
                       lambda s, l, mode=mode, pads=pads: (
                           {"input": T(s, layout=l), "pad": p, "mode": mode, "value": None} for p in pads),
                       FLOAT, PAD_SHAPES[dims], at_least=4)
        CASES += sweep("diopiPadBackward", lambda grad_output, input, pad, mode: getattr(
            aten, f"{'reflection' if mode == 'reflect' else 'replication'}_pad{len(pad) // 2}d_backward")(
            grad_output, input, pad), lambda s, l, mode=mode, pads=pads: (
            {"grad_output": T(tuple(torch.nn.functional.pad(torch.zeros(s), p, mode).shape)),
             "input": T(s, layout=l), "pad": p, "mode": mode} for p in pads), F32_64 + (torch.bfloat16,),
            PAD_SHAPES[dims], at_least=4)
CASES += sweep("diopiPad",
               lambda input, pad, mode, value: aten.constant_pad_nd(input, pad, 0 if value is None else value),
               lambda s, l: ({"input": T(s, layout=l), "pad": p, "mode": "constant", "value": v}
                             for p in ([1, 2], [0, 0, 1, 1], [-1, 1]) if len(p) // 2 <= len(s) for v in (None, 2)),
               FLOAT + (torch.int64, torch.bool), ((7,), (3, 5), (2, 3, 4), (0, 3)))

# ---- upsampling and im2col ------------------------------------------------------------------------------------------
for size, scales in (([10, 12], (None, None)), ([3, 4], (None, None)), ([14, 12], (2.0, 2.0)), ([5, 9], (0.7, 1.5))):
    CASES += sweep("diopiUpsampleNearest2d", lambda input, size, scales_h, scales_w: aten.upsample_nearest2d(
        input, size, scales_h, scales_w), _with(size=size, scales_h=scales[0], scales_w=scales[1]),
        FLOAT + (torch.uint8,), ((2, 3, 7, 6), (1, 1, 5, 5)), at_least=5)
    CASES += sweep("diopiUpsampleNearest2dBackward", lambda grad_output, out_size, in_size, scales_h, scales_w:
                   aten.upsample_nearest2d_backward(grad_output, out_size, in_size, scales_h, scales_w),
                   lambda s, l, size=size, scales=scales: [{"grad_output": T(s[:2] + tuple(size), layout=l),
                                                            "out_size": size, "in_size": list(s),
                                                            "scales_h": scales[0], "scales_w": scales[1]}],
                   F32_64 + (torch.bfloat16,), ((2, 3, 7, 6), (1, 1, 5, 5)), at_least=4)
    for align in (False, True):
        CASES += sweep("diopiUpsampleBilinear2d", lambda input, size, align_corners, scales_h, scales_w:
                       aten.upsample_bilinear2d(input, size, align_corners, scales_h, scales_w),
                       _with(size=size, align_corners=align, scales_h=scales[0], scales_w=scales[1]),
                       FLOAT, ((2, 3, 7, 6), (1, 1, 5, 5)), at_least=4)
        CASES += sweep("diopiUpsampleBilinear2dBackward", lambda grad_output, out_size, in_size, align_corners,
                       scales_h, scales_w: aten.upsample_bilinear2d_backward(
                           grad_output, out_size, in_size, align_corners, scales_h, scales_w),
                       lambda s, l, size=size, scales=scales, align=align: [
                           {"grad_output": T(s[:2] + tuple(size), layout=l), "out_size": size, "in_size": list(s),
                            "align_corners": align, "scales_h": scales[0], "scales_w": scales[1]}],
                       F32_64, ((2, 3, 7, 6), (1, 1, 5, 5)), at_least=2)
for size, scales in (([10], None), ([3], None), ([12], 2.0), ([9], 1.5)):
    CASES += sweep("diopiUpsampleNearest1d", lambda input, size, scales: aten.upsample_nearest1d(input, size, scales),
                   _with(size=size, scales=scales), FLOAT + (torch.uint8,), ((2, 3, 6), (1, 1, 5)), at_least=5)
    for align in (False, True):
        CASES += sweep("diopiUpsampleLinear1d", lambda input, size, align_corners, scales: aten.upsample_linear1d(
            input, size, align_corners, scales), _with(size=size, align_corners=align, scales=scales), FLOAT,
            ((2, 3, 6), (1, 1, 5)), at_least=3)
IM2COL = (([3, 3], [1, 1], [1, 1], [1, 1]), ([2, 3], [2, 1], [0, 1], [2, 2]), ([1, 1], [1, 1], [0, 0], [1, 1]))
CASES += sweep("diopiIm2Col", lambda input, kernel_size, dilation, padding, stride: aten.im2col(
    input, kernel_size, dilation, padding, stride), lambda s, l: (
    {"input": T(s, layout=l), "kernel_size": k, "dilation": d, "padding": p, "stride": st} for k, d, p, st in IM2COL),
    FLOAT, ((2, 3, 7, 6), (3, 5, 5), (1, 1, 4, 4)))


def _col2im_args(shape, layout):
    for k, d, p, st in IM2COL:
        cols = aten.im2col(torch.zeros(shape), k, d, p, st)
        yield {"input": T(tuple(cols.shape), layout=layout), "output_size": list(shape[-2:]), "kernel_size": k,
               "dilation": d, "padding": p, "stride": st}


CASES += sweep("diopiCol2Im", lambda input, output_size, kernel_size, dilation, padding, stride: aten.col2im(
    input, output_size, kernel_size, dilation, padding, stride), _col2im_args, F32_64 + (torch.bfloat16,),
    ((2, 3, 7, 6), (3, 5, 5), (1, 1, 4, 4)))

# ---- transposed convolution ---------------------------------------------------------------------------------------


def _conv_t_args(shape, layout, grad=False):
    n, c, h, w = shape
    for k, stride, padding, dilation, output_padding, groups, bias in (
            ((3, 3), [1, 1], [1, 1], [1, 1], [0, 0], 1, True), ((2, 3), [2, 2], [0, 1], [1, 1], [1, 0], 2, False),
            ((3, 1), [2, 1], [1, 0], [2, 1], [1, 0], 1, True)):
        args = {"input": T(shape, layout=layout), "weight": T((c, 6 // groups) + k), "stride": stride,
                "padding": padding}
        if grad:
            oh = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (k[0] - 1) + output_padding[0] + 1
            ow = (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (k[1] - 1) + output_padding[1] + 1
            yield {"grad_output": T((n, 6, oh, ow)), **args, "dilation": dilation, "output_padding": output_padding,
                   "groups": groups}
        else:
            yield {**args, "bias": T((6,)) if bias else None, "output_padding": output_padding, "groups": groups,
                   "dilation": dilation}


CASES += sweep("diopiConvTranspose2d", lambda input, weight, bias, stride, padding, output_padding, groups, dilation:
               aten.convolution(input, weight, bias, stride, padding, dilation, True, output_padding, groups),
               _conv_t_args, F32_64, CONV, rtol=1e-4, atol=1e-4)
CASES += sweep("diopiConvTranspose2dBackward", lambda grad_output, input, weight, stride, padding, dilation,
               output_padding, groups: tuple(aten.convolution_backward(
                   grad_output, input, weight, [weight.shape[1] * groups], stride, padding, dilation, True,
                   output_padding, groups, [True, True, True])), lambda s, l: _conv_t_args(s, l, True), F32_64,
               ((1, 2, 5, 5), (1, 4, 1, 3)), rtol=1e-4, atol=1e-4)

CASES = reseeded(CASES)
