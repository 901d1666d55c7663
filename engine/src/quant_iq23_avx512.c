/* quant_iq23_avx512.c — AVX-512 (F/BW/VL/DQ/VNNI) kernels of the grid i-quants, with the bits of the
 * AVX2 ones (quant_iq23_avx2.c: ggml's AVX2 vec_dot for one row, its tiled matmul for batches).
 *
 * A super-block is decoded at once: its grid points looked up into four zmm (64 weights each),
 * its sign bits made four 64-bit masks
 * (the 7-bit sign codes of IQ2_XXS/IQ2_XS/IQ3_XXS completed with their parity bit by a nibble
 * table), which negate the activation bytes by a masked subtract, and its scales spread over
 * 16-bit lanes by a permute. Each zmm then carries two 32-weight groups: maddubs, madd by the
 * scales, and at the end of the super-block the two 256-bit halves added: lane k of the sum holds
 * weights 4k..4k+3 of every group, the integers of ggml's AVX2 lanes. */
#include "quant_iq23.h"

#ifdef COLI_X86
#include <immintrin.h>

#include "prefetch.h"
#include <math.h>
#include <string.h>

#include "iq_grids.h"

#define ISA "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(ISA)))
#define INL static inline __attribute__((always_inline, target(ISA)))

#define IQ23_PREFETCH 2048 /* bytes ahead of the super-block in use: weight rows lie end to end */

INL float h2f(coli_half h) { return _cvtsh_ss(h); }

/* hsum_float_8 of ggml (x86/quants.c) */
INL float hsum8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* 32 bytes of 7-bit sign codes -> ksigns_iq2xs: bit 7 set where the code has odd parity */
INL __m256i with_parity(__m256i t) {
    const __m256i odd = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0,
                                         0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m256i p = _mm256_xor_si256(_mm256_shuffle_epi8(odd, _mm256_and_si256(t, m4)),
                                       _mm256_shuffle_epi8(odd, _mm256_and_si256(_mm256_srli_epi16(t, 4), m4)));
    return _mm256_or_si256(t, p);
}

/* 8 u32 of 4 x 7-bit sign codes (bits 0..27) -> the 32 sign bytes, in weight order */
INL __m256i sign_codes(__m256i s) {
    const __m256i m = _mm256_set1_epi32(0x7f);
    __m256i t = _mm256_and_si256(s, m);
    t = _mm256_or_si256(t, _mm256_and_si256(_mm256_slli_epi32(s, 1), _mm256_slli_epi32(m, 8)));
    t = _mm256_or_si256(t, _mm256_and_si256(_mm256_slli_epi32(s, 2), _mm256_slli_epi32(m, 16)));
    t = _mm256_or_si256(t, _mm256_and_si256(_mm256_slli_epi32(s, 3), _mm256_slli_epi32(m, 24)));
    return with_parity(t);
}

/* 32 sign bytes (weight j's sign at bit j % 8 of byte j / 8) -> one mask per 64 weights */
INL void sign_masks(__m256i sb, __mmask64 m[4]) {
    m[0] = _cvtu64_mask64((uint64_t)_mm256_extract_epi64(sb, 0));
    m[1] = _cvtu64_mask64((uint64_t)_mm256_extract_epi64(sb, 1));
    m[2] = _cvtu64_mask64((uint64_t)_mm256_extract_epi64(sb, 2));
    m[3] = _cvtu64_mask64((uint64_t)_mm256_extract_epi64(sb, 3));
}
INL void sign_masks_mem(const uint8_t *p, __mmask64 m[4]) {
    uint64_t v[4];
    memcpy(v, p, 32);
    for (int j = 0; j < 4; j++) m[j] = _cvtu64_mask64(v[j]);
}

/* scales s (int32 lanes, 2 * ls + 1) -> the 16-bit lanes of zmm j: per-32 scales (8 of them)
 * for the groups 2j, 2j + 1; per-16 scales (16) for the sub-blocks 4j .. 4j + 3 */
