/* quant_iq23.c — IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S, the grid (lattice) types: the scalar
 * dequantizers (ggml-quants.c) and dot products (ggml-cpu/quants.c's _generic), and the entries of
 * these types in the kernel tables (coli_kernels_fill_iq23). Formats and arithmetic: quant_iq23.h. */
#include <math.h>

#include "iq_grids.h"
#include "kernels.h"
#include "quant_iq23.h"

/* the sign of weight j (0..7) of a group whose sign byte is s */
static inline float sgnf(uint8_t s, int j) { return s & coli_kmask_iq2xs[j] ? -1.f : 1.f; }
static inline int sgni(uint8_t s, int j) { return s & coli_kmask_iq2xs[j] ? -1 : 1; }
static inline const uint8_t *grid8(const uint64_t *g, int i) { return (const uint8_t *)(g + i); }
static inline const uint8_t *grid4(const uint32_t *g, int i) { return (const uint8_t *)(g + i); }

/* ---- dequantization (ggml-quants.c) ------------------------------------------------ */

void dequantize_row_iq2_xxs(const void *vx, float *y, int64_t n) {
    const block_iq2_xxs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
            uint32_t aux32[2];
            memcpy(aux32, x[i].qs + 4 * ib32, sizeof aux32);
            const uint8_t *aux8 = (const uint8_t *)aux32;
            const float db = d * (0.5f + (float)(aux32[1] >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t *g = grid8(coli_iq2xxs_grid, aux8[l]);
                const uint8_t s = coli_ksigns_iq2xs[(aux32[1] >> 7 * l) & 127];
                for (int j = 0; j < 8; j++) y[j] = db * (float)g[j] * sgnf(s, j);
            }
        }
    }
}

void dequantize_row_iq2_xs(const void *vx, float *y, int64_t n) {
    const block_iq2_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
            const float db[2] = {d * (0.5f + (float)(x[i].scales[ib32] & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(x[i].scales[ib32] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                const uint16_t q = x[i].qs[4 * ib32 + l];
                const uint8_t *g = grid8(coli_iq2xs_grid, q & 511);
                const uint8_t s = coli_ksigns_iq2xs[q >> 9];
                for (int j = 0; j < 8; j++) y[j] = db[l / 2] * (float)g[j] * sgnf(s, j);
            }
        }
    }
}

void dequantize_row_iq2_s(const void *vx, float *y, int64_t n) {
    const block_iq2_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs, *signs = x[i].qs + QK_K / 8;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 4, signs += 4) {
            const float db[2] = {d * (0.5f + (float)(x[i].scales[ib32] & 0xf)) * 0.25f,
                                 d * (0.5f + (float)(x[i].scales[ib32] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t *g = grid8(coli_iq2s_grid, qs[l] | (x[i].qh[ib32] << (8 - 2 * l) & 0x300));
                for (int j = 0; j < 8; j++) y[j] = db[l / 2] * (float)g[j] * sgnf(signs[l], j);
            }
        }
    }
}

void dequantize_row_iq3_xxs(const void *vx, float *y, int64_t n) {
    const block_iq3_xxs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs, *sas = x[i].qs + QK_K / 4;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 8) {
            uint32_t aux32;
            memcpy(&aux32, sas + 4 * ib32, 4);
            const float db = d * (0.5f + (float)(aux32 >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t s = coli_ksigns_iq2xs[(aux32 >> 7 * l) & 127];
                const uint8_t *g1 = grid4(coli_iq3xxs_grid, qs[2 * l]), *g2 = grid4(coli_iq3xxs_grid, qs[2 * l + 1]);
                for (int j = 0; j < 4; j++) {
                    y[j] = db * (float)g1[j] * sgnf(s, j);
                    y[j + 4] = db * (float)g2[j] * sgnf(s, j + 4);
                }
            }
        }
    }
}

void dequantize_row_iq3_s(const void *vx, float *y, int64_t n) {
    const block_iq3_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs, *signs = x[i].signs;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 8, signs += 4) {
            const float db = d * (float)(1 + 2 * (x[i].scales[ib32 / 2] >> 4 * (ib32 % 2) & 0xf));
            const int qh = x[i].qh[ib32];
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t *g1 = grid4(coli_iq3s_grid, qs[2 * l] | ((qh << (8 - 2 * l)) & 256));
                const uint8_t *g2 = grid4(coli_iq3s_grid, qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256));
                for (int j = 0; j < 4; j++) {
                    y[j] = db * (float)g1[j] * sgnf(signs[l], j);
                    y[j + 4] = db * (float)g2[j] * sgnf(signs[l], j + 4);
                }
            }
        }
    }
}

