/*
 * kernel.h -- the C search core of brainbot: the whole public API.
 *
 * Pure C99/C11, no Python.h. Every function returns an int status (BB_OK == 0, or a
 * negative BB_ERR_* code) and writes its results into arrays the caller allocated.
 * Nothing allocated here is ever handed to the caller; scratch memory is malloc'd and
 * freed inside each call. There is no global mutable state apart from a one-time,
 * thread-safe CPU-feature detection, so every function may be called concurrently.
 *
 * Conventions shared by all kernels
 *   - Matrices are row-major and C-contiguous: matrix[i * d + j].
 *   - Ids are row / document numbers, int64 on output.
 *   - Results are ordered best first. Equal scores: the lower id wins, always.
 *     NaN scores are never returned.
 *   - When fewer than k items are eligible, output ids are padded with -1 and scores
 *     with -INFINITY (fusion also pads ranks with 0 and leg scores with NaN).
 *   - mask: optional uint8[n] allow-list; nonzero = may be returned; NULL = all rows.
 *   - simd: BB_SIMD_AUTO picks the best path the CPU supports (AVX2+FMA on x86-64,
 *     NEON on arm64); BB_SIMD_SCALAR forces the portable C path (tests compare them).
 *   - n_threads: 0 = automatic (one thread for small inputs, else up to the number of
 *     online CPUs, at most BB_AUTO_MAX_THREADS); > 0 = exactly that many (at most
 *     BB_MAX_THREADS, and never more than there are rows).
 *
 * The text between BB_CDEF_BEGIN and BB_CDEF_END is read by csrc/build_kernel.py as
 * the cffi cdef, so it must stay plain declarations (no macros, no inline code).
 */
#ifndef BRAINBOT_KERNEL_H
#define BRAINBOT_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* BB_CDEF_BEGIN */

/* Status codes. */
enum {
    BB_OK = 0,
    BB_ERR_NULL = -1,    /* a required pointer is NULL */
    BB_ERR_K = -2,       /* k <= 0 */
    BB_ERR_SHAPE = -3,   /* a size is negative or zero where it must not be, or sizes disagree */
    BB_ERR_NAN = -4,     /* NaN or infinity in a query, weight, idf or parameter */
    BB_ERR_ARG = -5,     /* any other invalid argument (method, simd, k1, b, pool, ...) */
    BB_ERR_RANGE = -6,   /* an id (term id, doc id) or offset out of range */
    BB_ERR_NOMEM = -7,   /* scratch allocation failed */
    BB_ERR_THREAD = -8   /* a worker thread could not be started */
};

/* SIMD selection, per call. */
enum {
    BB_SIMD_AUTO = 0,
    BB_SIMD_SCALAR = 1
};

/* Fusion methods. */
enum {
    BB_FUSE_RRF = 0,      /* reciprocal rank fusion */
    BB_FUSE_WEIGHTED = 1  /* weighted sum of min-max normalised scores */
};

/* Thread limits. */
enum {
    BB_MAX_THREADS = 64,
    BB_AUTO_MAX_THREADS = 8
};

/* A static, human-readable message for a status code ("ok", "k must be > 0", ...). */
const char *bb_strerror(int status);

/* The name of the code path `simd` resolves to on this CPU:
 * "avx2-fma", "neon" or "scalar". */
const char *bb_backend(int simd);

/* Number of CPUs this process may run on (online CPUs, limited by the sched affinity
 * mask on Linux), as detected once. */
int bb_cpu_count(void);

/* The thread count `n_threads` (0 = auto) resolves to for a scan that reads `bytes`
 * bytes over `rows` rows. Exposed so tests and benchmarks can see the decision. */
int bb_resolve_threads(int n_threads, int64_t rows, int64_t bytes);

/*
 * Exact cosine top-k: scores = queries @ matrix.T (the vectors are assumed
 * L2-normalised, so the dot product is the cosine).
 *
 *   matrix      float32 [n, d]   may be NULL when n == 0
 *   queries     float32 [q, d]   must be finite (BB_ERR_NAN otherwise)
 *   mask        uint8   [n]      or NULL
 *   out_ids     int64   [q, k]   row ids, best first, -1 padded
 *   out_scores  float32 [q, k]   dot products, -INFINITY padded
 *
 * n >= 0, d >= 1, q >= 0, k >= 1. q == 1 is a streaming scan (memory-bandwidth
 * bound); q > 1 is a register-blocked matrix product (compute bound). The two sum in
 * different orders, so a query's scores alone and in a batch agree to float rounding
 * (~1e-7 relative), not bit for bit; within one call equal rows score equal.
 */
