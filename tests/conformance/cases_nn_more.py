"""Conformance cases, continued from cases_nn.py: 3-d pooling and resampling, grid sampling, distances,
upsampling backwards, embedding bags, margin and CTC losses, weight norm, fused recurrent cells
(diopi_impl/torch/: pooling.py, resampling.py, linalg.py's distances, embedding.py, losses.py,
normalization.py, recurrent.py)."""

import torch

from conformance.cases_nn import F32_64, _with
from conformance.cases_reduction import reseeded, sweep
from conformance.spec import FLOAT, T

aten = torch.ops.aten
CASES = []


# ---- 3-d pooling and resampling, grid sampling, cdist ----------------------------------------------------------------
VOLUMES = ((1, 2, 5, 4, 6), (2, 4, 4, 4), (1, 1, 3, 3, 3))
for kernel, stride, padding, dilation, ceil in (([2, 2, 2], [], [0, 0, 0], [1, 1, 1], False),
                                                ([3, 2, 3], [2, 1, 2], [1, 0, 1], [1, 1, 1], True),
                                                ([2, 2, 2], [1, 1, 1], [0, 1, 0], [2, 1, 1], False)):
    params = {"kernel_size": kernel, "stride": stride, "padding": padding, "dilation": dilation, "ceil_mode": ceil}
    CASES += sweep("diopiMaxPool3dWithIndices", lambda input, **kw: tuple(aten.max_pool3d_with_indices(
        input, *kw.values())), _with(**params), FLOAT, VOLUMES, at_least=4)

    def _mp3_backward_args(shape, layout, params=params):
        out, _ = aten.max_pool3d_with_indices(torch.zeros(shape), *params.values())
        yield {"grad_output": T(tuple(out.shape)), "input": T(shape, layout=layout), **params,
               "indices": T(tuple(out.shape), torch.int64, low=0, high=shape[-1] * shape[-2] * shape[-3])}

    CASES += sweep("diopiMaxPool3dBackward", lambda grad_output, input, kernel_size, stride, padding, dilation,
                   ceil_mode, indices: aten.max_pool3d_with_indices_backward(
                       grad_output, input, kernel_size, stride, padding, dilation, ceil_mode, indices),
                   _mp3_backward_args, F32_64 + (torch.bfloat16,), VOLUMES, at_least=4, note="random indices")
for kernel, stride, padding, ceil, include, divisor in (([2, 2, 2], [], [0, 0, 0], False, True, None),
                                                         ([3, 2, 3], [2, 1, 2], [1, 0, 1], True, False, None),
                                                         ([2, 3, 2], [1, 2, 1], [1, 1, 0], False, True, 5)):
    params = {"kernel_size": kernel, "stride": stride, "padding": padding, "ceil_mode": ceil,
              "count_include_pad": include, "divisor_override": divisor}
    CASES += sweep("diopiAvgPool3d", lambda input, **kw: aten.avg_pool3d(input, *kw.values()), _with(**params),
                   F32_64, VOLUMES, at_least=4, note="ATen's CPU kernel takes no float16/bfloat16")
    CASES += sweep("diopiAvgPool3dBackward", lambda grad_output, input, **kw: aten.avg_pool3d_backward(
        grad_output, input, *kw.values()), lambda s, l, params=params: [
        {"grad_output": T(tuple(aten.avg_pool3d(torch.zeros(s), *params.values()).shape)),
         "input": T(s, layout=l), **params}], F32_64, VOLUMES, at_least=4)
for size in ([1, 1, 1], [2, 3, 2], [6, 5, 7]):
    CASES += sweep("diopiAdaptiveAvgPool3d", lambda input, output_size: aten._adaptive_avg_pool3d(input, output_size),
                   _with(output_size=size), FLOAT, VOLUMES, at_least=6)
    CASES += sweep("diopiAdaptiveAvgPool3dBackward", lambda grad_output, input: aten._adaptive_avg_pool3d_backward(
        grad_output, input),
        lambda s, l, size=size: [{"grad_output": T(s[:-3] + tuple(size)), "input": T(s, layout=l)}],
        F32_64 + (torch.bfloat16,), VOLUMES, at_least=6)
