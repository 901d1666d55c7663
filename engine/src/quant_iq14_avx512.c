/* quant_iq14_avx512.c — kernels for the AVX-512 table (F/BW/VL/DQ/VNNI):
 * the bits of the AVX2 kernels they stand for (quant_iq14_avx2.c), faster.
 *
 * Batches: 16 weight rows at once, one per 32-bit lane, so that a block's
 * weights are decoded once for every activation row of the call and each
 * 4-element step is one dpbusd. Each lane ends on its row's exact integer
 * (the codes biased by +128 to be dpbusd's unsigned operand, 128 * the
 * activation's sum subtracted again), then the same float steps:
 *   repacked (IQ4_NL, MXFP4):  per block acc = fma(float(isum), dw * dy, acc);
 *   tiled (IQ1_S, IQ1_M, IQ4_XS): per super-block isum = sum over sub-blocks of
 *     scale * (codes . q8), acc = fma(float(isum) * d0, dy, acc).
 * One row: ggml's AVX2 kernels as they compile with BMI2 (IQ1_S, IQ1_M: grid
 * indices and delta signs by pdep), and IQ4_NL / MXFP4's one-row and tinyBLAS
 * lanes by 256-bit dpbusd (no 16-bit intermediate: the same exact integers). */
#include "quant_iq14.h"

#ifdef COLI_X86
#include <immintrin.h>

#include "prefetch.h"
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "iq_grids.h"

#define ISA "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(ISA)))
#define INL static inline __attribute__((always_inline, target(ISA)))

#define PASS_ROWS 64 /* activation rows per pass over a 16-row weight tile */

#include "tile16_avx512.h"
#include "transpose_avx512.h"

/* a 16-entry signed codebook + 128, in every 128-bit lane */
INL __m512i biased_lut(const int8_t *kv) {
    return _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kv)), _mm512_set1_epi8((char)0x80));
}

/* 4-bit blocks of 16 rows -> 8 vectors of biased codes: c[k] elements 4k..4k+3, c[4 + k] elements 16 + 4k.. */
INL void nl_codes16(const char *qs, size_t wst, __m512i lut, __m512i c[8]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i q[4];
    transpose16x4(qs, wst, q);
    for (int k = 0; k < 4; k++) {
        c[k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(q[k], m4));
        c[4 + k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(q[k], 4), m4));
    }
}

/* sum(c[k] * y[k]) over the 8 dwords of a 32-element run, lanes = weight rows
 * (each activation dword broadcast from memory: a load, not a shuffle) */
INL __m512i dot32(const __m512i *c, const int8_t *y) {
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512(); /* two chains: dpbusd latency */
    for (int k = 0; k < 4; k++) {
        int32_t y0, y1;
        memcpy(&y0, y + 4 * k, 4);
        memcpy(&y1, y + 16 + 4 * k, 4);
        s0 = _mm512_dpbusd_epi32(s0, c[k], _mm512_set1_epi32(y0));
        s1 = _mm512_dpbusd_epi32(s1, c[4 + k], _mm512_set1_epi32(y1));
    }
    return _mm512_add_epi32(s0, s1);
}

INL int sum32_i8(const int8_t *y) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)y);
    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

INL int hsum_i32_8x(__m256i a) {
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
    return _mm_cvtsi128_si32(t);
}

INL float hsum8f(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* ---- IQ4_NL / MXFP4, repacked ------------------------------------------------------------- */

enum { NL_IQ4 = 0, NL_MXFP4 = 1 };

/* the 16 rows' 32-bit words at byte offset off of their block (b: row 0's block) */
INL __m512i words16(const char *b, size_t wst, int off) {
    const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)wst));
    return _mm512_i32gather_epi32(vidx, (const void *)(b + off), 1);
}

/* the fp16 at the start of 16 rows' blocks, as floats (scalar loads: a
 * gather of 16 dwords costs more here) */
INL __m512 halves16(const char *b, size_t wst) {
    coli_half h[16];
    for (int j = 0; j < 16; j++) memcpy(&h[j], b + (size_t)j * wst, 2);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
}

/* E8M0 exponents (one a lane) -> 2^(e - 128): (e - 1) << 23, the denormals 2^-128, 2^-127 for e < 2 */
INL __m512 e8m0_half16(__m512i e) {
    const __m512i norm = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i den = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), norm, den));
}

