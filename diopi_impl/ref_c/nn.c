/* Softmax, layer norm, embedding and the NLL loss of the reference C op library (float32/float64,
   any strides unless a function says otherwise; Note [Reference C library numerics]). */
#include "ref_c.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- along one dimension: softmax and log-softmax --------------------------------------------- */
typedef struct {
    const ref_view* views; /* [0] the output, [1..] the inputs, all of one shape */
    int count;
    int64_t length, steps[3]; /* along the dimension */
    int kind; /* 0 softmax, 1 log-softmax, 2 softmax backward, 3 log-softmax backward */
} lines;

static void softmax_line(const int64_t* offsets, void* context) {
    const lines* l = (const lines*)context;
    const ref_view *out = &l->views[0], *x = &l->views[1];
    int64_t n = l->length, so = l->steps[0], sx = l->steps[1];
    if (l->kind <= 1) {
        double max = -INFINITY, sum = 0;
        for (int64_t i = 0; i < n; ++i) {
            double v = ref_load(x, offsets[1] + i * sx);
            if (v > max || v != v) max = v;
        }
        for (int64_t i = 0; i < n; ++i) sum += exp(ref_load(x, offsets[1] + i * sx) - max);
        for (int64_t i = 0; i < n; ++i) {
            double shifted = ref_load(x, offsets[1] + i * sx) - max;
            ref_store(out, offsets[0] + i * so, l->kind == 0 ? exp(shifted) / sum : shifted - log(sum));
        }
        return;
    }
    /* backward: views[1] the gradient of the output, views[2] the forward's output */
    const ref_view* y = &l->views[2];
    int64_t sy = l->steps[2];
    double dot = 0;
    for (int64_t i = 0; i < n; ++i) {
        double g = ref_load(x, offsets[1] + i * sx);
        dot += l->kind == 2 ? g * ref_load(y, offsets[2] + i * sy) : g;
    }
    for (int64_t i = 0; i < n; ++i) {
        double g = ref_load(x, offsets[1] + i * sx), yv = ref_load(y, offsets[2] + i * sy);
        ref_store(out, offsets[0] + i * so, l->kind == 2 ? yv * (g - dot) : g - exp(yv) * dot);
    }
}

/* Fast path of along_dim (Note [Reference C library fast paths]): contiguous float32 tensors, the
   dimension the last one, so each line is a contiguous row; exp is ref_expf and the row's sums are in
   double. The forward writes exp(x - max) into the output before scaling it, so an output that is its
   own input (log-softmax needs x again) takes the general path. */
static bool rows_dense(const ref_view* views, int count, int64_t dim, int kind) {
    int64_t n = views[0].ndim ? views[0].sizes[views[0].ndim - 1] : 1;
    if (views[0].ndim && dim != views[0].ndim - 1) return false;
    for (int k = 0; k < count; ++k)
        if (!ref_dense_f32(&views[k], views[0].numel)) return false;
    if (kind == 1 && views[0].data == views[1].data) return false;
    int64_t rows = n ? views[0].numel / n : 0;
    for (int64_t r = 0; r < rows; ++r) {
        float* y = (float*)views[0].data + r * n;
        const float* x = (const float*)views[1].data + r * n;
        if (kind >= 2) { /* x the output's gradient, o the forward's output */
            const float* o = (const float*)views[2].data + r * n;
            double dot = 0;
            for (int64_t i = 0; i < n; ++i) dot += kind == 2 ? (double)x[i] * o[i] : x[i];
            if (kind == 2)
                for (int64_t i = 0; i < n; ++i) y[i] = (float)(o[i] * ((double)x[i] - dot));
            else
                for (int64_t i = 0; i < n; ++i) y[i] = (float)(x[i] - (double)ref_expf(o[i]) * dot);
            continue;
        }
        float max = -INFINITY;
        for (int64_t i = 0; i < n; ++i)
            if (x[i] > max || x[i] != x[i]) max = x[i];
        for (int64_t i = 0; i < n; ++i) y[i] = ref_expf(x[i] - max);
        double partial[4] = {0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; ++j) partial[j] += y[i + j];
        for (; i < n; ++i) partial[0] += y[i];
        double sum = (partial[0] + partial[1]) + (partial[2] + partial[3]);
        if (kind == 0) {
            for (int64_t j = 0; j < n; ++j) y[j] = (float)(y[j] / sum);
        } else {
            double log_sum = log(sum);
            for (int64_t j = 0; j < n; ++j) y[j] = (float)((double)x[j] - max - log_sum);
        }
    }
    return true;
}

