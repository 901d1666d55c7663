/* quant_iq14_avx512.c — AVX-512 VNNI kernels for IQ1_S, IQ1_M, IQ4_NL,
 * IQ4_XS and MXFP4 batches: 16 weight rows at once, one per 32-bit lane, so
 * that a block's weights are decoded once for every activation row of the
 * call and each 4-element step is one dpbusd.
 *
 * The bits are those of the AVX2 kernels they stand for (quant_iq14_avx2.c):
 * each lane ends on its row's exact integer (the codes biased by +128 to be
 * dpbusd's unsigned operand, 128 * sum(activation) subtracted again), then
 * the same float steps:
 *   repacked (IQ4_NL, MXFP4):  per block acc = fma(float(isum), dw * dy, acc);
 *   tiled (IQ1_S, IQ1_M, IQ4_XS): per super-block isum = sum over sub-blocks of
 *     scale * (codes . q8), acc = fma(float(isum) * d0, dy, acc). */
#include "quant_iq14.h"

#ifdef COLI_X86
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "iq_grids.h"

#define ISA "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(ISA)))
#define INL static inline __attribute__((always_inline, target(ISA)))

#define PASS_ROWS 64 /* activation rows per pass over a 16-row weight tile */

/* q[k], lane j: 32-bit word k of the 16 bytes at b + j * wst (a 16 x 4 transpose) */
INL void tr16x4(const char *b, size_t wst, __m512i q[4]) {
    __m512i A[4];
    for (int t = 0; t < 4; t++) { /* 128-bit lane g of A[t]: the 16 bytes of row 4g + t */
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b + (size_t)t * wst)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + (size_t)(t + 4) * wst)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + (size_t)(t + 8) * wst)), 2);
        A[t] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + (size_t)(t + 12) * wst)), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(A[0], A[1]), t1 = _mm512_unpackhi_epi32(A[0], A[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(A[2], A[3]), t3 = _mm512_unpackhi_epi32(A[2], A[3]);
    q[0] = _mm512_unpacklo_epi64(t0, t2);
    q[1] = _mm512_unpackhi_epi64(t0, t2);
    q[2] = _mm512_unpacklo_epi64(t1, t3);
    q[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* a 16-entry signed codebook + 128, in every 128-bit lane */
INL __m512i biased_lut(const int8_t *kv) {
    return _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kv)), _mm512_set1_epi8((char)0x80));
}

/* 4-bit blocks of 16 rows -> 8 vectors of biased codes: c[k] elements 4k..4k+3, c[4 + k] elements 16 + 4k.. */
INL void nl_codes16(const char *qs, size_t wst, __m512i lut, __m512i c[8]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i q[4];
    tr16x4(qs, wst, q);
    for (int k = 0; k < 4; k++) {
        c[k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(q[k], m4));
        c[4 + k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(q[k], 4), m4));
    }
}

/* sum(c[k] * y[k]) over the 8 dwords of a 32-element run, lanes = weight rows */
INL __m512i dot32(const __m512i *c, const int8_t *y) {
    int32_t yd[8];
    memcpy(yd, y, 32);
    __m512i s = _mm512_setzero_si512();
    for (int k = 0; k < 8; k++) s = _mm512_dpbusd_epi32(s, c[k], _mm512_set1_epi32(yd[k]));
    return s;
}

INL int sum32_i8(const int8_t *y) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)y);
    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* ---- IQ4_NL / MXFP4, repacked ------------------------------------------------------------- */

enum { NL_IQ4 = 0, NL_MXFP4 = 1 };

/* the 16 rows' 32-bit words at byte offset off of their block (b: row 0's block) */
INL __m512i words16(const char *b, size_t wst, int off) {
    const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)wst));
    return _mm512_i32gather_epi32(vidx, (const void *)(b + off), 1);
}

/* the fp16 at the start of 16 rows' blocks, as floats */
INL __m512 halves16(const char *b, size_t wst) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words16(b, wst, 0)));
}

INL __m512 nl_scales16(const char *b, size_t wst, const int kind) {
    if (kind == NL_IQ4) return halves16(b, wst);
    /* E8M0 -> 2^(e - 128): (e - 1) << 23, the denormals 2^-128, 2^-127 for e < 2 */
    const __m512i e = _mm512_and_si512(words16(b, wst, 0), _mm512_set1_epi32(0xff));
    const __m512i norm = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i den = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), norm, den));
}