INL __m512 nl_scales16(const char *b, size_t wst, const int kind) {
    if (kind == NL_IQ4) return halves16(b, wst);
    uint8_t eb[16];
    for (int j = 0; j < 16; j++) eb[j] = (uint8_t)b[(size_t)j * wst];
    return e8m0_half16(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)eb)));
}

/* block ib of a tile coli_repack_b32_r16 made: its 16 scales and its biased codes, as nl_codes16's */
INL __m512 nl_r16_block(const char *w, int ib, __m512i lut, __m512i c[8], const int kind) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const int sb = kind == NL_IQ4 ? 2 : 1;
    for (int k = 0; k < 4; k++) {
        const __m512i q = _mm512_loadu_si512(COLI_R16B_Q(w, 16, sb, ib, k));
        c[k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(q, m4));
        c[4 + k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
    }
    if (kind == NL_IQ4) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)COLI_R16B_D(w, 16, 2, ib)));
    return e8m0_half16(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)COLI_R16B_D(w, 16, 1, ib))));
}

/* up to COLI_MAX_NR activation rows, accumulators in registers. Row 4g + t
 * of the 16 is addressed as grp[g] + t * wst (four group pointers, three
 * multiples of wst): with 16 row pointers the compiler spills them. */
INL void nl_16w_few(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int kind,
                    const int r16, const int nr) {
    const size_t bsz = kind == NL_IQ4 ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
    const size_t qoff = kind == NL_IQ4 ? offsetof(block_iq4_nl, qs) : offsetof(block_mxfp4, qs);
    const __m512i lut = biased_lut(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const size_t w1 = wst, w2 = 2 * wst, w3 = 3 * wst;
    const char *g0 = w, *g1 = w + 4 * wst, *g2 = w + 8 * wst, *g3 = w + 12 * wst;
    __m512 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    for (int ib = 0; r16 && ib < nb; ib++) { /* a tile: one stream of loads */
        __m512i c[8];
        const __m512 dw = nl_r16_block(w, ib, lut, c, kind);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
            const __m512i isum = _mm512_sub_epi32(dot32(c, y->qs), _mm512_set1_epi32(128 * sum32_i8(y->qs)));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(y->d))), acc[r]);
        }
    }
    for (int ib = 0; !r16 && ib < nb; ib++, g0 += bsz, g1 += bsz, g2 += bsz, g3 += bsz) {
        const char *grp[4] = {g0, g1, g2, g3};
        const size_t off[4] = {0, w1, w2, w3};
        __m512 dw;
        if (kind == NL_IQ4) { /* the 16 fp16 inserted in registers (a store / reload would not forward) */
            __m128i h[2];
            for (int hh = 0; hh < 2; hh++) {
                __m128i v = _mm_setzero_si128();
                v = _mm_insert_epi16(v, *(const uint16_t *)(grp[2 * hh] + off[0]), 0);
                v = _mm_insert_epi16(v, *(const uint16_t *)(grp[2 * hh] + off[1]), 1);
                v = _mm_insert_epi16(v, *(const uint16_t *)(grp[2 * hh] + off[2]), 2);
                v = _mm_insert_epi16(v, *(const uint16_t *)(grp[2 * hh] + off[3]), 3);
                v = _mm_insert_epi16(v, *(const uint16_t *)(grp[2 * hh + 1] + off[0]), 4);
                v = _mm_insert_epi16(v, *(const uint16_t *)(grp[2 * hh + 1] + off[1]), 5);
                v = _mm_insert_epi16(v, *(const uint16_t *)(grp[2 * hh + 1] + off[2]), 6);
                h[hh] = _mm_insert_epi16(v, *(const uint16_t *)(grp[2 * hh + 1] + off[3]), 7);
            }
            dw = _mm512_cvtph_ps(_mm256_set_m128i(h[1], h[0]));
        } else {
            uint8_t eb[16];
            for (int g = 0; g < 4; g++)
                for (int t = 0; t < 4; t++) eb[4 * g + t] = (uint8_t)grp[g][off[t]];
            dw = e8m0_half16(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)eb)));
        }
        __m512i A[4];
        for (int t = 0; t < 4; t++) { /* 128-bit lane g of A[t]: row 4g + t */
            __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(g0 + off[t] + qoff)));
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(g1 + off[t] + qoff)), 1);
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(g2 + off[t] + qoff)), 2);
            A[t] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(g3 + off[t] + qoff)), 3);
        }
        const __m512i t0 = _mm512_unpacklo_epi32(A[0], A[1]), t1 = _mm512_unpackhi_epi32(A[0], A[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(A[2], A[3]), t3 = _mm512_unpackhi_epi32(A[2], A[3]);
        const __m512i q[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                              _mm512_unpackhi_epi64(t1, t3)};
        __m512i c[8];
        for (int k = 0; k < 4; k++) {
            c[k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(q[k], m4));
            c[4 + k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(q[k], 4), m4));
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
            const __m512i isum = _mm512_sub_epi32(dot32(c, y->qs), _mm512_set1_epi32(128 * sum32_i8(y->qs)));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(y->d))), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) _mm512_storeu_ps(s + (size_t)r * ss, acc[r]);
}