static diopiError_t along_dim(diopiTensorHandle_t out, diopiConstTensorHandle_t a, diopiConstTensorHandle_t b,
                              int64_t dim, int kind) {
    ref_view views[3];
    int count = b ? 3 : 2;
    if (!ref_view_of(out, &views[0]) || !ref_view_of(a, &views[1]) || (b && !ref_view_of(b, &views[2])))
        return REF_FALLBACK;
    for (int k = 0; k < count; ++k) {
        if (!ref_is_floating(views[k].dtype) || views[k].ndim != views[0].ndim) return REF_FALLBACK;
        for (int64_t d = 0; d < views[0].ndim; ++d)
            if (views[k].sizes[d] != views[0].sizes[d]) return REF_FALLBACK;
    }
    int64_t ndim = views[0].ndim;
    if (ndim == 0) { /* a 0-dim tensor is one line of one element */
        views[0].sizes[0] = 1;
        for (int k = 0; k < count; ++k) views[k].strides[0] = 0;
        ndim = 1;
        dim = 0;
    }
    if (dim < 0) dim += ndim;
    if (dim < 0 || dim >= ndim) return ref_error("softmax: dim %lld is out of range", (long long)dim);
    if (rows_dense(views, count, dim, kind)) return diopiSuccess;
    lines l = {views, count, views[0].sizes[dim], {0, 0, 0}, kind};
    int64_t shape[REF_MAX_DIMS], strides[3][REF_MAX_DIMS];
    for (int k = 0; k < count; ++k) {
        l.steps[k] = views[k].strides[dim];
        memcpy(strides[k], views[k].strides, sizeof strides[k]);
    }
    memcpy(shape, views[0].sizes, sizeof shape);
    shape[dim] = 1;
    ref_walk(shape, ndim, count, strides, softmax_line, &l);
    return diopiSuccess;
}

diopiError_t diopiSoftmax(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                          int64_t dim) {
    (void)ctx;
    return along_dim(out, input, NULL, dim, 0);
}

diopiError_t diopiLogSoftmax(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                             int64_t dim) {
    (void)ctx;
    return along_dim(out, input, NULL, dim, 1);
}

diopiError_t diopiSoftmaxBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                  diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t output, int64_t dim) {
    (void)ctx;
    return along_dim(grad_input, grad_output, output, dim, 2);
}

diopiError_t diopiLogSoftmaxBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                     diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t output,
                                     int64_t dim) {
    (void)ctx;
    return along_dim(grad_input, grad_output, output, dim, 3);
}

/* ---- layer norm: contiguous input, rows of prod(normalized_shape) elements ----------------------- */
static bool contiguous_floats(diopiConstTensorHandle_t t, ref_view* v, int64_t numel) {
    return ref_view_of(t, v) && ref_is_floating(v->dtype) && ref_is_contiguous(v) && (numel < 0 || v->numel == numel);
}

/* Sum of n floats, and of their squared distances from `center`, in double (four partial sums each). */
static double row_sum(const float* x, int64_t n, double center, bool squares) {
    double partial[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; ++j) {
            double v = (double)x[i + j] - center;
            partial[j] += squares ? v * v : v;
        }
    for (; i < n; ++i) {
        double v = (double)x[i] - center;
        partial[0] += squares ? v * v : v;
    }
    return (partial[0] + partial[1]) + (partial[2] + partial[3]);
}

