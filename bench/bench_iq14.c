/* bench_iq14.c — IQ1_S, IQ1_M, IQ4_NL, IQ4_XS and MXFP4 matmuls, colibri
 * against llama.cpp's ggml (the reference build, dlopen'ed), one thread each,
 * on MoE expert shapes.
 *
 *   gcc -O3 -march=native -std=c11 -ffp-contract=off -Iengine/include engine/src/(all .c) \
 *       bench/bench_iq14.c -lm -lpthread -ldl -o bench_iq14 && ./bench_iq14 LIBDIR [isa] [reps]
 *
 * LIBDIR holds libggml-base.so / libggml-cpu.so (llama_cpp/lib of the
 * venv). ggml runs ggml_mul_mat through its CPU backend with one thread, the
 * weight in CPU_REPACK where llama.cpp repacks it (IQ4_NL, MXFP4 with
 * n_out % 8 == 0), so each side converts the activations and takes the path
 * it takes in a model: ggml_vec_dot for one row, the tiled matmul / repacked
 * gemv+gemm / tinyBLAS for batches. Runs alternate ours / ggml's; the median
 * of each and their ratio (ggml time / ours: >= 1 means ours is as fast) are
 * printed, with a check that both gave the same bits. Times are this thread's
 * CPU time. BENCH_TYPE=IQ4_NL picks a type; with it, BENCH_SHAPE=n_in,n_out,rows
 * runs that one shape. BENCH_R16=1: ours on the weight repacked into 16-row tiles
 * as a model's load does (coli_repack_r16; IQ4_NL and MXFP4 with n_in % 64, n_out % 16). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/include/colibri.h"
#include "../engine/src/matmul.h"
#include "../engine/src/quant.h"

/* thread CPU time: both sides run on this thread (ggml's CPU backend with one
 * thread computes on the caller), and the machine is shared */
static double now(void) {
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

/* random bytes with sane scales */
static void fill(uint32_t t, uint8_t *w, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    const ggml_type_traits *tt = ggml_type_get(t);
    for (size_t b = 0; b < bytes / tt->type_size; b++) {
        uint8_t *p = w + b * tt->type_size;
        const coli_half h = coli_fp32_to_fp16(0.001f + (float)(rnd() % 1000) * 2e-5f);
        if (t == GGML_TYPE_MXFP4) {
            p[0] = (uint8_t)(112 + rnd() % 16);
        } else if (t == GGML_TYPE_IQ1_M) {
            for (int k = 0; k < 4; k++) p[48 + 2 * k + 1] = (uint8_t)((p[48 + 2 * k + 1] & 0x0f) | ((h >> (4 * k)) & 0xf) << 4);
        } else {
            memcpy(p, &h, 2);
        }
    }
}

/* ---- ggml through dlsym --------------------------------------------------------------------- */

struct ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};
typedef void *vp;
static struct {
    vp (*init)(struct ggml_init_params);
    void (*free)(vp);
    vp (*new_tensor_2d)(vp, int, int64_t, int64_t);
    vp (*mul_mat)(vp, vp, vp);
    vp (*new_graph)(vp);
    void (*build_forward_expand)(vp, vp);
    vp (*alloc_ctx_tensors_from_buft)(vp, vp);
    void (*buffer_free)(vp);
    void (*tensor_set)(vp, const void *, size_t, size_t);
    void (*tensor_get)(vp, void *, size_t, size_t);
    int (*graph_compute)(vp, vp);
    vp (*gallocr_new)(vp);
    bool (*gallocr_alloc_graph)(vp, vp);
    void (*gallocr_free)(vp);
    vp (*cpu_init)(void);
    void (*cpu_set_n_threads)(vp, int);
    vp (*cpu_buffer_type)(void);
    vp (*repack_buffer_type)(void);
} G;

static int load_ggml(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libggml-base.so", dir);
    void *base = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_DEEPBIND);
    snprintf(path, sizeof path, "%s/libggml-cpu.so", dir);
    void *cpu = base ? dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_DEEPBIND) : NULL;
    if (!cpu) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return -1;
    }
