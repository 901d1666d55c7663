/* test_quant.c — kernels of quant.c / quant_avx2.c / quant_avx512.c /
 * quant_avxvnni.c, their tables (kernels.c) and matmul.c.
 *
 *   gcc -O2 -std=c11 -Wall -Wextra -Iengine/include engine/src/(all .c) \
 *       tests/engine/test_quant.c -lm -lpthread && ./a.out   (also -fsanitize=address,undefined)
 *
 * Checks, for every ISA this CPU runs: each SIMD vec_dot against its
 * `_generic` twin and against a float64 dot of the dequantized operands
 * (named tolerances), tiles of rows == one row at a time (bit-exact), SIMD
 * activation quantizers == scalar (bit-exact), multi-thread matmul ==
 * single-thread (bit-exact), tiled prefill == row by row (bit-exact), the
 * batched kernels of llama.cpp's arithmetic (vec_dot_mm) and the decode
 * kernels for two weight rows (vec_dot_2w), fp16 conversions vs F16C, and
 * argument validation of the public hooks. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/include/colibri.h"
#include "../../engine/src/kernels.h"
#include "../../engine/src/matmul.h"
#include "../../engine/src/quant.h"

/* |simd - generic| and |kernel - float64 reference| relative to sum |w_i * a_i| */
#define MAX_DOT_PRODUCT_ERROR 2e-6
#define MAX_QUANT_REF_ERROR 2e-6

static int g_fail, g_pass;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (cond) g_pass++;                               \
        else {                                            \
            g_fail++;                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);   \
            printf(__VA_ARGS__);                          \
            printf("\n");                                 \
        }                                                 \
    } while (0)

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float frand(void) { return (float)((rnd() & 0xffffff) / 16777216.0 * 2.0 - 1.0); }

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { printf("out of memory\n"); exit(2); }
    return p;
}

