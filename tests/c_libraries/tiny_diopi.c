/* A tiny DIOPI op library for dipu's tests (tests/test_c_op_library.py): float32 tensors, contiguous,
   of one shape; anything else is answered diopiForceFallbackToCPU. It compiles against DeepLink's
   headers (-DWITH_FUNCTIONS_H) and against dipu's. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <diopi/diopirt.h>
#if defined(WITH_FUNCTIONS_H)
#include <diopi/functions.h>
#else
diopiError_t diopiAdd(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t, diopiConstTensorHandle_t,
                      const diopiScalar_t*);
diopiError_t diopiMul(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t, diopiConstTensorHandle_t);
diopiError_t diopiRelu(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t);
diopiError_t diopiMm(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t, diopiConstTensorHandle_t);
diopiError_t diopiNonzero(diopiContextHandle_t, diopiTensorHandle_t*, diopiConstTensorHandle_t);
diopiError_t diopiNormalInp(diopiContextHandle_t, diopiTensorHandle_t, double, double, diopiGeneratorHandle_t);
const char* diopiGetLastErrorString(void);
#endif

#ifndef MUL_FACTOR
#define MUL_FACTOR 1.0f /* the tests build a 1%-wrong diopiMul with -DMUL_FACTOR=1.01f */
#endif

static char last_error[256];
const char* diopiGetLastErrorString(void) { return last_error; }

/* The tensor's float32 elements if it is float32 and contiguous, else NULL. */
static float* floats(diopiConstTensorHandle_t t, int64_t* numel) {
    diopiDtype_t dtype;
    diopiSize_t shape, stride;
    diopiGetTensorDtype(t, &dtype);
    diopiGetTensorShape(t, &shape);
    diopiGetTensorStride(t, &stride);
    if (dtype != diopi_dtype_float32) return NULL;
    int64_t expected = 1;
    for (int64_t d = shape.len - 1; d >= 0; --d) {
        if (shape.data[d] != 1 && stride.data[d] != expected) return NULL;
        expected *= shape.data[d];
    }
    diopiGetTensorNumel(t, numel);
    const void* data;
    diopiGetTensorDataConst(t, &data);
    return (float*)data;
}

typedef float (*binary_fn)(float, float, float);
static float add(float x, float y, float alpha) { return x + alpha * y; }
static float mul(float x, float y, float unused) {
    (void)unused;
    return x * y * MUL_FACTOR;
}

static diopiError_t binary(diopiTensorHandle_t out, diopiConstTensorHandle_t a, diopiConstTensorHandle_t b, float alpha,
                           binary_fn fn) {
    int64_t n_out, n_a, n_b;
    float *o = floats(out, &n_out), *x = floats(a, &n_a), *y = floats(b, &n_b);
    if (!o || !x || !y || n_a != n_out || n_b != n_out) return diopiForceFallbackToCPU;
    for (int64_t i = 0; i < n_out; ++i) o[i] = fn(x[i], y[i], alpha);
    return diopiSuccess;
}

diopiError_t diopiAdd(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other, const diopiScalar_t* alpha) {
    (void)ctx;
    /* tests/test_diopi_status.py: answer this status, writing nothing, as a library refusing a call must */
    const char* told = getenv("TINY_DIOPI_ADD_STATUS");
    if (told != NULL && atoi(told) != 0) {
        snprintf(last_error, sizeof last_error, "tiny_diopi was told to answer %s", told);
        return (diopiError_t)atoi(told);
    }
    float a = alpha == NULL ? 1.0f : alpha->stype == diopi_dtype_float64 ? (float)alpha->fval : (float)alpha->ival;
    return binary(out, input, other, a, add);
}

diopiError_t diopiMul(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t other) {
    (void)ctx;
    return binary(out, input, other, 1.0f, mul);
}

diopiError_t diopiRelu(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input) {
    (void)ctx;
    int64_t n_out, n_in;
    float *o = floats(out, &n_out), *x = floats(input, &n_in);
    if (!o || !x || n_in != n_out) return diopiForceFallbackToCPU;
    for (int64_t i = 0; i < n_out; ++i) o[i] = x[i] > 0 ? x[i] : 0;
    return diopiSuccess;
}

