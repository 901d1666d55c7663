/* kernels.c — the kernel tables: one per ISA (scalar, avx2, avxvnni, avx512),
 * built once from the functions of quant*.c, and the one in force, chosen from
 * the CPU on first use (kernels.h). */
#define _POSIX_C_SOURCE 200112L /* clock_gettime (clock.h) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/colibri.h" /* colibri_cpu_features */
#include "clock.h"
#include "error.h"
#include "kernels.h"
#include "quant_iq23.h"

#define T(vdt, ff, tf, vd) \
    {.vec_dot_type = GGML_TYPE_##vdt, .from_float = ff, .to_float = tf, .vec_dot = vd, .mm_group = 1, .mm_in_mult = 1, .mm_out_mult = 1}

#define ACT_ROWS(q80, q81, f16)                                                         \
    [GGML_TYPE_F32] = T(F32, NULL, dequantize_row_f32, NULL),                           \
    [GGML_TYPE_F16] = T(F16, f16, dequantize_row_f16, NULL),                            \
    [GGML_TYPE_BF16] = T(BF16, quantize_row_bf16, dequantize_row_bf16, NULL),           \
    [GGML_TYPE_Q8_0] = T(Q8_0, q80, dequantize_row_q8_0, NULL),                         \
    [GGML_TYPE_Q8_1] = T(Q8_1, q81, dequantize_row_q8_1, NULL),                         \
    [GGML_TYPE_Q8_K] = T(Q8_K, quantize_row_q8_K_ref, dequantize_row_q8_K, NULL),       \
    [GGML_TYPE_Q4_0] = T(Q8_0, NULL, dequantize_row_q4_0, NULL),                        \
    [GGML_TYPE_Q4_1] = T(Q8_1, NULL, dequantize_row_q4_1, NULL),                        \
    [GGML_TYPE_Q5_0] = T(Q8_0, NULL, dequantize_row_q5_0, NULL),                        \
    [GGML_TYPE_Q5_1] = T(Q8_1, NULL, dequantize_row_q5_1, NULL),                        \
    [GGML_TYPE_Q2_K] = T(Q8_K, NULL, dequantize_row_q2_K, NULL),                        \
    [GGML_TYPE_Q3_K] = T(Q8_K, NULL, dequantize_row_q3_K, NULL),                        \
    [GGML_TYPE_Q4_K] = T(Q8_K, NULL, dequantize_row_q4_K, NULL),                        \
    [GGML_TYPE_Q5_K] = T(Q8_K, NULL, dequantize_row_q5_K, NULL),                        \
    [GGML_TYPE_Q6_K] = T(Q8_K, NULL, dequantize_row_q6_K, NULL)

/* vec_dot pointers, by weight type, in one order for all tables */
#define DOT_TYPES(X)                                                                     \
    X(F32, f32_f32) X(F16, f16_f16) X(BF16, bf16_bf16) X(Q4_0, q4_0_q8_0)                \
    X(Q4_1, q4_1_q8_1) X(Q5_0, q5_0_q8_0) X(Q5_1, q5_1_q8_1) X(Q8_0, q8_0_q8_0)           \
    X(Q2_K, q2_K_q8_K) X(Q3_K, q3_K_q8_K) X(Q4_K, q4_K_q8_K) X(Q5_K, q5_K_q8_K)           \
    X(Q6_K, q6_K_q8_K)

static inline void set_mm(coli_type_kernels *k, coli_vec_dot_fn mm, int min_rows, int group, int in_mult, int out_mult) {
    k->vec_dot_mm = mm;
    k->mm_min_rows = min_rows;
    k->mm_group = group;
    k->mm_in_mult = in_mult;
    k->mm_out_mult = out_mult;
}

/* Q4_0 as stored (not repacked): the one-row kernels for every row. */
static void set_q4_0_plain(coli_kernel_table *t) {
    coli_type_kernels *k = &t->q4_0_plain;
    *k = t->type[GGML_TYPE_Q4_0];
    k->vec_dot_mm = NULL;
    k->vec_dot_mm_2w = k->vec_dot_mm_16w = NULL;
    k->mm_min_rows = k->mm_id_min_rows = 0;
    k->mm_group = k->mm_in_mult = k->mm_out_mult = 1;
}

static coli_kernel_table g_tables[COLI_ISA_COUNT];  /* by COLI_ISA_*; filled once in build_tables */
static _Atomic(const coli_kernel_table *) g_current;
/* Set at load (colibri_kernel_set_type_isa), not while engines run a forward */
static const coli_kernel_table *g_base;                         /* the ISA chosen or forced */
static const coli_kernel_table *g_type_src[GGML_TYPE_COUNT];   /* per type: another table's kernels, or NULL */
static const coli_kernel_table *g_type_decode_src[GGML_TYPE_COUNT]; /* per type: its decode calls' table, or NULL */
static pthread_mutex_t g_select_lock = PTHREAD_MUTEX_INITIALIZER; /* two models loading at once */
static atomic_flag g_building = ATOMIC_FLAG_INIT;
static atomic_int g_built;

static void build_tables(void) {
    static const coli_type_kernels scalar_rows[GGML_TYPE_COUNT] = {
        ACT_ROWS(quantize_row_q8_0, quantize_row_q8_1, quantize_row_f16)};
    coli_kernel_table *t = &g_tables[0];
    t->name = "scalar";
    t->exp_sum = coli_exp_sum_generic;
    t->argmax = coli_argmax_generic;
    t->f32_lanes = 16;
    memcpy(t->type, scalar_rows, sizeof scalar_rows);
#define SET_GENERIC(T_, fn) t->type[GGML_TYPE_##T_].vec_dot = vec_dot_##fn##_generic;
    DOT_TYPES(SET_GENERIC)
#ifdef COLI_X86
    t = &g_tables[1];
    *t = g_tables[0];
    t->name = "avx2";
    t->exp_sum = coli_exp_sum_avx2; /* an AVX2 reference: 8-lane exp, softmax and silu */
    t->argmax = coli_argmax_avx2;
    t->swiglu = coli_swiglu_avx2;
    t->pv_rows_f32a = coli_pv_rows_f32a_avx2;
    t->kq_rows_f32a = coli_kq_rows_f32a_avx2;
    t->f32_lanes = 8;
#define SET_AVX2(T_, fn) t->type[GGML_TYPE_##T_].vec_dot = vec_dot_##fn##_avx2;
    DOT_TYPES(SET_AVX2)
    t->type[GGML_TYPE_Q8_0].from_float = quantize_row_q8_0_avx2;
    t->type[GGML_TYPE_Q8_1].from_float = quantize_row_q8_1_avx2;
    t->type[GGML_TYPE_F16].from_float = quantize_row_f16_avx2;
    t->type[GGML_TYPE_Q8_K].from_float = quantize_row_q8_K_avx2;
    /* batches: llamafile tinyBLAS<8> (F32/F16, 2+ rows), the tiled matmul
     * (Q6_K, 8+ rows), the repacked q4_K_8x8 gemm (Q4_K, whole groups of 4) */
    set_mm(&t->type[GGML_TYPE_F32], vec_dot_f32_f32_mm_avx2, 2, 1, 8, 4);
    set_mm(&t->type[GGML_TYPE_F16], vec_dot_f16_f16_mm_avx2, 2, 1, 8, 4);
    t->f16_f32a = t->type[GGML_TYPE_F16]; /* attention's widened query / probabilities (kernels.h) */
    t->f16_f32a.to_float = coli_f16_to_f32_avx2;
    t->f16_f32a.vec_dot = vec_dot_f16_f32a_avx2;
    t->f16_f32a.vec_dot_mm = vec_dot_f16_f32a_mm_avx2;
    t->f16_f32a.vec_dot_2w = t->f16_f32a.vec_dot_mm_2w = t->f16_f32a.vec_dot_16w = t->f16_f32a.vec_dot_mm_16w = NULL;
    set_mm(&t->type[GGML_TYPE_Q4_K], vec_dot_q4_K_q8_K_mm_avx2, 4, 4, QK_K, 8);
    /* not repacked (n_out % 8): ggml's AVX2 vec_dot (the AVX-512 build's too), tiled from 8 rows */
    t->q4_K_unpacked = t->type[GGML_TYPE_Q4_K];
    t->q4_K_unpacked.vec_dot = vec_dot_q4_K_q8_K_plain_avx2;
    t->q4_K_unpacked.vec_dot_2w = t->q4_K_unpacked.vec_dot_16w = t->q4_K_unpacked.vec_dot_mm_2w = NULL;
    set_mm(&t->q4_K_unpacked, vec_dot_q4_K_q8_K_tiled_avx2, 8, 1, QK_K, 1);
    t->q4_K_unpacked.vec_dot_mm_16w = vec_dot_q4_K_q8_K_tiled_16w_avx2;
    t->q4_K_unpacked.mm_id_min_rows = 8;
    set_mm(&t->type[GGML_TYPE_Q5_K], vec_dot_q5_K_q8_K_tiled_avx2, 8, 1, QK_K, 1);
    t->type[GGML_TYPE_Q5_K].mm_id_min_rows = 8;
    t->type[GGML_TYPE_Q5_K].vec_dot_mm_16w = vec_dot_q5_K_q8_K_tiled_16w_avx2;
    t->type[GGML_TYPE_Q4_K].vec_dot_16w = vec_dot_q4_K_q8_K_16w_avx2;
    t->type[GGML_TYPE_Q4_K].vec_dot_mm_16w = vec_dot_q4_K_q8_K_mm_16w_avx2;
    coli_set_r16(t, GGML_TYPE_Q4_K, vec_dot_q4_K_q8_K_r16_16w_avx2, vec_dot_q4_K_q8_K_r16_mm_16w_avx2);
    set_mm(&t->type[GGML_TYPE_Q4_0], vec_dot_q4_0_q8_0_mm_avx2, 1, 1, QK4_0, 8);  /* repacked: every row */
    t->type[GGML_TYPE_Q4_0].mm_id_min_rows = 1;
    t->type[GGML_TYPE_Q4_0].vec_dot_mm_16w = vec_dot_q4_0_q8_0_mm_16w_avx2;
    if (coli_cpu_can_avx512()) /* dpbusd on ymm: the same integers, fewer instructions */
        t->type[GGML_TYPE_Q4_0].vec_dot_mm_16w = vec_dot_q4_0_q8_0_mm_16w_vnni256;
    /* Q4_0's repacked arithmetic serves every row (mm_min_rows 1): its tiles need no one-row kernel */
    coli_set_r16(t, GGML_TYPE_Q4_0, NULL,
                 coli_cpu_can_avx512() ? vec_dot_q4_0_q8_0_r16_mm_16w_vnni256 : vec_dot_q4_0_q8_0_r16_mm_16w_avx2);
    t->type[GGML_TYPE_Q8_0].vec_dot_16w = vec_dot_q8_0_q8_0_16w_avx2;
    t->type[GGML_TYPE_Q4_0].vec_dot_16w = vec_dot_q4_0_q8_0_16w_avx2;
    t->type[GGML_TYPE_Q5_0].vec_dot_16w = vec_dot_q5_0_q8_0_16w_avx2;
    set_mm(&t->type[GGML_TYPE_Q6_K], vec_dot_q6_K_q8_K_mm_avx2, 8, 1, QK_K, 1);
    t->type[GGML_TYPE_Q6_K].mm_id_min_rows = 8;
    t->type[GGML_TYPE_Q6_K].vec_dot_mm_16w = vec_dot_q6_K_q8_K_mm_16w_avx2;
    /* Q2_K / Q3_K: ggml's AVX2 vec_dot (its AVX-512 build's too), tiled from 8 rows;
     * an AVX2-only ggml does not repack Q2_K */
    set_mm(&t->type[GGML_TYPE_Q2_K], vec_dot_q2_K_q8_K_tiled_avx2, 8, 1, QK_K, 1);
    t->type[GGML_TYPE_Q2_K].mm_id_min_rows = 8;
    set_mm(&t->type[GGML_TYPE_Q3_K], vec_dot_q3_K_q8_K_tiled_avx2, 8, 1, QK_K, 1);
    t->type[GGML_TYPE_Q3_K].mm_id_min_rows = 8;
    t->type[GGML_TYPE_Q2_K].vec_dot_mm_16w = vec_dot_q2_K_q8_K_tiled_16w_avx2;
    t->type[GGML_TYPE_Q2_K].vec_dot_2w = vec_dot_q2_K_q8_K_2w_avx2; /* one-row arithmetic, 2 rows a call */
    t->type[GGML_TYPE_Q3_K].vec_dot_mm_16w = vec_dot_q3_K_q8_K_tiled_16w_avx2;
    t->type[GGML_TYPE_Q3_K].vec_dot_16w = vec_dot_q3_K_q8_K_16w_avx2;
    set_q4_0_plain(t);
    t = &g_tables[2]; /* AVX2 + AVX-VNNI: the same bits, 256-bit dpbusd */
    *t = g_tables[1];
    t->name = "avxvnni";
#ifdef COLI_HAVE_AVXVNNI
    t->type[GGML_TYPE_Q8_0].vec_dot_16w = vec_dot_q8_0_q8_0_16w_avxvnni;
    t->type[GGML_TYPE_Q4_0].vec_dot_16w = vec_dot_q4_0_q8_0_16w_avxvnni;
    t->type[GGML_TYPE_Q5_0].vec_dot_16w = vec_dot_q5_0_q8_0_16w_avxvnni;
#endif
    t = &g_tables[3];
    *t = g_tables[1];
    t->name = "avx512";
    t->type[GGML_TYPE_F32].vec_dot = vec_dot_f32_f32_avx512;
    t->type[GGML_TYPE_F16].vec_dot = vec_dot_f16_f16_avx512;
    set_mm(&t->type[GGML_TYPE_F32], vec_dot_f32_f32_mm_avx512, 2, 1, 16, 4);  /* tinyBLAS<16> */
    set_mm(&t->type[GGML_TYPE_F16], vec_dot_f16_f16_mm_avx512, 2, 1, 16, 4);
    t->type[GGML_TYPE_F32].vec_dot_mm_2w = vec_dot_f32_f32_mm_2w_avx512;
    t->type[GGML_TYPE_F16].vec_dot_mm_2w = vec_dot_f16_f16_mm_2w_avx512;
    t->exp_sum = coli_exp_sum_avx512;
    t->argmax = coli_argmax_avx512;
    t->pv_rows_f16 = coli_pv_rows_f16_avx512;
    t->pv_rows_f32a = coli_pv_rows_f32a_avx512;
    t->kq_rows_f32a = coli_kq_rows_f32a_avx512;
    t->f16_f32a = t->type[GGML_TYPE_F16];
    t->f16_f32a.vec_dot = vec_dot_f16_f32a_avx512;
    t->f16_f32a.to_float = coli_f16_to_f32_avx512; /* the widening itself */
    t->f16_f32a.vec_dot_mm = vec_dot_f16_f32a_mm_avx512;
    t->f16_f32a.vec_dot_mm_2w = vec_dot_f16_f32a_mm_2w_avx512;
    t->f16_f32a.vec_dot_2w = t->f16_f32a.vec_dot_16w = t->f16_f32a.vec_dot_mm_16w = NULL;
    t->f32_lanes = 16;
    t->geglu = coli_geglu_avx512;
    t->swiglu = coli_swiglu_avx512;
    if (coli_cpu()->avx512bf16) t->type[GGML_TYPE_BF16].vec_dot = vec_dot_bf16_bf16_avx512;
    t->type[GGML_TYPE_Q4_0].vec_dot = vec_dot_q4_0_q8_0_avx512;
    t->type[GGML_TYPE_Q5_0].vec_dot = vec_dot_q5_0_q8_0_avx512;
    t->type[GGML_TYPE_Q8_0].vec_dot = vec_dot_q8_0_q8_0_avx512;
    t->type[GGML_TYPE_Q4_0].vec_dot_2w = vec_dot_q4_0_q8_0_2w_avx512;
    t->type[GGML_TYPE_Q5_0].vec_dot_2w = vec_dot_q5_0_q8_0_2w_avx512;
    t->type[GGML_TYPE_Q8_0].vec_dot_2w = vec_dot_q8_0_q8_0_2w_avx512;
    t->type[GGML_TYPE_Q4_0].vec_dot_16w = vec_dot_q4_0_q8_0_16w_avx512;
    t->type[GGML_TYPE_Q5_0].vec_dot_16w = vec_dot_q5_0_q8_0_16w_avx512;
    t->type[GGML_TYPE_Q8_0].vec_dot_16w = vec_dot_q8_0_q8_0_16w_avx512;
    set_mm(&t->type[GGML_TYPE_Q4_0], vec_dot_q4_0_q8_0_mm_avx512, 1, 1, QK4_0, 8);
    t->type[GGML_TYPE_Q4_0].vec_dot_mm_16w = vec_dot_q4_0_q8_0_mm_16w_avx512;
    set_q4_0_plain(t);
    coli_set_r16(t, GGML_TYPE_Q4_0, NULL, vec_dot_q4_0_q8_0_r16_mm_16w_avx512);
    t->type[GGML_TYPE_Q4_K].vec_dot = vec_dot_q4_K_q8_K_avx512;
    set_mm(&t->type[GGML_TYPE_Q4_K], vec_dot_q4_K_q8_K_mm_avx512, 4, 4, QK_K, 8);
    t->type[GGML_TYPE_Q4_K].vec_dot_16w = vec_dot_q4_K_q8_K_16w_avx512;
    t->type[GGML_TYPE_Q4_K].vec_dot_mm_16w = vec_dot_q4_K_q8_K_mm_16w_avx512;
    t->q4_K_unpacked.vec_dot_mm_16w = vec_dot_q4_K_q8_K_tiled_16w_avx512; /* n_out % 8: not repacked */
    coli_set_r16(t, GGML_TYPE_Q4_K, vec_dot_q4_K_q8_K_r16_16w_avx512, vec_dot_q4_K_q8_K_r16_mm_16w_avx512);
    t->type[GGML_TYPE_Q5_K].vec_dot_mm_16w = vec_dot_q5_K_q8_K_tiled_16w_avx512;
    /* Q5_K: ggml's AVX2 kernel is what the reference runs (the 512-bit one
     * stays as a spare); Q6_K: ggml's AVX2 vec_dot for one row, tiled for batches */
    set_mm(&t->type[GGML_TYPE_Q6_K], vec_dot_q6_K_q8_K_mm_avx512, 8, 1, QK_K, 1);
    t->type[GGML_TYPE_Q6_K].vec_dot_mm_16w = vec_dot_q6_K_q8_K_mm_16w_avx512;
    /* Q2_K: repacked q2_K_8x8 when n_out % 8 == 0: its gemv for every row but whole
     * groups of 4 (its gemm), also for experts (mul_mat_id runs the gemv on each
     * row); as stored otherwise: the AVX2 table's vec_dot and tiled matmul */
    t->unpacked[GGML_TYPE_Q2_K] = t->type[GGML_TYPE_Q2_K];
    t->unpacked[GGML_TYPE_Q2_K].vec_dot = vec_dot_q2_K_q8_K_avx512;
    t->unpacked[GGML_TYPE_Q2_K].vec_dot_mm_16w = vec_dot_q2_K_q8_K_tiled_16w_avx512;
    t->type[GGML_TYPE_Q2_K].vec_dot = vec_dot_q2_K_q8_K_gemv_avx512;
    set_mm(&t->type[GGML_TYPE_Q2_K], vec_dot_q2_K_q8_K_gemm_avx2, 4, 4, QK_K, 8);
    t->type[GGML_TYPE_Q2_K].mm_id_min_rows = 0;
    t->type[GGML_TYPE_Q2_K].vec_dot_mm_16w = vec_dot_q2_K_q8_K_gemm_16w_avx512;
    /* Q3_K: ggml's AVX2 vec_dot for one row (two chunks per zmm here), tiled (16 rows at a time) for batches */
    t->type[GGML_TYPE_Q3_K].vec_dot = vec_dot_q3_K_q8_K_avx512;
    t->type[GGML_TYPE_Q3_K].vec_dot_16w = NULL; /* its one-row kernel beats four AVX2 rows */
    t->type[GGML_TYPE_Q2_K].vec_dot_2w = vec_dot_q2_K_q8_K_gemv_2w_avx512;
    t->unpacked[GGML_TYPE_Q2_K].vec_dot_2w = vec_dot_q2_K_q8_K_2w_avx512;
    t->type[GGML_TYPE_Q2_K].vec_dot_16w = vec_dot_q2_K_q8_K_gemv_16w_avx512;
    t->unpacked[GGML_TYPE_Q2_K].vec_dot_16w = vec_dot_q2_K_q8_K_16w_avx512;
    t->type[GGML_TYPE_Q3_K].vec_dot_mm_16w = vec_dot_q3_K_q8_K_tiled_16w_avx512;
#endif
#ifdef COLI_X86
    const int n_tables = COLI_ISA_COUNT;
#else
    const int n_tables = 1;
#endif
    for (int isa = 0; isa < n_tables; isa++) {
        coli_kernels_fill_ternary(&g_tables[isa], isa);
        coli_kernels_fill_iq23(&g_tables[isa], isa);
        coli_kernels_fill_iq14(&g_tables[isa], isa);
    }
}

/* ns per super-block of one-row products of `types` by table t's kernels (which read
 * coli_iq_gather), with the grid points looked up by gathers (gather 1) or scalar loads (0):
 * the fastest of a few passes in L1. Random bytes are valid blocks of these types; each
 * block's leading fp16 d is set to 1 (and each activation block's d) to keep the floats normal. */
static double lookup_ns(const coli_kernel_table *t, const uint32_t *types, int n_types, int gather) {
    enum { NB = 32, PASSES = 5, CALLS = 8, MAX_BLOCK = 128 };
    static unsigned char w[3][NB * MAX_BLOCK]; /* one region per type timed */
    static const uint32_t regions[3] = {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ2_S};
    static block_q8_K y[NB];
    static int filled;
    if (!filled) {
        uint32_t r = 2463534242u;
        unsigned char *bufs[2] = {&w[0][0], (unsigned char *)y};
        const size_t sizes[2] = {sizeof w, sizeof y};
        for (int b = 0; b < 2; b++)
            for (size_t i = 0; i < sizes[b]; i++) {
                r ^= r << 13, r ^= r >> 17, r ^= r << 5;
                bufs[b][i] = (unsigned char)r;
            }
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < NB; i++) memcpy(&w[k][i * coli_row_size(regions[k], QK_K)], &(coli_half){0x3c00}, 2);
        for (int i = 0; i < NB; i++) y[i].d = 1.0f;
        filled = 1;
    }
    coli_iq_gather = gather;
    volatile float sink = 0.0f;
    double best = 1e30;
    for (int p = 0; p < PASSES; p++) {
        const double t0 = coli_now_s();
        for (int c = 0; c < CALLS; c++)
            for (int i = 0; i < n_types; i++) {
                int k = 0;
                while (regions[k] != types[i]) k++;
                float s1 = 0.0f;
                t->type[types[i]].vec_dot(NB * QK_K, w[k], y, 0, &s1, 1, 1);
                sink += s1;
            }
        const double ns = (coli_now_s() - t0) * 1e9 / (CALLS * (double)n_types * NB);
        if (ns < best) best = ns;
    }
    (void)sink;
    return best;
}