/* offsets of the fp16 scale fields inside one block */
static int half_fields(uint32_t t, int off[2]) {
    switch (t) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: off[0] = 0; return 1;
    case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: off[0] = 0; off[1] = 2; return 2;
    case GGML_TYPE_Q2_K: off[0] = 80; off[1] = 82; return 2;
    case GGML_TYPE_Q3_K: off[0] = 108; return 1;
    case GGML_TYPE_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

/* n elements of type t: random bits with sane scales (every bit pattern of
 * the quants is legal, including -128 in Q8_0 and any 6-bit scale). */
static void random_row(uint32_t t, int64_t n, void *dst) {
    const ggml_type_traits *tt = ggml_type_get(t);
    const size_t bytes = coli_row_size(t, n);
    uint8_t *p = dst;
    if (t == GGML_TYPE_F32) { for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = frand(); return; }
    if (t == GGML_TYPE_F16) { for (int64_t i = 0; i < n; i++) ((coli_half *)dst)[i] = coli_fp32_to_fp16(frand()); return; }
    if (t == GGML_TYPE_BF16) { for (int64_t i = 0; i < n; i++) ((coli_bf16 *)dst)[i] = coli_fp32_to_bf16(frand()); return; }
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rnd();
    int off[2];
    const int nf = half_fields(t, off);
    for (int64_t b = 0; b < n / tt->blck_size; b++)
        for (int f = 0; f < nf; f++) {
            coli_half h = coli_fp32_to_fp16(0.001f + 0.02f * (float)(rnd() % 1000) / 1000.0f);
            memcpy(p + b * tt->type_size + off[f], &h, 2);
        }
}

static const uint32_t WTYPES[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1,
                                  GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                                  GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
#define N_WTYPES (sizeof WTYPES / sizeof WTYPES[0])

static const char *tname(uint32_t t) { return ggml_type_get(t)->name; }

/* float64 dot of dequantized operands and the error scale sum |w_i a_i| */
static double ref_dot(uint32_t wt, uint32_t at, int64_t n, const void *w, const void *a, double *scale) {
    float *fw = xmalloc(n * sizeof(float)), *fa = xmalloc(n * sizeof(float));
    colibri_kernel_dequantize(wt, w, coli_row_size(wt, n), fw, n);
    colibri_kernel_dequantize(at, a, coli_row_size(at, n), fa, n);
    double s = 0, m = 0;
    for (int64_t i = 0; i < n; i++) { s += (double)fw[i] * fa[i]; m += fabs((double)fw[i] * fa[i]); }
    if (at == GGML_TYPE_Q8_1) {  /* ggml uses the block's fp16 s = d * sum(q), not the exact sum */
        for (int64_t b = 0; b < n / 32; b++) {
            const block_q8_1 *y = (const block_q8_1 *)a + b;
            coli_half mh;
            memcpy(&mh, (const char *)w + b * ggml_type_get(wt)->type_size + 2, 2);
            int sq = 0;
            for (int j = 0; j < 32; j++) sq += y->qs[j];
            s += (double)coli_fp16_to_fp32(mh) * ((double)coli_fp16_to_fp32(y->s) - (double)coli_fp16_to_fp32(y->d) * sq);
        }
    }
    free(fw);
    free(fa);
    *scale = m > 1e-30 ? m : 1e-30;
    return s;
}

static void test_vec_dot(const char *isa) {
    const coli_kernel_table *t = coli_kernels();
    const coli_kernel_table *gen = NULL;
    colibri_kernel_set_isa("scalar");
    gen = coli_kernels();
    colibri_kernel_set_isa(isa);
    t = coli_kernels();
    for (size_t k = 0; k < N_WTYPES; k++) {
        const uint32_t wt = WTYPES[k];
        const uint32_t at = t->type[wt].vec_dot_type;
        const int blk = ggml_type_get(wt)->blck_size > ggml_type_get(at)->blck_size ? ggml_type_get(wt)->blck_size
                                                                                       : ggml_type_get(at)->blck_size;
        const int64_t lens_f[] = {1, 7, 31, 33, 100, 257, 1000, 4096};
        const int64_t lens_q[] = {blk, 2 * blk, 5 * blk, 4096};
        const int64_t *lens = blk == 1 ? lens_f : lens_q;
        const int nlens = blk == 1 ? 8 : 4;
        for (int li = 0; li < nlens; li++) {
            const int64_t n = lens[li];
            const size_t wrow = coli_row_size(wt, n), arow = coli_row_size(at, n);
            void *w = xmalloc(wrow);
            float *x = xmalloc(COLI_MAX_NR * n * sizeof(float));
            char *a = xmalloc(COLI_MAX_NR * arow);
            random_row(wt, n, w);
            for (int64_t i = 0; i < COLI_MAX_NR * n; i++) x[i] = frand() * (i % 17 == 0 ? 4.0f : 1.0f);
            for (int r = 0; r < COLI_MAX_NR; r++) {
                if (at == GGML_TYPE_F32) memcpy(a + r * arow, x + r * n, arow);
                else gen->type[at].from_float(x + r * n, a + r * arow, n);
            }
            float s_gen[COLI_MAX_NR], s1[COLI_MAX_NR], s4[COLI_MAX_NR];
            gen->type[wt].vec_dot((int)n, w, a, arow, s_gen, 1, COLI_MAX_NR);
            for (int r = 0; r < COLI_MAX_NR; r++) t->type[wt].vec_dot((int)n, w, a + r * arow, 0, &s1[r], 1, 1);
            t->type[wt].vec_dot((int)n, w, a, arow, s4, 1, COLI_MAX_NR);
            for (int r = 0; r < COLI_MAX_NR; r++) {
                double scale;
                const double ref = ref_dot(wt, at, n, w, a + r * arow, &scale);
                CHECK(fabs(s1[r] - s_gen[r]) <= MAX_DOT_PRODUCT_ERROR * scale,
                      "%s vec_dot %s n=%lld row %d: simd %.9g generic %.9g (scale %.3g)", isa, tname(wt), (long long)n, r,
                      s1[r], s_gen[r], scale);
                CHECK(fabs(s_gen[r] - ref) <= MAX_QUANT_REF_ERROR * scale,
                      "generic vec_dot %s n=%lld: %.9g vs float64 %.9g", tname(wt), (long long)n, s_gen[r], ref);
                CHECK(memcmp(&s1[r], &s4[r], sizeof(float)) == 0,
                      "%s vec_dot %s n=%lld: tile of 4 rows %.9g != single row %.9g", isa, tname(wt), (long long)n, s4[r], s1[r]);
            }
            free(w);
            free(x);
            free(a);
        }
    }
}

#ifdef COLI_X86
/* 512-bit kernels that the table does not use (slower at decode) stay correct */
static void test_spare_avx512(void) {
    if (colibri_kernel_set_isa("avx512") != 0) return;
    const coli_vec_dot_fn spare[] = {vec_dot_q4_K_q8_K_avx512, vec_dot_q5_K_q8_K_avx512};
    const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K};
    const int64_t n = 1024;
    for (int k = 0; k < 2; k++) {
        const size_t wrow = coli_row_size(types[k], n), arow = coli_row_size(GGML_TYPE_Q8_K, n);
        void *w = xmalloc(wrow);
        char *a = xmalloc(COLI_MAX_NR * arow);
        float *x = xmalloc(n * sizeof(float));
        random_row(types[k], n, w);
        for (int r = 0; r < COLI_MAX_NR; r++) {
            for (int64_t i = 0; i < n; i++) x[i] = frand();
            quantize_row_q8_K_ref(x, a + r * arow, n);
        }
        float s1[COLI_MAX_NR], s4[COLI_MAX_NR], g[COLI_MAX_NR];
        spare[k]((int)n, w, a, arow, s4, 1, COLI_MAX_NR);
        for (int r = 0; r < COLI_MAX_NR; r++) {
            spare[k]((int)n, w, a + r * arow, 0, &s1[r], 1, 1);
            double scale;
            (void)ref_dot(types[k], GGML_TYPE_Q8_K, n, w, a + r * arow, &scale);
            (types[k] == GGML_TYPE_Q4_K ? vec_dot_q4_K_q8_K_generic : vec_dot_q5_K_q8_K_generic)((int)n, w, a + r * arow, 0, &g[r], 1, 1);
            CHECK(fabs(s1[r] - g[r]) <= MAX_DOT_PRODUCT_ERROR * scale && memcmp(&s1[r], &s4[r], 4) == 0,
                  "spare avx512 %s: %.9g / %.9g vs generic %.9g", tname(types[k]), s1[r], s4[r], g[r]);
        }
        free(w);
        free(a);
        free(x);
    }
}
#endif

/* The batched kernels (vec_dot_mm) and the two-weight-row decode kernels
 * (vec_dot_2w): a tile of rows == one row, 2w == vec_dot, close to float64;
 * and where the AVX2 and AVX-512 tables mirror the same ggml arithmetic
 * (Q8_0/Q4_0/Q5_0, Q4_K, Q6_K), identical bits. (tests/engine/test_matmul.py
 * checks them against llama.cpp's ggml itself.) */
static void test_batched_kernels(void) {
    if (colibri_kernel_set_isa("avx512") != 0) return;
    const coli_kernel_table *t512 = coli_kernels();
    colibri_kernel_set_isa("avx2");
    const coli_kernel_table *t2 = coli_kernels();
    colibri_kernel_set_isa("scalar");
    const coli_kernel_table *gen = coli_kernels();
    const uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_0,
                              GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    const int same_across_isas[] = {0, 0, 1, 1, 1, 1, 1};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const uint32_t wt = types[k], at = t512->type[wt].vec_dot_type;
        const int64_t lens[] = {256, 768, 4096};
        for (int li = 0; li < 3; li++) {
            const int64_t n = lens[li];
            const size_t wrow = coli_row_size(wt, n), arow = coli_row_size(at, n);
            char *w = xmalloc(2 * wrow), *a = xmalloc(COLI_MAX_NR * arow);
            float *x = xmalloc(n * sizeof(float));
            random_row(wt, n, w);
            random_row(wt, n, w + wrow);
            for (int r = 0; r < COLI_MAX_NR; r++) {
                for (int64_t i = 0; i < n; i++) x[i] = frand() * (i % 17 == 0 ? 4.0f : 1.0f);
                if (at == GGML_TYPE_F32) memcpy(a + r * arow, x, arow);
                else gen->type[at].from_float(x, a + r * arow, n);
            }
            const coli_kernel_table *tabs[] = {t2, t512};
            float res[2][2][COLI_MAX_NR];  /* [isa][vec_dot, mm][row] */
            for (int ti = 0; ti < 2; ti++) {
                const coli_type_kernels *kk = &tabs[ti]->type[wt];
                const char *isa = ti ? "avx512" : "avx2";
                coli_vec_dot_fn fns[2] = {kk->vec_dot, kk->vec_dot_mm ? kk->vec_dot_mm : kk->vec_dot};
                for (int f = 0; f < 2; f++) {
                    float s4[COLI_MAX_NR];
                    fns[f]((int)n, w, a, arow, s4, 1, COLI_MAX_NR);
                    for (int r = 0; r < COLI_MAX_NR; r++) {
                        float s1;
                        fns[f]((int)n, w, a + r * arow, 0, &s1, 1, 1);
                        double scale;
                        const double ref = ref_dot(wt, at, n, w, a + r * arow, &scale);
                        CHECK(memcmp(&s1, &s4[r], 4) == 0, "%s %s %s n=%lld: tile %.9g != row %.9g", isa,
                              f ? "vec_dot_mm" : "vec_dot", tname(wt), (long long)n, s4[r], s1);
                        CHECK(fabs(s1 - ref) <= MAX_DOT_PRODUCT_ERROR * scale, "%s %s %s n=%lld: %.9g vs float64 %.9g",
                              isa, f ? "vec_dot_mm" : "vec_dot", tname(wt), (long long)n, s1, ref);
                        res[ti][f][r] = s1;
                    }
                }
                /* 16 weight rows at once: the bits of each row's own kernel */
                coli_vec_dot_nw_fn w16[2] = {kk->vec_dot_16w, kk->vec_dot_mm_16w};
                for (int f = 0; f < 2; f++) {
                    if (!w16[f]) continue;
                    char *w16b = xmalloc(16 * wrow);
                    for (int j = 0; j < 16; j++) random_row(wt, n, w16b + j * wrow);
                    float s16[COLI_MAX_NR][16];
                    w16[f]((int)n, w16b, wrow, a, arow, &s16[0][0], 16, COLI_MAX_NR);
                    int bad = 0;
                    for (int r = 0; r < COLI_MAX_NR; r++)
                        for (int j = 0; j < 16; j++) {
                            float v;
                            fns[f]((int)n, w16b + j * wrow, a + r * arow, 0, &v, 1, 1);
                            bad += memcmp(&v, &s16[r][j], 4) != 0;
                        }
                    CHECK(bad == 0, "%s %s %s n=%lld: %d of 16 x %d outputs differ from one row at a time", isa,
                          f ? "vec_dot_mm_16w" : "vec_dot_16w", tname(wt), (long long)n, bad, COLI_MAX_NR);
                    free(w16b);
                }
                coli_vec_dot_nw_fn w2[2] = {kk->vec_dot_2w, kk->vec_dot_mm_2w};
                for (int f = 0; f < 2; f++)
                    for (int nr = 1; w2[f] && nr <= COLI_MAX_NR; nr++) {
                        float s2[COLI_MAX_NR][2], s0, s1;
                        w2[f]((int)n, w, wrow, a, arow, &s2[0][0], 2, nr);
                        for (int r = 0; r < nr; r++) {
                            fns[f]((int)n, w, a + r * arow, 0, &s0, 1, 1);
                            fns[f]((int)n, w + wrow, a + r * arow, 0, &s1, 1, 1);
                            CHECK(memcmp(&s0, &s2[r][0], 4) == 0 && memcmp(&s1, &s2[r][1], 4) == 0,
                                  "%s %s %s n=%lld nr=%d row %d: %.9g %.9g != one row %.9g %.9g", isa,
                                  f ? "vec_dot_mm_2w" : "vec_dot_2w", tname(wt), (long long)n, nr, r, s2[r][0], s2[r][1],
                                  s0, s1);
                        }
                    }
            }
            if (same_across_isas[k])
                CHECK(memcmp(res[0], res[1], sizeof res[0]) == 0, "%s n=%lld: avx2 and avx512 kernels differ", tname(wt),
                      (long long)n);
            free(w);
            free(a);
            free(x);
        }
    }
}

