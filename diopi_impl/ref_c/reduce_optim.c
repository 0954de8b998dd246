/* Reductions and the optimizers' _foreach_ steps of the reference C op library. */
#include "ref_c.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- sum and mean over dims (none or empty: all), the output's shape saying whether they are kept - */
typedef struct {
    const ref_view* x;
    double* accumulated;
} reduce_state;

static void reduce_one(const int64_t* offsets, void* context) {
    reduce_state* s = (reduce_state*)context;
    s->accumulated[offsets[1]] += ref_load(s->x, offsets[0]);
}

typedef struct {
    const ref_view* out;
    const double* accumulated;
    double scale;
} store_state;

static void store_one(const int64_t* offsets, void* context) {
    store_state* s = (store_state*)context;
    ref_store(s->out, offsets[0], s->accumulated[offsets[1]] * s->scale);
}

/* The sum of n contiguous floats, in double, eight partial sums wide so the adds need not wait on each
   other (and the compiler may vectorize them: eight independent chains are no reassociation). */
static double sum_floats(const float* x, int64_t n, int64_t stride) {
    double partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    if (stride == 1)
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; ++j) partial[j] += x[i + j];
    for (; i < n; ++i) partial[0] += x[i * stride];
    return ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
           ((partial[4] + partial[5]) + (partial[6] + partial[7]));
}

/* Fast path of `reduce` (Note [Reference C library fast paths]): a contiguous float32 input whose reduced
   dims are one block of its shape (ignoring dims of size 1), viewed as [outer, reduced, inner], into a
   contiguous output of outer * inner elements. False: take the general walk. */
static bool reduce_dense(const ref_view* x, const bool* reduced, const ref_view* o, double scale, double* scratch) {
    if (!ref_dense_f32(x, x->numel) || !ref_is_contiguous(o) || !ref_is_floating(o->dtype)) return false;
    int64_t first = -1, last = -1;
    for (int64_t d = 0; d < x->ndim; ++d)
        if (reduced[d] && x->sizes[d] != 1) {
            if (first < 0) first = d;
            last = d;
        }
    int64_t outer = 1, length = 1, inner = 1;
    for (int64_t d = 0; d < x->ndim; ++d) {
        if (first >= 0 && d >= first && d <= last) {
            if (!reduced[d] && x->sizes[d] != 1) return false; /* a kept dim inside the block */
            length *= x->sizes[d];
        } else if (!reduced[d] || x->sizes[d] == 1) {
            if (first >= 0 && d > last)
                inner *= x->sizes[d];
            else
                outer *= x->sizes[d];
        }
    }
    if (outer * inner != o->numel) return false;
    const float* data = (const float*)x->data;
    for (int64_t a = 0; a < outer; ++a) {
        const float* block = data + a * length * inner;
        if (inner == 1) {
            ref_store(o, a, sum_floats(block, length, 1) * scale);
            continue;
        }
        for (int64_t j = 0; j < inner; ++j) scratch[j] = 0;
        for (int64_t r = 0; r < length; ++r)
            for (int64_t j = 0; j < inner; ++j) scratch[j] += block[r * inner + j];
        for (int64_t j = 0; j < inner; ++j) ref_store(o, a * inner + j, scratch[j] * scale);
    }
    return true;
}