int bb_cosine_topk(const float *matrix, int64_t n, int64_t d,
                   const float *queries, int64_t q, int64_t k,
                   const uint8_t *mask, int n_threads, int simd,
                   int64_t *out_ids, float *out_scores);

/*
 * Symmetric per-row int8 quantisation, for the compact copy that
 * bb_cosine_topk_int8 scans: with a = max_j |x[i,j]|,
 *   scale[i] = a / 127;  code[i,j] = clamp(rint((x[i,j] * L) * (127 / (a * L))), -127, 127)
 * in float32 arithmetic, round-half-to-even (a zero row gets scale 0 and codes 0).
 * L = 2^100 when a < 2^-100, else 1: below ~3.7e-37, 127 / a overflows to infinity
 * (and 0 * inf is NaN); scaling by a power of two is exact, so L changes no code that
 * was defined without it. brainbot/kernel/reference.py computes the identical bytes.
 *
 *   matrix      float32 [n, d]   finite values
 *   simd        BB_SIMD_AUTO or BB_SIMD_SCALAR (both give the same bytes; tests check)
 *   out_codes   int8    [n, d]
 *   out_scales  float32 [n]
 */
int bb_quantize_int8(const float *matrix, int64_t n, int64_t d, int simd,
                     int8_t *out_codes, float *out_scales);

/* The candidate pool bb_cosine_topk_int8 uses when pool == 0: max(4 * k, 64). */
int64_t bb_default_pool(int64_t k);

/*
 * Cosine top-k over the int8 copy, then exact rescoring:
 *   1. the query is quantised like a row (symmetric int8, its own scale);
 *   2. every allowed row gets approx[i] = (float)(sum_j code[i,j] * qcode[j]) * scale[i]
 *      (the integer sum is exact; ties -> lower id);
 *   3. the best `pool` rows by approx are rescored exactly in float32 from `matrix`
 *      with the dot product of bb_cosine_topk's single-query path, and the best k of
 *      them returned.
 * So out_scores are exact dots, bit-identical to bb_cosine_topk(q = 1) for the same ids,
 * and the ids equal the exact top-k whenever the true top-k falls inside the pool.
 *
 *   codes       int8    [n, d]   from bb_quantize_int8 (values in [-127, 127])
 *   scales      float32 [n]
 *   matrix      float32 [n, d]   the full-precision rows (only `pool` rows are read per query)
 *   queries     float32 [q, d]
 *   pool        0 = bb_default_pool(k); a pool < k is raised to k
 *   mask        uint8   [n] or NULL
 *   out_ids     int64   [q, k];  out_scores float32 [q, k]
 *   out_floor   float32 [q] or NULL: the lowest approx value in each query's pool, which
 *               bounds the approx value of every allowed row left out of it (what a
 *               caller needs to prove the ids exact, brainbot/kernel/int8_scan.py);
 *               -INFINITY when the pool is not full (fewer allowed rows than pool, or
 *               pool >= n): then it holds every allowed row
 */
int bb_cosine_topk_int8(const int8_t *codes, const float *scales, const float *matrix,
                        int64_t n, int64_t d,
                        const float *queries, int64_t q, int64_t k, int64_t pool,
                        const uint8_t *mask, int n_threads, int simd,
                        int64_t *out_ids, float *out_scores, float *out_floor);

/*
 * BM25 top-k over postings in CSR form (term-at-a-time into a dense accumulator).
 *
 *   indptr       int64   [n_terms + 1]  postings of term t are [indptr[t], indptr[t+1])
 *   doc_ids      int32   [nnz]          doc ids, strictly increasing within a term
 *   tfs          float32 [nnz]          term frequencies
 *   doc_len      float32 [n_docs]       document lengths (in the analyzer's tokens)
 *   idf          float32 [n_terms]      idf per term, computed by the caller
 *   query_terms  int32   [m]            term ids (repeats allowed: they add up)
 *   weights      float32 [m]            per query term weight, or NULL (all 1)
 *   k1, b, avgdl the BM25 parameters: k1 >= 0, 0 <= b <= 1, avgdl > 0, all finite
 *   mask         uint8   [n_docs] or NULL
 *   out_ids      int64   [k];  out_scores float32 [k]
 *
 * score(doc) = sum over query terms t containing doc of
 *     c_t * tf / (tf + (A + B * len))   with  c_t = (w_t * idf_t) * (k1 + 1),
 *                                             A = k1 * (1 - b),  B = (k1 * b) / avgdl,
 * evaluated in float32 in exactly that order, terms in query order; this is the classic
 * w * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl)). Only documents that
 * contain at least one query term are eligible. Ids are range-checked (BB_ERR_RANGE).
 */
