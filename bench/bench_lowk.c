/* bench_lowk.c — Q2_K, Q3_K, Q4_K, TQ1_0, TQ2_0 matmuls, ours against llama.cpp's
 * ggml on the same shapes, one thread each.
 *
 *   gcc -O3 -march=native -std=c11 -ffp-contract=off -pthread -Iengine/include \
 *       engine/src/(all .c) bench/bench_lowk.c -lm -ldl -o bench_lowk
 *   ./bench_lowk /path/to/llama_cpp/lib [isa] [rounds]
 *
 * ggml's side is a ggml_mul_mat graph on its CPU backend (1 thread), with
 * the weight in the buffer a model load gives it (CPU_REPACK for Q2_K when
 * n_out % 8 == 0 on an AVX-512 machine, for Q4_K when n_out % 8 == 0 on an
 * AVX2 one, as llama.cpp does); ours is
 * coli_matmul on the calling thread. Shapes are a MoE expert's (n_in 2048 /
 * n_out 768 and back) at 1 row (decode) and 8 / 16 / 32 rows (prefill). Each
 * round times both, one after the other (the machine is shared: rounds
 * interleave); reported: the median time per call of each side over the
 * rounds, and ggml / ours (> 1: ours is faster). Thread CPU time.
 * BENCH_TYPES=Q2_K,TQ1_0 picks types (Q5_K, Q6_K: only when named); BENCH_SHAPE=n_in,n_out,rows one shape;
 * BENCH_ATTN=1 adds the attention shapes (2048 -> 2048 / 512 / 4096) and the
 * row counts 2 and 4; BENCH_ROWS=1,2,4 picks the row counts. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/include/colibri.h"
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

/* ---- the few ggml calls a mul_mat needs (dlopen'd; opaque pointers) -------- */

struct ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};

static struct {
    void *(*init)(struct ggml_init_params);
    void (*free)(void *);
    void *(*new_tensor_2d)(void *, int, int64_t, int64_t);
    void *(*mul_mat)(void *, void *, void *);
    void *(*new_graph)(void *);
    void (*build_forward_expand)(void *, void *);
    void *(*alloc_ctx_tensors_from_buft)(void *, void *);
    void (*buffer_free)(void *);
    void (*tensor_set)(void *, const void *, size_t, size_t);
    int (*graph_compute)(void *, void *);
    void *(*gallocr_new)(void *);
    bool (*gallocr_alloc_graph)(void *, void *);
    void (*gallocr_free)(void *);
    void *(*cpu_init)(void);
    void (*cpu_set_n_threads)(void *, int);
    void *(*cpu_buffer_type)(void);
    void *(*repack_buffer_type)(void);
    int (*has_avx512)(void);
    void *backend;
} G;

static int load_ggml(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libggml-base.so", dir);
    void *base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libggml-cpu.so", dir);
    void *cpu = base ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!cpu) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return -1;
    }
    struct { void **fn; void *lib; const char *name; } syms[] = {
        {(void **)&G.init, base, "ggml_init"},
        {(void **)&G.free, base, "ggml_free"},
        {(void **)&G.new_tensor_2d, base, "ggml_new_tensor_2d"},
        {(void **)&G.mul_mat, base, "ggml_mul_mat"},
        {(void **)&G.new_graph, base, "ggml_new_graph"},
        {(void **)&G.build_forward_expand, base, "ggml_build_forward_expand"},
        {(void **)&G.alloc_ctx_tensors_from_buft, base, "ggml_backend_alloc_ctx_tensors_from_buft"},
        {(void **)&G.buffer_free, base, "ggml_backend_buffer_free"},
        {(void **)&G.tensor_set, base, "ggml_backend_tensor_set"},
        {(void **)&G.graph_compute, base, "ggml_backend_graph_compute"},
        {(void **)&G.gallocr_new, base, "ggml_gallocr_new"},
        {(void **)&G.gallocr_alloc_graph, base, "ggml_gallocr_alloc_graph"},
        {(void **)&G.gallocr_free, base, "ggml_gallocr_free"},
        {(void **)&G.cpu_init, cpu, "ggml_backend_cpu_init"},
        {(void **)&G.cpu_set_n_threads, cpu, "ggml_backend_cpu_set_n_threads"},
        {(void **)&G.cpu_buffer_type, cpu, "ggml_backend_cpu_buffer_type"},
        {(void **)&G.repack_buffer_type, cpu, "_Z35ggml_backend_cpu_repack_buffer_typev"},
        {(void **)&G.has_avx512, cpu, "ggml_cpu_has_avx512"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(syms[i].lib, syms[i].name);
        if (!f) {
            fprintf(stderr, "dlsym %s: %s\n", syms[i].name, dlerror());
            return -1;
        }
        memcpy(syms[i].fn, &f, sizeof f);
    }
    G.backend = G.cpu_init();
    G.cpu_set_n_threads(G.backend, 1);
    return 0;
}

