/* quant_iq14_avx2.c — AVX2 + FMA + F16C kernels for IQ1_S, IQ1_M, IQ4_NL,
 * IQ4_XS and MXFP4 (target attributes per function; called only after
 * coli_cpu_can_avx2()).
 *
 * Each kernel takes 1..COLI_MAX_NR activation rows against one weight row,
 * decodes the weight once and runs, for every activation row, the floats of
 * the llama.cpp path it mirrors (quant_iq14.h):
 *   one row    ggml_vec_dot_<t>_<partner> of ggml-cpu/arch/x86/quants.c: its
 *              8 int32 lanes (elements 4k..4k+3 of each block of 32) are the
 *              same integers here, and its float steps are taken in its order
 *              (its scalar `x += a * b` fused, as GCC builds it);
 *   tiled      ggml's tiled matmul: the exact integer sum of a super-block,
 *              acc = fma(float(isum) * d, dy, acc);
 *   repacked   the iq4_nl_8x8 / mxfp4_8x8 gemv and gemm: acc = fma(float(isum), dw * dy, acc) per block;
 *   tinyBLAS   llamafile's tinyBLAS_Q0_AVX: the 8 lanes as the one-row kernel, one accumulator.
 * Integer sums are exact (the same integers however they are formed). */
#include "quant_iq14.h"

#ifdef COLI_X86
#include <immintrin.h>

#include "prefetch.h"
#include <math.h>
#include <string.h>

#include "iq_grids.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))

#include "quant_avx2_inl.h"

/* the 8 int32 lanes of sum(w * y) over 32 int8 pairs, w in [-127, 127]: ggml's mul_add_epi8 then madd by 1 */
INL __m256i lanes_i8(__m256i w, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w)), _mm256_set1_epi16(1));
}

/* 32 codebook bytes of a 4-bit block: elements 0..15 from the low nibbles, 16..31 from the high */
INL __m256i nl_bytes(const uint8_t *qs, __m128i lut) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4)),
                            _mm_shuffle_epi8(lut, _mm_and_si128(q, m4)));
}

/* ---- IQ4_NL / MXFP4 against Q8_0 -------------------------------------------------------- */

enum { NL_IQ4 = 0, NL_MXFP4 = 1 };
enum { NL_VEC_DOT = 0, NL_REPACKED = 1 };

INL const uint8_t *nl_qs(const void *w, int ib, const int kind) {
    return kind == NL_IQ4 ? ((const block_iq4_nl *)w)[ib].qs : ((const block_mxfp4 *)w)[ib].qs;
}
INL float nl_d(const void *w, int ib, const int kind) {
    return kind == NL_IQ4 ? h2f(((const block_iq4_nl *)w)[ib].d) : coli_e8m0_to_fp32_half(((const block_mxfp4 *)w)[ib].e);
}

/* mode NL_VEC_DOT: ggml_vec_dot_{iq4_nl,mxfp4}_q8_0 — blocks in pairs into
 * two accumulators (even, odd), fma(dy * dx, lanes), then the hsum of their
 * sum, then an odd last block as sumf = fma(float(isum), d, sumf).
 * NL_REPACKED: per block acc = fma(float(isum), dw * dy, acc). (tinyBLAS: nl_tb.) */
INL void nl_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int kind, const int mode,
               const int nr) {
    const int nb = n / QK8_0;
    const __m128i lut = _mm_loadu_si128((const __m128i *)(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4));
    __m256 acc1[COLI_MAX_NR], acc2[COLI_MAX_NR];
    float accs[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) {
        acc1[r] = acc2[r] = _mm256_setzero_ps();
        accs[r] = 0.0f;
    }
    int ib = 0;
    if (mode == NL_VEC_DOT) {
        for (; ib + 1 < nb; ib += 2) {
            const __m256i w1 = nl_bytes(nl_qs(w, ib, kind), lut), w2 = nl_bytes(nl_qs(w, ib + 1, kind), lut);
            const float dx1 = nl_d(w, ib, kind), dx2 = nl_d(w, ib + 1, kind);
            for (int r = 0; r < nr; r++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib;
                const __m256i p1 = lanes_i8(w1, _mm256_loadu_si256((const __m256i *)y[0].qs));
                const __m256i p2 = lanes_i8(w2, _mm256_loadu_si256((const __m256i *)y[1].qs));
                acc1[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(y[0].d) * dx1), _mm256_cvtepi32_ps(p1), acc1[r]);
                acc2[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(y[1].d) * dx2), _mm256_cvtepi32_ps(p2), acc2[r]);
            }
        }
        for (int r = 0; r < nr; r++) accs[r] = hsum_f32_8(_mm256_add_ps(acc1[r], acc2[r]));
    }
    for (; ib < nb; ib++) {
        const __m256i wb = nl_bytes(nl_qs(w, ib, kind), lut);
        const float dx = nl_d(w, ib, kind);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib;
            const __m256i p = lanes_i8(wb, _mm256_loadu_si256((const __m256i *)y->qs));
            if (mode == NL_REPACKED)
                accs[r] = fmaf((float)hsum_i32_8(p), dx * h2f(y->d), accs[r]);
            else
                accs[r] = fmaf((float)hsum_i32_8(p), h2f(y->d) * dx, accs[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = accs[r];
}

TGT void vec_dot_iq4_nl_q8_0_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, nl_nr, n, w, (const char *)a, as, s, ss, NL_IQ4, NL_VEC_DOT);
}
TGT void vec_dot_mxfp4_q8_0_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, nl_nr, n, w, (const char *)a, as, s, ss, NL_MXFP4, NL_VEC_DOT);
}
TGT void vec_dot_iq4_nl_q8_0_repacked_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, nl_nr, n, w, (const char *)a, as, s, ss, NL_IQ4, NL_REPACKED);
}
TGT void vec_dot_mxfp4_q8_0_repacked_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, nl_nr, n, w, (const char *)a, as, s, ss, NL_MXFP4, NL_REPACKED);
}

/* ggml_vec_dot for 16 weight rows as stored, 4 at a time: each row keeps
 * its own even / odd accumulators and float steps (nl_nr's NL_VEC_DOT), the
 * activation block is loaded once for the 4, and 4 weight rows stream at
 * once. Fewer shuffle-port uops than nl_nr: the 16 nibble bytes are loaded
 * into both halves and shifted per half (one 256-bit pshufb, no insert), and
 * the 4 rows' dy * dx are formed in one vector and broadcast from memory. */
INL __m256i nl_bytes_bcast(const uint8_t *qs, __m256i lut, __m256i shift, __m256i m4) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srlv_epi32(v, shift), m4));
}

/* dx of block ib of 4 rows (wst apart) times dy, into d[0..3] */
INL void nl_d4(const char *w, size_t wst, int ib, float dy, float d[4], const int kind) {
    __m128 dx;
    if (kind == NL_IQ4) {
        const char *b = w + (size_t)ib * sizeof(block_iq4_nl);
        uint16_t h[4];
        for (int k = 0; k < 4; k++) memcpy(&h[k], b + (size_t)k * wst, 2);
        const uint64_t q = h[0] | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 32 | (uint64_t)h[3] << 48;
        dx = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)q));
    } else {
        const char *b = w + (size_t)ib * sizeof(block_mxfp4);
        uint32_t bits[4];
        for (int k = 0; k < 4; k++) {
            const uint8_t e = (uint8_t)b[(size_t)k * wst];
            bits[k] = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
        }
        dx = _mm_castsi128_ps(_mm_set_epi64x((long long)(bits[2] | (uint64_t)bits[3] << 32),
                                             (long long)(bits[0] | (uint64_t)bits[1] << 32)));
    }
    _mm_storeu_ps(d, _mm_mul_ps(_mm_set1_ps(dy), dx));
}

