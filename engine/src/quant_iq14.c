/* quant_iq14.c — IQ1_S, IQ1_M, IQ4_NL, IQ4_XS and MXFP4: dequantizers, the
 * scalar kernels, and their entries in the kernel tables
 * (coli_kernels_fill_iq14). Block formats and which llama.cpp path each
 * kernel mirrors: quant_iq14.h.
 *
 * The scalar dots are ggml-cpu/quants.c's `_generic` ones as its binary
 * computes them: GCC's default -ffp-contract=fast fuses their `sumf += a * b`
 * into fmaf, which we build with -ffp-contract=off and so write out. */
#include "quant_iq14.h"

#include <math.h>

#include "iq_grids.h"
#include "kernels.h"

/* The 8 values of a ternary grid point, bytes 0xff / 0x00 / 0x01 as int8. */
static inline void iq1s_point(int idx, int8_t g[8]) { memcpy(g, &coli_iq1s_grid[idx], 8); }

/* ---- dequantize (ggml-quants.c) ------------------------------------------------------ */

void dequantize_row_iq1_s(const void *vx, float *y, int64_t n) {
    const block_iq1_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 4) {
            const uint16_t qh = x[i].qh[ib];
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -IQ1S_DELTA : IQ1S_DELTA;
            for (int l = 0; l < 4; l++, y += 8) {
                int8_t g[8];
                iq1s_point(qs[l] | (((qh >> 3 * l) & 7) << 8), g);
                for (int j = 0; j < 8; j++) y[j] = dl * ((float)g[j] + delta);
            }
        }
    }
}

void dequantize_row_iq1_m(const void *vx, float *y, int64_t n) {
    const block_iq1_m *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, sizeof sc);
        const float d = coli_fp16_to_fp32(coli_iq1m_scale(&x[i]));
        const uint8_t *qs = x[i].qs, *qh = x[i].qh;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 4, qh += 2) {
            const float dl[2] = {d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 7) + 1),
                                 d * (float)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1)};
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t h = (uint8_t)(qh[l / 2] >> 4 * (l % 2)); /* this group's nibble */
                const float delta = h & 0x08 ? -IQ1M_DELTA : IQ1M_DELTA;
                int8_t g[8];
                iq1s_point(qs[l] | ((h & 7) << 8), g);
                for (int j = 0; j < 8; j++) y[j] = dl[l / 2] * ((float)g[j] + delta);
            }
        }
    }
}

void dequantize_row_iq4_nl(const void *vx, float *y, int64_t n) {
    const block_iq4_nl *x = vx;
    for (int64_t i = 0; i < n / QK4_NL; i++, y += QK4_NL) {
        const float d = coli_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * (float)coli_kvalues_iq4nl[x[i].qs[j] & 0xf];
            y[j + QK4_NL / 2] = d * (float)coli_kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

/* the 6-bit scale of block ib of an IQ4_XS super-block */
static inline int iq4_xs_ls(const block_iq4_xs *x, int ib) {
    return ((x->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x->scales_h >> 2 * ib) & 3) << 4);
}

void dequantize_row_iq4_xs(const void *vx, float *y, int64_t n) {
    const block_iq4_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32, qs += 16) {
            const float dl = d * (float)(iq4_xs_ls(&x[i], ib) - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)coli_kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * (float)coli_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

void dequantize_row_mxfp4(const void *vx, float *y, int64_t n) {
    const block_mxfp4 *x = vx;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, y += QK_MXFP4) {
        const float d = coli_e8m0_to_fp32_half(x[i].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[j] = (float)coli_kvalues_mxfp4[x[i].qs[j] & 0xf] * d;
            y[j + QK_MXFP4 / 2] = (float)coli_kvalues_mxfp4[x[i].qs[j] >> 4] * d;
        }
    }
}

/* ---- integer pieces every kernel of a type shares ------------------------------------- */

/* IQ1_S block ib of a super-block against its 32 activation bytes: sum(grid * q8) */
static int iq1_s_block_dot(const block_iq1_s *x, int ib, const int8_t *q8) {
    int sum = 0;
    for (int l = 0; l < 4; l++) {
        int8_t g[8];
        iq1s_point(x->qs[4 * ib + l] | (((x->qh[ib] >> 3 * l) & 7) << 8), g);
        for (int j = 0; j < 8; j++) sum += g[j] * q8[8 * l + j];
    }
    return sum;
}

/* IQ1_M group l (0..3) of block ib: sum(grid * q8) and sum(q8) over its 8 values; returns the delta sign */
static int iq1_m_group(const block_iq1_m *x, int ib, int l, const int8_t *q8, int *gsum, int *qsum) {
    const uint8_t h = (uint8_t)(x->qh[2 * ib + l / 2] >> 4 * (l % 2));
    int8_t g[8];
    iq1s_point(x->qs[4 * ib + l] | ((h & 7) << 8), g);
    int a = 0, b = 0;
    for (int j = 0; j < 8; j++) {
        a += g[j] * q8[j];
        b += q8[j];
    }
    *gsum = a;
    *qsum = b;
    return h & 0x08 ? -1 : 1;
}

/* the 3-bit scale of half hf (0..15, 16 values each) of an IQ1_M super-block, as 2s + 1 */
static inline int iq1_m_ls(const block_iq1_m *x, int hf) {
    uint16_t sc[4];
    memcpy(sc, x->scales, sizeof sc);
    const int ib = hf / 2;
    return 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * (hf % 2))) & 7) + 1;
}