/* One prepared ggml mul_mat: weight set once, activations set once, computed per call. */
typedef struct {
    void *cw, *cx, *wbuf, *galloc, *graph;
} ggml_mm;

static void ggml_mm_init(ggml_mm *m, uint32_t t, const void *w, size_t wbytes, int64_t n_in, int64_t n_out,
                         const float *x, int64_t n_rows) {
    const bool repack = n_out % 8 == 0 && ((t == GGML_TYPE_Q2_K && G.has_avx512()) || t == GGML_TYPE_Q4_K);
    m->cw = G.init((struct ggml_init_params){1 << 20, NULL, true});
    m->cx = G.init((struct ggml_init_params){1 << 22, NULL, true});
    void *wt = G.new_tensor_2d(m->cw, (int)t, n_in, n_out);
    m->wbuf = G.alloc_ctx_tensors_from_buft(m->cw, repack ? G.repack_buffer_type() : G.cpu_buffer_type());
    G.tensor_set(wt, w, 0, wbytes);
    void *xt = G.new_tensor_2d(m->cx, GGML_TYPE_F32, n_in, n_rows);
    void *yt = G.mul_mat(m->cx, wt, xt);
    m->graph = G.new_graph(m->cx);
    G.build_forward_expand(m->graph, yt);
    m->galloc = G.gallocr_new(G.cpu_buffer_type());
    G.gallocr_alloc_graph(m->galloc, m->graph);
    G.tensor_set(xt, x, 0, (size_t)(n_in * n_rows) * sizeof(float));
}

static void ggml_mm_free(ggml_mm *m) {
    G.gallocr_free(m->galloc);
    G.buffer_free(m->wbuf);
    G.free(m->cx);
    G.free(m->cw);
}

