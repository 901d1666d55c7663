/* threadpool.c — persistent pthreads with spin-then-sleep dispatch.
 *
 * Protocol (all shared state is C11 atomics or written before a release that
 * the readers acquire):
 *   run:     caller writes fn/ctx, resets n_done, bumps `gen` (seq_cst), wakes
 *            sleepers if any, runs ith 0, then waits for n_done == nth-1.
 *   worker:  waits for gen != seen (spin ~SPIN_NS, then cond-wait with
 *            n_sleeping announced under the mutex), runs fn, bumps n_done
 *            (release).
 *   barrier: arrival counter + phase counter (ggml's scheme).
 * The seq_cst pair (gen bump, n_sleeping load) vs (n_sleeping++, gen load)
 * guarantees a worker never sleeps through a new generation. */
#define _POSIX_C_SOURCE 200809L
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"

#define SPIN_NS 300000LL /* how long an idle worker polls before sleeping */
#define MAX_THREADS 256
#define WORKER_STACK ((size_t)2 << 20) /* see coli_pool_create */

struct coli_pool {
    int n;                    /* threads, caller included */
    pthread_t *threads;       /* n - 1 workers */
    coli_pool_fn fn;          /* job: written before gen bump, read after */
    void *ctx;
    atomic_uint gen;          /* job generation */
    atomic_int n_done;        /* workers finished with the current job */
    atomic_bool stop;
    atomic_int bar_count;     /* barrier arrivals */
    atomic_uint bar_phase;    /* barrier generation */
    atomic_int n_sleeping;
    /* run_shared: generation (high 32 bits) | SHARED | OPEN | workers joined */
    atomic_ullong join;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

typedef struct {
    coli_pool *pool;
    int ith;
} worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spin until *a != old or the budget is spent; returns the value seen. */
static unsigned spin_while_equal(atomic_uint *a, unsigned old, int64_t budget_ns) {
    int64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        unsigned v = atomic_load_explicit(a, memory_order_acquire);
        if (v != old) return v;
        cpu_relax();
        if ((i & 255) == 0) {
            int64_t t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > budget_ns) return v;
        }
    }
}

#define JOIN_SHARED (1ull << 31)
#define JOIN_OPEN (1ull << 30)
#define JOIN_COUNT 0xffffull

/* A shared run takes a worker only while its job is open and of the
 * generation the worker saw; returns 1 when this worker joined. */
static int try_join(coli_pool *pool, unsigned g) {
    unsigned long long s = atomic_load_explicit(&pool->join, memory_order_acquire);
    for (;;) {
        if ((unsigned)(s >> 32) != g || !(s & JOIN_OPEN)) return 0;
        if (atomic_compare_exchange_weak_explicit(&pool->join, &s, s + 1, memory_order_acq_rel, memory_order_acquire))
            return 1;
    }
}

static void *worker_main(void *p) {
    worker_arg *wa = p;
    coli_pool *pool = wa->pool;
    const int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned g = spin_while_equal(&pool->gen, seen, SPIN_NS);
        if (g == seen) {
            pthread_mutex_lock(&pool->mu);
            atomic_fetch_add(&pool->n_sleeping, 1);
            while ((g = atomic_load(&pool->gen)) == seen) pthread_cond_wait(&pool->cv, &pool->mu);
            atomic_fetch_sub(&pool->n_sleeping, 1);
            pthread_mutex_unlock(&pool->mu);
        }
        seen = g;
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) break;
        const unsigned long long js = atomic_load_explicit(&pool->join, memory_order_acquire);
        if ((unsigned)(js >> 32) != g) continue;  /* a shared run we missed; the caller moved on */
        if ((js & JOIN_SHARED) && !try_join(pool, g)) continue;  /* too late: the caller did the work */
        pool->fn(pool->ctx, ith, pool->n);
        atomic_fetch_add_explicit(&pool->n_done, 1, memory_order_release);
    }
    return NULL;
}

static void wake(coli_pool *pool) {
    if (atomic_load(&pool->n_sleeping) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->cv);
        pthread_mutex_unlock(&pool->mu);
    }
}

coli_pool *coli_pool_create(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    coli_pool *pool = calloc(1, sizeof *pool);
    if (!pool) { coli_fail(COLI_E_NOMEM, "thread pool"); return NULL; }
    pool->n = 1;
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->n_done, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->bar_count, 0);
    atomic_init(&pool->bar_phase, 0);
    atomic_init(&pool->n_sleeping, 0);
    atomic_init(&pool->join, 0);
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
    if (n_threads == 1) return pool;
    pool->threads = calloc((size_t)n_threads - 1, sizeof(pthread_t));
    if (!pool->threads) { coli_pool_free(pool); coli_fail(COLI_E_NOMEM, "thread pool"); return NULL; }
    /* the kernels keep up to ~100 KiB of tiles on the stack: ask for 2 MiB
     * where the C library's default is small (musl: 128 KiB) */
    pthread_attr_t attr;
    const int have_attr = pthread_attr_init(&attr) == 0;
    size_t stack = 0;
    if (have_attr && pthread_attr_getstacksize(&attr, &stack) == 0 && stack < WORKER_STACK)
        pthread_attr_setstacksize(&attr, WORKER_STACK);
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        int rc = wa ? 0 : -1;
        if (wa) {
            wa->pool = pool;
            wa->ith = i;
            rc = pthread_create(&pool->threads[i - 1], have_attr ? &attr : NULL, worker_main, wa);
            if (rc) free(wa);
        }
        if (rc) {
            if (have_attr) pthread_attr_destroy(&attr);
            coli_pool_free(pool);  /* joins the pool->n - 1 started so far */
            coli_fail(COLI_E_NOMEM, "thread pool: cannot start thread %d of %d", i, n_threads);
            return NULL;
        }
        pool->n = i + 1;
    }
    if (have_attr) pthread_attr_destroy(&attr);
    return pool;
}