/* 16 nibbles of an IQ4 / MXFP4 block (low: element j, high: j + 16) against a Q8_0 block */
static int nl_block_dot(const uint8_t *qs, const int8_t *kv, const int8_t *q8) {
    int sumi1 = 0, sumi2 = 0;
    for (int j = 0; j < 16; j++) {
        sumi1 += q8[j] * kv[qs[j] & 0xf];
        sumi2 += q8[j + 16] * kv[qs[j] >> 4];
    }
    return sumi1 + sumi2;
}

/* ---- ggml's _generic dots ----------------------------------------------------------------- */

static float dot1_iq1_s(int n, const void *vw, const void *va) {
    const block_iq1_s *x = vw;
    const block_q8_K *y = va;
    float sumf = 0;
    for (int i = 0; i < n / QK_K; i++) {
        int sumi = 0, sumi1 = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const int ls = 2 * ((x[i].qh[ib] >> 12) & 7) + 1;
            const int delta = x[i].qh[ib] & 0x8000 ? -1 : 1;
            sumi += ls * iq1_s_block_dot(&x[i], ib, y[i].qs + 32 * ib);
            sumi1 += ls * delta * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
        }
        const float d = coli_fp16_to_fp32(x[i].d) * y[i].d;
        sumf = fmaf(d, fmaf((float)sumi1, IQ1S_DELTA, (float)sumi), sumf);
    }
    return sumf;
}

static float dot1_iq1_m(int n, const void *vw, const void *va) {
    const block_iq1_m *x = vw;
    const block_q8_K *y = va;
    float sumf = 0;
    for (int i = 0; i < n / QK_K; i++) {
        int sumi1 = 0, sumi2 = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            int sum1[2] = {0, 0}, sum2[2] = {0, 0};
            for (int l = 0; l < 4; l++) {
                int gs, qs;
                const int delta = iq1_m_group(&x[i], ib, l, y[i].qs + 32 * ib + 8 * l, &gs, &qs);
                sum1[l / 2] += gs;
                sum2[l / 2] += qs * delta;
            }
            const int ls1 = iq1_m_ls(&x[i], 2 * ib), ls2 = iq1_m_ls(&x[i], 2 * ib + 1);
            sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
            sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
        }
        const float d = coli_fp16_to_fp32(coli_iq1m_scale(&x[i])) * y[i].d;
        sumf = fmaf(d, fmaf((float)sumi2, IQ1M_DELTA, (float)sumi1), sumf);
    }
    return sumf;
}