/* The grid i-quants' lookup way: gathers where they beat scalar loads by 5% (Intel's
 * cores; AMD Zen 4 / 5 run gathers slowly), timed a few rounds alternately (~1 ms):
 * IQ3_XXS and IQ2_XXS by the AVX-512 kernels, or IQ2_S by the AVX2 ones (the AVX2
 * kernel that reads the way, of those with vpgather in both sets). */
static double g_lookup_ns[2]; /* by gather */
static void measure_lookup(void) {
    g_lookup_ns[0] = g_lookup_ns[1] = 0.0;
    coli_iq_gather = 0; /* no AVX2: nothing reads it; "auto" says loads, whatever was set before */
#ifdef COLI_X86
    if (!coli_cpu_can_avx2()) return;
    static const uint32_t avx512_types[2] = {GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ2_XXS}, avx2_types[1] = {GGML_TYPE_IQ2_S};
    const bool avx512 = coli_cpu_can_avx512();
    double best[2] = {1e30, 1e30};
    for (int round = 0; round < 3; round++)
        for (int g = 0; g < 2; g++) {
            const double ns = avx512 ? lookup_ns(&g_tables[3], avx512_types, 2, g) : lookup_ns(&g_tables[1], avx2_types, 1, g);
            if (ns < best[g]) best[g] = ns;
        }
    g_lookup_ns[0] = best[0];
    g_lookup_ns[1] = best[1];
    coli_iq_gather = best[1] < best[0] * 0.95;
#endif
}