/* Layer norm over float32 rows (Note [Reference C library fast paths]): the general loop below with float
   pointers instead of ref_load/ref_store, the same double arithmetic. */
static void layer_norm_f32(const ref_view* x, const ref_view* y, const ref_view* mean, const ref_view* rstd,
                           const ref_view* w, const ref_view* b, int64_t rows, int64_t n, double eps) {
    const float *weight = w ? (const float*)w->data : NULL, *bias = b ? (const float*)b->data : NULL;
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = (const float*)x->data + r * n;
        float* out = (float*)y->data + r * n;
        double mu = row_sum(in, n, 0, false) / n;
        double inv = 1 / sqrt(row_sum(in, n, mu, true) / n + eps);
        for (int64_t i = 0; i < n; ++i) {
            double v = ((double)in[i] - mu) * inv;
            if (weight) v *= weight[i];
            if (bias) v += bias[i];
            out[i] = (float)v;
        }
        ((float*)mean->data)[r] = (float)mu;
        ((float*)rstd->data)[r] = (float)inv;
    }
}

diopiError_t diopiLayerNorm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiTensorHandle_t save_mean,
                            diopiTensorHandle_t save_invstd, diopiConstTensorHandle_t input,
                            diopiConstTensorHandle_t weight, diopiConstTensorHandle_t bias,
                            diopiSize_t normalized_shape, double eps) {
    (void)ctx;
    ref_view x, y, mean, rstd, w, b;
    if (!contiguous_floats(input, &x, -1)) return REF_FALLBACK;
    int64_t n = 1;
    for (int64_t d = 0; d < normalized_shape.len; ++d) n *= normalized_shape.data[d];
    int64_t rows = n ? x.numel / n : 0;
    if (!contiguous_floats(out, &y, x.numel) || !contiguous_floats(save_mean, &mean, rows) ||
        !contiguous_floats(save_invstd, &rstd, rows) || (weight && !contiguous_floats(weight, &w, n)) ||
        (bias && !contiguous_floats(bias, &b, n)))
        return REF_FALLBACK;
    if (x.dtype == diopi_dtype_float32 && y.dtype == diopi_dtype_float32 && mean.dtype == diopi_dtype_float32 &&
        rstd.dtype == diopi_dtype_float32 && (!weight || w.dtype == diopi_dtype_float32) &&
        (!bias || b.dtype == diopi_dtype_float32)) {
        layer_norm_f32(&x, &y, &mean, &rstd, weight ? &w : NULL, bias ? &b : NULL, rows, n, eps);
        return diopiSuccess;
    }
    for (int64_t r = 0; r < rows; ++r) {
        double sum = 0, squares = 0;
        for (int64_t i = 0; i < n; ++i) sum += ref_load(&x, r * n + i);
        double mu = sum / n;
        for (int64_t i = 0; i < n; ++i) {
            double centered = ref_load(&x, r * n + i) - mu;
            squares += centered * centered;
        }
        double inv = 1 / sqrt(squares / n + eps);
        for (int64_t i = 0; i < n; ++i) {
            double v = (ref_load(&x, r * n + i) - mu) * inv;
            if (weight) v *= ref_load(&w, i);
            if (bias) v += ref_load(&b, i);
            ref_store(&y, r * n + i, v);
        }
        ref_store(&mean, r, mu);
        ref_store(&rstd, r, inv);
    }
    return diopiSuccess;
}

