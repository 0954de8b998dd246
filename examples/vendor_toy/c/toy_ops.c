/* The toy vendor's op library in C (docs/bring-up.md, "An op library in C"): diopiMul and diopiRelu on
   float32 tensors of one shape, contiguous. Anything else is answered diopiForceFallbackToCPU, and dipu
   runs that call on the CPU. Compiled against dipu's headers:

       cc -shared -fPIC -O2 -I"$(python -c 'import dipu.diopi.c_build as b; print(b.INCLUDE)')" \
          examples/vendor_toy/c/toy_ops.c -o libtoy_ops.so

   A C kernel reads tensor data at diopiGetTensorData's address, so it runs on a vendor whose memory it can
   address: the simulated vendor's host memory here; on a real device, the vendor's own memory. */
#include <stdio.h>
#include <diopi/functions.h>

static char last_error[256];
const char* diopiGetLastErrorString(void) { return last_error; }

/* The number of elements of t if it is float32, contiguous and shaped like `like`; else -1. */
static int64_t contiguous_floats(diopiConstTensorHandle_t t, diopiConstTensorHandle_t like) {
    diopiDtype_t dtype;
    diopiSize_t shape, stride, like_shape;
    diopiGetTensorDtype(t, &dtype);
    diopiGetTensorShape(t, &shape);
    diopiGetTensorStride(t, &stride);
    diopiGetTensorShape(like, &like_shape);
    if (dtype != diopi_dtype_float32 || shape.len != like_shape.len) return -1;
    int64_t expected = 1;
    for (int64_t d = shape.len - 1; d >= 0; --d) {
        if (shape.data[d] != like_shape.data[d]) return -1; /* broadcasting: left to the CPU */
        if (shape.data[d] != 1 && stride.data[d] != expected) return -1;
        expected *= shape.data[d];
    }
    return expected;
}

diopiError_t diopiMul(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other) {
    int64_t n = contiguous_floats(out, out);
    if (n < 0 || contiguous_floats(input, out) < 0 || contiguous_floats(other, out) < 0) return diopiForceFallbackToCPU;
    const void *x, *y;
    void* z;
    diopiGetTensorDataConst(input, &x);
    diopiGetTensorDataConst(other, &y);
    diopiGetTensorData(out, &z);
    for (int64_t i = 0; i < n; ++i) ((float*)z)[i] = ((const float*)x)[i] * ((const float*)y)[i];
    return diopiSuccess;
}

diopiError_t diopiRelu(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input) {
    int64_t n = contiguous_floats(out, out);
    if (n < 0 || contiguous_floats(input, out) < 0) {
        snprintf(last_error, sizeof last_error, "diopiRelu: float32 contiguous tensors only");
        return diopiForceFallbackToCPU;
    }
    const void* x;
    void* y;
    diopiGetTensorDataConst(input, &x);
    diopiGetTensorData(out, &y);
    for (int64_t i = 0; i < n; ++i) ((float*)y)[i] = ((const float*)x)[i] > 0 ? ((const float*)x)[i] : 0;
    return diopiSuccess;
}
