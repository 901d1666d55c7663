/* quant.h — ggml block formats and the CPU kernels that read them.
 *
 * Block layouts are byte-for-byte those of llama.cpp ggml/src/ggml-common.h
 * (QK_K = 256 super-blocks). Kernel names follow ggml's grammar:
 *   dequantize_row_<t>      block row -> floats
 *   quantize_row_<t>_ref    floats -> blocks, ggml's reference quantizer
 *   quantize_row_<t>        floats -> blocks as ggml's x86 CPU backend does it
 *                           for activations (only where that differs from _ref)
 *   vec_dot_<w>_<a>_<isa>   weight row . activation row(s); `_generic` is the
 *                           scalar twin, always compiled.
 * A weight type dots with the activation row quantized to its "vec_dot type"
 * (ggml-cpu.c type_traits_cpu): Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1,
 * Q8_K for the K-quants, F16/BF16/F32 for themselves.
 *
 * kernels.h picks, per weight type and ISA, which of them runs. */
#ifndef COLI_QUANT_H
#define COLI_QUANT_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fp16.h"
#include "ggml_types.h"

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* Q4_0: x = d * (q - 8), q in 0..15. Effectively 4.5 bits per weight. */
typedef struct {
    coli_half d;           /* delta */
    uint8_t qs[QK4_0 / 2]; /* nibbles: low = element j, high = element j + 16 */
} block_q4_0;
static_assert(sizeof(block_q4_0) == 2 + QK4_0 / 2, "wrong q4_0 block size/padding");

/* Q4_1: x = d * q + m, q in 0..15. Effectively 5 bits per weight. */
typedef struct {
    coli_half d;           /* delta */
    coli_half m;           /* min */
    uint8_t qs[QK4_1 / 2]; /* nibbles as in Q4_0 */
} block_q4_1;
static_assert(sizeof(block_q4_1) == 4 + QK4_1 / 2, "wrong q4_1 block size/padding");

/* Q5_0: x = d * (q - 16), q in 0..31. Effectively 5.5 bits per weight. */
typedef struct {
    coli_half d;           /* delta */
    uint8_t qh[4];         /* 5th bit of element j at bit j (little-endian u32) */
    uint8_t qs[QK5_0 / 2]; /* low 4 bits, nibbles as in Q4_0 */
} block_q5_0;
static_assert(sizeof(block_q5_0) == 2 + 4 + QK5_0 / 2, "wrong q5_0 block size/padding");

/* Q5_1: x = d * q + m, q in 0..31. Effectively 6 bits per weight. */
typedef struct {
    coli_half d;           /* delta */
    coli_half m;           /* min */
    uint8_t qh[4];         /* 5th bits as in Q5_0 */
    uint8_t qs[QK5_1 / 2]; /* low 4 bits */
} block_q5_1;
static_assert(sizeof(block_q5_1) == 4 + 4 + QK5_1 / 2, "wrong q5_1 block size/padding");

/* Q8_0: x = d * q. Effectively 8.5 bits per weight. */
typedef struct {
    coli_half d;       /* delta */
    int8_t qs[QK8_0];  /* quants */
} block_q8_0;
static_assert(sizeof(block_q8_0) == 2 + QK8_0, "wrong q8_0 block size/padding");

/* Q8_1: activation partner of Q4_1/Q5_1: x = d * q, s = d * sum(q). */
typedef struct {
    coli_half d;       /* delta */
    coli_half s;       /* d * sum(qs[i]) */
    int8_t qs[QK8_1];  /* quants */
} block_q8_1;
static_assert(sizeof(block_q8_1) == 4 + QK8_1, "wrong q8_1 block size/padding");

/* Q2_K: 16 blocks of 16; x = d * sc * q - dmin * m, 4-bit sc/m. 2.625 bpw. */
typedef struct {
    uint8_t scales[QK_K / 16]; /* low nibble scale, high nibble min */
    uint8_t qs[QK_K / 4];      /* 2-bit quants, 4 per byte (shift 0,2,4,6 = 32-element groups) */
    coli_half d;               /* super-block scale for quantized scales */
    coli_half dmin;            /* super-block scale for quantized mins */
} block_q2_K;
static_assert(sizeof(block_q2_K) == 2 * 2 + QK_K / 16 + QK_K / 4, "wrong q2_K block size/padding");

