/* quant_ternary.c — TQ1_0 and TQ2_0, the ternary types: dequantizers, dot
 * products with Q8_K activations and their entries in the kernel tables
 * (coli_kernels_fill_ternary).
 *
 * ggml runs every row of a TQ matmul through ggml_vec_dot_tq{1,2}_0_q8_K
 * (type_traits_cpu: nrows 1; no tiled, repacked or tinyBLAS path), so one
 * kernel per ISA gives every batch size its bits: the `_generic` twins
 * follow ggml-cpu/quants.c (one float sum), the AVX2 ones x86/quants.c (which
 * the AVX-512 build runs too): per super-block an exact integer dot in 8
 * int32 lanes, sumf = fma(float(lanes), dy * d, sumf), hsum_float_8 at the end. */
#include "quant_ternary.h"

#include <math.h>
#include <string.h>

#include "kernels.h"

/* Trit k of a TQ1_0 byte q: the top 2 bits of 3 * (uint8_t)(q * 3^k). */
static inline int tq1_trit(uint8_t q, int k) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t v = (uint8_t)(q * pow3[k]);
    return ((uint16_t)v * 3) >> 8;
}

/* The 256 trits (0..2) of a TQ1_0 block in element order. */
static void tq1_0_trits(const block_tq1_0 *x, uint8_t t[QK_K]) {
    for (int k = 0; k < 5; k++)
        for (int m = 0; m < 32; m++) t[32 * k + m] = (uint8_t)tq1_trit(x->qs[m], k);
    for (int k = 0; k < 5; k++)
        for (int m = 0; m < 16; m++) t[160 + 16 * k + m] = (uint8_t)tq1_trit(x->qs[32 + m], k);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 4; j++) t[240 + 4 * k + j] = (uint8_t)tq1_trit(x->qh[j], k);
}

/* The 256 values t (0..3) of a TQ2_0 block in element order. */
static void tq2_0_vals(const block_tq2_0 *x, uint8_t t[QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++) t[128 * h + 32 * l + m] = (x->qs[32 * h + m] >> (2 * l)) & 3;
}

void dequantize_row_tq1_0(const void *vx, float *y, int64_t n) {
    const block_tq1_0 *x = vx;
    uint8_t t[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = coli_fp16_to_fp32(x[i].d);
        tq1_0_trits(&x[i], t);
        for (int j = 0; j < QK_K; j++) y[j] = (float)(t[j] - 1) * d;
    }
}

void dequantize_row_tq2_0(const void *vx, float *y, int64_t n) {
    const block_tq2_0 *x = vx;
    uint8_t t[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = coli_fp16_to_fp32(x[i].d);
        tq2_0_vals(&x[i], t);
        for (int j = 0; j < QK_K; j++) y[j] = (float)(t[j] - 1) * d;
    }
}

/* ggml_vec_dot_tq{1,2}_0_q8_K_generic: the super-block's exact sum of
 * (t - 1) * q8, then sumf += float(sum) * (d * dy) — one fused multiply-add
 * in ggml's build (GCC's default -ffp-contract=fast). */
static float dot1_tq(int n, const void *w, const block_q8_K *y, const int one) {
    uint8_t t[QK_K];
    float sumf = 0.0f;
    for (int i = 0; i < n / QK_K; i++) {
        float dx;
        if (one) {
            const block_tq1_0 *x = (const block_tq1_0 *)w + i;
            tq1_0_trits(x, t);
            dx = coli_fp16_to_fp32(x->d);
        } else {
            const block_tq2_0 *x = (const block_tq2_0 *)w + i;
            tq2_0_vals(x, t);
            dx = coli_fp16_to_fp32(x->d);
        }
        int32_t sum = 0;
        for (int j = 0; j < QK_K; j++) sum += (t[j] - 1) * y[i].qs[j];
        sumf = fmaf((float)sum, dx * y[i].d, sumf);
    }
    return sumf;
}

void vec_dot_tq1_0_q8_K_generic(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    for (int r = 0; r < nr; r++) s[r * ss] = dot1_tq(n, w, (const block_q8_K *)((const char *)a + r * as), 1);
}

void vec_dot_tq2_0_q8_K_generic(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    for (int r = 0; r < nr; r++) s[r * ss] = dot1_tq(n, w, (const block_q8_K *)((const char *)a + r * as), 0);
}