/* ggml_vec_soft_max_f32's exponentials: the AVX-512 kernel == the scalar one
 * (coli_ggml_expf), bit for bit, including -inf (masked cells) and overflow */
static void test_exp_sum(void) {
    if (colibri_kernel_set_isa("avx512") != 0) return;
    const coli_exp_sum_fn simd = coli_kernels()->exp_sum;
    enum { N = 4096 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = frand() * (i < 2048 ? 20.0f : 120.0f);
    for (int i = 0; i < N; i += 37) x[i] = -INFINITY;
    x[5] = 200.0f;
    memcpy(y, x, sizeof x);
    const double a = coli_exp_sum_generic(x, N, 3.0f), b = simd(y, N, 3.0f);
    CHECK(memcmp(x, y, sizeof x) == 0 && memcmp(&a, &b, sizeof a) == 0, "exp_sum: avx512 %.17g != scalar %.17g", b, a);
    CHECK(y[37] == 0.0f && y[0] == 0.0f, "exp(-inf) = %g", y[37]);
}

static void test_quantizers(const char *isa) {
    colibri_kernel_set_isa(isa);
    const coli_kernel_table *t = coli_kernels();
    const int64_t n = 1024;
    float *x = xmalloc(n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = frand() * 3.0f;
    for (int i = 0; i < 32; i++) x[i] = 0.0f;  /* an all-zero block */
    for (int i = 32; i < 64; i++) x[i] = (float)(i - 48) * 0.5f;  /* exact ties after scaling */
    for (int i = 256; i < 512; i++) x[i] = 0.0f;  /* an all-zero Q8_K block */
    x[600] = -5.0f;  /* |max| tie of opposite signs: the first one sets the sign (q8_K) */
    x[610] = 5.0f;
    const uint32_t acts[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q8_K, GGML_TYPE_F16, GGML_TYPE_BF16};
    coli_from_float_fn scalar[] = {quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_K_ref, quantize_row_f16,
                                   quantize_row_bf16};
    for (int k = 0; k < 5; k++) {
        const size_t bytes = coli_row_size(acts[k], n);
        char *p = xmalloc(bytes), *q = xmalloc(bytes);
        memset(p, 0x5a, bytes);
        memset(q, 0x5a, bytes);
        scalar[k](x, p, n);
        t->type[acts[k]].from_float(x, q, n);
        CHECK(memcmp(p, q, bytes) == 0, "%s activation quantizer %s differs from scalar", isa, tname(acts[k]));
        free(p);
        free(q);
    }
    /* ggml x86 q8_0: ties to even (x = 0.5 * d) */
    block_q8_0 b;
    float v[32];
    for (int i = 0; i < 32; i++) v[i] = 0.0f;
    v[0] = 127.0f;
    v[1] = 2.5f;
    v[2] = -3.5f;
    t->type[GGML_TYPE_Q8_0].from_float(v, &b, 32);
    CHECK(b.qs[0] == 127 && b.qs[1] == 2 && b.qs[2] == -4, "q8_0 activation rounding: %d %d %d", b.qs[0], b.qs[1], b.qs[2]);
    /* ggml q8_K: iscale = -127/max keeps the sign of the largest element */
    float v256[256];
    for (int i = 0; i < 256; i++) v256[i] = (float)(i % 7) * 0.1f;
    v256[5] = 2.0f;
    block_q8_K bk;
    quantize_row_q8_K_ref(v256, &bk, 256);
        int bs0 = 0;
    for (int i = 0; i < 16; i++) bs0 += bk.qs[i];
    CHECK(bk.qs[5] == -127 && bk.d < 0 && bk.qs[1] == -6 && bk.bsums[0] == bs0, "q8_K sign of max: qs[5]=%d d=%g qs[1]=%d", bk.qs[5], bk.d, bk.qs[1]);
    free(x);
}

#ifdef COLI_X86
#include <immintrin.h>
__attribute__((target("f16c"))) static void test_fp16_f16c(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float a = coli_fp16_to_fp32((coli_half)h), b = _cvtsh_ss((unsigned short)h);
        if (memcmp(&a, &b, 4) != 0 && !(isnan(a) && isnan(b))) bad++;
    }
    CHECK(bad == 0, "fp16->fp32 differs from F16C for %d values", bad);
    bad = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = rnd() | ((uint32_t)rnd() << 16);
        if (i < 1000000) u = (u & 0x807fffffu) | ((uint32_t)(100 + (i % 50)) << 23);  /* around the half range */
        float f;
        memcpy(&f, &u, 4);
        const coli_half a = coli_fp32_to_fp16(f);
        const unsigned short b = _cvtss_sh(f, 0);
        if (a != b && !isnan(f)) bad++;
    }
    CHECK(bad == 0, "fp32->fp16 differs from F16C for %d values", bad);
}
#endif

