/* quant_ternary.h — the ternary types TQ1_0 and TQ2_0 (BitNet-style weights in
 * {-1, 0, +1} times one fp16 scale per 256), byte for byte ggml-common.h's
 * blocks, and their kernels (quant_ternary.c). Both dot with Q8_K activations
 * (ggml-cpu.c type_traits_cpu), one row at a time in every ggml path: ggml
 * neither tiles nor repacks them, so a batch is vec_dot row by row. */
#ifndef COLI_QUANT_TERNARY_H
#define COLI_QUANT_TERNARY_H

#include "quant.h"

/* TQ1_0: 256 trits t in {0, 1, 2}, x = d * (t - 1). Five trits per byte of qs
 * as the fixed-point fraction q / 243 scaled to 256 (trit k of byte q is
 * ((uint8_t)(q * 3^k) * 3) >> 8), four per byte of qh. Element order: qs bytes
 * 0..31 give elements 32k + m (trit k, byte m) for k < 5, bytes 32..47 give
 * 160 + 16k + m, qh byte j gives 240 + 4k + j. Effectively 1.6875 bits per weight. */
typedef struct {
    uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; /* 48 bytes: 240 trits, 5 per byte */
    uint8_t qh[QK_K / 64];                  /* 4 bytes: 16 trits, 4 per byte */
    coli_half d;                            /* scale */
} block_tq1_0;
static_assert(sizeof(block_tq1_0) == sizeof(coli_half) + QK_K / 64 + (QK_K - 4 * QK_K / 64) / 5,
              "wrong tq1_0 block size/padding");

/* TQ2_0: 256 values t in {0, 1, 2} (3 is not written, but read as 2 - 1 = +2),
 * x = d * (t - 1), 2 bits each: element 128h + 32l + m is bits 2l of
 * qs[32h + m]. Effectively 2.0625 bits per weight. */
typedef struct {
    uint8_t qs[QK_K / 4]; /* 2 bits per element */
    coli_half d;          /* scale */
} block_tq2_0;
static_assert(sizeof(block_tq2_0) == sizeof(coli_half) + QK_K / 4, "wrong tq2_0 block size/padding");

void dequantize_row_tq1_0(const void *x, float *y, int64_t n);
void dequantize_row_tq2_0(const void *x, float *y, int64_t n);

COLI_DECLARE_VEC_DOT(vec_dot_tq1_0_q8_K_generic);
COLI_DECLARE_VEC_DOT(vec_dot_tq2_0_q8_K_generic);
#ifdef COLI_X86
COLI_DECLARE_VEC_DOT(vec_dot_tq1_0_q8_K_avx2); /* ggml_vec_dot_tq1_0_q8_K, AVX2 (the AVX-512 build's too) */
COLI_DECLARE_VEC_DOT(vec_dot_tq2_0_q8_K_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_tq1_0_q8_K_2w_avx2); /* the same bits, two weight rows a call */
COLI_DECLARE_VEC_DOT_2W(vec_dot_tq2_0_q8_K_2w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_tq1_0_q8_K_16w_avx2); /* 4 rows at a time */
COLI_DECLARE_VEC_DOT_2W(vec_dot_tq2_0_q8_K_16w_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_tq1_0_q8_K_avx512); /* the same bits, two 32-byte chunks per zmm */
COLI_DECLARE_VEC_DOT(vec_dot_tq2_0_q8_K_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_tq1_0_q8_K_2w_avx512); /* ... two weight rows a call */
COLI_DECLARE_VEC_DOT_2W(vec_dot_tq2_0_q8_K_2w_avx512);
#endif

#endif
