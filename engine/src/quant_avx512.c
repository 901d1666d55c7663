/* quant_avx512.c — AVX-512 (F/BW/VL/DQ/VNNI) kernels; types without a
 * 512-bit kernel use the AVX2 ones (quant.c builds the table).
 *
 * Same contract as quant_avx2.c: exact integer block sums, per-row operations
 * independent of how many rows a call tiles. Q8_0/Q4_0/Q5_0 take two blocks
 * per zmm with VNNI dpbusd (sign trick: |w| x sign(a, w)); the K-quants use
 * maddubs + dpwssd (VNNI int16 pairs) against the 6/8-bit scales. */
#include "quant.h"

#ifdef COLI_X86
#include <immintrin.h>
#include <string.h>

#define ISA "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(ISA)))
#define INL static inline __attribute__((always_inline, target(ISA)))

#define DISPATCH_NR(impl, ...)                        \
    switch (nr) {                                     \
    case 1: impl(__VA_ARGS__, 1); break;              \
    case 2: impl(__VA_ARGS__, 2); break;              \
    case 3: impl(__VA_ARGS__, 3); break;              \
    default: impl(__VA_ARGS__, 4); break;             \
    }

INL float h2f(coli_half h) { return _cvtsh_ss(h); }

/* two 32-byte halves -> one zmm */
INL __m512i load2x256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

INL __m512 set2_ps(float lo, float hi) {
    return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

/* ---- float rows ------------------------------------------------------------------- */

INL void f32_nr(int n, const float *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    __m512 acc[COLI_MAX_NR][2];
    for (int r = 0; r < nr; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 w0 = _mm512_loadu_ps(w + i), w1 = _mm512_loadu_ps(w + i + 16);
        for (int r = 0; r < nr; r++) {
            const float *x = (const float *)(a + r * as) + i;
            acc[r][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc[r][1]);
        }
    }
    for (; i < n; i += 16) {  /* tail: masked loads read nothing past n */
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 w0 = _mm512_maskz_loadu_ps(m, w + i);
        for (int r = 0; r < nr; r++)
            acc[r][0] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, (const float *)(a + r * as) + i), acc[r][0]);
    }
    for (int r = 0; r < nr; r++) s[r * ss] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
}

TGT void vec_dot_f32_f32_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    DISPATCH_NR(f32_nr, n, (const float *)w, (const char *)a, as, s, ss)
}

INL __m512 ld_f16(const coli_half *p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

INL void f16_nr(int n, const coli_half *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    __m512 acc[COLI_MAX_NR][2];
    for (int r = 0; r < nr; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 w0 = ld_f16(w + i, 0xffff), w1 = ld_f16(w + i + 16, 0xffff);
        for (int r = 0; r < nr; r++) {
            const coli_half *x = (const coli_half *)(a + r * as) + i;
            acc[r][0] = _mm512_fmadd_ps(w0, ld_f16(x, 0xffff), acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(w1, ld_f16(x + 16, 0xffff), acc[r][1]);
        }
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 w0 = ld_f16(w + i, m);
        for (int r = 0; r < nr; r++)
            acc[r][0] = _mm512_fmadd_ps(w0, ld_f16((const coli_half *)(a + r * as) + i, m), acc[r][0]);
    }
    for (int r = 0; r < nr; r++) s[r * ss] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
}

TGT void vec_dot_f16_f16_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    DISPATCH_NR(f16_nr, n, (const coli_half *)w, (const char *)a, as, s, ss)
}

/* BF16 with AVX512_BF16 dpbf16 (pairs of products), as ggml does; the odd
 * tail element is done in double like ggml's leftovers. */
#define ISA_BF16 ISA ",avx512bf16"
static inline __attribute__((always_inline, target(ISA_BF16))) void
bf16_nr(int n, const coli_bf16 *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    __m512 acc[COLI_MAX_NR][2];
    for (int r = 0; r < nr; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i w0 = _mm512_loadu_si512(w + i), w1 = _mm512_loadu_si512(w + i + 32);
        for (int r = 0; r < nr; r++) {
            const coli_bf16 *x = (const coli_bf16 *)(a + r * as) + i;
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)w0, (__m512bh)_mm512_loadu_si512(x));
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)w1, (__m512bh)_mm512_loadu_si512(x + 32));
        }
    }
    for (; i + 2 <= n; i += 32) {
        const int left = (n - i) & ~1;
        const __mmask32 m = left >= 32 ? 0xffffffffu : (__mmask32)((1u << left) - 1);
        const __m512i w0 = _mm512_maskz_loadu_epi16(m, w + i);
        for (int r = 0; r < nr; r++)
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)w0,
                                         (__m512bh)_mm512_maskz_loadu_epi16(m, (const coli_bf16 *)(a + r * as) + i));
        if (left < 32) { i += left; break; }
    }
    for (int r = 0; r < nr; r++) {
        const coli_bf16 *x = (const coli_bf16 *)(a + r * as);
        double sumf = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
        for (int j = i; j < n; j++) sumf += (double)(coli_bf16_to_fp32(w[j]) * coli_bf16_to_fp32(x[j]));
        s[r * ss] = (float)sumf;
    }
}