#ifdef COLI_X86
#include <immintrin.h>

#include "prefetch.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))

#include "quant_avx2_inl.h"

/* Top 2 bits of 3 * v per byte, as ggml computes them without an 8-bit
 * multiply: avg(v - 1, avg(v - 1, 0)) is (3v) >> 2 rounded the way that
 * leaves bits 6..7 = (3v) >> 8 (x86/quants.c) */
INL __m256i tq1_top2(__m256i v) {
    v = _mm256_subs_epu8(v, _mm256_set1_epi8(1));
    v = _mm256_avg_epu8(v, _mm256_avg_epu8(v, _mm256_setzero_si256()));
    return _mm256_and_si256(_mm256_srli_epi16(v, 6), _mm256_set1_epi8(3));
}

/* x * 3 and x * 9 per byte (mod 256) with 16-bit shifts, as ggml does */
INL __m256i mul3_u8(__m256i x) { return _mm256_add_epi8(x, _mm256_add_epi8(x, x)); }
INL __m256i mul9_u8(__m256i x) {
    return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(x, 3), _mm256_set1_epi8(-8)), x);
}
INL __m128i mul3_u8x16(__m128i x) { return _mm_add_epi8(x, _mm_add_epi8(x, x)); }
INL __m128i mul9_u8x16(__m128i x) { return _mm_add_epi8(_mm_and_si128(_mm_slli_epi16(x, 3), _mm_set1_epi8(-8)), x); }

/* A TQ1_0 block's trits (0..2) in the 8 registers ggml multiplies:
 * t[k] (k < 5): elements 32k .. 32k + 31; t[5] = elements 160..191 (trits 0, 1 of
 * qs[32..47]), t[6] = 192..223, t[7] = 224..255 (trit 4, then the qh trits). */
INL void tq1_0_unpack(const block_tq1_0 *x, __m256i t[8]) {
    const __m256i q0 = _mm256_loadu_si256((const __m256i *)x->qs);
    const __m256i q1 = mul3_u8(q0), q2 = mul9_u8(q0);
    t[0] = tq1_top2(q0);
    t[1] = tq1_top2(q1);
    t[2] = tq1_top2(q2);
    t[3] = tq1_top2(mul9_u8(q1));
    t[4] = tq1_top2(mul9_u8(q2));
    const __m128i r0 = _mm_loadu_si128((const __m128i *)(x->qs + 32));
    uint32_t qh;
    memcpy(&qh, x->qh, 4);
    __m256i q5 = _mm256_cvtepu8_epi16(_mm_set1_epi32((int)qh));
    const __m128i r1 = mul3_u8x16(r0), r2 = mul9_u8x16(r0);
    const __m128i r3 = mul9_u8x16(r1), r4 = mul9_u8x16(r2);
    /* no 8-bit multiply in AVX2: the qh bytes times 1, 3, 9, 27 in 16 bits */
    q5 = _mm256_mullo_epi16(q5, _mm256_set_epi16(27, 27, 27, 27, 9, 9, 9, 9, 3, 3, 3, 3, 1, 1, 1, 1));
    q5 = _mm256_and_si256(q5, _mm256_set1_epi16(0xFF));
    const __m128i r5 = _mm_packus_epi16(_mm256_castsi256_si128(q5), _mm256_extracti128_si256(q5, 1));
    t[5] = tq1_top2(_mm256_inserti128_si256(_mm256_castsi128_si256(r0), r1, 1));
    t[6] = tq1_top2(_mm256_inserti128_si256(_mm256_castsi128_si256(r2), r3, 1));
    t[7] = tq1_top2(_mm256_inserti128_si256(_mm256_castsi128_si256(r4), r5, 1));
}

/* The 8 int32 lanes ggml ends a super-block on (ggml's own 16-bit sums: at
 * most 3 * 2 * 2 * 128 per lane before the bsums, no overflow) */
