/* The reference C op library's shared helpers: strided views of DIOPI tensors, element access in
   double precision, broadcasting walks, and the library's last error.

   Note [Reference C library numerics]
   Every kernel reads its elements as double, computes in double and rounds once when it stores.
   For one +, -, *, / or sqrt of float32 operands that gives the correctly rounded float32 result
   (double has more than 2 * 24 + 2 bits), so those agree with torch's CPU bit for bit unless torch
   fuses a multiply-add; longer computations (exp, tanh, erf, sums, matrix products, norms) are at
   least as accurate as torch's float32 ones and differ from them by rounding only: a few float32
   ulps per element, and for reductions and matrix products about sqrt(n) ulps of the largest
   term, well inside autocompare's float32 bound (1e-4 of max|cpu|). Tensors of any strides and
   broadcast inputs are read through their strides; dtypes other than the ones `ref_load` knows
   (float16, bfloat16, complex) are answered diopiForceFallbackToCPU. */
#ifndef DIPU_REF_C_H_
#define DIPU_REF_C_H_

#include <stdbool.h>
#include <stddef.h>
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

#endif /* DIPU_REF_C_H_ */
