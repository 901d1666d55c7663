/* kernels.h — which kernel runs: for each weight type, the functions of
 * quant*.c that compute with it, one table per ISA (kernels.c).
 *
 * Kernels are chosen once per process from the detected CPU (coli_kernels());
 * colibri_kernel_set_isa() can force "scalar", "avx2", "avxvnni" or "avx512"
 * for tests. */
#ifndef COLI_KERNELS_H
#define COLI_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "ggml_types.h"
#include "quant.h"

/* llama.cpp's CPU backend does not add up a dot product the same way in every
 * call: one row (decode) goes through ggml_vec_dot_*, a batch through
 * llamafile's tinyBLAS (F32/F16), the tiled K-quant matmul (Q6_K, n >= 8) or
 * the repacked gemm (Q4_K, whole groups of 4 rows); Q4_0 weights with
 * n_out % 8 == 0 are repacked at load and use their own gemv/gemm for every
 * row. Each is mirrored bit for bit by a kernel here: `vec_dot` is the one-row
 * arithmetic, `vec_dot_mm` the batched one where it differs (coli_mm_rows()
 * says which rows use it). */
typedef struct {
    uint32_t vec_dot_type;         /* activation type this weight type dots with */
    coli_from_float_fn from_float; /* f32 -> this type as an activation (NULL for F32: used as is) */
    coli_to_float_fn to_float;     /* dequantize_row_<t> */
    coli_vec_dot_fn vec_dot;       /* NULL: not usable as a weight type */
    coli_vec_dot_nw_fn vec_dot_2w; /* optional: vec_dot for two weight rows at once (faster) */
    coli_vec_dot_nw_fn vec_dot_16w;    /* optional: vec_dot for 16 weight rows at once */
    coli_vec_dot_fn vec_dot_mm;    /* batched arithmetic, or NULL (same as vec_dot) */
    coli_vec_dot_nw_fn vec_dot_mm_2w;  /* optional: vec_dot_mm for two weight rows at once */
    coli_vec_dot_nw_fn vec_dot_mm_16w; /* optional: vec_dot_mm for 16 weight rows at once */
    int mm_min_rows;               /* a batch of at least this many rows uses vec_dot_mm */
    int mm_group;                  /* ... for its first n - n % mm_group rows */
    int mm_in_mult, mm_out_mult;   /* ... when n_in and n_out are multiples of these */
    /* experts (ggml's mul_mat_id): an expert given at least this many rows uses
     * vec_dot_mm for all of them (1: repacked weights; 8: the tiled K-quant
     * matmul); 0: vec_dot whatever the count */
    int mm_id_min_rows;
} coli_type_kernels;

/* Rows [0, coli_mm_rows(...)) of a batch of n_rows use vec_dot_mm, the rest vec_dot. */
static inline int64_t coli_mm_rows(const coli_type_kernels *k, int64_t n_in, int64_t n_out, int64_t n_rows) {
    if (!k->vec_dot_mm || n_rows < k->mm_min_rows || n_in % k->mm_in_mult || n_out % k->mm_out_mult) return 0;
    return n_rows - n_rows % k->mm_group;
}

