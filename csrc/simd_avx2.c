/*
 * simd_avx2.c -- AVX2 + FMA kernels for x86-64, compiled per function with
 * __attribute__((target("avx2,fma"))) so the shipped build needs no -march flag; they
 * are only called after __builtin_cpu_supports said yes (dispatch.c).
 *
 * Two summation orders, each fixed, so a duplicated row always gets the same bits:
 *   dot_rows (one query, memory bound): two 8-lane accumulators per row, even 8-float
 *     chunks into the first and odd chunks into the second; four rows stepped together,
 *     each in its own accumulators and order, since issue #24 (the rows come from lanes
 *     far apart, cosine.c; measured only on the Intel Xeon host, README "Search
 *     kernels": 100k x 384 on two threads 4.41 ms against 5.08 rows one after the other,
 *     one thread unchanged). Each row is also prefetched 3 KB ahead (PREFETCH_AHEAD), and
 *     a thread reads two lanes, not four (cosine.c): 1M x 384 on one thread 86.7 ms
 *     against 98.9 for the build without, numpy 108.5, called in turn in one race (Intel
 *     Xeon host). Two rows side by side, one from each lane, with the same prefetch were no
 *     faster (80.3 ms). What follows was measured with rows one after the other and
 *     the four interleaved rows adjacent, not from four lanes:
 *     Reading each row sequentially with two FMA chains measured 1.00-1.05x the
 *     streaming-read time at 100k x 384; one chain was 1.15-1.2x (FMA latency x 48 ~
 *     the time to fetch a row), and interleaving 4 rows (4 streams) 1.3x.
 *     Re-measured on Zen 1 (EPYC, family 23 model 1; README "Search kernels", issue
 *     #24): 1.13x the streaming read, 0.78x numpy's matmul + argpartition (CPU time, one
 *     thread, 100k x 384). Four accumulators per row (chunk c into c mod 4) were 1.03x this
 *     order; two rows side by side sharing each query load 1.38-1.44x (with two or
 *     four accumulators alike: the two read streams, not the arithmetic); skipping
 *     the row index when there is no mask 0.98-1.03x. None of them was kept.
 *   dot_f32 (a batch, compute bound): one 8-lane accumulator per (row, query), 4 rows x
 *     3 queries in 12 registers: 75 GFLOP/s here; the two-chain order in this kernel
 *     cost 9% (spills) or 30% (2 x 3 x 2 blocking).
 * Both use fused multiply-adds by increasing column, a masked load for a ragged tail,
 * and the reduction ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)).
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>
#include <math.h>

#define TARGET __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* A software prefetch into L2, 3 KB ahead in a read stream (one 64-byte line per call;
 * prefetch never faults, so running past the end of an array is harmless). Reading
 * 1M x 384 f32 once on one thread (Intel Xeon host, issue #24): 4 streams without it
 * 91-100 ms, 4 streams with it 2 KB ahead 85-86, 2 streams with it 3 KB ahead 74-76,
 * 1 stream 80-81; 2 KB (82), 4.5 KB (77) and 6 KB (83) ahead were slower than 3 KB. */
#define PREFETCH_AHEAD(p) _mm_prefetch((const char *)(p) + 3072, _MM_HINT_T1)

/* [sum(a), sum(b), sum(c), sum(d)], each as ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)). */
INLINE __m128 reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

INLINE __m256i tail_mask(int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The ragged end of a row from column i (d - i < 16): what row_dot adds after its loop. */
INLINE void row_tail(const float *row, const float *q, int64_t d, int64_t i, __m256 *a,
                     __m256 *b) {
    if (i + 8 <= d) {
        *a = _mm256_fmadd_ps(_mm256_loadu_ps(row + i), _mm256_loadu_ps(q + i), *a);
        i += 8;
        if (i < d) {
            __m256i m = tail_mask(d - i);
            *b = _mm256_fmadd_ps(_mm256_maskload_ps(row + i, m), _mm256_maskload_ps(q + i, m), *b);
        }
    } else if (i < d) {
        __m256i m = tail_mask(d - i);
        *a = _mm256_fmadd_ps(_mm256_maskload_ps(row + i, m), _mm256_maskload_ps(q + i, m), *a);
    }
}

/* One row's two accumulators summed lane-wise: even chunks in a, odd chunks in b. */
INLINE __m256 row_dot(const float *row, const float *q, int64_t d) {
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= d; i += 16) {
        a = _mm256_fmadd_ps(_mm256_loadu_ps(row + i), _mm256_loadu_ps(q + i), a);
        b = _mm256_fmadd_ps(_mm256_loadu_ps(row + i + 8), _mm256_loadu_ps(q + i + 8), b);
    }
    row_tail(row, q, d, i, &a, &b);
    return _mm256_add_ps(a, b);
}

/* Four rows side by side, each with row_dot's two accumulators and order (so the same
 * bits): the four rows come from four lanes (cosine.c), and stepping them together keeps
 * four read streams in flight where rows one after the other kept one or two. */