/* r16: w is a tile coli_repack_b32_r16 made */
INL void nl_16w_avx512(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                       const int kind, const int r16) {
    const int nb = n / QK8_0;
    if (nr <= COLI_MAX_NR) {
        COLI_DISPATCH_NR(nr, nl_16w_few, nb, w, wst, a, as, s, ss, kind, r16);
        return;
    }
    const size_t bsz = kind == NL_IQ4 ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
    const size_t qoff = kind == NL_IQ4 ? offsetof(block_iq4_nl, qs) : offsetof(block_mxfp4, qs);
    const __m512i lut = biased_lut(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4);
    __m512 acc[PASS_ROWS];
    for (int r0 = 0; r0 < nr; r0 += PASS_ROWS) {
        const int rn = nr - r0 < PASS_ROWS ? nr - r0 : PASS_ROWS;
        for (int r = 0; r < rn; r++) acc[r] = _mm512_setzero_ps();
        for (int ib = 0; ib < nb; ib++) {
            const char *b = w + (size_t)ib * bsz;
            __m512i c[8];
            __m512 dw;
            if (r16) {
                dw = nl_r16_block(w, ib, lut, c, kind);
            } else {
                dw = nl_scales16(b, wst, kind);
                nl_codes16(b + qoff, wst, lut, c);
            }
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
    nl_16w_avx512(n, w, wst, a, as, s, ss, nr, NL_IQ4, 0);
}
TGT void vec_dot_iq4_nl_q8_0_r16_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                            size_t ss, int nr) {
    nl_16w_avx512(n, w, wst, a, as, s, ss, nr, NL_IQ4, 1);
}
TGT void vec_dot_mxfp4_q8_0_repacked_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                                size_t ss, int nr) {
    nl_16w_avx512(n, w, wst, a, as, s, ss, nr, NL_MXFP4, 0);
}
TGT void vec_dot_mxfp4_q8_0_r16_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                           size_t ss, int nr) {
    nl_16w_avx512(n, w, wst, a, as, s, ss, nr, NL_MXFP4, 1);
}

/* ---- IQ4_NL / MXFP4 as stored: ggml_vec_dot and tinyBLAS, per weight row --------------------- */

/* The AVX2 kernel's arithmetic (quant_iq14_avx2.c nl_nr) with its 8 lanes by
 * one 256-bit dpbusd of |w| and sign(y, w) (exact: no 16-bit step). */
INL __m256i lanes_vnni(__m256i w, __m256i y) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
}

INL __m256i nl_bytes256(const uint8_t *qs, __m128i lut) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4)),
                            _mm_shuffle_epi8(lut, _mm_and_si128(q, m4)));
}

