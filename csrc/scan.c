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

int bb_scan_rows(int n_threads, int lanes, int64_t n, int64_t nq, int64_t cap,
                 void (*scan)(const bb_scan_part *), const void *ctx,
                 bb_heap *heaps, bb_item *items) {
    bb_scan_part parts[BB_MAX_THREADS * BB_SCAN_LANES];
    int nt = n_threads < 1 ? 1 : (n_threads > BB_MAX_THREADS ? BB_MAX_THREADS : n_threads);
    int nl = lanes < 1 ? 1 : (lanes > BB_SCAN_LANES ? BB_SCAN_LANES : lanes);
    int np = nt * nl;
    const int64_t slots = bb_heap_slots(cap);
    for (int t = 0; t < nt; t++)
        for (int64_t j = 0; j < nq; j++)
            bb_heap_init_spill(&heaps[t * nq + j], items + ((int64_t)t * nq + j) * slots, cap);
    for (int i = 0; i < np; i++) {
        bb_scan_part *p = &parts[i];
        p->scan = scan;
        p->ctx = ctx;
        p->thread = i / nl;
        p->lanes = nl;
        p->begin = n * i / np;
        p->end = n * (i + 1) / np;
        p->heaps = heaps + (int64_t)p->thread * nq;
    }
    int status = bb_parallel(nt, run_part, parts, sizeof(bb_scan_part) * (size_t)nl);
    if (status != BB_OK) return status;
    /* The heap order is total (score desc, id asc), so merging in any order keeps the
     * same items: results do not depend on the thread or lane count. */
    for (int64_t j = 0; j < nq; j++) {
        bb_heap *h = &heaps[j];
        for (int t = 1; t < nt; t++) {
            bb_heap *o = &heaps[t * nq + j];
            bb_heap_flush(o);
            for (int64_t u = 0; u < o->count; u++)
                bb_heap_offer(h, o->items[u].score, o->items[u].id);
        }
        bb_heap_flush(h);
    }
    return BB_OK;
}

int64_t bb_lane_block(const bb_scan_part *part, int64_t *pos, const uint8_t *mask,
                      int64_t per_lane, int64_t *idx) {
    int64_t got[BB_SCAN_LANES], ids[BB_SCAN_LANES][BB_LANE_ROWS];
    const int nl = part->lanes;
    if (per_lane > BB_LANE_ROWS) per_lane = BB_LANE_ROWS;
    for (;;) { /* until some row is allowed, or every lane is done */
        int64_t most = 0, nb = 0;
        int live = 0;
        for (int l = 0; l < nl; l++) {
            got[l] = 0;
            if (pos[l] >= part[l].end) continue;
            int64_t b1 = part[l].end - pos[l] > per_lane ? pos[l] + per_lane : part[l].end;
            got[l] = bb_block_ids(mask, pos[l], b1, ids[l]);
            pos[l] = b1;
            live = 1;
            most = got[l] > most ? got[l] : most;
        }
        if (!live) return 0;
        for (int64_t u = 0; u < most; u++)
            for (int l = 0; l < nl; l++)
                if (u < got[l]) idx[nb++] = ids[l][u];
        if (nb) return nb;
    }
}