for size, scales in (([8, 6, 9], (None, None, None)), ([2, 3, 2], (None, None, None)), ([10, 8, 12], (2.0, 2.0, 2.0))):
    CASES += sweep("diopiUpsampleNearest3d", lambda input, size, scales_d, scales_h, scales_w: aten.upsample_nearest3d(
        input, size, scales_d, scales_h, scales_w), _with(size=size, scales_d=scales[0], scales_h=scales[1],
                                                         scales_w=scales[2]), FLOAT + (torch.uint8,),
        VOLUMES[:1] + VOLUMES[2:], at_least=5)
    for align in (False, True):
        CASES += sweep("diopiUpsampleTrilinear3d", lambda input, size, align_corners, scales_d, scales_h, scales_w:
                       aten.upsample_trilinear3d(input, size, align_corners, scales_d, scales_h, scales_w),
                       _with(size=size, align_corners=align, scales_d=scales[0], scales_h=scales[1],
                             scales_w=scales[2]), FLOAT, VOLUMES[:1] + VOLUMES[2:], at_least=4)
for size, scales in (([10, 12], (None, None)), ([3, 4], (None, None)), ([14, 12], (2.0, 2.0))):
    for align in (False, True):
        CASES += sweep("diopiUpsampleBicubic2d", lambda input, size, align_corners, scales_h, scales_w:
                       aten.upsample_bicubic2d(input, size, align_corners, scales_h, scales_w),
                       _with(size=size, align_corners=align, scales_h=scales[0], scales_w=scales[1]),
                       F32_64 + (torch.bfloat16,), ((2, 3, 7, 6), (1, 1, 5, 5)), at_least=4)


def _grid_args(shape, layout, grad=False):
    n, c, h, w = shape
    for mode in (0, 1, 2):
        for padding_mode in (0, 1, 2):
            for align in (False, True):
                args = {"input": T(shape, layout=layout), "grid": T((n, 3, 5, 2), low=-1.2, high=1.2),
                        "interpolation_mode": mode, "padding_mode": padding_mode, "align_corners": align}
                yield {"grad_output": T((n, c, 3, 5)), **args} if grad else args


GRID = ((2, 3, 6, 7), (1, 1, 4, 4))
CASES += sweep("diopiGridSampler", lambda input, grid, interpolation_mode, padding_mode, align_corners:
               aten.grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners), _grid_args,
               F32_64, GRID)
CASES += sweep("diopiGridSamplerBackward", lambda grad_output, input, grid, interpolation_mode, padding_mode,
               align_corners: tuple(aten.grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode,
                                                                  padding_mode, align_corners, [True, True])),
               lambda s, l: _grid_args(s, l, True), F32_64, GRID, rtol=1e-4, atol=1e-5)
CDIST = ((4, 3), (2, 5, 4), (0, 3), (1, 1))


def _cdist_args(shape, layout, grad=False):
    for p in (2.0, 1.0, 0.0, 3.5, float("inf")):
        for mode in ((None, 2) if p == 2.0 else (None,)):
            x2 = shape[:-2] + (6, shape[-1])
            args = {"x1": T(shape, layout=layout), "x2": T(x2), "p": p}
            yield {**args, "compute_mode": mode} if not grad else {"grad_output": T(shape[:-1] + (6,)), **args}


def _cdist_backward_args(shape, layout):
    for args in _cdist_args(shape, layout, True):
        yield {**args, "cdist": T(shape[:-1] + (6,), low=0.5, high=3)}


CASES += sweep("diopiCdist", lambda x1, x2, p, compute_mode: aten._cdist_forward(x1, x2, p, compute_mode), _cdist_args,
               F32_64, CDIST, rtol=1e-4, atol=1e-4)
CASES += sweep("diopiCdistBackward", lambda grad_output, x1, x2, p, cdist: aten._cdist_backward(
    grad_output.contiguous(), x1.contiguous(), x2.contiguous(), p, cdist), _cdist_backward_args, F32_64,
    CDIST[:2] + CDIST[3:], rtol=1e-4, atol=1e-4, note="given distances")

# ---- upsampling backwards, nearest-exact -----------------------------------------------------------------------------
for size, scales in (([10], None), ([3], None), ([12], 2.0)):
    CASES += sweep("diopiUpsampleNearest1dBackward", lambda grad_output, out_size, in_size, scales:
                   aten.upsample_nearest1d_backward(grad_output, out_size, in_size, scales),
                   lambda s, l, size=size, scales=scales: [{"grad_output": T(s[:2] + tuple(size), layout=l),
                                                            "out_size": size, "in_size": list(s), "scales": scales}],
                   F32_64 + (torch.bfloat16,), ((2, 3, 6), (1, 1, 5)), at_least=4)
    for align in (False, True):
        CASES += sweep("diopiUpsampleLinear1dBackward", lambda grad_output, out_size, in_size, align_corners, scales:
                       aten.upsample_linear1d_backward(grad_output, out_size, in_size, align_corners, scales),
                       lambda s, l, size=size, scales=scales, align=align: [
                           {"grad_output": T(s[:2] + tuple(size), layout=l), "out_size": size, "in_size": list(s),
                            "align_corners": align, "scales": scales}], F32_64, ((2, 3, 6), (1, 1, 5)), at_least=2)