static void test_matmul(const char *isa) {
    colibri_kernel_set_isa(isa);
    for (size_t k = 0; k < N_WTYPES; k++) {
        const uint32_t wt = WTYPES[k];
        const int64_t n_in = 512, n_out = 67, n_rows = 7;
        const size_t wrow = coli_row_size(wt, n_in);
        char *w = xmalloc(wrow * n_out);
        for (int64_t o = 0; o < n_out; o++) random_row(wt, n_in, w + o * wrow);
        float *x = xmalloc(n_rows * n_in * sizeof(float));
        for (int64_t i = 0; i < n_rows * n_in; i++) x[i] = frand();
        float *y1 = xmalloc(n_rows * n_out * sizeof(float)), *y3 = xmalloc(n_rows * n_out * sizeof(float));
        float *yr = xmalloc(n_rows * n_out * sizeof(float));
        int rc1 = colibri_kernel_matmul(wt, w, wrow * n_out, n_in, n_out, x, n_rows, y1, 1);
        int rc3 = colibri_kernel_matmul(wt, w, wrow * n_out, n_in, n_out, x, n_rows, y3, 3);
        CHECK(rc1 == 0 && rc3 == 0, "%s matmul %s rc %d %d: %s", isa, tname(wt), rc1, rc3, colibri_last_error());
        CHECK(memcmp(y1, y3, n_rows * n_out * sizeof(float)) == 0, "%s matmul %s: 3 threads != 1 thread", isa, tname(wt));
        for (int64_t r = 0; r < n_rows; r++)
            colibri_kernel_matmul(wt, w, wrow * n_out, n_in, n_out, x + r * n_in, 1, yr + r * n_out, 2);
        CHECK(memcmp(y1, yr, n_rows * n_out * sizeof(float)) == 0, "%s matmul %s: tiled prefill != row by row", isa,
              tname(wt));
        /* a batch with ggml's batched arithmetic (n_out 64, 9 rows): row r is vec_dot_mm's
         * for r < coli_mm_rows(), vec_dot's after, whatever the tiling and threads */
        {
            const coli_type_kernels *kk = &coli_kernels()->type[wt];
            const int64_t no = 64, nr = 9;
            char *w2 = xmalloc(wrow * no);
            for (int64_t o = 0; o < no; o++) random_row(wt, n_in, w2 + o * wrow);
            float *yb = xmalloc(nr * no * sizeof(float)), *xb = xmalloc(nr * n_in * sizeof(float));
            for (int64_t i = 0; i < nr * n_in; i++) xb[i] = frand();
            CHECK(colibri_kernel_matmul(wt, w2, wrow * no, n_in, no, xb, nr, yb, 3) == 0, "matmul rc");
            const uint32_t at = kk->vec_dot_type;
            const size_t arow = coli_row_size(at, n_in);
            char *a = xmalloc(arow);
            const int64_t mm = coli_mm_rows(kk, n_in, no, nr);
            int bad = 0;
            for (int64_t r = 0; r < nr; r++) {
                if (at == GGML_TYPE_F32) memcpy(a, xb + r * n_in, arow);
                else coli_kernels()->type[at].from_float(xb + r * n_in, a, n_in);
                for (int64_t o = 0; o < no; o++) {
                    float v1;
                    (r < mm ? kk->vec_dot_mm : kk->vec_dot)((int)n_in, w2 + o * wrow, a, 0, &v1, 1, 1);
                    bad += memcmp(&v1, &yb[r * no + o], 4) != 0;
                }
            }
            CHECK(bad == 0, "%s matmul %s batch of %lld (%lld batched rows): %d outputs differ from their kernel", isa,
                  tname(wt), (long long)nr, (long long)mm, bad);
            free(w2);
            free(yb);
            free(xb);
            free(a);
        }
        float v;
        colibri_kernel_vec_dot(wt, n_in, w + 5 * wrow, wrow, x + 3 * n_in, &v);
        /* the hook dots with the type's kernels; a weight llama.cpp would not repack (n_out % 8) has others */
        if (coli_weight_kernels(coli_kernels(), wt, n_out, 1) == &coli_kernels()->type[wt])
            CHECK(memcmp(&v, &y1[3 * n_out + 5], 4) == 0, "%s matmul %s != vec_dot (%g vs %g)", isa, tname(wt),
                  y1[3 * n_out + 5], v);
        free(w);
        free(x);
        free(y1);
        free(y3);
        free(yr);
    }
}