static void ensure_tables(void) {
    if (atomic_load_explicit(&g_built, memory_order_acquire)) return;
    while (atomic_flag_test_and_set_explicit(&g_building, memory_order_acquire)) {
    }
    if (!atomic_load_explicit(&g_built, memory_order_relaxed)) {
        build_tables();
        measure_lookup();
        atomic_store_explicit(&g_built, 1, memory_order_release);
    }
    atomic_flag_clear_explicit(&g_building, memory_order_release);
}

#ifdef COLI_X86
static bool can_avxvnni(void) {
#ifdef COLI_HAVE_AVXVNNI
    return coli_cpu_can_avx2() && coli_cpu()->avxvnni;
#else
    return false;  /* the compiler had no AVX-VNNI: the AVX2 set serves */
#endif
}
#endif

static const coli_kernel_table *table_for(const char *isa) {
    ensure_tables();
    if (strcmp(isa, "scalar") == 0) return &g_tables[0];
#ifdef COLI_X86
    if (strcmp(isa, "avx2") == 0) return coli_cpu_can_avx2() ? &g_tables[1] : NULL;
    if (strcmp(isa, "avxvnni") == 0) return can_avxvnni() ? &g_tables[2] : NULL;
    if (strcmp(isa, "avx512") == 0) return coli_cpu_can_avx512() ? &g_tables[3] : NULL;
    if (strcmp(isa, "auto") == 0)
        return coli_cpu_can_avx512()                        ? &g_tables[3]
               : can_avxvnni()                              ? &g_tables[2]
               : coli_cpu_can_avx2()                        ? &g_tables[1]
                                                            : &g_tables[0];
#else
    if (strcmp(isa, "auto") == 0) return &g_tables[0];
#endif
    return NULL;
}