/* ---- scalar dot products (ggml-cpu/quants.c _generic) ------------------------------- */

/* Each gives the exact integer sum of a super-block, sum over its 16- or
 * 32-weight groups of (2 * ls + 1) * (grid * sign) . q8 (isum_<t>); the float
 * side is ggml's, `sumf += d * isum` fused by its -ffp-contract=fast build. */

static int32_t isum_iq2_xxs(const block_iq2_xxs *x, const int8_t *q8) {
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
        uint32_t aux32[2];
        memcpy(aux32, x->qs + 4 * ib32, sizeof aux32);
        const uint8_t *aux8 = (const uint8_t *)aux32;
        int32_t sumi = 0;
        for (int l = 0; l < 4; l++, q8 += 8) {
            const uint8_t *g = grid8(coli_iq2xxs_grid, aux8[l]);
            const uint8_t s = coli_ksigns_iq2xs[(aux32[1] >> 7 * l) & 127];
            for (int j = 0; j < 8; j++) sumi += g[j] * q8[j] * sgni(s, j);
        }
        bsum += sumi * (int32_t)(2 * (aux32[1] >> 28) + 1);
    }
    return bsum;
}

static int32_t isum_iq2_xs(const block_iq2_xs *x, const int8_t *q8) {
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ib32++) {
        for (int h = 0; h < 2; h++) {
            int32_t sumi = 0;
            for (int l = 2 * h; l < 2 * h + 2; l++, q8 += 8) {
                const uint16_t q = x->qs[4 * ib32 + l];
                const uint8_t *g = grid8(coli_iq2xs_grid, q & 511);
                const uint8_t s = coli_ksigns_iq2xs[q >> 9];
                for (int j = 0; j < 8; j++) sumi += g[j] * q8[j] * sgni(s, j);
            }
            bsum += sumi * (2 * (x->scales[ib32] >> 4 * h & 0xf) + 1);
        }
    }
    return bsum;
}

static int32_t isum_iq2_s(const block_iq2_s *x, const int8_t *q8) {
    const uint8_t *qs = x->qs, *signs = x->qs + QK_K / 8;
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 4, signs += 4) {
        for (int h = 0; h < 2; h++) {
            int32_t sumi = 0;
            for (int l = 2 * h; l < 2 * h + 2; l++, q8 += 8) {
                const uint8_t *g = grid8(coli_iq2s_grid, qs[l] | (x->qh[ib32] << (8 - 2 * l) & 0x300));
                for (int j = 0; j < 8; j++) sumi += q8[j] * g[j] * sgni(signs[l], j);
            }
            bsum += sumi * (2 * (x->scales[ib32] >> 4 * h & 0xf) + 1);
        }
    }
    return bsum;
}

static int32_t isum_iq3_xxs(const block_iq3_xxs *x, const int8_t *q8) {
    const uint8_t *q3 = x->qs, *gas = x->qs + QK_K / 4;
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ib32++, q3 += 8) {
        uint32_t aux32;
        memcpy(&aux32, gas + 4 * ib32, 4);
        int32_t sumi = 0;
        for (int l = 0; l < 4; l++, q8 += 8) {
            const uint8_t *g1 = grid4(coli_iq3xxs_grid, q3[2 * l]), *g2 = grid4(coli_iq3xxs_grid, q3[2 * l + 1]);
            const uint8_t s = coli_ksigns_iq2xs[(aux32 >> 7 * l) & 127];
            for (int j = 0; j < 4; j++) {
                sumi += g1[j] * q8[j] * sgni(s, j);
                sumi += g2[j] * q8[j + 4] * sgni(s, j + 4);
            }
        }
        bsum += sumi * (int32_t)(2 * (aux32 >> 28) + 1);
    }
    return bsum;
}

static int32_t isum_iq3_s(const block_iq3_s *x, const int8_t *q8) {
    const uint8_t *qs = x->qs, *signs = x->signs;
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ib32++, qs += 8, signs += 4) {
        const int qh = x->qh[ib32];
        int32_t sumi = 0;
        for (int l = 0; l < 4; l++, q8 += 8) {
            const uint8_t *g1 = grid4(coli_iq3s_grid, qs[2 * l] | ((qh << (8 - 2 * l)) & 256));
            const uint8_t *g2 = grid4(coli_iq3s_grid, qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256));
            for (int j = 0; j < 4; j++) {
                sumi += g1[j] * q8[j] * sgni(signs[l], j);
                sumi += g2[j] * q8[j + 4] * sgni(signs[l], j + 4);
            }
        }
        bsum += sumi * (2 * (x->scales[ib32 / 2] >> 4 * (ib32 % 2) & 0xf) + 1);
    }
    return bsum;
}