void coli_pool_free(coli_pool *pool) {
    if (!pool) return;
    if (pool->n > 1) {
        atomic_store_explicit(&pool->stop, true, memory_order_release);
        atomic_fetch_add(&pool->gen, 1);
        wake(pool);
        for (int i = 0; i < pool->n - 1; i++) pthread_join(pool->threads[i], NULL);
    }
    free(pool->threads);
    pthread_cond_destroy(&pool->cv);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

int coli_pool_size(const coli_pool *pool) { return pool ? pool->n : 1; }

/* Hand a job to the workers: fn/ctx/n_done/join are published by the
 * seq_cst increment of the generation that wakes them. */
static void publish(coli_pool *pool, coli_pool_fn fn, void *ctx, unsigned long long join_bits) {
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->n_done, 0, memory_order_relaxed);
    const unsigned g = atomic_load_explicit(&pool->gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&pool->join, ((unsigned long long)g << 32) | join_bits, memory_order_release);
    atomic_fetch_add(&pool->gen, 1);
    wake(pool);
}

/* Spin until `n` workers have finished the job. */
static void wait_done(coli_pool *pool, int n) {
    for (unsigned i = 1; atomic_load_explicit(&pool->n_done, memory_order_acquire) != n; i++) {
        cpu_relax();
        if ((i & 1023) == 0) sched_yield();  /* a worker may have been preempted */
    }
}

void coli_pool_run(coli_pool *pool, coli_pool_fn fn, void *ctx) {
    if (!pool || pool->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    publish(pool, fn, ctx, 0);
    fn(ctx, 0, pool->n);
    wait_done(pool, pool->n - 1);
}

void coli_pool_run_shared(coli_pool *pool, coli_pool_fn fn, void *ctx) {
    if (!pool || pool->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    publish(pool, fn, ctx, JOIN_SHARED | JOIN_OPEN);
    fn(ctx, 0, pool->n);
    /* close the job: workers that have not joined yet will skip it */
    const unsigned long long s = atomic_fetch_and_explicit(&pool->join, ~JOIN_OPEN, memory_order_acq_rel);
    wait_done(pool, (int)(s & JOIN_COUNT));
}

void coli_pool_barrier(coli_pool *pool) {
    if (!pool || pool->n == 1) return;
    const unsigned phase = atomic_load_explicit(&pool->bar_phase, memory_order_relaxed);
    if (atomic_fetch_add(&pool->bar_count, 1) == pool->n - 1) {
        atomic_store_explicit(&pool->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add(&pool->bar_phase, 1);  /* seq_cst: releases the reset and our writes */
        return;
    }
    for (unsigned i = 1; atomic_load_explicit(&pool->bar_phase, memory_order_acquire) == phase; i++) {
        cpu_relax();
        if ((i & 1023) == 0) sched_yield();
    }
}

void coli_lanes_init(coli_lanes *l, long long n, int nth) {
    l->n = n > 0 ? n : 0;
    l->n_lanes = nth < 1 ? 1 : nth > COLI_LANES ? COLI_LANES : nth;
    l->per_lane = (l->n + l->n_lanes - 1) / l->n_lanes;
    for (int i = 0; i < l->n_lanes; i++) atomic_init(&l->lane[i].next, 0);
}

long long coli_lanes_claim(coli_lanes *l, int *lane) {
    for (int t = 0; t < l->n_lanes; t++) {
        const int i = (*lane + t) % l->n_lanes;
        const long long start = (long long)i * l->per_lane, end = start + l->per_lane < l->n ? start + l->per_lane : l->n;
        if (start + atomic_load_explicit(&l->lane[i].next, memory_order_relaxed) >= end) continue; /* spent */
        const long long k = start + atomic_fetch_add_explicit(&l->lane[i].next, 1, memory_order_relaxed);
        if (k < end) {
            *lane = i;
            return k;
        }
    }
    return -1;
}

/* ---- topology ------------------------------------------------------------------- */

static int read_int_file(const char *path, int *out) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fscanf(f, "%d", out) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

static int count_unique(const long *keys, int n) {
    int u = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = keys[j] == keys[i];
        u += !seen;
    }
    return u;
}

int coli_physical_cores(void) {
    enum { MAX_CPUS = 1024 };
    long *k = malloc(MAX_CPUS * sizeof *k);
    int n = 0;
    if (k) {
        char path[128];
        for (int cpu = 0; cpu < MAX_CPUS; cpu++) {
            int pkg, core;
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
            if (read_int_file(path, &pkg)) {
                if (cpu > 0 && n > 0) break;
                continue;
            }
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
            if (read_int_file(path, &core)) continue;
            k[n++] = (long)pkg * 100000 + core;
        }
        if (n == 0) {  /* /proc/cpuinfo: "physical id" and "core id" lines */
            FILE *f = fopen("/proc/cpuinfo", "r");
            if (f) {
                char line[256];
                int pkg = 0;
                while (fgets(line, sizeof line, f) && n < MAX_CPUS) {
                    int v;
                    if (sscanf(line, "physical id : %d", &v) == 1) pkg = v;
                    else if (sscanf(line, "core id : %d", &v) == 1) k[n++] = (long)pkg * 100000 + v;
                }
                fclose(f);
            }
        }
    }
    int cores = n ? count_unique(k, n) : 0;
    free(k);
    if (cores <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        cores = c > 0 ? (int)c : 1;
    }
    return cores;
}