#define SYM(lib, field, name) \
    if (!(*(void **)&G.field = dlsym(lib, name))) { fprintf(stderr, "no %s\n", name); return -1; }
    SYM(base, init, "ggml_init") SYM(base, free, "ggml_free") SYM(base, new_tensor_2d, "ggml_new_tensor_2d")
    SYM(base, mul_mat, "ggml_mul_mat") SYM(base, new_graph, "ggml_new_graph")
    SYM(base, build_forward_expand, "ggml_build_forward_expand")
    SYM(base, alloc_ctx_tensors_from_buft, "ggml_backend_alloc_ctx_tensors_from_buft")
    SYM(base, buffer_free, "ggml_backend_buffer_free") SYM(base, tensor_set, "ggml_backend_tensor_set")
    SYM(base, tensor_get, "ggml_backend_tensor_get") SYM(base, graph_compute, "ggml_backend_graph_compute")
    SYM(base, gallocr_new, "ggml_gallocr_new") SYM(base, gallocr_alloc_graph, "ggml_gallocr_alloc_graph")
    SYM(base, gallocr_free, "ggml_gallocr_free") SYM(cpu, cpu_init, "ggml_backend_cpu_init")
    SYM(cpu, cpu_set_n_threads, "ggml_backend_cpu_set_n_threads") SYM(cpu, cpu_buffer_type, "ggml_backend_cpu_buffer_type")
    SYM(cpu, repack_buffer_type, "_Z35ggml_backend_cpu_repack_buffer_typev")
#undef SYM
    return 0;
}

typedef struct {
    vp cw, cx, wbuf, galloc, gf, yt, xt;
} ggml_mm;

static void ggml_mm_init(ggml_mm *m, vp backend, uint32_t t, const void *w, size_t wbytes, int64_t n_in, int64_t n_out,
                         int64_t n_rows) {
    const bool repack = (t == GGML_TYPE_IQ4_NL || t == GGML_TYPE_MXFP4) && n_out % 8 == 0;
    m->cw = G.init((struct ggml_init_params){1 << 20, NULL, true});
    m->cx = G.init((struct ggml_init_params){1 << 22, NULL, true});
    vp wt = G.new_tensor_2d(m->cw, (int)t, n_in, n_out);
    m->wbuf = G.alloc_ctx_tensors_from_buft(m->cw, repack ? G.repack_buffer_type() : G.cpu_buffer_type());
    G.tensor_set(wt, w, 0, wbytes);
    m->xt = G.new_tensor_2d(m->cx, GGML_TYPE_F32, n_in, n_rows);
    m->yt = G.mul_mat(m->cx, wt, m->xt);
    m->gf = G.new_graph(m->cx);
    G.build_forward_expand(m->gf, m->yt);
    m->galloc = G.gallocr_new(G.cpu_buffer_type());
    G.gallocr_alloc_graph(m->galloc, m->gf);
    (void)backend;
}