/* tinyblas 0: ggml_vec_dot (even / odd accumulators, scalar odd tail); 1: tinyBLAS */
INL void nl_vnni_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int kind, const int tinyblas,
                    const int nr) {
    const int nb = n / QK8_0;
    const size_t bsz = kind == NL_IQ4 ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
    const size_t qoff = kind == NL_IQ4 ? offsetof(block_iq4_nl, qs) : offsetof(block_mxfp4, qs);
    const __m128i lut = _mm_loadu_si128((const __m128i *)(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4));
    const char *wb = w;
    __m256 acc1[COLI_MAX_NR], acc2[COLI_MAX_NR];
    float accs[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) {
        acc1[r] = acc2[r] = _mm256_setzero_ps();
        accs[r] = 0.0f;
    }
#define NL_D(ib) (kind == NL_IQ4 ? _cvtsh_ss(*(const coli_half *)(wb + (size_t)(ib) * bsz)) \
                                 : coli_e8m0_to_fp32_half((uint8_t)wb[(size_t)(ib) * bsz]))
    int ib = 0;
    if (!tinyblas) {
        for (; ib + 1 < nb; ib += 2) {
            const __m256i w1 = nl_bytes256((const uint8_t *)(wb + (size_t)ib * bsz + qoff), lut);
            const __m256i w2 = nl_bytes256((const uint8_t *)(wb + (size_t)(ib + 1) * bsz + qoff), lut);
            const float dx1 = NL_D(ib), dx2 = NL_D(ib + 1);
            for (int r = 0; r < nr; r++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib;
                const __m256i p1 = lanes_vnni(w1, _mm256_loadu_si256((const __m256i *)y[0].qs));
                const __m256i p2 = lanes_vnni(w2, _mm256_loadu_si256((const __m256i *)y[1].qs));
                acc1[r] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(y[0].d) * dx1), _mm256_cvtepi32_ps(p1), acc1[r]);
                acc2[r] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(y[1].d) * dx2), _mm256_cvtepi32_ps(p2), acc2[r]);
            }
        }
        for (int r = 0; r < nr; r++) accs[r] = hsum8f(_mm256_add_ps(acc1[r], acc2[r]));
    }
    for (; ib < nb; ib++) {
        const __m256i wv = nl_bytes256((const uint8_t *)(wb + (size_t)ib * bsz + qoff), lut);
        const float dx = NL_D(ib);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib;
            const __m256i p = lanes_vnni(wv, _mm256_loadu_si256((const __m256i *)y->qs));
            if (tinyblas)
                acc1[r] = _mm256_fmadd_ps(_mm256_set1_ps(dx * _cvtsh_ss(y->d)), _mm256_cvtepi32_ps(p), acc1[r]);
            else
                accs[r] = fmaf((float)hsum_i32_8x(p), _cvtsh_ss(y->d) * dx, accs[r]);
        }
    }
#undef NL_D
    for (int r = 0; r < nr; r++) s[r * ss] = tinyblas ? hsum8f(acc1[r]) : accs[r];
}

TGT void vec_dot_iq4_nl_q8_0_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, nl_vnni_nr, n, w, (const char *)a, as, s, ss, NL_IQ4, 0);
}
TGT void vec_dot_mxfp4_q8_0_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, nl_vnni_nr, n, w, (const char *)a, as, s, ss, NL_MXFP4, 0);
}
TGT void vec_dot_iq4_nl_q8_0_tinyblas_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, nl_vnni_nr, n, w, (const char *)a, as, s, ss, NL_IQ4, 1);
}

/* ---- IQ4_NL / MXFP4 as stored, 16 weight rows at once ------------------------------------------ */

/* The per-row arithmetic of nl_vnni_nr (ggml_vec_dot's even / odd block
 * chains, or tinyBLAS's 8 lanes) with two weight rows per zmm: lanes 0..7
 * hold row 2p's 8 lane sums, lanes 8..15 row 2p + 1's, each the exact
 * integer of its 4 elements (biased codes by dpbusd, started from -128 * the
 * activation's 4-byte sums), then the same float steps lane by lane. */

/* the biased codes of one block of rows j (q0) and j + 1 (q1): 128-bit lanes
 * lut(q0 & 15), lut(q0 >> 4), lut(q1 & 15), lut(q1 >> 4) */
INL __m512i nl_pair_codes(const char *q0, const char *q1, __m512i lut) {
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)q0));
    v = _mm512_mask_broadcast_i32x4(v, 0xff00, _mm_loadu_si128((const __m128i *)q1));
    v = _mm512_mask_srli_epi16(v, 0xff00ff00u, v, 4);
    return _mm512_shuffle_epi8(lut, _mm512_and_si512(v, _mm512_set1_epi8(0x0f)));
}

/* [s[2p] x 8, s[2p + 1] x 8] */
INL __m512 pair_bcast(__m512 s16, int p) {
    return _mm512_permutexvar_ps(_mm512_set_epi32(2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
                                                  2 * p + 1, 2 * p + 1, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p),
                                 s16);
}

/* -128 * the sums of the 4-byte groups of an activation block, in both 256-bit halves */
INL __m512i neg_bias(__m512i y) {
    return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), y));
}

