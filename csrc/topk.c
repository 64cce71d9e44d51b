/*
 * topk.c -- bounded heap selection with deterministic ties.
 *
 * The order is total: higher score first, and for equal scores the lower id first. The
 * heap keeps the `cap` best items with the worst at the root, so a scan pays one
 * comparison per candidate (BB_HEAP_WANTS) and O(log cap) only when an item enters.
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#include <math.h>

/* a ranks strictly below b. */
static inline int worse(const bb_item *a, const bb_item *b) {
    return a->score < b->score || (a->score == b->score && a->id > b->id);
}

void bb_heap_init(bb_heap *h, bb_item *storage, int64_t cap) {
    h->items = storage;
    h->count = 0;
    h->cap = cap;
    h->spill = 0;
    h->spilled = 0;
    h->thr = -INFINITY;
}

int64_t bb_heap_slots(int64_t cap) { return cap >= BB_SPILL_MIN ? 2 * cap : cap; }

void bb_heap_init_spill(bb_heap *h, bb_item *storage, int64_t cap) {
    bb_heap_init(h, storage, cap);
    h->spill = bb_heap_slots(cap) - cap;
}

static void sift_down(bb_item *it, int64_t n, int64_t i) {
    bb_item x = it[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && worse(&it[c + 1], &it[c])) c++;
        if (!worse(&it[c], &x)) break;
        it[i] = it[c];
        i = c;
    }
    it[i] = x;
}

static void sift_up(bb_item *it, int64_t i) {
    bb_item x = it[i];
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!worse(&x, &it[p])) break;
        it[i] = it[p];
        i = p;
    }
    it[i] = x;
}

void bb_heap_offer(bb_heap *h, float score, int64_t id) {
    bb_item x;
    if (score != score || h->cap <= 0) return; /* NaN never enters */
    x.score = score;
    x.id = id;
    if (h->count < h->cap) {
        h->items[h->count] = x;
        sift_up(h->items, h->count);
        h->count++;
        if (h->count == h->cap) h->thr = h->items[0].score;
        return;
    }
    if (!worse(&h->items[0], &x)) return;
    if (h->spill) {
        h->items[h->cap + h->spilled++] = x;
        if (h->spilled == h->spill) bb_heap_flush(h);
        return;
    }
    h->items[0] = x;
    sift_down(h->items, h->count, 0);
    h->thr = h->items[0].score;
}

static void swap_items(bb_item *a, bb_item *b) {
    bb_item t = *a;
    *a = *b;
    *b = t;
}

/* Reorder a[0..n) so that its m best (0 < m < n) come first, in any order: a
 * quickselect (median-of-three pivot, Hoare partition) on the total order. The items
 * are distinct under it (ids differ), so the m best are one set. */
static void select_best(bb_item *a, int64_t n, int64_t m) {
    int64_t lo = 0, hi = n - 1, want = m - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (worse(&a[lo], &a[mid])) swap_items(&a[lo], &a[mid]);
        if (worse(&a[lo], &a[hi])) swap_items(&a[lo], &a[hi]);
        if (worse(&a[mid], &a[hi])) swap_items(&a[mid], &a[hi]);
        bb_item p = a[mid]; /* best of three at lo, median at mid, worst at hi */
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (worse(&p, &a[i])) i++; /* a[i] better than the pivot */
            while (worse(&a[j], &p)) j--; /* a[j] worse than the pivot */
            if (i <= j) swap_items(&a[i++], &a[j--]);
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
}

void bb_heap_flush(bb_heap *h) {
    if (!h->spilled) return;
    select_best(h->items, h->cap + h->spilled, h->cap);
    h->spilled = 0;
    for (int64_t i = h->cap / 2 - 1; i >= 0; i--) sift_down(h->items, h->cap, i);
    h->thr = h->items[0].score;
}

void bb_heap_sort(bb_heap *h) {
    bb_heap_flush(h);
    /* Heapsort with the worst at the root: popping the root to the end leaves the
     * array ordered best first. */
    for (int64_t n = h->count; n > 1; n--) {
        bb_item t = h->items[0];
        h->items[0] = h->items[n - 1];
        h->items[n - 1] = t;
        sift_down(h->items, n - 1, 0);
    }
}

void bb_heap_emit(const bb_heap *h, int64_t k, int64_t *out_ids, float *out_scores) {
    int64_t i = 0;
    for (; i < h->count && i < k; i++) {
        out_ids[i] = h->items[i].id;
        out_scores[i] = h->items[i].score;
    }
    for (; i < k; i++) {
        out_ids[i] = -1;
        out_scores[i] = -INFINITY;
    }
}
