/* Matrix products of the reference C op library: mm, bmm, addmm, on float32/float64 matrices of
   any strides: float32 ones accumulated in float, as ATen's GEMM does, by a blocked loop the compiler
   vectorizes (Note [Reference C library fast paths]); float64 ones (and mixed dtypes) in double
   (Note [Reference C library numerics]). */
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

/* Float32 blocking: a block of COLUMN_BLOCK columns of ROW_BLOCK_K rows of mat2 (128 KiB) stays in the
   L2 cache while every row of mat1 passes over it. */
enum { COLUMN_BLOCK = 256, ROW_BLOCK_K = 128 };

/* The register tile of accumulate_f32: 4 rows by 8 columns of the result, 8 vector registers with SSE. */
enum { TILE_ROWS = 4, TILE_COLUMNS = 8 };

#if defined(__GNUC__) /* gcc and clang: vector types the compiler lowers for any target (SSE2 on x86-64) */
typedef float vector4 __attribute__((vector_size(16)));

static inline vector4 load4(const float* p) {
    vector4 v;
    memcpy(&v, p, sizeof v); /* unaligned */
    return v;
}
#endif

/* tile (TILE_ROWS x TILE_COLUMNS, row stride ldc) += a[rows, p0:pend] @ b[p0:pend, columns], a's rows at
   stride as0 and columns at as1, b's rows at stride ldb: the accumulators live in registers over the
   block of k. */
static inline void tile_f32(float* tile, int64_t ldc, const float* a, int64_t as0, int64_t as1, const float* b,
                            int64_t ldb, int64_t p0, int64_t pend) {
#if defined(__GNUC__)
    vector4 c[TILE_ROWS][2];
    for (int r = 0; r < TILE_ROWS; ++r) {
        c[r][0] = load4(tile + r * ldc);
        c[r][1] = load4(tile + r * ldc + 4);
    }
    for (int64_t p = p0; p < pend; ++p) {
        vector4 b0 = load4(b + p * ldb), b1 = load4(b + p * ldb + 4);
        for (int r = 0; r < TILE_ROWS; ++r) {
            float x = a[r * as0 + p * as1];
            vector4 xv = {x, x, x, x};
            c[r][0] += xv * b0;
            c[r][1] += xv * b1;
        }
    }
    for (int r = 0; r < TILE_ROWS; ++r) {
        memcpy(tile + r * ldc, &c[r][0], sizeof c[r][0]);
        memcpy(tile + r * ldc + 4, &c[r][1], sizeof c[r][1]);
    }
#else
    for (int r = 0; r < TILE_ROWS; ++r)
        for (int col = 0; col < TILE_COLUMNS; ++col) {
            float sum = tile[r * ldc + col];
            for (int64_t p = p0; p < pend; ++p) sum += a[r * as0 + p * as1] * b[p * ldb + col];
            tile[r * ldc + col] = sum;
        }
#endif
}

/* acc (m x n, row-major, zeroed) += a (m x k, strides as0/as1) @ b (k x n, row stride ldb, unit column
   stride). Each TILE_ROWS x TILE_COLUMNS tile of acc is summed in registers over a block of k (tile_f32),
   so each element of b loaded feeds TILE_ROWS multiply-adds; the sum over k is still in order, one
   rounding per multiply and per add. */
static void accumulate_f32(float* restrict acc, const float* restrict a, int64_t as0, int64_t as1,
                           const float* restrict b, int64_t ldb, int64_t m, int64_t k, int64_t n) {
    for (int64_t j0 = 0; j0 < n; j0 += COLUMN_BLOCK) {
        int64_t jend = n - j0 < COLUMN_BLOCK ? n : j0 + COLUMN_BLOCK;
        for (int64_t p0 = 0; p0 < k; p0 += ROW_BLOCK_K) {
            int64_t pend = k - p0 < ROW_BLOCK_K ? k : p0 + ROW_BLOCK_K;
            int64_t i = 0;
            for (; i + TILE_ROWS <= m; i += TILE_ROWS) {
                int64_t j = j0;
                for (; j + TILE_COLUMNS <= jend; j += TILE_COLUMNS)
                    tile_f32(acc + i * n + j, n, a + i * as0, as0, as1, b + j, ldb, p0, pend);
                for (; j < jend; ++j) /* the last columns, fewer than a tile */
                    for (int r = 0; r < TILE_ROWS; ++r) {
                        float sum = acc[(i + r) * n + j];
                        for (int64_t p = p0; p < pend; ++p) sum += a[(i + r) * as0 + p * as1] * b[p * ldb + j];
                        acc[(i + r) * n + j] = sum;
                    }
            }
            for (; i < m; ++i) { /* the last rows, fewer than a tile */
                float* out = acc + i * n;
                for (int64_t p = p0; p < pend; ++p) {
                    const float* row = b + p * ldb;
                    float x = a[i * as0 + p * as1];
                    for (int64_t j = j0; j < jend; ++j) out[j] += x * row[j];
                }
            }
        }
    }
}

/* The float32 product of `multiply`: scratch holds m * n + k * n floats. */
static void multiply_f32(const product* pr, int64_t m, int64_t k, int64_t n, float* scratch) {
    const ref_view *a = pr->a, *b = pr->b, *c = pr->c;
    int64_t as0 = a->strides[a->ndim - 2], as1 = a->strides[a->ndim - 1];
    int64_t bs0 = b->strides[b->ndim - 2], bs1 = b->strides[b->ndim - 1];
    int64_t cs0 = c->strides[c->ndim - 2], cs1 = c->strides[c->ndim - 1];
    const float* bdata = (const float*)b->data + pr->b_offset;
    float *acc = scratch, *packed = scratch + m * n;
    int64_t ldb = bs0;
    if (bs1 != 1 && n > 1) { /* a transposed weight: copied once into rows */
        for (int64_t p = 0; p < k; ++p)
            for (int64_t j = 0; j < n; ++j) packed[p * n + j] = bdata[p * bs0 + j * bs1];
        bdata = packed;
        ldb = n;
    }
    memset(acc, 0, (size_t)(m * n) * sizeof(float));
    accumulate_f32(acc, (const float*)a->data + pr->a_offset, as0, as1, bdata, ldb, m, k, n);
    float* out = (float*)c->data + pr->c_offset;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float value = acc[i * n + j];
            if (pr->alpha != 1) value = (float)(pr->alpha * value);
            if (pr->bias)
                value = (float)((double)value +
                                pr->beta * ref_load(pr->bias, i * pr->bias_strides[0] + j * pr->bias_strides[1]));
            out[i * cs0 + j * cs1] = value;
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
    if (b.sizes[dims - 2] != k || c.sizes[dims - 2] != m || c.sizes[dims - 1] != n ||
        (batched && (b.sizes[0] != batch || c.sizes[0] != batch)))
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
    bool float32 = a.dtype == diopi_dtype_float32 && b.dtype == diopi_dtype_float32 && c.dtype == diopi_dtype_float32;
    size_t scratch = float32 ? (size_t)(m * n + k * n + 1) * sizeof(float) : (size_t)(n + k * n + 1) * sizeof(double);
    double* row = malloc(scratch);
    if (row == NULL) return ref_error("%s: out of host memory", name);
    for (int64_t s = 0; s < batch; ++s) {
        if (batched) {
            pr.a_offset = s * a.strides[0];
            pr.b_offset = s * b.strides[0];
            pr.c_offset = s * c.strides[0];
        }
        if (float32)
            multiply_f32(&pr, m, k, n, (float*)row);
        else
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