INL void nl_vd_4w(int nb, const char *w, size_t wst, const block_q8_0 *y, float *s, const int kind) {
    const size_t qoff = kind == NL_IQ4 ? offsetof(block_iq4_nl, qs) : offsetof(block_mxfp4, qs);
    const size_t bsz = kind == NL_IQ4 ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4)));
    const __m256i shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4), m4 = _mm256_set1_epi8(0x0f);
    /* MXFP4: |code| <= 12, so codes + 12 are unsigned and maddubs cannot saturate; a lane's sum is
     * then its biased sum less 12 * the lane's activation sum (no sign trick per row) */
    const __m256i lutb = _mm256_add_epi8(lut, _mm256_set1_epi8(12)), twelve = _mm256_set1_epi8(12);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][4];
    float d[4];
    for (int k = 0; k < 4; k++) acc[0][k] = acc[1][k] = _mm256_setzero_ps();
    int ib = 0;
    for (; ib + 1 < nb; ib += 2)
        for (int e = 0; e < 2; e++) {
            const __m256i yv = _mm256_loadu_si256((const __m256i *)y[ib + e].qs);
            const __m256i bias = kind == NL_MXFP4 ? _mm256_madd_epi16(_mm256_maddubs_epi16(twelve, yv), ones)
                                                  : _mm256_setzero_si256();
            nl_d4(w, wst, ib + e, h2f(y[ib + e].d), d, kind);
            for (int k = 0; k < 4; k++) {
                const uint8_t *q = (const uint8_t *)w + (size_t)k * wst + (size_t)(ib + e) * bsz + qoff;
                const __m256i p = kind == NL_MXFP4
                    ? _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(nl_bytes_bcast(q, lutb, shift, m4), yv), ones), bias)
                    : lanes_i8(nl_bytes_bcast(q, lut, shift, m4), yv);
                acc[e][k] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[k]), _mm256_cvtepi32_ps(p), acc[e][k]);
            }
        }
    for (int k = 0; k < 4; k++) {
        s[k] = hsum_f32_8(_mm256_add_ps(acc[0][k], acc[1][k]));
        if (ib < nb) { /* the odd last block: sumf = fma(float(isum), dy * dx, sumf) */
            const char *b = w + (size_t)k * wst;
            const __m256i p = lanes_i8(nl_bytes(nl_qs(b, ib, kind), _mm256_castsi256_si128(lut)),
                                       _mm256_loadu_si256((const __m256i *)y[ib].qs));
            s[k] = fmaf((float)hsum_i32_8(p), h2f(y[ib].d) * nl_d(b, ib, kind), s[k]);
        }
    }
}

INL void nl_vd_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr, const int kind) {
    for (int r = 0; r < nr; r++)
        for (int g = 0; g < 16; g += 4)
            nl_vd_4w(n / QK8_0, w + (size_t)g * wst, wst, (const block_q8_0 *)(a + (size_t)r * as), s + (size_t)r * ss + g, kind);
}

TGT void vec_dot_iq4_nl_q8_0_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                      int nr) {
    nl_vd_16w(n, w, wst, a, as, s, ss, nr, NL_IQ4);
}
TGT void vec_dot_mxfp4_q8_0_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                     int nr) {
    nl_vd_16w(n, w, wst, a, as, s, ss, nr, NL_MXFP4);
}

/* llamafile's tinyBLAS_Q0_AVX for W weight rows (1, 2 or 4) x R activation rows
 * (R <= 4, W * R <= 8): each pair keeps its one accumulator,
 * acc = fma(dx * dy, float(lanes), acc) block by block, hsum at the end (its
 * lanes those of the one-row kernel). Per block the W x R factors dx * dy come from one
 * vector multiply (stored, then broadcast from memory: a load, no shuffle) and
 * each weight row's codes and their magnitudes are formed once for the R rows,
 * so a pair costs sign, maddubs, madd, cvt and fma on ports 0/1 (ggml's
 * gemm4xN<2> spends a sign of the weight and a dx * dy shuffle more). */
INL void nl_tb(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int W, const int R) {
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)coli_kvalues_iq4nl));
    const __m256i shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4), m4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4][COLI_MAX_NR];
    _Alignas(32) float d[16]; /* d[4 * k + r] = dx of weight row k times dy of activation row r */
    for (int k = 0; k < W; k++)
        for (int r = 0; r < R; r++) acc[k][r] = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ib++) {
        const block_iq4_nl *b[4];
        uint64_t hx = 0, hy = 0;
        for (int k = 0; k < W; k++) {
            b[k] = (const block_iq4_nl *)(w + (size_t)k * wst) + ib;
            hx |= (uint64_t)b[k]->d << 16 * k;
        }
        for (int r = 0; r < R; r++) hy |= (uint64_t)((const block_q8_0 *)(a + (size_t)r * as))[ib].d << 16 * r;
        const __m128 dy = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)hy)), dx = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)hx));
        const __m256 dyy = _mm256_set_m128(dy, dy);
        _mm256_store_ps(d, _mm256_mul_ps(_mm256_set_m128(_mm_permute_ps(dx, 0x55), _mm_permute_ps(dx, 0x00)), dyy));
        if (W > 2)
            _mm256_store_ps(d + 8, _mm256_mul_ps(_mm256_set_m128(_mm_permute_ps(dx, 0xff), _mm_permute_ps(dx, 0xaa)), dyy));
        __m256i c[4], u[4];
        for (int k = 0; k < W; k++) {
            c[k] = nl_bytes_bcast(b[k]->qs, lut, shift, m4);
            u[k] = _mm256_sign_epi8(c[k], c[k]);
        }
        for (int r = 0; r < R; r++) {
            const __m256i yv = _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)(a + (size_t)r * as))[ib].qs);
            for (int k = 0; k < W; k++) {
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(u[k], _mm256_sign_epi8(yv, c[k])), ones);
                acc[k][r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[4 * k + r]), _mm256_cvtepi32_ps(p), acc[k][r]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int k = 0; k < W; k++) s[(size_t)r * ss + k] = hsum_f32_8(acc[k][r]);
}
INL void nl_tb_1w(int nb, const char *w, const char *a, size_t as, float *s, size_t ss, const int R) {
    nl_tb(nb, w, 0, a, as, s, ss, 1, R);
}
INL void nl_tb_2w(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int R) {
    nl_tb(nb, w, wst, a, as, s, ss, 2, R);
}
INL void nl_tb_4w(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int R) {
    nl_tb(nb, w, wst, a, as, s, ss, 4, R);
}

TGT void vec_dot_iq4_nl_q8_0_tinyblas_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, nl_tb_1w, n / QK8_0, (const char *)w, (const char *)a, as, s, ss);
}
TGT void vec_dot_iq4_nl_q8_0_tinyblas_2w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                              size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, nl_tb_2w, n / QK8_0, (const char *)w, wst, (const char *)a, as, s, ss);
}
/* 16 weight rows: 2 a pass against 3 or 4 activation rows, 4 a pass against 1 or 2 (at most 8 accumulators) */
TGT void vec_dot_iq4_nl_q8_0_tinyblas_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                               size_t ss, int nr) {
    for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
        const int rn = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
        const char *ar = (const char *)a + (size_t)r0 * as;
        float *sr = s + (size_t)r0 * ss;
        for (int k = 0; k < 16; k += rn > 2 ? 2 : 4) {
            const char *wk = (const char *)w + (size_t)k * wst;
            switch (rn) {
            case 1: nl_tb_4w(n / QK8_0, wk, wst, ar, as, sr + k, ss, 1); break;
            case 2: nl_tb_4w(n / QK8_0, wk, wst, ar, as, sr + k, ss, 2); break;
            case 3: nl_tb_2w(n / QK8_0, wk, wst, ar, as, sr + k, ss, 3); break;
            default: nl_tb_2w(n / QK8_0, wk, wst, ar, as, sr + k, ss, 4); break;
            }
        }
    }
}