INL void scales32(__m256i s, __m512i sc[4]) {
    const __m512i w = _mm512_castsi256_si512(_mm256_or_si256(s, _mm256_slli_epi32(s, 16)));
    for (int j = 0; j < 4; j++)
        sc[j] = _mm512_permutexvar_epi32(_mm512_set_epi32(2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1,
                                                          2 * j + 1, 2 * j + 1, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j,
                                                          2 * j, 2 * j), w);
}
INL void scales16(const uint8_t b[8], __m512i sc[4]) {
    uint64_t v;
    memcpy(&v, b, 8);
    const __m128i bb = _mm_set1_epi64x((int64_t)v);
    __m512i s = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(bb, bb)); /* b0 b0 b1 b1 ... */
    s = _mm512_and_si512(_mm512_srlv_epi32(s, _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0)),
                         _mm512_set1_epi32(15));
    s = _mm512_add_epi32(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(1));
    s = _mm512_or_si512(s, _mm512_slli_epi32(s, 16));
    for (int j = 0; j < 4; j++)
        sc[j] = _mm512_permutexvar_epi32(_mm512_set_epi32(4 * j + 3, 4 * j + 3, 4 * j + 3, 4 * j + 3, 4 * j + 2, 4 * j + 2,
                                                          4 * j + 2, 4 * j + 2, 4 * j + 1, 4 * j + 1, 4 * j + 1, 4 * j + 1,
                                                          4 * j, 4 * j, 4 * j, 4 * j), s);
}

/* The grid lookups, two ways with the same results (`gather`, coli_iq_gather: the faster here,
 * measured when the kernel tables are built): scalar loads of the indices straight from the
 * block, as ggml's kernels do where an index is a byte or a masked u16 of the block, put
 * together by inserts (AMD Zen 4 / 5, whose gathers are slow), or vpgather (Intel: IQ3_XXS
 * decode 1.4x faster on a Granite Rapids-class Xeon, bench/bench_iq23.c). */
/* Indices computed in vectors (IQ2_S, IQ3_S) go through memory, as ggml's index_t union does:
 * the barrier keeps the compiler from turning the reloads back into vpextrd. */
#define REREAD(a) __asm__ volatile("" : : "r"(a) : "memory")

INL __m512i grid8x8(const uint64_t *g, const int32_t i[8]) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set_epi64x((int64_t)g[i[3]], (int64_t)g[i[2]], (int64_t)g[i[1]], (int64_t)g[i[0]])),
        _mm256_set_epi64x((int64_t)g[i[7]], (int64_t)g[i[6]], (int64_t)g[i[5]], (int64_t)g[i[4]]), 1);
}
INL __m512i grid4x16(const uint32_t *g, const uint16_t i[16]) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set_epi32((int)g[i[7]], (int)g[i[6]], (int)g[i[5]], (int)g[i[4]], (int)g[i[3]],
                                                (int)g[i[2]], (int)g[i[1]], (int)g[i[0]])),
        _mm256_set_epi32((int)g[i[15]], (int)g[i[14]], (int)g[i[13]], (int)g[i[12]], (int)g[i[11]], (int)g[i[10]],
                         (int)g[i[9]], (int)g[i[8]]), 1);
}

/* ---- one super-block: magnitudes g, sign masks m, scales sc (for zmm j = weights 64j..64j+63) */

INL void dec_iq2_xxs(const block_iq2_xxs *x, __m512i g[4], __mmask64 m[4], __m512i sc[4], const int gather) {
    const uint8_t *q8 = (const uint8_t *)x->qs; /* u32 pairs: 4 index bytes, sign word */
    const __m512i q = _mm512_loadu_si512((const void *)x->qs);
    if (gather) {
        /* the index words (even u32s) in order, then 8 index bytes per zmm */
        const __m256i iw = _mm512_castsi512_si256(
            _mm512_permutexvar_epi32(_mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0), q));
        const __m128i lo = _mm256_castsi256_si128(iw), hi = _mm256_extracti128_si256(iw, 1);
        g[0] = _mm512_i32gather_epi64(_mm256_cvtepu8_epi32(lo), (const void *)coli_iq2xxs_grid, 8);
        g[1] = _mm512_i32gather_epi64(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), (const void *)coli_iq2xxs_grid, 8);
        g[2] = _mm512_i32gather_epi64(_mm256_cvtepu8_epi32(hi), (const void *)coli_iq2xxs_grid, 8);
        g[3] = _mm512_i32gather_epi64(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)), (const void *)coli_iq2xxs_grid, 8);
    } else {
        for (int j = 0; j < 4; j++) {
            int32_t i[8];
            for (int k = 0; k < 8; k++) i[k] = q8[16 * j + 8 * (k / 4) + k % 4];
            g[j] = grid8x8(coli_iq2xxs_grid, i);
        }
    }
    const __m256i sw = _mm512_castsi512_si256(
        _mm512_permutexvar_epi32(_mm512_set_epi32(14, 12, 10, 8, 6, 4, 2, 0, 15, 13, 11, 9, 7, 5, 3, 1), q));
    sign_masks(sign_codes(sw), m);
    scales32(_mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(sw, 28), 1), _mm256_set1_epi32(1)), sc);
}

