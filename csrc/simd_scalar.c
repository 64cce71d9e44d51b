/*
 * simd_scalar.c -- the portable C twin of every SIMD kernel. Always compiled; selected
 * with BB_SIMD_SCALAR, or on CPUs without AVX2/FMA or NEON.
 *
 * The f32 dots keep the partial sums of the AVX2 path (8 lanes for a batch, 16 for one
 * query) and reduce them the same way, but multiply and add separately where AVX2
 * fuses; so scalar and SIMD agree to rounding, not bit for bit.
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#include <math.h>

static float dot1(const float *a, const float *b, int64_t d) {
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (int j = 0; j < 8; j++) l[j] += a[i + j] * b[i + j];
    for (int j = 0; i + j < d; j++) l[j] += a[i + j] * b[i + j];
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* The single-query order: 16 partial sums (two 8-lane accumulators over alternating
 * 8-float chunks), folded lane-wise, then reduced like dot1. */
static float dot2(const float *a, const float *b, int64_t d) {
    float l[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= d; i += 16)
        for (int j = 0; j < 16; j++) l[j] += a[i + j] * b[i + j];
    for (int j = 0; i + j < d; j++) l[j] += a[i + j] * b[i + j];
    for (int j = 0; j < 8; j++) l[j] += l[j + 8];
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

static void dot_rows(const float *matrix, const int64_t *idx, int64_t nb, int64_t d,
                     const float *q, float *out) {
    for (int64_t u = 0; u < nb; u++) out[u] = dot2(matrix + idx[u] * d, q, d);
}

static void dot_f32(const float *const *rows, int nr, const float *queries, int64_t nq,
                    int64_t d, float *out, int64_t rs, int64_t qs_) {
    for (int r = 0; r < nr; r++)
        for (int64_t j = 0; j < nq; j++) out[r * rs + j * qs_] = dot1(rows[r], queries + j * d, d);
}

/* The reference formula for bb_quantize_int8 (float32 arithmetic, rint = half-even). */
static void quant_i8(const float *x, int64_t d, int8_t *codes, float *scale) {
    float amax = 0.0f;
    for (int64_t j = 0; j < d; j++) {
        float a = fabsf(x[j]);
        if (a > amax) amax = a;
    }
    float lift = amax < BB_QUANT_TINY ? BB_QUANT_LIFT : 1.0f;
    float inv = amax > 0.0f ? 127.0f / (amax * lift) : 0.0f;
    for (int64_t j = 0; j < d; j++) {
        float c = rintf((x[j] * lift) * inv);
        codes[j] = (int8_t)(c > 127.0f ? 127 : (c < -127.0f ? -127 : (int)c));
    }
    *scale = amax / 127.0f;
}

static void dot_i8(const int8_t *codes, const int64_t *idx, int64_t nb, int64_t d,
                   const int8_t *q, int32_t *out) {
    for (int64_t u = 0; u < nb; u++) {
        const int8_t *a = codes + idx[u] * d;
        int32_t s = 0;
        for (int64_t i = 0; i < d; i++) s += (int32_t)a[i] * (int32_t)q[i];
        out[u] = s;
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

static double sum_f32(const float *x, int64_t n, int streams) {
    (void)streams; /* one sequential stream */
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) l[j] += x[i + j];
    double s = 0;
    for (; i < n; i++) s += x[i];
    for (int j = 0; j < 8; j++) s += l[j];
    return s;
}

const bb_ops bb_ops_scalar = {"scalar", dot_rows, dot_f32, dot_i8, bm25_contrib, quant_i8, sum_f32};
