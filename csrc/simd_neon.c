/*
 * simd_neon.c -- NEON kernels for arm64 (Advanced SIMD is baseline on AArch64, so no
 * runtime check is needed). Compiled to nothing elsewhere.
 *
 * One f32 dot order serves both the single-query and the batch paths: 8 lanes held as
 * two float32x4 halves, fused multiply-adds by increasing column, the ragged tail
 * zero-padded, and the reduction ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)). (Not tuned:
 * no arm64 machine was at hand; it compiles and mirrors the scalar path.)
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <string.h>

static inline float reduce8(float32x4_t lo, float32x4_t hi) {
    float32x4_t p = vpaddq_f32(lo, hi);  /* l0+l1, l2+l3, l4+l5, l6+l7 */
    p = vpaddq_f32(p, p);                /* (l0+l1)+(l2+l3), (l4+l5)+(l6+l7), ... */
    return vgetq_lane_f32(p, 0) + vgetq_lane_f32(p, 1);
}

static float dot1(const float *a, const float *b, int64_t d) {
    float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        lo = vfmaq_f32(lo, vld1q_f32(a + i), vld1q_f32(b + i));
        hi = vfmaq_f32(hi, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    if (i < d) {
        float ta[8] = {0}, tb[8] = {0};
        memcpy(ta, a + i, (size_t)(d - i) * sizeof(float));
        memcpy(tb, b + i, (size_t)(d - i) * sizeof(float));
        lo = vfmaq_f32(lo, vld1q_f32(ta), vld1q_f32(tb));
        hi = vfmaq_f32(hi, vld1q_f32(ta + 4), vld1q_f32(tb + 4));
    }
    return reduce8(lo, hi);
}

static void dot_rows(const float *matrix, const int64_t *idx, int64_t nb, int64_t d,
                     const float *q, float *out) {
    for (int64_t u = 0; u < nb; u++) out[u] = dot1(matrix + idx[u] * d, q, d);
}

static void dot_f32(const float *const *rows, int nr, const float *queries, int64_t nq,
                    int64_t d, float *out, int64_t rs, int64_t qs_) {
    for (int r = 0; r < nr; r++)
        for (int64_t j = 0; j < nq; j++) out[r * rs + j * qs_] = dot1(rows[r], queries + j * d, d);
}

static void dot_i8(const int8_t *codes, const int64_t *idx, int64_t nb, int64_t d,
                   const int8_t *q, int32_t *out) {
    for (int64_t u = 0; u < nb; u++) {
        const int8_t *a = codes + idx[u] * d;
        int32x4_t acc = vdupq_n_s32(0);
        int64_t i = 0;
        for (; i + 16 <= d; i += 16) {
            int8x16_t va = vld1q_s8(a + i), vq = vld1q_s8(q + i);
            acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(va), vget_low_s8(vq)));
            acc = vpadalq_s16(acc, vmull_high_s8(va, vq));
        }
        int32_t s = vaddvq_s32(acc);
        for (; i < d; i++) s += (int32_t)a[i] * (int32_t)q[i];
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
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vaddq_f32(a0, vld1q_f32(x + i));
        a1 = vaddq_f32(a1, vld1q_f32(x + i + 4));
        a2 = vaddq_f32(a2, vld1q_f32(x + i + 8));
        a3 = vaddq_f32(a3, vld1q_f32(x + i + 12));
    }
    double s = (double)vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++) s += x[i];
    return s;
}

/* No quant_i8: a NEON version could not be tested here, and quantising is not the hot
 * loop (once per row at index time, once per query); dispatch.c fills it from the scalar
 * table, which computes the same bytes. */
const bb_ops bb_ops_neon = {"neon", dot_rows, dot_f32, dot_i8, bm25_contrib, NULL, sum_f32};

#endif /* __aarch64__ */