INL void dec_iq2_xs(const block_iq2_xs *x, __m512i g[4], __mmask64 m[4], __m512i sc[4], const int gather) {
    const __m512i q = _mm512_loadu_si512((const void *)x->qs); /* 32 u16: index (9 bits) | sign code << 9 */
    if (gather)
        for (int j = 0; j < 4; j++)
            g[j] = _mm512_i32gather_epi64(_mm256_and_si256(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x->qs + 8 * j))),
                                                           _mm256_set1_epi32(511)),
                                          (const void *)coli_iq2xs_grid, 8);
    else
        for (int j = 0; j < 4; j++) {
            int32_t i[8];
            for (int k = 0; k < 8; k++) i[k] = x->qs[8 * j + k] & 511;
            g[j] = grid8x8(coli_iq2xs_grid, i);
        }
    sign_masks(with_parity(_mm512_cvtepi16_epi8(_mm512_srli_epi16(q, 9))), m);
    scales16(x->scales, sc);
}

INL void dec_iq2_s(const block_iq2_s *x, __m512i g[4], __mmask64 m[4], __m512i sc[4], const int gather) {
    if (gather)
        for (int j = 0; j < 4; j++) { /* index k: qs byte | 2 bits of qh[2j + k / 4] at 8..9 */
            const __m256i h = _mm256_setr_epi32(x->qh[2 * j], x->qh[2 * j], x->qh[2 * j], x->qh[2 * j], x->qh[2 * j + 1],
                                                x->qh[2 * j + 1], x->qh[2 * j + 1], x->qh[2 * j + 1]);
            const __m256i hi = _mm256_and_si256(_mm256_sllv_epi32(h, _mm256_setr_epi32(8, 6, 4, 2, 8, 6, 4, 2)),
                                                _mm256_set1_epi32(0x300));
            g[j] = _mm512_i32gather_epi64(_mm256_or_si256(_mm256_cvtepu8_epi32(_mm_loadu_si64(x->qs + 8 * j)), hi),
                                          (const void *)coli_iq2s_grid, 8);
        }
    else
        for (int j = 0; j < 4; j++) {
            int32_t i[8];
            for (int k = 0; k < 8; k++) i[k] = x->qs[8 * j + k] | (x->qh[2 * j + k / 4] << (8 - 2 * (k % 4)) & 0x300);
            g[j] = grid8x8(coli_iq2s_grid, i);
        }
    sign_masks_mem(x->qs + QK_K / 8, m);
    scales16(x->scales, sc);
}

INL void dec_iq3_xxs(const block_iq3_xxs *x, __m512i g[4], __mmask64 m[4], __m512i sc[4], const int gather) {
    if (gather)
        for (int j = 0; j < 4; j++)
            g[j] = _mm512_i32gather_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x->qs + 16 * j))),
                                          (const void *)coli_iq3xxs_grid, 4);
    else
        for (int j = 0; j < 4; j++) {
            uint16_t i[16];
            for (int k = 0; k < 16; k++) i[k] = x->qs[16 * j + k];
            g[j] = grid4x16(coli_iq3xxs_grid, i);
        }
    const __m256i sw = _mm256_loadu_si256((const __m256i *)(x->qs + QK_K / 4));
    sign_masks(sign_codes(sw), m);
    scales32(_mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(sw, 28), 1), _mm256_set1_epi32(1)), sc);
}

