/* Elementwise arithmetic and activations of the reference C op library. Outputs are float32 or
   float64 (integer and bool results are the CPU fallback's: torch's integer semantics, such as
   exact int64 arithmetic, are not what a double computes). */
#include "ref_c.h"

#include <math.h>
#include <string.h>

typedef struct {
    double alpha, other;
} binary_params;

static double add(const double* x, const void* p) { return x[0] + ((const binary_params*)p)->alpha * x[1]; }
static double add_scalar(const double* x, const void* p) {
    const binary_params* b = (const binary_params*)p;
    return x[0] + b->alpha * b->other;
}
static double sub(const double* x, const void* p) { return x[0] - ((const binary_params*)p)->alpha * x[1]; }
static double sub_scalar(const double* x, const void* p) {
    const binary_params* b = (const binary_params*)p;
    return x[0] - b->alpha * b->other;
}
static double mul(const double* x, const void* p) {
    (void)p;
    return x[0] * x[1];
}
static double mul_scalar(const double* x, const void* p) { return x[0] * ((const binary_params*)p)->other; }
static double divide(const double* x, const void* p) {
    (void)p;
    return x[0] / x[1];
}
static double div_scalar(const double* x, const void* p) { return x[0] / ((const binary_params*)p)->other; }

/* Dense float32 loops (Note [Reference C library fast paths]): each computes what its ref_elementwise
   twin above computes, in float where one correctly rounded float operation gives the same result, else
   in double rounded once, as the twin does. */
#define REF_DENSE_LOOP(name, expression)                                          \
    static void name(float* y, const float* const* x, int64_t n, const void* p) { \
        const binary_params* params = (const binary_params*)p;                    \
        (void)params;                                                             \
        const float* a = x[0]; /* may be y: in place */                           \
        const float* b = x[1];                                                    \
        (void)b;                                                                  \
        for (int64_t i = 0; i < n; ++i) y[i] = (expression);                      \
    }
REF_DENSE_LOOP(add_dense, params->alpha == 1 ? a[i] + b[i] : (float)((double)a[i] + params->alpha * b[i]))
REF_DENSE_LOOP(sub_dense, params->alpha == 1 ? a[i] - b[i] : (float)((double)a[i] - params->alpha * b[i]))
REF_DENSE_LOOP(add_scalar_dense, (float)((double)a[i] + params->alpha * params->other))
REF_DENSE_LOOP(sub_scalar_dense, (float)((double)a[i] - params->alpha * params->other))
REF_DENSE_LOOP(mul_dense, a[i] * b[i])
REF_DENSE_LOOP(mul_scalar_dense, (float)((double)a[i] * params->other))
REF_DENSE_LOOP(div_dense, a[i] / b[i])
REF_DENSE_LOOP(div_scalar_dense, (float)((double)a[i] / params->other))
REF_DENSE_LOOP(neg_dense, -a[i])
REF_DENSE_LOOP(sqrt_dense, sqrtf(a[i]))
REF_DENSE_LOOP(rsqrt_dense, (float)(1 / sqrt((double)a[i])))
REF_DENSE_LOOP(relu_dense, a[i] > 0 ? a[i] : (a[i] != a[i] ? a[i] : 0.0f))
REF_DENSE_LOOP(threshold_backward_dense, (double)b[i] <= params->other ? 0.0f : a[i])

/* The float result of a binary op; integer outputs go to the fallback (see the file's comment). */
static diopiError_t binary(diopiTensorHandle_t out, diopiConstTensorHandle_t input, diopiConstTensorHandle_t other,
                           ref_elementwise fn, ref_dense_loop dense, binary_params params) {
    diopiDtype_t dtype;
    diopiGetTensorDtype(out, &dtype);
    if (!ref_is_floating(dtype)) return REF_FALLBACK;
    diopiConstTensorHandle_t inputs[2] = {input, other};
    return ref_map_dense(out, other ? 2 : 1, inputs, fn, dense, &params);
}

diopiError_t diopiAdd(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other, const diopiScalar_t* alpha) {
    (void)ctx;
    return binary(out, input, other, add, add_dense, (binary_params){ref_scalar(alpha, 1), 0});
}

diopiError_t diopiAddScalar(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                            const diopiScalar_t* other, const diopiScalar_t* alpha) {
    (void)ctx;
    return binary(out, input, NULL, add_scalar, add_scalar_dense,
                  (binary_params){ref_scalar(alpha, 1), ref_scalar(other, 0)});
}

