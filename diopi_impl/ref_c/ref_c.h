/* The reference C op library's shared helpers: strided views of DIOPI tensors, element access in
   double precision, broadcasting walks, and the library's last error.

   Note [Reference C library numerics]
   Every kernel reads its elements as double, computes in double and rounds once when it stores,
   except the float32 fast paths that compute in float as the CPU does (next note).
   For one +, -, *, / or sqrt of float32 operands that gives the correctly rounded float32 result
   (double has more than 2 * 24 + 2 bits), so those agree with torch's CPU bit for bit unless torch
   fuses a multiply-add; longer computations (exp, tanh, erf, sums, matrix products, norms) are at
   least as accurate as torch's float32 ones and differ from them by rounding only: a few float32
   ulps per element, and for reductions and matrix products about sqrt(n) ulps of the largest
   term, well inside autocompare's float32 bound (1e-4 of max|cpu|). Tensors of any strides and
   broadcast inputs are read through their strides; dtypes other than the ones `ref_load` knows
   (float16, bfloat16, complex) are answered diopiForceFallbackToCPU.

   Note [Reference C library fast paths]
   Contiguous float32 operands take loops over float pointers that the compiler vectorizes (c_build.py's
   flags say why each is safe). Where one float32 operation is correctly rounded (+, -, *, /, sqrt,
   comparisons) the float loop gives exactly what the double computation rounded once gives (double
   rounding is innocuous for these: 53 >= 2 * 24 + 2 bits), so those stay bit-identical to the strided
   path. Two families compute in float where the CPU does, and differ from the double path by float
   rounding only: matrix products (ATen's float GEMM accumulates in float too: an error of about
   sqrt(k) ulps of the largest product, k the inner size) and softmax/log-softmax and their backwards
   (ref_expf below, within 1.1 ulp of exp, where ATen's vectorized exp is within 1 ulp; row sums stay
   in double). Sums, means and layer norm keep their double accumulators on float pointers: at these
   sizes that costs nothing measurable once the loops are plain. tests/test_c_op_library.py checks
   each fast path against the CPU with these bounds. */
#ifndef DIPU_REF_C_H_
#define DIPU_REF_C_H_

#include <stdbool.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>

#include <diopi/diopirt.h>
#if defined(__has_include)
#if __has_include(<diopi/functions.h>)
#include <diopi/functions.h> /* dipu's generated prototypes: the definitions are checked against them */
#endif
#endif

#define REF_MAX_DIMS 8

typedef struct {
    char* data; /* element 0 */
    diopiDtype_t dtype;
    int64_t itemsize;
    int64_t ndim;
    int64_t numel;
    int64_t sizes[REF_MAX_DIMS];
    int64_t strides[REF_MAX_DIMS]; /* in elements */
} ref_view;

/* Fills *v from a tensor handle; false (the caller answers diopiForceFallbackToCPU) for more than
   REF_MAX_DIMS dimensions or a dtype ref_load cannot read. A null handle gives false too. */
bool ref_view_of(diopiConstTensorHandle_t t, ref_view* v);
bool ref_is_contiguous(const ref_view* v);
bool ref_is_floating(diopiDtype_t dtype); /* float32 or float64 */

double ref_load(const ref_view* v, int64_t offset);
void ref_store(const ref_view* v, int64_t offset, double value);
double ref_scalar(const diopiScalar_t* s, double if_null);

/* Strides of `v` laid over `shape` (ndim dims, right-aligned as broadcasting does; 0 where v is
   broadcast). False when v's shape does not broadcast to shape. */
bool ref_broadcast_strides(const ref_view* v, const int64_t* shape, int64_t ndim, int64_t* strides);

/* Calls visit(offsets, context) for every index of `shape` in row-major order, with offsets[k] the
   element offset of operand k (strides[k] laid over shape). */
typedef void (*ref_visit)(const int64_t* offsets, void* context);
void ref_walk(const int64_t* shape, int64_t ndim, int operands, int64_t strides[][REF_MAX_DIMS], ref_visit visit,
              void* context);

/* out = fn(inputs..., params) elementwise, the inputs broadcast to out's shape. */
typedef double (*ref_elementwise)(const double* inputs, const void* params);
diopiError_t ref_map(diopiTensorHandle_t out, int count, const diopiConstTensorHandle_t* inputs, ref_elementwise fn,
                     const void* params);

/* Records why the last call failed (diopiGetLastErrorString) and returns diopiErrorOccurred. */
diopiError_t ref_error(const char* format, ...);

#define REF_FALLBACK diopiForceFallbackToCPU

/* Whether v is a contiguous float32 tensor of `numel` elements (any shape): a fast path's operand. */
static inline bool ref_dense_f32(const ref_view* v, int64_t numel) {
    return v->dtype == diopi_dtype_float32 && v->numel == numel && ref_is_contiguous(v);
}

/* y[i] = fn(x[0][i], x[1][i], ...) for i < n over contiguous float32 arrays: the loop of one op, called
   once per tensor by ref_map when every operand is dense (Note [Reference C library fast paths]). */
typedef void (*ref_dense_loop)(float* y, const float* const* x, int64_t n, const void* params);

/* ref_map with a dense loop (NULL: none) for contiguous float32 operands of out's shape. */
diopiError_t ref_map_dense(diopiTensorHandle_t out, int count, const diopiConstTensorHandle_t* inputs,
                           ref_elementwise fn, ref_dense_loop dense, const void* params);

/* exp(x) in float, vectorizable: 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 (Cody-Waite, in two
   parts so r is exact), exp(r) = 1 + r + r^2 q(r) with q a degree-4 least-squares fit of dipu's own on
   |r| <= ln(2)/2 (within 1.1 ulp of exp in float arithmetic, checked against double exp over the range).
   Below -87 it gives 0 (exp is below FLT_MIN there: no subnormals, an absolute error under 1.2e-38);
   above log(FLT_MAX) infinity; NaN stays NaN. Comparisons select rather than branch, so the compiler
   vectorizes a loop of it (with -fno-trapping-math, c_build.py). */
static inline float ref_expf(float x) {
    float clamped = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float n = (clamped * 1.44269504088896341f + round_magic) - round_magic;
    float r = (clamped - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;
    float q = 0.0013751407386735082f;
    q = q * r + 0.008368915878236294f;
    q = q * r + 0.04166953265666962f;
    q = q * r + 0.166665181517601f;
    q = q * r + 0.49999988079071045f;
    float y = (r * r) * q + r + 1.0f;
    union {
        int32_t bits;
        float value;
    } two_to_n = {((int32_t)n + 127) << 23};
    y *= two_to_n.value;
    y = x < -87.0f ? 0.0f : y;
    y = x > 88.72283935546875f ? (float)INFINITY : y;
    return x != x ? x : y;
}

#endif /* DIPU_REF_C_H_ */