static float dot1_iq4_nl(int n, const void *vw, const void *va) {
    const block_iq4_nl *x = vw;
    const block_q8_0 *y = va;
    float sumf = 0;
    for (int ib = 0; ib < n / QK4_NL; ib++) {
        const float d = coli_fp16_to_fp32(y[ib].d) * coli_fp16_to_fp32(x[ib].d);
        sumf = fmaf((float)nl_block_dot(x[ib].qs, coli_kvalues_iq4nl, y[ib].qs), d, sumf);
    }
    return sumf;
}

static float dot1_mxfp4(int n, const void *vw, const void *va) {
    const block_mxfp4 *x = vw;
    const block_q8_0 *y = va;
    float sumf = 0;
    for (int ib = 0; ib < n / QK_MXFP4; ib++) {
        const float d = coli_fp16_to_fp32(y[ib].d) * coli_e8m0_to_fp32_half(x[ib].e);
        sumf = fmaf((float)nl_block_dot(x[ib].qs, coli_kvalues_mxfp4, y[ib].qs), d, sumf);
    }
    return sumf;
}

static float dot1_iq4_xs(int n, const void *vw, const void *va) {
    const block_iq4_xs *x = vw;
    const block_q8_K *y = va;
    float sumf = 0;
    for (int i = 0; i < n / QK_K; i++) {
        const float d4d8 = coli_fp16_to_fp32(x[i].d) * y[i].d;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const float dl = d4d8 * (float)(iq4_xs_ls(&x[i], ib) - 32);
            const int sumi = nl_block_dot(x[i].qs + 16 * ib, coli_kvalues_iq4nl, y[i].qs + 32 * ib);
            sumf = fmaf(dl, (float)sumi, sumf);
        }
    }
    return sumf;
}

/* ---- the batch arithmetic, scalar ---------------------------------------------------------- */

/* The tiled matmul (ggml-cpu/tiled, AVX-512 VNNI microkernel): per super-block
 * the exact integer sum over its sub-blocks of scale * (codes . q8), codes the
 * tile's (8 * grid + delta for IQ1, the codebook value for IQ4_XS), then
 * acc = fma(float(isum) * d, dy, acc), d the tile's (IQ1: fp16 d / 8). */
static float tiled_iq1_s(int n, const void *vw, const void *va) {
    const block_iq1_s *x = vw;
    const block_q8_K *y = va;
    float acc = 0;
    for (int i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const int ls = 2 * ((x[i].qh[ib] >> 12) & 7) + 1;
            const int delta = x[i].qh[ib] & 0x8000 ? -1 : 1;
            isum += ls * (8 * iq1_s_block_dot(&x[i], ib, y[i].qs + 32 * ib) +
                          delta * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]));
        }
        acc = fmaf((float)isum * (coli_fp16_to_fp32(x[i].d) * 0.125f), y[i].d, acc);
    }
    return acc;
}

static float tiled_iq1_m(int n, const void *vw, const void *va) {
    const block_iq1_m *x = vw;
    const block_q8_K *y = va;
    float acc = 0;
    for (int i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++)
            for (int h = 0; h < 2; h++) {
                int s = 0;
                for (int l = 2 * h; l < 2 * h + 2; l++) {
                    int gs, qs;
                    const int delta = iq1_m_group(&x[i], ib, l, y[i].qs + 32 * ib + 8 * l, &gs, &qs);
                    s += 8 * gs + delta * qs;
                }
                isum += iq1_m_ls(&x[i], 2 * ib + h) * s;
            }
        acc = fmaf((float)isum * (coli_fp16_to_fp32(coli_iq1m_scale(&x[i])) * 0.125f), y[i].d, acc);
    }
    return acc;
}

static float tiled_iq4_xs(int n, const void *vw, const void *va) {
    const block_iq4_xs *x = vw;
    const block_q8_K *y = va;
    float acc = 0;
    for (int i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++)
            isum += (iq4_xs_ls(&x[i], ib) - 32) * nl_block_dot(x[i].qs + 16 * ib, coli_kvalues_iq4nl, y[i].qs + 32 * ib);
        acc = fmaf((float)isum * coli_fp16_to_fp32(x[i].d), y[i].d, acc);
    }
    return acc;
}