/* out[m, n] = input[m, k] @ mat2[k, n], through a scratch row from diopiRequireBuffer. */
diopiError_t diopiMm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                     diopiConstTensorHandle_t mat2) {
    int64_t n_out, n_a, n_b;
    float *o = floats(out, &n_out), *a = floats(input, &n_a), *b = floats(mat2, &n_b);
    if (!o || !a || !b) return diopiForceFallbackToCPU;
    diopiSize_t sa, sb;
    diopiGetTensorShape(input, &sa);
    diopiGetTensorShape(mat2, &sb);
    int64_t m = sa.data[0], k = sa.data[1], n = sb.data[1];
    if (sb.data[0] != k) {
        snprintf(last_error, sizeof last_error, "diopiMm: input is %lldx%lld, mat2 is %lldx%lld", (long long)m,
                 (long long)k, (long long)sb.data[0], (long long)n);
        return diopiErrorOccurred;
    }
    diopiTensorHandle_t scratch;
    if (diopiRequireBuffer(ctx, &scratch, n * (int64_t)sizeof(float), diopi_device) != diopiSuccess)
        return diopiErrorOccurred;
    void* row_data;
    diopiGetTensorData(scratch, &row_data);
    float* row = (float*)row_data;
    for (int64_t i = 0; i < m; ++i) {
        memset(row, 0, n * sizeof(float));
        for (int64_t p = 0; p < k; ++p)
            for (int64_t j = 0; j < n; ++j) row[j] += a[i * k + p] * b[p * n + j];
        memcpy(o + i * n, row, n * sizeof(float));
    }
    return diopiSuccess;
}

/* out: the [count, 1] int64 positions of the non-zero elements of a 1-D input, in a tensor the
   library requires from the runtime (an output whose shape depends on the data). */
diopiError_t diopiNonzero(diopiContextHandle_t ctx, diopiTensorHandle_t* out, diopiConstTensorHandle_t input) {
    int64_t n;
    float* x = floats(input, &n);
    diopiSize_t shape;
    diopiGetTensorShape(input, &shape);
    if (!x || shape.len != 1) return diopiForceFallbackToCPU;
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) count += x[i] != 0;
    int64_t sizes[2] = {count, 1};
    diopiSize_t size = {sizes, 2};
    diopiDeviceIndex_t device;
    diopiGetTensorDeviceIndex(input, &device);
    if (diopiRequireTensor(ctx, out, &size, NULL, diopi_dtype_int64, diopi_device) != diopiSuccess)
        return diopiErrorOccurred;
    diopiDeviceIndex_t out_device;
    diopiGetTensorDeviceIndex(*out, &out_device);
    if (out_device != device) {
        snprintf(last_error, sizeof last_error, "diopiNonzero: required tensor on device %d, input on %d", out_device,
                 device);
        return diopiErrorOccurred;
    }
    void* data;
    diopiGetTensorData(*out, &data);
    int64_t* positions = (int64_t*)data;
    for (int64_t i = 0, j = 0; i < n; ++i)
        if (x[i] != 0) positions[j++] = i;
    return diopiSuccess;
}

/* Not a normal distribution: a probe of the runtime for the tests, writing what it reads into the
   first 10 elements of a float32 tensor (see test_the_runtime_functions_answer_from_the_call). */
diopiError_t diopiNormalInp(diopiContextHandle_t ctx, diopiTensorHandle_t inout, double mean, double std,
                            diopiGeneratorHandle_t generator) {
    (void)mean;
    (void)std;
    int64_t n;
    diopiDtype_t dtype;
    diopiGetTensorNumel(inout, &n);
    diopiGetTensorDtype(inout, &dtype);
    if (n < 10 || dtype != diopi_dtype_float32) return diopiForceFallbackToCPU;
    void* record = NULL;
    diopiError_t started = diopiRecordStart("tiny_probe", &record);
    float probe[10];
    diopiStreamHandle_t stream = (diopiStreamHandle_t)1;
    probe[0] = diopiGetStream(ctx, &stream) == diopiSuccess && stream == NULL; /* the default stream */
    int64_t offset, itemsize;
    size_t nbytes;
    diopiGetTensorStorageOffset(inout, &offset);
    diopiGetTensorStorageNbytes(inout, &nbytes);
    diopiGetTensorElemSize(inout, &itemsize);
    probe[1] = (float)offset;
    probe[2] = (float)nbytes;
    probe[3] = (float)itemsize;
    diopiDevice_t device;
    diopiGetTensorDevice(inout, &device);
    probe[4] = (float)device;
    diopiTensorHandle_t state = NULL;
    int64_t state_numel = -1;
    if (generator != NULL && diopiGeneratorGetState(ctx, generator, &state) == diopiSuccess) {
        diopiGetTensorNumel(state, &state_numel);
        if (diopiGeneratorSetState(generator, state) != diopiSuccess) state_numel = -2;
    }
    probe[5] = (float)state_numel;
    diopiDeviceIndex_t index = -1;
    diopiGetCurrentDeviceIndex(&index);
    probe[6] = index;
    bool sparse = true;
    diopiIsTensorSparse(inout, &sparse);
    probe[7] = sparse;
    void *data, *storage;
    diopiGetTensorData(inout, &data);
    diopiGetTensorStoragePtr(inout, &storage);
    probe[8] = (float)(((char*)data - (char*)storage) / itemsize); /* the offset again, from the pointers */
    probe[9] = started == diopiSuccess && diopiRecordEnd(&record) == diopiSuccess && record == NULL;
    memcpy(data, probe, sizeof probe);
    return diopiSuccess;
}