/* The repacked arithmetic for 16 weight rows, 8 per ymm (lane j = weight row
 * j of the group, as ggml's 8x8 layout has them): a block's 16 nibble bytes of
 * 8 rows transposed in registers (row j's dword k -> lane j of q[k]), each
 * nibble through the codebook, times the activation's 4 bytes broadcast
 * (sign trick, pairs by maddubs, then madd: exact), so each lane ends on its
 * row's integer sum of the block; acc = fma(float(isum), dw * dy, acc). */
INL void nl_transpose8x4(const char *b, size_t wst, __m256i q[4]) {
    __m256i A[4];
    for (int t = 0; t < 4; t++) /* lane g of A[t]: the 16 bytes of row 4g + t (broadcast loads and a blend: no insert uop) */
        A[t] = _mm256_blend_epi32(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b + (size_t)t * wst))),
                                  _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b + (size_t)(t + 4) * wst))),
                                  0xf0);
    const __m256i t0 = _mm256_unpacklo_epi32(A[0], A[1]), t1 = _mm256_unpackhi_epi32(A[0], A[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(A[2], A[3]), t3 = _mm256_unpackhi_epi32(A[2], A[3]);
    q[0] = _mm256_unpacklo_epi64(t0, t2); /* half g: rows 4g..4g+3 */
    q[1] = _mm256_unpackhi_epi64(t0, t2);
    q[2] = _mm256_unpacklo_epi64(t1, t3);
    q[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* the block scales of 8 rows (w: the block of row 0, rows wst apart): lane j
 * gets the dword at row j's block start by a broadcast load (a load uop) and a
 * dword blend (any vector port); scalar assembly cost ~25 instructions and
 * inserts on the shuffle port */
INL __m256i nl_head8(const char *w, size_t wst) {
    int32_t v;
    memcpy(&v, w, 4);
    __m256i x = _mm256_set1_epi32(v);
#define NL_HEAD_LANE(j)                                  \
    memcpy(&v, w + (size_t)(j) * wst, 4);                \
    x = _mm256_blend_epi32(x, _mm256_set1_epi32(v), 1 << (j));
    NL_HEAD_LANE(1) NL_HEAD_LANE(2) NL_HEAD_LANE(3) NL_HEAD_LANE(4) NL_HEAD_LANE(5) NL_HEAD_LANE(6) NL_HEAD_LANE(7)
#undef NL_HEAD_LANE
    return x;
}

/* E8M0 exponents (one a lane) -> 2^(e - 128): (e - 1) << 23, the denormals for e < 2 */
INL __m256 e8m0_half8(__m256i e) {
    const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i den = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, den, small));
}

INL __m256 nl_scales8(const char *w, size_t wst, const int kind) {
    const __m256i x = nl_head8(w, wst);
    if (kind == NL_IQ4) { /* each lane's low half, packed into 8 halves: one in-lane pshufb, one qword permute */
        const __m256i lo = _mm256_shuffle_epi8(x, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                   0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1));
        return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(lo, 0x08)));
    }
    return e8m0_half8(_mm256_and_si256(x, _mm256_set1_epi32(0xff)));
}

/* Half h (1: rows 0..7, 2: rows 8..15) of a tile coli_repack_b32_r16 made: block ib's
 * scales as floats and its 4 quant words, row j in lane j */
INL __m256 nl_r16_scales8(const char *tile, int ib, int h, const int kind) {
    if (kind == NL_IQ4) return r16b_scales8(tile, ib, h);
    return e8m0_half8(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(COLI_R16B_D(tile, 16, 1, ib) + 8 * (h - 1)))));
}
INL void nl_r16_words8(const char *tile, int ib, int h, const int kind, __m256i q[4]) {
    const int sb = kind == NL_IQ4 ? 2 : 1;
    for (int k = 0; k < 4; k++) q[k] = _mm256_loadu_si256((const __m256i *)(COLI_R16B_Q(tile, 16, sb, ib, k) + 32 * (h - 1)));
}

/* 8 weight rows against nr (<= COLI_MAX_NR) activation rows; s[r * ss + j]. h: 0, the rows as
 * stored, wst apart; 1 or 2, a half of the tile at w (nl_r16_words8) */
INL void nl_8w(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int kind,
               const int h, const int nr) {
    const size_t bsz = kind == NL_IQ4 ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
    const size_t qoff = kind == NL_IQ4 ? offsetof(block_iq4_nl, qs) : offsetof(block_mxfp4, qs);
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4)));
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    if (kind == NL_MXFP4) { /* |code| <= 12: codes + 12 are unsigned and maddubs cannot saturate, so no sign trick */
        const __m256i lutb = _mm256_add_epi8(lut, _mm256_set1_epi8(12)), twelve = _mm256_set1_epi8(12);
        for (int ib = 0; ib < nb; ib++) {
            const char *b = w + (size_t)ib * bsz;
            const __m256 dw = h ? nl_r16_scales8(w, ib, h, kind) : nl_scales8(b, wst, kind);
            __m256i q[4], lo[4], hi[4];
            if (h)
                nl_r16_words8(w, ib, h, kind, q);
            else
                nl_transpose8x4(b + qoff, wst, q);
            for (int k = 0; k < 4; k++) {
                lo[k] = _mm256_shuffle_epi8(lutb, _mm256_and_si256(q[k], m4));
                hi[k] = _mm256_shuffle_epi8(lutb, _mm256_and_si256(_mm256_srli_epi16(q[k], 4), m4));
            }
            for (int r = 0; r < nr; r++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
                const __m256i yv = _mm256_loadu_si256((const __m256i *)y->qs);
                /* 12 * the block's activation sum, in every lane: the bias to take off each row's sum */
                __m256i bias = _mm256_madd_epi16(_mm256_maddubs_epi16(twelve, yv), ones);
                bias = _mm256_add_epi32(bias, _mm256_permute2x128_si256(bias, bias, 1));
                bias = _mm256_add_epi32(bias, _mm256_shuffle_epi32(bias, _MM_SHUFFLE(1, 0, 3, 2)));
                bias = _mm256_add_epi32(bias, _mm256_shuffle_epi32(bias, _MM_SHUFFLE(2, 3, 0, 1)));
                __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), bias);
                for (int k = 0; k < 4; k += 2) { /* 4 maddubs pairs a lane add up in int16: 4 * 2 * 24 * 127 < 2^15 */
                    __m256i p16 = _mm256_setzero_si256();
                    for (int t = k; t < k + 2; t++) {
                        int yl, yh;
                        memcpy(&yl, y->qs + 4 * t, 4);
                        memcpy(&yh, y->qs + 16 + 4 * t, 4);
                        p16 = _mm256_add_epi16(p16, _mm256_add_epi16(_mm256_maddubs_epi16(lo[t], _mm256_set1_epi32(yl)),
                                                                     _mm256_maddubs_epi16(hi[t], _mm256_set1_epi32(yh))));
                    }
                    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, ones));
                }
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(h2f(y->d))), acc[r]);
            }
        }
        for (int r = 0; r < nr; r++) _mm256_storeu_ps(s + (size_t)r * ss, acc[r]);
        return;
    }
    for (int ib = 0; ib < nb; ib++) {
        const char *b = w + (size_t)ib * bsz;
        const __m256 dw = h ? nl_r16_scales8(w, ib, h, kind) : nl_scales8(b, wst, kind);
        __m256i q[4], lo[4], hi[4], alo[4], ahi[4];
        if (h)
            nl_r16_words8(w, ib, h, kind, q);
        else
            nl_transpose8x4(b + qoff, wst, q);
        for (int k = 0; k < 4; k++) {
            lo[k] = _mm256_shuffle_epi8(lut, _mm256_and_si256(q[k], m4));
            hi[k] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(q[k], 4), m4));
            alo[k] = _mm256_sign_epi8(lo[k], lo[k]);
            ahi[k] = _mm256_sign_epi8(hi[k], hi[k]);
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
            __m256i isum = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                int yl, yh;
                memcpy(&yl, y->qs + 4 * k, 4);
                memcpy(&yh, y->qs + 16 + 4 * k, 4);
                const __m256i pl = _mm256_maddubs_epi16(alo[k], _mm256_sign_epi8(_mm256_set1_epi32(yl), lo[k]));
                const __m256i ph = _mm256_maddubs_epi16(ahi[k], _mm256_sign_epi8(_mm256_set1_epi32(yh), hi[k]));
                isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(pl, ones), _mm256_madd_epi16(ph, ones)));
            }
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(h2f(y->d))), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) _mm256_storeu_ps(s + (size_t)r * ss, acc[r]);
}