/* The repacked gemv / gemm (iq4_nl_8x8, mxfp4_8x8): acc = fma(float(isum), dw * dy, acc) per block. */
static float repacked_iq4_nl(int n, const void *vw, const void *va) {
    const block_iq4_nl *x = vw;
    const block_q8_0 *y = va;
    float acc = 0;
    for (int ib = 0; ib < n / QK4_NL; ib++)
        acc = fmaf((float)nl_block_dot(x[ib].qs, coli_kvalues_iq4nl, y[ib].qs),
                   coli_fp16_to_fp32(x[ib].d) * coli_fp16_to_fp32(y[ib].d), acc);
    return acc;
}

static float repacked_mxfp4(int n, const void *vw, const void *va) {
    const block_mxfp4 *x = vw;
    const block_q8_0 *y = va;
    float acc = 0;
    for (int ib = 0; ib < n / QK_MXFP4; ib++)
        acc = fmaf((float)nl_block_dot(x[ib].qs, coli_kvalues_mxfp4, y[ib].qs),
                   coli_e8m0_to_fp32_half(x[ib].e) * coli_fp16_to_fp32(y[ib].d), acc);
    return acc;
}

/* llamafile's tinyBLAS_Q0_AVX: 8 lanes (elements 4k..4k+3 of each block),
 * lane = fma(dx * dy, float(lane sum), lane), added up as ggml's AVX2 hsum. */
static float tinyblas_iq4_nl(int n, const void *vw, const void *va) {
    const block_iq4_nl *x = vw;
    const block_q8_0 *y = va;
    float acc[8] = {0};
    for (int ib = 0; ib < n / QK4_NL; ib++) {
        const float d = coli_fp16_to_fp32(x[ib].d) * coli_fp16_to_fp32(y[ib].d);
        for (int k = 0; k < 8; k++) {
            int s = 0;
            for (int j = 4 * k; j < 4 * k + 4; j++) {
                const uint8_t q = x[ib].qs[j % 16];
                s += coli_kvalues_iq4nl[j < 16 ? q & 0xf : q >> 4] * y[ib].qs[j];
            }
            acc[k] = fmaf(d, (float)s, acc[k]);
        }
    }
    return coli_reduce_add8(acc);
}

#define GENERIC_NR(name, dot1)                                                                              \
    void name(int n, const void *w, const void *a, size_t a_stride, float *s, size_t s_stride, int nr) {    \
        for (int r = 0; r < nr; r++) s[r * s_stride] = dot1(n, w, (const char *)a + r * a_stride);         \
    }

GENERIC_NR(vec_dot_iq1_s_q8_K_generic, dot1_iq1_s)
GENERIC_NR(vec_dot_iq1_m_q8_K_generic, dot1_iq1_m)
GENERIC_NR(vec_dot_iq4_nl_q8_0_generic, dot1_iq4_nl)
GENERIC_NR(vec_dot_iq4_xs_q8_K_generic, dot1_iq4_xs)
GENERIC_NR(vec_dot_mxfp4_q8_0_generic, dot1_mxfp4)
GENERIC_NR(vec_dot_iq1_s_q8_K_tiled_generic, tiled_iq1_s)
GENERIC_NR(vec_dot_iq1_m_q8_K_tiled_generic, tiled_iq1_m)
GENERIC_NR(vec_dot_iq4_xs_q8_K_tiled_generic, tiled_iq4_xs)
GENERIC_NR(vec_dot_iq4_nl_q8_0_repacked_generic, repacked_iq4_nl)
GENERIC_NR(vec_dot_mxfp4_q8_0_repacked_generic, repacked_mxfp4)
GENERIC_NR(vec_dot_iq4_nl_q8_0_tinyblas_generic, tinyblas_iq4_nl)

/* ---- the kernel tables ---------------------------------------------------------------------- */

static void set_entry(coli_type_kernels *k, uint32_t partner, coli_to_float_fn to_float, coli_vec_dot_fn vec_dot) {
    memset(k, 0, sizeof *k);
    k->vec_dot_type = partner;
    k->to_float = to_float;
    k->vec_dot = vec_dot;
    k->mm_group = k->mm_in_mult = k->mm_out_mult = 1;
}