INL __m256i tq1_0_lanes(const __m256i t[8], const block_q8_K *y) {
    __m256i p[8];
    for (int k = 0; k < 8; k++) p[k] = _mm256_maddubs_epi16(t[k], _mm256_loadu_si256((const __m256i *)(y->qs + 32 * k)));
    __m256i s0 = _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), p[5]);
    const __m256i s1 = _mm256_add_epi16(_mm256_add_epi16(p[2], p[3]), p[6]);
    const __m256i s2 = _mm256_add_epi16(p[4], p[7]);
    s0 = _mm256_sub_epi16(s0, _mm256_loadu_si256((const __m256i *)y->bsums));
    s0 = _mm256_add_epi16(s0, _mm256_add_epi16(s1, s2));
    return _mm256_madd_epi16(s0, _mm256_set1_epi16(1));
}

INL void tq2_0_unpack(const block_tq2_0 *x, __m256i t[8]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        for (int l = 0; l < 4; l++) t[4 * h + l] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * l), m3);
    }
}

INL __m256i tq2_0_lanes(const __m256i t[8], const block_q8_K *y) {
    __m256i p[8];
    for (int k = 0; k < 8; k++) p[k] = _mm256_maddubs_epi16(t[k], _mm256_loadu_si256((const __m256i *)(y->qs + 32 * k)));
    const __m256i s0 = _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[4], p[5]));
    const __m256i s1 = _mm256_add_epi16(_mm256_add_epi16(p[2], p[3]), _mm256_add_epi16(p[6], p[7]));
    const __m256i s = _mm256_sub_epi16(_mm256_add_epi16(s0, s1), _mm256_loadu_si256((const __m256i *)y->bsums));
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

#define TQ_PREFETCH 2048 /* rows lie end to end: stream ahead of the hardware prefetcher's 4 KiB pages */

/* W (1, 2 or 4) weight rows (wst bytes apart) against nr activation rows,
 * ggml_vec_dot's arithmetic per row: the rows' super-blocks alternate
 * (independent chains and streams) and short rows (768 = 3 super-blocks)
 * pay one call for several. */
INL void tq_w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int one,
              const int W, const int nr) {
    const int nb = n / QK_K;
    const size_t bsize = one ? sizeof(block_tq1_0) : sizeof(block_tq2_0);
    __m256 acc[4][COLI_MAX_NR];
    for (int j = 0; j < W; j++)
        for (int r = 0; r < nr; r++) acc[j][r] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < W; j++) {
            const char *xb = w + (size_t)j * wst + (size_t)i * bsize;
            COLI_PREFETCH_W(xb + TQ_PREFETCH);
            __m256i t[8];
            float dx;
            if (one) {
                tq1_0_unpack((const block_tq1_0 *)xb, t);
                dx = h2f(((const block_tq1_0 *)xb)->d);
            } else {
                tq2_0_unpack((const block_tq2_0 *)xb, t);
                dx = h2f(((const block_tq2_0 *)xb)->d);
            }
            for (int r = 0; r < nr; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
                const __m256i lanes = one ? tq1_0_lanes(t, y) : tq2_0_lanes(t, y);
                acc[j][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(y->d * dx), acc[j][r]);
            }
        }
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < W; j++) s[(size_t)r * ss + j] = hsum_f32_8(acc[j][r]);
}

INL void tq_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr, const int one) {
    for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
        const int rn = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
        for (int g = 0; g < 16; g += 4)
            COLI_DISPATCH_NR(rn, tq_w, n, w + (size_t)g * wst, wst, a + (size_t)r0 * as, as, s + (size_t)r0 * ss + g, ss, one, 4);
    }
}
TGT void vec_dot_tq1_0_q8_K_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                     int nr) {
    tq_16w(n, w, wst, a, as, s, ss, nr, 1);
}
TGT void vec_dot_tq2_0_q8_K_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                     int nr) {
    tq_16w(n, w, wst, a, as, s, ss, nr, 0);
}

TGT void vec_dot_tq1_0_q8_K_2w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                    int nr) {
    COLI_DISPATCH_NR(nr, tq_w, n, (const char *)w, wst, (const char *)a, as, s, ss, 1, 2);
}
TGT void vec_dot_tq2_0_q8_K_2w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                    int nr) {
    COLI_DISPATCH_NR(nr, tq_w, n, (const char *)w, wst, (const char *)a, as, s, ss, 0, 2);
}

TGT void vec_dot_tq1_0_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, tq_w, n, (const char *)w, 0, (const char *)a, as, s, ss, 1, 1);
}
TGT void vec_dot_tq2_0_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, tq_w, n, (const char *)w, 0, (const char *)a, as, s, ss, 0, 1);
}
/* ---- AVX-512: the same lanes, two 32-byte chunks per zmm ---------------------------------- */