/* One activation row (decode) against 16 weight rows, both 8-row groups in
 * one pass, so the activation's broadcasts and its scale serve the 16 rows.
 * A pre-pass over the row takes dy (and, for IQ4_NL, |y|; for MXFP4, the
 * bias 12 * sum(y)) once per call instead of once per block and group.
 * IQ4_NL's sign trick is turned around: maddubs(|y|, sign(w, y)) gives the
 * same exact pairs as ggml's maddubs(|w|, sign(y, w)) (|w|, |y| <= 127), and
 * |y| comes from the pre-pass, so a block needs half the sign ops. */
enum { NL_DEC_CHUNK = 128 };

INL __m256i nl_dec_iq4(__m256i q, __m256i lut, __m256i m4, __m256i ones, __m256i yl, __m256i yh, __m256i al, __m256i ah) {
    const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(q, m4));
    const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(al, _mm256_sign_epi8(lo, yl)), ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(ah, _mm256_sign_epi8(hi, yh)), ones));
}

INL __m256i nl_dec_mx(__m256i q, __m256i lutb, __m256i m4, __m256i yl, __m256i yh) { /* int16 pairs: see nl_8w */
    const __m256i lo = _mm256_shuffle_epi8(lutb, _mm256_and_si256(q, m4));
    const __m256i hi = _mm256_shuffle_epi8(lutb, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    return _mm256_add_epi16(_mm256_maddubs_epi16(lo, yl), _mm256_maddubs_epi16(hi, yh));
}

/* r16: w is a tile coli_repack_b32_r16 made */
INL void nl_dec16(int nb, const char *w, size_t wst, const block_q8_0 *y, float *s, const int kind, const int r16) {
    const size_t bsz = kind == NL_IQ4 ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
    const size_t qoff = kind == NL_IQ4 ? offsetof(block_iq4_nl, qs) : offsetof(block_mxfp4, qs);
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(kind == NL_IQ4 ? coli_kvalues_iq4nl : coli_kvalues_mxfp4)));
    const __m256i lutb = kind == NL_IQ4 ? lut : _mm256_add_epi8(lut, _mm256_set1_epi8(12));
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1), twelve = _mm256_set1_epi8(12);
    float dys[NL_DEC_CHUNK];
    int32_t bias[NL_DEC_CHUNK];
    _Alignas(32) int8_t ay[kind == NL_IQ4 ? 32 * NL_DEC_CHUNK : 32];
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int c0 = 0; c0 < nb; c0 += NL_DEC_CHUNK) {
        const int cn = nb - c0 < NL_DEC_CHUNK ? nb - c0 : NL_DEC_CHUNK;
        for (int i = 0; i < cn; i++) {
            const __m256i yv = _mm256_loadu_si256((const __m256i *)y[c0 + i].qs);
            dys[i] = h2f(y[c0 + i].d);
            if (kind == NL_IQ4)
                _mm256_store_si256((__m256i *)(ay + 32 * i), _mm256_abs_epi8(yv));
            else
                bias[i] = hsum_i32_8(_mm256_madd_epi16(_mm256_maddubs_epi16(twelve, yv), ones));
        }
        for (int i = 0; i < cn; i++) {
            const int ib = c0 + i;
            const char *b0 = w + (size_t)ib * bsz, *b1 = b0 + 8 * wst;
            const __m256 dy = _mm256_broadcast_ss(&dys[i]);
            const __m256 d0 = _mm256_mul_ps(r16 ? nl_r16_scales8(w, ib, 1, kind) : nl_scales8(b0, wst, kind), dy);
            const __m256 d1 = _mm256_mul_ps(r16 ? nl_r16_scales8(w, ib, 2, kind) : nl_scales8(b1, wst, kind), dy);
            __m256i q0[4], q1[4];
            if (r16) {
                nl_r16_words8(w, ib, 1, kind, q0);
                nl_r16_words8(w, ib, 2, kind, q1);
            } else {
                nl_transpose8x4(b0 + qoff, wst, q0);
                nl_transpose8x4(b1 + qoff, wst, q1);
            }
            const int8_t *yq = y[ib].qs;
            __m256i i0, i1;
            if (kind == NL_IQ4) {
                i0 = i1 = _mm256_setzero_si256();
                for (int k = 0; k < 4; k++) {
                    int yl, yh, al, ah;
                    memcpy(&yl, yq + 4 * k, 4);
                    memcpy(&yh, yq + 16 + 4 * k, 4);
                    memcpy(&al, ay + 32 * i + 4 * k, 4);
                    memcpy(&ah, ay + 32 * i + 16 + 4 * k, 4);
                    const __m256i vyl = _mm256_set1_epi32(yl), vyh = _mm256_set1_epi32(yh);
                    const __m256i val = _mm256_set1_epi32(al), vah = _mm256_set1_epi32(ah);
                    i0 = _mm256_add_epi32(i0, nl_dec_iq4(q0[k], lut, m4, ones, vyl, vyh, val, vah));
                    i1 = _mm256_add_epi32(i1, nl_dec_iq4(q1[k], lut, m4, ones, vyl, vyh, val, vah));
                }
            } else {
                i0 = i1 = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_set1_epi32(bias[i]));
                for (int k = 0; k < 4; k += 2) {
                    __m256i p0 = _mm256_setzero_si256(), p1 = _mm256_setzero_si256();
                    for (int t = k; t < k + 2; t++) {
                        int yl, yh;
                        memcpy(&yl, yq + 4 * t, 4);
                        memcpy(&yh, yq + 16 + 4 * t, 4);
                        const __m256i vyl = _mm256_set1_epi32(yl), vyh = _mm256_set1_epi32(yh);
                        p0 = _mm256_add_epi16(p0, nl_dec_mx(q0[t], lutb, m4, vyl, vyh));
                        p1 = _mm256_add_epi16(p1, nl_dec_mx(q1[t], lutb, m4, vyl, vyh));
                    }
                    i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(p0, ones));
                    i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(p1, ones));
                }
            }
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), d0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), d1, acc1);
        }
    }
    _mm256_storeu_ps(s, acc0);
    _mm256_storeu_ps(s + 8, acc1);
}

