/*
 * probe.c -- the memory-bandwidth probe the benchmarks divide by (bb_stream_sum):
 * the time to read an f32 array once is the floor for any exact scan of it.
 */
#define BB_KERNEL_INTERNAL
#include "kernel.h"

typedef struct {
    const bb_ops *ops;
    const float *x;
    int64_t begin, end;
    int streams;
    double sum;
} sum_task;

static void sum_range(void *arg) {
    sum_task *t = (sum_task *)arg;
    t->sum = t->ops->sum_f32(t->x + t->begin, t->end - t->begin, t->streams);
}

int bb_stream_sum(const float *x, int64_t n, int n_threads, int simd, int streams,
                  double *out_sum) {
    const bb_ops *ops = bb_select_ops(simd);
    if (!ops || n_threads < 0 || (streams != 0 && streams != 2 && streams != 4))
        return BB_ERR_ARG;
    if (n < 0) return BB_ERR_SHAPE;
    if (!out_sum || (n > 0 && !x)) return BB_ERR_NULL;
    /* Split in whole 4 KB pages so threads never share a cache line. */
    int nt = bb_resolve_threads(n_threads, n / 1024, n * (int64_t)sizeof(float));
    sum_task tasks[BB_MAX_THREADS];
    for (int t = 0; t < nt; t++) {
        tasks[t].ops = ops;
        tasks[t].x = x;
        tasks[t].streams = streams ? streams : 2;
        tasks[t].begin = (n / 1024 * t / nt) * 1024;
        tasks[t].end = t == nt - 1 ? n : (n / 1024 * (t + 1) / nt) * 1024;
    }
    int status = bb_parallel(nt, sum_range, tasks, sizeof(sum_task));
    double s = 0;
    for (int t = 0; t < nt && status == BB_OK; t++) s += tasks[t].sum;
    *out_sum = s;
    return status;
}