INL void dec_iq3_s(const block_iq3_s *x, __m512i g[4], __mmask64 m[4], __m512i sc[4], const int gather) {
    uint64_t qh;
    memcpy(&qh, x->qh, 8); /* bit k: bit 8 of index k */
    /* gathers alone, or (the loads variant) half of the lookups by gathers, half by scalar loads:
     * ~10% faster than either alone on Zen 5 */
    for (int j = 0; j < 4; j += 2 - gather) {
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x->qs + 16 * j)));
        g[j] = _mm512_i32gather_epi32(_mm512_mask_add_epi32(v, (__mmask16)(qh >> 16 * j), v, _mm512_set1_epi32(256)),
                                      (const void *)coli_iq3s_grid, 4);
    }
    if (!gather) {
        const __m256i b8 = _mm256_set1_epi16(256);
        uint16_t i[64];
        for (int j = 1; j < 4; j += 2) {
            const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x->qs + 16 * j)));
            _mm256_storeu_si256((__m256i *)(i + 16 * j), _mm256_mask_add_epi16(v, (__mmask16)(qh >> 16 * j), v, b8));
        }
        REREAD(i);
        for (int j = 1; j < 4; j += 2) g[j] = grid4x16(coli_iq3s_grid, i + 16 * j);
    }
    sign_masks_mem(x->signs, m);
    uint32_t sb;
    memcpy(&sb, x->scales, 4);
    const __m256i s = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sb), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                       _mm256_set1_epi32(15));
    scales32(_mm256_add_epi32(_mm256_slli_epi32(s, 1), _mm256_set1_epi32(1)), sc);
}

/* One weight row against nr activation rows, tiled = 0 / 1 as in quant_iq23_avx2.c. */
#define IQ23_NR(t, kf)                                                                                               \
    INL void t##_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int tiled,            \
                    const int gather, const int nr) {                                                                \
        const block_##t *x = w;                                                                                      \
        __m256 acc[COLI_MAX_NR];                                                                                     \
        float acc1[COLI_MAX_NR];                                                                                     \
        for (int r = 0; r < nr; r++) {                                                                               \
            acc[r] = _mm256_setzero_ps();                                                                            \
            acc1[r] = 0.0f;                                                                                          \
        }                                                                                                            \
        for (int i = 0; i < n / QK_K; i++) {                                                                         \
            for (int l = 0; l < (int)sizeof(block_##t); l += 64)                                                     \
                COLI_PREFETCH_W((const char *)(x + i) + IQ23_PREFETCH + l);                                          \
            __m512i g[4], sc[4];                                                                                     \
            __mmask64 m[4];                                                                                          \
            dec_##t(x + i, g, m, sc, gather);                                                                        \
            for (int r = 0; r < nr; r++) {                                                                           \
                const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;                                          \
                __m512i sum = _mm512_setzero_si512();                                                                \
                for (int j = 0; j < 4; j++) {                                                                        \
                    const __m512i q8 = _mm512_loadu_si512((const void *)(y->qs + 64 * j));                           \
                    const __m512i q8s = _mm512_mask_sub_epi8(q8, m[j], _mm512_setzero_si512(), q8);                  \
                    sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(g[j], q8s), sc[j]);                          \
                }                                                                                                    \
                if (tiled) {                                                                                         \
                    const float d0 = h2f(x[i].d) * kf;                                                               \
                    acc1[r] = fmaf((float)_mm512_reduce_add_epi32(sum) * d0, y->d, acc1[r]);                         \
                } else {                                                                                             \
                    const __m256i l8 = _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1)); \
                    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y->d), _mm256_cvtepi32_ps(l8), acc[r]);    \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
        for (int r = 0; r < nr; r++) s[r * ss] = tiled ? acc1[r] : kf * hsum8(acc[r]);                               \
    }                                                                                                                \
    TGT void vec_dot_##t##_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) { \
        if (coli_iq_gather) COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 0, 1);                    \
        else COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 0, 0);                                   \
    }                                                                                                                \
    TGT void vec_dot_##t##_q8_K_tiled_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss,    \
                                             int nr) {                                                               \
        if (coli_iq_gather) COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 1, 1);                    \
        else COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 1, 0);                                   \
    }

IQ23_NR(iq2_xxs, 0.125f)
IQ23_NR(iq2_xs, 0.125f)
IQ23_NR(iq2_s, 0.125f)
IQ23_NR(iq3_xxs, 0.25f)
IQ23_NR(iq3_s, 1.0f)