static void test_validation(void) {
    float f[256] = {0}, out;
    uint8_t buf[512] = {0};
    CHECK(colibri_kernel_dequantize(99, buf, sizeof buf, f, 32) == COLI_E_ARG, "unknown type");
    CHECK(colibri_kernel_dequantize(GGML_TYPE_Q4_0, buf, sizeof buf, f, 33) == COLI_E_ARG, "n not a block multiple");
    CHECK(colibri_kernel_dequantize(GGML_TYPE_Q4_0, buf, 17, f, 32) == COLI_E_TOO_LONG, "buffer too small");
    CHECK(colibri_kernel_dequantize(GGML_TYPE_NVFP4, buf, sizeof buf, f, 64) == COLI_E_UNSUPPORTED, "unsupported type");
    CHECK(colibri_kernel_quantize(GGML_TYPE_Q4_K, f, 256, buf, sizeof buf) == COLI_E_UNSUPPORTED, "no q4_K quantizer");
    CHECK(colibri_kernel_vec_dot(GGML_TYPE_Q4_K, 128, buf, sizeof buf, f, &out) == COLI_E_ARG, "q4_K n=128");
    CHECK(colibri_kernel_vec_dot(GGML_TYPE_Q8_0, 0, buf, sizeof buf, f, &out) == COLI_E_ARG, "n=0");
    CHECK(colibri_kernel_matmul(GGML_TYPE_Q8_0, buf, 34, 32, 2, f, 1, f + 64, 1) == COLI_E_TOO_LONG, "matmul w too small");
    CHECK(colibri_kernel_matmul(GGML_TYPE_Q8_0, buf, 68, 32, 2, f, 1, f + 64, 0) == COLI_E_ARG, "matmul 0 threads");
    CHECK(colibri_kernel_set_isa("neon") == COLI_E_ARG, "unknown isa");
    CHECK(colibri_kernel_partner_type(GGML_TYPE_Q4_1) == GGML_TYPE_Q8_1, "q4_1 partner");
    CHECK(colibri_kernel_partner_type(GGML_TYPE_Q5_0) == GGML_TYPE_Q8_0, "q5_0 partner");
    CHECK(colibri_kernel_partner_type(GGML_TYPE_Q6_K) == GGML_TYPE_Q8_K, "q6_K partner");
}