#define TGT512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define INL512 static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

INL512 __m512i tq1_top2_z(__m512i v) {
    v = _mm512_subs_epu8(v, _mm512_set1_epi8(1));
    v = _mm512_avg_epu8(v, _mm512_avg_epu8(v, _mm512_setzero_si512()));
    return _mm512_and_si512(_mm512_srli_epi16(v, 6), _mm512_set1_epi8(3));
}

INL512 __m512i cat256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

/* The 8 chunks of tq1_0_unpack / tq2_0_unpack paired: zmm c = chunks 2c | 2c + 1,
 * whose activation bytes are the 64 at y->qs + 64c. */
INL512 void tq1_0_unpack_z(const block_tq1_0 *x, __m512i t[4]) {
    const __m256i q0 = _mm256_loadu_si256((const __m256i *)x->qs);
    const __m256i q1 = mul3_u8(q0), q2 = mul9_u8(q0);
    const __m128i r0 = _mm_loadu_si128((const __m128i *)(x->qs + 32));
    uint32_t qh;
    memcpy(&qh, x->qh, 4);
    __m256i q5 = _mm256_cvtepu8_epi16(_mm_set1_epi32((int)qh));
    const __m128i r1 = mul3_u8x16(r0), r2 = mul9_u8x16(r0);
    const __m128i r3 = mul9_u8x16(r1), r4 = mul9_u8x16(r2);
    q5 = _mm256_mullo_epi16(q5, _mm256_set_epi16(27, 27, 27, 27, 9, 9, 9, 9, 3, 3, 3, 3, 1, 1, 1, 1));
    q5 = _mm256_and_si256(q5, _mm256_set1_epi16(0xFF));
    const __m128i r5 = _mm_packus_epi16(_mm256_castsi256_si128(q5), _mm256_extracti128_si256(q5, 1));
    const __m256i t5 = _mm256_inserti128_si256(_mm256_castsi128_si256(r0), r1, 1);
    const __m256i t6 = _mm256_inserti128_si256(_mm256_castsi128_si256(r2), r3, 1);
    const __m256i t7 = _mm256_inserti128_si256(_mm256_castsi128_si256(r4), r5, 1);
    t[0] = tq1_top2_z(cat256(q0, q1));
    t[1] = tq1_top2_z(cat256(q2, mul9_u8(q1)));
    t[2] = tq1_top2_z(cat256(mul9_u8(q2), t5));
    t[3] = tq1_top2_z(cat256(t6, t7));
}

INL512 void tq2_0_unpack_z(const block_tq2_0 *x, __m512i t[4]) {
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qs + 32 * h)));
        for (int p = 0; p < 2; p++) { /* chunks 4h + 2p (low 256 bits) and 4h + 2p + 1 (high) */
            const __m512i cnt = cat256(_mm256_set1_epi16((short)(4 * p)), _mm256_set1_epi16((short)(4 * p + 2)));
            t[2 * h + p] = _mm512_and_si512(_mm512_srlv_epi16(b, cnt), m3);
        }
    }
}

/* W (1 or 2) weight rows wst bytes apart: s[r * ss + j] */
INL512 void tq_z(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int one,
                 const int W, const int nr) {
    const int nb = n / QK_K;
    const size_t bsize = one ? sizeof(block_tq1_0) : sizeof(block_tq2_0);
    __m256 acc[2][COLI_MAX_NR];
    for (int j = 0; j < W; j++)
        for (int r = 0; r < nr; r++) acc[j][r] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        __m512i t[2][4];
        float dx[2];
        for (int j = 0; j < W; j++) {
            const char *xb = w + (size_t)j * wst + (size_t)i * bsize;
            COLI_PREFETCH_W(xb + TQ_PREFETCH);
            if (one) {
                tq1_0_unpack_z((const block_tq1_0 *)xb, t[j]);
                dx[j] = h2f(((const block_tq1_0 *)xb)->d);
            } else {
                tq2_0_unpack_z((const block_tq2_0 *)xb, t[j]);
                dx[j] = h2f(((const block_tq2_0 *)xb)->d);
            }
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
            __m512i q8[4];
            for (int c = 0; c < 4; c++) q8[c] = _mm512_loadu_si512(y->qs + 64 * c);
            const __m256i bsums = _mm256_loadu_si256((const __m256i *)y->bsums);
            for (int j = 0; j < W; j++) {
                /* ggml's 16-bit lanes: every chunk's pair sums, less the bsums (exact) */
                __m512i z = _mm512_maddubs_epi16(t[j][0], q8[0]);
                for (int c = 1; c < 4; c++) z = _mm512_add_epi16(z, _mm512_maddubs_epi16(t[j][c], q8[c]));
                __m256i s16 = _mm256_add_epi16(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1));
                s16 = _mm256_sub_epi16(s16, bsums);
                const __m256i lanes = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
                acc[j][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(y->d * dx[j]), acc[j][r]);
            }
        }
    }
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < W; j++) s[(size_t)r * ss + j] = hsum_f32_8(acc[j][r]);
}

