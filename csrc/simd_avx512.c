/*
 * simd_avx512.c -- AVX-512 kernels for x86-64 CPUs that have AVX-512 F, BW and VNNI,
 * compiled per function with __attribute__((target(...))) like simd_avx2.c, and only
 * called after __builtin_cpu_supports said yes (dispatch.c). It has only the int8 dot;
 * every other entry comes from the AVX2 table, so f32 scores are the same bits on an
 * AVX2 CPU and an AVX-512 one.
 *
 *   dot_i8: VNNI's vpdpbusd adds four u8 x s8 products into each int32 lane in one
 *     instruction, against AVX2's three (maddubs, madd, add) plus a sign per 32 bytes.
 *     vpdpbusd wants one unsigned operand: the row's codes XOR 0x80 are code + 128 as
 *     u8, so sum((r + 128) q) - 128 sum(q) = sum(r q), exact in int32 (|sum| <= d * 255
 *     * 127): the same integers as the AVX2 and scalar twins, bit for bit.
 *   Not here: an AVX-512 dot_rows (two 16-lane accumulators per row) measured 1.25x the
 *     AVX2 one's time at 100k x 384 on one thread, with the matrix 64-byte aligned and
 *     1.7x unaligned (numpy's 16-byte offset splits every 64-byte load across two
 *     lines); a 512-bit streaming sum read no faster than the 256-bit one.
 * Measured on an Intel Xeon (KVM, family 6 model 167), README "Search kernels".
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vnni")))

INLINE __mmask64 tail64(int64_t rem) {
    return rem >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << rem) - 1);
}

/* Four rows side by side share each query load; 2 KB ahead of the group, one line of
 * prefetch per row and step (as the AVX2 twin, whose comment has the measurement). */
TARGET static void dot_i8(const int8_t *codes, const int64_t *idx, int64_t nb, int64_t d,
                          const int8_t *q, int32_t *out) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    int32_t qsum = 0;
    for (int64_t j = 0; j < d; j++) qsum += q[j];
    const int32_t lift = 128 * qsum;
    for (int64_t u = 0; u < nb; u += 4) {
        int nr = nb - u < 4 ? (int)(nb - u) : 4;
        const int8_t *r[4];
        for (int t = 0; t < 4; t++) r[t] = codes + idx[u + (t < nr ? t : 0)] * d;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = 0; i < d; i += 64) {
            __mmask64 m = tail64(d - i);
            for (int t = 0; t < 4; t++) _mm_prefetch((const char *)r[t] + i + 2048, _MM_HINT_T0);
            __m512i qv = _mm512_maskz_loadu_epi8(m, q + i);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, r[0] + i), flip), qv);
            a1 = _mm512_dpbusd_epi32(a1, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, r[1] + i), flip), qv);
            a2 = _mm512_dpbusd_epi32(a2, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, r[2] + i), flip), qv);
            a3 = _mm512_dpbusd_epi32(a3, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, r[3] + i), flip), qv);
        }
        int32_t s[4] = {_mm512_reduce_add_epi32(a0), _mm512_reduce_add_epi32(a1),
                        _mm512_reduce_add_epi32(a2), _mm512_reduce_add_epi32(a3)};
        for (int t = 0; t < nr; t++) out[u + t] = s[t] - lift;
    }
}

const bb_ops bb_ops_avx512 = {"avx512-vnni", NULL, NULL, dot_i8, NULL, NULL, NULL};

#endif /* x86-64 */