__attribute__((target(ISA_BF16))) void vec_dot_bf16_bf16_avx512(int n, const void *w, const void *a, size_t as,
                                                                 float *s, size_t ss, int nr) {
    DISPATCH_NR(bf16_nr, n, (const coli_bf16 *)w, (const char *)a, as, s, ss)
}

/* ---- Q8_0 / Q4_0 / Q5_0 with Q8_0 activations, two blocks per zmm --------------------- */

/* Signed weight bytes of blocks ib, ib+1 (ib+1 < nb), in element order. */
INL __m512i w2_q(const void *wb, int ib, const int kind, float *d0, float *d1) {
    if (kind == 0) {
        const block_q8_0 *x = (const block_q8_0 *)wb + ib;
        *d0 = h2f(x[0].d);
        *d1 = h2f(x[1].d);
        return load2x256(x[0].qs, x[1].qs);
    }
    /* nibbles: [b0 | b1] 16 bytes each -> lanes [b0 lo, b0 hi, b1 lo, b1 hi] */
    const uint8_t *q0, *q1;
    if (kind == 1) {
        const block_q4_0 *x = (const block_q4_0 *)wb + ib;
        *d0 = h2f(x[0].d); *d1 = h2f(x[1].d);
        q0 = x[0].qs; q1 = x[1].qs;
    } else {
        const block_q5_0 *x = (const block_q5_0 *)wb + ib;
        *d0 = h2f(x[0].d); *d1 = h2f(x[1].d);
        q0 = x[0].qs; q1 = x[1].qs;
    }
    const __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                              _mm_loadu_si128((const __m128i *)q1), 1);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1);  /* [b0,b1,b0>>4,b1>>4] */
    z = _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0F));
    if (kind == 1) return _mm512_sub_epi8(z, _mm512_set1_epi8(8));
    const block_q5_0 *x = (const block_q5_0 *)wb + ib;
    uint32_t h0, h1;
    memcpy(&h0, x[0].qh, 4);
    memcpy(&h1, x[1].qh, 4);
    const __mmask64 hb = (__mmask64)h0 | ((__mmask64)h1 << 32);
    /* q - 16: set the high nibble to 0xF where the 5th bit is clear */
    return _mm512_or_si512(z, _mm512_maskz_mov_epi8(~hb, _mm512_set1_epi8((char)0xF0)));
}