/* A timing of another ISA's kernels (colibri_kernel_time_decode) sees its table on
 * its own thread only: the engines running meanwhile keep the table in force. */
static _Thread_local const coli_kernel_table *tl_table;

const coli_kernel_table *coli_kernels(void) {
    if (tl_table) return tl_table;
    const coli_kernel_table *t = atomic_load_explicit(&g_current, memory_order_acquire);
    if (t) return t;
    const coli_kernel_table *want = table_for("auto");
    const coli_kernel_table *expected = NULL;
    if (atomic_compare_exchange_strong(&g_current, &expected, want)) return want;
    return expected;
}

int coli_kernels_select(const char *isa) {
    if (!isa) return coli_fail(COLI_E_ARG, "kernel isa: NULL");
    if (strcmp(isa, "auto") && strcmp(isa, "scalar") && strcmp(isa, "avx2") && strcmp(isa, "avxvnni") &&
        strcmp(isa, "avx512"))
        return coli_fail(COLI_E_ARG, "kernel isa '%s': expected auto, scalar, avx2, avxvnni or avx512", isa);
    const coli_kernel_table *t = table_for(isa);
    if (!t) return coli_fail(COLI_E_UNSUPPORTED, "kernel isa '%s' not supported by this CPU (features: %s)",
                             isa, colibri_cpu_features());
    pthread_mutex_lock(&g_select_lock);
    g_base = t;
    memset(g_type_src, 0, sizeof g_type_src); /* a forced ISA is that ISA's for every type */
    memset(g_type_decode_src, 0, sizeof g_type_decode_src);
    atomic_store_explicit(&g_current, t, memory_order_release);
    pthread_mutex_unlock(&g_select_lock);
    return COLI_OK;
}