for size, scales in (([10, 12], (None, None)), ([3, 4], (None, None)), ([14, 12], (2.0, 2.0))):
    for align in (False, True):
        CASES += sweep("diopiUpsampleBicubic2dBackward", lambda grad_output, out_size, in_size, align_corners, scales_h,
                       scales_w: aten.upsample_bicubic2d_backward(grad_output, out_size, in_size, align_corners,
                                                                  scales_h, scales_w),
                       lambda s, l, size=size, scales=scales, align=align: [
                           {"grad_output": T(s[:2] + tuple(size), layout=l), "out_size": size, "in_size": list(s),
                            "align_corners": align, "scales_h": scales[0], "scales_w": scales[1]}],
                       F32_64, ((2, 3, 7, 6), (1, 1, 5, 5)), at_least=2)
    CASES += sweep("diopiUpsampleNearestExact2d", lambda input, size, scales_h, scales_w:
        aten._upsample_nearest_exact2d(input, size, scales_h, scales_w),
        _with(size=size, scales_h=scales[0], scales_w=scales[1]),
        FLOAT + (torch.uint8,), ((2, 3, 7, 6), (1, 1, 5, 5)), at_least=5)
    CASES += sweep("diopiUpsampleNearestExact2dBackward", lambda grad_output, out_size, in_size, scales_h, scales_w:
                   aten._upsample_nearest_exact2d_backward(grad_output, out_size, in_size, scales_h, scales_w),
                   lambda s, l, size=size, scales=scales: [{"grad_output": T(s[:2] + tuple(size), layout=l),
                                                            "out_size": size, "in_size": list(s),
                                                            "scales_h": scales[0], "scales_w": scales[1]}],
                   F32_64 + (torch.bfloat16,), ((2, 3, 7, 6), (1, 1, 5, 5)), at_least=4)
for size, scales in (([8, 6, 9], (None, None, None)), ([2, 3, 2], (None, None, None)), ([10, 8, 12], (2.0, 2.0, 2.0))):
    CASES += sweep("diopiUpsampleNearest3dBackward",
                   lambda grad_output, out_size, in_size, scales_d, scales_h, scales_w:
                   aten.upsample_nearest3d_backward(grad_output, out_size, in_size, scales_d, scales_h, scales_w),
                   lambda s, l, size=size, scales=scales: [{"grad_output": T(s[:2] + tuple(size), layout=l),
                                                            "out_size": size, "in_size": list(s), "scales_d": scales[0],
                                                            "scales_h": scales[1], "scales_w": scales[2]}],
                   F32_64 + (torch.bfloat16,), ((1, 2, 5, 4, 6), (1, 1, 3, 3, 3)), at_least=4)
    for align in (False, True):
        CASES += sweep("diopiUpsampleTrilinear3dBackward", lambda grad_output, out_size, in_size, align_corners,
                       scales_d, scales_h, scales_w: aten.upsample_trilinear3d_backward(
                           grad_output, out_size, in_size, align_corners, scales_d, scales_h, scales_w),
                       lambda s, l, size=size, scales=scales, align=align: [
                           {"grad_output": T(s[:2] + tuple(size), layout=l), "out_size": size, "in_size": list(s),
                            "align_corners": align, "scales_d": scales[0], "scales_h": scales[1],
                            "scales_w": scales[2]}], F32_64, ((1, 2, 5, 4, 6), (1, 1, 3, 3, 3)), at_least=2)

# ---- embedding bag, pdist, multi-margin loss, max unpooling ---------------------------------------------------------


def _bag_args(shape, layout):
    (count,) = shape
    for mode in (0, 1, 2):
        for bags, weights in ((3, False), (1, True), (4, False)):
            if weights and mode != 0:
                continue
            yield {"weight": T((10, 4), layout=layout), "indices": T(shape, torch.int64, low=0, high=10),
                   "offsets": T((bags,), torch.int64, low=0, high=1), "scale_grad_by_freq": False, "mode": mode,
                   "sparse": False, "per_sample_weights": T(shape) if weights else None,
                   "include_last_offset": False, "padding_idx": 2 if bags == 4 else -1}


