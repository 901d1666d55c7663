/* quant_iq23_avx2.c — AVX2 kernels of the grid i-quants (quant_iq23.h), target attributes per
 * function so the file builds without -march.
 *
 * A super-block is decoded once: per 32-weight group its grid magnitudes (bytes, looked up with
 * scalar index loads as ggml does, or IQ2_S's and IQ3's by vpgather where that is faster), their
 * signs (+-1 bytes, made from the super-block's sign bytes in one vector pass, applied to the
 * activation by sign_epi8) and its scale (16-bit lanes), then dotted with every activation row
 * of the call: maddubs -> madd by the scale gives 8 int32 lanes, lane k holding weights
 * 4k..4k+3 of the group, summed over the super-block's groups. These are the integers
 * of ggml's AVX2 ggml_vec_dot_<t>_q8_K lane for lane (its sumi1 + sumi2), whatever the order of
 * the adds; the float side is then ggml's, one row or tiled (see quant_iq23.h). */
#include "quant_iq23.h"

#ifdef COLI_X86
#include <immintrin.h>

#include "prefetch.h"
#include <math.h>

#include "iq_grids.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))

#include "quant_avx2_inl.h"

#define IQ23_PREFETCH 2048 /* bytes ahead of the super-block in use: weight rows lie end to end */

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

/* group c's 4 sign bytes (dword c of sb) -> +-1 bytes (bit set: -1) */
INL __m256i signs_pm1(__m256i sb, int c) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i sel = _mm256_set1_epi64x((int64_t)0x8040201008040201ULL);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sb, _mm256_set1_epi32(c)), shuf), sel);
    return _mm256_or_si256(_mm256_cmpeq_epi8(b, sel), _mm256_set1_epi8(1));
}

/* the same from the 4 sign bytes in memory: a broadcast load instead of the lane permute
 * (the shuffle port is what these kernels run out of, with the grid inserts) */
INL __m256i signs_pm1_at(const uint8_t *p) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i sel = _mm256_set1_epi64x((int64_t)0x8040201008040201ULL);
    uint32_t v;
    memcpy(&v, p, 4);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)v), shuf), sel);
    return _mm256_or_si256(_mm256_cmpeq_epi8(b, sel), _mm256_set1_epi8(1));
}

/* scales: per-32 (8 dwords, 2 * ls + 1) -> group c's 16-bit lanes; per-16 (two vectors of 8
 * dwords, sub-blocks 0..7 and 8..15) -> the lanes of group c (sub-blocks 2c, 2c + 1) */
INL __m256i words(__m256i s) { return _mm256_or_si256(s, _mm256_slli_epi32(s, 16)); }
INL __m256i scale32(__m256i w, int c) { return _mm256_permutevar8x32_epi32(w, _mm256_set1_epi32(c)); }
INL __m256i scale16(const __m256i w[2], int c) {
    const int k = 2 * (c % 4);
    return _mm256_permutevar8x32_epi32(w[c / 4], _mm256_setr_epi32(k, k, k, k, k + 1, k + 1, k + 1, k + 1));
}
INL void scales16(const uint8_t b[8], __m256i w[2]) {
    uint64_t v;
    memcpy(&v, b, 8);
    const __m128i bb = _mm_set1_epi64x((int64_t)v);
    const __m128i u = _mm_unpacklo_epi8(bb, bb); /* b0 b0 b1 b1 ... */
    const __m256i sh = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4), m15 = _mm256_set1_epi32(15), one = _mm256_set1_epi32(1);
    for (int h = 0; h < 2; h++) {
        const __m256i s = _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu8_epi32(h ? _mm_srli_si128(u, 8) : u), sh), m15);
        w[h] = words(_mm256_add_epi32(_mm256_slli_epi32(s, 1), one));
    }
}
INL __m256i odd_scales(__m256i sw) { /* 2 * (sw >> 28) + 1 */
    return words(_mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(sw, 28), 1), _mm256_set1_epi32(1)));
}

/* grid lookups, indices read with scalar loads from the block (as ggml's kernels); those
 * computed in vectors (IQ3_S) go through memory, as ggml's index_t union does: the
 * barrier keeps the compiler from turning the reloads back into extracts */
#define REREAD(a) __asm__ volatile("" : : "r"(a) : "memory")
INL __m256i grid8x4(const uint64_t *g, int i0, int i1, int i2, int i3) {
    return _mm256_set_epi64x((int64_t)g[i3], (int64_t)g[i2], (int64_t)g[i1], (int64_t)g[i0]);
}
INL __m256i grid4x8(const uint32_t *g, const uint8_t *q) {
    return _mm256_set_epi32((int)g[q[7]], (int)g[q[6]], (int)g[q[5]], (int)g[q[4]], (int)g[q[3]], (int)g[q[2]],
                            (int)g[q[1]], (int)g[q[0]]);
}

