/* bench_iq23.c — the grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) against llama.cpp's
 * own kernels, single thread, on MoE expert shapes.
 *
 *   gcc -O3 -march=native -std=c11 -ffp-contract=off -Iengine/include engine/src/[a-z]*.c \
 *       bench/bench_iq23.c -lm -lpthread -ldl -o /tmp/bench_iq23
 *   /tmp/bench_iq23 .venv/lib/python3.11/site-packages/llama_cpp/lib [isa] [reps]
 *
 * decode: one activation row (already Q8_K) against every weight row, ggml's exported
 *         ggml_vec_dot_<t>_q8_K (its AVX2 kernel) vs our table's vec_dot;
 * batch:  the whole matmul of n_rows f32 rows (activation conversion included), ggml_mul_mat
 *         through ggml_graph_compute_with_ctx with 1 thread (its tiled matmul from 8 rows) vs
 *         coli_matmul without a pool.
 * Each case runs `reps` times (default 9), ggml and ours interleaved, each run the best of a few
 * calls in thread CPU time (robust to a busy machine); printed: the medians and their ratio
 * (ggml time / ours: above 1, ours is faster). Weights are random bytes with a sane d (every
 * byte pattern is a valid block of these types). BENCH_TYPE=IQ2_XXS picks a type; with it,
 * BENCH_SHAPE=n_in,n_out,rows runs that one shape (rows 0: decode). BENCH_LOOKUP=gather or loads:
 * the AVX-512 kernels' grid lookups that way (default: the faster here, measured at start). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/include/colibri.h"
#include "../engine/src/kernels.h"
#include "../engine/src/matmul.h"
#include "../engine/src/quant.h"

static double clk(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t g_rng = 88172645463325252ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)g_rng;
}

/* ---- the reference, through dlopen ---------------------------------------------------- */

struct ggml_init_params { size_t mem_size; void *mem_buffer; bool no_alloc; };
typedef void (*ggml_vec_dot_t)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by, int nrc);
static struct {
    void *(*init)(struct ggml_init_params);
    void (*free)(void *);
    void *(*new_tensor_2d)(void *, int, int64_t, int64_t);
    void *(*mul_mat)(void *, void *, void *);
    void *(*new_graph)(void *);
    void (*build_forward_expand)(void *, void *);
    void *(*get_data)(void *);
    int (*compute)(void *, void *, int);
    void (*cpu_init)(void);
    void *cpu;
} G;