/* Q3_K: 16 blocks of 16; x = d * (sc - 32) * (q - 4 * !hbit), 6-bit sc. 3.4375 bpw. */
typedef struct {
    uint8_t hmask[QK_K / 8];   /* high bit of each quant */
    uint8_t qs[QK_K / 4];      /* low 2 bits */
    uint8_t scales[12];        /* 16 scales, 6 bits each, packed */
    coli_half d;               /* super-block scale */
} block_q3_K;
static_assert(sizeof(block_q3_K) == 2 + QK_K / 4 + QK_K / 8 + 12, "wrong q3_K block size/padding");

/* Q4_K: 8 blocks of 32; x = d * sc * q - dmin * m, 6-bit sc/m. 4.5 bpw. */
typedef struct {
    coli_half d;                    /* super-block scale for quantized scales */
    coli_half dmin;                 /* super-block scale for quantized mins */
    uint8_t scales[K_SCALE_SIZE];   /* scales and mins, 6 bits each (coli_k4_scales_mins) */
    uint8_t qs[QK_K / 2];           /* 4-bit quants: 32 bytes per 64 elements, low nibbles first */
} block_q4_K;
static_assert(sizeof(block_q4_K) == 2 * 2 + K_SCALE_SIZE + QK_K / 2, "wrong q4_K block size/padding");

/* Q5_K: as Q4_K plus a 5th bit per quant. 5.5 bpw. */
typedef struct {
    coli_half d;                    /* super-block scale for quantized scales */
    coli_half dmin;                 /* super-block scale for quantized mins */
    uint8_t scales[K_SCALE_SIZE];   /* scales and mins, 6 bits each */
    uint8_t qh[QK_K / 8];           /* high bits: bit 2j / 2j+1 of qh[l] for 64-group j */
    uint8_t qs[QK_K / 2];           /* low 4 bits */
} block_q5_K;
static_assert(sizeof(block_q5_K) == 2 * 2 + K_SCALE_SIZE + QK_K / 2 + QK_K / 8, "wrong q5_K block size/padding");

/* The 8 six-bit scales (bytes 0..7 of out) and 8 mins (bytes 8..15) of a
 * Q4_K/Q5_K super-block, by ggml's utmp shuffle: the one unpacking every ISA's
 * kernels inline (the same integers as ggml's get_scale_min_k4). */
