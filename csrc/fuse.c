/*
 * fuse.c -- fusion of two ranked legs into a final top-k (bb_fuse).
 *
 * The union of the two legs is built in an open-addressing hash table keyed by id
 * (linear probing, capacity a power of two at least twice the entries), so fusion is
 * linear in na + nb; then every distinct id is scored and offered to the top-k heap.
 * RRF is Cormack, Clarke & Buettcher (SIGIR 2009): sum of w / (rrf_k + rank).
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    int64_t id; /* -1 = empty slot */
    int32_t rank_a, rank_b;
    float score_a, score_b;
} entry;

static inline uint64_t slot_of(int64_t id, uint64_t mask) {
    return ((uint64_t)id * 0x9E3779B97F4A7C15ull >> 17) & mask;
}

/* Insert one leg; `which` 0 = a, 1 = b. Returns the number of kept entries. */
static int64_t insert_leg(entry *tab, uint64_t mask, const int64_t *ids, const float *scores,
                          int64_t n, int which, float *lo, float *hi) {
    int32_t rank = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        if (id < 0) continue;
        uint64_t s = slot_of(id, mask);
        while (tab[s].id != -1 && tab[s].id != id) s = (s + 1) & mask;
        entry *e = &tab[s];
        if (e->id == -1) {
            e->id = id;
            e->rank_a = e->rank_b = 0;
            e->score_a = e->score_b = NAN;
        }
        int32_t *r = which ? &e->rank_b : &e->rank_a;
        if (*r != 0) continue; /* a repeat within the leg: keep the first occurrence */
        *r = ++rank;
        float sc = scores[i];
        if (which) e->score_b = sc; else e->score_a = sc;
        if (rank == 1 || sc < *lo) *lo = sc;
        if (rank == 1 || sc > *hi) *hi = sc;
    }
    return rank;
}

static int scores_finite(const entry *tab, uint64_t cap) {
    for (uint64_t s = 0; s < cap; s++) {
        if (tab[s].id == -1) continue;
        if (tab[s].rank_a && !isfinite(tab[s].score_a)) return 0;
        if (tab[s].rank_b && !isfinite(tab[s].score_b)) return 0;
    }
    return 1;
}

/* The normalised score of a leg entry: (s - lo) / (hi - lo), or 1 when hi == lo. */
static inline float norm(float s, float lo, float hi) {
    return hi > lo ? (s - lo) / (hi - lo) : 1.0f;
}

int bb_fuse(const int64_t *ids_a, const float *scores_a, int64_t na,
            const int64_t *ids_b, const float *scores_b, int64_t nb,
            int64_t k, int method, float rrf_k, float weight_a, float weight_b,
            int64_t *out_ids, float *out_scores,
            int32_t *out_rank_a, float *out_score_a,
            int32_t *out_rank_b, float *out_score_b) {
    if (k <= 0) return BB_ERR_K;
    if (na < 0 || nb < 0 || na > INT32_MAX || nb > INT32_MAX) return BB_ERR_SHAPE;
    if ((na > 0 && (!ids_a || !scores_a)) || (nb > 0 && (!ids_b || !scores_b))) return BB_ERR_NULL;
    if (!out_ids || !out_scores || !out_rank_a || !out_score_a || !out_rank_b || !out_score_b)
        return BB_ERR_NULL;
    if (method != BB_FUSE_RRF && method != BB_FUSE_WEIGHTED) return BB_ERR_ARG;
    if (!isfinite(rrf_k) || !isfinite(weight_a) || !isfinite(weight_b)) return BB_ERR_NAN;
    if (rrf_k < 0.0f) return BB_ERR_ARG;

    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)(na + nb)) cap <<= 1;
    entry *tab = malloc(sizeof(entry) * cap);
    int64_t total = na + nb, kcap = k < total ? k : total;
    bb_item *items = malloc(sizeof(bb_item) * (size_t)(kcap + 1));
    int status = BB_OK;
    if (!tab || !items) {
        status = BB_ERR_NOMEM;
        goto done;
    }
    for (uint64_t s = 0; s < cap; s++) tab[s].id = -1;
    float lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
    insert_leg(tab, cap - 1, ids_a, scores_a, na, 0, &lo_a, &hi_a);
    insert_leg(tab, cap - 1, ids_b, scores_b, nb, 1, &lo_b, &hi_b);
    if (method == BB_FUSE_WEIGHTED && !scores_finite(tab, cap)) {
        status = BB_ERR_NAN;
        goto done;
    }
    bb_heap h;
    bb_heap_init(&h, items, kcap);
    for (uint64_t s = 0; s < cap; s++) {
        const entry *e = &tab[s];
        if (e->id == -1) continue;
        float fa = 0.0f, fb = 0.0f;
        if (method == BB_FUSE_RRF) {
            if (e->rank_a) fa = weight_a / (rrf_k + (float)e->rank_a);
            if (e->rank_b) fb = weight_b / (rrf_k + (float)e->rank_b);
        } else {
            if (e->rank_a) fa = weight_a * norm(e->score_a, lo_a, hi_a);
            if (e->rank_b) fb = weight_b * norm(e->score_b, lo_b, hi_b);
        }
        bb_heap_offer(&h, fa + fb, e->id);
    }
    bb_heap_sort(&h);
    bb_heap_emit(&h, k, out_ids, out_scores);
    /* The per-leg details of each result, looked up again in the table. */
    for (int64_t i = 0; i < k; i++) {
        out_rank_a[i] = out_rank_b[i] = 0;
        out_score_a[i] = out_score_b[i] = NAN;
        if (i >= h.count) continue;
        uint64_t s = slot_of(out_ids[i], cap - 1);
        while (tab[s].id != out_ids[i]) s = (s + 1) & (cap - 1);
        out_rank_a[i] = tab[s].rank_a;
        out_score_a[i] = tab[s].score_a;
        out_rank_b[i] = tab[s].rank_b;
        out_score_b[i] = tab[s].score_b;
    }
done:
    free(tab);
    free(items);
    return status;
}