INL void nl_16w_avx512(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                       const int kind) {
    const int nb = n / QK8_0;
    const size_t bsz = kind == NL_IQ4 ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
    const size_t qoff = kind == NL_IQ4 ? offsetof(block_iq4_nl, qs) : offsetof(block_mxfp4, qs);
    const __m512i lut = biased_lut(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4);
    __m512 acc[PASS_ROWS];
    for (int r0 = 0; r0 < nr; r0 += PASS_ROWS) {
        const int rn = nr - r0 < PASS_ROWS ? nr - r0 : PASS_ROWS;
        for (int r = 0; r < rn; r++) acc[r] = _mm512_setzero_ps();
        for (int ib = 0; ib < nb; ib++) {
            const char *b = w + (size_t)ib * bsz;
            if (r0 == 0)
                for (int j = 0; j < 16; j++) _mm_prefetch(b + (size_t)j * wst + 4 * bsz, _MM_HINT_T0);
            const __m512 dw = nl_scales16(b, wst, kind);
            __m512i c[8];
            nl_codes16(b + qoff, wst, lut, c);
            for (int r = 0; r < rn; r++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)(r0 + r) * as) + ib;
                const __m512i isum = _mm512_sub_epi32(dot32(c, y->qs), _mm512_set1_epi32(128 * sum32_i8(y->qs)));
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(y->d))),
                                         acc[r]);
            }
        }
        for (int r = 0; r < rn; r++) _mm512_storeu_ps(s + (size_t)(r0 + r) * ss, acc[r]);
    }
}

TGT void vec_dot_iq4_nl_q8_0_repacked_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                                 size_t ss, int nr) {
    nl_16w_avx512(n, w, wst, a, as, s, ss, nr, NL_IQ4);
}
TGT void vec_dot_mxfp4_q8_0_repacked_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                                size_t ss, int nr) {
    nl_16w_avx512(n, w, wst, a, as, s, ss, nr, NL_MXFP4);
}

/* ---- one-row arithmetic (and tinyBLAS), two weight rows a zmm ------------------------------- */

/* ggml's one-row kernels keep 8 int32 lanes per row (elements 4k..4k+3 of
 * each block of 32) and accumulate them in 8 float lanes: here a zmm holds
 * weight row A's 8 lanes in its low half and row B's in its high half, the
 * activation broadcast to both. Lanes are formed by dpbusd on the codes + 128,
 * from a start of -128 * (the lane's 4 activation bytes) (corr8): exact. */

/* -128 * sum of each 4 activation bytes of a 32-byte run, 8 lanes */
INL __m256i corr8(const int8_t *y) {
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80),
                                                _mm256_loadu_si256((const __m256i *)y)));
}

/* biased codes of the 16 nibble bytes of rows A (low half) and B (high half):
 * [A low nibbles, A high, B low, B high], as the 32 activation bytes run */
INL __m512i nl_codes2(const uint8_t *qa, const uint8_t *qb, __m512i lut) {
    const __m128i a = _mm_loadu_si128((const __m128i *)qa), b = _mm_loadu_si128((const __m128i *)qb);
    __m512i v = _mm512_inserti32x4(_mm512_castsi128_si512(a), a, 1);
    v = _mm512_inserti32x4(_mm512_inserti32x4(v, b, 2), b, 3);
    v = _mm512_mask_srli_epi16(v, 0xff00ff00, v, 4);
    return _mm512_shuffle_epi8(lut, _mm512_and_si512(v, _mm512_set1_epi8(0x0f)));
}

INL __m512i bcast32(const int8_t *y) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y)); }
INL __m512i bcast8i(__m256i v) { return _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1); }

/* hsum_float_8 of each half */
INL void hsum8x2(__m512 v, float *a, float *b) {
    for (int h = 0; h < 2; h++) {
        const __m256 x = _mm512_extractf32x8_ps(v, h);
        __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
        r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        r = _mm_add_ss(r, _mm_movehdup_ps(r));
        *(h ? b : a) = _mm_cvtss_f32(r);
    }
}

INL int hsum_i32_8x(__m256i a) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