/* One super-block: per 32-weight group c its magnitudes q[c], signs sg[c] (+-1) and scales
 * sc[c] (16-bit lanes). */
INL void dec_iq2_xxs(const block_iq2_xxs *x, __m256i *q, __m256i *sg, __m256i *sc, const int gather) {
    (void)gather; /* scalar loads either way: byte and masked-u16 indices cost less than a vpgather (Intel, 7-12%) */
    const uint8_t *b = (const uint8_t *)x->qs; /* u32 pairs: 4 index bytes, sign word */
    const __m256 lo = _mm256_loadu_ps((const float *)x->qs), hi = _mm256_loadu_ps((const float *)x->qs + 8);
    const __m256i sw = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))),
                                                _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i sb = sign_codes(sw), w = odd_scales(sw);
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        q[c] = grid8x4(coli_iq2xxs_grid, b[8 * c], b[8 * c + 1], b[8 * c + 2], b[8 * c + 3]);
        sg[c] = signs_pm1(sb, c);
        sc[c] = scale32(w, c);
    }
}

INL void dec_iq2_xs(const block_iq2_xs *x, __m256i *q, __m256i *sg, __m256i *sc, const int gather) {
    (void)gather; /* scalar loads either way: byte and masked-u16 indices cost less than a vpgather (Intel, 7-12%) */
    const __m256i a = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)x->qs), 9);
    const __m256i b = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(x->qs + 16)), 9);
    const __m256i sb = with_parity(_mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), _MM_SHUFFLE(3, 1, 2, 0)));
    __m256i w[2];
    scales16(x->scales, w);
    const uint16_t *p = x->qs;
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        q[c] = grid8x4(coli_iq2xs_grid, p[4 * c] & 511, p[4 * c + 1] & 511, p[4 * c + 2] & 511, p[4 * c + 3] & 511);
        sg[c] = signs_pm1(sb, c);
        sc[c] = scale16(w, c);
    }
}

INL void dec_iq2_s(const block_iq2_s *x, __m256i *q, __m256i *sg, __m256i *sc, const int gather) {
    __m256i w[2];
    scales16(x->scales, w);
    const uint8_t *qs = x->qs, *qh = x->qh;
    if (gather) { /* index qs[j] | (bits 2k, 2k + 1 of qh[j / 4]) << 8 formed in a vector, 4 points a vpgather */
        const __m128i sh = _mm_setr_epi32(8, 6, 4, 2), m3 = _mm_set1_epi32(0x300);
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            uint32_t q4;
            memcpy(&q4, qs + 4 * c, 4);
            const __m128i idx = _mm_or_si128(_mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)q4)),
                                             _mm_and_si128(_mm_sllv_epi32(_mm_set1_epi32(qh[c]), sh), m3));
            q[c] = _mm256_i32gather_epi64((const long long *)coli_iq2s_grid, idx, 8);
            sg[c] = signs_pm1_at(x->qs + QK_K / 8 + 4 * c);
            sc[c] = scale16(w, c);
        }
        return;
    }
    /* the same indices with scalar ops, as ggml's: formed in vectors and read back through memory they
     * stalled on store forwarding (decode 0.77 of ggml's), moved to a general register a group at a time
     * they measured 0.90; this, 0.97 (Zen 4, whose gathers are slow) */
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        const unsigned h = qh[c];
        q[c] = grid8x4(coli_iq2s_grid, qs[4 * c] | ((h << 8) & 0x300), qs[4 * c + 1] | ((h << 6) & 0x300),
                       qs[4 * c + 2] | ((h << 4) & 0x300), qs[4 * c + 3] | ((h << 2) & 0x300));
        sg[c] = signs_pm1_at(x->qs + QK_K / 8 + 4 * c);
        sc[c] = scale16(w, c);
    }
}

INL void dec_iq3_xxs(const block_iq3_xxs *x, __m256i *q, __m256i *sg, __m256i *sc, const int gather) {
    const __m256i sw = _mm256_loadu_si256((const __m256i *)(x->qs + QK_K / 4));
    const __m256i sb = sign_codes(sw), w = odd_scales(sw);
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        q[c] = gather ? _mm256_i32gather_epi32((const int *)coli_iq3xxs_grid,
                                               _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x->qs + 8 * c))), 4)
                      : grid4x8(coli_iq3xxs_grid, x->qs + 8 * c);
        sg[c] = signs_pm1(sb, c);
        sc[c] = scale32(w, c);
    }
}