const coli_kernel_table *coli_kernels_table(const char *isa) { return isa ? table_for(isa) : NULL; }

int coli_kernels_set_lookup(const char *way) {
    if (!way || (strcmp(way, "auto") && strcmp(way, "gather") && strcmp(way, "loads")))
        return coli_fail(COLI_E_ARG, "kernel lookup '%s': expected auto, gather or loads", way ? way : "NULL");
    ensure_tables();
    pthread_mutex_lock(&g_select_lock);
    if (!strcmp(way, "auto")) {
        measure_lookup();
    } else {
        coli_iq_gather = !strcmp(way, "gather");
        g_lookup_ns[0] = g_lookup_ns[1] = 0.0;
    }
    pthread_mutex_unlock(&g_select_lock);
    return COLI_OK;
}

const char *coli_kernels_lookup(void) {
    ensure_tables();
    return coli_iq_gather ? "gather" : "loads";
}

void coli_kernels_lookup_ns(double *loads_ns, double *gather_ns) {
    ensure_tables();
    pthread_mutex_lock(&g_select_lock);
    if (loads_ns) *loads_ns = g_lookup_ns[0];
    if (gather_ns) *gather_ns = g_lookup_ns[1];
    pthread_mutex_unlock(&g_select_lock);
}

static bool has_r16(const coli_type_kernels *k) { return k->vec_dot_16w || k->vec_dot_mm_16w; }

