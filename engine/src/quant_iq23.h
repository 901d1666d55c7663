/* quant_iq23.h — the grid (lattice) i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS
 * and IQ3_S: their block formats (byte for byte ggml-common.h) and kernels.
 *
 * Every one of them stores, per group of 8 (IQ2) or 4 (IQ3) weights, an index
 * into a grid of magnitude points (iq_grids.h) and the 8 signs of the group,
 * plus a small odd scale 2 * ls + 1 per 16 or 32 weights and one f16 d per
 * super-block of QK_K = 256. Their activation partner is Q8_K.
 *
 * Two arithmetics, as llama.cpp's CPU backend (x86):
 *   vec_dot_<t>_q8_K_<isa>  one row (and batches under 8 rows): ggml's AVX2
 *       ggml_vec_dot_<t>_q8_K (the AVX-512 build runs it too): per super-block
 *       8 int32 lanes, acc = fma(d(x) * d(y), float(lanes), acc), and at the
 *       end k * hsum(acc), k = 1/8 (IQ2), 1/4 (IQ3_XXS) or 1 (IQ3_S);
 *   vec_dot_<t>_q8_K_tiled_<isa>  batches of 8 rows or more: ggml's tiled
 *       matmul, the whole integer sum of a super-block at once,
 *       acc = fma(float(isum) * (d(x) * k), d(y), acc).
 * The AVX2-only build's tiled microkernel computes the same floats as the
 * AVX-512 VNNI one (d0 * float(s1), then one fma into the output), so the
 * avx2 / avxvnni sets match both builds. vec_dot_16w / vec_dot_mm_16w: the
 * same two arithmetics for 16 weight rows, each weight super-block decoded
 * once for up to 64 activation rows (batches, experts given many rows); the
 * AVX-512 tiled one decodes the 16 rows into lanes (tile16_avx512.h, as
 * llama.cpp's VNNI microtile) for up to 256.
 * The scalar twins (_generic) are ggml-cpu/quants.c's, bit for bit with the
 * exported ggml_vec_dot_<t>_q8_K_generic: sum = fma(d(x) * d(y), float(isum),
 * sum), k * sum at the end; the scalar set uses them for every row. */
#ifndef COLI_QUANT_IQ23_H
#define COLI_QUANT_IQ23_H

#include "quant.h"

/* IQ2_XXS: 8 groups of 32 per super-block; x = d * (2 * ls + 1) / 8 * grid * sign.
 * qs[4 * ib32 .. +3] as two u32: the first holds the 4 grid indices (bytes,
 * into coli_iq2xxs_grid), the second 4 x 7 sign bits (coli_ksigns_iq2xs) in
 * bits 0..27 and ls in bits 28..31. 2.0625 bits per weight. */
typedef struct {
    coli_half d;            /* super-block scale */
    uint16_t qs[QK_K / 8];  /* grid indices, signs and 4-bit scales, 8 bytes per 32 weights */
} block_iq2_xxs;
static_assert(sizeof(block_iq2_xxs) == 2 + QK_K / 8 * 2, "wrong iq2_xxs block size/padding");

/* IQ2_XS: as IQ2_XXS with a 9-bit grid index (coli_iq2xs_grid) and 7 sign
 * bits per u16 of qs, and one 4-bit scale per 16 weights (low nibble of
 * scales[ib32] for the first 16 of group ib32, high nibble for the next).
 * 2.3125 bpw. */
typedef struct {
    coli_half d;               /* super-block scale */
    uint16_t qs[QK_K / 8];     /* index (bits 0..8) | sign index (bits 9..15), per 8 weights */
    uint8_t scales[QK_K / 32]; /* two 4-bit scales per 32 weights */
} block_iq2_xs;
static_assert(sizeof(block_iq2_xs) == 2 + QK_K / 8 * 2 + QK_K / 32, "wrong iq2_xs block size/padding");

/* IQ2_S: 10-bit grid index (coli_iq2s_grid): low 8 bits in qs[0..31], bits
 * 8..9 of group l of 32-block ib32 in qh[ib32] >> 2l; 8 explicit sign bits
 * per 8 weights in qs[32..63]; scales as IQ2_XS. 2.5625 bpw. */