#define IQ23_GENERIC(t, k)                                                                                 \
    void vec_dot_##t##_q8_K_generic(int n, const void *w, const void *a, size_t as, float *s, size_t ss, \
                                    int nr) {                                                            \
        for (int r = 0; r < nr; r++) {                                                                   \
            const block_##t *x = w;                                                                      \
            const block_q8_K *y = (const block_q8_K *)((const char *)a + r * as);                        \
            float sumf = 0.f;                                                                            \
            for (int i = 0; i < n / QK_K; i++)                                                           \
                sumf = fmaf(coli_fp16_to_fp32(x[i].d) * y[i].d, (float)isum_##t(x + i, y[i].qs), sumf);  \
            s[r * ss] = k * sumf;                                                                        \
        }                                                                                                \
    }
IQ23_GENERIC(iq2_xxs, 0.125f)
IQ23_GENERIC(iq2_xs, 0.125f)
IQ23_GENERIC(iq2_s, 0.125f)
IQ23_GENERIC(iq3_xxs, 0.25f)
IQ23_GENERIC(iq3_s, 1.0f)

/* ---- the kernel tables -------------------------------------------------------------- */

static void set_type(coli_kernel_table *t, uint32_t type, coli_to_float_fn to_float, coli_vec_dot_fn vec_dot,
                     coli_vec_dot_fn tiled) {
    coli_type_kernels *k = &t->type[type];
    memset(k, 0, sizeof *k);
    k->vec_dot_type = GGML_TYPE_Q8_K;
    k->to_float = to_float;
    k->vec_dot = vec_dot;
    k->mm_group = k->mm_in_mult = k->mm_out_mult = 1;
    if (tiled) {
        /* ggml's tiled matmul takes a batch of 8+ rows (mul_mat) and an
         * expert given 8+ rows (mul_mat_id), whatever n_out */
        k->vec_dot_mm = tiled;
        k->mm_min_rows = 8;
        k->mm_in_mult = QK_K;
        k->mm_id_min_rows = 8;
    }
}

void coli_kernels_fill_iq23(coli_kernel_table *t, int isa) {
#define SET_SCALAR(T_, t_) set_type(t, GGML_TYPE_##T_, dequantize_row_##t_, vec_dot_##t_##_q8_K_generic, NULL);
#define SET_AVX2(T_, t_)                                                                                          \
    set_type(t, GGML_TYPE_##T_, dequantize_row_##t_, vec_dot_##t_##_q8_K_avx2, vec_dot_##t_##_q8_K_tiled_avx2); \
    t->type[GGML_TYPE_##T_].vec_dot_16w = vec_dot_##t_##_q8_K_16w_avx2;                                          \
    t->type[GGML_TYPE_##T_].vec_dot_mm_16w = vec_dot_##t_##_q8_K_mm_16w_avx2;
#define SET_AVX512(T_, t_)                                                                                            \
    set_type(t, GGML_TYPE_##T_, dequantize_row_##t_, vec_dot_##t_##_q8_K_avx512, vec_dot_##t_##_q8_K_tiled_avx512); \
    t->type[GGML_TYPE_##T_].vec_dot_16w = vec_dot_##t_##_q8_K_16w_avx512;                                            \
    t->type[GGML_TYPE_##T_].vec_dot_mm_16w = vec_dot_##t_##_q8_K_mm_16w_avx512;
#define EACH(X) X(IQ2_XXS, iq2_xxs) X(IQ2_XS, iq2_xs) X(IQ2_S, iq2_s) X(IQ3_XXS, iq3_xxs) X(IQ3_S, iq3_s)
    switch (isa) {
#ifdef COLI_X86
    case COLI_ISA_AVX2:
    case COLI_ISA_AVXVNNI: EACH(SET_AVX2) break;
    case COLI_ISA_AVX512: EACH(SET_AVX512) break;
#endif
    default: EACH(SET_SCALAR) break;  /* ggml's _generic dot for every row (its build without SIMD kernels) */
    }
#undef EACH
}