int bb_bm25_topk(const int64_t *indptr, int64_t n_terms,
                 const int32_t *doc_ids, const float *tfs, int64_t nnz,
                 const float *doc_len, int64_t n_docs, const float *idf,
                 const int32_t *query_terms, const float *weights, int64_t m,
                 float k1, float b, float avgdl, int64_t k,
                 const uint8_t *mask, int simd,
                 int64_t *out_ids, float *out_scores);

/*
 * Fuse two ranked legs into a final top-k.
 *
 *   ids_a     int64   [na]  leg A in rank order, best first; ids < 0 are padding
 *   scores_a  float32 [na]  leg A's raw scores
 *   ids_b, scores_b         the same for leg B ([nb])
 *   method    BB_FUSE_RRF:      fused = w_a / (rrf_k + rank_a) + w_b / (rrf_k + rank_b)
 *             BB_FUSE_WEIGHTED: fused = w_a * norm_a + w_b * norm_b, where
 *                               norm = (s - min) / (max - min) over the leg's own
 *                               entries (1 when max == min); an absent leg adds 0
 *   rrf_k     >= 0 and finite (RRF only); weight_a, weight_b finite
 *   out_ids     int64   [k]   fused ids, best first (-1 padded)
 *   out_scores  float32 [k]   fused scores (-INFINITY padded)
 *   out_rank_a  int32   [k]   1-based rank in leg A, 0 if absent
 *   out_score_a float32 [k]   raw score in leg A, NaN if absent
 *   out_rank_b, out_score_b   the same for leg B
 *
 * Ranks count only the entries kept (padding skipped); an id repeated within a leg keeps
 * its first (best) occurrence. All arithmetic is float32 (ranks converted exactly). For
 * BB_FUSE_WEIGHTED, a non-finite score on a kept entry is BB_ERR_NAN.
 */
int bb_fuse(const int64_t *ids_a, const float *scores_a, int64_t na,
            const int64_t *ids_b, const float *scores_b, int64_t nb,
            int64_t k, int method, float rrf_k, float weight_a, float weight_b,
            int64_t *out_ids, float *out_scores,
            int32_t *out_rank_a, float *out_score_a,
            int32_t *out_rank_b, float *out_score_b);

/*
 * Memory-bandwidth probe for benchmarks: reads x float32 [n] once, streaming, with
 * n_threads threads (0 = auto) and writes the sum to *out_sum (as a checksum, so the
 * read cannot be optimised away). streams: read streams per thread, 2 or 4 (0 = 2);
 * which is faster depends on the host and the size, so a benchmark's bound is the
 * faster of the two. Only the AVX2 path reads in streams (the others ignore it).
 */
int bb_stream_sum(const float *x, int64_t n, int n_threads, int simd, int streams,
                  double *out_sum);

/* BB_CDEF_END */

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------------------------
 * Internal interface between the C files of csrc/. Not part of the API (not in the cdef);
 * visible only to translation units that define BB_KERNEL_INTERNAL.
 * ------------------------------------------------------------------------------------ */
#ifdef BB_KERNEL_INTERNAL

/* A scored candidate. */
typedef struct {
    float score;
    int64_t id;
} bb_item;

/*
 * A bounded selection heap of the `cap` best items under the total order
 * (score desc, id asc); the root is the worst item kept. NaN scores are refused.
 * `thr` is the root's score once full (-INFINITY before), for a cheap pre-filter:
 * a candidate with score < thr can never enter.
 * A heap with a spill buffer (bb_heap_init_spill, for a large cap) takes what beats the
 * root, once full, into the buffer unsorted, and when the buffer is full keeps the cap
 * best of heap and buffer (a selection, then a heapify): O(1) an entry instead of
 * O(log cap). The items kept are the same; `thr` lags until the next flush, which only
 * lets more candidates through to the buffer. items[0..count) is a heap again after
 * bb_heap_flush (bb_heap_sort flushes first).
 */
typedef struct {
    bb_item *items;  /* [cap + spill]: the heap, then the spill buffer */
    int64_t count;
    int64_t cap;
    int64_t spill;   /* buffer capacity; 0: a plain heap */
    int64_t spilled; /* items waiting in items[cap .. cap + spilled) */
    float thr;
} bb_heap;