static void set_batch(coli_type_kernels *k, coli_vec_dot_fn mm, int min_rows, int in_mult, int out_mult,
                      int id_min_rows) {
    k->vec_dot_mm = mm;
    k->mm_min_rows = min_rows;
    k->mm_group = 1;
    k->mm_in_mult = in_mult;
    k->mm_out_mult = out_mult;
    k->mm_id_min_rows = id_min_rows;
}

void coli_kernels_fill_iq14(coli_kernel_table *t, int isa) {
    coli_type_kernels *s1 = &t->type[GGML_TYPE_IQ1_S], *m1 = &t->type[GGML_TYPE_IQ1_M];
    coli_type_kernels *nl = &t->type[GGML_TYPE_IQ4_NL], *xs = &t->type[GGML_TYPE_IQ4_XS];
    coli_type_kernels *mx = &t->type[GGML_TYPE_MXFP4];
    /* the scalar set (other CPUs): ggml's _generic dots for every row */
    set_entry(s1, GGML_TYPE_Q8_K, dequantize_row_iq1_s, vec_dot_iq1_s_q8_K_generic);
    set_entry(m1, GGML_TYPE_Q8_K, dequantize_row_iq1_m, vec_dot_iq1_m_q8_K_generic);
    set_entry(nl, GGML_TYPE_Q8_0, dequantize_row_iq4_nl, vec_dot_iq4_nl_q8_0_generic);
    set_entry(xs, GGML_TYPE_Q8_K, dequantize_row_iq4_xs, vec_dot_iq4_xs_q8_K_generic);
    set_entry(mx, GGML_TYPE_Q8_0, dequantize_row_mxfp4, vec_dot_mxfp4_q8_0_generic);
    memset(&t->unpacked[GGML_TYPE_IQ4_NL], 0, sizeof t->unpacked[0]);
    memset(&t->unpacked[GGML_TYPE_MXFP4], 0, sizeof t->unpacked[0]);
    memset(&t->r16[GGML_TYPE_IQ4_NL], 0, sizeof t->r16[0]);
    memset(&t->r16[GGML_TYPE_MXFP4], 0, sizeof t->r16[0]);
    if (isa == COLI_ISA_SCALAR) return;
#ifdef COLI_X86
    /* AVX2, AVX-VNNI and AVX-512 tables alike: ggml has AVX2 code only for
     * these types, which its AVX-512 build runs; the tiled microkernel of its
     * VNNI build and of an AVX2 build give the same floats (the same exact
     * integer per super-block, then d0 * isum and one fma with dy). */
    s1->vec_dot = vec_dot_iq1_s_q8_K_avx2;
    m1->vec_dot = vec_dot_iq1_m_q8_K_avx2;
    xs->vec_dot = vec_dot_iq4_xs_q8_K_avx2;
    /* the tiled matmul from 8 rows, for mul_mat and for each expert of mul_mat_id */
    set_batch(s1, vec_dot_iq1_s_q8_K_tiled_avx2, 8, QK_K, 1, 8);
    set_batch(m1, vec_dot_iq1_m_q8_K_tiled_avx2, 8, QK_K, 1, 8);
    set_batch(xs, vec_dot_iq4_xs_q8_K_tiled_avx2, 8, QK_K, 1, 8);
    /* IQ4_NL, MXFP4 as stored (n_out % 8, or a 3-D weight): ggml's one-row
     * vec_dot; IQ4_NL batches of 2+ rows through tinyBLAS (mul_mat only:
     * mul_mat_id has no tinyBLAS) */
    coli_type_kernels *nlu = &t->unpacked[GGML_TYPE_IQ4_NL], *mxu = &t->unpacked[GGML_TYPE_MXFP4];
    set_entry(nlu, GGML_TYPE_Q8_0, dequantize_row_iq4_nl, vec_dot_iq4_nl_q8_0_avx2);
    set_batch(nlu, vec_dot_iq4_nl_q8_0_tinyblas_avx2, 2, QK4_NL, 1, 0);
    nlu->vec_dot_mm_2w = vec_dot_iq4_nl_q8_0_tinyblas_2w_avx2;
    nlu->vec_dot_mm_16w = vec_dot_iq4_nl_q8_0_tinyblas_16w_avx2;
    set_entry(mxu, GGML_TYPE_Q8_0, dequantize_row_mxfp4, vec_dot_mxfp4_q8_0_avx2);
    nlu->vec_dot_16w = vec_dot_iq4_nl_q8_0_16w_avx2;
    mxu->vec_dot_16w = vec_dot_mxfp4_q8_0_16w_avx2;
    /* repacked (n_out % 8 == 0): gemv and gemm add up alike, every row, experts too */
    nl->vec_dot = vec_dot_iq4_nl_q8_0_avx2;
    mx->vec_dot = vec_dot_mxfp4_q8_0_avx2;
    set_batch(nl, vec_dot_iq4_nl_q8_0_repacked_avx2, 1, QK4_NL, 8, 1);
    set_batch(mx, vec_dot_mxfp4_q8_0_repacked_avx2, 1, QK_MXFP4, 8, 1);
    nl->vec_dot_mm_16w = vec_dot_iq4_nl_q8_0_repacked_16w_avx2;
    mx->vec_dot_mm_16w = vec_dot_mxfp4_q8_0_repacked_16w_avx2;
    /* IQ1 / IQ4_XS batches: 16 weight rows decoded once per super-block for every activation row */
    s1->vec_dot_mm_16w = vec_dot_iq1_s_q8_K_tiled_16w_avx2;
    m1->vec_dot_mm_16w = vec_dot_iq1_m_q8_K_tiled_16w_avx2;
    xs->vec_dot_mm_16w = vec_dot_iq4_xs_q8_K_tiled_16w_avx2;
    if (isa == COLI_ISA_AVX512) {
        /* the same integers and floats, faster: batches 16 weight rows a zmm
         * by dpbusd; one row with BMI2 index decoding (IQ1) or 256-bit dpbusd lanes */
        nl->vec_dot_mm_16w = vec_dot_iq4_nl_q8_0_repacked_16w_avx512;
        mx->vec_dot_mm_16w = vec_dot_mxfp4_q8_0_repacked_16w_avx512;
        s1->vec_dot_mm_16w = vec_dot_iq1_s_q8_K_tiled_16w_avx512;
        m1->vec_dot_mm_16w = vec_dot_iq1_m_q8_K_tiled_16w_avx512;
        xs->vec_dot_mm_16w = vec_dot_iq4_xs_q8_K_tiled_16w_avx512;
        s1->vec_dot = vec_dot_iq1_s_q8_K_avx512;
        m1->vec_dot = vec_dot_iq1_m_q8_K_avx512;
        xs->vec_dot = vec_dot_iq4_xs_q8_K_avx512;
        nl->vec_dot = nlu->vec_dot = vec_dot_iq4_nl_q8_0_avx512;
        mx->vec_dot = mxu->vec_dot = vec_dot_mxfp4_q8_0_avx512;
        nlu->vec_dot_mm = vec_dot_iq4_nl_q8_0_tinyblas_avx512;
        nlu->vec_dot_16w = vec_dot_iq4_nl_q8_0_16w_avx512;
        nlu->vec_dot_mm_16w = vec_dot_iq4_nl_q8_0_tinyblas_16w_avx512;
        mxu->vec_dot_16w = vec_dot_mxfp4_q8_0_16w_avx512;
    }
    /* IQ4_NL and MXFP4 repacked at load into 16-row tiles (coli_repack_b32_r16): the
     * repacked arithmetic, which serves every row */
    coli_set_r16(t, GGML_TYPE_IQ4_NL, NULL,
                 isa == COLI_ISA_AVX512 ? vec_dot_iq4_nl_q8_0_r16_16w_avx512 : vec_dot_iq4_nl_q8_0_r16_16w_avx2);
    coli_set_r16(t, GGML_TYPE_MXFP4, NULL,
                 isa == COLI_ISA_AVX512 ? vec_dot_mxfp4_q8_0_r16_16w_avx512 : vec_dot_mxfp4_q8_0_r16_16w_avx2);
#endif
}