diopiError_t diopiLayerNormBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                    diopiTensorHandle_t grad_weight, diopiTensorHandle_t grad_bias,
                                    diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                    diopiConstTensorHandle_t weight, diopiConstTensorHandle_t bias,
                                    diopiConstTensorHandle_t mean, diopiConstTensorHandle_t rstd,
                                    diopiSize_t normalized_shape) {
    (void)ctx;
    (void)bias;
    ref_view x, dy, mu, inv, w, dx, dw, db;
    if (!contiguous_floats(input, &x, -1)) return REF_FALLBACK;
    int64_t n = 1;
    for (int64_t d = 0; d < normalized_shape.len; ++d) n *= normalized_shape.data[d];
    int64_t rows = n ? x.numel / n : 0;
    if (!contiguous_floats(grad_output, &dy, x.numel) || !contiguous_floats(mean, &mu, rows) ||
        !contiguous_floats(rstd, &inv, rows) || (weight && !contiguous_floats(weight, &w, n)) ||
        (grad_input && !contiguous_floats(grad_input, &dx, x.numel)) ||
        (grad_weight && !contiguous_floats(grad_weight, &dw, n)) ||
        (grad_bias && !contiguous_floats(grad_bias, &db, n)))
        return REF_FALLBACK;
    double* sums = calloc((size_t)(2 * n + 1), sizeof(double)); /* grad_weight, grad_bias accumulators */
    if (sums == NULL) return ref_error("diopiLayerNormBackward: out of host memory");
    bool f32 = x.dtype == diopi_dtype_float32 && dy.dtype == diopi_dtype_float32 && mu.dtype == diopi_dtype_float32 &&
               inv.dtype == diopi_dtype_float32 && (!weight || w.dtype == diopi_dtype_float32) &&
               (!grad_input || dx.dtype == diopi_dtype_float32);
    for (int64_t r = 0; f32 && r < rows; ++r) { /* the loop below on float pointers (fast paths note) */
        const float *in = (const float*)x.data + r * n, *g = (const float*)dy.data + r * n;
        const float* gamma = weight ? (const float*)w.data : NULL;
        double m = ((const float*)mu.data)[r], s = ((const float*)inv.data)[r], mean_g = 0, mean_gx = 0;
        for (int64_t i = 0; i < n; ++i) {
            double xhat = (in[i] - m) * s, gi = g[i];
            sums[i] += gi * xhat;
            sums[n + i] += gi;
            if (gamma) gi *= gamma[i];
            mean_g += gi;
            mean_gx += gi * xhat;
        }
        mean_g /= n;
        mean_gx /= n;
        if (grad_input) {
            float* out = (float*)dx.data + r * n;
            for (int64_t i = 0; i < n; ++i) {
                double xhat = (in[i] - m) * s, gi = g[i];
                if (gamma) gi *= gamma[i];
                out[i] = (float)(s * (gi - mean_g - xhat * mean_gx));
            }
        }
    }
    for (int64_t r = 0; !f32 && r < rows; ++r) {
        double m = ref_load(&mu, r), s = ref_load(&inv, r), mean_g = 0, mean_gx = 0;
        for (int64_t i = 0; i < n; ++i) {
            double xhat = (ref_load(&x, r * n + i) - m) * s, g = ref_load(&dy, r * n + i);
            sums[i] += g * xhat;
            sums[n + i] += g;
            if (weight) g *= ref_load(&w, i);
            mean_g += g;
            mean_gx += g * xhat;
        }
        mean_g /= n;
        mean_gx /= n;
        if (grad_input)
            for (int64_t i = 0; i < n; ++i) {
                double xhat = (ref_load(&x, r * n + i) - m) * s, g = ref_load(&dy, r * n + i);
                if (weight) g *= ref_load(&w, i);
                ref_store(&dx, r * n + i, s * (g - mean_g - xhat * mean_gx));
            }
    }
    for (int64_t i = 0; i < n; ++i) {
        if (grad_weight) ref_store(&dw, i, sums[i]);
        if (grad_bias) ref_store(&db, i, sums[n + i]);
    }
    free(sums);
    return diopiSuccess;
}