INL void nl_16w(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss, int nr, const int kind,
                const int r16) {
    if (nr == 1) {
        nl_dec16(n / QK8_0, (const char *)w, wst, (const block_q8_0 *)a, s, kind, r16);
        return;
    }
    for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
        const int rn = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
        for (int g = 0; g < 16; g += 8)
            COLI_DISPATCH_NR(rn, nl_8w, n / QK8_0, r16 ? (const char *)w : (const char *)w + (size_t)g * wst, wst,
                             (const char *)a + (size_t)r0 * as, as, s + (size_t)r0 * ss + g, ss, kind, r16 ? 1 + g / 8 : 0);
    }
}

TGT void vec_dot_iq4_nl_q8_0_repacked_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                               size_t ss, int nr) {
    nl_16w(n, w, wst, a, as, s, ss, nr, NL_IQ4, 0);
}
TGT void vec_dot_iq4_nl_q8_0_r16_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                          size_t ss, int nr) {
    nl_16w(n, w, wst, a, as, s, ss, nr, NL_IQ4, 1);
}
TGT void vec_dot_mxfp4_q8_0_repacked_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                              size_t ss, int nr) {
    nl_16w(n, w, wst, a, as, s, ss, nr, NL_MXFP4, 0);
}
TGT void vec_dot_mxfp4_q8_0_r16_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                         size_t ss, int nr) {
    nl_16w(n, w, wst, a, as, s, ss, nr, NL_MXFP4, 1);
}

/* ---- IQ4_XS against Q8_K ------------------------------------------------------------------ */

/* Per super-block, block pair (ib, ib + 1): the codebook bytes times the
 * activation, pairs by maddubs, then madd by the block's scale ls - 32: ggml's
 * 8 lanes. One row: acc = fma(dx * dy, float(lanes), acc), hsum at the end;
 * tiled: the lanes' sum isum, acc = fma(float(isum) * dx, dy, acc). */
INL void iq4_xs_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int tiled, const int nr) {
    const int nb = n / QK_K;
    const __m128i lut = _mm_loadu_si128((const __m128i *)coli_kvalues_iq4nl);
    __m256 acc[COLI_MAX_NR];
    float acc1[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) {
        acc[r] = _mm256_setzero_ps();
        acc1[r] = 0.0f;
    }
    for (int i = 0; i < nb; i++) {
        const block_iq4_xs *x = (const block_iq4_xs *)w + i;
        COLI_PREFETCH_W((const char *)x + 2048);
        COLI_PREFETCH_W((const char *)x + 2048 + 64);
        __m256i sumi[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) sumi[r] = _mm256_setzero_si256();
        uint16_t sh = x->scales_h;
        for (int ib = 0; ib < QK_K / 32; ib += 2) {
            const __m256i w1 = nl_bytes(x->qs + 16 * ib, lut), w2 = nl_bytes(x->qs + 16 * ib + 16, lut);
            const __m256i aw1 = _mm256_sign_epi8(w1, w1), aw2 = _mm256_sign_epi8(w2, w2);
            const int16_t ls1 = (int16_t)(((x->scales_l[ib / 2] & 0xf) | ((sh << 4) & 0x30)) - 32);
            const int16_t ls2 = (int16_t)(((x->scales_l[ib / 2] >> 4) | ((sh << 2) & 0x30)) - 32);
            sh >>= 4;
            const __m256i sc1 = _mm256_set1_epi16(ls1), sc2 = _mm256_set1_epi16(ls2);
            for (int r = 0; r < nr; r++) {
                const int8_t *q8 = ((const block_q8_K *)(a + r * as) + i)->qs + 32 * ib;
                const __m256i p1 = _mm256_maddubs_epi16(aw1, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), w1));
                const __m256i p2 = _mm256_maddubs_epi16(aw2, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(q8 + 32)), w2));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(_mm256_madd_epi16(p1, sc1), _mm256_madd_epi16(p2, sc2)));
            }
        }
        const float dx = h2f(x->d);
        for (int r = 0; r < nr; r++) {
            const float dy = ((const block_q8_K *)(a + r * as) + i)->d;
            if (tiled)
                acc1[r] = fmaf((float)hsum_i32_8(sumi[r]) * dx, dy, acc1[r]);
            else
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dy), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = tiled ? acc1[r] : hsum_f32_8(acc[r]);
}

TGT void vec_dot_iq4_xs_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, iq4_xs_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_iq4_xs_q8_K_tiled_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, iq4_xs_nr, n, w, (const char *)a, as, s, ss, 1);
}

/* ---- IQ1_S / IQ1_M against Q8_K -------------------------------------------------------------- */

/* 32 grid values (-1/0/+1 bytes) of 4 groups of 8 */
INL __m256i grid4(int i0, int i1, int i2, int i3) {
    return _mm256_set_epi64x((long long)coli_iq1s_grid[i3], (long long)coli_iq1s_grid[i2], (long long)coli_iq1s_grid[i1],
                             (long long)coli_iq1s_grid[i0]);
}

/* The 32 grid indices of a super-block, qs[j] | (high 3 bits of j) << 8, formed 16 at a time in vectors: each
 * block's qh word broadcast to its 4 groups and shifted into bits 8..10 by a multiply (shifts left per group)
 * or, for the group whose bits lie above bit 10, a right shift `sr`. Word k of v[ib / 4]'s lane (ib / 2) % 2,
 * qword ib % 2, is index 4ib + k. */
INL void iq1_indices(const uint8_t *qs, __m128i qh01, __m128i qh23, __m256i mul, const int sr, __m256i v[2]) {
    const __m256i mask = _mm256_set1_epi16(0x700);
    const __m256i ha = _mm256_set_m128i(_mm_unpackhi_epi32(qh01, qh01), _mm_unpacklo_epi32(qh01, qh01));
    const __m256i hb = _mm256_set_m128i(_mm_unpackhi_epi32(qh23, qh23), _mm_unpacklo_epi32(qh23, qh23));
    const __m256i sa = _mm256_blend_epi16(_mm256_mullo_epi16(ha, mul), _mm256_srli_epi16(ha, sr), 0x88);
    const __m256i sb = _mm256_blend_epi16(_mm256_mullo_epi16(hb, mul), _mm256_srli_epi16(hb, sr), 0x88);
    const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)qs));
    const __m256i hi = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(qs + 16)));
    v[0] = _mm256_or_si256(lo, _mm256_and_si256(sa, mask));
    v[1] = _mm256_or_si256(hi, _mm256_and_si256(sb, mask));
}
/* block ib's 32 grid values, its 4 indices moved to a general register as one qword (read back through
 * memory 16 bits at a time they stall on store forwarding; formed per index with scalar ops as ggml's
 * they took 5-7% longer on Zen 4: AVX2 IQ1_M decode 0.88 -> 0.95 of ggml with the delta signs below) */
INL __m256i iq1_grid(const __m256i v[2], int ib) {
    const __m128i h = (ib / 2) % 2 ? _mm256_extracti128_si256(v[ib / 4], 1) : _mm256_castsi256_si128(v[ib / 4]);
    const uint64_t e = ib % 2 ? (uint64_t)_mm_extract_epi64(h, 1) : (uint64_t)_mm_cvtsi128_si64(h);
    return grid4((int)(e & 0xffff), (int)(e >> 16 & 0xffff), (int)(e >> 32 & 0xffff), (int)(e >> 48));
}