static diopiError_t reduce(diopiTensorHandle_t out, diopiConstTensorHandle_t input, diopiSize_t dim, bool mean,
                           const char* name) {
    ref_view x, o;
    if (!ref_view_of(input, &x) || !ref_view_of(out, &o) || !ref_is_floating(o.dtype)) return REF_FALLBACK;
    bool reduced[REF_MAX_DIMS] = {false};
    int64_t count = 0;
    for (int64_t i = 0; i < dim.len; ++i) {
        int64_t wrap = x.ndim ? x.ndim : 1; /* a 0-dim tensor takes dim 0 or -1, as in PyTorch */
        int64_t d = dim.data[i] < 0 ? dim.data[i] + wrap : dim.data[i];
        if (d < 0 || d >= wrap) return ref_error("%s: dim %lld is out of range", name, (long long)dim.data[i]);
        if (x.ndim && !reduced[d]) ++count;
        if (x.ndim) reduced[d] = true;
    }
    if (dim.len == 0)
        for (int64_t d = 0; d < x.ndim; ++d) reduced[d] = true, ++count;
    bool keepdim = o.ndim == x.ndim && count > 0;
    if (!keepdim && o.ndim != x.ndim - count) return REF_FALLBACK;
    /* dense accumulator index of every input element: the output's kept dims, row-major */
    int64_t strides[2][REF_MAX_DIMS], n = 1, elements = 1;
    memcpy(strides[0], x.strides, sizeof strides[0]);
    for (int64_t d = x.ndim - 1; d >= 0; --d) {
        strides[1][d] = reduced[d] ? 0 : n;
        if (!reduced[d])
            n *= x.sizes[d];
        else
            elements *= x.sizes[d];
    }
    if (n != o.numel) return REF_FALLBACK;
    double* accumulated = calloc((size_t)(n ? n : 1), sizeof(double));
    if (accumulated == NULL) return ref_error("%s: out of host memory", name);
    if (reduce_dense(&x, reduced, &o, mean ? 1.0 / (double)elements : 1.0, accumulated)) {
        free(accumulated);
        return diopiSuccess;
    }
    reduce_state r = {&x, accumulated};
    ref_walk(x.sizes, x.ndim, 2, strides, reduce_one, &r);
    int64_t out_strides[2][REF_MAX_DIMS], dense = 1;
    memcpy(out_strides[0], o.strides, sizeof out_strides[0]);
    for (int64_t d = o.ndim - 1; d >= 0; --d) {
        out_strides[1][d] = dense;
        dense *= o.sizes[d];
    }
    store_state s = {&o, accumulated, mean ? 1.0 / (double)elements : 1.0};
    ref_walk(o.sizes, o.ndim, 2, out_strides, store_one, &s);
    free(accumulated);
    return diopiSuccess;
}

diopiError_t diopiSum(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiSize_t dim) {
    (void)ctx;
    return reduce(out, input, dim, false, "diopiSum");
}

diopiError_t diopiMean(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                       diopiSize_t dim) {
    (void)ctx;
    return reduce(out, input, dim, true, "diopiMean");
}

/* ---- _foreach_ steps: each list element is one elementwise call -------------------------------- */
typedef struct {
    double a, b;
} pair;

static double scale(const double* x, const void* p) { return x[0] * ((const pair*)p)->a; }
static double shift(const double* x, const void* p) { return x[0] + ((const pair*)p)->a; }
static double divide(const double* x, const void* p) { return x[0] / ((const pair*)p)->a; }
static double root(const double* x, const void* p) {
    (void)p;
    return sqrt(x[0]);
}
static double addcmul(const double* x, const void* p) { return x[0] + ((const pair*)p)->a * x[1] * x[2]; }
static double addcdiv(const double* x, const void* p) { return x[0] + ((const pair*)p)->a * (x[1] / x[2]); }
/* torch's lerp: from the nearer end, so that weight 1 gives `end` exactly */
static double lerp(const double* x, const void* p) {
    double w = ((const pair*)p)->a, d = x[1] - x[0];
    return fabs(w) < 0.5 ? x[0] + w * d : x[1] - d * (1 - w);
}

static bool floating(diopiConstTensorHandle_t t) {
    diopiDtype_t dtype;
    return diopiGetTensorDtype(t, &dtype) == diopiSuccess && ref_is_floating(dtype);
}