TARGET static void dot_rows(const float *matrix, const int64_t *idx, int64_t nb, int64_t d,
                            const float *q, float *out) {
    int64_t u = 0;
    for (; u + 4 <= nb; u += 4) {
        const float *r0 = matrix + idx[u] * d, *r1 = matrix + idx[u + 1] * d;
        const float *r2 = matrix + idx[u + 2] * d, *r3 = matrix + idx[u + 3] * d;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        int64_t i = 0;
        for (; i + 16 <= d; i += 16) {
            PREFETCH_AHEAD(r0 + i);
            PREFETCH_AHEAD(r1 + i);
            PREFETCH_AHEAD(r2 + i);
            PREFETCH_AHEAD(r3 + i);
            __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r0 + i), q0, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r1 + i), q0, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(r2 + i), q0, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(r3 + i), q0, a3);
            b0 = _mm256_fmadd_ps(_mm256_loadu_ps(r0 + i + 8), q1, b0);
            b1 = _mm256_fmadd_ps(_mm256_loadu_ps(r1 + i + 8), q1, b1);
            b2 = _mm256_fmadd_ps(_mm256_loadu_ps(r2 + i + 8), q1, b2);
            b3 = _mm256_fmadd_ps(_mm256_loadu_ps(r3 + i + 8), q1, b3);
        }
        row_tail(r0, q, d, i, &a0, &b0);
        row_tail(r1, q, d, i, &a1, &b1);
        row_tail(r2, q, d, i, &a2, &b2);
        row_tail(r3, q, d, i, &a3, &b3);
        _mm_storeu_ps(out + u, reduce4(_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1),
                                       _mm256_add_ps(a2, b2), _mm256_add_ps(a3, b3)));
    }
    for (; u < nb; u++) {
        __m256 z = _mm256_setzero_ps();
        out[u] = _mm_cvtss_f32(reduce4(row_dot(matrix + idx[u] * d, q, d), z, z, z));
    }
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

TARGET static void dot_f32(const float *const *rows, int nr, const float *queries, int64_t nq,
                           int64_t d, float *out, int64_t rs, int64_t qs_) {
    /* Rows stay in L1 while the queries stream past them in groups of 3. */
    for (int64_t j = 0; j < nq; j += 3) {
        int nj = nq - j < 3 ? (int)(nq - j) : 3;
        const float *qs[3];
        for (int t = 0; t < 3; t++) qs[t] = queries + (j + (t < nj ? t : 0)) * d;
        float *o = out + j * qs_;
#define MK_CASE(R, Q) \
    case (R) * 4 + (Q): mk(rows, qs, d, o, rs, qs_, R, Q); break;
        switch (nr * 4 + nj) {
            MK_CASE(4, 3) MK_CASE(4, 2) MK_CASE(4, 1)
            MK_CASE(3, 3) MK_CASE(3, 2) MK_CASE(3, 1)
            MK_CASE(2, 3) MK_CASE(2, 2) MK_CASE(2, 1)
            MK_CASE(1, 3) MK_CASE(1, 2) MK_CASE(1, 1)
        default: return;
        }
#undef MK_CASE
    }
}

/* rint((x * lift) * inv) for 8 floats, in the default rounding mode (half to even), as
 * rintf and np.rint. */
INLINE __m256i round8(const float *x, __m256 vlift, __m256 vinv) {
    return _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x), vlift), vinv));
}

/* bb_quantize_int8's formula for one row (kernel.h), the same bytes as the scalar twin. */
TARGET static void quant_i8(const float *x, int64_t d, int8_t *codes, float *scale) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + j), absmask));
    float l[8], amax = 0.0f;
    _mm256_storeu_ps(l, vmax);
    for (int t = 0; t < 8; t++) amax = l[t] > amax ? l[t] : amax;
    for (; j < d; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    float lift = amax < BB_QUANT_TINY ? BB_QUANT_LIFT : 1.0f;
    float inv = amax > 0.0f ? 127.0f / (amax * lift) : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv), vlift = _mm256_set1_ps(lift);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i lo = _mm256_set1_epi8(-127);
    j = 0;
    for (; j + 32 <= d; j += 32) {
        __m256i i0 = round8(x + j, vlift, vinv);
        __m256i i1 = round8(x + j + 8, vlift, vinv);
        __m256i i2 = round8(x + j + 16, vlift, vinv);
        __m256i i3 = round8(x + j + 24, vlift, vinv);
        __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        b = _mm256_max_epi8(_mm256_permutevar8x32_epi32(b, perm), lo);
        _mm256_storeu_si256((__m256i *)(codes + j), b);
    }
    for (; j < d; j++) {
        float c = rintf((x[j] * lift) * inv);
        codes[j] = (int8_t)(c > 127.0f ? 127 : (c < -127.0f ? -127 : (int)c));
    }
    *scale = amax / 127.0f;
}