INL __m256i w1_q(const void *wb, int ib, const int kind, float *d0) {
    float d1;
    (void)d1;
    if (kind == 0) {
        const block_q8_0 *x = (const block_q8_0 *)wb + ib;
        *d0 = h2f(x->d);
        return _mm256_loadu_si256((const __m256i *)x->qs);
    }
    const uint8_t *q;
    uint32_t h = 0;
    if (kind == 1) {
        const block_q4_0 *x = (const block_q4_0 *)wb + ib;
        *d0 = h2f(x->d);
        q = x->qs;
    } else {
        const block_q5_0 *x = (const block_q5_0 *)wb + ib;
        *d0 = h2f(x->d);
        q = x->qs;
        memcpy(&h, x->qh, 4);
    }
    const __m128i t = _mm_loadu_si128((const __m128i *)q);
    __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    b = _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
    if (kind == 1) return _mm256_sub_epi8(b, _mm256_set1_epi8(8));
    return _mm256_or_si256(b, _mm256_maskz_mov_epi8(~(__mmask32)h, _mm256_set1_epi8((char)0xF0)));
}

INL void q8_0_family_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int kind,
                        const int nr) {
    const int nb = n / QK8_0;
    __m512 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    int ib = 0;
    /* 16 blocks at a time: their 16 weight and activation scales are gathered
     * and multiplied at once (the same dx * dy floats as one block at a time) */
    const int wsz = kind == 0 ? (int)sizeof(block_q8_0) : kind == 1 ? (int)sizeof(block_q4_0) : (int)sizeof(block_q5_0);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i gw = _mm512_mullo_epi32(lane, _mm512_set1_epi32(wsz));
    const __m512i ga = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)sizeof(block_q8_0)));
    for (; ib + 16 <= nb; ib += 16) {
        const char *wb = (const char *)w + (size_t)ib * wsz;
        const __m512 dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(gw, wb, 1)));
        __m512 dxy[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) {
            const char *ab = a + r * as + (size_t)ib * sizeof(block_q8_0);
            dxy[r] = _mm512_mul_ps(dx, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(ga, ab, 1))));
        }
        for (int k = 0; k < 8; k++) {
            float d0, d1;
            const __m512i wq = w2_q(w, ib + 2 * k, kind, &d0, &d1);
            const __m512i aw = _mm512_abs_epi8(wq);
            const __mmask64 neg = _mm512_movepi8_mask(wq);
            const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi32(2 * k), _mm256_set1_epi32(2 * k + 1), 1);
            for (int r = 0; r < nr; r++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib + 2 * k;
                __m512i yq = load2x256(y[0].qs, y[1].qs);
                yq = _mm512_mask_sub_epi8(yq, neg, _mm512_setzero_si512(), yq);
                const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, yq);
                acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(sel, dxy[r]), _mm512_cvtepi32_ps(p), acc[r]);
            }
        }
    }
    for (; ib + 2 <= nb; ib += 2) {
        float d0, d1;
        const __m512i wq = w2_q(w, ib, kind, &d0, &d1);
        const __m512i aw = _mm512_abs_epi8(wq);
        const __mmask64 neg = _mm512_movepi8_mask(wq);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib;
            __m512i yq = load2x256(y[0].qs, y[1].qs);
            yq = _mm512_mask_sub_epi8(yq, neg, _mm512_setzero_si512(), yq);
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, yq);
            const __m512 d = set2_ps(d0 * h2f(y[0].d), d1 * h2f(y[1].d));
            acc[r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc[r]);
        }
    }
    __m256 tail[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) tail[r] = _mm256_setzero_ps();
    if (ib < nb) {  /* odd block count */
        float d0;
        const __m256i wq = w1_q(w, ib, kind, &d0);
        const __m256i aw = _mm256_abs_epi8(wq);
        const __mmask32 neg = _mm256_movepi8_mask(wq);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib;
            __m256i yq = _mm256_loadu_si256((const __m256i *)y->qs);
            yq = _mm256_mask_sub_epi8(yq, neg, _mm256_setzero_si256(), yq);
            const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, yq);
            tail[r] = _mm256_mul_ps(_mm256_set1_ps(d0 * h2f(y->d)), _mm256_cvtepi32_ps(p));
        }
    }
    for (int r = 0; r < nr; r++)
        s[r * ss] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r], _mm512_zextps256_ps512(tail[r])));
}