/* IQ1_S. Lanes: sum over blocks of ls * (grid . q8) per 4 elements (ggml's
 * sumi), and one integer sumi1 = sum of ls * delta * (the block's two bsums).
 * One row (ggml_vec_dot_iq1_s_q8_K): d = dy * dx, acc = fma(d, float(lanes),
 * acc), accum1 = fma(d, float(sumi1), accum1); result hsum(acc) + accum1 / 8.
 * Tiled: isum = 8 * sum(lanes) + sumi1 (the codes 8 * grid + delta),
 * acc = fma(float(isum) * (dx / 8), dy, acc). */
INL void iq1_s_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int tiled, const int nr) {
    const int nb = n / QK_K;
    __m256 acc[COLI_MAX_NR];
    float acc1[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) {
        acc[r] = _mm256_setzero_ps();
        acc1[r] = 0.0f;
    }
    for (int i = 0; i < nb; i++) {
        const block_iq1_s *x = (const block_iq1_s *)w + i;
        COLI_PREFETCH_W((const char *)x + 1024);
        __m256i sumi[COLI_MAX_NR];
        int sumi1[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) {
            sumi[r] = _mm256_setzero_si256();
            sumi1[r] = 0;
        }
        /* ls * delta of the 8 blocks as int16, each twice (one per bsum of 16): sumi1 by two madds */
        const __m128i qhv = _mm_loadu_si128((const __m128i *)x->qh);
        const __m128i lsv = _mm_add_epi16(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qhv, 12), _mm_set1_epi16(7)), 1),
                                          _mm_set1_epi16(1));
        const __m128i negv = _mm_srai_epi16(qhv, 15);
        const __m128i lsdv = _mm_sub_epi16(_mm_xor_si128(lsv, negv), negv);
        const __m128i lsd_lo = _mm_unpacklo_epi16(lsdv, lsdv), lsd_hi = _mm_unpackhi_epi16(lsdv, lsdv);
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
            const __m128i p = _mm_add_epi32(_mm_madd_epi16(_mm_loadu_si128((const __m128i *)y->bsums), lsd_lo),
                                            _mm_madd_epi16(_mm_loadu_si128((const __m128i *)(y->bsums + 8)), lsd_hi));
            const __m128i p2 = _mm_add_epi32(p, _mm_unpackhi_epi64(p, p));
            sumi1[r] = _mm_cvtsi128_si32(_mm_add_epi32(p2, _mm_shuffle_epi32(p2, 1)));
        }
        __m256i idx[2];
        iq1_indices(x->qs, _mm_unpacklo_epi16(qhv, qhv), _mm_unpackhi_epi16(qhv, qhv),
                    _mm256_set_epi16(1, 4, 32, 256, 1, 4, 32, 256, 1, 4, 32, 256, 1, 4, 32, 256), 1, idx);
        const __m256i ls2 = _mm256_broadcastsi128_si256(lsv);
#pragma GCC unroll 8
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const __m256i g = iq1_grid(idx, ib);
            const __m256i ag = _mm256_sign_epi8(g, g);
            const __m256i sc = _mm256_shuffle_epi8(ls2, _mm256_set1_epi16((int16_t)(0x0100 + 0x0202 * ib)));
            for (int r = 0; r < nr; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(ag, _mm256_sign_epi8(q8, g)), sc));
            }
        }
        const float dx = h2f(x->d);
        for (int r = 0; r < nr; r++) {
            const float dy = ((const block_q8_K *)(a + r * as) + i)->d;
            if (tiled) {
                acc1[r] = fmaf((float)(8 * hsum_i32_8(sumi[r]) + sumi1[r]) * (dx * 0.125f), dy, acc1[r]);
            } else {
                const float d = dy * dx;
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
                acc1[r] = fmaf(d, (float)sumi1[r], acc1[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = tiled ? acc1[r] : hsum_f32_8(acc[r]) + IQ1S_DELTA * acc1[r];
}

TGT void vec_dot_iq1_s_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, iq1_s_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_iq1_s_q8_K_tiled_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, iq1_s_nr, n, w, (const char *)a, as, s, ss, 1);
}

/* IQ1_M. Lanes sumi1: sum over halves of 16 of ls * (grid . q8) per 4
 * elements; sumi2: the same of ls * delta * sum(q8) (delta per group of 8).
 * One row (ggml_vec_dot_iq1_m_q8_K): acc1 = fma(d, float(sumi1), acc1),
 * acc2 likewise, result fma(hsum(acc2), 1/8, hsum(acc1)). Tiled: isum =
 * 8 * sum(sumi1) + sum(sumi2), acc = fma(float(isum) * (d16 / 8), dy, acc). */
INL void iq1_m_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int tiled, const int nr) {
    const int nb = n / QK_K;
    __m256 acc1[COLI_MAX_NR], acc2[COLI_MAX_NR];
    float acct[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) {
        acc1[r] = acc2[r] = _mm256_setzero_ps();
        acct[r] = 0.0f;
    }
    const __m256i mone8 = _mm256_set1_epi8(1);
    for (int i = 0; i < nb; i++) {
        const block_iq1_m *x = (const block_iq1_m *)w + i;
        COLI_PREFETCH_W((const char *)x + 1024);
        uint64_t sc64;
        memcpy(&sc64, x->scales, 8);
        /* the 16 scales 2 * s + 1 as int16, ggml's layout: qword lanes shifted by 0, 6, 3, 9, so word k of the
         * low half holds block 2k's first 16 (qword 0) and block 2k + 1's (qword 1), the high half their second 16 */
        const __m256i scales = _mm256_add_epi16(
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x((long long)sc64), _mm256_set_epi64x(9, 3, 6, 0)),
                                               _mm256_set1_epi16(7)),
                              1),
            _mm256_set1_epi16(1));
        __m256i sumi1[COLI_MAX_NR], sumi2[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) sumi1[r] = sumi2[r] = _mm256_setzero_si256();
        const __m128i qhv = _mm_loadu_si128((const __m128i *)x->qh);  /* block ib's two bytes as word ib */
        __m256i idx[2];
        iq1_indices(x->qs, _mm_unpacklo_epi16(qhv, qhv), _mm_unpackhi_epi16(qhv, qhv),
                    _mm256_set_epi16(1, 1, 16, 256, 1, 1, 16, 256, 1, 1, 16, 256, 1, 1, 16, 256), 4, idx);
        /* the 32 groups' delta signs as 0 / -1 bytes, group 4ib + l at byte 4ib + l (qh byte 2ib + l / 2,
         * bit 3 or 7), each 16 in both lanes: a block's 32 sign bytes are then one shuffle away */
        const __m128i d3 = _mm_cmpeq_epi8(_mm_and_si128(qhv, _mm_set1_epi8(8)), _mm_set1_epi8(8));
        const __m128i d7 = _mm_cmpgt_epi8(_mm_setzero_si128(), qhv);
        const __m256i dflag[2] = {_mm256_broadcastsi128_si256(_mm_unpacklo_epi8(d3, d7)),
                                  _mm256_broadcastsi128_si256(_mm_unpackhi_epi8(d3, d7))};
