/* quant_iq23_avx2.c — AVX2 kernels of the grid i-quants (quant_iq23.h), target attributes per
 * function so the file builds without -march.
 *
 * Each 32-weight group is decoded once into its grid magnitudes (bytes), their signs (+-1 bytes,
 * applied to the activation by sign_epi8) and its scale (16-bit lanes), and dotted with every
 * activation row of the call: maddubs -> madd by the scale gives 8 int32 lanes, lane k holding
 * weights 4k..4k+3 of the group, summed over the super-block's groups. These are the integers
 * of ggml's AVX2 ggml_vec_dot_<t>_q8_K lane for lane (its sumi1 + sumi2), whatever the order of
 * the adds; the float side is then ggml's, one row or tiled (see quant_iq23.h). */
#include "quant_iq23.h"

#ifdef COLI_X86
#include <immintrin.h>
#include <math.h>

#include "iq_grids.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))

#include "quant_avx2_inl.h"

#define IQ23_PREFETCH 2048 /* bytes ahead of the super-block in use: weight rows lie end to end */

static const uint64_t *const signs64 = (const uint64_t *)coli_keven_signs_q2xs;

/* 32 bits, one per weight -> +-1 bytes (bit set: -1) */
INL __m256i signs_pm1(uint32_t bits) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i sel = _mm256_set1_epi64x((int64_t)0x8040201008040201ULL);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf), sel);
    return _mm256_or_si256(_mm256_cmpeq_epi8(b, sel), _mm256_set1_epi8(1));
}

/* Group c (0..7) of a super-block: magnitudes q, signs sg, scale per 16-bit lane sc. */
INL void dec_iq2_xxs(const block_iq2_xxs *x, int c, __m256i *q, __m256i *sg, __m256i *sc) {
    uint32_t a[2];
    memcpy(a, x->qs + 4 * c, 8);
    q[0] = _mm256_set_epi64x((int64_t)coli_iq2xxs_grid[a[0] >> 24], (int64_t)coli_iq2xxs_grid[a[0] >> 16 & 255],
                             (int64_t)coli_iq2xxs_grid[a[0] >> 8 & 255], (int64_t)coli_iq2xxs_grid[a[0] & 255]);
    sg[0] = _mm256_set_epi64x((int64_t)signs64[a[1] >> 21 & 127], (int64_t)signs64[a[1] >> 14 & 127],
                              (int64_t)signs64[a[1] >> 7 & 127], (int64_t)signs64[a[1] & 127]);
    sc[0] = _mm256_set1_epi16((short)(2 * (a[1] >> 28) + 1));
}

INL void dec_iq2_xs(const block_iq2_xs *x, int c, __m256i *q, __m256i *sg, __m256i *sc) {
    const uint16_t *p = x->qs + 4 * c;
    q[0] = _mm256_set_epi64x((int64_t)coli_iq2xs_grid[p[3] & 511], (int64_t)coli_iq2xs_grid[p[2] & 511],
                             (int64_t)coli_iq2xs_grid[p[1] & 511], (int64_t)coli_iq2xs_grid[p[0] & 511]);
    sg[0] = _mm256_set_epi64x((int64_t)signs64[p[3] >> 9], (int64_t)signs64[p[2] >> 9], (int64_t)signs64[p[1] >> 9],
                              (int64_t)signs64[p[0] >> 9]);
    const int b = x->scales[c];
    sc[0] = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (b >> 4) + 1)), _mm_set1_epi16((short)(2 * (b & 15) + 1)));
}

INL void dec_iq2_s(const block_iq2_s *x, int c, __m256i *q, __m256i *sg, __m256i *sc) {
    const uint8_t *qs = x->qs + 4 * c;
    const int h = x->qh[c];
    q[0] = _mm256_set_epi64x((int64_t)coli_iq2s_grid[qs[3] | (h << 2 & 0x300)], (int64_t)coli_iq2s_grid[qs[2] | (h << 4 & 0x300)],
                             (int64_t)coli_iq2s_grid[qs[1] | (h << 6 & 0x300)], (int64_t)coli_iq2s_grid[qs[0] | (h << 8 & 0x300)]);
    uint32_t bits;
    memcpy(&bits, x->qs + QK_K / 8 + 4 * c, 4);
    sg[0] = signs_pm1(bits);
    const int b = x->scales[c];
    sc[0] = _mm256_set_m128i(_mm_set1_epi16((short)(2 * (b >> 4) + 1)), _mm_set1_epi16((short)(2 * (b & 15) + 1)));
}