typedef struct coli_kernel_table {
    const char *name;  /* "scalar" | "avx2" | "avxvnni" | "avx512" */
    coli_type_kernels type[GGML_TYPE_COUNT];
    /* per type, NULL or the table whose kernels take its decode calls (at most
     * COLI_DECODE_ROWS rows; a mixed table only): each table gives a same-bits
     * type ggml's bits for every call, so the choice may go call by call */
    const struct coli_kernel_table *decode[GGML_TYPE_COUNT];
    /* Q4_K weights llama.cpp does not repack (n_out not a multiple of the
     * repacked layout's 8 rows): ggml's plain vec_dot, its tiled matmul for 8+ rows */
    coli_type_kernels q4_K_unpacked;
    /* Per type, weights repacked at load into 16-row tiles (coli_repack_r16: Q4_K, Q4_0,
     * IQ4_NL, MXFP4): the type's arithmetic, read as one stream a tile; 16-row kernels only
     * (n_out % 16 == 0), every row through them; none (vec_dot_16w and vec_dot_mm_16w NULL)
     * for a type without tiles */
    coli_type_kernels r16[GGML_TYPE_COUNT];
    /* Q4_0 weights llama.cpp does not repack (3-D per-head tensors): its plain vec_dot,
     * which its tinyBLAS batches match */
    coli_type_kernels q4_0_plain;
    /* Types llama.cpp repacks at load only when n_out is a multiple of their
     * entry's mm_out_mult (x86: IQ4_NL and MXFP4, Q2_K on AVX-512): their
     * kernels for a weight it keeps as stored; vec_dot NULL where a type has
     * no such split */
    coli_type_kernels unpacked[GGML_TYPE_COUNT];
    coli_exp_sum_fn exp_sum;
    coli_pv_rows_fn pv_rows_f16; /* optional: P.V from row-major F16 V (one-row arithmetic) */
    coli_pv_rows_f32a_fn pv_rows_f32a; /* optional: the same, probabilities widened (preferred where set) */
    coli_kq_rows_f32a_fn kq_rows_f32a; /* optional: decode's scores, query widened, up to 8 heads a call */
    /* optional: type[F16]'s vec_dot / vec_dot_mm / vec_dot_mm_2w with the activation rows in
     * f32 holding f16 values (attention widens its query and probabilities once, with this
     * entry's to_float): the same bits */
    coli_type_kernels f16_f32a;
    coli_geglu_fn geglu;
    coli_argmax_fn argmax; /* greedy sampling's argmax over the vocabulary */
    coli_swiglu_fn swiglu; /* NULL: ops.c's lanes, one at a time (the scalar set) */
    /* the f32 vector width of the reference build's element-wise ops (exp,
     * silu, softmax): 16 lanes for AVX-512, 8 for AVX2, whose exp rounds differently */
    int f32_lanes;
} coli_kernel_table;

/* The table of each ISA, by index: the kernel tables are built in this order. */
enum { COLI_ISA_SCALAR, COLI_ISA_AVX2, COLI_ISA_AVXVNNI, COLI_ISA_AVX512, COLI_ISA_COUNT };

/* The low-bit families keep their block formats, kernels and table entries in
 * files of their own; build_tables hands each of them every table once, after
 * the types above are set (isa: COLI_ISA_*). */
void coli_kernels_fill_ternary(coli_kernel_table *t, int isa); /* quant_ternary.c: TQ1_0, TQ2_0 */
void coli_kernels_fill_iq23(coli_kernel_table *t, int isa);    /* quant_iq23.c: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S */
void coli_kernels_fill_iq14(coli_kernel_table *t, int isa);    /* quant_iq14.c: IQ1_S, IQ1_M, IQ4_NL, IQ4_XS, MXFP4 */

/* The table in force (chosen from the CPU on first use). Never NULL. */
const coli_kernel_table *coli_kernels(void);

/* A call of at most this many activation rows is a decode step's (kernel_choice times those) */
#define COLI_DECODE_ROWS COLI_MAX_NR

/* The kernels for a call with n_rows activation rows on a weight of `type`
 * with n_out rows (wtype < GGML_TYPE_COUNT): its type's (its decode table's for
 * a decode call), but for a weight of a repacked type that llama.cpp would not repack. */
static inline const coli_type_kernels *coli_weight_kernels(const coli_kernel_table *t, uint32_t wtype, int64_t n_out,
                                                           int64_t n_rows) {
    if (n_rows <= COLI_DECODE_ROWS && t->decode[wtype]) t = t->decode[wtype];
    const coli_type_kernels *k = &t->type[wtype];
    if (wtype == GGML_TYPE_Q4_K && t->q4_K_unpacked.vec_dot && n_out % k->mm_out_mult) return &t->q4_K_unpacked;
    if (t->unpacked[wtype].vec_dot && n_out % k->mm_out_mult) return &t->unpacked[wtype];
    return k;
}
/* The kernels for a weight llama.cpp keeps as the file stores it (a 3-D
 * per-head tensor: its repack needs 2-D weights). */
