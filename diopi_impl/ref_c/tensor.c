/* Views, element access, walks and errors for the reference C op library (ref_c.h). */
#include "ref_c.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[512];

const char* diopiGetLastErrorString(void) { return last_error; }
const char* diopiGetVendorName(void) { return "dipu reference C"; }
const char* diopiGetImplVersion(void) { return "dipu ref_c 1.0"; }

diopiError_t ref_error(const char* format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(last_error, sizeof last_error, format, args);
    va_end(args);
    return diopiErrorOccurred;
}

static int64_t itemsize_of(diopiDtype_t dtype) {
    switch (dtype) {
        case diopi_dtype_float64:
        case diopi_dtype_int64: return 8;
        case diopi_dtype_float32:
        case diopi_dtype_int32: return 4;
        case diopi_dtype_int16: return 2;
        case diopi_dtype_int8:
        case diopi_dtype_uint8:
        case diopi_dtype_bool: return 1;
        default: return 0; /* not read by this library */
    }
}

bool ref_is_floating(diopiDtype_t dtype) { return dtype == diopi_dtype_float32 || dtype == diopi_dtype_float64; }

bool ref_view_of(diopiConstTensorHandle_t t, ref_view* v) {
    if (t == NULL) return false;
    diopiSize_t shape, stride;
    const void* data;
    if (diopiGetTensorShape(t, &shape) != diopiSuccess || diopiGetTensorStride(t, &stride) != diopiSuccess ||
        diopiGetTensorDtype(t, &v->dtype) != diopiSuccess || diopiGetTensorDataConst(t, &data) != diopiSuccess)
        return false;
    v->itemsize = itemsize_of(v->dtype);
    if (v->itemsize == 0 || shape.len > REF_MAX_DIMS) return false;
    v->data = (char*)data;
    v->ndim = shape.len;
    v->numel = 1;
    for (int64_t d = 0; d < shape.len; ++d) {
        v->sizes[d] = shape.data[d];
        v->strides[d] = stride.data[d];
        v->numel *= shape.data[d];
    }
    return true;
}

bool ref_is_contiguous(const ref_view* v) {
    int64_t expected = 1;
    for (int64_t d = v->ndim - 1; d >= 0; --d) {
        if (v->sizes[d] != 1 && v->strides[d] != expected) return false;
        expected *= v->sizes[d];
    }
    return true;
}

double ref_load(const ref_view* v, int64_t offset) {
    const char* p = v->data + offset * v->itemsize;
    switch (v->dtype) {
        case diopi_dtype_float32: return *(const float*)p;
        case diopi_dtype_float64: return *(const double*)p;
        case diopi_dtype_int64: return (double)*(const int64_t*)p;
        case diopi_dtype_int32: return *(const int32_t*)p;
        case diopi_dtype_int16: return *(const int16_t*)p;
        case diopi_dtype_int8: return *(const int8_t*)p;
        case diopi_dtype_uint8: return *(const uint8_t*)p;
        case diopi_dtype_bool: return *(const bool*)p ? 1.0 : 0.0;
        default: return 0.0;
    }
}

void ref_store(const ref_view* v, int64_t offset, double value) {
    char* p = v->data + offset * v->itemsize;
    switch (v->dtype) {
        case diopi_dtype_float32: *(float*)p = (float)value; break;
        case diopi_dtype_float64: *(double*)p = value; break;
        case diopi_dtype_int64: *(int64_t*)p = (int64_t)value; break;
        case diopi_dtype_int32: *(int32_t*)p = (int32_t)value; break;
        case diopi_dtype_int16: *(int16_t*)p = (int16_t)value; break;
        case diopi_dtype_int8: *(int8_t*)p = (int8_t)value; break;
        case diopi_dtype_uint8: *(uint8_t*)p = (uint8_t)value; break;
        case diopi_dtype_bool: *(bool*)p = value != 0; break;
        default: break;
    }
}