INL void dec_iq3_s(const block_iq3_s *x, __m256i *q, __m256i *sg, __m256i *sc, const int gather) {
    const __m256i sb = _mm256_loadu_si256((const __m256i *)x->signs);
    uint32_t sc4;
    memcpy(&sc4, x->scales, 4);
    const __m256i s = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sc4), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                       _mm256_set1_epi32(15));
    const __m256i w = words(_mm256_add_epi32(_mm256_slli_epi32(s, 1), _mm256_set1_epi32(1)));
    uint16_t qh[4];
    memcpy(qh, x->qh, 8); /* bit k: bit 8 of index k */
    const __m256i sel = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, -32768);
    uint16_t i[64];
    __m256i iv[4];
    for (int j = 0; j < 4; j++) {
        const __m256i b = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16((short)qh[j]), sel), sel);
        const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x->qs + 16 * j)));
        iv[j] = _mm256_or_si256(v, _mm256_and_si256(b, _mm256_set1_epi16(256)));
        if (!gather) _mm256_storeu_si256((__m256i *)(i + 16 * j), iv[j]);
    }
    if (gather) { /* the 16-bit indices widened in registers, 8 points a vpgather */
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            const __m128i h = c % 2 ? _mm256_extracti128_si256(iv[c / 2], 1) : _mm256_castsi256_si128(iv[c / 2]);
            q[c] = _mm256_i32gather_epi32((const int *)coli_iq3s_grid, _mm256_cvtepu16_epi32(h), 4);
            sg[c] = signs_pm1(sb, c);
            sc[c] = scale32(w, c);
        }
        return;
    }
    REREAD(i);
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        const uint16_t *k = i + 8 * c;
        const uint32_t *g = coli_iq3s_grid;
        q[c] = _mm256_set_epi32((int)g[k[7]], (int)g[k[6]], (int)g[k[5]], (int)g[k[4]], (int)g[k[3]], (int)g[k[2]],
                                (int)g[k[1]], (int)g[k[0]]);
        sg[c] = signs_pm1(sb, c);
        sc[c] = scale32(w, c);
    }
}

/* One weight row against nr activation rows. tiled = 0: ggml's AVX2 vec_dot,
 * acc = fma(d(x) * d(y), float(lanes), acc), kf * hsum(acc) at the end;
 * tiled = 1: ggml's tiled matmul, acc = fma(float(isum) * (d(x) * kf), d(y), acc)
 * (its mul + add of intrinsics, fused by GCC's default -ffp-contract=fast).
 * gather: grid points by vpgather instead of scalar loads and inserts (IQ2_S, IQ3_XXS,
 * IQ3_S: 6-20% faster on Intel), a constant per instance (a flag read in the loop cost
 * 8% of IQ2_S's decode). */
#define IQ23_NR(t, kf)                                                                                              \
    INL void t##_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int tiled,          \
                    const int gather,                                                                               \
                    const int nr) {                                                                                 \
        const block_##t *x = w;                                                                                     \
        __m256 acc[COLI_MAX_NR];                                                                                    \
        float acc1[COLI_MAX_NR];                                                                                    \
        for (int r = 0; r < nr; r++) {                                                                              \
            acc[r] = _mm256_setzero_ps();                                                                           \
            acc1[r] = 0.0f;                                                                                         \
        }                                                                                                           \
        for (int i = 0; i < n / QK_K; i++) {                                                                        \
            for (int l = 0; l < (int)sizeof(block_##t); l += 64)                                                    \
                COLI_PREFETCH_W((const char *)(x + i) + IQ23_PREFETCH + l);                               \
            __m256i q[8], sg[8], sc[8];                                                                             \
            dec_##t(x + i, q, sg, sc, gather);                                                                      \
            __m256i sumi[COLI_MAX_NR];                                                                              \
            for (int r = 0; r < nr; r++) {                                                                          \
                const int8_t *y = ((const block_q8_K *)(a + r * as) + i)->qs;                                       \
                sumi[r] = _mm256_setzero_si256();                                                                   \
                for (int c = 0; c < QK_K / 32; c++) {                                                               \
                    const __m256i yc = _mm256_loadu_si256((const __m256i *)(y + 32 * c));                           \
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], _mm256_sign_epi8(yc, sg[c])), sc[c])); \
                }                                                                                                   \
            }                                                                                                       \
            const float dx = h2f(x[i].d);                                                                           \
            for (int r = 0; r < nr; r++) {                                                                          \
                const float dy = ((const block_q8_K *)(a + r * as) + i)->d;                                         \
                if (tiled)                                                                                          \
                    acc1[r] = fmaf((float)hsum_i32_8(sumi[r]) * (dx * kf), dy, acc1[r]);                            \
                else                                                                                                \
                    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dy), _mm256_cvtepi32_ps(sumi[r]), acc[r]);         \
            }                                                                                                       \
        }                                                                                                           \
        for (int r = 0; r < nr; r++) s[r * ss] = tiled ? acc1[r] : kf * hsum_f32_8(acc[r]);                         \
    }                                                                                                               \
    TGT void vec_dot_##t##_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) { \
        if (coli_iq_gather) COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 0, 1);                    \
        else COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 0, 0);                                  \
    }                                                                                                               \
    TGT void vec_dot_##t##_q8_K_tiled_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss,     \
                                           int nr) {                                                                \
        if (coli_iq_gather) COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 1, 1);                    \
        else COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 1, 0);                                  \
    }