CASES += sweep("diopiEmbeddingBag", lambda weight, indices, offsets, scale_grad_by_freq, mode, sparse,
               per_sample_weights, include_last_offset, padding_idx: tuple(aten._embedding_bag(
                   weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset,
                   padding_idx)), _bag_args, F32_64, ((0,), (1,), (8,)), note="offsets all 0: the last bag takes all")


def _pdist_args(shape, layout, grad=False):
    n = shape[0]
    for p in (2.0, 1.0, 0.0, 3.0, float("inf")):
        args = {"input": T(shape), "p": p}
        if grad:
            pairs = n * (n - 1) // 2
            args = {"grad_output": T((pairs,)), **args, "pdist": T((pairs,), low=0.5, high=3)}
        yield args


CASES += sweep("diopiPdist", lambda input, p: aten._pdist_forward(input, p), _pdist_args, F32_64,
               ((4, 3), (1, 5), (6, 1)), rtol=1e-5, atol=1e-5)
CASES += sweep("diopiPdistBackward",
               lambda grad_output, input, p, pdist: aten._pdist_backward(grad_output, input, p, pdist),
               lambda s, l: _pdist_args(s, l, True), F32_64, ((4, 3), (1, 5), (6, 1)), rtol=1e-5, atol=1e-5,
               note="given distances")


def _margin_args(shape, layout, grad=False):
    c = shape[-1]
    for p, margin in ((1, 1.0), (2, 0.5)):
        for reduction in (0, 1, 2):
            for weight in (None, T((c,), low=0.1, high=2)):
                args = {"input": T(shape, layout=layout), "target": T(shape[:-1], torch.int64, low=0, high=c),
                        "p": p, "margin": margin, "weight": weight, "reduction": reduction}
                if grad:
                    args = {"grad_output": T(shape[:-1] if reduction == 0 else ()), **args}
                yield args


CASES += sweep("diopiMultiMarginLoss", lambda input, target, p, margin, weight, reduction: aten.multi_margin_loss(
    input, target, p, margin, weight, reduction), _margin_args, F32_64, ((4, 5), (5,), (1, 3)),
    note="no empty batch: ATen's CPU kernel reads uninitialized memory for one")
CASES += sweep("diopiMultiMarginLossBackward", lambda grad_output, input, target, p, margin, weight, reduction:
               aten.multi_margin_loss_backward(grad_output, input, target, p, margin, weight, reduction),
               lambda s, l: _margin_args(s, l, True), F32_64, ((4, 5), (5,)))
CASES += sweep("diopiMaxUnpool2d", lambda input, indices, output_size: aten.max_unpool2d(input, indices, output_size),
               lambda s, l: ({"input": T(s, layout=l), "indices": T(s, torch.int64, low=0, high=o[0] * o[1]),
                              "output_size": o} for o in ([s[-2] * 2, s[-1] * 2], [s[-2] + 1, s[-1]])),
               FLOAT, ((2, 3, 3, 4), (3, 2, 2), (1, 1, 1, 1)), note="random (colliding) indices")

# ---- weight norm, embedding renorm, multilabel margin loss --------------------------------------------------------


def _g_shape(shape, dim):
    return tuple(s if i == dim % len(shape) else 1 for i, s in enumerate(shape))


# ATen's fused CPU kernels take contiguous tensors and dim 0 or the last dim (spelled non-negative) only.
CASES += sweep("diopiWeightNorm", lambda v, g, dim: tuple(aten._weight_norm_interface(v.contiguous(), g, dim)),
               lambda s, l: ({"v": T(s, layout=l), "g": T(_g_shape(s, d)), "dim": d} for d in (0, len(s) - 1)),
               F32_64 + (torch.bfloat16,), ((4, 3, 2), (5, 6), (3, 1, 2, 2)))
CASES += sweep("diopiWeightNormBackward", lambda grad_w, saved_v, saved_g, saved_norms, dim: tuple(
    aten._weight_norm_interface_backward(grad_w.contiguous(), saved_v, saved_g, saved_norms, dim)), lambda s, l: (
    {"grad_w": T(s, layout=l), "saved_v": T(s), "saved_g": T(_g_shape(s, d)),
     "saved_norms": T(_g_shape(s, d), low=0.5, high=2), "dim": d} for d in (0, len(s) - 1)), F32_64,
    ((4, 3, 2), (5, 6), (3, 1, 2, 2)))