INL void dec_iq3_xxs(const block_iq3_xxs *x, int c, __m256i *q, __m256i *sg, __m256i *sc) {
    const uint8_t *q3 = x->qs + 8 * c;
    const uint32_t *g = coli_iq3xxs_grid;
    q[0] = _mm256_set_epi32((int)g[q3[7]], (int)g[q3[6]], (int)g[q3[5]], (int)g[q3[4]], (int)g[q3[3]], (int)g[q3[2]],
                            (int)g[q3[1]], (int)g[q3[0]]);
    uint32_t a;
    memcpy(&a, x->qs + QK_K / 4 + 4 * c, 4);
    sg[0] = _mm256_set_epi64x((int64_t)signs64[a >> 21 & 127], (int64_t)signs64[a >> 14 & 127],
                              (int64_t)signs64[a >> 7 & 127], (int64_t)signs64[a & 127]);
    sc[0] = _mm256_set1_epi16((short)(2 * (a >> 28) + 1));
}

INL void dec_iq3_s(const block_iq3_s *x, int c, __m256i *q, __m256i *sg, __m256i *sc) {
    const uint8_t *qs = x->qs + 8 * c;
    const int h = x->qh[c];
    const uint32_t *g = coli_iq3s_grid;
    q[0] = _mm256_set_epi32((int)g[qs[7] | (h << 1 & 256)], (int)g[qs[6] | (h << 2 & 256)], (int)g[qs[5] | (h << 3 & 256)],
                            (int)g[qs[4] | (h << 4 & 256)], (int)g[qs[3] | (h << 5 & 256)], (int)g[qs[2] | (h << 6 & 256)],
                            (int)g[qs[1] | (h << 7 & 256)], (int)g[qs[0] | (h << 8 & 256)]);
    uint32_t bits;
    memcpy(&bits, x->signs + 4 * c, 4);
    sg[0] = signs_pm1(bits);
    sc[0] = _mm256_set1_epi16((short)(2 * (x->scales[c / 2] >> 4 * (c % 2) & 15) + 1));
}

/* One weight row against nr activation rows. tiled = 0: ggml's AVX2 vec_dot,
 * acc = fma(d(x) * d(y), float(lanes), acc), kf * hsum(acc) at the end;
 * tiled = 1: ggml's tiled matmul, acc = fma(float(isum) * (d(x) * kf), d(y), acc)
 * (its mul + add of intrinsics, fused by GCC's default -ffp-contract=fast). */
#define IQ23_NR(t, kf)                                                                                              \
    INL void t##_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int tiled,          \
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
                _mm_prefetch((const char *)(x + i) + IQ23_PREFETCH + l, _MM_HINT_T0);                               \
            __m256i sumi[COLI_MAX_NR];                                                                              \
            for (int r = 0; r < nr; r++) sumi[r] = _mm256_setzero_si256();                                          \
            for (int c = 0; c < QK_K / 32; c++) {                                                                   \
                __m256i q, sg, sc;                                                                                  \
                dec_##t(x + i, c, &q, &sg, &sc);                                                                    \
                for (int r = 0; r < nr; r++) {                                                                      \
                    const __m256i y = _mm256_loadu_si256((const __m256i *)(((const block_q8_K *)(a + r * as) + i)->qs + 32 * c)); \
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q, _mm256_sign_epi8(y, sg)), sc)); \
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
        COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 0);                                          \
    }                                                                                                               \
    TGT void vec_dot_##t##_q8_K_tiled_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss,     \
                                           int nr) {                                                                \
        COLI_DISPATCH_NR(nr, t##_nr, n, w, (const char *)a, as, s, ss, 1);                                          \
    }

IQ23_NR(iq2_xxs, 0.125f)
IQ23_NR(iq2_xs, 0.125f)
IQ23_NR(iq2_s, 0.125f)
IQ23_NR(iq3_xxs, 0.25f)
IQ23_NR(iq3_s, 1.0f)

#else
typedef int coli_quant_iq23_avx2_unused;
#endif