TGT512 void vec_dot_tq1_0_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, tq_z, n, (const char *)w, 0, (const char *)a, as, s, ss, 1, 1);
}
TGT512 void vec_dot_tq2_0_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, tq_z, n, (const char *)w, 0, (const char *)a, as, s, ss, 0, 1);
}
TGT512 void vec_dot_tq1_0_q8_K_2w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                         size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, tq_z, n, (const char *)w, wst, (const char *)a, as, s, ss, 1, 2);
}
TGT512 void vec_dot_tq2_0_q8_K_2w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                         size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, tq_z, n, (const char *)w, wst, (const char *)a, as, s, ss, 0, 2);
}
#endif

/* Both types whole in every table: Q8_K partner, one-row arithmetic for every row. */
void coli_kernels_fill_ternary(coli_kernel_table *t, int isa) {
    static const struct { uint32_t type; coli_to_float_fn to_float; coli_vec_dot_fn generic, simd; } types[] = {
#ifdef COLI_X86
        {GGML_TYPE_TQ1_0, dequantize_row_tq1_0, vec_dot_tq1_0_q8_K_generic, vec_dot_tq1_0_q8_K_avx2},
        {GGML_TYPE_TQ2_0, dequantize_row_tq2_0, vec_dot_tq2_0_q8_K_generic, vec_dot_tq2_0_q8_K_avx2},
#else
        {GGML_TYPE_TQ1_0, dequantize_row_tq1_0, vec_dot_tq1_0_q8_K_generic, NULL},
        {GGML_TYPE_TQ2_0, dequantize_row_tq2_0, vec_dot_tq2_0_q8_K_generic, NULL},
#endif
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        coli_type_kernels *k = &t->type[types[i].type];
        memset(k, 0, sizeof *k);
        k->vec_dot_type = GGML_TYPE_Q8_K;
        k->to_float = types[i].to_float;
        k->vec_dot = isa == COLI_ISA_SCALAR || !types[i].simd ? types[i].generic : types[i].simd;
        k->mm_group = k->mm_in_mult = k->mm_out_mult = 1;
    }
#ifdef COLI_X86
    if (isa != COLI_ISA_SCALAR) { /* the same bits, two weight rows a call */
        t->type[GGML_TYPE_TQ1_0].vec_dot_2w = vec_dot_tq1_0_q8_K_2w_avx2;
        t->type[GGML_TYPE_TQ2_0].vec_dot_2w = vec_dot_tq2_0_q8_K_2w_avx2;
        t->type[GGML_TYPE_TQ1_0].vec_dot_16w = vec_dot_tq1_0_q8_K_16w_avx2;
        t->type[GGML_TYPE_TQ2_0].vec_dot_16w = vec_dot_tq2_0_q8_K_16w_avx2;
    }
    if (isa == COLI_ISA_AVX512) { /* the same bits, two chunks per zmm, and two weight rows a call */
        t->type[GGML_TYPE_TQ1_0].vec_dot = vec_dot_tq1_0_q8_K_avx512;
        t->type[GGML_TYPE_TQ2_0].vec_dot = vec_dot_tq2_0_q8_K_avx512;
        t->type[GGML_TYPE_TQ1_0].vec_dot_2w = vec_dot_tq1_0_q8_K_2w_avx512;
        t->type[GGML_TYPE_TQ2_0].vec_dot_2w = vec_dot_tq2_0_q8_K_2w_avx512;
    }
#endif
}