/* From this cap on, bb_heap_init_spill gives a heap a buffer of cap items. At 1M x 384
 * int8 rows with a pool of 7,812 the heap's sifts took ~18 % of the scan's CPU. */
#define BB_SPILL_MIN 1024

void bb_heap_init(bb_heap *h, bb_item *storage, int64_t cap);
/* The storage slots bb_heap_init_spill needs for a heap of cap: cap, or 2 cap. */
int64_t bb_heap_slots(int64_t cap);
void bb_heap_init_spill(bb_heap *h, bb_item *storage, int64_t cap);
/* Offer (score, id); keeps the cap best items. */
void bb_heap_offer(bb_heap *h, float score, int64_t id);
/* Fold the spill buffer in: items[0..count) is then the heap of the cap best. */
void bb_heap_flush(bb_heap *h);
/* Sort the heap's items best first into items[0..count) (destroys the heap order). */
void bb_heap_sort(bb_heap *h);
/* Write the sorted items to out_ids/out_scores [k], padding with -1 / -INFINITY. */
void bb_heap_emit(const bb_heap *h, int64_t k, int64_t *out_ids, float *out_scores);

/* Fast pre-filter used in the scan loops: may (score, id) enter the heap? A score equal
 * to the root's goes on to bb_heap_offer, which decides by id: a thread's lanes offer
 * rows out of id order (bb_lane_block). NaN never passes. */
#define BB_HEAP_WANTS(h, s) ((s) >= (h)->thr)

/*
 * The per-architecture kernels. Each table entry computes the same quantity; the
 * scalar table is always present and complete. An architecture's table may leave an
 * entry NULL where it has no faster version than the scalar one (bb_ops_neon has no
 * quant_i8: nothing here can run NEON code to test it). bb_select_ops never hands out a
 * NULL entry: it fills them from bb_ops_scalar, in that one place (dispatch.c), so the
 * kernels call every entry of the table they get without checking.
 * Within one entry, a (row, query) dot is always summed in one fixed order, whatever
 * rows were grouped with it, so a duplicated row gets a bit-identical score and ties
 * are real ties. dot_rows and dot_f32 may use different orders (see simd_avx2.c), so
 * single-query and batch scores agree to rounding, not bit for bit.
 */
typedef struct {
    const char *name;
    /* Streaming dots for one query: out[u] = dot(matrix + idx[u] * d, q) for u < nb.
     * The single-query and rescoring path (memory bound: one pass, sequential rows). */
    void (*dot_rows)(const float *matrix, const int64_t *idx, int64_t nb, int64_t d,
                     const float *q, float *out);
    /* Register-blocked dots for a batch: out[r * rs + j * qs_] = dot(rows[r], queries[j])
     * for r < nr (<= 4), j < nq; rows point to float32 [d] vectors, queries is
     * float32 [nq, d]. (Compute bound: rows are reused from L1 across queries.) */
    void (*dot_f32)(const float *const *rows, int nr, const float *queries, int64_t nq,
                    int64_t d, float *out, int64_t rs, int64_t qs_);
    /* out[u] = sum_j codes[idx[u] * d + j] * q[j], exactly in int32, for u < nb. Codes and
     * query codes must lie in [-127, 127] (bb_quantize_int8's range). */
    void (*dot_i8)(const int8_t *codes, const int64_t *idx, int64_t nb, int64_t d,
                   const int8_t *q, int32_t *out);
    /* contrib[p] = c * tf[p] / (tf[p] + (A + B * doc_len[ids[p]])) for p < cnt; returns
     * BB_ERR_RANGE if some ids[p] is outside [0, n_docs). */
    int (*bm25_contrib)(const int32_t *ids, const float *tf, int64_t cnt,
                        const float *doc_len, int64_t n_docs, float c, float A, float B,
                        float *contrib);
    /* Quantise one row x float32 [d] to codes int8 [d] and *scale (bb_quantize_int8). */
    void (*quant_i8)(const float *x, int64_t d, int8_t *codes, float *scale);
    /* Sum of x[0..n) (bandwidth probe), read the fastest ways the table knows (AVX2:
     * `streams` (2 or 4) parts in lockstep, each prefetched 3 KB ahead). */
    double (*sum_f32)(const float *x, int64_t n, int streams);
} bb_ops;