/* ---- embedding: rows of a contiguous [num_weights, dim] table ------------------------------------ */
typedef struct {
    const ref_view *indices, *table, *rows; /* rows: out (forward) or grad (backward), [..., dim] contiguous */
    int64_t dim, num_weights, padding_idx, position;
    double* accumulated; /* backward: [num_weights, dim] */
    bool out_of_range;
} embedding_state;

static void embedding_row(const int64_t* offsets, void* context) {
    embedding_state* s = (embedding_state*)context;
    int64_t index = (int64_t)ref_load(s->indices, offsets[0]), row = s->position++;
    if (index < 0 || index >= s->num_weights) {
        s->out_of_range = true;
        return;
    }
    if (s->accumulated == NULL) {
        for (int64_t j = 0; j < s->dim; ++j)
            ref_store(s->rows, row * s->dim + j, ref_load(s->table, index * s->dim + j));
    } else if (index != s->padding_idx) {
        for (int64_t j = 0; j < s->dim; ++j) s->accumulated[index * s->dim + j] += ref_load(s->rows, row * s->dim + j);
    }
}

static diopiError_t embedding(diopiConstTensorHandle_t indices, embedding_state* s, const char* name) {
    int64_t strides[1][REF_MAX_DIMS];
    memcpy(strides[0], s->indices->strides, sizeof strides[0]);
    ref_walk(s->indices->sizes, s->indices->ndim, 1, strides, embedding_row, s);
    (void)indices;
    if (s->out_of_range)
        return ref_error("%s: an index is out of range for %lld rows", name, (long long)s->num_weights);
    return diopiSuccess;
}

diopiError_t diopiEmbedding(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t weight,
                            diopiConstTensorHandle_t indices, int64_t padding_idx, bool scale_grad_by_freq,
                            bool sparse) {
    (void)ctx;
    (void)padding_idx; /* only the backward skips it */
    (void)scale_grad_by_freq;
    (void)sparse;
    ref_view table, ids, rows;
    if (!contiguous_floats(weight, &table, -1) || table.ndim != 2 || !ref_view_of(indices, &ids) ||
        (ids.dtype != diopi_dtype_int64 && ids.dtype != diopi_dtype_int32) ||
        !contiguous_floats(out, &rows, ids.numel * table.sizes[1]))
        return REF_FALLBACK;
    embedding_state s = {&ids, &table, &rows, table.sizes[1], table.sizes[0], -1, 0, NULL, false};
    return embedding(indices, &s, "diopiEmbedding");
}

diopiError_t diopiEmbeddingBackward(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t grad,
                                    diopiConstTensorHandle_t indices, int64_t num_weights, int64_t padding_idx,
                                    bool scale_grad_by_freq, bool sparse) {
    (void)ctx;
    ref_view table, ids, rows;
    if (scale_grad_by_freq || sparse) return REF_FALLBACK;
    if (!contiguous_floats(out, &table, -1) || table.ndim != 2 || table.sizes[0] != num_weights ||
        !ref_view_of(indices, &ids) || (ids.dtype != diopi_dtype_int64 && ids.dtype != diopi_dtype_int32) ||
        !contiguous_floats(grad, &rows, ids.numel * table.sizes[1]))
        return REF_FALLBACK;
    double* accumulated = calloc((size_t)(table.numel ? table.numel : 1), sizeof(double));
    if (accumulated == NULL) return ref_error("diopiEmbeddingBackward: out of host memory");
    embedding_state s = {&ids, &table, &rows, table.sizes[1], num_weights, padding_idx, 0, accumulated, false};
    diopiError_t status = embedding(indices, &s, "diopiEmbeddingBackward");
    for (int64_t i = 0; status == diopiSuccess && i < table.numel; ++i) ref_store(&table, i, accumulated[i]);
    free(accumulated);
    return status;
}