static inline void coli_k4_scales_mins(const uint8_t packed[K_SCALE_SIZE], uint32_t out[4]) {
    const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    memcpy(out, packed, K_SCALE_SIZE);
    out[3] = ((out[2] >> 4) & kmask2) | (((out[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = out[1] & kmask1;
    out[1] = (out[2] & kmask2) | (((out[0] >> 6) & kmask3) << 4);
    out[2] = uaux;
    out[0] &= kmask1;
}

/* Q6_K: 16 blocks of 16; x = d * sc * (q - 32), 8-bit signed sc. 6.5625 bpw. */
typedef struct {
    uint8_t ql[QK_K / 2];      /* quants, lower 4 bits */
    uint8_t qh[QK_K / 4];      /* quants, upper 2 bits */
    int8_t scales[QK_K / 16];  /* scales, quantized with 8 bits */
    coli_half d;               /* super-block scale */
} block_q6_K;
static_assert(sizeof(block_q6_K) == 2 + QK_K / 16 + 3 * QK_K / 4, "wrong q6_K block size/padding");

/* Q8_K: activation partner of the K-quants; float d, 16 partial sums. */
typedef struct {
    float d;                   /* delta (float, not half) */
    int8_t qs[QK_K];           /* quants */
    int16_t bsums[QK_K / 16];  /* sum of quants in groups of 16 */
} block_q8_K;

/* The bsums of sub-blocks 2g and 2g + 1 of a Q4_K/Q5_K super-block (two bsums of 16 each) as
 * one int32, b0 | b1 << 16: a madd against (min 2g | min 2g+1 << 16) gives min * bsum for the
 * pair (mins < 64, |b| < 4096: exact) */
static inline int coli_k4_bsum_pair(const int16_t bsums[QK_K / 16], int g) {
    const int b0 = bsums[4 * g] + bsums[4 * g + 1], b1 = bsums[4 * g + 2] + bsums[4 * g + 3];
    return (int)((uint32_t)(uint16_t)b0 | (uint32_t)(uint16_t)b1 << 16);
}
static_assert(sizeof(block_q8_K) == sizeof(float) + QK_K + QK_K / 16 * sizeof(int16_t), "wrong q8_K block size/padding");

/* ---- kernel signatures ---------------------------------------------------- */

/* n elements (a multiple of the type's block size). */
typedef void (*coli_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*coli_from_float_fn)(const float *src, void *dst, int64_t n);
/* s[r * s_stride] = dot(w, a_r) for r < nr (1..COLI_MAX_NR), where activation
 * row r starts at (const char *)a + r * a_stride. Every row's result is
 * computed with the same operations whatever nr is (tiled == row by row). */
typedef void (*coli_vec_dot_fn)(int n, const void *w, const void *a, size_t a_stride,
                                float *s, size_t s_stride, int nr);
#define COLI_MAX_NR 4

/* In a SIMD kernel: run the body template impl(..., nr) with nr a constant,
 * so its per-row arrays and loops unroll. nr must be 1..COLI_MAX_NR (callers
 * split longer runs); asserted where asserts are on (make asan, test_quant.c),
 * because with NDEBUG a larger nr still computes only 4 rows, silently. */
#define COLI_DISPATCH_NR(nr, impl, ...)                   \
    do {                                                  \
        assert((nr) >= 1 && (nr) <= COLI_MAX_NR);         \
        switch (nr) {                                     \
        case 1: impl(__VA_ARGS__, 1); break;              \
        case 2: impl(__VA_ARGS__, 2); break;              \
        case 3: impl(__VA_ARGS__, 3); break;              \
        default: impl(__VA_ARGS__, 4); break;             \
        }                                                 \
    } while (0)
static_assert(COLI_MAX_NR == 4, "COLI_DISPATCH_NR has a case for each nr up to COLI_MAX_NR");

/* Several weight rows at once: s[r * s_stride + j] = dot(weight row j,
 * activation row r) for j < 2 (vec_dot_2w, nr <= COLI_MAX_NR) or j < 16
 * (vec_dot_16w, any nr), weight row j at w + j * w_stride, each with the
 * arithmetic of the one-weight-row kernel it stands for. */
typedef void (*coli_vec_dot_nw_fn)(int n, const void *w, size_t w_stride, const void *a, size_t a_stride, float *s,
                                   size_t s_stride, int nr);

/* The exponentials of ggml_vec_soft_max_f32: x[i] = exp(x[i] - max) in place
 * by ggml_v_expf's AVX-512 arithmetic (-inf gives 0), n % 16 == 0; returns
 * the sum as ggml adds it: each chunk of 16 in float (_mm512_reduce_add_ps),
 * the chunk sums in double. */
typedef double (*coli_exp_sum_fn)(float *x, int n, float max);
/* ggml_vec_geglu_f32 with GGML_GELU_FP16: x[i] = gelu(x[i]) * g[i], gelu read
 * from `table` (65536 f16 entries + 2 bytes of padding) at x rounded to f16;
 * 0 at or below -10, x * g at or above 10. NULL: ops.c's scalar loop. */
typedef void (*coli_geglu_fn)(float *x, const float *g, int n, const coli_half *table);
/* ggml_vec_swiglu_f32: x[i] = silu(x[i]) * g[i], silu(v) = v / (1 + exp(0 - v)) by the
 * reference's SIMD exp over whole vectors, x / (1 + expf(-x)) (libm) for the tail. */
typedef void (*coli_swiglu_fn)(float *x, const float *g, int n);
/* the first index of the largest logit, NaNs never winning but logits[0] (as coli_argmax_generic) */
typedef int32_t (*coli_argmax_fn)(const float *x, int n);
int32_t coli_argmax_generic(const float *x, int n);
/* P.V read straight from row-major V, with the bits the one-row F16 vec_dot
 * gives each value row of V^T against p (len % 64 == 0): for r < nr and
 * d < n_d (n_d % 16 == 0), out[r * out_stride + d] = vec_dot(V^T row d, p_r),
 * V[c][d] at v[c * v_stride + d], p_r at p + r * p_stride (cells 0 .. len-1).
 * MLA's values are the latent rows of K: decode need not transpose them
 * (AVX2 and AVX-512 sets; NULL in the scalar one). */
typedef void (*coli_pv_rows_fn)(int len, const coli_half *v, size_t v_stride, int n_d, const coli_half *p,
                                size_t p_stride, float *out, size_t out_stride, int nr);
/* The same with the probabilities widened to f32 (f16 values: the same bits),
 * len % 64 == 0 (attention's chunks; AVX2's takes len % 32) and nr <=
 * COLI_PV_MAX_HEADS: every value row is read once for all nr heads (AVX2 and
 * AVX-512 sets). */
#define COLI_PV_MAX_HEADS 8
typedef void (*coli_pv_rows_f32a_fn)(int len, const coli_half *v, size_t v_stride, int n_d, const float *p,
                                     size_t p_stride, float *out, size_t out_stride, int nr);
/* Decode's scores: s[r * s_stride + c] = the one-row F16 dot (vec_dot_f16_f32a's bits)
 * of K row c (at k + c * k_stride) with query r (widened, at q + r * q_stride), for
 * c < n_rows and r < nr <= COLI_PV_MAX_HEADS, n % 32 == 0 (AVX2 and AVX-512 sets). */
typedef void (*coli_kq_rows_f32a_fn)(int n, const coli_half *k, size_t k_stride, int n_rows, const float *q,
                                     size_t q_stride, float *s, size_t s_stride, int nr);

/* Bytes of one row of n elements of `type`, 0 when n is not a multiple of
 * the block size or the type is unknown. */
size_t coli_row_size(uint32_t type, int64_t n);

/* ---- CPU features (cpu.c) -------------------------------------------------- */

typedef struct {
    bool sse3, ssse3, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avx512vbmi, avxvnni;
} coli_cpu_caps;
const coli_cpu_caps *coli_cpu(void);
bool coli_cpu_can_avx2(void);    /* avx2 fma f16c, OS saves ymm */
bool coli_cpu_can_avx512(void);  /* + avx512 f/bw/vl/dq/vnni, OS saves zmm */

/* ---- scalar kernels (quant.c) ---------------------------------------------- */

/* Q4_K rows repacked 16 at a time, in place (the same bytes: each 16-row tile keeps its offset),
 * for the kernels that read a tile as one stream (vec_dot_q4_K_q8_K_r16_*): per super-block i of
 * the tile, 64-byte vectors with the tile's 16 rows in 32-bit lanes: the head words (d | dmin << 16,
 * then the 12 packed scale bytes as 3 words), then the 32 words of the quants. n_out % 16 == 0,
 * n_in % QK_K == 0; tmp holds 16 rows (16 * row bytes). */
void coli_repack_q4_K_r16(void *w, int64_t n_in, int64_t n_out, void *tmp);
/* Vector v (0..3 head words, 4 + j quant word j) of super-block i of the tile at w */
#define COLI_R16_AT(w, i, v) ((const char *)(w) + (size_t)(i) * 16 * sizeof(block_q4_K) + 64 * (size_t)(v))
/* Rows of a type of 32-value blocks, a scale of sb bytes then qb quant bytes (Q4_0 and IQ4_NL:
 * an f16 and 16; MXFP4: an E8M0 byte and 16; Q8_0's f16 and 32 would fit), repacked the same way: per
 * pair of blocks (2p, 2p + 1) of the tile, block 2p's quant words (word k of the 16 rows: a
 * 64-byte vector, the rows in 32-bit lanes), block 2p + 1's, then the two blocks' 16 scales
 * each. With an f16 scale every vector lies on a 64-byte boundary of the tile.
 * n_in % 64 == 0, n_out % 16 == 0; tmp holds 16 rows. */
void coli_repack_b32_r16(void *w, int64_t n_in, int64_t n_out, int qb, int sb, void *tmp);
#define COLI_R16B_PAIR(qb, sb) (32 * (size_t)(qb) + 32 * (size_t)(sb))
/* The offsets in the tile of quant word k (0 .. qb / 4 - 1) of block ib, and of the block's 16 scales */
#define COLI_R16B_QOFF(qb, sb, ib, k) \
    ((size_t)((ib) >> 1) * COLI_R16B_PAIR(qb, sb) + (size_t)((ib) & 1) * 16 * (qb) + 64 * (size_t)(k))
#define COLI_R16B_DOFF(qb, sb, ib) \
    ((size_t)((ib) >> 1) * COLI_R16B_PAIR(qb, sb) + 32 * (size_t)(qb) + 16 * (size_t)(sb) * ((ib) & 1))
#define COLI_R16B_Q(w, qb, sb, ib, k) ((const char *)(w) + COLI_R16B_QOFF(qb, sb, ib, k))
#define COLI_R16B_D(w, qb, sb, ib) ((const char *)(w) + COLI_R16B_DOFF(qb, sb, ib))
/* Repacks n_out rows of wtype in place (the layouts above); the n_in multiple a type's tiles
 * need, 0 for a type without tiles. */
void coli_repack_r16(uint32_t wtype, void *w, int64_t n_in, int64_t n_out, void *tmp);
int coli_r16_in_mult(uint32_t wtype);

void dequantize_row_f32(const void *x, float *y, int64_t n);
void dequantize_row_f16(const void *x, float *y, int64_t n);
void dequantize_row_bf16(const void *x, float *y, int64_t n);
void dequantize_row_q4_0(const void *x, float *y, int64_t n);
void dequantize_row_q4_1(const void *x, float *y, int64_t n);
void dequantize_row_q5_0(const void *x, float *y, int64_t n);
void dequantize_row_q5_1(const void *x, float *y, int64_t n);
void dequantize_row_q8_0(const void *x, float *y, int64_t n);
void dequantize_row_q8_1(const void *x, float *y, int64_t n);
void dequantize_row_q2_K(const void *x, float *y, int64_t n);
void dequantize_row_q3_K(const void *x, float *y, int64_t n);
void dequantize_row_q4_K(const void *x, float *y, int64_t n);
void dequantize_row_q5_K(const void *x, float *y, int64_t n);
void dequantize_row_q6_K(const void *x, float *y, int64_t n);
void dequantize_row_q8_K(const void *x, float *y, int64_t n);

void quantize_row_f16(const float *x, void *y, int64_t n);
void quantize_row_bf16(const float *x, void *y, int64_t n);
void quantize_row_q4_0_ref(const float *x, void *y, int64_t n);
void quantize_row_q4_1_ref(const float *x, void *y, int64_t n);
void quantize_row_q5_0_ref(const float *x, void *y, int64_t n);
void quantize_row_q5_1_ref(const float *x, void *y, int64_t n);
void quantize_row_q8_0_ref(const float *x, void *y, int64_t n);  /* roundf, id = 1/d */
void quantize_row_q8_1_ref(const float *x, void *y, int64_t n);
void quantize_row_q8_K_ref(const float *x, void *y, int64_t n);  /* also the activation quantizer */
/* ggml x86 CPU activation quantizers: d = amax/127, id = 127/amax, round half
 * to even; Q8_1's s = fp16(d * sum) with d not rounded to half. */
void quantize_row_q8_0(const float *x, void *y, int64_t n);
void quantize_row_q8_1(const float *x, void *y, int64_t n);
/* ggml_vec_soft_max_f32's exponentials and sum (coli_exp_sum_fn), one lane at a time */
double coli_exp_sum_generic(float *x, int n, float max);
/* The same as ggml's AVX2 build computes it: 8 lanes of its AVX2 exp, libm for the tail */
double coli_exp_sum_avx2(float *x, int n, float max);
void coli_swiglu_avx2(float *x, const float *g, int n);
int32_t coli_argmax_avx2(const float *x, int n);
void coli_kq_rows_f32a_avx2(int n, const coli_half *k, size_t k_stride, int n_rows, const float *q, size_t q_stride,
                            float *s, size_t s_stride, int nr);
void coli_pv_rows_f32a_avx2(int len, const coli_half *v, size_t v_stride, int n_d, const float *p,
                            size_t p_stride, float *out, size_t out_stride, int nr);
/* Eight floats summed in the order of ggml's AVX2 horizontal adds. */
float coli_reduce_add8(const float *a);

#define COLI_DECLARE_VEC_DOT(name) \
    void name(int n, const void *w, const void *a, size_t a_stride, float *s, size_t s_stride, int nr)

#define COLI_DECLARE_VEC_DOTS(isa)              \
    COLI_DECLARE_VEC_DOT(vec_dot_f32_f32_##isa);   \
    COLI_DECLARE_VEC_DOT(vec_dot_f16_f16_##isa);   \
    COLI_DECLARE_VEC_DOT(vec_dot_bf16_bf16_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q4_0_q8_0_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q4_1_q8_1_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q5_0_q8_0_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q5_1_q8_1_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q8_0_q8_0_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q2_K_q8_K_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q3_K_q8_K_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q4_K_q8_K_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q5_K_q8_K_##isa); \
    COLI_DECLARE_VEC_DOT(vec_dot_q6_K_q8_K_##isa)

COLI_DECLARE_VEC_DOTS(generic);

#define COLI_DECLARE_VEC_DOT_2W(name) \
    void name(int n, const void *w, size_t w_stride, const void *a, size_t a_stride, float *s, size_t s_stride, int nr)

#if defined(__x86_64__) || defined(__i386__)
#define COLI_X86 1
/* quant_avxvnni.c needs a compiler that knows AVX-VNNI (GCC 11, clang 12) */
#if defined(__has_include)
#if __has_include(<avxvnniintrin.h>)
#define COLI_HAVE_AVXVNNI 1
#endif
#endif
/* quant_avx2.c: AVX2 + FMA + F16C */
COLI_DECLARE_VEC_DOTS(avx2);
COLI_DECLARE_VEC_DOT(vec_dot_f32_f32_mm_avx2);  /* tinyBLAS<8> */
COLI_DECLARE_VEC_DOT(vec_dot_f16_f16_mm_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_f16_f32a_avx2); /* the f16_f16 kernels' bits, activation rows in f32 */
COLI_DECLARE_VEC_DOT(vec_dot_f16_f32a_mm_avx2);
void coli_f16_to_f32_avx2(const void *src, float *dst, int64_t n);
COLI_DECLARE_VEC_DOT(vec_dot_q4_0_q8_0_mm_avx2); /* repacked q4_0_8x8 gemv/gemm */
COLI_DECLARE_VEC_DOT(vec_dot_q4_K_q8_K_mm_avx2); /* repacked q4_K_8x8 gemm */
COLI_DECLARE_VEC_DOT(vec_dot_q4_K_q8_K_plain_avx2); /* ggml_vec_dot_q4_K_q8_K (not repacked) */
COLI_DECLARE_VEC_DOT(vec_dot_q4_K_q8_K_tiled_avx2); /* ggml's tiled matmul, Q4_K not repacked, 8+ rows */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_tiled_16w_avx2); /* the same, 16 weight rows, 8 per ymm */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q5_K_q8_K_tiled_16w_avx2); /* ggml's tiled matmul, 16 weight rows, 8 per ymm */
COLI_DECLARE_VEC_DOT(vec_dot_q5_K_q8_K_tiled_avx2); /* ggml's tiled matmul, 8+ rows */
COLI_DECLARE_VEC_DOT(vec_dot_q6_K_q8_K_mm_avx2); /* tiled K-quant matmul */
/* Q2_K / Q3_K (quant_avx2.c "Q2_K / Q3_K"): ggml's tiled matmul (8+ rows, weights as
 * stored), and Q2_K repacked q2_K_8x8 on AVX-512 builds: its gemm (groups of 4 rows; its
 * gemv is quant_avx512.c's) */
COLI_DECLARE_VEC_DOT(vec_dot_q2_K_q8_K_tiled_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_q3_K_q8_K_tiled_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_q2_K_q8_K_gemm_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q2_K_q8_K_tiled_16w_avx2); /* tiled, 16 weight rows, 8 per ymm */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q2_K_q8_K_2w_avx2); /* ggml_vec_dot, 2 weight rows a call */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q3_K_q8_K_tiled_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q3_K_q8_K_16w_avx2); /* one-row arithmetic, 4 weight rows at a time */
void quantize_row_q8_0_avx2(const float *x, void *y, int64_t n);
void quantize_row_q8_1_avx2(const float *x, void *y, int64_t n);
void quantize_row_f16_avx2(const float *x, void *y, int64_t n);
void quantize_row_q8_K_avx2(const float *x, void *y, int64_t n);
/* quant_avx512.c: AVX-512 F/BW/VL/DQ/VNNI (types without a 512-bit kernel use AVX2:
 * Q6_K's one-row kernel is ggml's AVX2 one; Q5_K's 512-bit kernel is not in the
 * table, see kernels.c, but is kept and tested) */
COLI_DECLARE_VEC_DOT(vec_dot_f32_f32_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_f32_f32_mm_avx512);   /* tinyBLAS<16> */
COLI_DECLARE_VEC_DOT(vec_dot_f16_f16_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_f16_f16_mm_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_f32_f32_mm_2w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_f16_f16_mm_2w_avx512);
/* the f16_f16 kernels' bits with the activation rows stored as f32 (f16 values widened) */
COLI_DECLARE_VEC_DOT(vec_dot_f16_f32a_avx512);
void coli_f16_to_f32_avx512(const void *src, float *dst, int64_t n);
COLI_DECLARE_VEC_DOT(vec_dot_f16_f32a_mm_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_f16_f32a_mm_2w_avx512);
double coli_exp_sum_avx512(float *x, int n, float max);
void coli_swiglu_avx512(float *x, const float *g, int n);
int32_t coli_argmax_avx512(const float *x, int n);
void coli_pv_rows_f16_avx512(int len, const coli_half *v, size_t v_stride, int n_d, const coli_half *p,
                             size_t p_stride, float *out, size_t out_stride, int nr);
void coli_pv_rows_f32a_avx512(int len, const coli_half *v, size_t v_stride, int n_d, const float *p,
                              size_t p_stride, float *out, size_t out_stride, int nr);
void coli_kq_rows_f32a_avx512(int n, const coli_half *k, size_t k_stride, int n_rows, const float *q, size_t q_stride,
                              float *s, size_t s_stride, int nr);
void coli_geglu_avx512(float *x, const float *g, int n, const coli_half *table);
COLI_DECLARE_VEC_DOT(vec_dot_bf16_bf16_avx512);     /* needs avx512bf16 */
COLI_DECLARE_VEC_DOT(vec_dot_q4_0_q8_0_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_q5_0_q8_0_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_q8_0_q8_0_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_2w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q5_0_q8_0_2w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q8_0_q8_0_2w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q8_0_q8_0_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q5_0_q8_0_16w_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_q4_0_q8_0_mm_avx512);     /* repacked q4_0_8x8 gemv/gemm */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_mm_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_mm_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_mm_16w_vnni256); /* the AVX2 set's, on AVX-512 VNNI cores */
/* the same three on a tile coli_repack_b32_r16 made */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_r16_mm_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_r16_mm_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_r16_mm_16w_vnni256);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q8_0_q8_0_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q5_0_q8_0_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q8_0_q8_0_16w_avxvnni);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_0_q8_0_16w_avxvnni);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q5_0_q8_0_16w_avxvnni);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_mm_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_r16_16w_avx2);    /* on a tile coli_repack_q4_K_r16 made */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_r16_mm_16w_avx2);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q6_K_q8_K_mm_16w_avx2);
COLI_DECLARE_VEC_DOT(vec_dot_q4_K_q8_K_avx512);     /* repacked q4_K_8x8 gemv */
COLI_DECLARE_VEC_DOT(vec_dot_q4_K_q8_K_mm_avx512);  /* repacked q4_K_8x8 gemm */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_mm_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_tiled_16w_avx512); /* ggml's tiled matmul, not repacked */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_r16_16w_avx512);    /* the gemv on a tile coli_repack_q4_K_r16 made */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q4_K_q8_K_r16_mm_16w_avx512); /* the gemm on one */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q5_K_q8_K_tiled_16w_avx512); /* ggml's tiled matmul (8+ rows) */
COLI_DECLARE_VEC_DOT(vec_dot_q5_K_q8_K_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_q6_K_q8_K_mm_avx512);  /* tiled K-quant matmul */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q6_K_q8_K_mm_16w_avx512);
/* Q2_K / Q3_K for 16 weight rows (their sums in lanes): tiled, Q2_K's repacked gemm */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q2_K_q8_K_tiled_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q2_K_q8_K_gemm_16w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q3_K_q8_K_tiled_16w_avx512);
/* ... and one row at a time (ggml's AVX2 vec_dot / Q2_K's gemv arithmetic, two chunks per zmm) */
COLI_DECLARE_VEC_DOT(vec_dot_q2_K_q8_K_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_q2_K_q8_K_gemv_avx512);
COLI_DECLARE_VEC_DOT(vec_dot_q3_K_q8_K_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q2_K_q8_K_2w_avx512); /* the same, two weight rows a call */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q2_K_q8_K_gemv_2w_avx512);
COLI_DECLARE_VEC_DOT_2W(vec_dot_q2_K_q8_K_16w_avx512); /* ... sixteen */
COLI_DECLARE_VEC_DOT_2W(vec_dot_q2_K_q8_K_gemv_16w_avx512);
#endif

#endif