/* 16 weight rows against nr activation rows (vec_dot_16w / vec_dot_mm_16w), each output with
 * the arithmetic of t##_nr. Up to COLI_MAX_NR rows: t##_nr row by row. More rows (batches, an
 * expert given many rows):
 *   tiled (ggml's tiled matmul): the 16 rows' super-block decoded once into a tile16, one row per
 *     32-bit lane (tile16_avx512.h: dpbusd, the scales by mullo per sub-block), for every
 *     activation row of the pass;
 *   ggml's one-row arithmetic, which needs t##_nr's 8 lanes per row: IQ23_WR weight rows at a
 *     time, their super-blocks decoded once into a buffer as signed bytes, then dotted with the
 *     activation rows 4 at a time, each biased by +128 (as ggml's tiled AVX2 kernel does) so that
 *     one maddubs takes it against the signed weights (255 * 62 * 2 < 32767) and one dpwssd
 *     applies the scales; the bias, sum over the groups of scale * 128 * (sum of 4 weights) per
 *     lane, is taken off per super-block: the same integer lanes as t##_nr. */
#define IQ23_SB 4    /* super-blocks decoded per pass (8 rows x 4: ~18 KiB, in L1 with the activations) */
#define IQ23_WR 8    /* weight rows per pass (a multiple of 4) */
#define IQ23_ROWS 64 /* activation rows per pass */

#include "tile16_avx512.h"
#include "transpose_avx512.h"

typedef struct {
    __m512i w[4], sc[4]; /* signed weights; scales per 16-bit lane */
    __m256i corr;        /* the bias per lane (8 lanes, as t##_nr's) */
} iq23_sbw;

/* one pass's weights: IQ23_WR rows x up to IQ23_SB super-blocks, decoded */
typedef struct {
    iq23_sbw D[IQ23_SB][IQ23_WR];
    float dw[IQ23_SB][IQ23_WR]; /* d(x) */
} iq23_pass;

/* A (1..4) activation rows y[a] (at the pass's first super-block) against the pass's ib
 * super-blocks: 4 weight rows x A rows of sums in registers, so that each weight and scale
 * vector is loaded once for A rows and each activation vector once for 4 weight rows (bound by
 * L1 loads, not by its multiplies, when a product costs two loads). acc: the A rows' ymm
 * accumulators, as t##_nr's. */
INL void iq23_rows(const iq23_pass *P, int ib, const block_q8_K *const *y, const int A, __m256 (*acc)[IQ23_WR]) {
    const __m512i b128 = _mm512_set1_epi8(-128);
    for (int k = 0; k < ib; k++)
        for (int jb = 0; jb < IQ23_WR / 4; jb++) {
            const iq23_sbw *o = &P->D[k][4 * jb];
            __m512i sum[4][4]; /* [activation row][weight row] */
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                __m512i yb[4];
#pragma GCC unroll 4
                for (int r = 0; r < A; r++)
                    yb[r] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(y[r][k].qs + 64 * q)), b128);
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const __m512i w = _mm512_load_si512((const void *)&o[j].w[q]);
                    const __m512i sc = _mm512_load_si512((const void *)&o[j].sc[q]);
#pragma GCC unroll 4
                    for (int r = 0; r < A; r++) {
                        const __m512i p = _mm512_maddubs_epi16(yb[r], w);
                        sum[r][j] = q ? _mm512_dpwssd_epi32(sum[r][j], p, sc) : _mm512_madd_epi16(p, sc);
                    }
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < A; r++)
                for (int j = 0; j < 4; j++) {
                    const __m256i l8 = _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(sum[r][j]),
                                                                         _mm512_extracti64x4_epi64(sum[r][j], 1)),
                                                        o[j].corr);
                    acc[r][4 * jb + j] = _mm256_fmadd_ps(_mm256_set1_ps(P->dw[k][4 * jb + j] * y[r][k].d),
                                                         _mm256_cvtepi32_ps(l8), acc[r][4 * jb + j]);
                }
        }
}

/* every activation row of a pass, 4 at a time (the constants folded per count) */
static __attribute__((noinline, target(ISA))) void iq23_pass_rows(const iq23_pass *P, int ib, const char *a,
                                                                   size_t as, int i0, int rn,
                                                                   __m256 (*acc)[IQ23_WR]) {
    for (int r = 0; r < rn; r += 4) {
        const block_q8_K *y[4] = {NULL, NULL, NULL, NULL};
        for (int u = 0; u < 4 && r + u < rn; u++) y[u] = (const block_q8_K *)(a + (size_t)(r + u) * as) + i0;
        switch (rn - r < 4 ? rn - r : 4) {
        case 1: iq23_rows(P, ib, y, 1, acc + r); break;
        case 2: iq23_rows(P, ib, y, 2, acc + r); break;
        case 3: iq23_rows(P, ib, y, 3, acc + r); break;
        default: iq23_rows(P, ib, y, 4, acc + r); break;
        }
    }
}