const coli_type_kernels *coli_r16_kernels(uint32_t wtype) {
    if (wtype >= GGML_TYPE_COUNT) return NULL;
    const coli_kernel_table *t = coli_kernels();
    if (!has_r16(&t->r16[wtype])) t = table_for("auto"); /* the scalar set forced after the load: the widest */
    return has_r16(&t->r16[wtype]) ? &t->r16[wtype] : NULL;
}

void coli_kernels_set_thread_table(const coli_kernel_table *t) { tl_table = t; }

/* Weight types whose kernels give the same bits in every SIMD table (checked by
 * tests/engine/test_kernel_choice.py): a model may take them from whichever table
 * runs them fastest here. Not F32/F16 (tinyBLAS<16> vs <8>), BF16 (AVX512-BF16's
 * dot), Q2_K (repacked on AVX-512). */
bool coli_kernels_same_bits(uint32_t wtype) {
    switch (wtype) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
    case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS:
    case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_M: case GGML_TYPE_IQ4_NL:
    case GGML_TYPE_IQ4_XS: case GGML_TYPE_MXFP4: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0:
        return true;
    default:
        return false;
    }
}

/* A mixed table: the base's, with some types' entries from other tables. Tables
 * handed out stay valid for the process (a running matmul may hold one): each
 * change adds one to this list (a few KB; changes come at model load). */
