/*
 * scan.c -- the fan-out shared by the cosine and int8 scans (cosine.c, quant.c): split
 * the rows over threads, give each thread one top-k heap per query, merge the heaps.
 *
 * Only the splitting and merging live here; what a thread does with its rows (which
 * dot product, which buffers) is the caller's scan function.
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

static void run_part(void *arg) {
    const bb_scan_part *p = (const bb_scan_part *)arg;
    p->scan(p);
}

int bb_scan_rows(int n_threads, int64_t n, int64_t nq, int64_t cap,
                 void (*scan)(const bb_scan_part *), const void *ctx,
                 bb_heap *heaps, bb_item *items) {
    bb_scan_part parts[BB_MAX_THREADS];
    int nt = n_threads < 1 ? 1 : (n_threads > BB_MAX_THREADS ? BB_MAX_THREADS : n_threads);
    for (int t = 0; t < nt; t++) {
        bb_scan_part *p = &parts[t];
        p->scan = scan;
        p->ctx = ctx;
        p->thread = t;
        p->begin = n * t / nt;
        p->end = n * (t + 1) / nt;
        p->heaps = heaps + (int64_t)t * nq;
        for (int64_t j = 0; j < nq; j++)
            bb_heap_init(&p->heaps[j], items + ((int64_t)t * nq + j) * cap, cap);
    }
    int status = bb_parallel(nt, run_part, parts, sizeof(bb_scan_part));
    if (status != BB_OK) return status;
    /* The heap order is total (score desc, id asc), so merging in any order keeps the
     * same items: results do not depend on the thread count. */
    for (int64_t j = 0; j < nq; j++) {
        bb_heap *h = &heaps[j];
        for (int t = 1; t < nt; t++) {
            const bb_heap *o = &parts[t].heaps[j];
            for (int64_t u = 0; u < o->count; u++)
                bb_heap_offer(h, o->items[u].score, o->items[u].id);
        }
    }
    return BB_OK;
}