static void *sym(void *so, const char *name) {
    void *p = dlsym(so, name);
    if (!p) {
        fprintf(stderr, "%s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

static void load_ggml(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libggml-base.so", dir);
    void *base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libggml-cpu.so", dir);
    G.cpu = base ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!G.cpu) {
        fprintf(stderr, "%s\n", dlerror());
        exit(1);
    }
    *(void **)&G.init = sym(base, "ggml_init");
    *(void **)&G.free = sym(base, "ggml_free");
    *(void **)&G.new_tensor_2d = sym(base, "ggml_new_tensor_2d");
    *(void **)&G.mul_mat = sym(base, "ggml_mul_mat");
    *(void **)&G.new_graph = sym(base, "ggml_new_graph");
    *(void **)&G.build_forward_expand = sym(base, "ggml_build_forward_expand");
    *(void **)&G.get_data = sym(base, "ggml_get_data");
    *(void **)&G.compute = sym(G.cpu, "ggml_graph_compute_with_ctx");
    *(void **)&G.cpu_init = sym(G.cpu, "ggml_cpu_init");
    G.cpu_init();
}

/* ---- one case ------------------------------------------------------------------------- */

typedef struct {
    uint32_t t;
    const char *name;
    int64_t n_in, n_out, n_rows;
    void *w, *xq;
    float *x, *y;
    void *scratch;
    ggml_vec_dot_t gdot;
    void *gctx, *gf; /* the reference's graph: y = mul_mat(w, x) */
} bench_case;

static void run_ggml(bench_case *c) {
    if (c->n_rows == 0) {
        const size_t rb = coli_row_size(c->t, c->n_in);
        for (int64_t o = 0; o < c->n_out; o++) c->gdot((int)c->n_in, c->y + o, 0, (const char *)c->w + o * rb, 0, c->xq, 0, 1);
    } else {
        G.compute(c->gctx, c->gf, 1);
    }
}

static void run_ours(bench_case *c) {
    if (c->n_rows == 0) {
        const coli_type_kernels *k = &coli_kernels()->type[c->t];
        const size_t rb = coli_row_size(c->t, c->n_in);
        for (int64_t o = 0; o < c->n_out; o++) k->vec_dot((int)c->n_in, (const char *)c->w + o * rb, c->xq, 0, c->y + o, 1, 1);
    } else {
        coli_matmul(NULL, c->w, c->t, c->n_in, c->n_out, c->x, c->n_rows, c->y, c->scratch);
    }
}

/* seconds per call: the best of 5 calls after a warm-up */
static double time_one(bench_case *c, void (*f)(bench_case *)) {
    f(c);
    double best = 1e9;
    for (int i = 0; i < 5; i++) {
        const double t0 = clk();
        f(c);
        const double dt = clk() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bench(uint32_t t, int64_t n_in, int64_t n_out, int64_t n_rows, int reps) {
    bench_case c = {.t = t, .name = ggml_type_get(t)->name, .n_in = n_in, .n_out = n_out, .n_rows = n_rows};
    const int64_t rows = n_rows ? n_rows : 1;
    const size_t wbytes = coli_row_size(t, n_in) * (size_t)n_out, tsz = ggml_type_get(t)->type_size;
    c.w = aligned_alloc(64, (wbytes + 63) & ~(size_t)63);
    uint8_t *p = c.w;
    for (size_t i = 0; i < wbytes; i++) p[i] = (uint8_t)rnd();
    const coli_half h = coli_fp32_to_fp16(0.002f);
    for (size_t b = 0; b < wbytes / tsz; b++) memcpy(p + b * tsz, &h, 2); /* d leads every block of these types */
    c.x = malloc(sizeof(float) * n_in * rows);
    for (int64_t i = 0; i < n_in * rows; i++) c.x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    c.y = malloc(sizeof(float) * n_out * rows);
    const size_t sb = coli_matmul_scratch_size(t, n_in, rows);
    c.scratch = aligned_alloc(64, (sb + 64) & ~(size_t)63);
    c.xq = aligned_alloc(64, (coli_row_size(GGML_TYPE_Q8_K, n_in) + 63) & ~(size_t)63);
    coli_kernels()->type[GGML_TYPE_Q8_K].from_float(c.x, c.xq, n_in);
    char fname[64];
    snprintf(fname, sizeof fname, "ggml_vec_dot_%s_q8_K", c.name);
    for (char *q = fname + 13; *q && q < fname + 13 + strlen(c.name); q++) *q = (char)(*q >= 'A' && *q <= 'Z' ? *q + 32 : *q);
    *(void **)&c.gdot = sym(G.cpu, fname);
    if (n_rows) {
        c.gctx = G.init((struct ggml_init_params){wbytes + sizeof(float) * n_in * rows * 3 + (160u << 20), NULL, false});
        void *wt = G.new_tensor_2d(c.gctx, (int)t, n_in, n_out);
        memcpy(G.get_data(wt), c.w, wbytes);
        void *xt = G.new_tensor_2d(c.gctx, GGML_TYPE_F32, n_in, n_rows);
        memcpy(G.get_data(xt), c.x, sizeof(float) * n_in * n_rows);
        void *yt = G.mul_mat(c.gctx, wt, xt);
        c.gf = G.new_graph(c.gctx);
        G.build_forward_expand(c.gf, yt);
    }
    double *tg = malloc(sizeof(double) * reps), *to = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        tg[r] = time_one(&c, run_ggml);
        to[r] = time_one(&c, run_ours);
    }
    qsort(tg, reps, sizeof *tg, cmp_d);
    qsort(to, reps, sizeof *to, cmp_d);
    const double mg = tg[reps / 2], mo = to[reps / 2];
    printf("%-8s %-6s n_in %5lld n_out %5lld rows %3lld: ggml %9.1f us  ours %9.1f us  ratio %.2f  (ours %.1f GB/s)\n",
           c.name, n_rows ? "batch" : "decode", (long long)n_in, (long long)n_out, (long long)rows, mg * 1e6, mo * 1e6,
           mg / mo, wbytes / mo / 1e9);
    fflush(stdout);
    if (c.gctx) G.free(c.gctx);
    free(tg); free(to); free(c.w); free(c.x); free(c.y); free(c.scratch); free(c.xq);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s LLAMA_CPP_LIB_DIR [isa] [reps] [rows ...]\n", argv[0]);
        return 1;
    }
    load_ggml(argv[1]);
    if (argc > 2 && colibri_kernel_set_isa(argv[2]) != 0) {
        fprintf(stderr, "%s\n", colibri_last_error());
        return 1;
    }
    /* BENCH_PREFETCH=l2: weights prefetched into L2, as a load picks on some CPUs (coli --version -v) */
    if (getenv("BENCH_PREFETCH") && colibri_kernel_set_prefetch(getenv("BENCH_PREFETCH")) != 0) {
        fprintf(stderr, "%s\n", colibri_last_error());
        return 1;
    }
    /* BENCH_LOOKUP=gather / loads: the AVX-512 kernels' grid lookups one way (default: the faster here) */
    if (getenv("BENCH_LOOKUP") && colibri_kernel_set_lookup(getenv("BENCH_LOOKUP")) != 0) {
        fprintf(stderr, "%s\n", colibri_last_error());
        return 1;
    }
    const int reps = argc > 3 ? atoi(argv[3]) : 9;
    int64_t batches[8] = {0, 8, 16, 32, 128}; /* 128: a prompt chunk, where a GEMM's blocking starts to pay */
    int nb = 5;
    if (argc > 4) {
        nb = 0;
        for (int i = 4; i < argc && nb < 8; i++) batches[nb++] = atoll(argv[i]);
    }
    double loads_ns, gather_ns;
    colibri_kernel_lookup_ns(&loads_ns, &gather_ns);
    printf("isa %s, cpu: %s, %d runs each (median); AVX-512 grid lookups by %s (%.1f ns loads, %.1f ns gathers)\n",
           colibri_kernel_isa(), colibri_cpu_features(), reps, colibri_kernel_lookup(), loads_ns, gather_ns);
    const uint32_t types[] = {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S};
    const char *only = getenv("BENCH_TYPE");
    const char *one = getenv("BENCH_SHAPE"); /* "n_in,n_out,rows" (rows 0: decode): that shape only */
    if (one) {
        long long ni, no, nr;
        if (!only || sscanf(one, "%lld,%lld,%lld", &ni, &no, &nr) != 3 || ni <= 0 || ni % QK_K || no <= 0 || nr < 0) {
            fprintf(stderr, "BENCH_SHAPE: expected n_in,n_out,rows and BENCH_TYPE\n");
            return 2;
        }
        for (int i = 0; i < 5; i++)
            if (!strcmp(only, ggml_type_get(types[i])->name)) {
                bench(types[i], ni, no, nr, reps);
                return 0;
            }
        return 2;
    }
    const int64_t shapes[][2] = {{2048, 768}, {768, 2048}, {7168, 2048}};
    for (int b = 0; b < nb; b++)
        for (int s = 0; s < 3; s++)
            for (int i = 0; i < 5; i++) {
                if (shapes[s][0] % QK_K || (only && strcmp(only, ggml_type_get(types[i])->name))) continue;
                bench(types[i], shapes[s][0], shapes[s][1], batches[b], reps);
            }
    return 0;
}