def _renorm(inout, indices, max_norm, norm_type):
    aten.embedding_renorm_(inout, indices, max_norm, norm_type)


CASES += sweep("diopiEmbeddingRenormInp", _renorm, lambda s, l: (
    {"inout": T((10, 4), layout=l), "indices": T(s, torch.int64, low=0, high=10), "max_norm": m, "norm_type": p}
    for m, p in ((1.0, 2.0), (2.5, 1.0))), F32_64, ((0,), (1,), (6,), (30,)), at_least=12)


def _multilabel_args(shape, layout, grad=False):
    for reduction in (0, 1, 2):
        args = {"input": T(shape, layout=layout), "target": T(shape, torch.int64, low=-1, high=shape[-1]),
                "reduction": reduction}
        if grad:
            args = {"grad_output": T(shape[:-1] if reduction == 0 else ()), **args,
                    "is_target": T(shape, low=0, high=0)}
        yield args


CASES += sweep("diopiMultilabelMarginLoss", lambda input, target, reduction: tuple(aten.multilabel_margin_loss_forward(
    input, target, reduction)), _multilabel_args, F32_64, ((4, 5), (5,), (1, 3)))
CASES += sweep("diopiMultilabelMarginLossBackward", lambda grad_output, input, target, reduction, is_target:
               aten.multilabel_margin_loss_backward(grad_output, input, target, reduction, is_target),
               lambda s, l: _multilabel_args(s, l, True), F32_64, ((4, 5), (5,), (1, 3)),
               note="is_target all 0 (ATen takes 0/1 values only)")

# ---- CTC loss, embedding-bag per-sample-weight gradient, 3-d adaptive max pooling -----------------------------------


def _ctc_args(shape, layout, grad=False):
    # Full, equal lengths only: ATen's CPU kernel leaves the log_alpha entries past a sequence's lengths unwritten.
    t, n, c = shape
    for input_lengths, target_lengths, blank, zero_infinity in (([t] * n, [2] * n, 0, False),
                                                                ([t] * n, [1] * n, c - 1, True),
                                                                ([t] * n, [t] * n, 0, False)):
        args = {"log_probs": T(shape, layout=layout, low=-4, high=-0.1),
                "targets": T((n, 3), torch.int64, low=1, high=c - 1), "input_lengths": input_lengths,
                "target_lengths": [min(x, 3) for x in target_lengths]}
        if grad:
            args = {"grad_output": T((n,)), **args, "neg_log_likelihood": T((n,), low=1, high=5),
                    "log_alpha": T((n, t, 7), low=-5, high=-0.5)}
        yield {**args, "blank": blank, "zero_infinity": zero_infinity}


CTC = ((6, 2, 5), (4, 1, 3), (8, 3, 6))
CASES += sweep("diopiCTCLossUnreduced",
               lambda log_probs, targets, input_lengths, target_lengths, blank, zero_infinity: tuple(
    aten._ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity)), _ctc_args, F32_64, CTC,
    note="equal lengths")
CASES += sweep("diopiCTCLossUnreducedBackward", lambda grad_output, log_probs, targets, input_lengths, target_lengths,
               neg_log_likelihood, log_alpha, blank, zero_infinity: aten._ctc_loss_backward(
                   grad_output, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha, blank,
                   zero_infinity), lambda s, l: _ctc_args(s, l, True), F32_64, CTC, note="given forward results")
CASES += sweep("diopiEmbeddingBagPerSampleWeightsBackward", lambda grad, weight, indices, offsets, offset2bag, mode,
               padding_idx: aten._embedding_bag_per_sample_weights_backward(
                   grad, weight, indices, offsets, offset2bag, mode, padding_idx), lambda s, l: (
    {"grad": T((3, 4), layout=l), "weight": T((10, 4)), "indices": T(s, torch.int64, low=0, high=10),
     "offsets": T((3,), torch.int64, low=0, high=1), "offset2bag": T(s, torch.int64, low=0, high=3), "mode": 0,
     "padding_idx": p} for p in (-1, 2)), F32_64, ((0,), (1,), (8,)))