static void fill(uint32_t t, void *w, size_t bytes) {
    uint8_t *p = w;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rnd();
    const ggml_type_traits *tt = ggml_type_get(t);
    const coli_half h = coli_fp32_to_fp16(0.01f);
    int off[2] = {-1, -1};
    switch (t) {
    case GGML_TYPE_Q2_K: off[0] = 80; off[1] = 82; break;
    case GGML_TYPE_Q3_K: off[0] = 108; break;
    case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: off[0] = 0; off[1] = 2; break;
    case GGML_TYPE_Q6_K: off[0] = 208; break;
    case GGML_TYPE_TQ1_0: off[0] = 52; break;
    case GGML_TYPE_TQ2_0: off[0] = 64; break;
    default: break;
    }
    for (size_t b = 0; b < bytes / tt->type_size; b++)
        for (int f = 0; f < 2; f++)
            if (off[f] >= 0) memcpy(p + b * tt->type_size + off[f], &h, 2);
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define MAX_ROUNDS 64

static void run(uint32_t t, int64_t n_in, int64_t n_out, int64_t n_rows, int rounds) {
    const size_t wbytes = coli_row_size(t, n_in) * (size_t)n_out;
    void *w = aligned_alloc(64, (wbytes + 63) & ~(size_t)63);
    float *x = malloc(n_in * n_rows * sizeof(float)), *y = malloc(n_out * n_rows * sizeof(float));
    const size_t sb = coli_matmul_scratch_size(t, n_in, n_rows);
    void *scratch = aligned_alloc(64, (sb + 64) & ~(size_t)63);
    fill(t, w, wbytes);
    for (int64_t i = 0; i < n_in * n_rows; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    ggml_mm m;
    ggml_mm_init(&m, t, w, wbytes, n_in, n_out, x, n_rows);
    /* iterations per timing: about 20 ms of ours */
    int iters = 1;
    for (;;) {
        const double t0 = clk();
        for (int i = 0; i < iters; i++) coli_matmul(NULL, w, t, n_in, n_out, x, n_rows, y, scratch);
        if (clk() - t0 > 0.02) break;
        iters *= 2;
    }
    double ours[MAX_ROUNDS], theirs[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        double t0 = clk();
        for (int i = 0; i < iters; i++) coli_matmul(NULL, w, t, n_in, n_out, x, n_rows, y, scratch);
        ours[r] = (clk() - t0) / iters;
        t0 = clk();
        for (int i = 0; i < iters; i++) G.graph_compute(G.backend, m.graph);
        theirs[r] = (clk() - t0) / iters;
    }
    qsort(ours, (size_t)rounds, sizeof ours[0], cmp_d);
    qsort(theirs, (size_t)rounds, sizeof theirs[0], cmp_d);
    const double a = ours[rounds / 2], b = theirs[rounds / 2];
    printf("%-6s n_in %5lld n_out %5lld rows %3lld: ours %9.1f us  ggml %9.1f us  ggml/ours %5.2f  (median of %d)\n",
           ggml_type_get(t)->name, (long long)n_in, (long long)n_out, (long long)n_rows, a * 1e6, b * 1e6, b / a,
           rounds);
    fflush(stdout);
    ggml_mm_free(&m);
    free(w); free(x); free(y); free(scratch);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s LLAMA_CPP_LIB_DIR [isa] [rounds]\n", argv[0]);
        return 2;
    }
    if (load_ggml(argv[1])) return 1;
    if (argc > 2 && colibri_kernel_set_isa(argv[2]) != 0) {
        fprintf(stderr, "%s\n", colibri_last_error());
        return 1;
    }
    /* BENCH_PREFETCH=l2: weights prefetched into L2, as a load picks on some CPUs (coli --version -v) */
    if (getenv("BENCH_PREFETCH") && colibri_kernel_set_prefetch(getenv("BENCH_PREFETCH")) != 0) {
        fprintf(stderr, "%s\n", colibri_last_error());
        return 1;
    }
    int rounds = argc > 3 ? atoi(argv[3]) : 7;
    if (rounds < 1) rounds = 1;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    const char *only = getenv("BENCH_TYPES"); /* e.g. "Q2_K,TQ1_0" */
    printf("isa %s, cpu: %s\n", colibri_kernel_isa(), colibri_cpu_features());
    /* Q5_K and Q6_K (kernels older than this bench's issue) only when BENCH_TYPES names them */
    const uint32_t types[] = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0,
                              GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    int64_t shapes[8][2] = {{2048, 768}, {768, 2048}, {2048, 764}, {2048, 2048}, {2048, 512}, {2048, 4096}};
    int64_t rows[16] = {1, 8, 16, 32};
    size_t n_shapes = 3, n_rows = 4;
    if (getenv("BENCH_ATTN")) {
        n_shapes = 6;
        const int64_t r2[] = {1, 2, 4, 8, 16};
        memcpy(rows, r2, sizeof r2);
        n_rows = 5;
    }
    const char *rl = getenv("BENCH_ROWS"); /* "1,2,4": these row counts */
    if (rl) {
        n_rows = 0;
        for (const char *p = rl; *p && n_rows < 16;) {
            rows[n_rows++] = strtoll(p, (char **)&p, 10);
            if (*p == ',') p++;
            else break;
        }
    }
    const char *one = getenv("BENCH_SHAPE"); /* "n_in,n_out,rows": that shape only */
    if (one) {
        long long ni, no, nr;
        if (sscanf(one, "%lld,%lld,%lld", &ni, &no, &nr) != 3 || ni <= 0 || ni % QK_K || no <= 0 || nr <= 0) {
            fprintf(stderr, "BENCH_SHAPE: expected n_in,n_out,rows (n_in a multiple of 256)\n");
            return 2;
        }
        shapes[0][0] = ni, shapes[0][1] = no, rows[0] = nr;
        n_shapes = n_rows = 1;
    }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        if (only ? !strstr(only, ggml_type_get(types[ti])->name)
                 : types[ti] == GGML_TYPE_Q5_K || types[ti] == GGML_TYPE_Q6_K)
            continue;
        for (size_t si = 0; si < n_shapes; si++) {
            if (si == 2 && types[ti] != GGML_TYPE_Q2_K && types[ti] != GGML_TYPE_Q4_K)
                continue; /* not repacked (n_out % 8 != 0) */
            for (size_t ri = 0; ri < n_rows; ri++) run(types[ti], shapes[si][0], shapes[si][1], rows[ri], rounds);
        }
    }
    return 0;
}
