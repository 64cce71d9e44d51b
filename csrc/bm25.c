/*
 * bm25.c -- BM25 top-k over CSR postings, term at a time (bb_bm25_topk).
 *
 * For each query term, the SIMD kernel turns a run of postings into contributions
 * (gathering doc lengths), then a scalar loop adds them into a dense float accumulator
 * and marks the document in a byte map of matched documents. The final scan visits the
 * marked documents only, in increasing doc id, through the top-k heap.
 *
 * Scratch: a zeroed float accumulator (4 bytes a doc) and a zeroed byte map of marks
 * (1 byte a doc), allocated per call. Marks are bytes, not bits: doc ids within a term
 * are distinct, so marking is a plain store; a bitmap's read-modify-write of shared
 * words serialised dense posting lists (stopword-heavy queries ran ~15% slower), and
 * skipping the accumulator's zeroing (selecting first contributions by mark instead)
 * cost more in the loop than the ~10 us memset at 100k docs.
 * Not done here: dynamic pruning (WAND / block-max), which would skip postings; an
 * exhaustive pass is exact and simple, and fast enough for the targets (benchmarks/).
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Postings per contribution batch: 4 KB of floats, stays in L1. */
#define CHUNK 1024

/* The 64 marks seen[0..64) (each byte 0 or 1) as a bit mask, bit i = seen[i]: the
 * multiply moves the low bit of byte i to bit 56 + i without carries (all partial
 * products are distinct powers of two). */
static inline uint64_t marks64(const uint8_t *seen) {
    uint64_t bits = 0;
    for (int w = 0; w < 8; w++) {
        uint64_t word;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(&word, seen + 8 * w, sizeof word);
#else
        word = 0;
        for (int i = 7; i >= 0; i--) word = (word << 8) | seen[8 * w + i];
#endif
        bits |= ((word * 0x0102040810204080ull) >> 56) << (8 * w);
    }
    return bits;
}

static int check_args(const int64_t *indptr, int64_t n_terms, const int32_t *doc_ids,
                      const float *tfs, int64_t nnz, const float *doc_len, int64_t n_docs,
                      const float *idf, const int32_t *query_terms, const float *weights,
                      int64_t m, float k1, float b, float avgdl) {
    if (n_terms < 0 || nnz < 0 || n_docs < 0 || m < 0) return BB_ERR_SHAPE;
    if (!indptr || (m > 0 && !query_terms)) return BB_ERR_NULL;
    if (n_terms > 0 && !idf) return BB_ERR_NULL;
    if (nnz > 0 && (!doc_ids || !tfs)) return BB_ERR_NULL;
    if (n_docs > 0 && !doc_len) return BB_ERR_NULL;
    if (!isfinite(k1) || !isfinite(b) || !isfinite(avgdl)) return BB_ERR_NAN;
    if (k1 < 0.0f || b < 0.0f || b > 1.0f || !(avgdl > 0.0f)) return BB_ERR_ARG;
    if (indptr[0] < 0 || indptr[n_terms] > nnz) return BB_ERR_RANGE;
    for (int64_t t = 0; t < m; t++) {
        int32_t term = query_terms[t];
        if (term < 0 || (int64_t)term >= n_terms) return BB_ERR_RANGE;
        if (indptr[term] < 0 || indptr[term] > indptr[term + 1] || indptr[term + 1] > nnz)
            return BB_ERR_RANGE;
        if (!isfinite(idf[term])) return BB_ERR_NAN;
        if (weights && !isfinite(weights[t])) return BB_ERR_NAN;
    }
    return BB_OK;
}

int bb_bm25_topk(const int64_t *indptr, int64_t n_terms,
                 const int32_t *doc_ids, const float *tfs, int64_t nnz,
                 const float *doc_len, int64_t n_docs, const float *idf,
                 const int32_t *query_terms, const float *weights, int64_t m,
                 float k1, float b, float avgdl, int64_t k,
                 const uint8_t *mask, int simd,
                 int64_t *out_ids, float *out_scores) {
    const bb_ops *ops = bb_select_ops(simd);
    if (!ops) return BB_ERR_ARG;
    if (k <= 0) return BB_ERR_K;
    if (!out_ids || !out_scores) return BB_ERR_NULL;
    int status = check_args(indptr, n_terms, doc_ids, tfs, nnz, doc_len, n_docs, idf,
                            query_terms, weights, m, k1, b, avgdl);
    if (status != BB_OK) return status;

    int64_t kcap = k < n_docs ? k : n_docs;
    float *acc = calloc((size_t)n_docs + 1, sizeof(float));
    uint8_t *seen = calloc((size_t)n_docs + 64, 1); /* padded to whole 64s */
    float *contrib = malloc(sizeof(float) * CHUNK);
    bb_item *items = malloc(sizeof(bb_item) * (size_t)(kcap + 1));
    if (!acc || !seen || !contrib || !items) {
        status = BB_ERR_NOMEM;
        goto done;
    }
    const float A = k1 * (1.0f - b), B = (k1 * b) / avgdl, k1p1 = k1 + 1.0f;
    for (int64_t t = 0; t < m && status == BB_OK; t++) {
        int32_t term = query_terms[t];
        float c = ((weights ? weights[t] : 1.0f) * idf[term]) * k1p1;
        for (int64_t p0 = indptr[term]; p0 < indptr[term + 1]; p0 += CHUNK) {
            int64_t cnt = indptr[term + 1] - p0 < CHUNK ? indptr[term + 1] - p0 : CHUNK;
            const int32_t *ids = doc_ids + p0;
            status = ops->bm25_contrib(ids, tfs + p0, cnt, doc_len, n_docs, c, A, B, contrib);
            if (status != BB_OK) break;
            for (int64_t p = 0; p < cnt; p++) {
                int32_t id = ids[p]; /* range-checked by bm25_contrib */
                acc[id] += contrib[p];
                seen[id] = 1;
            }
        }
    }
    if (status == BB_OK) {
        bb_heap h;
        bb_heap_init(&h, items, kcap);
        for (int64_t base = 0; base < n_docs; base += 64) {
            uint64_t bits = marks64(seen + base);
            while (bits) {
                int64_t id = base + __builtin_ctzll(bits);
                bits &= bits - 1;
                if (mask && !mask[id]) continue;
                if (BB_HEAP_WANTS(&h, acc[id])) bb_heap_offer(&h, acc[id], id);
            }
        }
        bb_heap_sort(&h);
        bb_heap_emit(&h, k, out_ids, out_scores);
    }
done:
    free(acc);
    free(seen);
    free(contrib);
    free(items);
    return status;
}