diopiError_t diopiSub(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other, const diopiScalar_t* alpha) {
    (void)ctx;
    return binary(out, input, other, sub, sub_dense, (binary_params){ref_scalar(alpha, 1), 0});
}

diopiError_t diopiSubScalar(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                            const diopiScalar_t* other, const diopiScalar_t* alpha) {
    (void)ctx;
    return binary(out, input, NULL, sub_scalar, sub_scalar_dense,
                  (binary_params){ref_scalar(alpha, 1), ref_scalar(other, 0)});
}

diopiError_t diopiMul(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other) {
    (void)ctx;
    return binary(out, input, other, mul, mul_dense, (binary_params){1, 0});
}

diopiError_t diopiMulScalar(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                            const diopiScalar_t* other) {
    (void)ctx;
    return binary(out, input, NULL, mul_scalar, mul_scalar_dense, (binary_params){1, ref_scalar(other, 1)});
}

diopiError_t diopiDiv(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other, diopiRoundMode_t rounding_mode) {
    (void)ctx;
    if (rounding_mode != RoundModeNone) return REF_FALLBACK;
    return binary(out, input, other, divide, div_dense, (binary_params){1, 0});
}

diopiError_t diopiDivScalar(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                            const diopiScalar_t* other, diopiRoundMode_t rounding_mode) {
    (void)ctx;
    if (rounding_mode != RoundModeNone) return REF_FALLBACK;
    return binary(out, input, NULL, div_scalar, div_scalar_dense, (binary_params){1, ref_scalar(other, 1)});
}

/* ---- unary ---------------------------------------------------------------------------------- */
static double neg(const double* x, const void* p) {
    (void)p;
    return -x[0];
}
static double exp_(const double* x, const void* p) {
    (void)p;
    return exp(x[0]);
}
static double log_(const double* x, const void* p) {
    (void)p;
    return log(x[0]);
}
static double sqrt_(const double* x, const void* p) {
    (void)p;
    return sqrt(x[0]);
}
static double rsqrt_(const double* x, const void* p) {
    (void)p;
    return 1 / sqrt(x[0]);
}
static double tanh_(const double* x, const void* p) {
    (void)p;
    return tanh(x[0]);
}
static double sigmoid(const double* x, const void* p) {
    (void)p;
    return 1 / (1 + exp(-x[0]));
}
static double relu(const double* x, const void* p) {
    (void)p;
    return x[0] > 0 ? x[0] : (x[0] != x[0] ? x[0] : 0);
}

#define REF_UNARY(name, fn, dense)                                                                         \
    diopiError_t name(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input) { \
        (void)ctx;                                                                                         \
        return binary(out, input, NULL, fn, dense, (binary_params){1, 0});                                 \
    }
REF_UNARY(diopiNeg, neg, neg_dense)
REF_UNARY(diopiExp, exp_, NULL)
REF_UNARY(diopiLog, log_, NULL)
REF_UNARY(diopiSqrt, sqrt_, sqrt_dense)
REF_UNARY(diopiRsqrt, rsqrt_, rsqrt_dense)
REF_UNARY(diopiTanh, tanh_, NULL)
REF_UNARY(diopiSigmoid, sigmoid, NULL)
REF_UNARY(diopiRelu, relu, relu_dense)

diopiError_t diopiReluInp(diopiContextHandle_t ctx, diopiTensorHandle_t input) { return diopiRelu(ctx, input, input); }

static double threshold_backward(const double* x, const void* p) {
    return x[1] <= ((const binary_params*)p)->other ? 0 : x[0];
}

diopiError_t diopiThresholdBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                    diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                    const diopiScalar_t* threshold) {
    (void)ctx;
    return binary(grad_input, grad_output, input, threshold_backward, threshold_backward_dense,
                  (binary_params){1, ref_scalar(threshold, 0)});
}

/* gelu: x * Phi(x), exactly (erf) or with torch's tanh approximation. */
#define REF_SQRT1_2 0.70710678118654752440
#define REF_2_SQRTPI 1.12837916709551257390
#define REF_GELU_K (REF_2_SQRTPI * REF_SQRT1_2) /* sqrt(2 / pi) */