typedef struct {
    coli_half d;               /* super-block scale */
    uint8_t qs[QK_K / 4];      /* 32 grid index bytes, then 32 sign bytes */
    uint8_t qh[QK_K / 32];     /* high index bits, 2 per 8 weights */
    uint8_t scales[QK_K / 32]; /* two 4-bit scales per 32 weights */
} block_iq2_s;
static_assert(sizeof(block_iq2_s) == 2 + QK_K / 4 + QK_K / 16, "wrong iq2_s block size/padding");

/* IQ3_XXS: 4 weights per grid point (coli_iq3xxs_grid, u32 of 4 bytes);
 * qs[0..63] the indices, qs[64..95] one u32 per 32 weights: 4 x 7 sign bits
 * (coli_ksigns_iq2xs) and ls in bits 28..31; x = d * (2 * ls + 1) / 4 * grid * sign.
 * 3.0625 bpw. */
typedef struct {
    coli_half d;               /* super-block scale */
    uint8_t qs[3 * QK_K / 8];  /* 64 grid indices, then 8 x u32 signs and scales */
} block_iq3_xxs;
static_assert(sizeof(block_iq3_xxs) == 2 + 3 * QK_K / 8, "wrong iq3_xxs block size/padding");

/* IQ3_S: 9-bit grid index (coli_iq3s_grid): low 8 bits in qs, bit 8 of index
 * k of 32-block ib in qh[ib] >> k; 8 explicit sign bits per 8 weights; a
 * 4-bit scale per 32 (scales[ib / 2], low nibble for even ib);
 * x = d * (2 * ls + 1) * grid * sign. 3.4375 bpw. */
#define IQ3S_N_SCALE (QK_K / 64)
typedef struct {
    coli_half d;                   /* super-block scale */
    uint8_t qs[QK_K / 4];          /* low 8 bits of the 64 grid indices */
    uint8_t qh[QK_K / 32];         /* their 9th bits */
    uint8_t signs[QK_K / 8];       /* one sign bit per weight */
    uint8_t scales[IQ3S_N_SCALE];  /* two 4-bit scales per byte */
} block_iq3_s;
static_assert(sizeof(block_iq3_s) == 2 + 13 * (QK_K / 32) + IQ3S_N_SCALE, "wrong iq3_s block size/padding");

#define COLI_IQ23_TYPES(X) X(iq2_xxs) X(iq2_xs) X(iq2_s) X(iq3_xxs) X(iq3_s)

#define COLI_IQ23_DECLARE_SCALAR(t)                             \
    void dequantize_row_##t(const void *x, float *y, int64_t n); \
    COLI_DECLARE_VEC_DOT(vec_dot_##t##_q8_K_generic);
COLI_IQ23_TYPES(COLI_IQ23_DECLARE_SCALAR)

#ifdef COLI_X86
/* quant_iq23_avx2.c: ggml's AVX2 one-row kernel and its tiled matmul's arithmetic; the 16-row
 * kernels decode a weight super-block once for many activation rows */
#define COLI_IQ23_DECLARE_AVX2(t)                          \
    COLI_DECLARE_VEC_DOT(vec_dot_##t##_q8_K_avx2);         \
    COLI_DECLARE_VEC_DOT(vec_dot_##t##_q8_K_tiled_avx2);   \
    COLI_DECLARE_VEC_DOT_2W(vec_dot_##t##_q8_K_16w_avx2);  \
    COLI_DECLARE_VEC_DOT_2W(vec_dot_##t##_q8_K_mm_16w_avx2);
COLI_IQ23_TYPES(COLI_IQ23_DECLARE_AVX2)
/* quant_iq23_avx512.c: the same bits, two 32-weight groups per instruction; the 16-row
 * kernels decode a weight super-block once for many activation rows */
#define COLI_IQ23_DECLARE_AVX512(t)                          \
    COLI_DECLARE_VEC_DOT(vec_dot_##t##_q8_K_avx512);         \
    COLI_DECLARE_VEC_DOT(vec_dot_##t##_q8_K_tiled_avx512);   \
    COLI_DECLARE_VEC_DOT_2W(vec_dot_##t##_q8_K_16w_avx512);  \
    COLI_DECLARE_VEC_DOT_2W(vec_dot_##t##_q8_K_mm_16w_avx512);
COLI_IQ23_TYPES(COLI_IQ23_DECLARE_AVX512)
#endif
/* How the AVX-512 kernels above and the AVX2 IQ2_S / IQ3 one-row kernels look their grid points up: by
 * gathers (1) or scalar loads (0), the same results; set when the kernel tables are built,
 * to the faster here (kernels.c) */
extern int coli_iq_gather;

#endif