/* int8 dot products, exact in int32. maddubs multiplies u8 by s8 and adds pairs into
 * s16; feeding it |q| (once per 32 bytes, shared by four rows) and sign(row, q) gives
 * |q| * row * sign(q) = q * row, with |pair| <= 2 * 127 * 127 < 32767: exact for codes
 * in [-127, 127]. Four rows go side by side: for a batch (rows reused from L2) this
 * measured ~25% faster than rows one after the other. Streaming 1M rows for one query,
 * the hardware prefetcher did not keep up with four short interleaved streams (9 GB/s
 * against 19 GB/s for f32); a software prefetch 2 KB ahead made that scan ~30% faster.
 * An AVX-512 VNNI version (vpdpbusd on (code xor 0x80) x query, minus 128 sum(query):
 * the same integers) was 11% faster at 1M rows before the scans read four lanes; with
 * them the scan is memory-bound and VNNI was no faster (1M: 16.0 ms vs 15.9 on two
 * threads) and slower on cache-resident rows (10k: 0.217 vs 0.186 ms), Intel Xeon host,
 * raced in bench_search.py. Not kept.
 */
INLINE __m256i i8_step(__m256i acc, __m256i row, __m256i qabs, __m256i qv, __m256i ones) {
    __m256i p = _mm256_maddubs_epi16(qabs, _mm256_sign_epi8(row, qv));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
}

TARGET static void dot_i8(const int8_t *codes, const int64_t *idx, int64_t nb, int64_t d,
                          const int8_t *q, int32_t *out) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t body = d & ~(int64_t)31;
    for (int64_t u = 0; u < nb; u += 4) {
        int nr = nb - u < 4 ? (int)(nb - u) : 4;
        const int8_t *r[4];
        for (int t = 0; t < 4; t++) r[t] = codes + idx[u + (t < nr ? t : 0)] * d;
        /* 2 KB ahead of each row, a line per row every 64 bytes: the four rows come
         * from four lanes (quant.c), each its own stream (prefetch never faults, so
         * running past the end is harmless). */
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = 0; i < body; i += 32) {
            if (!(i & 63))
                for (int t = 0; t < 4; t++) _mm_prefetch((const char *)r[t] + i + 2048, _MM_HINT_T0);
            __m256i qv = _mm256_loadu_si256((const __m256i *)(q + i));
            __m256i qa = _mm256_abs_epi8(qv);
            a0 = i8_step(a0, _mm256_loadu_si256((const __m256i *)(r[0] + i)), qa, qv, ones);
            a1 = i8_step(a1, _mm256_loadu_si256((const __m256i *)(r[1] + i)), qa, qv, ones);
            a2 = i8_step(a2, _mm256_loadu_si256((const __m256i *)(r[2] + i)), qa, qv, ones);
            a3 = i8_step(a3, _mm256_loadu_si256((const __m256i *)(r[3] + i)), qa, qv, ones);
        }
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
        int32_t s[4];
        _mm_storeu_si128((__m128i *)s, _mm_add_epi32(_mm256_castsi256_si128(h),
                                                     _mm256_extracti128_si256(h, 1)));
        for (int t = 0; t < nr; t++) {
            for (int64_t j = body; j < d; j++) s[t] += (int32_t)r[t][j] * (int32_t)q[j];
            out[u + t] = s[t];
        }
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

/* x[0..n) as `streams` (2 or 4) equal parts in lockstep, a line of each prefetched
 * PREFETCH_AHEAD per step, two accumulators per part with two streams (one with four),
 * then the tail. In bench_search.py on the Intel Xeon host (results/search.json), two
 * streams read 1M x 384 fastest (one thread 84.3 ms against 87.8 for four), four read
 * 100k x 384 on two threads faster (3.49 against 3.54 ms). */
TARGET static double sum_f32(const float *x, int64_t n, int streams) {
    const int four = streams == 4;
    const int64_t h = (n / (four ? 4 : 2)) & ~(int64_t)15;
    const float *x1 = x + h, *x2 = four ? x + 2 * h : x, *x3 = four ? x + 3 * h : x;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    if (four) {
        for (int64_t i = 0; i < h; i += 8) {
            if (!(i & 15)) {
                PREFETCH_AHEAD(x + i);
                PREFETCH_AHEAD(x1 + i);
                PREFETCH_AHEAD(x2 + i);
                PREFETCH_AHEAD(x3 + i);
            }
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x1 + i));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x2 + i));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x3 + i));
        }
    } else {
        for (int64_t i = 0; i < h; i += 16) {
            PREFETCH_AHEAD(x + i);
            PREFETCH_AHEAD(x1 + i);
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x1 + i));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x1 + i + 8));
        }
    }
    float l[8];
    _mm256_storeu_ps(l, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    double s = 0;
    for (int j = 0; j < 8; j++) s += l[j];
    for (int64_t i = (four ? 4 : 2) * h; i < n; i++) s += x[i];
    return s;
}

const bb_ops bb_ops_avx2 = {"avx2-fma", dot_rows, dot_f32, dot_i8, bm25_contrib, quant_i8, sum_f32};

#endif /* x86-64 */