#define NR2 4 /* activation rows per pass, accumulators in registers */

/* IQ4_NL / MXFP4 against Q8_0 for 16 weight rows: mode 0 ggml_vec_dot (even
 * and odd blocks in two accumulators, hsum of their sum, an odd last block as
 * sumf = fma(float(isum), d, sumf)), mode 1 tinyBLAS (one accumulator, hsum). */
INL void nl_rows2(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int kind,
                  const int mode, const int nr) {
    const size_t bsz = kind == NL_IQ4 ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
    const size_t qoff = kind == NL_IQ4 ? offsetof(block_iq4_nl, qs) : offsetof(block_mxfp4, qs);
    const __m512i lut = biased_lut(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4);
    for (int p = 0; p < 16; p += 2) {
        const char *wa = w + (size_t)p * wst, *wb = wa + wst;
        __m512 acc1[NR2], acc2[NR2];
        for (int r = 0; r < nr; r++) acc1[r] = acc2[r] = _mm512_setzero_ps();
        const int npair = mode == 0 ? nb / 2 * 2 : nb;
        for (int ib = 0; ib < npair; ib++) {
            const __m512i c = nl_codes2((const uint8_t *)(wa + ib * bsz + qoff), (const uint8_t *)(wb + ib * bsz + qoff), lut);
            const float da = kind == NL_IQ4 ? _cvtsh_ss(*(const coli_half *)(wa + ib * bsz)) : coli_e8m0_to_fp32_half((uint8_t)wa[ib * bsz]);
            const float db = kind == NL_IQ4 ? _cvtsh_ss(*(const coli_half *)(wb + ib * bsz)) : coli_e8m0_to_fp32_half((uint8_t)wb[ib * bsz]);
            const __m512 dab = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(da), _mm512_set1_ps(db));
            for (int r = 0; r < nr; r++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
                const __m512i lanes = _mm512_dpbusd_epi32(bcast8i(corr8(y->qs)), c, bcast32(y->qs));
                const __m512 d = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(y->d)), dab);
                if (mode == 0 && (ib & 1)) acc2[r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc2[r]);
                else acc1[r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc1[r]);
            }
        }
        for (int r = 0; r < nr; r++) {
            float fa, fb;
            hsum8x2(mode == 0 ? _mm512_add_ps(acc1[r], acc2[r]) : acc1[r], &fa, &fb);
            if (mode == 0 && nb % 2) { /* the odd last block, ggml's scalar tail */
                const int ib = nb - 1;
                const __m512i c = nl_codes2((const uint8_t *)(wa + ib * bsz + qoff), (const uint8_t *)(wb + ib * bsz + qoff), lut);
                const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
                const __m512i lanes = _mm512_dpbusd_epi32(bcast8i(corr8(y->qs)), c, bcast32(y->qs));
                const float dy = _cvtsh_ss(y->d);
                const float da = kind == NL_IQ4 ? _cvtsh_ss(*(const coli_half *)(wa + ib * bsz)) : coli_e8m0_to_fp32_half((uint8_t)wa[ib * bsz]);
                const float db = kind == NL_IQ4 ? _cvtsh_ss(*(const coli_half *)(wb + ib * bsz)) : coli_e8m0_to_fp32_half((uint8_t)wb[ib * bsz]);
                fa = fmaf((float)hsum_i32_8x(_mm512_castsi512_si256(lanes)), dy * da, fa);
                fb = fmaf((float)hsum_i32_8x(_mm512_extracti64x4_epi64(lanes, 1)), dy * db, fb);
            }
            s[(size_t)r * ss + p] = fa;
            s[(size_t)r * ss + p + 1] = fb;
        }
    }
}

INL void nl_rows2_16w(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss, int nr,
                      const int kind, const int mode) {
    for (int r0 = 0; r0 < nr; r0 += NR2) {
        const int rn = nr - r0 < NR2 ? nr - r0 : NR2;
        const char *ar = (const char *)a + (size_t)r0 * as;
        float *sr = s + (size_t)r0 * ss;
        switch (rn) {
        case 1: nl_rows2(n / QK8_0, w, wst, ar, as, sr, ss, kind, mode, 1); break;
        case 2: nl_rows2(n / QK8_0, w, wst, ar, as, sr, ss, kind, mode, 2); break;
        case 3: nl_rows2(n / QK8_0, w, wst, ar, as, sr, ss, kind, mode, 3); break;
        default: nl_rows2(n / QK8_0, w, wst, ar, as, sr, ss, kind, mode, 4); break;
        }
    }
}