/* ggml_vec_dot for 16 weight rows, one activation row at a time */
INL void nl_vd_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr, const int kind) {
    const int nb = n / QK8_0;
    const size_t bsz = kind == NL_IQ4 ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
    const size_t qoff = kind == NL_IQ4 ? offsetof(block_iq4_nl, qs) : offsetof(block_mxfp4, qs);
    const __m512i lut = biased_lut(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4);
    for (int r = 0; r < nr; r++) {
        const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as);
        __m512 acc[2][8];
        for (int p = 0; p < 8; p++) acc[0][p] = acc[1][p] = _mm512_setzero_ps();
        for (int ib = 0; ib + 1 < nb; ib += 2)
            for (int e = 0; e < 2; e++) { /* e: the even / odd chain (unrolled: acc stays in registers) */
                const char *b = w + (size_t)(ib + e) * bsz;
                const __m512 dx = nl_scales16(b, wst, kind);
                const __m512i yv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y[ib + e].qs));
                const __m512i nc = neg_bias(yv);
                const __m512 dy = _mm512_set1_ps(_cvtsh_ss(y[ib + e].d));
                for (int p = 0; p < 8; p++) {
                    const __m512i c = nl_pair_codes(b + 2 * p * wst + qoff, b + (2 * p + 1) * wst + qoff, lut);
                    const __m512i isum = _mm512_dpbusd_epi32(nc, c, yv);
                    acc[e][p] = _mm512_fmadd_ps(_mm512_mul_ps(dy, pair_bcast(dx, p)), _mm512_cvtepi32_ps(isum), acc[e][p]);
                }
            }
        float sums[16];
        for (int p = 0; p < 8; p++) {
            const __m512 t = _mm512_add_ps(acc[0][p], acc[1][p]);
            sums[2 * p] = hsum8f(_mm512_castps512_ps256(t));
            sums[2 * p + 1] = hsum8f(_mm512_extractf32x8_ps(t, 1));
        }
        if (nb & 1) { /* the odd last block: one integer a row, the scalar fma */
            const int ib = nb - 1;
            const char *b = w + (size_t)ib * bsz;
            float dx[16];
            _mm512_storeu_ps(dx, nl_scales16(b, wst, kind));
            const __m512i yv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y[ib].qs));
            const __m512i nc = neg_bias(yv);
            const float dy = _cvtsh_ss(y[ib].d);
            for (int p = 0; p < 8; p++) {
                const __m512i isum = _mm512_dpbusd_epi32(nc, nl_pair_codes(b + 2 * p * wst + qoff, b + (2 * p + 1) * wst + qoff, lut), yv);
                const int i0 = hsum_i32_8x(_mm512_castsi512_si256(isum)), i1 = hsum_i32_8x(_mm512_extracti64x4_epi64(isum, 1));
                sums[2 * p] = fmaf((float)i0, dy * dx[2 * p], sums[2 * p]);
                sums[2 * p + 1] = fmaf((float)i1, dy * dx[2 * p + 1], sums[2 * p + 1]);
            }
        }
        memcpy(s + (size_t)r * ss, sums, sizeof sums);
    }
}

/* tinyBLAS for 16 weight rows: 8 rows (4 zmm of codes) x R activation rows a pass */
INL void nl_tb_8w(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int R) {
    const size_t bsz = sizeof(block_iq4_nl), qoff = offsetof(block_iq4_nl, qs);
    const __m512i lut = biased_lut(coli_kvalues_iq4nl);
    __m512 acc[4][COLI_MAX_NR];
    for (int p = 0; p < 4; p++)
        for (int r = 0; r < R; r++) acc[p][r] = _mm512_setzero_ps();
    for (int ib = 0; ib < nb; ib++) {
        const char *b = w + (size_t)ib * bsz;
        coli_half h[8];
        for (int j = 0; j < 8; j++) memcpy(&h[j], b + (size_t)j * wst, 2);
        const __m512 dx = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
        __m512i c[4];
        __m512 dw[4];
        for (int p = 0; p < 4; p++) {
            c[p] = nl_pair_codes(b + 2 * p * wst + qoff, b + (2 * p + 1) * wst + qoff, lut);
            dw[p] = pair_bcast(dx, p);
        }
        for (int r = 0; r < R; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
            const __m512i yv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y->qs));
            const __m512i nc = neg_bias(yv);
            const __m512 dy = _mm512_set1_ps(_cvtsh_ss(y->d));
            for (int p = 0; p < 4; p++)
                acc[p][r] = _mm512_fmadd_ps(_mm512_mul_ps(dw[p], dy), _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(nc, c[p], yv)), acc[p][r]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int p = 0; p < 4; p++) {
            s[(size_t)r * ss + 2 * p] = hsum8f(_mm512_castps512_ps256(acc[p][r]));
            s[(size_t)r * ss + 2 * p + 1] = hsum8f(_mm512_extractf32x8_ps(acc[p][r], 1));
        }
}