/* inputs[i] = fn(inputs[i], a[i], b[i]) for each i, the scalar of element i from `scalars`. */
static diopiError_t foreach_inplace(diopiTensorHandle_t* inputs, const diopiConstTensorHandle_t* a,
                                    const diopiConstTensorHandle_t* b, int64_t n, const diopiScalar_t* scalars,
                                    bool scalar_list, ref_elementwise fn) {
    for (int64_t i = 0; i < n; ++i)
        if (!floating(inputs[i])) return REF_FALLBACK;
    for (int64_t i = 0; i < n; ++i) {
        diopiConstTensorHandle_t operands[3] = {inputs[i], a ? a[i] : NULL, b ? b[i] : NULL};
        pair p = {ref_scalar(scalar_list ? &scalars[i] : scalars, 1), 0};
        diopiError_t status = ref_map(inputs[i], a ? (b ? 3 : 2) : 1, operands, fn, &p);
        if (status != diopiSuccess) return status; /* only before the first element: all are floating */
    }
    return diopiSuccess;
}

diopiError_t diopiForeachmulInpScalar(diopiContextHandle_t ctx, diopiTensorHandle_t* inputs, int64_t num_inputs,
                                      const diopiScalar_t* scalar) {
    (void)ctx;
    return foreach_inplace(inputs, NULL, NULL, num_inputs, scalar, false, scale);
}

diopiError_t diopiForeachaddInpScalar(diopiContextHandle_t ctx, diopiTensorHandle_t* inputs, int64_t num_inputs,
                                      const diopiScalar_t* scalar) {
    (void)ctx;
    return foreach_inplace(inputs, NULL, NULL, num_inputs, scalar, false, shift);
}

diopiError_t diopiForeachDivInpScalarList(diopiContextHandle_t ctx, diopiTensorHandle_t* inputs,
                                          const diopiScalar_t* scalars, int64_t num_inputs) {
    (void)ctx;
    return foreach_inplace(inputs, NULL, NULL, num_inputs, scalars, true, divide);
}

diopiError_t diopiForeachLerpInpScalar(diopiContextHandle_t ctx, diopiTensorHandle_t* inputs,
                                       diopiConstTensorHandle_t* tensors1, int64_t num_inputs,
                                       const diopiScalar_t* weight) {
    (void)ctx;
    return foreach_inplace(inputs, tensors1, NULL, num_inputs, weight, false, lerp);
}

diopiError_t diopiForeachAddcmulInpScalar(diopiContextHandle_t ctx, diopiTensorHandle_t* inputs,
                                          diopiConstTensorHandle_t* tensors1, diopiConstTensorHandle_t* tensors2,
                                          int64_t num_inputs, const diopiScalar_t* value) {
    (void)ctx;
    return foreach_inplace(inputs, tensors1, tensors2, num_inputs, value, false, addcmul);
}

diopiError_t diopiForeachAddcdivInpScalarList(diopiContextHandle_t ctx, diopiTensorHandle_t* inputs,
                                              diopiConstTensorHandle_t* tensors1, diopiConstTensorHandle_t* tensors2,
                                              const diopiScalar_t* scalars, int64_t num_inputs) {
    (void)ctx;
    return foreach_inplace(inputs, tensors1, tensors2, num_inputs, scalars, true, addcdiv);
}

/* outs[i]: a new tensor of inputs[i]'s shape and dtype holding its square root. */
diopiError_t diopiForeachSqrt(diopiContextHandle_t ctx, diopiTensorHandle_t* outs, diopiConstTensorHandle_t* inputs,
                              int64_t num_inputs) {
    for (int64_t i = 0; i < num_inputs; ++i)
        if (!floating(inputs[i])) return REF_FALLBACK;
    for (int64_t i = 0; i < num_inputs; ++i) {
        diopiSize_t shape;
        diopiDtype_t dtype;
        diopiGetTensorShape(inputs[i], &shape);
        diopiGetTensorDtype(inputs[i], &dtype);
        if (diopiRequireTensor(ctx, &outs[i], &shape, NULL, dtype, diopi_device) != diopiSuccess)
            return ref_error("diopiForeachSqrt: cannot allocate output %lld", (long long)i);
        diopiError_t status = ref_map(outs[i], 1, &inputs[i], root, NULL);
        if (status != diopiSuccess)
            return status == REF_FALLBACK ? ref_error("diopiForeachSqrt: unreadable input") : status;
    }
    return diopiSuccess;
}