static double gelu_erf(const double* x, const void* p) {
    (void)p;
    return 0.5 * x[0] * (1 + erf(x[0] * REF_SQRT1_2));
}
static double gelu_tanh(const double* x, const void* p) {
    (void)p;
    double v = x[0];
    return 0.5 * v * (1 + tanh(REF_GELU_K * (v + 0.044715 * v * v * v)));
}
static double gelu_erf_backward(const double* x, const void* p) {
    (void)p;
    double v = x[1];
    double cdf = 0.5 * (1 + erf(v * REF_SQRT1_2));
    double pdf = exp(-0.5 * v * v) * REF_2_SQRTPI * REF_SQRT1_2 * 0.5;
    return x[0] * (cdf + v * pdf);
}
static double gelu_tanh_backward(const double* x, const void* p) {
    (void)p;
    double v = x[1], inner = REF_GELU_K * (v + 0.044715 * v * v * v), t = tanh(inner);
    double d_inner = REF_GELU_K * (1 + 3 * 0.044715 * v * v);
    return x[0] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * d_inner);
}

static int gelu_kind(const char* approximate) {
    if (approximate == NULL || strcmp(approximate, "none") == 0) return 0;
    return strcmp(approximate, "tanh") == 0 ? 1 : -1;
}

diopiError_t diopiGelu(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                       const char* approximate) {
    (void)ctx;
    int kind = gelu_kind(approximate);
    if (kind < 0) return ref_error("diopiGelu: approximate must be 'none' or 'tanh', not '%s'", approximate);
    return binary(out, input, NULL, kind ? gelu_tanh : gelu_erf, NULL, (binary_params){1, 0});
}

diopiError_t diopiGeluBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                               diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                               const char* approximate) {
    (void)ctx;
    int kind = gelu_kind(approximate);
    if (kind < 0) return ref_error("diopiGeluBackward: approximate must be 'none' or 'tanh', not '%s'", approximate);
    return binary(grad_input, grad_output, input, kind ? gelu_tanh_backward : gelu_erf_backward, NULL,
                  (binary_params){1, 0});
}

/* ---- masks, dropout's backward, arange ---------------------------------------------------------- */
static double masked_fill(const double* x, const void* p) {
    return x[1] != 0 ? ((const binary_params*)p)->other : x[0];
}

diopiError_t diopiMaskedFillInpScalar(diopiContextHandle_t ctx, diopiTensorHandle_t input,
                                      diopiConstTensorHandle_t mask, const diopiScalar_t* value) {
    (void)ctx;
    diopiConstTensorHandle_t inputs[2] = {input, mask};
    binary_params params = {1, ref_scalar(value, 0)};
    diopiDtype_t dtype;
    diopiGetTensorDtype(input, &dtype);
    if (!ref_is_floating(dtype) && dtype != diopi_dtype_bool) return REF_FALLBACK;
    ref_view x, m;
    if (ref_view_of(input, &x) && ref_view_of(mask, &m) && ref_dense_f32(&x, x.numel) && m.dtype == diopi_dtype_bool &&
        m.ndim == x.ndim && m.numel == x.numel && ref_is_contiguous(&m)) { /* Note [Reference C library fast paths] */
        float* y = (float*)x.data;
        const bool* where = (const bool*)m.data;
        float fill = (float)params.other;
        for (int64_t i = 0; i < x.numel; ++i) y[i] = where[i] ? fill : y[i];
        return diopiSuccess;
    }
    return ref_map(input, 2, inputs, masked_fill, &params);
}

static double scaled_mask(const double* x, const void* p) { return x[0] * x[1] * ((const binary_params*)p)->other; }

diopiError_t diopiDropoutBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                  diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t mask, double scale) {
    (void)ctx;
    return binary(grad_input, grad_output, mask, scaled_mask, NULL, (binary_params){1, scale});
}

diopiError_t diopiArange(diopiContextHandle_t ctx, diopiTensorHandle_t out, const diopiScalar_t* start,
                         const diopiScalar_t* end, const diopiScalar_t* step) {
    (void)ctx;
    (void)end; /* the caller sized out from start, end and step */
    ref_view o;
    if (!ref_view_of(out, &o) || o.ndim != 1) return REF_FALLBACK;
    if (!ref_is_floating(o.dtype) && o.dtype != diopi_dtype_int64 && o.dtype != diopi_dtype_int32) return REF_FALLBACK;
    bool integral = !ref_is_floating(start->stype) && !ref_is_floating(step->stype);
    for (int64_t i = 0; i < o.sizes[0]; ++i) {
        double value =
            integral ? (double)(start->ival + i * step->ival) : ref_scalar(start, 0) + (double)i * ref_scalar(step, 1);
        ref_store(&o, i * o.strides[0], value);
    }
    return diopiSuccess;
}
