/* A small DIOPI op library in C for benchmarks/bench_op_latency.py's C path column, used until the
   reference C op library (diopi_impl/ref_c) is at hand: float32, contiguous operands of one shape (or
   matrices); anything else is answered diopiForceFallbackToCPU. Built against dipu's diopirt.h. */
#include <diopi/diopirt.h>
#include <math.h>
#include <stddef.h>

static char last_error[64];
const char* diopiGetLastErrorString(void) { return last_error; }

/* float32 contiguous data, with its element count and shape; NULL otherwise. */
static float* floats(diopiConstTensorHandle_t t, int64_t* numel, diopiSize_t* shape) {
    diopiDtype_t dtype;
    diopiSize_t stride;
    const void* data;
    int64_t expected = 1;
    diopiGetTensorDtype(t, &dtype);
    diopiGetTensorShape(t, shape);
    diopiGetTensorStride(t, &stride);
    if (dtype != diopi_dtype_float32) return NULL;
    for (int64_t d = shape->len - 1; d >= 0; --d) {
        if (shape->data[d] != 1 && stride.data[d] != expected) return NULL;
        expected *= shape->data[d];
    }
    diopiGetTensorNumel(t, numel);
    diopiGetTensorDataConst(t, &data);
    return (float*)data;
}

static float value_of(const diopiScalar_t* s) {
    return s == NULL ? 1.0f : s->stype == diopi_dtype_float64 ? (float)s->fval : (float)s->ival;
}

#define BINARY(NAME, EXPR, ...)                                                                          \
    diopiError_t NAME(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input, \
                      diopiConstTensorHandle_t other __VA_ARGS__) {                                      \
        int64_t n, na, nb;                                                                               \
        diopiSize_t s;                                                                                   \
        float *o = floats(out, &n, &s), *x = floats(input, &na, &s), *y = floats(other, &nb, &s);        \
        (void)ctx;                                                                                       \
        if (!o || !x || !y || na != n || nb != n) return diopiForceFallbackToCPU;                        \
        for (int64_t i = 0; i < n; ++i) o[i] = EXPR;                                                     \
        return diopiSuccess;                                                                             \
    }
BINARY(diopiAdd, x[i] + value_of(alpha) * y[i], , const diopiScalar_t* alpha)
BINARY(diopiMul, x[i] * y[i])
BINARY(diopiDiv, x[i] / y[i], , diopiRoundMode_t mode)

diopiError_t diopiMulScalar(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                            const diopiScalar_t* other) {
    int64_t n, na;
    diopiSize_t s;
    float *o = floats(out, &n, &s), *x = floats(input, &na, &s), v = value_of(other);
    (void)ctx;
    if (!o || !x || na != n) return diopiForceFallbackToCPU;
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] * v;
    return diopiSuccess;
}

diopiError_t diopiSqrt(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input) {
    int64_t n, na;
    diopiSize_t s;
    float *o = floats(out, &n, &s), *x = floats(input, &na, &s);
    (void)ctx;
    if (!o || !x || na != n) return diopiForceFallbackToCPU;
    for (int64_t i = 0; i < n; ++i) o[i] = sqrtf(x[i]);
    return diopiSuccess;
}

/* out[b] = beta * bias + alpha * a[b] @ m[b] over `batches` contiguous matrices (bias: NULL or a row vector
   or a matrix of out's shape). */
static diopiError_t matmul(diopiTensorHandle_t out, diopiConstTensorHandle_t bias, diopiConstTensorHandle_t a,
                           diopiConstTensorHandle_t m, int rank, float beta, float alpha) {
    int64_t n, na, nm, nbias = 0;
    diopiSize_t so, sa, sm, sbias;
    float *o = floats(out, &n, &so), *x = floats(a, &na, &sa), *y = floats(m, &nm, &sm), *c = NULL;
    if (!o || !x || !y || sa.len != rank || sm.len != rank) return diopiForceFallbackToCPU;
    if (bias != NULL && !(c = floats(bias, &nbias, &sbias))) return diopiForceFallbackToCPU;
    int64_t batches = rank == 3 ? sa.data[0] : 1, rows = sa.data[rank - 2], inner = sa.data[rank - 1];
    int64_t cols = sm.data[rank - 1];
    if (sm.data[rank - 2] != inner || n != batches * rows * cols) return diopiForceFallbackToCPU;
    if (c != NULL && nbias != cols && nbias != rows * cols) return diopiForceFallbackToCPU;
    for (int64_t b = 0; b < batches; ++b)
        for (int64_t i = 0; i < rows; ++i) {
            float* row = o + (b * rows + i) * cols; /* i-k-j order: the inner loop runs along rows of m */
            for (int64_t j = 0; j < cols; ++j) row[j] = 0;
            for (int64_t k = 0; k < inner; ++k) {
                const float xik = x[(b * rows + i) * inner + k], *mk = y + (b * inner + k) * cols;
                for (int64_t j = 0; j < cols; ++j) row[j] += xik * mk[j];
            }
            for (int64_t j = 0; j < cols; ++j)
                row[j] = (c == NULL ? 0 : beta * c[nbias == cols ? j : i * cols + j]) + alpha * row[j];
        }
    return diopiSuccess;
}

diopiError_t diopiMm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                     diopiConstTensorHandle_t mat2) {
    (void)ctx;
    return matmul(out, NULL, input, mat2, 2, 0, 1);
}

diopiError_t diopiBmm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t mat2) {
    (void)ctx;
    return matmul(out, NULL, input, mat2, 3, 0, 1);
}

diopiError_t diopiAddmm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                        diopiConstTensorHandle_t mat1, diopiConstTensorHandle_t mat2, const diopiScalar_t* beta,
                        const diopiScalar_t* alpha) {
    (void)ctx;
    return matmul(out, input, mat1, mat2, 2, value_of(beta), value_of(alpha));
}