TGT void vec_dot_iq4_nl_q8_0_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                        int nr) {
    nl_vd_16w(n, w, wst, a, as, s, ss, nr, NL_IQ4);
}
TGT void vec_dot_mxfp4_q8_0_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                       int nr) {
    nl_vd_16w(n, w, wst, a, as, s, ss, nr, NL_MXFP4);
}
TGT void vec_dot_iq4_nl_q8_0_tinyblas_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                                 size_t ss, int nr) {
    const int nb = n / QK8_0;
    for (int h = 0; h < 2; h++)
        for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
            const int rn = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
            COLI_DISPATCH_NR(rn, nl_tb_8w, nb, (const char *)w + (size_t)8 * h * wst, wst, (const char *)a + (size_t)r0 * as,
                             as, s + (size_t)r0 * ss + 8 * h, ss);
        }
}

/* ---- IQ4_XS one row (ggml_vec_dot_iq4_xs_q8_K), two sub-blocks a zmm ---------------------------- */

/* ggml's AVX2 arithmetic: lane k = sum over sub-blocks of (ls - 32) * (elements 4k..4k+3 of the
 * codebook bytes times the activation, |w| by sign(y, w) through maddubs, madd by the scale);
 * here lanes 0..7 of a zmm take sub-block 2j, lanes 8..15 sub-block 2j + 1, and the two halves
 * are added (exact integers) before the same float steps. */
INL void iq4_xs_nr512(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    const int nb = n / QK_K;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)coli_kvalues_iq4nl));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m256 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const block_iq4_xs *x = (const block_iq4_xs *)w + i;
        COLI_PREFETCH_W((const char *)x + 2048);
        COLI_PREFETCH_W((const char *)x + 2048 + 64);
        uint32_t sl;
        memcpy(&sl, x->scales_l, 4);
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                            _mm256_set1_epi32(0xf));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(x->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                            _mm256_set1_epi32(3));
        const __m256i ls = _mm256_and_si256(_mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32)),
                                            _mm256_set1_epi32(0xffff));
        const __m512i ls2 = _mm512_castsi256_si512(_mm256_or_si256(ls, _mm256_slli_epi32(ls, 16))); /* both words of dword ib */
        __m512i sum[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) sum[r] = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            const __m512i sc = _mm512_permutexvar_epi32(_mm512_set_epi32(2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1,
                                                                         2 * j + 1, 2 * j + 1, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j,
                                                                         2 * j, 2 * j), ls2);
            __m512i q = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(x->qs + 32 * j)));
            q = _mm512_mask_broadcast_i32x4(q, 0xff00, _mm_loadu_si128((const __m128i *)(x->qs + 32 * j + 16)));
            q = _mm512_mask_srli_epi16(q, 0xff00ff00u, q, 4);
            const __m512i c = _mm512_shuffle_epi8(lut, _mm512_and_si512(q, m4));
            const __m512i ac = _mm512_abs_epi8(c);
            const __mmask64 neg = _mm512_movepi8_mask(c);
            for (int r = 0; r < nr; r++) {
                const __m512i y = _mm512_loadu_si512((const void *)(((const block_q8_K *)(a + r * as) + i)->qs + 64 * j));
                const __m512i ys = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
                sum[r] = _mm512_add_epi32(sum[r], _mm512_madd_epi16(_mm512_maddubs_epi16(ac, ys), sc));
            }
        }
        const float dx = _cvtsh_ss(x->d);
        for (int r = 0; r < nr; r++) {
            const float dy = ((const block_q8_K *)(a + r * as) + i)->d;
            const __m256i l8 = _mm256_add_epi32(_mm512_castsi512_si256(sum[r]), _mm512_extracti64x4_epi64(sum[r], 1));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dy), _mm256_cvtepi32_ps(l8), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = hsum8f(acc[r]);
}

TGT void vec_dot_iq4_xs_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, iq4_xs_nr512, n, w, (const char *)a, as, s, ss);
}

/* ---- IQ4_XS, IQ1_S, IQ1_M: the tiled matmul ---------------------------------------------------- */