IQ23_NR(iq2_xxs, 0.125f)
IQ23_NR(iq2_xs, 0.125f)
IQ23_NR(iq2_s, 0.125f)
IQ23_NR(iq3_xxs, 0.25f)
IQ23_NR(iq3_s, 1.0f)

/* 16 weight rows against nr activation rows (vec_dot_16w / vec_dot_mm_16w), each output with
 * the arithmetic of t##_nr. Up to COLI_MAX_NR rows: t##_nr row by row. More rows: IQ23_WR
 * weight rows at a time, their super-blocks decoded once into a buffer as signed bytes, each
 * activation row loaded once for all of them and biased by +128 (as ggml's tiled AVX2 kernel
 * does: one maddubs against the signed weights, 255 * 62 * 2 < 32767), the bias (per lane, sum
 * over the groups of scale * 128 * (sum of 4 weights)) taken off per super-block: the same
 * integer lanes as t##_nr. */
#define IQ23_SB 8    /* super-blocks decoded per pass */
#define IQ23_WR 4    /* weight rows per pass */
#define IQ23_ROWS 64 /* activation rows per pass */
typedef struct {
    __m256i w[8], sc[8]; /* signed weights; scales per 16-bit lane */
    __m256i corr;        /* the bias per lane */
} iq23_sbw;