typedef struct mixed_table {
    coli_kernel_table t;
    char name[160];
    struct mixed_table *next;
} mixed_table;
static mixed_table *g_mixed;

static void copy_type(coli_kernel_table *dst, const coli_kernel_table *src, uint32_t wtype) {
    dst->type[wtype] = src->type[wtype];
    dst->unpacked[wtype] = src->unpacked[wtype];
    dst->r16[wtype] = src->r16[wtype];
    if (wtype == GGML_TYPE_Q4_K) dst->q4_K_unpacked = src->q4_K_unpacked;
    if (wtype == GGML_TYPE_Q4_0) dst->q4_0_plain = src->q4_0_plain;
}

static int select_type(uint32_t wtype, const char *isa, bool decode);

int coli_kernels_select_type(uint32_t wtype, const char *isa) {
    pthread_mutex_lock(&g_select_lock);
    const int rc = select_type(wtype, isa, false);
    pthread_mutex_unlock(&g_select_lock);
    return rc;
}

int coli_kernels_select_type_decode(uint32_t wtype, const char *isa) {
    pthread_mutex_lock(&g_select_lock);
    const int rc = select_type(wtype, isa, true);
    pthread_mutex_unlock(&g_select_lock);
    return rc;
}

static const coli_kernel_table *type_table(const coli_kernel_table *base, int i) {
    return g_type_src[i] ? g_type_src[i] : base;
}