for size in ([1, 1, 1], [2, 3, 2], [5, 4, 7]):
    CASES += sweep("diopiAdaptiveMaxPool3dWithIndices",
                   lambda input, output_size: tuple(aten.adaptive_max_pool3d(input, output_size)),
                   _with(output_size=size), FLOAT, VOLUMES, at_least=5)
    CASES += sweep("diopiAdaptiveMaxPool3dBackward", lambda grad_output, input, indices:
        aten.adaptive_max_pool3d_backward(grad_output, input, indices), lambda s, l, size=size: [
        {"grad_output": T(s[:-3] + tuple(size)), "input": T(s, layout=l),
         "indices": T(s[:-3] + tuple(size), torch.int64, low=0, high=s[-1] * s[-2] * s[-3])}],
        F32_64 + (torch.bfloat16,), VOLUMES, at_least=4, note="random indices")

# ---- fused recurrent cells: the CPU has no kernels, so the references spell out the cell equations -----------------


def _lstm_cell(input_gates, hidden_gates, cx, input_bias, hidden_bias):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    return o * cy.tanh(), cy, torch.cat((i, f, g, o), 1)


def _lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    d_cy = (torch.zeros_like(cy) if grad_cy is None else grad_cy) + (
        0 if grad_hy is None else grad_hy * o * (1 - tanh_cy ** 2))
    d_o = torch.zeros_like(o) if grad_hy is None else grad_hy * tanh_cy * o * (1 - o)
    gates = torch.cat((d_cy * g * i * (1 - i), d_cy * cx * f * (1 - f), d_cy * i * (1 - g ** 2), d_o), 1)
    return gates, d_cy * f, gates.sum(0) if has_bias else None


def _gru_cell(input_gates, hidden_gates, hx, input_bias, hidden_bias):
    if input_bias is not None:
        input_gates, hidden_gates = input_gates + input_bias, hidden_gates + hidden_bias
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n), torch.cat((r, z, n, hn, hx - n), 1)


def _gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hn, h_minus_n = workspace.chunk(5, 1)
    d_n = grad_hy * (1 - z) * (1 - n ** 2)
    d_r, d_z = d_n * hn * r * (1 - r), grad_hy * h_minus_n * z * (1 - z)
    gi, gh = torch.cat((d_r, d_z, d_n), 1), torch.cat((d_r, d_z, d_n * r), 1)
    return gi, gh, grad_hy * z, gi.sum(0) if has_bias else None, gh.sum(0) if has_bias else None


def _cell_args(shape, layout, chunks):
    batch, hidden = shape
    for bias in (True, False):
        yield {"input_gates": T((batch, chunks * hidden), layout=layout), "hidden_gates": T((batch, chunks * hidden)),
               "cx" if chunks == 4 else "hx": T(shape, layout=layout),
               "input_bias": T((chunks * hidden,)) if bias else None,
               "hidden_bias": T((chunks * hidden,)) if bias else None}


CELLS = ((3, 5), (1, 1), (0, 4), (4, 2))
for dtypes, tolerance in ((F32_64, 1e-5), ((torch.float16, torch.bfloat16), 2e-2)):  # fused rounding in half types
    CASES += sweep("diopiLstmCell", _lstm_cell, lambda s, l: _cell_args(s, l, 4), dtypes, CELLS,
                   rtol=tolerance, atol=tolerance)
    CASES += sweep("diopiGruCell", _gru_cell, lambda s, l: _cell_args(s, l, 3), dtypes, CELLS,
                   rtol=tolerance, atol=tolerance)
CASES += sweep("diopiLstmCellBackward", _lstm_cell_backward, lambda s, l: (
    {"grad_hy": gh and T(s, layout=l), "grad_cy": gc and T(s), "cx": T(s), "cy": T(s),
     "workspace": T((s[0], 4 * s[1]), low=0, high=1), "has_bias": b}
    for gh, gc, b in ((True, True, True), (True, None, False), (None, True, True))), F32_64, CELLS,
    rtol=1e-5, atol=1e-5, note="workspace: gate activations in (0, 1)")
CASES += sweep("diopiGruCellBackward", _gru_cell_backward, lambda s, l: (
    {"grad_hy": T(s, layout=l), "workspace": T((s[0], 5 * s[1]), low=-1, high=1), "has_bias": b}
    for b in (True, False)), F32_64, CELLS, rtol=1e-5, atol=1e-5)
CASES += sweep("diopiChannelShuffle", lambda input, groups: aten.native_channel_shuffle(input, groups), lambda s, l: (
    {"input": T(s, layout=l), "groups": g} for g in (1, 2, 3)), FLOAT + (torch.int64, torch.bool),
    ((2, 6, 3, 2), (1, 6, 4), (3, 12, 1)))

CASES = reseeded(CASES)