TGT void vec_dot_iq4_nl_q8_0_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                        size_t ss, int nr) {
    nl_rows2_16w(n, w, wst, a, as, s, ss, nr, NL_IQ4, 0);
}
TGT void vec_dot_mxfp4_q8_0_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                       size_t ss, int nr) {
    nl_rows2_16w(n, w, wst, a, as, s, ss, nr, NL_MXFP4, 0);
}
TGT void vec_dot_iq4_nl_q8_0_tinyblas_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                                 size_t ss, int nr) {
    nl_rows2_16w(n, w, wst, a, as, s, ss, nr, NL_IQ4, 1);
}

/* IQ4_XS one row (ggml_vec_dot_iq4_xs_q8_K) for 16 weight rows: per
 * super-block the lanes sum(ls * block lanes), acc = fma(dx * dy, float(lanes), acc). */
INL void iq4_xs_rows2(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int nr) {
    const __m512i lut = biased_lut(coli_kvalues_iq4nl);
    for (int p = 0; p < 16; p += 2) {
        const block_iq4_xs *xa = (const block_iq4_xs *)(w + (size_t)p * wst), *xb = (const block_iq4_xs *)(w + (size_t)(p + 1) * wst);
        __m512 acc[NR2];
        for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
        for (int i = 0; i < nb; i++) {
            __m512i sumi[NR2];
            for (int r = 0; r < nr; r++) sumi[r] = _mm512_setzero_si512();
            for (int ib = 0; ib < 8; ib++) {
                const __m512i c = nl_codes2(xa[i].qs + 16 * ib, xb[i].qs + 16 * ib, lut);
                const int la = (((xa[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((xa[i].scales_h >> 2 * ib) & 3) << 4)) - 32;
                const int lb = (((xb[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((xb[i].scales_h >> 2 * ib) & 3) << 4)) - 32;
                const __m512i ls = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(la), _mm512_set1_epi32(lb));
                for (int r = 0; r < nr; r++) {
                    const int8_t *q8 = ((const block_q8_K *)(a + (size_t)r * as) + i)->qs + 32 * ib;
                    const __m512i lanes = _mm512_dpbusd_epi32(bcast8i(corr8(q8)), c, bcast32(q8));
                    sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(lanes, ls));
                }
            }
            const __m512 dab = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(_cvtsh_ss(xa[i].d)), _mm512_set1_ps(_cvtsh_ss(xb[i].d)));
            for (int r = 0; r < nr; r++) {
                const float dy = ((const block_q8_K *)(a + (size_t)r * as) + i)->d;
                acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dab, _mm512_set1_ps(dy)), _mm512_cvtepi32_ps(sumi[r]), acc[r]);
            }
        }
        for (int r = 0; r < nr; r++) hsum8x2(acc[r], s + (size_t)r * ss + p, s + (size_t)r * ss + p + 1);
    }
}

TGT void vec_dot_iq4_xs_q8_K_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                        size_t ss, int nr) {
    for (int r0 = 0; r0 < nr; r0 += NR2) {
        const int rn = nr - r0 < NR2 ? nr - r0 : NR2;
        const char *ar = (const char *)a + (size_t)r0 * as;
        float *sr = s + (size_t)r0 * ss;
        switch (rn) {
        case 1: iq4_xs_rows2(n / QK_K, w, wst, ar, as, sr, ss, 1); break;
        case 2: iq4_xs_rows2(n / QK_K, w, wst, ar, as, sr, ss, 2); break;
        case 3: iq4_xs_rows2(n / QK_K, w, wst, ar, as, sr, ss, 3); break;
        default: iq4_xs_rows2(n / QK_K, w, wst, ar, as, sr, ss, 4); break;
        }
    }
}

/* ---- IQ4_XS, IQ1_S, IQ1_M: the tiled matmul ---------------------------------------------------- */

enum { T_IQ4_XS = 0, T_IQ1_S = 1, T_IQ1_M = 2 };