/* ---- NLL loss: input [N, C], target [N], mean or sum ----------------------------------------------- */
static diopiError_t nll_views(diopiConstTensorHandle_t input, diopiConstTensorHandle_t target,
                              diopiConstTensorHandle_t weight, diopiReduction_t reduction, ref_view* x, ref_view* t,
                              ref_view* w) {
    if (reduction != ReductionMean && reduction != ReductionSum) return REF_FALLBACK;
    if (!ref_view_of(input, x) || !ref_is_floating(x->dtype) || x->ndim != 2 || !ref_view_of(target, t) ||
        t->ndim != 1 || t->sizes[0] != x->sizes[0] || (t->dtype != diopi_dtype_int64 && t->dtype != diopi_dtype_int32))
        return REF_FALLBACK;
    if (weight && (!ref_view_of(weight, w) || w->ndim != 1 || w->sizes[0] != x->sizes[1])) return REF_FALLBACK;
    return diopiSuccess;
}

diopiError_t diopiNLLLossV2(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiTensorHandle_t total_weight,
                            diopiConstTensorHandle_t input, diopiConstTensorHandle_t target,
                            diopiConstTensorHandle_t weight, diopiReduction_t reduction, int64_t ignore_index) {
    (void)ctx;
    ref_view x, t, w, o, tw;
    diopiError_t status = nll_views(input, target, weight, reduction, &x, &t, &w);
    if (status != diopiSuccess) return status;
    if (!ref_view_of(out, &o) || o.numel != 1 || !ref_view_of(total_weight, &tw) || tw.numel != 1) return REF_FALLBACK;
    double loss = 0, total = 0;
    for (int64_t i = 0; i < x.sizes[0]; ++i) {
        int64_t c = (int64_t)ref_load(&t, i * t.strides[0]);
        if (c == ignore_index) continue;
        if (c < 0 || c >= x.sizes[1]) return ref_error("diopiNLLLossV2: target %lld is out of bounds", (long long)c);
        double wc = weight ? ref_load(&w, c * w.strides[0]) : 1;
        loss -= wc * ref_load(&x, i * x.strides[0] + c * x.strides[1]);
        total += wc;
    }
    ref_store(&o, 0, reduction == ReductionMean ? loss / total : loss);
    ref_store(&tw, 0, total);
    return diopiSuccess;
}

diopiError_t diopiNLLLossV2Backward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                    diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                    diopiConstTensorHandle_t target, diopiConstTensorHandle_t weight,
                                    diopiConstTensorHandle_t total_weight, diopiReduction_t reduction,
                                    int64_t ignore_index) {
    (void)ctx;
    ref_view x, t, w, g, tw, dx;
    diopiError_t status = nll_views(input, target, weight, reduction, &x, &t, &w);
    if (status != diopiSuccess) return status;
    if (!ref_view_of(grad_output, &g) || g.numel != 1 || !ref_view_of(total_weight, &tw) || tw.numel != 1 ||
        !ref_view_of(grad_input, &dx) || dx.ndim != 2 || dx.sizes[0] != x.sizes[0] || dx.sizes[1] != x.sizes[1])
        return REF_FALLBACK;
    double scale = ref_load(&g, 0) / (reduction == ReductionMean ? ref_load(&tw, 0) : 1);
    for (int64_t i = 0; i < x.sizes[0]; ++i) {
        int64_t c = (int64_t)ref_load(&t, i * t.strides[0]);
        for (int64_t j = 0; j < x.sizes[1]; ++j) ref_store(&dx, i * dx.strides[0] + j * dx.strides[1], 0);
        if (c == ignore_index) continue;
        if (c < 0 || c >= x.sizes[1])
            return ref_error("diopiNLLLossV2Backward: target %lld is out of bounds", (long long)c);
        double wc = weight ? ref_load(&w, c * w.strides[0]) : 1;
        ref_store(&dx, i * dx.strides[0] + c * dx.strides[1], -wc * scale);
    }
    return diopiSuccess;
}
