/*
 * cosine.c -- exact float32 cosine top-k (bb_cosine_topk).
 *
 * One loop serves a single query and a batch: rows are taken in blocks of BLOCK (the
 * allowed ones only, when there is a mask), the block's scores land in a
 * [queries x BLOCK] buffer, and each query's heap scans its row of that buffer. With one
 * query the block is a streaming, memory-bound pass (ops->dot_rows); with several, four
 * rows at a time go through a register-blocked micro-kernel against every query of the
 * chunk, reused from L1 (ops->dot_f32: a matrix product without the packing).
 * Threads split the rows; each keeps its own heaps, merged at the end (bb_scan_rows).
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#include <math.h>
#include <stdlib.h>

/* Rows per block: the score buffer is QCHUNK x BLOCK floats (64 KB), in L2. */
#define BLOCK 256
/* Queries per pass over the matrix: 64 x 384 f32 = 96 KB of queries stay in L2. */
#define QCHUNK 64
/* Lanes of a one-query scan: two far-apart streams per thread, each row prefetched
 * (PREFETCH_AHEAD in simd_avx2.c). 1M x 384 on the Intel Xeon host (issue #24), one
 * thread: 2 lanes 79.6-79.8 ms, 4 lanes 83.2-83.8, 1 lane (rows stepped 4 at a time,
 * 6 KB ahead) 85.6; numpy's matmul + argpartition 103.8-104.0 in the same race. */
#define F32_LANES 2

/* The arguments of one pass over the rows, shared by its threads (bb_scan_rows). */
typedef struct {
    const bb_ops *ops;
    const float *matrix;
    int64_t d;
    const float *queries; /* [nq, d], this chunk */
    int64_t nq;
    const uint8_t *mask;
    float *buf; /* [threads, nq, BLOCK] */
} cosine_pass;

static void scan_rows(const bb_scan_part *p) {
    const cosine_pass *c = (const cosine_pass *)p->ctx;
    float *buf = c->buf + (int64_t)p->thread * c->nq * BLOCK;
    int64_t idx[BLOCK], pos[BB_SCAN_LANES], nb;
    const float *rows[4];
    for (int l = 0; l < p->lanes; l++) pos[l] = p[l].begin;
    while ((nb = bb_lane_block(p, pos, c->mask, BLOCK / p->lanes, idx)) > 0) {
        if (c->nq == 1) {
            c->ops->dot_rows(c->matrix, idx, nb, c->d, c->queries, buf);
        } else {
            for (int64_t r = 0; r < nb; r += 4) {
                int nr = nb - r < 4 ? (int)(nb - r) : 4;
                for (int u = 0; u < nr; u++) rows[u] = c->matrix + idx[r + u] * c->d;
                c->ops->dot_f32(rows, nr, c->queries, c->nq, c->d, buf + r, 1, BLOCK);
            }
        }
        for (int64_t j = 0; j < c->nq; j++) {
            bb_heap *h = &p->heaps[j];
            const float *s = buf + j * BLOCK;
            for (int64_t u = 0; u < nb; u++)
                if (BB_HEAP_WANTS(h, s[u])) bb_heap_offer(h, s[u], idx[u]);
        }
    }
}

int bb_cosine_topk(const float *matrix, int64_t n, int64_t d,
                   const float *queries, int64_t q, int64_t k,
                   const uint8_t *mask, int n_threads, int simd,
                   int64_t *out_ids, float *out_scores) {
    const bb_ops *ops = bb_select_ops(simd);
    if (!ops) return BB_ERR_ARG;
    if (k <= 0) return BB_ERR_K;
    if (n < 0 || d <= 0 || q < 0) return BB_ERR_SHAPE;
    if (n_threads < 0) return BB_ERR_ARG;
    if (q == 0) return BB_OK;
    if (!queries || !out_ids || !out_scores || (n > 0 && !matrix)) return BB_ERR_NULL;
    if (!bb_all_finite(queries, q * d)) return BB_ERR_NAN;

    int64_t cap = k < n ? k : n;
    /* A batch re-reads the rows from cache once per query: count that work too. */
    int64_t work = n * d * (int64_t)sizeof(float);
    int nt = bb_resolve_threads(n_threads, n, q > 1 && work < INT64_MAX / q ? work * q : work);
    int64_t qc = q < QCHUNK ? q : QCHUNK;
    /* One query streams: its rows come from F32_LANES places at once. A batch
     * reuses each row from cache across its queries: one lane. */
    int lanes = q == 1 ? F32_LANES : 1;
    bb_heap *heaps = malloc(sizeof(bb_heap) * (size_t)(nt * qc));
    bb_item *items = malloc(sizeof(bb_item) * (size_t)(nt * qc * bb_heap_slots(cap) + 1));
    float *buf = malloc(sizeof(float) * (size_t)(nt * qc * BLOCK));
    int status = (heaps && items && buf) ? BB_OK : BB_ERR_NOMEM;

    for (int64_t q0 = 0; q0 < q && status == BB_OK; q0 += qc) {
        int64_t nq = q - q0 < qc ? q - q0 : qc;
        cosine_pass pass = {ops, matrix, d, queries + q0 * d, nq, mask, buf};
        status = bb_scan_rows(nt, lanes, n, nq, cap, scan_rows, &pass, heaps, items);
        for (int64_t j = 0; j < nq && status == BB_OK; j++) {
            bb_heap_sort(&heaps[j]);
            bb_heap_emit(&heaps[j], k, out_ids + (q0 + j) * k, out_scores + (q0 + j) * k);
        }
    }
    free(heaps);
    free(items);
    free(buf);
    return status;
}
