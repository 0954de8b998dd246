/* Matrix products of the reference C op library: mm, bmm, addmm, on float32/float64 matrices of
   any strides, accumulated in double (Note [Reference C library numerics]). */
#include "ref_c.h"

#include <stdlib.h>
#include <string.h>

/* c[i, j] (m x n) = alpha * sum_p a[i, p] b[p, j] + beta * bias[i, j]; `bias` may be NULL. Offsets and
   strides in elements of each view; `row` is scratch for n doubles. */
typedef struct {
    const ref_view *a, *b, *c, *bias;
    int64_t a_offset, b_offset, c_offset;
    int64_t bias_strides[2];
    double alpha, beta;
} product;

static void multiply(const product* pr, int64_t m, int64_t k, int64_t n, double* row, double* packed) {
    const ref_view *a = pr->a, *b = pr->b, *c = pr->c;
    int64_t as0 = a->strides[a->ndim - 2], as1 = a->strides[a->ndim - 1];
    int64_t bs0 = b->strides[b->ndim - 2], bs1 = b->strides[b->ndim - 1];
    int64_t cs0 = c->strides[c->ndim - 2], cs1 = c->strides[c->ndim - 1];
    /* mat2 read once into a dense row-major k x n block of doubles, whatever its strides (a transposed
       weight is the common case), so the inner loop is a contiguous multiply-add */
    for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) packed[p * n + j] = ref_load(b, pr->b_offset + p * bs0 + j * bs1);
    for (int64_t i = 0; i < m; ++i) {
        memset(row, 0, (size_t)n * sizeof(double));
        for (int64_t p = 0; p < k; ++p) {
            double x = ref_load(a, pr->a_offset + i * as0 + p * as1);
            const double* brow = packed + p * n;
            for (int64_t j = 0; j < n; ++j) row[j] += x * brow[j];
        }
        for (int64_t j = 0; j < n; ++j) {
            double value = pr->alpha * row[j];
            if (pr->bias) value += pr->beta * ref_load(pr->bias, i * pr->bias_strides[0] + j * pr->bias_strides[1]);
            ref_store(c, pr->c_offset + i * cs0 + j * cs1, value);
        }
    }
}

/* out (m x n) = beta * bias + alpha * mat1 @ mat2, or the batched product when batched. */
static diopiError_t matmul(diopiTensorHandle_t out, diopiConstTensorHandle_t bias, diopiConstTensorHandle_t mat1,
                           diopiConstTensorHandle_t mat2, double beta, double alpha, bool batched, const char* name) {
    ref_view a, b, c, bv;
    if (!ref_view_of(mat1, &a) || !ref_view_of(mat2, &b) || !ref_view_of(out, &c)) return REF_FALLBACK;
    if (!ref_is_floating(c.dtype) || !ref_is_floating(a.dtype) || !ref_is_floating(b.dtype)) return REF_FALLBACK;
    int64_t dims = batched ? 3 : 2;
    if (a.ndim != dims || b.ndim != dims || c.ndim != dims) return REF_FALLBACK;
    int64_t batch = batched ? a.sizes[0] : 1, m = a.sizes[dims - 2], k = a.sizes[dims - 1], n = b.sizes[dims - 1];
    if (b.sizes[dims - 2] != k || c.sizes[dims - 2] != m || c.sizes[dims - 1] != n || (batched && (b.sizes[0] != batch || c.sizes[0] != batch)))
        return ref_error("%s: cannot multiply [%lld, %lld] by [%lld, %lld] into [%lld, %lld]", name, (long long)m,
                         (long long)k, (long long)b.sizes[dims - 2], (long long)n, (long long)c.sizes[dims - 2],
                         (long long)c.sizes[dims - 1]);
    product pr = {&a, &b, &c, NULL, 0, 0, 0, {0, 0}, alpha, beta};
    if (bias && beta != 0) {
        int64_t shape[2] = {m, n}, strides[REF_MAX_DIMS];
        if (!ref_view_of(bias, &bv) || !ref_broadcast_strides(&bv, shape, 2, strides)) return REF_FALLBACK;
        pr.bias = &bv;
        pr.bias_strides[0] = strides[0];
        pr.bias_strides[1] = strides[1];
    }
    double* row = malloc((size_t)(n + k * n + 1) * sizeof(double));
    if (row == NULL) return ref_error("%s: out of host memory", name);
    for (int64_t s = 0; s < batch; ++s) {
        if (batched) {
            pr.a_offset = s * a.strides[0];
            pr.b_offset = s * b.strides[0];
            pr.c_offset = s * c.strides[0];
        }
        multiply(&pr, m, k, n, row, row + n);
    }
    free(row);
    return diopiSuccess;
}

diopiError_t diopiMm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                     diopiConstTensorHandle_t mat2) {
    (void)ctx;
    return matmul(out, NULL, input, mat2, 0, 1, false, "diopiMm");
}

diopiError_t diopiBmm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                      diopiConstTensorHandle_t mat2) {
    (void)ctx;
    return matmul(out, NULL, input, mat2, 0, 1, true, "diopiBmm");
}

diopiError_t diopiAddmm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                        diopiConstTensorHandle_t mat1, diopiConstTensorHandle_t mat2, const diopiScalar_t* beta,
                        const diopiScalar_t* alpha) {
    (void)ctx;
    return matmul(out, input, mat1, mat2, ref_scalar(beta, 1), ref_scalar(alpha, 1), false, "diopiAddmm");
}