static void ggml_mm_free(ggml_mm *m) {
    G.gallocr_free(m->galloc);
    G.buffer_free(m->wbuf);
    G.free(m->cx);
    G.free(m->cw);
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bench(vp backend, uint32_t t, int64_t n_in, int64_t n_out, int64_t n_rows, int reps) {
    const size_t wbytes = coli_row_size(t, n_in) * (size_t)n_out;
    uint8_t *w = aligned_alloc(64, (wbytes + 63) & ~(size_t)63);
    float *x = malloc(n_in * n_rows * sizeof(float));
    float *y = malloc(n_out * n_rows * sizeof(float)), *yg = malloc(n_out * n_rows * sizeof(float));
    const size_t sb = coli_matmul_scratch_size(t, n_in, n_rows);
    void *scratch = aligned_alloc(64, (sb + 64) & ~(size_t)63);
    fill(t, w, wbytes);
    for (int64_t i = 0; i < n_in * n_rows; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    ggml_mm m;
    ggml_mm_init(&m, backend, t, w, wbytes, n_in, n_out, n_rows);
    /* BENCH_R16: ours reads a tiled copy (ggml keeps its own copy of w) */
    coli_rows_mode mode = COLI_ROWS_BATCH;
    const int in_mult = coli_r16_in_mult(t);
    if (getenv("BENCH_R16") && in_mult && n_in % in_mult == 0 && n_out % 16 == 0) {
        void *tmp = malloc(16 * coli_row_size(t, n_in));
        coli_repack_r16(t, w, n_in, n_out, tmp);
        free(tmp);
        mode |= COLI_ROWS_R16;
    }
    G.tensor_set(m.xt, x, 0, n_in * n_rows * sizeof(float));
    /* calls per timed run: about 20 ms of work */
    double t0 = now();
    if (coli_matmul_ex(NULL, w, t, n_in, n_out, x, n_rows, y, scratch, mode) != 0) {
        fprintf(stderr, "coli_matmul_ex failed\n");
        exit(1);
    }
    const double one = now() - t0;
    const int iters = one > 0.02 ? 1 : (int)(0.02 / (one + 1e-9)) + 1;
    double *mine = malloc(reps * sizeof(double)), *theirs = malloc(reps * sizeof(double));
    for (int r = 0; r < reps; r++) {
        t0 = now();
        for (int i = 0; i < iters; i++) coli_matmul_ex(NULL, w, t, n_in, n_out, x, n_rows, y, scratch, mode);
        mine[r] = (now() - t0) / iters;
        t0 = now();
        for (int i = 0; i < iters; i++) G.graph_compute(backend, m.gf);
        theirs[r] = (now() - t0) / iters;
    }
    G.tensor_get(m.yt, yg, 0, n_out * n_rows * sizeof(float));
    const bool same = memcmp(y, yg, n_out * n_rows * sizeof(float)) == 0;
    qsort(mine, reps, sizeof(double), cmp_d);
    qsort(theirs, reps, sizeof(double), cmp_d);
    const double a = mine[reps / 2], b = theirs[reps / 2];
    printf("%-6s n_in %5lld n_out %5lld rows %3lld: ours %9.1f us  ggml %9.1f us  ratio %5.2f  %s\n",
           ggml_type_get(t)->name, (long long)n_in, (long long)n_out, (long long)n_rows, a * 1e6, b * 1e6, b / a,
           same ? "same bits" : "DIFFERENT BITS");
    fflush(stdout);
    ggml_mm_free(&m);
    free(mine); free(theirs); free(w); free(x); free(y); free(yg); free(scratch);
}

int main(int argc, char **argv) {
    if (argc < 2 || load_ggml(argv[1])) {
        fprintf(stderr, "usage: %s LIBDIR [isa] [reps]\n", argv[0]);
        return 1;
    }
    if (argc > 2 && colibri_kernel_set_isa(argv[2]) != 0) {
        fprintf(stderr, "%s\n", colibri_last_error());
        return 1;
    }
    /* BENCH_PREFETCH=l2: weights prefetched into L2, as a load picks on some CPUs (coli --version -v) */
    if (getenv("BENCH_PREFETCH") && colibri_kernel_set_prefetch(getenv("BENCH_PREFETCH")) != 0) {
        fprintf(stderr, "%s\n", colibri_last_error());
        return 1;
    }
    const int reps = argc > 3 ? atoi(argv[3]) : 9;
    const char *only = getenv("BENCH_TYPE");
    vp backend = G.cpu_init();
    G.cpu_set_n_threads(backend, 1);
    printf("isa %s, one thread each, median of %d interleaved runs\n", colibri_kernel_isa(), reps);
    static const struct { uint32_t t; int64_t n_in, n_out; } shapes[] = {
        {GGML_TYPE_MXFP4, 2880, 2880},  {GGML_TYPE_MXFP4, 2880, 2876},  /* gpt-oss experts; not repacked */
        {GGML_TYPE_IQ4_NL, 2880, 2880}, {GGML_TYPE_IQ4_NL, 2880, 2876},
        {GGML_TYPE_IQ4_NL, 2048, 768},  {GGML_TYPE_MXFP4, 2048, 768},
        {GGML_TYPE_IQ4_XS, 2048, 768},  {GGML_TYPE_IQ4_XS, 7168, 2048},
        {GGML_TYPE_IQ1_S, 2048, 768},   {GGML_TYPE_IQ1_S, 7168, 2048},
        {GGML_TYPE_IQ1_M, 2048, 768},   {GGML_TYPE_IQ1_M, 7168, 2048},
    };
    static const int64_t rows[] = {1, 8, 16, 32, 128};
    const char *one = getenv("BENCH_SHAPE"); /* "n_in,n_out,rows": that shape only (with BENCH_TYPE) */
    if (one) {
        long long ni, no, nr;
        if (!only || sscanf(one, "%lld,%lld,%lld", &ni, &no, &nr) != 3 || ni <= 0 || ni % 32 || no <= 0 || nr <= 0) {
            fprintf(stderr, "BENCH_SHAPE: expected n_in,n_out,rows and BENCH_TYPE\n");
            return 2;
        }
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            if (!strcmp(only, ggml_type_get(shapes[s].t)->name)) {
                bench(backend, shapes[s].t, ni, no, nr, reps);
                return 0;
            }
        return 2;
    }
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (only && strcmp(only, ggml_type_get(shapes[s].t)->name)) continue;
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) bench(backend, shapes[s].t, shapes[s].n_in, shapes[s].n_out, rows[r], reps);
    }
    return 0;
}