static int select_type(uint32_t wtype, const char *isa, bool decode) {
    if (wtype >= GGML_TYPE_COUNT || !ggml_type_get(wtype)) return coli_fail(COLI_E_ARG, "kernel type %u: unknown", wtype);
    if (!isa) return coli_fail(COLI_E_ARG, "kernel isa: NULL");
    const coli_kernel_table *base = g_base ? g_base : table_for("auto");
    const coli_kernel_table *src = strcmp(isa, "auto") == 0 ? NULL : table_for(isa);
    if (strcmp(isa, "auto") && !src)
        return coli_fail(table_for("auto") && (!strcmp(isa, "avx2") || !strcmp(isa, "avxvnni") || !strcmp(isa, "avx512"))
                             ? COLI_E_UNSUPPORTED : COLI_E_ARG,
                         "kernel isa '%s' for %s: not one this CPU runs (auto, avx2, avxvnni, avx512)", isa,
                         ggml_type_get(wtype)->name);
    if (src && (src == &g_tables[0] || base == &g_tables[0]))
        return coli_fail(COLI_E_UNSUPPORTED, "kernel isa '%s' for %s: the scalar set is not mixed with others", isa,
                         ggml_type_get(wtype)->name);
    if (src && !coli_kernels_same_bits(wtype))
        return coli_fail(COLI_E_UNSUPPORTED, "kernel isa '%s' for %s: its kernels there give other bits", isa,
                         ggml_type_get(wtype)->name);
    g_base = base;
    if (decode)
        g_type_decode_src[wtype] = src;
    else
        g_type_src[wtype] = src == base ? NULL : src;
    bool mixed = false;
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (g_type_decode_src[i] == type_table(base, i)) g_type_decode_src[i] = NULL; /* no split */
        mixed |= g_type_src[i] || g_type_decode_src[i];
    }
    if (!mixed) {
        atomic_store_explicit(&g_current, base, memory_order_release);
        return COLI_OK;
    }
    mixed_table *m = malloc(sizeof *m);
    if (!m) return coli_fail(COLI_E_NOMEM, "kernel table: %zu bytes", sizeof *m);
    m->t = *base;
    size_t len = (size_t)snprintf(m->name, sizeof m->name, "%s", base->name);
    const char *sep = " (";
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (!g_type_src[i] && !g_type_decode_src[i]) continue;
        if (g_type_src[i]) copy_type(&m->t, g_type_src[i], (uint32_t)i);
        m->t.decode[i] = g_type_decode_src[i];
        if (len < sizeof m->name)
            len += (size_t)snprintf(m->name + len, sizeof m->name - len, "%s%s: %s%s%s", sep,
                                    ggml_type_get((uint32_t)i)->name, g_type_src[i] ? g_type_src[i]->name : "",
                                    g_type_src[i] && g_type_decode_src[i] ? " " : "",
                                    g_type_decode_src[i] ? "decode " : "");
        if (g_type_decode_src[i] && len < sizeof m->name)
            len += (size_t)snprintf(m->name + len, sizeof m->name - len, "%s", g_type_decode_src[i]->name);
        sep = ", ";
    }
    if (len < sizeof m->name) snprintf(m->name + len, sizeof m->name - len, ")");
    m->t.name = m->name;
    m->next = g_mixed;
    g_mixed = m;
    atomic_store_explicit(&g_current, &m->t, memory_order_release);
    return COLI_OK;
}

const char *coli_kernels_type_isa(uint32_t wtype) {
    if (wtype >= GGML_TYPE_COUNT) return NULL;
    if (g_type_src[wtype]) return g_type_src[wtype]->name;
    return (g_base ? g_base : coli_kernels())->name;
}

const char *coli_kernels_type_decode_isa(uint32_t wtype) {
    if (wtype >= GGML_TYPE_COUNT) return NULL;
    if (g_type_decode_src[wtype]) return g_type_decode_src[wtype]->name;
    return coli_kernels_type_isa(wtype);
}
