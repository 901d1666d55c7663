/* quant_iq14.h — IQ1_S, IQ1_M, IQ4_NL, IQ4_XS and MXFP4: block formats (byte
 * for byte ggml-common.h) and their kernels (quant_iq14.c scalar,
 * quant_iq14_avx2.c, quant_iq14_avx512.c).
 *
 * Partners (ggml-cpu.c type_traits_cpu): IQ1_S, IQ1_M and IQ4_XS dot with
 * Q8_K; IQ4_NL and MXFP4 with Q8_0.
 *
 * Which arithmetic llama.cpp's x86 CPU backend uses, and so which kernel
 * mirrors it (kernels.h, coli_kernels_fill_iq14):
 *   IQ1_S, IQ1_M, IQ4_XS  one row: ggml_vec_dot_<t>_q8_K (AVX2 code, which the
 *                         AVX-512 build runs too); 8+ rows (mul_mat, and an
 *                         expert of mul_mat_id with 8+ rows): the tiled matmul
 *                         (ggml-cpu/tiled), one float per super-block.
 *   IQ4_NL, MXFP4         repacked at load when n_out % 8 == 0 (iq4_nl_8x8,
 *                         mxfp4_8x8): every row through its gemv / gemm, which
 *                         add up alike (one float per 32-block); weights left as
 *                         stored: ggml_vec_dot_<t>_q8_0 for one row, and for
 *                         IQ4_NL batches of 2+ rows llamafile's tinyBLAS_Q0_AVX. */
#ifndef COLI_QUANT_IQ14_H
#define COLI_QUANT_IQ14_H

#include "quant.h"

#define QK4_NL 32
#define QK_MXFP4 32
#define IQ1S_DELTA 0.125f
#define IQ1M_DELTA 0.125f

/* IQ1_S: 8 blocks of 32, each 4 groups of 8 taken from the 2048-point ternary
 * grid (coli_iq1s_grid, values -1/0/+1), shifted by +-delta:
 * x = d * (2 * s + 1) * (grid[j] + delta), delta = +-1/8. 1.5625 bpw. */
typedef struct {
    coli_half d;          /* super-block scale */
    uint8_t qs[QK_K / 8]; /* grid index of each group of 8, low 8 bits */
    uint16_t qh[QK_K / 32]; /* per block of 32: bits 3l..3l+2 the high 3 index bits of group l,
                               bits 12..14 the 3-bit scale s, bit 15 the sign of delta (set: -) */
} block_iq1_s;
static_assert(sizeof(block_iq1_s) == sizeof(coli_half) + QK_K / 8 + QK_K / 16, "wrong iq1_s block size/padding");

/* IQ1_M: as IQ1_S with a scale per 16 and a delta sign per 8; the fp16 super-
 * block scale is spread over the top nibbles of the four 16-bit scale words.
 * 1.75 bpw. */
typedef struct {
    uint8_t qs[QK_K / 8];      /* grid index of each group of 8, low 8 bits */
    uint8_t qh[QK_K / 16];     /* per pair of groups: low nibble group 2k, high nibble 2k+1:
                                  bits 0..2 the high 3 index bits, bit 3 the delta sign */
    uint8_t scales[QK_K / 32]; /* 4 little-endian u16: 3-bit scales of the 16 halves of 16
                                  (word w, bits 3k..3k+2: half 4w + k), bits 12..15 a nibble of d */
} block_iq1_m;
static_assert(sizeof(block_iq1_m) == QK_K / 8 + QK_K / 16 + QK_K / 32, "wrong iq1_m block size/padding");

/* IQ4_NL: x = d * kvalues_iq4nl[q], the non-linear 4-bit codebook. 4.5 bpw. */
typedef struct {
    coli_half d;            /* delta */
    uint8_t qs[QK4_NL / 2]; /* nibbles: low = element j, high = element j + 16 */
} block_iq4_nl;
static_assert(sizeof(block_iq4_nl) == sizeof(coli_half) + QK4_NL / 2, "wrong iq4_nl block size/padding");

/* IQ4_XS: 8 blocks of 32 in the IQ4_NL codebook, a 6-bit scale each:
 * x = d * (ls - 32) * kvalues_iq4nl[q]. 4.25 bpw. */
typedef struct {
    coli_half d;               /* super-block scale */
    uint16_t scales_h;         /* high 2 bits of block ib's scale at bits 2ib, 2ib+1 */
    uint8_t scales_l[QK_K / 64]; /* low 4 bits: block 2k low nibble, block 2k+1 high nibble */
    uint8_t qs[QK_K / 2];      /* per block of 32, 16 bytes: low nibble element j, high j + 16 */
} block_iq4_xs;
static_assert(sizeof(block_iq4_xs) == sizeof(coli_half) + sizeof(uint16_t) + QK_K / 64 + QK_K / 2,
              "wrong iq4_xs block size/padding");

