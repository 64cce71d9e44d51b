/*
 * simd_scalar.c -- the portable C twin of every SIMD kernel. Always compiled; selected
 * with BB_SIMD_SCALAR, or on CPUs without AVX2/FMA or NEON.
 *
 * The f32 dot keeps 8 partial sums (lane j takes elements j, j+8, j+16, ...) reduced as
 * ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)), like the SIMD paths, but multiplies and adds
 * separately where they fuse; so scalar and SIMD agree to rounding, not bit for bit.
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

static float dot1(const float *a, const float *b, int64_t d) {
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (int j = 0; j < 8; j++) l[j] += a[i + j] * b[i + j];
    for (int j = 0; i + j < d; j++) l[j] += a[i + j] * b[i + j];
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

static void dot_f32(const float *const *rows, int nr, const float *const *qs, int nq,
                    int64_t d, float *out, int64_t rs, int64_t qs_) {
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nq; j++) out[r * rs + j * qs_] = dot1(rows[r], qs[j], d);
}

static void dot_i8(const int8_t *const *rows, int nr, const int8_t *q, int64_t d,
                   int32_t *out) {
    for (int r = 0; r < nr; r++) {
        const int8_t *a = rows[r];
        int32_t s = 0;
        for (int64_t i = 0; i < d; i++) s += (int32_t)a[i] * (int32_t)q[i];
        out[r] = s;
    }
}

static int bm25_contrib(const int32_t *ids, const float *tf, int64_t cnt,
                        const float *doc_len, int64_t n_docs, float c, float A, float B,
                        float *contrib) {
    for (int64_t p = 0; p < cnt; p++) {
        int32_t id = ids[p];
        if (id < 0 || (int64_t)id >= n_docs) return BB_ERR_RANGE;
        float t = tf[p];
        contrib[p] = (c * t) / (t + (A + B * doc_len[id]));
    }
    return BB_OK;
}

static double sum_f32(const float *x, int64_t n) {
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) l[j] += x[i + j];
    double s = 0;
    for (; i < n; i++) s += x[i];
    for (int j = 0; j < 8; j++) s += l[j];
    return s;
}

const bb_ops bb_ops_scalar = {"scalar", dot_f32, dot_i8, bm25_contrib, sum_f32};