static void test_pool(void) {
    CHECK(coli_physical_cores() >= 1, "physical cores");
    coli_pool *p = coli_pool_create(4);
    CHECK(p && coli_pool_size(p) == 4, "pool create");
    /* many tiny runs: a lost wake-up or a race would hang or miscount */
    static long counts[4];
    typedef struct { long *c; coli_pool *p; } ctx_t;
    ctx_t c = {counts, p};
    for (int it = 0; it < 20000; it++) {
        void fn(void *, int, int);
        coli_pool_run(p, fn, &c);
    }
    CHECK(counts[0] == 40000 && counts[1] == 40000 && counts[2] == 40000 && counts[3] == 40000,
          "pool counts %ld %ld %ld %ld", counts[0], counts[1], counts[2], counts[3]);
    /* shared runs: the caller always runs, late workers may skip */
    static atomic_long shared_calls;
    for (int it = 0; it < 20000; it++) {
        void fn_shared(void *, int, int);
        coli_pool_run_shared(p, fn_shared, &shared_calls);
    }
    const long sc = atomic_load(&shared_calls);
    CHECK(sc >= 20000 && sc <= 80000, "shared runs: %ld calls", sc);
    coli_pool_free(p);
}

void fn_shared(void *vc, int ith, int nth) {
    (void)ith;
    (void)nth;
    atomic_fetch_add((atomic_long *)vc, 1);
}

/* each thread bumps its own counter, barrier, bumps again */
void fn(void *vc, int ith, int nth) {
    struct { long *c; coli_pool *p; } *c = vc;
    (void)nth;
    c->c[ith]++;
    coli_pool_barrier(c->p);
    c->c[ith]++;
}

int main(void) {
    printf("cpu: %s\n", colibri_cpu_features());
    const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        if (colibri_kernel_set_isa(isas[i]) != 0) {
            printf("skip %s: %s\n", isas[i], colibri_last_error());
            continue;
        }
        test_vec_dot(isas[i]);
        test_quantizers(isas[i]);
        test_matmul(isas[i]);
    }
#ifdef COLI_X86
    if (coli_cpu()->f16c) test_fp16_f16c();
    test_spare_avx512();
    test_batched_kernels();
    test_exp_sum();
#endif
    test_validation();
    test_pool();
    colibri_kernel_set_isa("auto");
    printf("auto isa: %s\n", colibri_kernel_isa());
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