TGT void vec_dot_q8_0_q8_0_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    DISPATCH_NR(q8_0_family_nr, n, w, (const char *)a, as, s, ss, 0)
}
TGT void vec_dot_q4_0_q8_0_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    DISPATCH_NR(q8_0_family_nr, n, w, (const char *)a, as, s, ss, 1)
}
TGT void vec_dot_q5_0_q8_0_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    DISPATCH_NR(q8_0_family_nr, n, w, (const char *)a, as, s, ss, 2)
}

/* ---- K-quants ---------------------------------------------------------------------- */

INL void k4_unpack(const uint8_t *packed, uint32_t utmp[4]) {
    const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    memcpy(utmp, packed, 12);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
}

/* int16 lanes 0..15 = v[i0], 16..31 = v[i1] (v: 8 or 16 int16 in the low lanes) */
INL __m512i bcast2_16(__m512i v, int i0, int i1) {
    const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi16((short)i0), _mm256_set1_epi16((short)i1), 1);
    return _mm512_permutexvar_epi16(idx, v);
}

/* 0x10 where bit `bit` of each byte of h (zmm) is set */
INL __m512i hbit_10(__m512i h, int bit) {
    return _mm512_slli_epi16(_mm512_and_si512(_mm512_srl_epi16(h, _mm_cvtsi32_si128(bit)), _mm512_set1_epi8(1)), 4);
}

INL void q45_K_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int five, const int nr) {
    const int nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 acc[COLI_MAX_NR];
    __m128 acc_m[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) { acc[r] = _mm512_setzero_ps(); acc_m[r] = _mm_setzero_ps(); }
    for (int i = 0; i < nb; i++) {
        const uint8_t *qs, *scp;
        float dx, dminx;
        __m512i hz = _mm512_setzero_si512();
        if (five) {
            const block_q5_K *x = (const block_q5_K *)w + i;
            qs = x->qs; scp = x->scales; dx = h2f(x->d); dminx = h2f(x->dmin);
            const __m256i h = _mm256_loadu_si256((const __m256i *)x->qh);
            hz = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);  /* [qh, qh>>2] */
        } else {
            const block_q4_K *x = (const block_q4_K *)w + i;
            qs = x->qs; scp = x->scales; dx = h2f(x->d); dminx = h2f(x->dmin);
        }
        uint32_t utmp[4];
        k4_unpack(scp, utmp);
        const __m256i ms16 = _mm256_cvtepu8_epi16(_mm_set_epi32((int)utmp[3], (int)utmp[2], (int)utmp[1], (int)utmp[0]));
        const __m512i sc16 = _mm512_castsi256_si512(ms16);  /* lanes 0..7 scales (8..15 mins unused) */
        const __m128i mins16 = _mm256_extracti128_si256(ms16, 1);
        __m512i sumi[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *)y->bsums);
            const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
            const __m128i prod = _mm_madd_epi16(mins16, q8s);
            acc_m[r] = _mm_fmadd_ps(_mm_set1_ps(-y->d * dminx), _mm_cvtepi32_ps(prod), acc_m[r]);
            sumi[r] = _mm512_setzero_si512();
        }
        for (int jj = 0; jj < 2; jj++) {  /* 128 elements: 64-groups 2jj, 2jj+1 */
            const __m512i bits = _mm512_loadu_si512(qs + 64 * jj);
            __m512i lo = _mm512_and_si512(bits, m4);                      /* [sub 4jj, sub 4jj+2] */
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4); /* [sub 4jj+1, sub 4jj+3] */
            if (five) {
                lo = _mm512_or_si512(lo, hbit_10(hz, 4 * jj));
                hi = _mm512_or_si512(hi, hbit_10(hz, 4 * jj + 1));
            }
            const __m512i w1 = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0)); /* elements 0..63 */
            const __m512i w2 = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2)); /* elements 64..127 */
            const __m512i s1 = bcast2_16(sc16, 4 * jj + 0, 4 * jj + 1);
            const __m512i s2 = bcast2_16(sc16, 4 * jj + 2, 4 * jj + 3);
            for (int r = 0; r < nr; r++) {
                const int8_t *q8 = ((const block_q8_K *)(a + r * as) + i)->qs + 128 * jj;
                const __m512i p1 = _mm512_maddubs_epi16(w1, _mm512_loadu_si512(q8));
                const __m512i p2 = _mm512_maddubs_epi16(w2, _mm512_loadu_si512(q8 + 64));
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], p1, s1);
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], p2, s2);
            }
        }
        for (int r = 0; r < nr; r++) {
            const float d = ((const block_q8_K *)(a + r * as) + i)->d * dx;
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) {
        __m128 m = acc_m[r];
        m = _mm_add_ps(m, _mm_movehl_ps(m, m));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        s[r * ss] = _mm512_reduce_add_ps(acc[r]) + _mm_cvtss_f32(m);
    }
}