static inline const coli_type_kernels *coli_plain_kernels(const coli_kernel_table *t, uint32_t wtype) {
    if (wtype == GGML_TYPE_Q4_K && t->q4_K_unpacked.vec_dot) return &t->q4_K_unpacked;
    if (wtype == GGML_TYPE_Q4_0 && t->q4_0_plain.vec_dot) return &t->q4_0_plain;
    if (t->unpacked[wtype].vec_dot) return &t->unpacked[wtype];
    return &t->type[wtype];
}

/* The tile kernels of wtype: the table in force's (each SIMD set reads the one layout), the
 * widest set's under a scalar set forced after the load, NULL for a type without tiles. */
const coli_type_kernels *coli_r16_kernels(uint32_t wtype);
/* t's tile entry for wtype: its type entry with dot16 (one-row arithmetic) and mm16 (batched)
 * reading a tile, no 2-row kernels; NULL where every call takes the other */
static inline void coli_set_r16(coli_kernel_table *t, uint32_t wtype, coli_vec_dot_nw_fn dot16, coli_vec_dot_nw_fn mm16) {
    coli_type_kernels *k = &t->r16[wtype];
    *k = t->type[wtype];
    k->vec_dot_2w = k->vec_dot_mm_2w = NULL;
    k->vec_dot_16w = dot16;
    k->vec_dot_mm_16w = mm16;
}

/* Force an ISA: "auto", "scalar", "avx2", "avxvnni", "avx512". COLI_E_UNSUPPORTED when
 * this CPU (or build) cannot run it, COLI_E_ARG for an unknown name. */
int coli_kernels_select(const char *isa);

/* Run-time choice between kernel sets that give the same bits (kernel_choice):
 * whether every SIMD table computes wtype alike; weights of wtype take `isa`'s
 * kernels from now on ("auto": the set in force's own; COLI_E_UNSUPPORTED for a
 * type whose sets differ, or an ISA this CPU lacks); the set a type runs now. */
bool coli_kernels_same_bits(uint32_t wtype);
int coli_kernels_select_type(uint32_t wtype, const char *isa);
const char *coli_kernels_type_isa(uint32_t wtype);
/* The same for the decode calls of wtype alone (COLI_DECODE_ROWS rows or fewer;
 * "auto": the type's own set), and the set they run with now. */
int coli_kernels_select_type_decode(uint32_t wtype, const char *isa);
const char *coli_kernels_type_decode_isa(uint32_t wtype);
/* A table by ISA name (NULL: unknown or not runnable here), and the calling
 * thread's override of coli_kernels() (NULL: none), for timing one set. */
const coli_kernel_table *coli_kernels_table(const char *isa);
void coli_kernels_set_thread_table(const coli_kernel_table *t);
/* prefetch.h: the kernels prefetch weights into L2 (1) or L1 (0); colibri_kernel_set_prefetch */
extern int coli_prefetch_l2;
/* "l1" -> 0, "l2" -> 1, anything else (NULL too) -> -1 */
int coli_prefetch_level_l2(const char *level);
/* How the AVX-512 grid i-quant kernels look their grid points up (quant_iq23.h's
 * coli_iq_gather): "gather", "loads", or "auto" (measure both now, keep the faster;
 * done once when the tables are built); the way in force; the last measurement in
 * ns per super-block (0 where none: no AVX-512 here, or a way set by name since). */
int coli_kernels_set_lookup(const char *way);
const char *coli_kernels_lookup(void);
void coli_kernels_lookup_ns(double *loads_ns, double *gather_ns);

#endif