/* MXFP4 (OCP microscaling): 32 E2M1 values and one E8M0 exponent:
 * x = 2^(e - 127) * fp4(q) = 2^(e - 128) * kvalues_mxfp4[q] (the table holds
 * the E2M1 values doubled, so they are integers). 4.25 bpw. */
typedef struct {
    uint8_t e;                /* E8M0 shared exponent */
    uint8_t qs[QK_MXFP4 / 2]; /* nibbles: low = element j, high = element j + 16 */
} block_mxfp4;
static_assert(sizeof(block_mxfp4) == 1 + QK_MXFP4 / 2, "wrong mxfp4 block size/padding");

/* ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 128) built from its bits (e < 2: the
 * denormals 2^-128, 2^-127); the CPU backend's x86 table holds the same floats. */
static inline float coli_e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The fp16 super-block scale of an IQ1_M block, gathered from its scale words. */
static inline coli_half coli_iq1m_scale(const block_iq1_m *x) {
    uint16_t sc[4];
    memcpy(sc, x->scales, sizeof sc);
    return (coli_half)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

void dequantize_row_iq1_s(const void *x, float *y, int64_t n);
void dequantize_row_iq1_m(const void *x, float *y, int64_t n);
void dequantize_row_iq4_nl(const void *x, float *y, int64_t n);
void dequantize_row_iq4_xs(const void *x, float *y, int64_t n);
void dequantize_row_mxfp4(const void *x, float *y, int64_t n);

/* ggml-cpu/quants.c's scalar dots (as its binary fuses them) */
COLI_DECLARE_VEC_DOT(vec_dot_iq1_s_q8_K_generic);
COLI_DECLARE_VEC_DOT(vec_dot_iq1_m_q8_K_generic);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_nl_q8_0_generic);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_xs_q8_K_generic);
COLI_DECLARE_VEC_DOT(vec_dot_mxfp4_q8_0_generic);
/* scalar twins of the batch arithmetic: the tiled matmul, the repacked gemv/gemm, tinyBLAS */
COLI_DECLARE_VEC_DOT(vec_dot_iq1_s_q8_K_tiled_generic);
COLI_DECLARE_VEC_DOT(vec_dot_iq1_m_q8_K_tiled_generic);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_xs_q8_K_tiled_generic);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_nl_q8_0_repacked_generic);
COLI_DECLARE_VEC_DOT(vec_dot_mxfp4_q8_0_repacked_generic);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_nl_q8_0_tinyblas_generic);

#ifdef COLI_X86
/* quant_iq14_avx2.c: ggml's AVX2 one-row kernels and the batch paths */
COLI_DECLARE_VEC_DOT(vec_dot_iq1_s_q8_K_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_iq1_m_q8_K_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_nl_q8_0_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_xs_q8_K_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_mxfp4_q8_0_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_iq1_s_q8_K_tiled_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_iq1_m_q8_K_tiled_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_xs_q8_K_tiled_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_nl_q8_0_repacked_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_mxfp4_q8_0_repacked_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_nl_q8_0_tinyblas_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_nl_q8_0_tinyblas_2w_avx2); /* 2 weight rows a pass */
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_nl_q8_0_tinyblas_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_nl_q8_0_16w_avx2); /* as stored: ggml_vec_dot, 4 rows at a time */
COLI_DECLARE_VEC_DOT_2W(vec_dot_mxfp4_q8_0_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_nl_q8_0_repacked_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_nl_q8_0_r16_16w_avx2); /* on a tile coli_repack_b32_r16 made */
COLI_DECLARE_VEC_DOT_2W(vec_dot_mxfp4_q8_0_repacked_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_mxfp4_q8_0_r16_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq1_s_q8_K_tiled_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq1_m_q8_K_tiled_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_xs_q8_K_tiled_16w_avx2);
/* quant_iq14_avx512.c (AVX-512 table): the same bits, faster — batches 16 weight rows at once (VNNI) */
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_nl_q8_0_repacked_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_nl_q8_0_r16_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_mxfp4_q8_0_repacked_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_mxfp4_q8_0_r16_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_xs_q8_K_tiled_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq1_s_q8_K_tiled_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq1_m_q8_K_tiled_16w_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_iq1_s_q8_K_avx512); /* ggml's AVX2 one-row bits, lanes formed 64 values a step */
COLI_DECLARE_VEC_DOT(vec_dot_iq1_m_q8_K_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_xs_q8_K_avx512); /* ggml's AVX2 one-row bits, two sub-blocks a zmm */
COLI_DECLARE_VEC_DOT(vec_dot_iq4_nl_q8_0_avx512); /* the AVX2 kernels' bits, lanes by 256-bit dpbusd */
COLI_DECLARE_VEC_DOT(vec_dot_mxfp4_q8_0_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_iq4_nl_q8_0_tinyblas_avx512);
/* as stored, 16 weight rows at once (two a zmm): ggml_vec_dot's and tinyBLAS's bits */
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_nl_q8_0_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_mxfp4_q8_0_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_iq4_nl_q8_0_tinyblas_16w_avx512);
#endif

#endif
