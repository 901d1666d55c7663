/* threadpool.h — persistent worker threads for the matmuls.
 *
 * coli_pool_run() hands one function to every thread (the caller is thread 0)
 * and returns when all are done. Idle workers spin for a short while on an
 * atomic generation counter, then sleep on a condition variable, so decode's
 * ~150 small matmuls per token cost no syscalls while the pool is hot.
 * A pool is driven by one thread at a time; runs do not nest. */
#ifndef COLI_THREADPOOL_H
#define COLI_THREADPOOL_H

#include <stdatomic.h>

typedef struct coli_pool coli_pool;
typedef void (*coli_pool_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 (clamped to 1..256); NULL on failure (coli_fail set). */
coli_pool *coli_pool_create(int n_threads);
void coli_pool_free(coli_pool *pool);  /* NULL is fine */
int coli_pool_size(const coli_pool *pool);  /* 1 for NULL */
/* Runs fn(ctx, ith, nth) for ith in 0..nth-1; pool may be NULL (runs inline). */
void coli_pool_run(coli_pool *pool, coli_pool_fn fn, void *ctx);
/* Like coli_pool_run, but only the workers that are free in time join
 * (always the caller, as ith 0): fn must share its work dynamically (atomic
 * counters), never split it by ith nor use the barrier (ith may still pick a
 * thread's own scratch: each joined thread has its own). On a busy machine a
 * preempted worker then costs nothing instead of a time slice. */
void coli_pool_run_shared(coli_pool *pool, coli_pool_fn fn, void *ctx);
/* Inside a coli_pool_run: wait until all nth threads reach this point. */
void coli_pool_barrier(coli_pool *pool);
/* Work items 0 .. n - 1 in contiguous lanes, one per thread (up to
 * COLI_LANES), thread ith starting on lane ith and then helping the others:
 * each thread streams its own stretch of the weights, so the next tile the
 * kernels prefetch is its own and the hardware prefetcher's streams run on
 * (items dealt out in turn interleave the threads chunk by chunk). Claims are
 * atomic, so threads that never show up (coli_pool_run_shared) cost nothing. */
#define COLI_LANES 8
typedef struct {
    struct {
        _Alignas(64) atomic_llong next;  /* items claimed in this lane, from its start */
    } lane[COLI_LANES];
    int n_lanes;
    long long per_lane, n;
} coli_lanes;
void coli_lanes_init(coli_lanes *l, long long n, int nth);
/* The next item for a thread whose current lane is *lane (start: ith), or -1 when none is left. */
long long coli_lanes_claim(coli_lanes *l, int *lane);

/* Physical cores (unique package/core pairs), at least 1. */
int coli_physical_cores(void);

#endif