double ref_scalar(const diopiScalar_t* s, double if_null) {
    if (s == NULL) return if_null;
    return ref_is_floating(s->stype) || s->stype == diopi_dtype_float16 || s->stype == diopi_dtype_bfloat16
               ? s->fval
               : (double)s->ival;
}

bool ref_broadcast_strides(const ref_view* v, const int64_t* shape, int64_t ndim, int64_t* strides) {
    if (v->ndim > ndim) return false;
    int64_t lead = ndim - v->ndim;
    for (int64_t d = 0; d < ndim; ++d) {
        if (d < lead) {
            strides[d] = 0;
            continue;
        }
        int64_t size = v->sizes[d - lead];
        if (size == shape[d])
            strides[d] = v->strides[d - lead];
        else if (size == 1)
            strides[d] = 0;
        else
            return false;
    }
    return true;
}

void ref_walk(const int64_t* shape, int64_t ndim, int operands, int64_t strides[][REF_MAX_DIMS], ref_visit visit,
              void* context) {
    int64_t index[REF_MAX_DIMS] = {0}, offsets[8] = {0};
    for (int64_t d = 0; d < ndim; ++d)
        if (shape[d] == 0) return;
    for (;;) {
        visit(offsets, context);
        int64_t d = ndim - 1;
        for (; d >= 0; --d) { /* odometer: the last dim moves fastest */
            ++index[d];
            for (int k = 0; k < operands; ++k) offsets[k] += strides[k][d];
            if (index[d] < shape[d]) break;
            for (int k = 0; k < operands; ++k) offsets[k] -= strides[k][d] * shape[d];
            index[d] = 0;
        }
        if (d < 0) return;
    }
}

typedef struct {
    const ref_view* views;
    int count; /* inputs; views[count] is the output */
    ref_elementwise fn;
    const void* params;
} map_state;

static void map_one(const int64_t* offsets, void* context) {
    map_state* s = (map_state*)context;
    double inputs[8];
    for (int k = 0; k < s->count; ++k) inputs[k] = ref_load(&s->views[k], offsets[k]);
    ref_store(&s->views[s->count], offsets[s->count], s->fn(inputs, s->params));
}

diopiError_t ref_map_dense(diopiTensorHandle_t out, int count, const diopiConstTensorHandle_t* inputs,
                           ref_elementwise fn, ref_dense_loop dense_loop, const void* params) {
    ref_view views[8];
    int64_t strides[8][REF_MAX_DIMS];
    if (count > 7 || !ref_view_of(out, &views[count])) return REF_FALLBACK;
    const ref_view* o = &views[count];
    for (int k = 0; k < count; ++k)
        if (!ref_view_of(inputs[k], &views[k]) || !ref_broadcast_strides(&views[k], o->sizes, o->ndim, strides[k]))
            return REF_FALLBACK;
    memcpy(strides[count], o->strides, sizeof strides[count]);
    /* Fast path: every operand contiguous, of out's shape, float32 (Note [Reference C library fast paths]). */
    bool dense = ref_dense_f32(o, o->numel);
    for (int k = 0; k < count && dense; ++k) dense = ref_dense_f32(&views[k], o->numel) && views[k].ndim == o->ndim;
    if (dense) {
        float* y = (float*)o->data;
        const float* x[8];
        for (int k = 0; k < count; ++k) x[k] = (const float*)views[k].data;
        if (dense_loop != NULL) {
            dense_loop(y, x, o->numel, params);
            return diopiSuccess;
        }
        double in[8];
        for (int64_t i = 0; i < o->numel; ++i) {
            for (int k = 0; k < count; ++k) in[k] = x[k][i];
            y[i] = (float)fn(in, params);
        }
        return diopiSuccess;
    }
    map_state state = {views, count, fn, params};
    ref_walk(o->sizes, o->ndim, count + 1, strides, map_one, &state);
    return diopiSuccess;
}

diopiError_t ref_map(diopiTensorHandle_t out, int count, const diopiConstTensorHandle_t* inputs, ref_elementwise fn,
                     const void* params) {
    return ref_map_dense(out, count, inputs, fn, NULL, params);
}