/* One super-block of 16 rows, decoded: c[64] the biased codes (dword k of
 * the 256 values; lanes = rows), ls[16] the sub-block scales (8 of 32 values,
 * or 16 of 16 for IQ1_M), d0 the tile's d. */
typedef struct {
    __m512i c[64];
    __m512i ls[16];
    __m512 d0;
} tile16;

INL void decode_iq4_xs(const char *b, size_t wst, tile16 *t) {
    const __m512i lut = biased_lut(coli_kvalues_iq4nl);
    coli_half h[16];
    int32_t ls[8][16];
    for (int j = 0; j < 16; j++) {
        const block_iq4_xs *x = (const block_iq4_xs *)(b + (size_t)j * wst);
        h[j] = x->d;
        for (int ib = 0; ib < 8; ib++)
            ls[ib][j] = (((x->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x->scales_h >> 2 * ib) & 3) << 4)) - 32;
    }
    t->d0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
    for (int ib = 0; ib < 8; ib++) {
        t->ls[ib] = _mm512_loadu_si512(ls[ib]);
        nl_codes16(b + offsetof(block_iq4_xs, qs) + 16 * ib, wst, lut, t->c + 8 * ib);
    }
}

/* biased ternary codes 128 + delta + 8 * g of one group of 8 values for 16
 * rows: idx the grid indices, bias the bytes 128 + delta (lanes = rows) ->
 * c[0] the first 4 values, c[1] the last 4 */
INL void tern16(__m512i idx, __m512i bias, __m512i c[2]) {
    const __m512i g0 = _mm512_i32gather_epi64(_mm512_castsi512_si256(idx), (const void *)coli_iq1s_grid, 8);
    const __m512i g1 = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(idx, 1), (const void *)coli_iq1s_grid, 8);
    const __m512i lo = _mm512_permutex2var_epi32(g0, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), g1);
    const __m512i hi = _mm512_permutex2var_epi32(g0, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), g1);
    const __m512i l2 = _mm512_add_epi8(lo, lo), h2 = _mm512_add_epi8(hi, hi);
    const __m512i l4 = _mm512_add_epi8(l2, l2), h4 = _mm512_add_epi8(h2, h2);
    c[0] = _mm512_add_epi8(_mm512_add_epi8(l4, l4), bias);
    c[1] = _mm512_add_epi8(_mm512_add_epi8(h4, h4), bias);
}


INL void decode_iq1_s(const char *b, size_t wst, tile16 *t) {
    t->d0 = _mm512_mul_ps(halves16(b, wst), _mm512_set1_ps(0.125f));
    const __m512i m7 = _mm512_set1_epi32(7), m8 = _mm512_set1_epi32(0xff);
    for (int ib = 0; ib < 8; ib++) {
        /* qh[ib] (offset 34 + 2ib) as the high half of the word at 32 + 2ib: in the block */
        const __m512i qh = _mm512_srli_epi32(words16(b, wst, 32 + 2 * ib), 16);
        const __m512i qs = words16(b, wst, 2 + 4 * ib);
        t->ls[ib] = _mm512_add_epi32(_mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 12), m7), 1), _mm512_set1_epi32(1));
        const __mmask16 neg = _mm512_test_epi32_mask(qh, _mm512_set1_epi32(0x8000));
        const __m512i bias = _mm512_mask_blend_epi32(neg, _mm512_set1_epi32(0x81818181), _mm512_set1_epi32(0x7f7f7f7f));
        for (int l = 0; l < 4; l++) {
            const __m512i idx = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(qs, 8 * l), m8),
                                                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 3 * l), m7), 8));
            tern16(idx, bias, t->c + 8 * ib + 2 * l);
        }
    }
}