/* nw: dwords per scale (8: 32 weights, 4: 16) */
#define IQ23_16W(t, kf, nw)                                                                                          \
    /* ggml's one-row arithmetic, nr > COLI_MAX_NR */                                                                \
    INL void t##_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,        \
                     const int gather) {                                                                             \
        const int nb = n / QK_K;                                                                                     \
        const __m512i b128 = _mm512_set1_epi8(-128);                                                                 \
        iq23_pass P;                                                                                                 \
        __m256 acc[IQ23_ROWS][IQ23_WR];                                                                              \
        for (int j0 = 0; j0 < 16; j0 += IQ23_WR)                                                                     \
            for (int r0 = 0; r0 < nr; r0 += IQ23_ROWS) {                                                             \
                const int rn = nr - r0 < IQ23_ROWS ? nr - r0 : IQ23_ROWS;                                            \
                for (int r = 0; r < rn; r++)                                                                         \
                    for (int jj = 0; jj < IQ23_WR; jj++) acc[r][jj] = _mm256_setzero_ps();                           \
                for (int i0 = 0; i0 < nb; i0 += IQ23_SB) {                                                           \
                    const int ib = nb - i0 < IQ23_SB ? nb - i0 : IQ23_SB;                                            \
                    for (int jj = 0; jj < IQ23_WR; jj++)                                                             \
                        for (int k = 0; k < ib; k++) {                                                               \
                            const block_##t *x = (const block_##t *)(w + (size_t)(j0 + jj) * wst) + i0 + k;          \
                            iq23_sbw *o = &P.D[k][jj];                                                               \
                            __m512i g[4];                                                                            \
                            __mmask64 m[4];                                                                          \
                            dec_##t(x, g, m, o->sc, gather);                                                         \
                            __m512i c = _mm512_setzero_si512();                                                      \
                            for (int q = 0; q < 4; q++) {                                                            \
                                o->w[q] = _mm512_mask_sub_epi8(g[q], m[q], _mm512_setzero_si512(), g[q]);            \
                                c = _mm512_dpwssd_epi32(c, _mm512_maddubs_epi16(b128, o->w[q]), o->sc[q]);           \
                            }                                                                                        \
                            o->corr = _mm256_add_epi32(_mm512_castsi512_si256(c), _mm512_extracti64x4_epi64(c, 1));  \
                            P.dw[k][jj] = h2f(x->d);                                                                 \
                        }                                                                                            \
                    iq23_pass_rows(&P, ib, a + (size_t)r0 * as, as, i0, rn, acc);                                    \
                }                                                                                                    \
                for (int r = 0; r < rn; r++)                                                                         \
                    for (int jj = 0; jj < IQ23_WR; jj++) s[(size_t)(r0 + r) * ss + j0 + jj] = kf * hsum8(acc[r][jj]); \
            }                                                                                                        \
    }                                                                                                                \
    /* super-block i of the 16 rows (row 0's at b) as a tile16: each row decoded as t##_nr does,                     \
     * its weights biased by +128, then the 16 rows transposed into lanes */                                         \
    INL void t##_tile(const char *b, size_t wst, tile16 *T, const int gather) {                                      \
        const __m512i b128 = _mm512_set1_epi8(-128);                                                                 \
        __m512i rows[4][16];                                                                                         \
        int32_t ls[16][16];                                                                                          \
        float d0[16];                                                                                                \
        for (int j = 0; j < 16; j++) {                                                                               \
            const block_##t *x = (const block_##t *)(b + (size_t)j * wst);                                           \
            __m512i g[4], sc[4];                                                                                     \
            __mmask64 m[4];                                                                                          \
            dec_##t(x, g, m, sc, gather);                                                                            \
            for (int q = 0; q < 4; q++) {                                                                            \
                int32_t l[16];                                                                                       \
                rows[q][j] = _mm512_xor_si512(_mm512_mask_sub_epi8(g[q], m[q], _mm512_setzero_si512(), g[q]), b128); \
                _mm512_storeu_si512((void *)l, sc[q]); /* lane k, low half: the scale of weights 64q + 4k.. */       \
                for (int u = 0; u < 16 / (nw); u++) ls[16 / (nw) * q + u][j] = l[(nw) * u] & 0xffff;                 \
            }                                                                                                        \
            d0[j] = h2f(x->d) * (kf);                                                                                \
        }                                                                                                            \
        for (int q = 0; q < 4; q++) {                                                                                \
            transpose16(rows[q]);                                                                                        \
            for (int k = 0; k < 16; k++) T->c[16 * q + k] = rows[q][k];                                              \
        }                                                                                                            \
        for (int u = 0; u < 64 / (nw); u++) T->ls[u] = _mm512_loadu_si512(ls[u]);                                    \
        T->d0 = _mm512_loadu_ps(d0);                                                                                 \
    }                                                                                                                \
    /* ggml's tiled arithmetic, nr > COLI_MAX_NR */                                                                  \
    INL void t##_tiled(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,      \
                       const int gather) {                                                                           \
        __m512 acc[TILE16_PASS_ROWS];                                                                                \
        tile16 T;                                                                                                    \
        for (int r0 = 0; r0 < nr; r0 += TILE16_PASS_ROWS) {                                                          \
            const int rn = nr - r0 < TILE16_PASS_ROWS ? nr - r0 : TILE16_PASS_ROWS;                                  \
            for (int r = 0; r < rn; r++) acc[r] = _mm512_setzero_ps();                                               \
            for (int i = 0; i < n / QK_K; i++) {                                                                     \
                t##_tile(w + (size_t)i * sizeof(block_##t), wst, &T, gather);                                        \
                tile_all_rows(&T, a + (size_t)r0 * as, as, i, nw, acc, rn);                                          \
            }                                                                                                        \
            for (int r = 0; r < rn; r++) _mm512_storeu_ps(s + (size_t)(r0 + r) * ss, acc[r]);                        \
        }                                                                                                            \
    }                                                                                                                \
    /* one copy per lookup way, each with its constants folded (the frames are big: not inlined twice) */            \
    static __attribute__((noinline, target(ISA))) void t##_16w_g(int n, const void *w, size_t wst, const void *a,    \
                                                                 size_t as, float *s, size_t ss, int nr, int tiled) { \
        if (tiled) t##_tiled(n, w, wst, a, as, s, ss, nr, 1);                                                        \
        else t##_16w(n, w, wst, a, as, s, ss, nr, 1);                                                                \
    }                                                                                                                \
    static __attribute__((noinline, target(ISA))) void t##_16w_l(int n, const void *w, size_t wst, const void *a,    \
                                                                 size_t as, float *s, size_t ss, int nr, int tiled) { \
        if (tiled) t##_tiled(n, w, wst, a, as, s, ss, nr, 0);                                                        \
        else t##_16w(n, w, wst, a, as, s, ss, nr, 0);                                                                \
    }                                                                                                                \
    TGT void vec_dot_##t##_q8_K_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,     \
                                           size_t ss, int nr) {                                                      \
        if (nr <= COLI_MAX_NR) { /* decode: the one-row kernel per weight row (no batch frame) */                    \
            for (int j = 0; j < 16; j++) vec_dot_##t##_q8_K_avx512(n, (const char *)w + j * wst, a, as, s + j, ss, nr); \
            return;                                                                                                  \
        }                                                                                                            \
        if (coli_iq_gather) t##_16w_g(n, w, wst, a, as, s, ss, nr, 0);                                               \
        else t##_16w_l(n, w, wst, a, as, s, ss, nr, 0);                                                              \
    }                                                                                                                \
    TGT void vec_dot_##t##_q8_K_mm_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,  \
                                              size_t ss, int nr) {                                                   \
        if (nr <= COLI_MAX_NR) { /* decode: the one-row kernel per weight row (no batch frame) */                    \
            for (int j = 0; j < 16; j++) vec_dot_##t##_q8_K_tiled_avx512(n, (const char *)w + j * wst, a, as, s + j, ss, nr); \
            return;                                                                                                  \
        }                                                                                                            \
        if (coli_iq_gather) t##_16w_g(n, w, wst, a, as, s, ss, nr, 1);                                               \
        else t##_16w_l(n, w, wst, a, as, s, ss, nr, 1);                                                              \
    }

IQ23_16W(iq2_xxs, 0.125f, 8)
IQ23_16W(iq2_xs, 0.125f, 4)
IQ23_16W(iq2_s, 0.125f, 4)
IQ23_16W(iq3_xxs, 0.25f, 8)
IQ23_16W(iq3_s, 1.0f, 8)

#else
typedef int coli_quant_iq23_avx512_unused;
#endif