TGT void vec_dot_q4_K_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    DISPATCH_NR(q45_K_nr, n, w, (const char *)a, as, s, ss, 0)
}
TGT void vec_dot_q5_K_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    DISPATCH_NR(q45_K_nr, n, w, (const char *)a, as, s, ss, 1)
}

/* Q6_K: q in 0..63 via maddubs, scales via dpwssd, -32 offset from bsums. */
INL void q6_K_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    const int nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF), m3 = _mm512_set1_epi8(3);
    __m512 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const block_q6_K *x = (const block_q6_K *)w + i;
        const float dx = h2f(x->d);
        const __m256i sc16y = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
        const __m512i sc16 = _mm512_castsi256_si512(sc16y);
        __m512i sumi[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
            const __m256i off = _mm256_madd_epi16(sc16y, _mm256_loadu_si256((const __m256i *)y->bsums));
            sumi[r] = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)), 0);
        }
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512(x->ql + 64 * h);  /* [ql 0..31 | ql 32..63] */
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
            const __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(hb), _mm256_srli_epi16(hb, 2), 1);  /* [qh, qh>>2] */
            const __m512i hA = _mm512_slli_epi16(_mm512_and_si512(hz, m3), 4);
            const __m512i hB = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hz, 4), m3), 4);
            const __m512i wa = _mm512_or_si512(_mm512_and_si512(l, m4), hA);                          /* elements 0..63 */
            const __m512i wb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), hB);    /* elements 64..127 */
            /* int16 lane l covers elements 2l, 2l+1: sub-block 8h + l/8 (wa), 8h + 4 + l/8 (wb) */
            const __m512i ia = _mm512_set_epi64(0x0003000300030003LL, 0x0003000300030003LL, 0x0002000200020002LL,
                                                0x0002000200020002LL, 0x0001000100010001LL, 0x0001000100010001LL, 0, 0);
            const __m512i base = _mm512_set1_epi16((short)(8 * h));
            const __m512i sa = _mm512_permutexvar_epi16(_mm512_add_epi16(ia, base), sc16);
            const __m512i sb = _mm512_permutexvar_epi16(_mm512_add_epi16(ia, _mm512_add_epi16(base, _mm512_set1_epi16(4))), sc16);
            for (int r = 0; r < nr; r++) {
                const int8_t *q8 = ((const block_q8_K *)(a + r * as) + i)->qs + 128 * h;
                const __m512i pa = _mm512_maddubs_epi16(wa, _mm512_loadu_si512(q8));
                const __m512i pb = _mm512_maddubs_epi16(wb, _mm512_loadu_si512(q8 + 64));
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], pa, sa);
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], pb, sb);
            }
        }
        for (int r = 0; r < nr; r++) {
            const float d = ((const block_q8_K *)(a + r * as) + i)->d * dx;
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = _mm512_reduce_add_ps(acc[r]);
}

TGT void vec_dot_q6_K_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    DISPATCH_NR(q6_K_nr, n, w, (const char *)a, as, s, ss)
}

#else
typedef int coli_quant_avx512_unused;
#endif