extern const bb_ops bb_ops_scalar;
#if defined(__x86_64__) || defined(_M_X64)
extern const bb_ops bb_ops_avx2;
#endif
#if defined(__aarch64__)
extern const bb_ops bb_ops_neon;
#endif

/* The table for `simd`, every entry non-NULL; NULL if simd is not a BB_SIMD_* value. */
const bb_ops *bb_select_ops(int simd);

/* Run fn(arg_i) for i < n_threads, arg_i = (char *)args + i * stride; the calling thread
 * runs index 0. Returns BB_OK or BB_ERR_THREAD (then nothing was left running). */
int bb_parallel(int n_threads, void (*fn)(void *), void *args, size_t stride);

/* bb_quantize_int8's lift: rows with max |x| < BB_QUANT_TINY are multiplied by
 * BB_QUANT_LIFT (exactly) before 127 / max is taken (the formula in the API above). */
#define BB_QUANT_TINY 0x1p-100f
#define BB_QUANT_LIFT 0x1p100f

/* The most read streams per thread of a one-query scan (rows from as many far-apart
 * places in flight): without a software prefetch, one sequential stream read 100k x 384
 * f32 ~1.2-1.4x slower than four far apart on the Intel Xeon host (README "Search
 * kernels"). The int8 scan uses four (quant.c); the f32 scan, which prefetches, two
 * (cosine.c). */
#define BB_SCAN_LANES 4
/* The most rows bb_lane_block takes from one lane per call. */
#define BB_LANE_ROWS 256

/* One lane of a row-parallel scan (bb_scan_rows): a thread scans its `lanes` consecutive
 * parts side by side, each with its own rows, into the thread's heaps. */
typedef struct bb_scan_part {
    void (*scan)(const struct bb_scan_part *part);
    const void *ctx;    /* the scan's own arguments, shared by all threads */
    int thread;         /* 0 <= thread < n_threads: to find per-thread scratch in ctx */
    int lanes;          /* parts this thread scans: part[0..lanes) (set in the first) */
    int64_t begin, end; /* this lane's rows [begin, end) */
    bb_heap *heaps;     /* [nq]: this thread's heap for each query (its lanes share it) */
} bb_scan_part;

/*
 * The fan-out of the cosine and int8 scans: rows [0, n) are split evenly into
 * n_threads * lanes parts (threads 1..BB_MAX_THREADS, lanes 1..BB_SCAN_LANES), and thread
 * t runs scan(parts + t * lanes), its `lanes` parts, with nq empty heaps of capacity cap
 * (bb_heap_init_spill). The threads' heaps are then merged query by query into the first
 * thread's and flushed, so on BB_OK heaps[j] (j < nq) is a heap of query j's cap best
 * rows over all of them, unsorted; the same items whatever the thread and lane counts
 * (the heap order is total).
 *   heaps  bb_heap [n_threads * nq];   items  bb_item [n_threads * nq * bb_heap_slots(cap)]
 * Returns BB_OK or BB_ERR_THREAD.
 */
int bb_scan_rows(int n_threads, int lanes, int64_t n, int64_t nq, int64_t cap,
                 void (*scan)(const bb_scan_part *), const void *ctx,
                 bb_heap *heaps, bb_item *items);

/* The next block of a thread's lanes, interleaved: up to `per_lane` rows from each
 * lane's position pos[l] (advanced past them), the ones mask allows (all when NULL),
 * into idx in the order lane 0, 1, .., lanes-1, lane 0, ... Within a lane the ids
 * ascend. Returns how many (0: every lane is done). */
int64_t bb_lane_block(const bb_scan_part *part, int64_t *pos, const uint8_t *mask,
                      int64_t per_lane, int64_t *idx);

/* 1 if every value of x[0..n) is finite. */
int bb_all_finite(const float *x, int64_t n);

/* The ids in [b0, b1) that mask allows (all of them when mask is NULL) into idx, in
 * increasing order; returns how many. The scan loops score rows a block at a time. */
static inline int64_t bb_block_ids(const uint8_t *mask, int64_t b0, int64_t b1,
                                   int64_t *idx) {
    int64_t nb = 0;
    if (mask) {
        for (int64_t i = b0; i < b1; i++)
            if (mask[i]) idx[nb++] = i;
    } else {
        for (int64_t i = b0; i < b1; i++) idx[nb++] = i;
    }
    return nb;
}

#endif /* BB_KERNEL_INTERNAL */

#endif /* BRAINBOT_KERNEL_H */