/* the sums of four ymm of int32 -> xmm [sum(a), sum(b), sum(c), sum(d)] */
INL __m128i reduce4(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    const __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
    const __m256i v = _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
    return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

#define IQ23_16W(t, kf)                                                                                              \
    static __attribute__((noinline, target("avx2,fma,f16c"))) void t##_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, \
                                                size_t ss, int nr, const int tiled) {                     \
        const int nb = n / QK_K;                                                                                     \
        const __m256i b128 = _mm256_set1_epi8(-128);                                                                 \
        iq23_sbw D[IQ23_SB][IQ23_WR];                                                                                \
        int32_t corr1[IQ23_SB][IQ23_WR];                                                                             \
        float dw[IQ23_SB][IQ23_WR];                                                                                  \
        __m256 acc[IQ23_ROWS][IQ23_WR];                                                                              \
        __m128 acc4[IQ23_ROWS];                                                                                      \
        for (int j0 = 0; j0 < 16; j0 += IQ23_WR)                                                                     \
            for (int r0 = 0; r0 < nr; r0 += IQ23_ROWS) {                                                             \
                const int rn = nr - r0 < IQ23_ROWS ? nr - r0 : IQ23_ROWS;                                            \
                for (int r = 0; r < rn; r++) {                                                                       \
                    acc4[r] = _mm_setzero_ps();                                                                      \
                    for (int jj = 0; jj < IQ23_WR; jj++) acc[r][jj] = _mm256_setzero_ps();                           \
                }                                                                                                    \
                for (int i0 = 0; i0 < nb; i0 += IQ23_SB) {                                                           \
                    const int ib = nb - i0 < IQ23_SB ? nb - i0 : IQ23_SB;                                            \
                    for (int jj = 0; jj < IQ23_WR; jj++)                                                             \
                        for (int k = 0; k < ib; k++) {                                                               \
                            const block_##t *x = (const block_##t *)(w + (size_t)(j0 + jj) * wst) + i0 + k;          \
                            iq23_sbw *o = &D[k][jj];                                                                 \
                            __m256i q[8], sg[8];                                                                     \
                            dec_##t(x, q, sg, o->sc, 0);                                                             \
                            __m256i c = _mm256_setzero_si256();                                                      \
                            for (int g = 0; g < 8; g++) {                                                            \
                                o->w[g] = _mm256_sign_epi8(q[g], sg[g]);                                             \
                                c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(b128, o->w[g]), o->sc[g])); \
                            }                                                                                        \
                            o->corr = c;                                                                             \
                            corr1[k][jj] = hsum_i32_8(c);                                                            \
                            dw[k][jj] = tiled ? h2f(x->d) * kf : h2f(x->d);                                          \
                        }                                                                                            \
                    for (int r = 0; r < rn; r++) {                                                                   \
                        const block_q8_K *y = (const block_q8_K *)(a + (size_t)(r0 + r) * as) + i0;                  \
                        for (int k = 0; k < ib; k++) {                                                               \
                            __m256i yb[8], sum[IQ23_WR];                                                             \
                            for (int g = 0; g < 8; g++)                                                              \
                                yb[g] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(y[k].qs + 32 * g)), b128); \
                            for (int jj = 0; jj < IQ23_WR; jj++) {                                                   \
                                sum[jj] = _mm256_setzero_si256();                                                    \
                                for (int g = 0; g < 8; g++)                                                          \
                                    sum[jj] = _mm256_add_epi32(sum[jj], _mm256_madd_epi16(_mm256_maddubs_epi16(yb[g], D[k][jj].w[g]), D[k][jj].sc[g])); \
                            }                                                                                        \
                            if (tiled) { /* the four weight rows' float ops side by side, each as t##_nr's */        \
                                const __m128i isum = _mm_sub_epi32(reduce4(sum[0], sum[1], sum[2], sum[3]),          \
                                                                   _mm_loadu_si128((const __m128i *)corr1[k]));      \
                                const __m128 f = _mm_mul_ps(_mm_cvtepi32_ps(isum), _mm_loadu_ps(dw[k]));             \
                                acc4[r] = _mm_fmadd_ps(f, _mm_set1_ps(y[k].d), acc4[r]);                             \
                            } else {                                                                                 \
                                for (int jj = 0; jj < IQ23_WR; jj++)                                                 \
                                    acc[r][jj] = _mm256_fmadd_ps(_mm256_set1_ps(dw[k][jj] * y[k].d),                 \
                                                                 _mm256_cvtepi32_ps(_mm256_sub_epi32(sum[jj], D[k][jj].corr)), acc[r][jj]); \
                            }                                                                                        \
                        }                                                                                            \
                    }                                                                                                \
                }                                                                                                    \
                for (int r = 0; r < rn; r++) {                                                                       \
                    float *o = s + (size_t)(r0 + r) * ss + j0;                                                       \
                    if (tiled)                                                                                       \
                        _mm_storeu_ps(o, acc4[r]);                                                                   \
                    else                                                                                             \
                        for (int jj = 0; jj < IQ23_WR; jj++) o[jj] = kf * hsum_f32_8(acc[r][jj]);                    \
                }                                                                                                    \
            }                                                                                                        \
    }                                                                                                                \
    TGT void vec_dot_##t##_q8_K_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,      \
                                         size_t ss, int nr) {                                                        \
        if (nr <= COLI_MAX_NR) { /* decode: the one-row kernel per weight row (no batch frame) */          \
            for (int j = 0; j < 16; j++) vec_dot_##t##_q8_K_avx2(n, (const char *)w + j * wst, a, as, s + j, ss, nr); \
            return;                                                                                          \
        }                                                                                                    \
        t##_16w(n, (const char *)w, wst, (const char *)a, as, s, ss, nr, 0);                                         \
    }                                                                                                                \
    TGT void vec_dot_##t##_q8_K_mm_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,   \
                                            size_t ss, int nr) {                                                     \
        if (nr <= COLI_MAX_NR) { /* decode: the one-row kernel per weight row (no batch frame) */          \
            for (int j = 0; j < 16; j++) vec_dot_##t##_q8_K_tiled_avx2(n, (const char *)w + j * wst, a, as, s + j, ss, nr); \
            return;                                                                                          \
        }                                                                                                    \
        t##_16w(n, (const char *)w, wst, (const char *)a, as, s, ss, nr, 1);                                         \
    }

IQ23_16W(iq2_xxs, 0.125f)
IQ23_16W(iq2_xs, 0.125f)
IQ23_16W(iq2_s, 0.125f)
IQ23_16W(iq3_xxs, 0.25f)
IQ23_16W(iq3_s, 1.0f)

#else
typedef int coli_quant_iq23_avx2_unused;
#endif
