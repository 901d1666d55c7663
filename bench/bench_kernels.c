/* bench_kernels.c — single-thread matmul throughput of the colibri kernels.
 *
 *   gcc -O3 -march=native -std=c11 -Iengine/include engine/src/(all .c) \
 *       bench/bench_kernels.c -lm -lpthread -o bench_kernels && ./bench_kernels [isa]
 *
 * Decode (n_rows = 1): weight GB/s = weight bytes / time. Prefill (n_rows =
 * 64): GFLOP/s = 2 * n_in * n_out * n_rows / time. Shapes are Gemma 3 270M's
 * (n_embd 640, n_ff 2048, vocab 262144 tied lm head). Also the thread-pool
 * dispatch latency. Weights are random bits with sane scales. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/include/colibri.h"
#include "../engine/src/matmul.h"
#include "../engine/src/quant.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* single-thread runs are timed in thread CPU time: robust to a busy machine */
static int g_cpu_clock;
static double clk(void) {
    struct timespec ts;
    clock_gettime(g_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t g_rng = 88172645463325252ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)g_rng;
}

static void fill(uint32_t t, void *w, size_t bytes) {
    uint8_t *p = w;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rnd();
    const ggml_type_traits *tt = ggml_type_get(t);
    const coli_half h = coli_fp32_to_fp16(0.01f);
    int off[2] = {-1, -1};
    switch (t) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: off[0] = 0; break;
    case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: off[0] = 0; off[1] = 2; break;
    case GGML_TYPE_Q6_K: off[0] = 208; break;
    case GGML_TYPE_F16: for (size_t i = 0; i < bytes / 2; i++) ((coli_half *)w)[i] = h; return;
    case GGML_TYPE_F32: for (size_t i = 0; i < bytes / 4; i++) ((float *)w)[i] = 0.01f; return;
    default: break;
    }
    for (size_t b = 0; b < bytes / tt->type_size; b++)
        for (int f = 0; f < 2; f++)
            if (off[f] >= 0) memcpy(p + b * tt->type_size + off[f], &h, 2);
}

/* seconds per call, best of 5 batches */
static double time_matmul(coli_pool *pool, uint32_t t, const void *w, int64_t n_in, int64_t n_out, const float *x,
                          int64_t n_rows, float *y, void *scratch, double min_s) {
    int iters = 1;
    g_cpu_clock = coli_pool_size(pool) == 1;
    for (;;) {
        double t0 = clk();
        for (int i = 0; i < iters; i++) coli_matmul(pool, w, t, n_in, n_out, x, n_rows, y, scratch);
        double dt = clk() - t0;
        if (dt > min_s) break;
        iters *= 2;
    }
    double best = 1e9;
    for (int rep = 0; rep < 7; rep++) {
        double t0 = clk();
        for (int i = 0; i < iters; i++) coli_matmul(pool, w, t, n_in, n_out, x, n_rows, y, scratch);
        double dt = (clk() - t0) / iters;
        if (dt < best) best = dt;
    }
    return best;
}

static void run(coli_pool *pool, uint32_t t, int64_t n_in, int64_t n_out, int64_t n_rows, const char *label) {
    const size_t wbytes = coli_row_size(t, n_in) * (size_t)n_out;
    void *w = aligned_alloc(64, (wbytes + 63) & ~(size_t)63);
    float *x = malloc(n_in * n_rows * sizeof(float)), *y = malloc(n_out * n_rows * sizeof(float));
    const size_t sb = coli_matmul_scratch_size(t, n_in, n_rows);
    void *scratch = aligned_alloc(64, (sb + 64) & ~(size_t)63);
    fill(t, w, wbytes);
    for (int64_t i = 0; i < n_in * n_rows; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    const double s = time_matmul(pool, t, w, n_in, n_out, x, n_rows, y, scratch, wbytes > 50e6 ? 0.3 : 0.05);
    printf("%-6s %-9s n_in %6lld n_out %7lld rows %3lld thr %d: %9.1f us  %7.1f GB/s  %7.1f GFLOP/s\n",
           ggml_type_get(t)->name, label, (long long)n_in, (long long)n_out, (long long)n_rows, coli_pool_size(pool),
           s * 1e6, wbytes / s / 1e9, 2.0 * n_in * n_out * n_rows / s / 1e9);
    free(w); free(x); free(y); free(scratch);
}

static void noop(void *ctx, int ith, int nth) { (void)ctx; (void)ith; (void)nth; }

int main(int argc, char **argv) {
    if (argc > 1 && colibri_kernel_set_isa(argv[1]) != 0) {
        fprintf(stderr, "%s\n", colibri_last_error());
        return 1;
    }
    printf("isa %s, cpu: %s, physical cores %d\n", colibri_kernel_isa(), colibri_cpu_features(), coli_physical_cores());
    const uint32_t q32[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_0};
    const uint32_t qk[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q5_K};
    for (int i = 0; i < 3; i++) run(NULL, q32[i], 640, 2048, 1, "decode");
    for (int i = 0; i < 3; i++) run(NULL, q32[i], 2048, 640, 1, "decode");
    for (int i = 0; i < 3; i++) run(NULL, qk[i], 2048, 640, 1, "decode");
    run(NULL, GGML_TYPE_F32, 640, 640, 1, "decode");
    run(NULL, GGML_TYPE_F16, 640, 640, 1, "decode");
    for (int i = 0; i < 3; i++) run(NULL, q32[i], 640, 2048, 64, "prefill");
    for (int i = 0; i < 3; i++) run(NULL, qk[i], 2048, 640, 64, "prefill");
    run(NULL, GGML_TYPE_Q8_0, 640, 262144, 1, "lm-head");
    coli_pool *pool = coli_pool_create(coli_physical_cores());
    run(pool, GGML_TYPE_Q8_0, 640, 262144, 1, "lm-head");
    run(pool, GGML_TYPE_Q4_K, 2048, 640, 1, "decode");
    run(pool, GGML_TYPE_Q4_K, 2048, 640, 64, "prefill");
    const int N = 20000;
    double t0 = now();
    for (int i = 0; i < N; i++) coli_pool_run(pool, noop, NULL);
    printf("pool dispatch (%d threads): %.2f us per run\n", coli_pool_size(pool), (now() - t0) / N * 1e6);
    coli_pool_free(pool);
    return 0;
}
