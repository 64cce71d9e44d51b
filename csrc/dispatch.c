/*
 * dispatch.c -- runtime SIMD selection, CPU count, threads, status messages.
 *
 * The only global state of the kernel lives here: the CPU features, the CPU count and
 * the completed SIMD table, set once through pthread_once and read-only afterwards.
 * Which code path runs is chosen per call (the `simd` argument), never through a
 * global switch.
 */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) under -std=c11 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
#if defined(__x86_64__) || defined(_M_X64)
static int cpu_has_avx2_fma = 0;
#endif
#if defined(__aarch64__)
static int cpu_has_neon = 0;
#endif
static int cpu_count = 1;
/* The SIMD table of this CPU with its NULL entries taken from bb_ops_scalar (kernel.h:
 * a table may leave out what it has no faster version of). Filled once in cpu_detect. */
static bb_ops cpu_ops;
static const bb_ops *cpu_table = &bb_ops_scalar;

/* Adding an entry to bb_ops means adding it to fill_from_scalar too. */
_Static_assert(sizeof(bb_ops) == sizeof(const char *) + 6 * sizeof(void (*)(void)),
               "bb_ops changed: update fill_from_scalar");

static void fill_from_scalar(bb_ops *t) {
    const bb_ops *s = &bb_ops_scalar;
    if (!t->dot_rows) t->dot_rows = s->dot_rows;
    if (!t->dot_f32) t->dot_f32 = s->dot_f32;
    if (!t->dot_i8) t->dot_i8 = s->dot_i8;
    if (!t->bm25_contrib) t->bm25_contrib = s->bm25_contrib;
    if (!t->quant_i8) t->quant_i8 = s->quant_i8;
    if (!t->sum_f32) t->sum_f32 = s->sum_f32;
}

static void cpu_detect(void) {
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    cpu_has_avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#if defined(__aarch64__)
    cpu_has_neon = 1; /* Advanced SIMD is mandatory on AArch64. */
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
#if defined(__linux__)
    /* Under taskset / a container's cpuset the process may run on fewer CPUs than are
     * online: a thread per online CPU would then only wait for a core. */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 1 &&
        CPU_COUNT(&set) < n)
        n = CPU_COUNT(&set);
#endif
    cpu_count = n < 1 ? 1 : (n > BB_MAX_THREADS ? BB_MAX_THREADS : (int)n);
    const bb_ops *simd = NULL;
#if defined(__x86_64__) || defined(_M_X64)
    if (cpu_has_avx2_fma) simd = &bb_ops_avx2;
#endif
#if defined(__aarch64__)
    if (cpu_has_neon) simd = &bb_ops_neon;
#endif
    if (simd) {
        cpu_ops = *simd;
        fill_from_scalar(&cpu_ops);
        cpu_table = &cpu_ops;
    }
}

const bb_ops *bb_select_ops(int simd) {
    pthread_once(&cpu_once, cpu_detect);
    if (simd == BB_SIMD_SCALAR) return &bb_ops_scalar;
    if (simd != BB_SIMD_AUTO) return NULL;
    return cpu_table;
}

const char *bb_backend(int simd) {
    const bb_ops *ops = bb_select_ops(simd);
    return ops ? ops->name : "invalid";
}

int bb_cpu_count(void) {
    pthread_once(&cpu_once, cpu_detect);
    return cpu_count;
}

/*
 * Below BB_THREAD_MIN_BYTES a scan stays on one thread. Starting and joining a pthread
 * costs 22-70 us here, and on this 2-core machine (idle) one f32 query on two threads
 * measured 0.79x the one-thread speed at 5k x 384 (7.7 MB) but 1.16x at 10k x 384
 * (15 MB); int8 was still slower on two threads at 3.8 MB. On a machine whose cores are
 * busy a second thread can only wait: pass n_threads = 1 there.
 */
#define BB_THREAD_MIN_BYTES (12 * 1024 * 1024)
/* Each thread gets at least this many rows, so tiny inputs never fan out. */
#define BB_THREAD_MIN_ROWS 1024

int bb_resolve_threads(int n_threads, int64_t rows, int64_t bytes) {
    int t;
    if (n_threads < 0) return 1;
    if (n_threads == 0) {
        if (bytes < BB_THREAD_MIN_BYTES) return 1;
        t = bb_cpu_count();
        if (t > BB_AUTO_MAX_THREADS) t = BB_AUTO_MAX_THREADS;
        if ((int64_t)t * BB_THREAD_MIN_ROWS > rows) t = (int)(rows / BB_THREAD_MIN_ROWS);
    } else {
        t = n_threads > BB_MAX_THREADS ? BB_MAX_THREADS : n_threads;
        if (t > rows) t = (int)rows;
    }
    return t < 1 ? 1 : t;
}

typedef struct {
    void (*fn)(void *);
    void *arg;
} thread_job;

static void *thread_main(void *p) {
    thread_job *j = (thread_job *)p;
    j->fn(j->arg);
    return NULL;
}

int bb_parallel(int n_threads, void (*fn)(void *), void *args, size_t stride) {
    pthread_t tid[BB_MAX_THREADS];
    thread_job jobs[BB_MAX_THREADS];
    int started = 0, status = BB_OK;
    if (n_threads > BB_MAX_THREADS) n_threads = BB_MAX_THREADS;
    for (int i = 1; i < n_threads; i++) {
        jobs[i].fn = fn;
        jobs[i].arg = (char *)args + (size_t)i * stride;
        if (pthread_create(&tid[i], NULL, thread_main, &jobs[i]) != 0) {
            status = BB_ERR_THREAD;
            break;
        }
        started = i;
    }
    if (status == BB_OK) fn(args);
    for (int i = 1; i <= started; i++) pthread_join(tid[i], NULL);
    return status;
}

int bb_all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

const char *bb_strerror(int status) {
    switch (status) {
    case BB_OK: return "ok";
    case BB_ERR_NULL: return "a required array is missing (NULL pointer)";
    case BB_ERR_K: return "k must be > 0";
    case BB_ERR_SHAPE: return "array sizes are invalid or disagree";
    case BB_ERR_NAN: return "NaN or infinity in a query, weight, idf or parameter";
    case BB_ERR_ARG: return "invalid argument";
    case BB_ERR_RANGE: return "an id or offset is out of range";
    case BB_ERR_NOMEM: return "out of memory";
    case BB_ERR_THREAD: return "could not start a worker thread";
    default: return "unknown status";
    }
}
