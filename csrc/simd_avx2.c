/*
 * simd_avx2.c -- AVX2 + FMA kernels for x86-64, compiled per function with
 * __attribute__((target("avx2,fma"))) so the shipped build needs no -march flag; they
 * are only called after __builtin_cpu_supports said yes (dispatch.c).
 *
 * Every (row, query) dot uses one 8-lane accumulator per pair, fused multiply-adds in
 * order of increasing column, a masked load for a ragged tail, and the reduction
 * ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)). The result therefore does not depend on which
 * rows or queries share a micro-kernel call: a duplicated row gets the same bits.
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>

#define TARGET __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* [sum(a), sum(b), sum(c), sum(d)], each as ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)). */
INLINE __m128 reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

INLINE __m256i tail_mask(int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The register-blocked micro-kernel: NR rows x NQ queries, NR * NQ accumulators.
 * NR and NQ are compile-time constants at every call site, so the loops unroll and the
 * accumulators live in registers (4 x 3 = 12 of the 16 ymm registers). */
INLINE void mk(const float *const *rows, const float *const *qs, int64_t d, float *out,
               int64_t rs, int64_t qs_, const int NR, const int NQ) {
    __m256 acc[4][3];
    const float *rp[4], *qp[3];
    for (int r = 0; r < 4; r++) {
        rp[r] = r < NR ? rows[r] : rows[0];
        for (int j = 0; j < 3; j++) acc[r][j] = _mm256_setzero_ps();
    }
    for (int j = 0; j < 3; j++) qp[j] = j < NQ ? qs[j] : qs[0];
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m256 qv[3];
        for (int j = 0; j < NQ; j++) qv[j] = _mm256_loadu_ps(qp[j] + i);
        for (int r = 0; r < NR; r++) {
            __m256 rv = _mm256_loadu_ps(rp[r] + i);
            for (int j = 0; j < NQ; j++) acc[r][j] = _mm256_fmadd_ps(rv, qv[j], acc[r][j]);
        }
    }
    if (i < d) {
        __m256i m = tail_mask(d - i);
        __m256 qv[3];
        for (int j = 0; j < NQ; j++) qv[j] = _mm256_maskload_ps(qp[j] + i, m);
        for (int r = 0; r < NR; r++) {
            __m256 rv = _mm256_maskload_ps(rp[r] + i, m);
            for (int j = 0; j < NQ; j++) acc[r][j] = _mm256_fmadd_ps(rv, qv[j], acc[r][j]);
        }
    }
    for (int j = 0; j < NQ; j++) {
        float s[4];
        _mm_storeu_ps(s, reduce4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]));
        for (int r = 0; r < NR; r++) out[r * rs + j * qs_] = s[r];
    }
}

TARGET static void dot_f32(const float *const *rows, int nr, const float *const *qs, int nq,
                           int64_t d, float *out, int64_t rs, int64_t qs_) {
#define MK_CASE(R, Q) \
    case (R) * 4 + (Q): mk(rows, qs, d, out, rs, qs_, R, Q); return;
    switch (nr * 4 + nq) {
        MK_CASE(4, 3) MK_CASE(4, 2) MK_CASE(4, 1)
        MK_CASE(3, 3) MK_CASE(3, 2) MK_CASE(3, 1)
        MK_CASE(2, 3) MK_CASE(2, 2) MK_CASE(2, 1)
        MK_CASE(1, 3) MK_CASE(1, 2) MK_CASE(1, 1)
    default: return;
    }
#undef MK_CASE
}

/* int8 dot products, exact in int32: |a| * sign(q, a) keeps maddubs (u8 x s8 -> s16
 * pairs) exact: |pair| <= 2 * 128 * 127 < 32767. */
INLINE void mk_i8(const int8_t *const *rows, const int8_t *q, int64_t d, int32_t *out,
                  const int NR) {
    __m256i acc[4];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < 4; r++) acc[r] = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 32 <= d; i += 32) {
        __m256i qv = _mm256_loadu_si256((const __m256i *)(q + i));
        for (int r = 0; r < NR; r++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(rows[r] + i));
            __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(a), _mm256_sign_epi8(qv, a));
            acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(p, ones));
        }
    }
    for (int r = 0; r < NR; r++) {
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc[r]),
                                  _mm256_extracti128_si256(acc[r], 1));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
        int32_t t = _mm_cvtsi128_si32(s);
        for (int64_t j = i; j < d; j++) t += (int32_t)rows[r][j] * (int32_t)q[j];
        out[r] = t;
    }
}

TARGET static void dot_i8(const int8_t *const *rows, int nr, const int8_t *q, int64_t d,
                          int32_t *out) {
    switch (nr) {
    case 4: mk_i8(rows, q, d, out, 4); return;
    case 3: mk_i8(rows, q, d, out, 3); return;
    case 2: mk_i8(rows, q, d, out, 2); return;
    case 1: mk_i8(rows, q, d, out, 1); return;
    default: return;
    }
}

/* Same float32 operations, in the same order, as the scalar twin and numpy: no FMA
 * here, so BM25 scores are bit-identical across all three. */
TARGET static int bm25_contrib(const int32_t *ids, const float *tf, int64_t cnt,
                               const float *doc_len, int64_t n_docs, float c, float A,
                               float B, float *contrib) {
    const __m256 vc = _mm256_set1_ps(c), vA = _mm256_set1_ps(A), vB = _mm256_set1_ps(B);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i last = _mm256_set1_epi32(n_docs > INT32_MAX ? INT32_MAX : (int32_t)(n_docs - 1));
    int64_t p = 0;
    for (; p + 8 <= cnt; p += 8) {
        __m256i id = _mm256_loadu_si256((const __m256i *)(ids + p));
        __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi32(zero, id), _mm256_cmpgt_epi32(id, last));
        if (!_mm256_testz_si256(bad, bad)) return BB_ERR_RANGE;
        __m256 len = _mm256_i32gather_ps(doc_len, id, 4);
        __m256 t = _mm256_loadu_ps(tf + p);
        __m256 den = _mm256_add_ps(t, _mm256_add_ps(vA, _mm256_mul_ps(vB, len)));
        _mm256_storeu_ps(contrib + p, _mm256_div_ps(_mm256_mul_ps(vc, t), den));
    }
    for (; p < cnt; p++) {
        int32_t id = ids[p];
        if (id < 0 || (int64_t)id >= n_docs) return BB_ERR_RANGE;
        float t = tf[p];
        contrib[p] = (c * t) / (t + (A + B * doc_len[id]));
    }
    return BB_OK;
}

TARGET static double sum_f32(const float *x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
    }
    float l[8];
    _mm256_storeu_ps(l, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    double s = 0;
    for (int j = 0; j < 8; j++) s += l[j];
    for (; i < n; i++) s += x[i];
    return s;
}

const bb_ops bb_ops_avx2 = {"avx2-fma", dot_f32, dot_i8, bm25_contrib, sum_f32};

#endif /* x86-64 */
