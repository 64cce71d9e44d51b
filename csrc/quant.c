/*
 * quant.c -- the compact int8 copy: quantisation and the two-stage top-k
 * (bb_quantize_int8, bb_cosine_topk_int8).
 *
 * Stage 1 scans n x d int8 codes (a quarter of the f32 bytes) with an int8 query and
 * keeps the best `pool` rows by approximate score; stage 2 reads only those rows from
 * the f32 matrix and rescores them exactly, with the same dot product as cosine.c.
 * Not done here: f16 storage, product quantisation, any index structure.
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#include <math.h>
#include <stdlib.h>

/* Rows per block: 256 x 384 int8 = 96 KB, reused from L2 across a chunk's queries. */
#define BLOCK 256
/* Queries quantised and scanned per pass. */
#define QCHUNK 64
/* Default pool: max(4k, 64). Measured on 384-d unit vectors, random and clustered
 * (tests/test_kernel.py's generators), 10k and 100k rows, 200 queries each: the exact
 * top-10 always sat within the approximate top-16, so 64 leaves a 4x margin; rescoring
 * 64 rows reads 96 KB (~10 us) against a ~2.5 ms int8 scan of 100k x 384. */
#define POOL_MIN 64
#define POOL_PER_K 4

int64_t bb_default_pool(int64_t k) {
    if (k <= 0) return POOL_MIN;
    return k > INT64_MAX / POOL_PER_K ? INT64_MAX : (POOL_PER_K * k > POOL_MIN ? POOL_PER_K * k : POOL_MIN);
}

int bb_quantize_int8(const float *matrix, int64_t n, int64_t d, int simd,
                     int8_t *out_codes, float *out_scales) {
    const bb_ops *ops = bb_select_ops(simd);
    if (!ops) return BB_ERR_ARG;
    if (n < 0 || d <= 0) return BB_ERR_SHAPE;
    if (n == 0) return BB_OK;
    if (!matrix || !out_codes || !out_scales) return BB_ERR_NULL;
    if (!bb_all_finite(matrix, n * d)) return BB_ERR_NAN;
    for (int64_t i = 0; i < n; i++)
        ops->quant_i8(matrix + i * d, d, out_codes + i * d, &out_scales[i]);
    return BB_OK;
}

/* The arguments of one pass over the codes, shared by its threads (bb_scan_rows). */
typedef struct {
    const bb_ops *ops;
    const int8_t *codes;
    const float *scales;
    int64_t d;
    const int8_t *qcodes; /* [nq, d] */
    int64_t nq;
    const uint8_t *mask;
} int8_pass;

static void scan_codes(const bb_scan_part *p) {
    const int8_pass *c = (const int8_pass *)p->ctx;
    int64_t idx[BLOCK], pos[BB_SCAN_LANES], nb;
    int32_t dots[BLOCK];
    for (int l = 0; l < p->lanes; l++) pos[l] = p[l].begin;
    while ((nb = bb_lane_block(p, pos, c->mask, BLOCK / p->lanes, idx)) > 0) {
        for (int64_t j = 0; j < c->nq; j++) {
            bb_heap *h = &p->heaps[j];
            c->ops->dot_i8(c->codes, idx, nb, c->d, c->qcodes + j * c->d, dots);
            for (int64_t u = 0; u < nb; u++) {
                float s = (float)dots[u] * c->scales[idx[u]];
                if (BB_HEAP_WANTS(h, s)) bb_heap_offer(h, s, idx[u]);
            }
        }
    }
}

/* Exact rescoring of a pool (any order) into the final heap, with the single-query dot
 * of bb_cosine_topk, so the scores are bit-identical to it. */
static void rescore(const bb_ops *ops, const float *matrix, int64_t d, const float *query,
                    const bb_heap *pool, bb_heap *out) {
    int64_t idx[BLOCK];
    float s[BLOCK];
    for (int64_t u0 = 0; u0 < pool->count; u0 += BLOCK) {
        int64_t nb = pool->count - u0 < BLOCK ? pool->count - u0 : BLOCK;
        for (int64_t u = 0; u < nb; u++) idx[u] = pool->items[u0 + u].id;
        ops->dot_rows(matrix, idx, nb, d, query, s);
        for (int64_t u = 0; u < nb; u++) bb_heap_offer(out, s[u], idx[u]);
    }
}

int bb_cosine_topk_int8(const int8_t *codes, const float *scales, const float *matrix,
                        int64_t n, int64_t d,
                        const float *queries, int64_t q, int64_t k, int64_t pool,
                        const uint8_t *mask, int n_threads, int simd,
                        int64_t *out_ids, float *out_scores, float *out_floor) {
    const bb_ops *ops = bb_select_ops(simd);
    if (!ops) return BB_ERR_ARG;
    if (k <= 0) return BB_ERR_K;
    if (n < 0 || d <= 0 || q < 0) return BB_ERR_SHAPE;
    if (pool < 0 || n_threads < 0) return BB_ERR_ARG;
    if (q == 0) return BB_OK;
    if (!queries || !out_ids || !out_scores) return BB_ERR_NULL;
    if (n > 0 && (!codes || !scales || !matrix)) return BB_ERR_NULL;
    if (!bb_all_finite(queries, q * d)) return BB_ERR_NAN;

    if (pool == 0) pool = bb_default_pool(k);
    if (pool < k) pool = k;
    int64_t pcap = pool < n ? pool : n, kcap = k < n ? k : n;
    int64_t work = n * d; /* int8 bytes, once per query */
    int nt = bb_resolve_threads(n_threads, n, q > 1 && work < INT64_MAX / q ? work * q : work);
    int64_t qc = q < QCHUNK ? q : QCHUNK;
    int lanes = q == 1 ? BB_SCAN_LANES : 1; /* as in cosine.c */
    bb_heap *heaps = malloc(sizeof(bb_heap) * (size_t)((int64_t)nt * qc));
    /* The scan's pool heaps, then one rescoring heap of kcap items. */
    int64_t slots = bb_heap_slots(pcap);
    bb_item *items = malloc(sizeof(bb_item) * (size_t)((int64_t)nt * qc * slots + kcap + 1));
    int8_t *qcodes = malloc((size_t)(qc * d));
    int status = (heaps && items && qcodes) ? BB_OK : BB_ERR_NOMEM;

    for (int64_t q0 = 0; q0 < q && status == BB_OK; q0 += qc) {
        int64_t nq = q - q0 < qc ? q - q0 : qc;
        float qscale;
        for (int64_t j = 0; j < nq; j++)
            ops->quant_i8(queries + (q0 + j) * d, d, qcodes + j * d, &qscale);
        int8_pass pass = {ops, codes, scales, d, qcodes, nq, mask};
        status = bb_scan_rows(nt, lanes, n, nq, pcap, scan_codes, &pass, heaps, items);
        for (int64_t j = 0; j < nq && status == BB_OK; j++) {
            /* A full pool of fewer rows than n may have left rows out: its root bounds
             * them. A pool that is not full holds every allowed row. */
            if (out_floor)
                out_floor[q0 + j] = heaps[j].count == pool && pool < n ? heaps[j].items[0].score
                                                                        : -INFINITY;
            bb_heap fin;
            bb_heap_init(&fin, items + (int64_t)nt * qc * slots, kcap);
            rescore(ops, matrix, d, queries + (q0 + j) * d, &heaps[j], &fin);
            bb_heap_sort(&fin);
            bb_heap_emit(&fin, k, out_ids + (q0 + j) * k, out_scores + (q0 + j) * k);
        }
    }
    free(heaps);
    free(items);
    free(qcodes);
    return status;
}