#pragma GCC unroll 8
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const __m256i g = iq1_grid(idx, ib);
            const __m256i ag = _mm256_sign_epi8(g, g);
            /* delta signs: 0x01 or 0xff in each byte of group l's 8 (qh bit 3 + 4l) */
            const int b0 = 4 * (ib % 4);
            const __m256i dl = _mm256_or_si256(
                mone8, _mm256_shuffle_epi8(dflag[ib / 4], _mm256_set_epi64x(0x0101010101010101LL * (b0 + 3), 0x0101010101010101LL * (b0 + 2),
                                                                             0x0101010101010101LL * (b0 + 1), 0x0101010101010101LL * b0)));
            const __m256i sc = _mm256_shuffle_epi8(scales, _mm256_set1_epi16((int16_t)(0x0100 + 0x0202 * (ib / 2) + 0x0808 * (ib % 2))));
            for (int r = 0; r < nr; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib));
                sumi1[r] = _mm256_add_epi32(sumi1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(ag, _mm256_sign_epi8(q8, g)), sc));
                sumi2[r] = _mm256_add_epi32(sumi2[r], _mm256_madd_epi16(_mm256_maddubs_epi16(mone8, _mm256_sign_epi8(q8, dl)), sc));
            }
        }
        const float dx = h2f(coli_iq1m_scale(x));
        for (int r = 0; r < nr; r++) {
            const float dy = ((const block_q8_K *)(a + r * as) + i)->d;
            if (tiled) {
                const int isum = 8 * hsum_i32_8(sumi1[r]) + hsum_i32_8(sumi2[r]);
                acct[r] = fmaf((float)isum * (dx * 0.125f), dy, acct[r]);
            } else {
                const __m256 d = _mm256_set1_ps(dy * dx);
                acc1[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi1[r]), acc1[r]);
                acc2[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi2[r]), acc2[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++)
        s[r * ss] = tiled ? acct[r] : fmaf(hsum_f32_8(acc2[r]), IQ1M_DELTA, hsum_f32_8(acc1[r]));
}

TGT void vec_dot_iq1_m_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, iq1_m_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_iq1_m_q8_K_tiled_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, iq1_m_nr, n, w, (const char *)a, as, s, ss, 1);
}

/* ---- IQ4_XS, IQ1_S, IQ1_M: ggml's tiled matmul, 16 weight rows a call (vec_dot_mm_16w) --------
 * Each super-block of the 16 rows is decoded once, then reused by every
 * activation row; acc = fma(float(isum) * d0, dy, acc) with isum the exact
 * integer of the super-block, as the one-weight-row tiled kernels.
 * IQ4_XS row by row: codebook bytes and |bytes| (sign trick), scales ls - 32,
 * isum = sum of ls * (codes . q8), 8 rows' lanes reduced by one hadd tree. */
typedef struct {
    __m256i w[16][8], aw[16][8], sc[16][8]; /* codes, |codes|, scales (int16) per row and block of 32 */
    float d0[16];
} iq4xs_tile;

INL void iq4xs_decode16(const char *b, size_t wst, iq4xs_tile *t) {
    const __m128i lut = _mm_loadu_si128((const __m128i *)coli_kvalues_iq4nl);
    for (int j = 0; j < 16; j++) {
        const block_iq4_xs *x = (const block_iq4_xs *)(b + (size_t)j * wst);
        t->d0[j] = h2f(x->d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const __m256i c = nl_bytes(x->qs + 16 * ib, lut);
            t->w[j][ib] = c;
            t->aw[j][ib] = _mm256_sign_epi8(c, c);
            t->sc[j][ib] = _mm256_set1_epi16(
                (int16_t)((((x->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x->scales_h >> 2 * ib) & 3) << 4)) - 32));
        }
    }
}

/* the 8 lanes of sum over blocks of ls * (codes . q8) for weight row j */
INL __m256i iq4xs_row_lanes(const iq4xs_tile *t, int j, const __m256i q8[8]) {
    __m256i v = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++)
        v = _mm256_add_epi32(v, _mm256_madd_epi16(_mm256_maddubs_epi16(t->aw[j][ib], _mm256_sign_epi8(q8[ib], t->w[j][ib])),
                                                  t->sc[j][ib]));
    return v;
}

/* isum of weight rows j0..j0+7 as 8 int32 lanes */
INL __m256i iq4xs_isum8(const iq4xs_tile *t, int j0, const __m256i q8[8]) {
    const __m256i h01 = _mm256_hadd_epi32(iq4xs_row_lanes(t, j0 + 0, q8), iq4xs_row_lanes(t, j0 + 1, q8));
    const __m256i h23 = _mm256_hadd_epi32(iq4xs_row_lanes(t, j0 + 2, q8), iq4xs_row_lanes(t, j0 + 3, q8));
    const __m256i h45 = _mm256_hadd_epi32(iq4xs_row_lanes(t, j0 + 4, q8), iq4xs_row_lanes(t, j0 + 5, q8));
    const __m256i h67 = _mm256_hadd_epi32(iq4xs_row_lanes(t, j0 + 6, q8), iq4xs_row_lanes(t, j0 + 7, q8));
    const __m256i lo = _mm256_hadd_epi32(h01, h23), hi = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

INL void iq4xs_tiled_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr) {
    const int nb = n / QK_K;
    iq4xs_tile t;
    for (int r = 0; r < nr; r++) {
        _mm256_storeu_ps(s + (size_t)r * ss, _mm256_setzero_ps());
        _mm256_storeu_ps(s + (size_t)r * ss + 8, _mm256_setzero_ps());
    }
    for (int i = 0; i < nb; i++) {
        iq4xs_decode16(w + (size_t)i * sizeof(block_iq4_xs), wst, &t);
        const __m256 d0a = _mm256_loadu_ps(t.d0), d0b = _mm256_loadu_ps(t.d0 + 8);
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
            __m256i q8[8];
            for (int ib = 0; ib < 8; ib++) q8[ib] = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib));
            const __m256 dy = _mm256_set1_ps(y->d);
            float *o = s + (size_t)r * ss;
            const __m256 fa = _mm256_mul_ps(_mm256_cvtepi32_ps(iq4xs_isum8(&t, 0, q8)), d0a);
            _mm256_storeu_ps(o, _mm256_fmadd_ps(fa, dy, _mm256_loadu_ps(o)));
            const __m256 fb = _mm256_mul_ps(_mm256_cvtepi32_ps(iq4xs_isum8(&t, 8, q8)), d0b);
            _mm256_storeu_ps(o + 8, _mm256_fmadd_ps(fb, dy, _mm256_loadu_ps(o + 8)));
        }
    }
}

/* IQ1_S / IQ1_M batches, 8 weight rows a ymm (lane j: row j), as the AVX-512
 * kernel lays them out. Every code 8 * grid + delta is one of -9, -7, -1, 1,
 * 7, 9, so code + 9 is a byte in [0, 18]: maddubs takes it unsigned against
 * the activation's 4 bytes broadcast (no sign trick), and 4 such products of a
 * group of 16 values add up in int16 (under 8 * 18 * 128). The tiled
 * arithmetic needs only each super-block's whole integer:
 * isum = sum over groups of ls * ((code + 9) . q8) - 9 * sum of ls * bsum,
 * the same integer as ggml's tiled kernel. */
typedef struct {
    __m256i c[64];   /* dword k of the 256 codes + 9 */
    __m256i ls[16];  /* group of 16 values g: ls in both 16-bit halves */
    __m256i ls9[8];  /* 9 * ls of groups 2k, 2k + 1 (low, high half): against the bsum pair k */
    __m256 d0;       /* d / 8 */
} iq1_tile8;

/* 8 dwords at byte p + j * wst (j = lane) */
INL __m256i dwords8(const char *p, __m256i rows) { return _mm256_i32gather_epi32((const int *)p, rows, 1); }