INL void decode_iq1_m(const char *b, size_t wst, tile16 *t) {
    coli_half h[16];
    for (int j = 0; j < 16; j++) h[j] = coli_iq1m_scale((const block_iq1_m *)(b + (size_t)j * wst));
    t->d0 = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h)), _mm512_set1_ps(0.125f));
    const __m512i m7 = _mm512_set1_epi32(7), m8 = _mm512_set1_epi32(0xff);
    for (int ib = 0; ib < 8; ib++) {
        const __m512i qh = words16(b, wst, 32 + 2 * ib);           /* qh bytes 2ib, 2ib + 1 in the low half */
        const __m512i qs = words16(b, wst, 4 * ib);
        const __m512i sc = _mm512_srli_epi32(words16(b, wst, 46 + 2 * (ib / 2)), 16); /* scale word ib / 2 */
        const int sh = 6 * (ib % 2);
        for (int hf = 0; hf < 2; hf++)
            t->ls[2 * ib + hf] = _mm512_add_epi32(
                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(sc, sh + 3 * hf), m7), 1), _mm512_set1_epi32(1));
        for (int l = 0; l < 4; l++) {
            const __m512i nib = _mm512_srli_epi32(qh, 4 * l); /* group l's nibble in bits 0..3 */
            const __m512i idx = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(qs, 8 * l), m8),
                                                _mm512_slli_epi32(_mm512_and_si512(nib, m7), 8));
            const __mmask16 neg = _mm512_test_epi32_mask(nib, _mm512_set1_epi32(8));
            const __m512i bias = _mm512_mask_blend_epi32(neg, _mm512_set1_epi32(0x81818181), _mm512_set1_epi32(0x7f7f7f7f));
            tern16(idx, bias, t->c + 8 * ib + 2 * l);
        }
    }
}

INL void tiled_16w_avx512(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                          const int kind) {
    const int nb = n / QK_K;
    const size_t bsz = kind == T_IQ4_XS ? sizeof(block_iq4_xs) : kind == T_IQ1_S ? sizeof(block_iq1_s) : sizeof(block_iq1_m);
    __m512 acc[PASS_ROWS];
    tile16 t;
    for (int r0 = 0; r0 < nr; r0 += PASS_ROWS) {
        const int rn = nr - r0 < PASS_ROWS ? nr - r0 : PASS_ROWS;
        for (int r = 0; r < rn; r++) acc[r] = _mm512_setzero_ps();
        for (int i = 0; i < nb; i++) {
            const char *b = w + (size_t)i * bsz;
            if (kind == T_IQ4_XS) decode_iq4_xs(b, wst, &t);
            else if (kind == T_IQ1_S) decode_iq1_s(b, wst, &t);
            else decode_iq1_m(b, wst, &t);
            for (int r = 0; r < rn; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)(r0 + r) * as) + i;
                __m512i isum = _mm512_setzero_si512();
                if (kind == T_IQ1_M) {
                    for (int hf = 0; hf < 16; hf++) { /* sub-blocks of 16: 4 dwords each */
                        int32_t yd[4];
                        memcpy(yd, y->qs + 16 * hf, 16);
                        __m512i raw = _mm512_set1_epi32(-128 * y->bsums[hf]);
                        for (int k = 0; k < 4; k++) raw = _mm512_dpbusd_epi32(raw, t.c[4 * hf + k], _mm512_set1_epi32(yd[k]));
                        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(raw, t.ls[hf]));
                    }
                } else {
                    for (int ib = 0; ib < 8; ib++) {
                        const __m512i raw = _mm512_sub_epi32(dot32(t.c + 8 * ib, y->qs + 32 * ib),
                                                             _mm512_set1_epi32(128 * (y->bsums[2 * ib] + y->bsums[2 * ib + 1])));
                        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(raw, t.ls[ib]));
                    }
                }
                acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(isum), t.d0), _mm512_set1_ps(y->d), acc[r]);
            }
        }
        for (int r = 0; r < rn; r++) _mm512_storeu_ps(s + (size_t)(r0 + r) * ss, acc[r]);
    }
}

TGT void vec_dot_iq4_xs_q8_K_tiled_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                              size_t ss, int nr) {
    tiled_16w_avx512(n, w, wst, a, as, s, ss, nr, T_IQ4_XS);
}
TGT void vec_dot_iq1_s_q8_K_tiled_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                             size_t ss, int nr) {
    tiled_16w_avx512(n, w, wst, a, as, s, ss, nr, T_IQ1_S);
}
TGT void vec_dot_iq1_m_q8_K_tiled_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                             size_t ss, int nr) {
    tiled_16w_avx512(n, w, wst, a, as, s, ss, nr, T_IQ1_M);
}

#else
typedef int coli_quant_iq14_avx512_unused;
#endif