enum { T_IQ4_XS = 0, T_IQ1_S = 1, T_IQ1_M = 2 };

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
    __m512 acc[TILE16_PASS_ROWS];
    tile16 t;
    for (int r0 = 0; r0 < nr; r0 += TILE16_PASS_ROWS) {
        const int rn = nr - r0 < TILE16_PASS_ROWS ? nr - r0 : TILE16_PASS_ROWS;
        for (int r = 0; r < rn; r++) acc[r] = _mm512_setzero_ps();
        for (int i = 0; i < nb; i++) {
            const char *b = w + (size_t)i * bsz;
            if (kind == T_IQ4_XS) decode_iq4_xs(b, wst, &t);
            else if (kind == T_IQ1_S) decode_iq1_s(b, wst, &t);
            else decode_iq1_m(b, wst, &t);
            tile_all_rows(&t, a + (size_t)r0 * as, as, i, kind == T_IQ1_M ? 4 : 8, acc, rn);
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

/* ---- IQ1_S / IQ1_M one row (ggml_vec_dot_iq1_{s,m}_q8_K), two blocks of 32 a step ---------- */

/* The integer work of ggml's AVX2 kernel as it compiles with BMI2 (which
 * every AVX-512 CPU has): grid indices of two blocks by pdep, two blocks a step. */
#define BMI static inline __attribute__((always_inline, target(ISA ",bmi2")))

BMI __m256i grid4p(uint64_t packed) {
    return _mm256_set_epi64x((long long)coli_iq1s_grid[packed >> 48], (long long)coli_iq1s_grid[(packed >> 32) & 0xffff],
                             (long long)coli_iq1s_grid[(packed >> 16) & 0xffff], (long long)coli_iq1s_grid[packed & 0xffff]);
}

BMI __m256i mul_add_epi8(__m256i x, __m256i y) { return _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }

BMI void iq1_s_nr512(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    const int nb = n / QK_K;
    __m256 acc[COLI_MAX_NR];
    float acc1[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) {
        acc[r] = _mm256_setzero_ps();
        acc1[r] = 0.0f;
    }
    for (int i = 0; i < nb; i++) {
        const block_iq1_s *x = (const block_iq1_s *)w + i;
        /* sumi1 = sum over blocks of ls * delta * (its two bsums): each block's
         * ls * delta in both 16-bit halves of a 32-bit lane, madd against the
         * bsums, then the 8 lanes added (exact) */
        const __m128i qh8 = _mm_loadu_si128((const __m128i *)x->qh);
        const __m128i ls8 = _mm_add_epi16(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh8, 12), _mm_set1_epi16(7)), 1), _mm_set1_epi16(1));
        const __m128i neg8 = _mm_srai_epi16(qh8, 15);
        const __m128i lsd8 = _mm_sub_epi16(_mm_xor_si128(ls8, neg8), neg8);
        const __m256i lsd = _mm256_set_m128i(_mm_unpackhi_epi16(lsd8, lsd8), _mm_unpacklo_epi16(lsd8, lsd8));
        __m256i sumi[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) sumi[r] = _mm256_setzero_si256();
        const uint8_t *qs = x->qs;
        for (int ib = 0; ib < QK_K / 32; ib += 2, qs += 8) {
            uint32_t q0, q1;
            memcpy(&q0, qs, 4);
            memcpy(&q1, qs + 4, 4);
            const uint16_t qh0 = x->qh[ib], qh1 = x->qh[ib + 1];
            const __m256i g1 = grid4p(_pdep_u64(q0, 0x00ff00ff00ff00ffULL) | _pdep_u64(qh0, 0x0700070007000700ULL));
            const __m256i g2 = grid4p(_pdep_u64(q1, 0x00ff00ff00ff00ffULL) | _pdep_u64(qh1, 0x0700070007000700ULL));
            const __m256i sc1 = _mm256_set1_epi16((int16_t)(2 * ((qh0 >> 12) & 7) + 1));
            const __m256i sc2 = _mm256_set1_epi16((int16_t)(2 * ((qh1 >> 12) & 7) + 1));
            for (int r = 0; r < nr; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
                const __m256i y1 = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib));
                const __m256i y2 = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib + 32));
                const __m256i p1 = _mm256_madd_epi16(mul_add_epi8(g1, y1), sc1);
                const __m256i p2 = _mm256_madd_epi16(mul_add_epi8(g2, y2), sc2);
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(p1, p2));
            }
        }
        const float dx = _cvtsh_ss(x->d);
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
            const int sumi1 = hsum_i32_8x(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), lsd));
            const float d = y->d * dx;
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            acc1[r] = fmaf(d, (float)sumi1, acc1[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = hsum8f(acc[r]) + IQ1S_DELTA * acc1[r];
}

BMI void iq1_m_nr512(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    const int nb = n / QK_K;
    const __m256i mask = _mm256_set1_epi16(0x7), mone = _mm256_set1_epi16(1), mone8 = _mm256_set1_epi8(1);
    const __m256i mtwo8 = _mm256_set1_epi8(2);
    const __m256i scales_shift = _mm256_set_epi64x(9, 3, 6, 0); /* odd shifts to the upper 128 bits */
    __m256 acc1[COLI_MAX_NR], acc2[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc1[r] = acc2[r] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const block_iq1_m *x = (const block_iq1_m *)w + i;
        const uint8_t *qs = x->qs, *qh = x->qh;
        uint64_t sc64;
        memcpy(&sc64, x->scales, 8);
        __m256i scales = _mm256_srlv_epi64(_mm256_set1_epi64x((long long)sc64), scales_shift);
        scales = _mm256_add_epi16(_mm256_slli_epi16(_mm256_and_si256(scales, mask), 1), mone);
        __m256i idx1 = _mm256_set1_epi16(0x0100), idx2 = _mm256_add_epi8(idx1, _mm256_set1_epi8(8));
        __m256i sumi1[COLI_MAX_NR], sumi2[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) sumi1[r] = sumi2[r] = _mm256_setzero_si256();
        for (int ib = 0; ib < QK_K / 32; ib += 2, qs += 8, qh += 4) {
            uint32_t q0, q1, h32;
            uint16_t h0, h1;
            memcpy(&q0, qs, 4);
            memcpy(&q1, qs + 4, 4);
            memcpy(&h0, qh, 2);
            memcpy(&h1, qh + 2, 2);
            memcpy(&h32, qh, 4);
            const __m256i g1 = grid4p(_pdep_u64(q0, 0x00ff00ff00ff00ffULL) | _pdep_u64(h0 & 0x7777u, 0x0f000f000f000f00ULL));
            const __m256i g2 = grid4p(_pdep_u64(q1, 0x00ff00ff00ff00ffULL) | _pdep_u64(h1 & 0x7777u, 0x0f000f000f000f00ULL));
            /* delta signs: bytes 0x81 (negative) or 0x01 */
            const uint64_t dsign = _pdep_u64(h32 & 0x88888888u, 0xf0f0f0f0f0f0f0f0ULL);
            const __m256i dl1 = _mm256_or_si256(mone8, _mm256_cvtepi8_epi64(_mm_set1_epi32((int)dsign)));
            const __m256i dl2 = _mm256_or_si256(mone8, _mm256_cvtepi8_epi64(_mm_set1_epi32((int)(dsign >> 32))));
            const __m256i sc1 = _mm256_shuffle_epi8(scales, idx1), sc2 = _mm256_shuffle_epi8(scales, idx2);
            idx1 = _mm256_add_epi8(idx1, mtwo8);
            idx2 = _mm256_add_epi8(idx2, mtwo8);
            for (int r = 0; r < nr; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
                const __m256i y1 = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib));
                const __m256i y2 = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib + 32));
                const __m256i p1 = _mm256_madd_epi16(mul_add_epi8(g1, y1), sc1);
                const __m256i p2 = _mm256_madd_epi16(mul_add_epi8(g2, y2), sc2);
                const __m256i p3 = _mm256_madd_epi16(_mm256_maddubs_epi16(mone8, _mm256_sign_epi8(y1, dl1)), sc1);
                const __m256i p4 = _mm256_madd_epi16(_mm256_maddubs_epi16(mone8, _mm256_sign_epi8(y2, dl2)), sc2);
                sumi1[r] = _mm256_add_epi32(sumi1[r], _mm256_add_epi32(p1, p2));
                sumi2[r] = _mm256_add_epi32(sumi2[r], _mm256_add_epi32(p3, p4));
            }
        }
        const float dx = _cvtsh_ss(coli_iq1m_scale(x));
        for (int r = 0; r < nr; r++) {
            const __m256 d = _mm256_set1_ps(((const block_q8_K *)(a + r * as) + i)->d * dx);
            acc1[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi1[r]), acc1[r]);
            acc2[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi2[r]), acc2[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = fmaf(hsum8f(acc2[r]), IQ1M_DELTA, hsum8f(acc1[r]));
}

__attribute__((target(ISA ",bmi2"))) void vec_dot_iq1_s_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, iq1_s_nr512, n, w, (const char *)a, as, s, ss);
}
__attribute__((target(ISA ",bmi2"))) void vec_dot_iq1_m_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, iq1_m_nr512, n, w, (const char *)a, as, s, ss);
}

#else
typedef int coli_quant_iq14_avx512_unused;
#endif