/* codes + 9 of group l of 8 values: grid indices idx, bias bytes 9 + delta */
INL void iq1_group8(__m256i idx, __m256i bias, __m256i *lo, __m256i *hi) {
    const __m256i two = _mm256_add_epi32(idx, idx), m = _mm256_set1_epi8((char)0xf8);
    const __m256i g0 = _mm256_i32gather_epi32((const int *)coli_iq1s_grid, two, 4);
    const __m256i g1 = _mm256_i32gather_epi32((const int *)coli_iq1s_grid + 1, two, 4);
    *lo = _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi32(g0, 3), m), bias); /* bytes 8 * g (mod 256) */
    *hi = _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi32(g1, 3), m), bias);
}

INL void iq1_decode8(const char *b, size_t wst, iq1_tile8 *t, const int kind) {
    const __m256i rows = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)wst));
    const __m256i m7 = _mm256_set1_epi32(7), m8 = _mm256_set1_epi32(0xff), one = _mm256_set1_epi32(1);
    const __m256i ten = _mm256_set1_epi8(10), eight = _mm256_set1_epi8(8);
    const __m256i lo16 = _mm256_set1_epi32(0xffff);
    __m256i ls[16];
    if (kind == 0) {
        t->d0 = _mm256_mul_ps(halves8(b, wst), _mm256_set1_ps(0.125f));
        for (int ib = 0; ib < 8; ib++) {
            const __m256i qh = _mm256_srli_epi32(dwords8(b + 32 + 2 * ib, rows), 16); /* qh[ib] at 34 + 2ib */
            const __m256i qs = dwords8(b + 2 + 4 * ib, rows);
            ls[2 * ib] = ls[2 * ib + 1] = _mm256_add_epi32(_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 12), m7), 1), one);
            const __m256i neg = _mm256_cmpeq_epi32(_mm256_and_si256(qh, _mm256_set1_epi32(0x8000)), _mm256_set1_epi32(0x8000));
            const __m256i bias = _mm256_blendv_epi8(ten, eight, neg);
            for (int l = 0; l < 4; l++) {
                const __m256i idx = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(qs, 8 * l), m8),
                                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 3 * l), m7), 8));
                iq1_group8(idx, bias, &t->c[8 * ib + 2 * l], &t->c[8 * ib + 2 * l + 1]);
            }
        }
    } else {
        coli_half h[8];
        for (int j = 0; j < 8; j++) h[j] = coli_iq1m_scale((const block_iq1_m *)(b + (size_t)j * wst));
        t->d0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)), _mm256_set1_ps(0.125f));
        for (int ib = 0; ib < 8; ib++) {
            const __m256i qh = dwords8(b + 32 + 2 * ib, rows); /* qh bytes 2ib, 2ib + 1 in the low half */
            const __m256i qs = dwords8(b + 4 * ib, rows);
            const __m256i sc = _mm256_srli_epi32(dwords8(b + 46 + 2 * (ib / 2), rows), 16); /* scale word ib / 2 */
            const int sh = 6 * (ib % 2);
            for (int hf = 0; hf < 2; hf++)
                ls[2 * ib + hf] = _mm256_add_epi32(_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sc, sh + 3 * hf), m7), 1), one);
            for (int l = 0; l < 4; l++) {
                const __m256i nib = _mm256_srli_epi32(qh, 4 * l); /* group l's nibble in bits 0..3 */
                const __m256i idx = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(qs, 8 * l), m8),
                                                    _mm256_slli_epi32(_mm256_and_si256(nib, m7), 8));
                const __m256i neg = _mm256_cmpeq_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(8)), _mm256_set1_epi32(8));
                iq1_group8(idx, _mm256_blendv_epi8(ten, eight, neg), &t->c[8 * ib + 2 * l], &t->c[8 * ib + 2 * l + 1]);
            }
        }
    }
    for (int g = 0; g < 16; g++) t->ls[g] = _mm256_or_si256(ls[g], _mm256_slli_epi32(ls[g], 16));
    const __m256i nine = _mm256_set1_epi32(9);
    for (int k = 0; k < 8; k++)
        t->ls9[k] = _mm256_or_si256(_mm256_and_si256(_mm256_mullo_epi32(ls[2 * k], nine), lo16),
                                    _mm256_slli_epi32(_mm256_mullo_epi32(ls[2 * k + 1], nine), 16));
}

/* super-block i of the tile against G activation rows: s[r * ss + lane] += isum * d0 * dy (fused) */
INL void iq1_tile8_rows(const iq1_tile8 *t, const char *a, size_t as, int i, float *s, size_t ss, const int G) {
    __m256i isum[4];
    const block_q8_K *y[4];
    for (int r = 0; r < G; r++) {
        y[r] = (const block_q8_K *)(a + (size_t)r * as) + i;
        __m256i corr = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            int32_t bp;
            memcpy(&bp, y[r]->bsums + 2 * k, 4);
            corr = _mm256_add_epi32(corr, _mm256_madd_epi16(t->ls9[k], _mm256_set1_epi32(bp)));
        }
        isum[r] = _mm256_sub_epi32(_mm256_setzero_si256(), corr);
    }
    for (int g = 0; g < 16; g++) {
        __m256i p[4];
        for (int k = 0; k < 4; k++) {
            const __m256i c = t->c[4 * g + k];
            for (int r = 0; r < G; r++) {
                int32_t yd;
                memcpy(&yd, y[r]->qs + 16 * g + 4 * k, 4);
                const __m256i m = _mm256_maddubs_epi16(c, _mm256_set1_epi32(yd));
                p[r] = k ? _mm256_add_epi16(p[r], m) : m;
            }
        }
        for (int r = 0; r < G; r++) isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p[r], t->ls[g]));
    }
    for (int r = 0; r < G; r++) {
        float *o = s + (size_t)r * ss;
        const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[r]), t->d0);
        _mm256_storeu_ps(o, _mm256_fmadd_ps(f, _mm256_set1_ps(y[r]->d), _mm256_loadu_ps(o)));
    }
}

INL void iq1_t_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr, const int kind) {
    const int nb = n / QK_K;
    const size_t bsz = kind == 1 ? sizeof(block_iq1_m) : sizeof(block_iq1_s);
    iq1_tile8 t[2];
    for (int r = 0; r < nr; r++) {
        _mm256_storeu_ps(s + (size_t)r * ss, _mm256_setzero_ps());
        _mm256_storeu_ps(s + (size_t)r * ss + 8, _mm256_setzero_ps());
    }
    for (int i = 0; i < nb; i++) {
        for (int h = 0; h < 2; h++) iq1_decode8(w + (size_t)8 * h * wst + (size_t)i * bsz, wst, &t[h], kind);
        int r = 0;
        for (; r + 4 <= nr; r += 4)
            for (int h = 0; h < 2; h++) iq1_tile8_rows(&t[h], a + (size_t)r * as, as, i, s + (size_t)r * ss + 8 * h, ss, 4);
        for (; r < nr; r++)
            for (int h = 0; h < 2; h++) iq1_tile8_rows(&t[h], a + (size_t)r * as, as, i, s + (size_t)r * ss + 8 * h, ss, 1);
    }
}

TGT void vec_dot_iq1_s_q8_K_tiled_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                           int nr) {
    iq1_t_16w(n, (const char *)w, wst, (const char *)a, as, s, ss, nr, 0);
}
TGT void vec_dot_iq1_m_q8_K_tiled_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                           int nr) {
    iq1_t_16w(n, (const char *)w, wst, (const char *)a, as, s, ss, nr, 1);
}
TGT void vec_dot_iq4_xs_q8_K_tiled_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                            int nr) {
    iq4xs_tiled_16w(n, (const char *)w, wst, (const char *)a, as, s, ss, nr);
}

#else
typedef int coli_quant_iq14_avx2_unused;
#endif
