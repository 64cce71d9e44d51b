/*
 * cosine.c -- exact float32 cosine top-k (bb_cosine_topk).
 *
 * One loop serves a single query and a batch: rows are taken in blocks of BLOCK (the
 * allowed ones only, when there is a mask), the block's scores land in a
 * [queries x BLOCK] buffer, and each query's heap scans its row of that buffer. With one
 * query the block is a streaming, memory-bound pass (ops->dot_rows); with several, four
 * rows at a time go through a register-blocked micro-kernel against every query of the
 * chunk, reused from L1 (ops->dot_f32: a matrix product without the packing).
 * Threads split the rows; each keeps its own heaps, merged at the end.
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#include <math.h>
#include <stdlib.h>

/* Rows per block: the score buffer is QCHUNK x BLOCK floats (64 KB), in L2. */
#define BLOCK 256
/* Queries per pass over the matrix: 64 x 384 f32 = 96 KB of queries stay in L2. */
#define QCHUNK 64

typedef struct {
    const bb_ops *ops;
    const float *matrix;
    int64_t d;
    const float *queries; /* [nq, d], this chunk */
    int64_t nq;
    const uint8_t *mask;
    int64_t begin, end; /* row range of this thread */
    bb_heap *heaps;     /* [nq] */
    float *buf;         /* [nq, BLOCK] */
} scan_task;

static void scan_rows(void *arg) {
    scan_task *t = (scan_task *)arg;
    int64_t idx[BLOCK];
    const float *rows[4];
    for (int64_t b0 = t->begin; b0 < t->end; b0 += BLOCK) {
        int64_t b1 = b0 + BLOCK < t->end ? b0 + BLOCK : t->end;
        int64_t nb = bb_block_ids(t->mask, b0, b1, idx);
        if (t->nq == 1) {
            t->ops->dot_rows(t->matrix, idx, nb, t->d, t->queries, t->buf);
        } else {
            for (int64_t r = 0; r < nb; r += 4) {
                int nr = nb - r < 4 ? (int)(nb - r) : 4;
                for (int u = 0; u < nr; u++) rows[u] = t->matrix + idx[r + u] * t->d;
                t->ops->dot_f32(rows, nr, t->queries, t->nq, t->d, t->buf + r, 1, BLOCK);
            }
        }
        for (int64_t j = 0; j < t->nq; j++) {
            bb_heap *h = &t->heaps[j];
            const float *s = t->buf + j * BLOCK;
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
    scan_task tasks[BB_MAX_THREADS];
    bb_heap *heaps = malloc(sizeof(bb_heap) * (size_t)(nt * qc + 1));
    bb_item *items = malloc(sizeof(bb_item) * (size_t)((nt * qc + 1) * cap + 1));
    float *buf = malloc(sizeof(float) * (size_t)(nt * qc * BLOCK));
    int status = (heaps && items && buf) ? BB_OK : BB_ERR_NOMEM;

    for (int64_t q0 = 0; q0 < q && status == BB_OK; q0 += qc) {
        int64_t nq = q - q0 < qc ? q - q0 : qc;
        for (int t = 0; t < nt; t++) {
            scan_task *s = &tasks[t];
            s->ops = ops;
            s->matrix = matrix;
            s->d = d;
            s->queries = queries + q0 * d;
            s->nq = nq;
            s->mask = mask;
            s->begin = n * t / nt;
            s->end = n * (t + 1) / nt;
            s->heaps = heaps + t * qc;
            s->buf = buf + (int64_t)t * qc * BLOCK;
            for (int64_t j = 0; j < nq; j++)
                bb_heap_init(&s->heaps[j], items + (t * qc + j) * cap, cap);
        }
        status = bb_parallel(nt, scan_rows, tasks, sizeof(scan_task));
        if (status != BB_OK) break;
        for (int64_t j = 0; j < nq; j++) {
            bb_heap *h = &heaps[j];
            for (int t = 1; t < nt; t++) {
                const bb_heap *o = &tasks[t].heaps[j];
                for (int64_t u = 0; u < o->count; u++) bb_heap_offer(h, o->items[u].score, o->items[u].id);
            }
            bb_heap_sort(h);
            bb_heap_emit(h, k, out_ids + (q0 + j) * k, out_scores + (q0 + j) * k);
        }
    }
    free(heaps);
    free(items);
    free(buf);
    return status;
}
