/* quant_avx2.c — AVX2 + FMA + F16C kernels (target attributes per function;
 * the file is compiled with the engine's common flags and only called after
 * coli_cpu_can_avx2()).
 *
 * Integer block sums are exact (same integers as the `_generic` twins); the
 * float accumulation follows llama.cpp's x86 code for an AVX2 build, operation
 * for operation (see quant.h on vec_dot vs vec_dot_mm). Every kernel takes
 * 1..COLI_MAX_NR activation rows and runs the same operations for each row,
 * so a tile of rows gives the bits of a single row. */
#include "quant.h"

#ifdef COLI_X86
#include <immintrin.h>

#include "gcc_dot.h"
#include "prefetch.h"
#include <math.h>
#include <stddef.h>
#include <string.h>

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))

#include "quant_avx2_inl.h"

/* ---- activation quantizers (bit-exact with quantize_row_q8_0/q8_1) ------------- */

INL __m256i q8_block_avx2(const float *x, float *d_out, float *id_out) {
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_andnot_ps(sign, v0);
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v1));
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v2));
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v3));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    *d_out = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    *id_out = id;
    const __m256 mul = _mm256_set1_ps(id);
    enum { rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }; /* a constant expression: clang requires one */
    __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, mul), rnd));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, mul), rnd));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, mul), rnd));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, mul), rnd));
    i0 = _mm256_packs_epi32(i0, i1);
    i2 = _mm256_packs_epi32(i2, i3);
    i0 = _mm256_packs_epi16(i0, i2);
    return _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

TGT void quantize_row_q8_0_avx2(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d, id;
        const __m256i q = q8_block_avx2(x, &d, &id);
        y[i].d = coli_fp32_to_fp16(d);
        _mm256_storeu_si256((__m256i *)y[i].qs, q);
    }
}

TGT void quantize_row_q8_1_avx2(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float d, id;
        const __m256i q = q8_block_avx2(x, &d, &id);
        y[i].d = coli_fp32_to_fp16(d);
        _mm256_storeu_si256((__m256i *)y[i].qs, q);
        const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
        const int sum = hsum_i32_8(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
        y[i].s = coli_fp32_to_fp16(d * (float)sum);
    }
}

TGT void quantize_row_f16_avx2(const float *x, void *vy, int64_t n) {
    coli_half *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = coli_fp32_to_fp16(x[i]);
}

/* ggml quantize_row_q8_K_ref, vectorised bit-exactly: the sign-keeping max
 * is the first element of largest magnitude; x * iscale rounds half to even
 * (nearest_int); bsums from the int8 quants. */
TGT void quantize_row_q8_K_avx2(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (!(amax > 0) || !(amax <= 3.4028235e38f)) {  /* zero (or inf/nan) block, as quantize_row_q8_K_ref */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const __m256 va = _mm256_set1_ps(amax);
        int first = 0;
        for (int j = 0; j < QK_K; j += 8) {
            const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), va, _CMP_EQ_OQ));
            if (mask) { first = j + __builtin_ctz((unsigned)mask); break; }
        }
        const float iscale = -127.f / x[first];
        const __m256 mul = _mm256_set1_ps(iscale);
        enum { rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }; /* a constant expression: clang requires one */
        for (int j = 0; j < QK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                const __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), mul), rnd);
                q[k] = _mm256_min_epi32(_mm256_cvttps_epi32(v), _mm256_set1_epi32(127));
            }
            __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), b);
            const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), b), _mm256_set1_epi16(1));
            __m128i lo = _mm256_castsi256_si128(s32), hi = _mm256_extracti128_si256(s32, 1);
            lo = _mm_hadd_epi32(lo, hi);
            lo = _mm_hadd_epi32(lo, lo);
            y[i].bsums[j / 16] = (int16_t)_mm_extract_epi32(lo, 0);
            y[i].bsums[j / 16 + 1] = (int16_t)_mm_extract_epi32(lo, 1);
        }
        y[i].d = 1 / iscale;
    }
}

/* ---- float rows --------------------------------------------------------------------- */

/* ggml_vec_dot_f32/_f16 on an AVX build: four 8-lane accumulators over
 * steps of 32, reduced (0+2, 1+3), (0+1), then lo+hi and two hadds; the
 * leftover elements are added one by one (f32: in float, f16: in double). */
/* ggml's AVX2 ggml_v_expf: as the AVX-512 one but 2^n applied as fma(j, k, k), and for
 * |n| > 126 the two-factor scaling (s2 * j + s2) * s1, s1 * s1 beyond 192 */
INL __m256 v_expf8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.f), n);
    const __m256 c = _mm256_cmp_ps(an, _mm256_set1_ps(126), _CMP_GT_OQ);
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    if (!_mm256_movemask_ps(c)) return _mm256_fmadd_ps(j, k, k);
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 d = _mm256_cmp_ps(an, _mm256_set1_ps(192), _CMP_GT_OQ);
    return _mm256_or_ps(_mm256_and_ps(d, _mm256_mul_ps(s1, s1)),
                        _mm256_andnot_ps(d, _mm256_or_ps(_mm256_and_ps(c, _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)),
                                                         _mm256_andnot_ps(c, _mm256_fmadd_ps(k, j, k)))));
}

/* coli_swiglu_fn: ggml_vec_swiglu_f32's 8 lanes of the AVX2 build */
TGT void coli_swiglu_avx2(float *x, const float *g, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 e = v_expf8(_mm256_sub_ps(_mm256_setzero_ps(), v));
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(g + i)));
    }
    for (; i < n; i++) x[i] = (x[i] / (1.0f + expf(-x[i]))) * g[i];
}

INL __m256 load_f16x8(const coli_half *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

INL float reduce4_f32x8(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

INL __m256 ld8(const void *p, int i, const int f16) {
    return f16 ? load_f16x8((const coli_half *)p + i) : _mm256_loadu_ps((const float *)p + i);
}
INL float el(const void *p, int i, const int f16) { return f16 ? h2f(((const coli_half *)p)[i]) : ((const float *)p)[i]; }

/* af16: the activation rows' storage (f16, or f32 holding f16 values: attention's
 * query and probabilities widened once, the same products) when the weights are f16 */
INL void fdot_nr_a(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int f16, const int af16,
                   const int nr) {
    __m256 acc[COLI_MAX_NR][4];
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < 4; k++) acc[r][k] = _mm256_setzero_ps();
    const int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int k = 0; k < 4; k++) {
            const __m256 wv = ld8(w, i + 8 * k, f16);
            for (int r = 0; r < nr; r++) acc[r][k] = _mm256_fmadd_ps(wv, ld8(a + r * as, i + 8 * k, af16), acc[r][k]);
        }
    for (int r = 0; r < nr; r++) {
        const void *x = a + r * as;
        const float red = reduce4_f32x8(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
        if (f16) {
            double sumf = red;
            for (int j = np; j < n; j++) sumf += (double)(el(w, j, 1) * el(x, j, af16));
            s[r * ss] = (float)sumf;
        } else { /* the leftover loop as GCC vectorised it for an AVX2 ggml */
            s[r * ss] = coli_gcc_dot((const float *)w + np, (const float *)x + np, n - np, red, 8);
        }
    }
}

INL void fdot_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int f16, const int nr) {
    fdot_nr_a(n, w, a, as, s, ss, f16, f16, nr);
}
INL void fdot_f32a_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    fdot_nr_a(n, w, a, as, s, ss, 1, 0, nr);
}

/* fdot_nr's f16 arithmetic (len % 32 == 0) on its side, the probabilities
 * widened to f32 (f16 values: the same products): a ymm holds 8 value dims,
 * lane l of accumulator k sums cells 8k + l (mod 32) in order, then
 * reduce4_f32x8's adds, each a vertical add.
 *
 * The 32 partial sums per output outlive registers, so the work is blocked
 * for the caches: value dims go in groups of one cache line (32 dims), the
 * cells of a group in blocks of PV_CELLS (64 KB of lines: L2) whose sums are
 * parked in `sums` between blocks (loads and stores: exact). A pass holds 4
 * heads x 16 dims of one lane (cell mod 32) in registers, so each value load
 * serves 4 heads and each probability 2 dims. Each value line comes from
 * memory once for all heads: the next block's are prefetched during this one. */
#define PV_CELLS 1024
#define PV_GROUP 32

/* One pass: lane `lane` of dims 16h .. 16h + 15 of the group for heads 0 .. nh - 1,
 * cells cb + lane, + 32 .. < ce. */
INL void pv_pass_avx2(const coli_half *v, size_t v_stride, const float *p, size_t p_stride, int cb, int ce, int lane,
                      float *sums, const int nh) {
    __m256 acc[4][2];
    for (int j = 0; j < nh; j++)
        for (int b = 0; b < 2; b++) acc[j][b] = _mm256_load_ps(sums + (((size_t)j * PV_GROUP / 8 + b) * 32 + lane) * 8);
    for (int i = cb + lane; i < ce; i += 32) {
        const coli_half *vr = v + (size_t)i * v_stride;
        const __m256 v0 = load_f16x8(vr), v1 = load_f16x8(vr + 8);
        for (int j = 0; j < nh; j++) {
            const __m256 pj = _mm256_broadcast_ss(p + (size_t)j * p_stride + i);
            acc[j][0] = _mm256_fmadd_ps(v0, pj, acc[j][0]);
            acc[j][1] = _mm256_fmadd_ps(v1, pj, acc[j][1]);
        }
    }
    for (int j = 0; j < nh; j++)
        for (int b = 0; b < 2; b++) _mm256_store_ps(sums + (((size_t)j * PV_GROUP / 8 + b) * 32 + lane) * 8, acc[j][b]);
}

/* One 8-dim block's 32 sums -> out, as fdot_nr's reduce (0 + 2) + (1 + 3) of its accumulators, then its lanes */
INL void pv_reduce_avx2(const float *sums, float *out) {
    __m256 t[8];
    for (int l = 0; l < 8; l++)
        t[l] = _mm256_add_ps(_mm256_add_ps(_mm256_load_ps(sums + l * 8), _mm256_load_ps(sums + (16 + l) * 8)),
                             _mm256_add_ps(_mm256_load_ps(sums + (8 + l) * 8), _mm256_load_ps(sums + (24 + l) * 8)));
    for (int l = 0; l < 4; l++) t[l] = _mm256_add_ps(t[l], t[l + 4]);
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(t[0], t[1]), _mm256_add_ps(t[2], t[3])));
}

TGT void coli_pv_rows_f32a_avx2(int len, const coli_half *v, size_t v_stride, int n_d, const float *p,
                                size_t p_stride, float *out, size_t out_stride, int nr) {
    /* [head][8-dim block of the group][lane: cell mod 32][8 dims] */
    float sums[COLI_PV_MAX_HEADS][PV_GROUP / 8][32][8] __attribute__((aligned(32)));
    for (int g0 = 0; g0 < n_d; g0 += PV_GROUP) {
        const int nb = (n_d - g0 < PV_GROUP ? n_d - g0 : PV_GROUP) / 8; /* 8-dim blocks in the group: 2 or 4 */
        for (int j = 0; j < nr; j++) memset(sums[j], 0, (size_t)nb * sizeof sums[j][0]);
        for (int cb = 0; cb < len; cb += PV_CELLS) {
            const int ce = cb + PV_CELLS < len ? cb + PV_CELLS : len;
            /* the next block's lines (or the next group's first block's), a share before each pass */
            const int n_next = ce < len ? (len - ce < PV_CELLS ? len - ce : PV_CELLS) : g0 + PV_GROUP < n_d ? ce - cb : 0;
            const coli_half *next = ce < len ? v + (size_t)ce * v_stride + g0 : v + g0 + PV_GROUP;
            const int passes = (nr + 3) / 4 * (nb / 2) * 32, share = (n_next + passes - 1) / passes;
            int pre = 0;
            for (int j0 = 0; j0 < nr; j0 += 4) {
                const int nh = nr - j0 < 4 ? nr - j0 : 4;
                for (int h = 0; h < nb / 2; h++) {
                    const coli_half *vh = v + g0 + 16 * h;
                    float *sh = &sums[j0][2 * h][0][0];
                    const float *pj = p + (size_t)j0 * p_stride;
                    for (int lane = 0; lane < 32; lane++) {
                        for (const int end = pre + share < n_next ? pre + share : n_next; pre < end; pre++)
                            _mm_prefetch((const char *)(next + (size_t)pre * v_stride), _MM_HINT_T1);
                        switch (nh) { /* a constant head count */
                        case 1: pv_pass_avx2(vh, v_stride, pj, p_stride, cb, ce, lane, sh, 1); break;
                        case 2: pv_pass_avx2(vh, v_stride, pj, p_stride, cb, ce, lane, sh, 2); break;
                        case 3: pv_pass_avx2(vh, v_stride, pj, p_stride, cb, ce, lane, sh, 3); break;
                        default: pv_pass_avx2(vh, v_stride, pj, p_stride, cb, ce, lane, sh, 4); break;
                        }
                    }
                }
            }
        }
        for (int j = 0; j < nr; j++)
            for (int b = 0; b < nb; b++) pv_reduce_avx2(&sums[j][b][0][0], out + (size_t)j * out_stride + g0 + 8 * b);
    }
}

/* llamafile's tinyBLAS<8> (batches, n % 8 == 0): one 8-lane accumulator per
 * output, one fma per 8 elements, hsum at the end. */
INL void fdot_mm_nr_a(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int f16,
                      const int af16, const int nr) {
    __m256 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        const __m256 wv = ld8(w, i, f16);
        for (int r = 0; r < nr; r++) acc[r] = _mm256_fmadd_ps(wv, ld8(a + r * as, i, af16), acc[r]);
    }
    for (int r = 0; r < nr; r++) s[r * ss] = hsum_f32_8(acc[r]);
}
INL void fdot_mm_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int f16, const int nr) {
    fdot_mm_nr_a(n, w, a, as, s, ss, f16, f16, nr);
}
INL void fdot_mm_f32a_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    fdot_mm_nr_a(n, w, a, as, s, ss, 1, 0, nr);
}

/* F16 weights against activations widened to f32 (attention's query and probabilities,
 * f16 values): the bits of the f16_f16 kernels with one conversion per weight load */
TGT void vec_dot_f16_f32a_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_f32a_nr, n, w, (const char *)a, as, s, ss);
}
TGT void vec_dot_f16_f32a_mm_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_mm_f32a_nr, n, w, (const char *)a, as, s, ss);
}
/* Scores of F16 K rows against widened queries, vec_dot_f16_f32a's bits (n % 32 == 0):
 * its 4 accumulators per (row, head) are built one at a time (accumulator k holds
 * elements i + 8k .. + 7 of every step i), KQ_ROWS rows x 4 heads in registers (12
 * chains: enough to cover the FMA latency), so each K load serves 4 heads and each
 * query load KQ_ROWS rows; the 4 land in part[] for the reduce. */
#define KQ_ROWS 3
INL void kq_rows_block_avx2(int n, const coli_half *const rows[KQ_ROWS], const float *q, size_t q_stride,
                            __m256 part[KQ_ROWS][4][4], const int nh) {
    for (int kk = 0; kk < 4; kk++) {
        __m256 acc[KQ_ROWS][4];
        for (int r = 0; r < KQ_ROWS; r++)
            for (int j = 0; j < nh; j++) acc[r][j] = _mm256_setzero_ps();
        for (int i = 8 * kk; i < n; i += 32) {
            __m256 kv[KQ_ROWS];
            for (int r = 0; r < KQ_ROWS; r++) kv[r] = load_f16x8(rows[r] + i);
            for (int j = 0; j < nh; j++) {
                __m256 qv = _mm256_loadu_ps(q + (size_t)j * q_stride + i);
                __asm__("" : "+x"(qv)); /* one load for KQ_ROWS rows, not one folded into each fma */
                for (int r = 0; r < KQ_ROWS; r++) acc[r][j] = _mm256_fmadd_ps(kv[r], qv, acc[r][j]);
            }
        }
        for (int r = 0; r < KQ_ROWS; r++)
            for (int j = 0; j < nh; j++) part[r][j][kk] = acc[r][j];
    }
}

TGT void coli_kq_rows_f32a_avx2(int n, const coli_half *k, size_t k_stride, int n_rows, const float *q, size_t q_stride,
                                float *s, size_t s_stride, int nr) {
    const size_t row_bytes = (size_t)n * sizeof(coli_half);
    for (int c = 0; c < n_rows; c += KQ_ROWS) {
        const int m = n_rows - c < KQ_ROWS ? n_rows - c : KQ_ROWS;
        const coli_half *rows[KQ_ROWS]; /* the tail repeats its last row, the extra scores dropped */
        for (int r = 0; r < KQ_ROWS; r++) rows[r] = k + (size_t)(c + (r < m ? r : m - 1)) * k_stride;
        for (int r = c + 2 * KQ_ROWS; r < c + 3 * KQ_ROWS && r < n_rows; r++) /* rows far apart: the prefetcher misses them */
            for (size_t o = 0; o < row_bytes; o += 64) _mm_prefetch((const char *)(k + (size_t)r * k_stride) + o, _MM_HINT_T0);
        for (int j0 = 0; j0 < nr; j0 += 4) {
            const int nh = nr - j0 < 4 ? nr - j0 : 4;
            __m256 part[KQ_ROWS][4][4];
            const float *qj = q + (size_t)j0 * q_stride;
            switch (nh) { /* a constant head count */
            case 1: kq_rows_block_avx2(n, rows, qj, q_stride, part, 1); break;
            case 2: kq_rows_block_avx2(n, rows, qj, q_stride, part, 2); break;
            case 3: kq_rows_block_avx2(n, rows, qj, q_stride, part, 3); break;
            default: kq_rows_block_avx2(n, rows, qj, q_stride, part, 4); break;
            }
            for (int j = 0; j < nh; j++) {
                float *sj = s + (size_t)(j0 + j) * s_stride + c;
                for (int r = 0; r < m; r++) sj[r] = reduce4_f32x8(part[r][j][0], part[r][j][1], part[r][j][2], part[r][j][3]);
            }
        }
    }
}

TGT void coli_f16_to_f32_avx2(const void *src, float *dst, int64_t n) {
    const coli_half *x = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16x8(x + i));
    for (; i < n; i++) dst[i] = h2f(x[i]);
}

TGT void vec_dot_f32_f32_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_f16_f16_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_nr, n, w, (const char *)a, as, s, ss, 1);
}
TGT void vec_dot_f32_f32_mm_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_mm_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_f16_f16_mm_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_mm_nr, n, w, (const char *)a, as, s, ss, 1);
}

INL __m256 load_bf16x8(const coli_bf16 *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* ggml's AVX2 bf16 dot multiplies then adds (no fma) in 4 accumulators. */
INL void bf16_nr(int n, const coli_bf16 *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    __m256 acc[COLI_MAX_NR][4];
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < 4; k++) acc[r][k] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int k = 0; k < 4; k++) {
            const __m256 wv = load_bf16x8(w + i + 8 * k);
            for (int r = 0; r < nr; r++)
                acc[r][k] = _mm256_add_ps(
                    _mm256_mul_ps(wv, load_bf16x8((const coli_bf16 *)(a + r * as) + i + 8 * k)), acc[r][k]);
        }
    }
    for (int r = 0; r < nr; r++) {
        const coli_bf16 *x = (const coli_bf16 *)(a + r * as);
        const __m256 t = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][2]), _mm256_add_ps(acc[r][1], acc[r][3]));
        double sumf = hsum_f32_8(t);
        for (int j = i; j < n; j++) sumf += (double)(coli_bf16_to_fp32(w[j]) * coli_bf16_to_fp32(x[j]));
        s[r * ss] = (float)sumf;
    }
}

TGT void vec_dot_bf16_bf16_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, bf16_nr, n, (const coli_bf16 *)w, (const char *)a, as, s, ss);
}

/* ---- 32-element blocks with Q8_0 activations ---------------------------------------- */

/* kind: 0 = Q8_0, 1 = Q4_0, 2 = Q5_0 — signed weight bytes, sign trick. */
INL __m256i w_bytes_q(const void *wb, int ib, const int kind, float *dw) {
    if (kind == 0) {
        const block_q8_0 *x = (const block_q8_0 *)wb + ib;
        *dw = h2f(x->d);
        return _mm256_loadu_si256((const __m256i *)x->qs);
    }
    if (kind == 1) {
        const block_q4_0 *x = (const block_q4_0 *)wb + ib;
        *dw = h2f(x->d);
        return _mm256_sub_epi8(nibbles_32(x->qs), _mm256_set1_epi8(8));
    }
    const block_q5_0 *x = (const block_q5_0 *)wb + ib;
    *dw = h2f(x->d);
    const __m256i hi = _mm256_andnot_si256(bits_32(x->qh), _mm256_set1_epi8((char)0xF0));
    return _mm256_or_si256(nibbles_32(x->qs), hi);  /* q - 16 as int8 */
}

/* ggml_vec_dot_q{8,4,5}_0_q8_0 and tinyBLAS_Q0_AVX alike: one 8-lane
 * accumulator per row, acc = fma(dw * dy, float(int lanes), acc) block after
 * block, then hsum_float_8. */
INL void q8_0_family_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int kind,
                        const int nr) {
    const int nb = n / QK8_0;
    __m256 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ib++) {
        float dw;
        const __m256i wq = w_bytes_q(w, ib, kind, &dw);
        const __m256i aw = _mm256_sign_epi8(wq, wq);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib;
            const __m256i p = dot_i8(aw, wq, _mm256_loadu_si256((const __m256i *)y->qs));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(y->d)), _mm256_cvtepi32_ps(p), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = hsum_f32_8(acc[r]);
}

/* The same for 16 weight rows, 4 at a time against 1..2 activation rows:
 * per (weight row, activation row) the same fma chain, so the same bits, but
 * 4-8 independent chains instead of one (a single row's chain waits on the
 * fma latency), and the next tile prefetched for decode (each weight read
 * once; the hardware prefetcher stops at every 4 KiB page). */
#define Q0_W 4 /* weight rows per pass */

INL void q8_0_family_4w_nr(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss,
                           const int kind, const char *pf, int pf_lines, const int nr) {
    __m256 acc[Q0_W][2];
    for (int j = 0; j < Q0_W; j++)
        for (int r = 0; r < nr; r++) acc[j][r] = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ib++) {
        for (int l = ib * pf_lines / nb; l < (ib + 1) * pf_lines / nb; l++) COLI_PREFETCH_W(pf + 64 * (size_t)l);
        __m256i y[2];
        float dy[2];
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *yb = (const block_q8_0 *)(a + (size_t)r * as) + ib;
            y[r] = _mm256_loadu_si256((const __m256i *)yb->qs);
            dy[r] = h2f(yb->d);
        }
        for (int j = 0; j < Q0_W; j++) {
            float dw;
            const __m256i wq = w_bytes_q(w + (size_t)j * wst, ib, kind, &dw);
            const __m256i aw = _mm256_sign_epi8(wq, wq);
            for (int r = 0; r < nr; r++)
                acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dy[r]), _mm256_cvtepi32_ps(dot_i8(aw, wq, y[r])), acc[j][r]);
        }
    }
    for (int j = 0; j < Q0_W; j++)
        for (int r = 0; r < nr; r++) s[(size_t)r * ss + j] = hsum_f32_8(acc[j][r]);
}

/* Batches: per weight row, 4 activation rows at a time, with every block's
 * scale product dw * dy formed 8 blocks at a time (the same float products
 * ggml forms one by one) and read back as a broadcast, so a (weight row,
 * activation row, block) costs sign, maddubs, madd, convert and fma. */
#define Q0_BATCH_BLOCKS 512 /* rows up to 16384 elements (the scales on the stack) */
#define Q0_DY_STRIDE (Q0_BATCH_BLOCKS + 8)

INL void q0_batch_nr(int nb, const char *wr, const float *dxf, const char *a, size_t as, const float *dyf,
                     float *s, size_t ss, const int kind, const char *pf, int pf_lines, const int nr) {
    __m256 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int i0 = 0; i0 < nb; i0 += 8) {
        const int cnt = nb - i0 < 8 ? nb - i0 : 8;
        for (int l = i0 * pf_lines / nb; l < (i0 + cnt) * pf_lines / nb; l++) COLI_PREFETCH_W(pf + 64 * (size_t)l);
        float d[COLI_MAX_NR][8];
        const __m256 dx = _mm256_loadu_ps(dxf + i0); /* dxf/dyf are padded to whole 8s */
        for (int r = 0; r < nr; r++) _mm256_storeu_ps(d[r], _mm256_mul_ps(dx, _mm256_loadu_ps(dyf + (size_t)r * Q0_DY_STRIDE + i0)));
        for (int k = 0; k < cnt; k++) {
            const int ib = i0 + k;
            float dw;
            const __m256i wq = w_bytes_q(wr, ib, kind, &dw);
            const __m256i aw = _mm256_sign_epi8(wq, wq);
            for (int r = 0; r < nr; r++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
                const __m256i p = dot_i8(aw, wq, _mm256_loadu_si256((const __m256i *)y->qs));
                acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[r][k]), _mm256_cvtepi32_ps(p), acc[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++) s[(size_t)r * ss] = hsum_f32_8(acc[r]);
}

INL void q0_batch16(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                    const int kind) {
    const int bs = kind == 0 ? (int)sizeof(block_q8_0) : kind == 1 ? (int)sizeof(block_q4_0) : (int)sizeof(block_q5_0);
    float dxf[16][Q0_BATCH_BLOCKS + 8], dyf[COLI_MAX_NR * Q0_DY_STRIDE];
    const int pf_lines = (int)((16 * wst + 63) / 64);
    for (int j = 0; j < 16; j++)
        for (int ib = 0; ib < nb + 8; ib++) {
            coli_half h = 0;
            if (ib < nb) memcpy(&h, w + (size_t)j * wst + (size_t)ib * bs, 2);
            dxf[j][ib] = h2f(h);
        }
    for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
        const int rn = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
        const char *ar = a + (size_t)r0 * as;
        for (int r = 0; r < rn; r++)
            for (int ib = 0; ib < nb + 8; ib++)
                dyf[(size_t)r * Q0_DY_STRIDE + ib] = ib < nb ? h2f(((const block_q8_0 *)(ar + (size_t)r * as))[ib].d) : 0.0f;
        for (int j = 0; j < 16; j++) {
            float *sj = s + (size_t)r0 * ss + j;
            const char *wj = w + (size_t)j * wst;
            /* the first row group streams the weights: fetch the next tile meanwhile */
            const int l0 = j * pf_lines / 16, pl = r0 == 0 ? (j + 1) * pf_lines / 16 - l0 : 0;
            const char *pf = w + 16 * wst + 64 * (size_t)l0;
            COLI_DISPATCH_NR(rn, q0_batch_nr, nb, wj, dxf[j], ar, as, dyf, sj, ss, kind, pf, pl);
        }
    }
}

INL void q8_0_family_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                         const int kind) {
    const int nb = n / QK8_0;
    if (nr > 2 && nb <= Q0_BATCH_BLOCKS) {
        q0_batch16(nb, w, wst, a, as, s, ss, nr, kind);
        return;
    }
    if (nr > 2) { /* batches: 4 activation rows per weight row load the weights least */
        for (int j = 0; j < 16; j++)
            for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
                const int rows = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
                COLI_DISPATCH_NR(rows, q8_0_family_nr, n, w + (size_t)j * wst, a + (size_t)r0 * as, as,
                                 s + (size_t)r0 * ss + j, ss, kind);
            }
        return;
    }
    const int pf_lines = (int)((16 * wst + 63) / 64);  /* the next tile, spread over the passes */
    for (int r0 = 0; r0 < nr; r0 += 2) {
        const int two = nr - r0 >= 2;
        for (int j = 0; j < 16; j += Q0_W) {
            const int l0 = j * pf_lines / 16, l1 = (j + Q0_W) * pf_lines / 16;
            const char *pf = w + 16 * wst + 64 * (size_t)l0;
            const int pl = r0 == 0 ? l1 - l0 : 0;
            const char *ar = a + (size_t)r0 * as;
            float *sr = s + (size_t)r0 * ss + j;
            if (two) q8_0_family_4w_nr(nb, w + (size_t)j * wst, wst, ar, as, sr, ss, kind, pf, pl, 2);
            else q8_0_family_4w_nr(nb, w + (size_t)j * wst, wst, ar, as, sr, ss, kind, pf, pl, 1);
        }
    }
}

TGT void vec_dot_q8_0_q8_0_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                    int nr) {
    q8_0_family_16w(n, w, wst, a, as, s, ss, nr, 0);
}
TGT void vec_dot_q4_0_q8_0_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                    int nr) {
    q8_0_family_16w(n, w, wst, a, as, s, ss, nr, 1);
}
TGT void vec_dot_q5_0_q8_0_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                    int nr) {
    q8_0_family_16w(n, w, wst, a, as, s, ss, nr, 2);
}

/* Q4_0 repacked by llama.cpp (n_out % 8 == 0): acc = fma(float(isum), dw * dy, acc) per block */
INL void q4_0_repacked_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    const int nb = n / QK4_0;
    float acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = 0.0f;
    for (int ib = 0; ib < nb; ib++) {
        float dw;
        const __m256i wq = w_bytes_q(w, ib, 1, &dw);
        const __m256i aw = _mm256_sign_epi8(wq, wq);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib;
            const int isum = hsum_i32_8(dot_i8(aw, wq, _mm256_loadu_si256((const __m256i *)y->qs)));
            acc[r] = fmaf((float)isum, dw * h2f(y->d), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = acc[r];
}

/* The repacked arithmetic for 16 weight rows, 8 per ymm lane set: a block's
 * quant bytes of 8 rows transposed in registers (row j's dword k -> lane j of
 * q[k]); the nibbles, q + 8 as unsigned bytes, times the activation's signed
 * bytes (maddubs: at most 2 * 15 * 127 per 16-bit lane, 8 of them summed stay
 * below 32767), pairs summed to the row's lanes, -8 * sum(y) added: each lane
 * ends on the row's exact integer sum. */
/* h: 0, the 8 rows as stored, wst apart; 1 or 2, a half of the tile at w (r16b_words8) */
INL void q4_0_block8(const char *w, size_t wst, int ib, __m256i q[4], const int h) {
    if (h)
        r16b_words8(w, ib, h, q);
    else
        transpose8x4(w + (size_t)ib * sizeof(block_q4_0) + offsetof(block_q4_0, qs), wst, q);
}

INL __m256 q4_0_scales8(const char *w, size_t wst, int ib, const int h) {
    return h ? r16b_scales8(w, ib, h) : halves8(w + (size_t)ib * sizeof(block_q4_0), wst);
}

/* -8 * sum of a Q8_0 block's quants */
INL int q8_0_neg8sum(const block_q8_0 *y) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)y->qs));
    return -8 * hsum_i32_8(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

INL __m256i q4_0_isum8(const __m256i q[4], const block_q8_0 *y, int ncs) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i p = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) {
        int lo, hi;
        memcpy(&lo, y->qs + 4 * k, 4);
        memcpy(&hi, y->qs + 16 + 4 * k, 4);
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(q[k], m4), _mm256_set1_epi32(lo)));
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q[k], 4), m4),
                                                     _mm256_set1_epi32(hi)));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)), _mm256_set1_epi32(ncs));
}

#define Q4_0_ROWS 64 /* activation rows per pass over an 8-row weight group */

/* 8 weight rows (one group) against nr activation rows, accumulators in
 * registers (nr <= COLI_MAX_NR); h as q4_0_block8's */
INL void q4_0_8w_few(int nb, const char *w, size_t wst, const char *a, size_t as, const int *ncs, float *s, size_t ss,
                     const int h, const int nr) {
    __m256 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    const int pf_lines = h ? 0 : (int)((8 * wst + 63) / 64); /* the next 8 rows: see the 16-row kernels (a tile: none) */
    for (int ib = 0; ib < nb; ib++) {
        for (int l = ib * pf_lines / nb; l < (ib + 1) * pf_lines / nb; l++) COLI_PREFETCH_W(w + 8 * wst + 64 * (size_t)l);
        const __m256 dw = q4_0_scales8(w, wst, ib, h);
        __m256i q[4];
        q4_0_block8(w, wst, ib, q, h);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
            const __m256i isum = q4_0_isum8(q, y, ncs[(size_t)r * nb + ib]);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(h2f(y->d))), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) _mm256_storeu_ps(s + (size_t)r * ss, acc[r]);
}

/* r16: w is a tile coli_repack_b32_r16 made */
INL void q4_0_mm_16w(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss, int nr,
                     const int r16) {
    const int nb = n / QK4_0;
    int pass = 8192 / nb < COLI_MAX_NR ? COLI_MAX_NR : 8192 / nb; /* rows whose sums fit 32 KiB */
    if (pass > Q4_0_ROWS) pass = Q4_0_ROWS;
    if (pass > nr) pass = nr;
    int ncs[(size_t)pass * nb];
    float acc[Q4_0_ROWS][8];
    for (int r0 = 0; r0 < nr; r0 += pass) {
        const int rn = nr - r0 < pass ? nr - r0 : pass;
        const char *ar = (const char *)a + (size_t)r0 * as;
        for (int r = 0; r < rn; r++)
            for (int ib = 0; ib < nb; ib++) ncs[(size_t)r * nb + ib] = q8_0_neg8sum((const block_q8_0 *)(ar + (size_t)r * as) + ib);
        for (int g = 0; g < 16; g += 8) {
            const char *wg = r16 ? (const char *)w : (const char *)w + (size_t)g * wst;
            const int h = r16 ? 1 + g / 8 : 0;
            float *sg = s + (size_t)r0 * ss + g;
            if (rn <= COLI_MAX_NR) {
                COLI_DISPATCH_NR(rn, q4_0_8w_few, nb, wg, wst, ar, as, ncs, sg, ss, h);
                continue;
            }
            memset(acc, 0, (size_t)rn * sizeof acc[0]);
            const int pf_lines = r0 == 0 && !r16 ? (int)((8 * wst + 63) / 64) : 0; /* the next 8 rows */
            for (int ib = 0; ib < nb; ib++) {
                for (int l = ib * pf_lines / nb; l < (ib + 1) * pf_lines / nb; l++)
                    COLI_PREFETCH_W(wg + 8 * wst + 64 * (size_t)l);
                const __m256 dw = q4_0_scales8(wg, wst, ib, h);
                __m256i q[4];
                q4_0_block8(wg, wst, ib, q, h);
                for (int r = 0; r < rn; r++) {
                    const block_q8_0 *y = (const block_q8_0 *)(ar + (size_t)r * as) + ib;
                    const __m256i isum = q4_0_isum8(q, y, ncs[(size_t)r * nb + ib]);
                    const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(h2f(y->d)));
                    _mm256_storeu_ps(acc[r], _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, _mm256_loadu_ps(acc[r])));
                }
            }
            for (int r = 0; r < rn; r++) memcpy(sg + (size_t)r * ss, acc[r], sizeof acc[r]);
        }
    }
}

TGT void vec_dot_q4_0_q8_0_mm_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                       size_t ss, int nr) {
    q4_0_mm_16w(n, w, wst, a, as, s, ss, nr, 0);
}
TGT void vec_dot_q4_0_q8_0_r16_mm_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                           size_t ss, int nr) {
    q4_0_mm_16w(n, w, wst, a, as, s, ss, nr, 1);
}

TGT void vec_dot_q4_0_q8_0_mm_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q4_0_repacked_nr, n, w, (const char *)a, as, s, ss);
}

TGT void vec_dot_q8_0_q8_0_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q8_0_family_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_q4_0_q8_0_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q8_0_family_nr, n, w, (const char *)a, as, s, ss, 1);
}
TGT void vec_dot_q5_0_q8_0_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q8_0_family_nr, n, w, (const char *)a, as, s, ss, 2);
}

/* Q4_1 / Q5_1 with Q8_1: unsigned weights, sum = d*dy*q.y + m*s. */
INL void q8_1_family_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int kind,
                        const int nr) {
    const int nb = n / QK8_1;
    __m256 acc[COLI_MAX_NR];
    float summs[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) { acc[r] = _mm256_setzero_ps(); summs[r] = 0.0f; }
    for (int ib = 0; ib < nb; ib++) {
        float dw, mw;
        __m256i wq;
        if (kind == 1) {
            const block_q4_1 *x = (const block_q4_1 *)w + ib;
            dw = h2f(x->d);
            mw = h2f(x->m);
            wq = nibbles_32(x->qs);
        } else {
            const block_q5_1 *x = (const block_q5_1 *)w + ib;
            dw = h2f(x->d);
            mw = h2f(x->m);
            wq = _mm256_or_si256(nibbles_32(x->qs), _mm256_and_si256(bits_32(x->qh), _mm256_set1_epi8(0x10)));
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_1 *y = (const block_q8_1 *)(a + r * as) + ib;
            const __m256i p16 = _mm256_maddubs_epi16(wq, _mm256_loadu_si256((const __m256i *)y->qs));
            const __m256i p = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
            summs[r] += mw * h2f(y->s);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(y->d)), _mm256_cvtepi32_ps(p), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = hsum_f32_8(acc[r]) + summs[r];
}

TGT void vec_dot_q4_1_q8_1_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q8_1_family_nr, n, w, (const char *)a, as, s, ss, 1);
}
TGT void vec_dot_q5_1_q8_1_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q8_1_family_nr, n, w, (const char *)a, as, s, ss, 2);
}

/* ---- K-quants --------------------------------------------------------------------- */

/* sum_j mins[j] * (bsums[2j] + bsums[2j+1]) as 4 int32 lanes */
INL __m128i k4_mins_dot(__m128i mins16, const int16_t *bsums) {
    const __m256i q8sums = _mm256_loadu_si256((const __m256i *)bsums);
    const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
    return _mm_madd_epi16(mins16, q8s);
}

/* Broadcast 16-bit element i of a 128-bit lane to all 16 lanes. */
INL __m256i bcast16(__m256i v, int i) { return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)((2 * i) | ((2 * i + 1) << 8)))); }

/* hbits: 32 bytes of Q5_K qh; returns 0x10 where bit `bit` is set. */
INL __m256i hbit_10(__m256i hbits, int bit) {
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(bit)), _mm256_set1_epi8(1)), 4);
}

/* Q4_K / Q5_K (five) as ggml multiplies them without repacking:
 *   vec_dot (ggml_vec_dot_q{4,5}_K_q8_K, AVX2): per super-block
 *       acc = fma(d * dy, float(sumi lanes), acc) in 8 lanes, the mins'
 *       products in 4 float lanes (Q4_K) or one float (Q5_K), added at the end;
 *   tiled (its tiled K-quant matmul, 8+ rows): the exact integer sums
 *       s1 = sum of scale * (q . y), s2 = sum of min * bsum, then
 *       r = float(s1) * d - dmin * float(s2) (one fnmadd), acc = fma(r, dy, acc). */
INL void q45_K_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int five,
                  const int tiled, const int nr) {
    const int nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc[COLI_MAX_NR];
    __m128 acc_m[COLI_MAX_NR];  /* vec_dot, Q4_K: the mins' products in 4 lanes */
    float summs[COLI_MAX_NR];   /* vec_dot, Q5_K: ggml adds them up in one float; tiled: the result */
    for (int r = 0; r < nr; r++) { acc[r] = _mm256_setzero_ps(); acc_m[r] = _mm_setzero_ps(); summs[r] = 0.0f; }
    for (int i = 0; i < nb; i++) {
        const uint8_t *qs, *scp;
        float dx, dminx;
        __m256i hbits = _mm256_setzero_si256();
        if (five) {
            const block_q5_K *x = (const block_q5_K *)w + i;
            qs = x->qs; scp = x->scales; dx = h2f(x->d); dminx = h2f(x->dmin);
            hbits = _mm256_loadu_si256((const __m256i *)x->qh);
        } else {
            const block_q4_K *x = (const block_q4_K *)w + i;
            qs = x->qs; scp = x->scales; dx = h2f(x->d); dminx = h2f(x->dmin);
        }
        uint32_t utmp[4];
        coli_k4_scales_mins(scp, utmp);
        const __m256i mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32((int)utmp[3], (int)utmp[2], (int)utmp[1], (int)utmp[0]));
        const __m128i sc128 = _mm256_castsi256_si128(mins_and_scales);
        const __m256i scales = _mm256_insertf128_si256(_mm256_castsi128_si256(sc128), sc128, 1);
        const __m128i mins16 = _mm256_extracti128_si256(mins_and_scales, 1);
        __m256i sumi[COLI_MAX_NR];
        int32_t imin[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
            const __m128i prod = k4_mins_dot(mins16, y->bsums);
            if (tiled || five) {
                int32_t p[4];
                _mm_storeu_si128((__m128i *)p, prod);
                imin[r] = (p[0] + p[1]) + (p[2] + p[3]);
                if (!tiled) summs[r] = fmaf(-y->d * dminx, (float)imin[r], summs[r]);
            } else {
                acc_m[r] = _mm_fmadd_ps(_mm_set1_ps(-y->d * dminx), _mm_cvtepi32_ps(prod), acc_m[r]);
            }
            sumi[r] = _mm256_setzero_si256();
        }
        for (int j = 0; j < QK_K / 64; j++) {
            const __m256i scale_l = bcast16(scales, 2 * j + 0);
            const __m256i scale_h = bcast16(scales, 2 * j + 1);
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i ql = _mm256_and_si256(bits, m4);
            __m256i qh = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            if (five) {
                ql = _mm256_or_si256(ql, hbit_10(hbits, 2 * j));
                qh = _mm256_or_si256(qh, hbit_10(hbits, 2 * j + 1));
            }
            for (int r = 0; r < nr; r++) {
                const int8_t *q8 = ((const block_q8_K *)(a + r * as) + i)->qs + 64 * j;
                const __m256i pl = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(ql, _mm256_loadu_si256((const __m256i *)q8)));
                const __m256i ph = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(qh, _mm256_loadu_si256((const __m256i *)(q8 + 32))));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(pl, ph));
            }
        }
        for (int r = 0; r < nr; r++) {
            const float dy = ((const block_q8_K *)(a + r * as) + i)->d;
            if (tiled) {
                const float res = fmaf(-dminx, (float)imin[r], (float)hsum_i32_8(sumi[r]) * dx);
                summs[r] = fmaf(res, dy, summs[r]);
            } else {
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dy * dx), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        __m128 m = acc_m[r];
        m = _mm_add_ps(m, _mm_movehl_ps(m, m));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        s[r * ss] = tiled ? summs[r] : hsum_f32_8(acc[r]) + (five ? summs[r] : _mm_cvtss_f32(m));
    }
}

/* Q4_K as llama.cpp computes it on x86: the weights are repacked at load
 * (block_q4_Kx8) and multiplied by ggml_gemv/gemm_q4_K_8x8_q8_K, which sum
 * each output in float as
 *   gemv (one row):          per super-block, acc  = fma(isum, d * dy, acc),
 *                                             accm = fma(imin, dmin * dy, accm)
 *   gemm (groups of 4 rows): the same per 64 elements (two sub-blocks)
 * and return acc - accm; isum / imin are the exact integer sums (quants with
 * their 6-bit scales / bsums with their mins). */
INL __m128i reduce4_i32x8(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
}

INL void q4_K_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int gemm, const int nr) {
    const int nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    float acc[COLI_MAX_NR], accm[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = accm[r] = 0.0f;
    for (int i = 0; i < nb; i++) {
        const block_q4_K *x = (const block_q4_K *)w + i;
        const float dx = h2f(x->d), dminx = h2f(x->dmin);
        uint32_t utmp[4];
        coli_k4_scales_mins(x->scales, utmp);
        const uint8_t *sc = (const uint8_t *)utmp;
        const __m128i mins16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)utmp[3], (int)utmp[2]));
        __m256i lo[4], hi[4], sl[4], sh[4];
        for (int sb = 0; sb < 4; sb++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * sb));
            lo[sb] = _mm256_and_si256(bits, m4);
            hi[sb] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            sl[sb] = _mm256_set1_epi16(sc[2 * sb]);
            sh[sb] = _mm256_set1_epi16(sc[2 * sb + 1]);
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
            __m256i v[4];
            for (int sb = 0; sb < 4; sb++) {
                const __m256i pl = _mm256_maddubs_epi16(lo[sb], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * sb)));
                const __m256i ph = _mm256_maddubs_epi16(hi[sb], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * sb + 32)));
                v[sb] = _mm256_add_epi32(_mm256_madd_epi16(pl, sl[sb]), _mm256_madd_epi16(ph, sh[sb]));
            }
            int32_t isum[4], imin[4];
            _mm_storeu_si128((__m128i *)isum, reduce4_i32x8(v[0], v[1], v[2], v[3]));
            _mm_storeu_si128((__m128i *)imin, k4_mins_dot(mins16, y->bsums));
            const float dd = dx * y->d, dm = dminx * y->d;
            if (gemm) {
                for (int sb = 0; sb < 4; sb++) {
                    acc[r] = fmaf((float)isum[sb], dd, acc[r]);
                    accm[r] = fmaf((float)imin[sb], dm, accm[r]);
                }
            } else {
                acc[r] = fmaf((float)(isum[0] + isum[1] + isum[2] + isum[3]), dd, acc[r]);
                accm[r] = fmaf((float)(imin[0] + imin[1] + imin[2] + imin[3]), dm, accm[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = acc[r] - accm[r];
}

/* The same two arithmetics for 16 weight rows, 8 per ymm (rows in lanes, as
 * llama.cpp's block_q4_Kx8 has them; transposed here once per super-block
 * for up to Q4_0_ROWS activation rows): every lane ends on one output's exact
 * integer sums. Nibbles times Q8_K bytes with maddubs (at most 2 * 15 * 128 per
 * 16-bit lane; 8 of them summed stay below 32767), the 6-bit scales applied by
 * madd against the scale in both halves of each 32-bit lane, the mins against
 * the bsums pair (min0 | min1 << 16) . (b0 | b1 << 16). */

/* r[i]: 8 int32 of row i -> r[j]: int32 j of the 8 rows */
INL void transpose8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int q = 0; q < 2; q++) {
        u[4 * q + 0] = _mm256_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 1] = _mm256_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 2] = _mm256_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
        u[4 * q + 3] = _mm256_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
        r[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
}

/* d, dmin, the scales (sc[k]: scale k in both 16-bit halves) and the min pairs
 * (mn[g]: min 2g | min 2g+1 << 16) of super-block base of the 8 rows, in lanes */
INL void q4_K_scales8(const char *base, size_t wst, __m256 *dxp, __m256 *dmxp, __m256i sc[8], __m256i mn[4],
                      const int r16) {
    const __m256i m6 = _mm256_set1_epi32(0x3F);
    const __m256i kmask1 = _mm256_set1_epi32(0x3f3f3f3f), kmask2 = _mm256_set1_epi32(0x0f0f0f0f),
                  kmask3 = _mm256_set1_epi32(0x03030303);
    __m256i head[4]; /* the first 16 bytes of each row's block: d | dmin << 16, then 12 scale bytes */
    if (r16) /* a repacked tile's head words, this half's 8 rows in lanes (COLI_R16_AT) */
        for (int k = 0; k < 4; k++) head[k] = _mm256_loadu_si256((const __m256i *)(base + 64 * k));
    else
        transpose8x4(base, wst, head);
    const __m256i dd = head[0];
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    const __m256 dx = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(
        _mm256_packus_epi32(_mm256_and_si256(dd, lo16), _mm256_setzero_si256()), 0x08)));
    const __m256 dmx = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(
        _mm256_packus_epi32(_mm256_srli_epi32(dd, 16), _mm256_setzero_si256()), 0x08)));
    /* the 12 scale bytes of each row, unpacked in lanes as coli_k4_scales_mins does */
    __m256i u0 = head[1], u1 = head[2];
    const __m256i u2 = head[3];
    const __m256i u3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), kmask2),
                                       _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), kmask3), 4));
    const __m256i mlo = _mm256_and_si256(u1, kmask1); /* mins 0..3 */
    u1 = _mm256_or_si256(_mm256_and_si256(u2, kmask2),
                         _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), kmask3), 4));
    u0 = _mm256_and_si256(u0, kmask1); /* scales 0..3; u1: scales 4..7; u3: mins 4..7 */
    for (int k = 0; k < 4; k++) {
        const __m256i s0 = _mm256_and_si256(_mm256_srli_epi32(u0, 8 * k), m6);
        const __m256i s1 = _mm256_and_si256(_mm256_srli_epi32(u1, 8 * k), m6);
        sc[k] = _mm256_or_si256(s0, _mm256_slli_epi32(s0, 16));
        sc[4 + k] = _mm256_or_si256(s1, _mm256_slli_epi32(s1, 16));
    }
    for (int g = 0; g < 2; g++) {
        const __m256i a0 = _mm256_and_si256(_mm256_srli_epi32(mlo, 16 * g), m6);
        const __m256i a1 = _mm256_and_si256(_mm256_srli_epi32(mlo, 16 * g + 8), m6);
        const __m256i b0 = _mm256_and_si256(_mm256_srli_epi32(u3, 16 * g), m6);
        const __m256i b1 = _mm256_and_si256(_mm256_srli_epi32(u3, 16 * g + 8), m6);
        mn[g] = _mm256_or_si256(a0, _mm256_slli_epi32(a1, 16));
        mn[2 + g] = _mm256_or_si256(b0, _mm256_slli_epi32(b1, 16));
    }
    *dxp = dx;
    *dmxp = dmx;
}

/* `gemm` of the 8-row Q4_K kernels: 0 the repacked gemv's float steps, 1 its
 * gemm's, Q4_K_TILED ggml's tiled matmul of weights not repacked (q45_K_nr):
 * per super-block r = float(isum) * d - dmin * float(imin) (one fnmadd), then
 * acc = fma(r, dy, acc) -- each lane one row, the same operations in order. */
#define Q4_K_TILED 2
INL __m256 q4_K_tiled_res(__m256i itot, __m256i mtot, __m256 dx, __m256 dmx) {
    return _mm256_fnmadd_ps(dmx, _mm256_cvtepi32_ps(mtot), _mm256_mul_ps(_mm256_cvtepi32_ps(itot), dx));
}

/* 1..4 activation rows (decode): the 8 rows' words transposed from 128-bit
 * loads (transpose8x4) and used as they come; the same integer sums, the same
 * float steps as q4_K_8w. */
/* r16: w is half (0 or 32 bytes in) of a tile repacked by coli_repack_q4_K_r16 (COLI_R16_AT) */
INL void q4_K_8w_few(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss,
                     const int gemm, const int r16, const int nr) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const int pf_lines = (int)((8 * wst + 63) / 64);
    __m256 fa[COLI_MAX_NR], fm[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) fa[r] = fm[r] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const char *base = w + (size_t)i * sizeof(block_q4_K);
        for (int l = r16 ? 0 : i * pf_lines / nb; !r16 && l < (i + 1) * pf_lines / nb; l++) /* r16: one stream */
            COLI_PREFETCH_W(w + 8 * wst + 64 * (size_t)l);
        __m256 dx, dmx;
        __m256i sc[8], mn[4];
        q4_K_scales8(r16 ? COLI_R16_AT(w, i, 0) : base, wst, &dx, &dmx, sc, mn, r16);
        __m256i itot[COLI_MAX_NR], mtot[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) itot[r] = mtot[r] = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) { /* words 8g..8g+7: sub-blocks 2g (low nibbles), 2g + 1 (high) */
            __m256i lo[COLI_MAX_NR], hi[COLI_MAX_NR];
            for (int r = 0; r < nr; r++) lo[r] = hi[r] = _mm256_setzero_si256();
            for (int c = 0; c < 2; c++) {
                __m256i q[4]; /* words 8g + 4c + k of the 8 rows */
                if (r16)
                    for (int k = 0; k < 4; k++) q[k] = _mm256_loadu_si256((const __m256i *)COLI_R16_AT(w, i, 4 + 8 * g + 4 * c + k));
                else
                    transpose8x4(base + offsetof(block_q4_K, qs) + 32 * g + 16 * c, wst, q);
                for (int k = 0; k < 4; k++) {
                    const int j = 4 * c + k;
                    const __m256i nl = _mm256_and_si256(q[k], m4);
                    const __m256i nh = _mm256_and_si256(_mm256_srli_epi16(q[k], 4), m4);
                    for (int r = 0; r < nr; r++) {
                        const int32_t *q8 = (const int32_t *)((const block_q8_K *)(a + (size_t)r * as) + i)->qs;
                        int32_t ql, qh;
                        memcpy(&ql, q8 + 16 * g + j, 4);
                        memcpy(&qh, q8 + 16 * g + 8 + j, 4);
                        lo[r] = _mm256_add_epi16(lo[r], _mm256_maddubs_epi16(nl, _mm256_set1_epi32(ql)));
                        hi[r] = _mm256_add_epi16(hi[r], _mm256_maddubs_epi16(nh, _mm256_set1_epi32(qh)));
                    }
                }
            }
            for (int r = 0; r < nr; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
                const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(lo[r], sc[2 * g]), _mm256_madd_epi16(hi[r], sc[2 * g + 1]));
                const __m256i imin = _mm256_madd_epi16(mn[g], _mm256_set1_epi32(coli_k4_bsum_pair(y->bsums, g)));
                if (gemm == 1) {
                    const __m256 dy = _mm256_set1_ps(y->d);
                    fa[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dx, dy), fa[r]);
                    fm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), _mm256_mul_ps(dmx, dy), fm[r]);
                } else {
                    itot[r] = _mm256_add_epi32(itot[r], isum);
                    mtot[r] = _mm256_add_epi32(mtot[r], imin);
                }
            }
        }
        if (gemm == Q4_K_TILED)
            for (int r = 0; r < nr; r++) {
                const __m256 dy = _mm256_set1_ps(((const block_q8_K *)(a + (size_t)r * as) + i)->d);
                fa[r] = _mm256_fmadd_ps(q4_K_tiled_res(itot[r], mtot[r], dx, dmx), dy, fa[r]);
            }
        else if (!gemm)
            for (int r = 0; r < nr; r++) {
                const __m256 dy = _mm256_set1_ps(((const block_q8_K *)(a + (size_t)r * as) + i)->d);
                fa[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(itot[r]), _mm256_mul_ps(dx, dy), fa[r]);
                fm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mtot[r]), _mm256_mul_ps(dmx, dy), fm[r]);
            }
    }
    for (int r = 0; r < nr; r++) _mm256_storeu_ps(s + (size_t)r * ss, _mm256_sub_ps(fa[r], fm[r]));
}

INL void q4_K_8w(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                 const int gemm, const int r16) {
    if (nr <= COLI_MAX_NR) {
        COLI_DISPATCH_NR(nr, q4_K_8w_few, nb, w, wst, a, as, s, ss, gemm, r16);
        return;
    }
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256i nib[2][32]; /* low / high nibbles of word j of the 8 rows' quants */
    float acc[Q4_0_ROWS][2][8];
    const int pf_lines = (int)((8 * wst + 63) / 64);
    for (int r0 = 0; r0 < nr; r0 += Q4_0_ROWS) {
        const int rn = nr - r0 < Q4_0_ROWS ? nr - r0 : Q4_0_ROWS;
        memset(acc, 0, (size_t)rn * sizeof acc[0]);
        for (int i = 0; i < nb; i++) {
            const char *base = w + (size_t)i * sizeof(block_q4_K);
            if (r0 == 0 && !r16) /* the next 8 rows, spread over the super-blocks */
                for (int l = i * pf_lines / nb; l < (i + 1) * pf_lines / nb; l++)
                    COLI_PREFETCH_W(w + 8 * wst + 64 * (size_t)l);
            __m256 dx, dmx;
            __m256i sc[8], mn[4];
            q4_K_scales8(r16 ? COLI_R16_AT(w, i, 0) : base, wst, &dx, &dmx, sc, mn, r16);
            for (int c = 0; c < 4; c++) {
                __m256i q[8];
                if (r16)
                    for (int j = 0; j < 8; j++) q[j] = _mm256_loadu_si256((const __m256i *)COLI_R16_AT(w, i, 4 + 8 * c + j));
                else {
                    for (int r = 0; r < 8; r++)
                        q[r] = _mm256_loadu_si256((const __m256i *)(base + (size_t)r * wst + offsetof(block_q4_K, qs) + 32 * c));
                    transpose8(q);
                }
                for (int j = 0; j < 8; j++) {
                    nib[0][8 * c + j] = _mm256_and_si256(q[j], m4);
                    nib[1][8 * c + j] = _mm256_and_si256(_mm256_srli_epi16(q[j], 4), m4);
                }
            }
            for (int r = 0; r < rn; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)(r0 + r) * as) + i;
                const int32_t *q8 = (const int32_t *)y->qs;
                __m256 fa = _mm256_loadu_ps(acc[r][0]), fm = _mm256_loadu_ps(acc[r][1]);
                const __m256 dy = _mm256_set1_ps(y->d);
                const __m256 dd_r = _mm256_mul_ps(dx, dy), dm_r = _mm256_mul_ps(dmx, dy);
                __m256i itot = _mm256_setzero_si256(), mtot = _mm256_setzero_si256();
                for (int g = 0; g < 4; g++) {
                    __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
                    for (int j = 0; j < 8; j++) {
                        int32_t ql, qh;
                        memcpy(&ql, q8 + 16 * g + j, 4);
                        memcpy(&qh, q8 + 16 * g + 8 + j, 4);
                        lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(nib[0][8 * g + j], _mm256_set1_epi32(ql)));
                        hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(nib[1][8 * g + j], _mm256_set1_epi32(qh)));
                    }
                    const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(lo, sc[2 * g]), _mm256_madd_epi16(hi, sc[2 * g + 1]));
                    const __m256i imin = _mm256_madd_epi16(mn[g], _mm256_set1_epi32(coli_k4_bsum_pair(y->bsums, g)));
                    if (gemm == 1) {
                        fa = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd_r, fa);
                        fm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), dm_r, fm);
                    } else {
                        itot = _mm256_add_epi32(itot, isum);
                        mtot = _mm256_add_epi32(mtot, imin);
                    }
                }
                if (gemm == Q4_K_TILED) {
                    fa = _mm256_fmadd_ps(q4_K_tiled_res(itot, mtot, dx, dmx), dy, fa);
                } else if (!gemm) {
                    fa = _mm256_fmadd_ps(_mm256_cvtepi32_ps(itot), dd_r, fa);
                    fm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mtot), dm_r, fm);
                }
                _mm256_storeu_ps(acc[r][0], fa);
                _mm256_storeu_ps(acc[r][1], fm);
            }
        }
        for (int r = 0; r < rn; r++)
            _mm256_storeu_ps(s + (size_t)(r0 + r) * ss, _mm256_sub_ps(_mm256_loadu_ps(acc[r][0]), _mm256_loadu_ps(acc[r][1])));
    }
}

TGT void vec_dot_q4_K_q8_K_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                    int nr) {
    for (int g = 0; g < 16; g += 8) q4_K_8w(n / QK_K, (const char *)w + (size_t)g * wst, wst, a, as, s + g, ss, nr, 0, 0);
}
TGT void vec_dot_q4_K_q8_K_mm_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                       size_t ss, int nr) {
    for (int g = 0; g < 16; g += 8) q4_K_8w(n / QK_K, (const char *)w + (size_t)g * wst, wst, a, as, s + g, ss, nr, 1, 0);
}

TGT void vec_dot_q4_K_q8_K_tiled_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                          size_t ss, int nr) {
    for (int g = 0; g < 16; g += 8)
        q4_K_8w(n / QK_K, (const char *)w + (size_t)g * wst, wst, a, as, s + g, ss, nr, Q4_K_TILED, 0);
}
/* a repacked tile (coli_repack_q4_K_r16): each half of its 64-byte vectors is 8 rows */
TGT void vec_dot_q4_K_q8_K_r16_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                        size_t ss, int nr) {
    for (int g = 0; g < 16; g += 8) q4_K_8w(n / QK_K, (const char *)w + 4 * g, wst, a, as, s + g, ss, nr, 0, 1);
}
TGT void vec_dot_q4_K_q8_K_r16_mm_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                           size_t ss, int nr) {
    for (int g = 0; g < 16; g += 8) q4_K_8w(n / QK_K, (const char *)w + 4 * g, wst, a, as, s + g, ss, nr, 1, 1);
}

/* Q5_K, ggml's tiled matmul (8+ rows; Q5_K is never repacked) for 8 weight
 * rows in lanes: each super-block of the 8 rows decoded once per pass to 5-bit
 * codes (the fifth bit of element l of sub-block 2g / 2g + 1 is bit 2g / 2g + 1
 * of qh[l]), then dotted with 4 activation rows per code load. maddubs of
 * codes < 32 by Q8_K bytes: 4 words summed in 16 bits stay below 32767
 * (4 * 2 * 31 * 128), then madd by the scale in both halves: the exact
 * integers of q45_K_nr, and its float steps (q4_K_tiled_res). */
typedef struct {
    __m256i c[64]; /* c[16g + j]: word j of sub-block 2g's codes, c[16g + 8 + j]: of 2g + 1's */
    __m256i sc[8], mn[4];
    __m256 dx, dmx;
} q5_K_tile8;

INL void q5_K_decode8(const char *base, size_t wst, q5_K_tile8 *t) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m1 = _mm256_set1_epi8(1);
    q4_K_scales8(base, wst, &t->dx, &t->dmx, t->sc, t->mn, 0); /* the same d, dmin, scales[12] head as Q4_K */
    __m256i qhw[8];
    for (int r = 0; r < 8; r++)
        qhw[r] = _mm256_loadu_si256((const __m256i *)(base + (size_t)r * wst + offsetof(block_q5_K, qh)));
    transpose8(qhw);
    for (int g = 0; g < 4; g++) {
        __m256i q[8];
        for (int r = 0; r < 8; r++)
            q[r] = _mm256_loadu_si256((const __m256i *)(base + (size_t)r * wst + offsetof(block_q5_K, qs) + 32 * g));
        transpose8(q);
        for (int j = 0; j < 8; j++) {
            const __m256i bl = _mm256_and_si256(_mm256_srli_epi32(qhw[j], 2 * g), m1);
            const __m256i bh = _mm256_and_si256(_mm256_srli_epi32(qhw[j], 2 * g + 1), m1);
            t->c[16 * g + j] = _mm256_or_si256(_mm256_and_si256(q[j], m4), _mm256_slli_epi32(bl, 4));
            t->c[16 * g + 8 + j] =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(q[j], 4), m4), _mm256_slli_epi32(bh, 4));
        }
    }
}

/* super-block i of the tile against G (<= 4) activation rows; acc[r] += r's tiled result */
INL void q5_K_tile8_rows(const q5_K_tile8 *t, const char *a, size_t as, int i, __m256 *acc, const int G) {
    __m256i itot[4];
    for (int r = 0; r < G; r++) itot[r] = _mm256_setzero_si256();
    for (int g = 0; g < 4; g++)
        for (int h = 0; h < 2; h++) { /* words 4h..4h+3 */
            __m256i lo[4], hi[4];
            for (int r = 0; r < G; r++) lo[r] = hi[r] = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                const int j = 4 * h + k;
                const __m256i cl = t->c[16 * g + j], ch = t->c[16 * g + 8 + j];
                for (int r = 0; r < G; r++) {
                    const int32_t *q8 = (const int32_t *)((const block_q8_K *)(a + (size_t)r * as) + i)->qs;
                    int32_t ql, qh;
                    memcpy(&ql, q8 + 16 * g + j, 4);
                    memcpy(&qh, q8 + 16 * g + 8 + j, 4);
                    lo[r] = _mm256_add_epi16(lo[r], _mm256_maddubs_epi16(cl, _mm256_set1_epi32(ql)));
                    hi[r] = _mm256_add_epi16(hi[r], _mm256_maddubs_epi16(ch, _mm256_set1_epi32(qh)));
                }
            }
            for (int r = 0; r < G; r++)
                itot[r] = _mm256_add_epi32(itot[r], _mm256_add_epi32(_mm256_madd_epi16(lo[r], t->sc[2 * g]),
                                                                     _mm256_madd_epi16(hi[r], t->sc[2 * g + 1])));
        }
    for (int r = 0; r < G; r++) {
        const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
        __m256i mtot = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++)
            mtot = _mm256_add_epi32(mtot, _mm256_madd_epi16(t->mn[g], _mm256_set1_epi32(coli_k4_bsum_pair(y->bsums, g))));
        acc[r] = _mm256_fmadd_ps(q4_K_tiled_res(itot[r], mtot, t->dx, t->dmx), _mm256_set1_ps(y->d), acc[r]);
    }
}

INL void q5_K_8w_tiled(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr) {
    const int pf_lines = (int)((8 * wst + 63) / 64);
    __m256 acc[Q4_0_ROWS];
    q5_K_tile8 t;
    for (int r0 = 0; r0 < nr; r0 += Q4_0_ROWS) {
        const int rn = nr - r0 < Q4_0_ROWS ? nr - r0 : Q4_0_ROWS;
        const char *ar = a + (size_t)r0 * as;
        for (int r = 0; r < rn; r++) acc[r] = _mm256_setzero_ps();
        for (int i = 0; i < nb; i++) {
            if (r0 == 0) /* the next 8 rows, spread over the super-blocks */
                for (int l = i * pf_lines / nb; l < (i + 1) * pf_lines / nb; l++)
                    COLI_PREFETCH_W(w + 8 * wst + 64 * (size_t)l);
            q5_K_decode8(w + (size_t)i * sizeof(block_q5_K), wst, &t);
            int r = 0;
            for (; r + 4 <= rn; r += 4) q5_K_tile8_rows(&t, ar + (size_t)r * as, as, i, acc + r, 4);
            for (; r < rn; r++) q5_K_tile8_rows(&t, ar + (size_t)r * as, as, i, acc + r, 1);
        }
        for (int r = 0; r < rn; r++) _mm256_storeu_ps(s + (size_t)(r0 + r) * ss, acc[r]);
    }
}

TGT void vec_dot_q5_K_q8_K_tiled_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                          size_t ss, int nr) {
    for (int g = 0; g < 16; g += 8) q5_K_8w_tiled(n / QK_K, (const char *)w + (size_t)g * wst, wst, a, as, s + g, ss, nr);
}

TGT void vec_dot_q4_K_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q4_K_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_q4_K_q8_K_mm_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q4_K_nr, n, w, (const char *)a, as, s, ss, 1);
}
TGT void vec_dot_q4_K_q8_K_plain_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q45_K_nr, n, w, (const char *)a, as, s, ss, 0, 0);
}
TGT void vec_dot_q4_K_q8_K_tiled_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q45_K_nr, n, w, (const char *)a, as, s, ss, 0, 1);
}
TGT void vec_dot_q5_K_q8_K_tiled_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q45_K_nr, n, w, (const char *)a, as, s, ss, 1, 1);
}
TGT void vec_dot_q5_K_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q45_K_nr, n, w, (const char *)a, as, s, ss, 1, 0);
}

/* Q6_K: unsigned q in 0..63 through maddubs; the -32 offset is folded in once
 * per super-block as 32 * sum_k sc[k] * bsums[k] (exact in int32). These are
 * ggml_vec_dot_q6_K_q8_K's 8 int32 lanes, accumulated (one row, or a batch
 * of fewer than 8 rows) as acc = fma(dy * d, float(lanes), acc), hsum at the
 * end; `tiled` is ggml's tiled matmul (batches of 8 rows or more), which takes
 * the super-block's whole integer sum: acc = fma(float(isum) * d, dy, acc)
 * (its mul + add of intrinsics, fused by GCC's default -ffp-contract=fast). */
#define Q6_K_PREFETCH 4096

INL void q6_K_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int tiled, const int nr) {
    const int nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    __m256 acc[COLI_MAX_NR];
    float acc1[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) { acc[r] = _mm256_setzero_ps(); acc1[r] = 0.0f; }
    for (int i = 0; i < nb; i++) {
        const block_q6_K *x = (const block_q6_K *)w + i;
        for (int l = 0; l < (int)sizeof(block_q6_K); l += 64) /* rows lie end to end: stream 4 KiB ahead */
            COLI_PREFETCH_W((const char *)x + Q6_K_PREFETCH + l);
        const float dx = h2f(x->d);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x->scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m256i sumi[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
            const __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums));
            sumi[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        }
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4));
            __m256i scl[4];
            for (int k = 0; k < 4; k++) {
                /* 16-bit lanes 0..7 -> sc[2p], 8..15 -> sc[2p+1], p = 4h + k */
                const int p = 4 * h + k;
                const __m128i shuf = _mm_set_epi64x(0x0101010101010101LL * (2 * p + 1), 0x0101010101010101LL * (2 * p));
                scl[k] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, shuf));
            }
            for (int r = 0; r < nr; r++) {
                const int8_t *q8 = ((const block_q8_K *)(a + r * as) + i)->qs + 128 * h;
                for (int k = 0; k < 4; k++) {
                    const __m256i p16 = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(q8 + 32 * k)));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(scl[k], p16));
                }
            }
        }
        for (int r = 0; r < nr; r++) {
            const float dy = ((const block_q8_K *)(a + r * as) + i)->d;
            if (tiled)
                acc1[r] = fmaf((float)hsum_i32_8(sumi[r]) * dx, dy, acc1[r]);
            else
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dy * dx), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = tiled ? acc1[r] : hsum_f32_8(acc[r]);
}

/* ggml's tiled arithmetic (batches of 8+ rows) for 16 weight rows, 8 per
 * ymm, rows in lanes (see q4_K_8w): per super-block the exact integer
 * sum over its 16 sub-blocks of sc * (q . y - 32 * bsum), then
 * acc = fma(float(isum) * d, dy, acc). The 6-bit quants times the Q8_K
 * bytes by maddubs (2 * 63 * 128 per 16-bit lane, two of them summed stay
 * below 32767), the signed scale applied by madd against it in both halves
 * of each 32-bit lane, the bsums by madd of (sc0 | sc1 << 16) pairs. */
INL void q6_K_8w(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3), lo16 = _mm256_set1_epi32(0xFFFF);
    __m256i q6[64]; /* [h][j'][k]: quants of elements 128h + 32k + 4j' .. +3 of the 8 rows */
    float acc[Q4_0_ROWS][8];
    for (int r0 = 0; r0 < nr; r0 += Q4_0_ROWS) {
        const int rn = nr - r0 < Q4_0_ROWS ? nr - r0 : Q4_0_ROWS;
        memset(acc, 0, (size_t)rn * sizeof acc[0]);
        const int pf_lines = r0 == 0 ? (int)((8 * wst + 63) / 64) : 0; /* the next 8 rows */
        for (int i = 0; i < nb; i++) {
            const char *base = w + (size_t)i * sizeof(block_q6_K);
            for (int l = i * pf_lines / nb; l < (i + 1) * pf_lines / nb; l++) COLI_PREFETCH_W(w + 8 * wst + 64 * (size_t)l);
            const __m256 dx = halves8(base + offsetof(block_q6_K, d), wst);
            __m256i scw[4];
            transpose8x4(base + offsetof(block_q6_K, scales), wst, scw);
            __m256i sc[16], scp[8]; /* sc[b]: scale b in both 16-bit halves; scp[t]: scale 2t | scale 2t+1 << 16 */
            for (int k = 0; k < 4; k++)
                for (int b = 0; b < 4; b++) {
                    const __m256i v = _mm256_srai_epi32(_mm256_slli_epi32(scw[k], 24 - 8 * b), 24);
                    sc[4 * k + b] = _mm256_or_si256(_mm256_and_si256(v, lo16), _mm256_slli_epi32(v, 16));
                }
            for (int t = 0; t < 8; t++)
                scp[t] = _mm256_or_si256(_mm256_and_si256(sc[2 * t], lo16), _mm256_slli_epi32(sc[2 * t + 1], 16));
            for (int h = 0; h < 2; h++) {
                __m256i qa[8], qb[8], qc[8];
                for (int r = 0; r < 8; r++) {
                    const block_q6_K *x = (const block_q6_K *)(base + (size_t)r * wst);
                    qa[r] = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h));      /* words 0..7 */
                    qb[r] = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32)); /* words 8..15 */
                    qc[r] = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
                }
                transpose8(qa);
                transpose8(qb);
                transpose8(qc);
                for (int j = 0; j < 8; j++) {
                    const __m256i A = qa[j], B = qb[j], H = qc[j];
                    __m256i *o = q6 + 32 * h + 4 * j;
                    o[0] = _mm256_or_si256(_mm256_and_si256(A, m4), _mm256_slli_epi16(_mm256_and_si256(H, m3), 4));
                    o[1] = _mm256_or_si256(_mm256_and_si256(B, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2), m3), 4));
                    o[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4), m3), 4));
                    o[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 6), m3), 4));
                }
            }
            for (int r = 0; r < rn; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)(r0 + r) * as) + i;
                __m256i isum = _mm256_setzero_si256(), corr = _mm256_setzero_si256();
                for (int h = 0; h < 2; h++)
                    for (int k = 0; k < 4; k++) {
                        /* sub-blocks 8h + 2k (j' < 4) and 8h + 2k + 1 (j' >= 4) */
                        __m256i p[4];
                        for (int j = 0; j < 8; j++) {
                            int32_t q;
                            memcpy(&q, y->qs + 128 * h + 32 * k + 4 * j, 4);
                            const __m256i m = _mm256_maddubs_epi16(q6[32 * h + 4 * j + k], _mm256_set1_epi32(q));
                            p[j / 2] = j % 2 ? _mm256_add_epi16(p[j / 2], m) : m;
                        }
                        const int sb = 8 * h + 2 * k;
                        isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(p[0], sc[sb]), _mm256_madd_epi16(p[1], sc[sb])));
                        isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(p[2], sc[sb + 1]), _mm256_madd_epi16(p[3], sc[sb + 1])));
                    }
                for (int t = 0; t < 8; t++) {
                    const uint32_t bp = (uint32_t)(uint16_t)y->bsums[2 * t] | (uint32_t)(uint16_t)y->bsums[2 * t + 1] << 16;
                    corr = _mm256_add_epi32(corr, _mm256_madd_epi16(scp[t], _mm256_set1_epi32((int)bp)));
                }
                isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 5));
                const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dx);
                _mm256_storeu_ps(acc[r], _mm256_fmadd_ps(t, _mm256_set1_ps(y->d), _mm256_loadu_ps(acc[r])));
            }
        }
        for (int r = 0; r < rn; r++) memcpy(s + (size_t)(r0 + r) * ss, acc[r], sizeof acc[r]);
    }
}

TGT void vec_dot_q6_K_q8_K_mm_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                       size_t ss, int nr) {
    for (int g = 0; g < 16; g += 8) q6_K_8w(n / QK_K, (const char *)w + (size_t)g * wst, wst, a, as, s + g, ss, nr);
}

TGT void vec_dot_q6_K_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q6_K_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_q6_K_q8_K_mm_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q6_K_nr, n, w, (const char *)a, as, s, ss, 1);
}

/* ---- Q2_K / Q3_K ------------------------------------------------------------------------ */

/* Q2_K and Q3_K as llama.cpp multiplies them on x86 (Q8_K activations):
 *   vec_dot (ggml_vec_dot_q{2,3}_K_q8_K, AVX2; the AVX-512 build runs it too):
 *       per super-block 8 int32 lanes, lane L holding the 4-byte groups 4L..4L+3
 *       of each 32-byte quant vector times their 16-element sub-block's scale;
 *       Q2_K: acc = fma(-dy * dmin, float(mins . bsums, 8 lanes), acc) first,
 *       then acc = fma(dy * d, float(lanes), acc); Q3_K the latter only;
 *       hsum_float_8 at the end;
 *   tiled (its tiled K-quant matmul, batches of 8+ rows, weights not repacked):
 *       the exact integer sums s1 = sum of scale * (q . y) (Q3_K: q biased by
 *       4, the 4 * bsum taken out: the same integer), s2 = sum of min * bsum,
 *       r = float(s1) * d - dmin * float(s2) (one fnmadd), acc = fma(r, dy, acc);
 *   Q2_K repacked (q2_K_8x8, AVX-512 builds, n_out % 8 == 0): gemv (one row)
 *       acc = fma(float(s1), d * dy, acc), accm = fma(float(s2), dmin * dy, accm)
 *       per super-block (quant_avx512.c), gemm (groups of 4 rows) the same per
 *       128 elements (8 sub-blocks), acc - accm at the end. */
enum { LOWK_VEC_DOT, LOWK_TILED, LOWK_GEMM };

/* ggml's get_scale_shuffle_q3k: 16-bit scale 2k to the low 128 bits, 2k + 1 to the high */
INL __m256i q3k_scale_shuffle(int k) {
    const char a = (char)(4 * k), b = (char)(4 * k + 1), c = (char)(4 * k + 2), d = (char)(4 * k + 3);
    return _mm256_setr_epi8(a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, c, d, c, d, c, d, c, d, c, d, c, d, c, d, c, d);
}

/* 16 signed 16-bit scales of a super-block -> the 8 vectors ggml multiplies
 * the 32-byte product vector (j, k) with: sub-block 8j + 2k in the low
 * 128 bits, 8j + 2k + 1 in the high */
INL void lowk_scales(__m128i scales8, __m256i sc[8]) {
    const __m256i all = _mm256_cvtepi8_epi16(scales8);
    const __m128i l = _mm256_castsi256_si128(all), h = _mm256_extracti128_si256(all, 1);
    const __m256i half[2] = {_mm256_inserti128_si256(_mm256_castsi128_si256(l), l, 1),
                             _mm256_inserti128_si256(_mm256_castsi128_si256(h), h, 1)};
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 4; k++) sc[4 * j + k] = _mm256_shuffle_epi8(half[j], q3k_scale_shuffle(k));
}

/* int32 lanes 4j..4j+3 of v summed (the sub-blocks 8j..8j+7 of a 16-lane madd) */
INL int hsum_i32_half(__m256i v, int j) {
    __m128i x = j ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v);
    x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(x);
}

#define LOWK_PREFETCH 2048 /* rows lie end to end: stream ahead of the hardware prefetcher's 4 KiB pages */

/* W weight rows (1, or 2 for LOWK_VEC_DOT: the call, set-up and activation loads
 * shared, two chains side by side), wst bytes apart, against nr activation rows;
 * each row's floats are those of `mode`. */
INL void q2_K_nr(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int mode,
                 const int W, const int nr) {
    const int nb = n / QK_K;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0xF);
    __m256 acc[2][COLI_MAX_NR];
    float acc1[2][COLI_MAX_NR], accm[2][COLI_MAX_NR];
    for (int j = 0; j < W; j++)
        for (int r = 0; r < nr; r++) { acc[j][r] = _mm256_setzero_ps(); acc1[j][r] = accm[j][r] = 0.0f; }
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < W; j++) {
            const block_q2_K *x = (const block_q2_K *)(w + (size_t)j * wst) + i;
            COLI_PREFETCH_W((const char *)x + LOWK_PREFETCH);
            const float dx = h2f(x->d), dminx = h2f(x->dmin);
            const __m128i mins_and_scales = _mm_loadu_si128((const __m128i *)x->scales);
            const __m256i mins = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(mins_and_scales, 4), m4));
            __m256i sc[8], q[8], bits[2];
            lowk_scales(_mm_and_si128(mins_and_scales, m4), sc);
            for (int h = 0; h < 2; h++) {
                bits[h] = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
                if (nr > 1) /* codes kept for every row; one row: formed as used (fewer live registers, 6% faster) */
                    for (int k = 0; k < 4; k++) q[4 * h + k] = _mm256_and_si256(_mm256_srli_epi16(bits[h], 2 * k), m3);
            }
            for (int r = 0; r < nr; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
                const __m256i prod = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y->bsums));
                if (mode == LOWK_VEC_DOT) acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(-y->d * dminx), _mm256_cvtepi32_ps(prod), acc[j][r]);
                __m256i half[2];
                for (int h = 0; h < 2; h++) {
                    __m256i p[4];
                    for (int k = 0; k < 4; k++)
                        p[k] = _mm256_madd_epi16(sc[4 * h + k],
                                                 _mm256_maddubs_epi16(nr > 1 ? q[4 * h + k] : _mm256_and_si256(_mm256_srli_epi16(bits[h], 2 * k), m3),
                                                                      _mm256_loadu_si256((const __m256i *)(y->qs + 128 * h + 32 * k))));
                    half[h] = _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3]));
                }
                const __m256i sumi = _mm256_add_epi32(half[0], half[1]);
                if (mode == LOWK_VEC_DOT) {
                    acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * dx), _mm256_cvtepi32_ps(sumi), acc[j][r]);
                } else if (mode == LOWK_TILED) {
                    const float res = fmaf(-dminx, (float)hsum_i32_8(prod), (float)hsum_i32_8(sumi) * dx);
                    acc1[j][r] = fmaf(res, y->d, acc1[j][r]);
                } else {
                    const float dd = dx * y->d, dm = dminx * y->d;
                    for (int h = 0; h < 2; h++) {
                        acc1[j][r] = fmaf((float)hsum_i32_8(half[h]), dd, acc1[j][r]);
                        accm[j][r] = fmaf((float)hsum_i32_half(prod, h), dm, accm[j][r]);
                    }
                }
            }
        }
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < W; j++)
            s[(size_t)r * ss + j] = mode == LOWK_VEC_DOT ? hsum_f32_8(acc[j][r]) : mode == LOWK_TILED ? acc1[j][r] : acc1[j][r] - accm[j][r];
}

TGT void vec_dot_q2_K_q8_K_2w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q2_K_nr, n, (const char *)w, wst, (const char *)a, as, s, ss, LOWK_VEC_DOT, 2);
}

/* The 16 Q3_K scales (6 bits, biased by 32), as ggml's AVX2 kernel unpacks them */
INL __m128i q3_K_scales8(const uint8_t *packed) {
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    uint32_t aux[3];
    memcpy(aux, packed, 12);
    const __m128i s = _mm_set_epi32((int)(((aux[1] >> 4) & kmask2) | (((aux[2] >> 6) & kmask1) << 4)),
                                    (int)(((aux[0] >> 4) & kmask2) | (((aux[2] >> 4) & kmask1) << 4)),
                                    (int)((aux[1] & kmask2) | (((aux[2] >> 2) & kmask1) << 4)),
                                    (int)((aux[0] & kmask2) | (((aux[2] >> 0) & kmask1) << 4)));
    return _mm_sub_epi8(s, _mm_set1_epi8(32));
}

INL void q3_K_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int tiled, const int nr) {
    const int nb = n / QK_K;
    const __m256i m3 = _mm256_set1_epi8(3), mone = _mm256_set1_epi8(1);
    __m256 acc[COLI_MAX_NR];
    float acc1[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) { acc[r] = _mm256_setzero_ps(); acc1[r] = 0.0f; }
    for (int i = 0; i < nb; i++) {
        const block_q3_K *x = (const block_q3_K *)w + i;
        COLI_PREFETCH_W((const char *)x + LOWK_PREFETCH);
        const float dx = h2f(x->d);
        __m256i sc[8], ql[8], qh[8];
        lowk_scales(q3_K_scales8(x->scales), sc);
        const __m256i hbits = _mm256_loadu_si256((const __m256i *)x->hmask);
        for (int j = 0; j < 2; j++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * j));
            for (int k = 0; k < 4; k++) {
                const int bit = 4 * j + k;
                ql[4 * j + k] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
                /* 4 where the high bit is clear: the value is ql - 4 */
                qh[4 * j + k] = _mm256_slli_epi16(_mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, bit)), bit), 2);
            }
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
            __m256i sumi = _mm256_setzero_si256();
            for (int j = 0; j < 2; j++) {
                __m256i p[4];
                for (int k = 0; k < 4; k++) {
                    const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y->qs + 128 * j + 32 * k));
                    const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(ql[4 * j + k], q8), _mm256_maddubs_epi16(qh[4 * j + k], q8));
                    p[k] = _mm256_madd_epi16(sc[4 * j + k], p16);
                }
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3])));
            }
            if (tiled)
                acc1[r] = fmaf((float)hsum_i32_8(sumi) * dx, y->d, acc1[r]);
            else
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * dx), _mm256_cvtepi32_ps(sumi), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[(size_t)r * ss] = tiled ? acc1[r] : hsum_f32_8(acc[r]);
}

/* ggml_vec_dot_q3_K_q8_K for 4 weight rows (wst apart) against one
 * activation row: q3_K_nr's integers and float steps per row, the rows'
 * super-blocks interleaved (short rows, 768 = 3 super-blocks, pay one call
 * and one loop for four). */
INL void q3_K_4w(int n, const char *w, size_t wst, const block_q8_K *y, float *s) {
    const int nb = n / QK_K;
    const __m256i m3 = _mm256_set1_epi8(3), mone = _mm256_set1_epi8(1);
    __m256 acc[4];
    for (int j = 0; j < 4; j++) acc[j] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++)
        for (int row = 0; row < 4; row++) {
            const block_q3_K *x = (const block_q3_K *)(w + (size_t)row * wst) + i;
            COLI_PREFETCH_W((const char *)x + LOWK_PREFETCH);
            __m256i sc[8];
            lowk_scales(q3_K_scales8(x->scales), sc);
            const __m256i hbits = _mm256_loadu_si256((const __m256i *)x->hmask);
            __m256i sumi = _mm256_setzero_si256();
            for (int j = 0; j < 2; j++) {
                const __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * j));
                __m256i p[4];
                for (int k = 0; k < 4; k++) {
                    const int bit = 4 * j + k;
                    const __m256i ql = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
                    const __m256i qh = _mm256_slli_epi16(_mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, bit)), bit), 2);
                    const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * j + 32 * k));
                    p[k] = _mm256_madd_epi16(sc[4 * j + k], _mm256_sub_epi16(_mm256_maddubs_epi16(ql, q8), _mm256_maddubs_epi16(qh, q8)));
                }
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3])));
            }
            acc[row] = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * h2f(x->d)), _mm256_cvtepi32_ps(sumi), acc[row]);
        }
    for (int j = 0; j < 4; j++) s[j] = hsum_f32_8(acc[j]);
}

/* one-row arithmetic for 16 weight rows: 4 at a time for one activation row,
 * else each weight row against the activation rows (its decode shared) */
TGT void vec_dot_q3_K_q8_K_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss, int nr) {
    for (int g = 0; g < 16; g += (nr == 1 ? 4 : 1)) {
        if (nr == 1)
            q3_K_4w(n, (const char *)w + (size_t)g * wst, wst, (const block_q8_K *)a, s + g);
        else
            for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
                const int rn = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
                COLI_DISPATCH_NR(rn, q3_K_nr, n, (const char *)w + (size_t)g * wst, (const char *)a + (size_t)r0 * as, as,
                                 s + (size_t)r0 * ss + g, ss, 0);
            }
    }
}

/* ggml's tiled arithmetic (batches of 8+ rows, weights as stored) for 16
 * weight rows, 8 per ymm, rows in lanes (see q6_K_8w): per super-block and
 * lane the exact s1 = sum of scale * (q . y) over the 16 sub-blocks (Q3_K: q
 * biased to 0..7, and 4 * sum of scale * bsum taken out) and Q2_K's s2 = sum
 * of min * bsum, then r = float(s1) * d - dmin * float(s2), acc = fma(r, dy,
 * acc). The quants times the Q8_K bytes by maddubs (at most 2 * 7 * 128 per
 * 16-bit lane, four of them summed stay below 32767), the scale by madd in
 * both halves of each 32-bit lane, the bsums by madd of (x0 | x1 << 16) pairs. */
/* the 32-bit word at p + j * wst for the 8 rows j (unaligned, inside each row's block) */
INL __m256i words8(const char *p, size_t wst) {
    int32_t v[8];
    for (int j = 0; j < 8; j++) memcpy(&v[j], p + (size_t)j * wst, 4);
    return _mm256_loadu_si256((const __m256i *)v);
}

INL void lowk_8w(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                 const int three) {
    const size_t bsize = three ? sizeof(block_q3_K) : sizeof(block_q2_K);
    const size_t qs_off = three ? offsetof(block_q3_K, qs) : offsetof(block_q2_K, qs);
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), lo16 = _mm256_set1_epi32(0xFFFF);
    __m256i cq[64]; /* [h][j][l]: codes of elements 128h + 32l + 4j .. +3 of the 8 rows */
    float acc[Q4_0_ROWS][8];
    for (int r0 = 0; r0 < nr; r0 += Q4_0_ROWS) {
        const int rn = nr - r0 < Q4_0_ROWS ? nr - r0 : Q4_0_ROWS;
        memset(acc, 0, (size_t)rn * sizeof acc[0]);
        const int pf_lines = r0 == 0 ? (int)((8 * wst + 63) / 64) : 0; /* the next 8 rows */
        for (int i = 0; i < nb; i++) {
            const char *base = w + (size_t)i * bsize;
            for (int l = i * pf_lines / nb; l < (i + 1) * pf_lines / nb; l++) COLI_PREFETCH_W(w + 8 * wst + 64 * (size_t)l);
            __m256 dx, dmx = _mm256_setzero_ps();
            __m256i sc[16], scp[8], mnp[8]; /* sc[b]: scale b in both 16-bit halves; scp / mnp: pairs 2t | 2t + 1 << 16 */
            if (three) {
                dx = halves8(base + offsetof(block_q3_K, d), wst);
                const __m256i kmask1 = _mm256_set1_epi32(0x03030303), kmask2 = _mm256_set1_epi32(0x0f0f0f0f);
                const __m256i a0 = words8(base + offsetof(block_q3_K, scales), wst);
                const __m256i a1 = words8(base + offsetof(block_q3_K, scales) + 4, wst);
                const __m256i a2 = words8(base + offsetof(block_q3_K, scales) + 8, wst);
                __m256i u[4]; /* q3_K_scales8's words, in lanes */
                u[0] = _mm256_or_si256(_mm256_and_si256(a0, kmask2), _mm256_slli_epi32(_mm256_and_si256(a2, kmask1), 4));
                u[1] = _mm256_or_si256(_mm256_and_si256(a1, kmask2), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 2), kmask1), 4));
                u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a0, 4), kmask2), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 4), kmask1), 4));
                u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a1, 4), kmask2), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 6), kmask1), 4));
                for (int k = 0; k < 4; k++)
                    for (int b = 0; b < 4; b++) {
                        const __m256i v = _mm256_sub_epi32(_mm256_and_si256(_mm256_srli_epi32(u[k], 8 * b), _mm256_set1_epi32(0x3F)),
                                                           _mm256_set1_epi32(32));
                        sc[4 * k + b] = _mm256_or_si256(_mm256_and_si256(v, lo16), _mm256_slli_epi32(v, 16));
                    }
                for (int t = 0; t < 8; t++)
                    scp[t] = _mm256_or_si256(_mm256_and_si256(sc[2 * t], lo16), _mm256_slli_epi32(sc[2 * t + 1], 16));
            } else {
                dx = halves8(base + offsetof(block_q2_K, d), wst);
                dmx = halves8(base + offsetof(block_q2_K, dmin), wst);
                __m256i sw[4];
                transpose8x4(base + offsetof(block_q2_K, scales), wst, sw);
                const __m256i mf = _mm256_set1_epi32(0xF);
                for (int k = 0; k < 4; k++)
                    for (int b = 0; b < 4; b++) {
                        const __m256i v = _mm256_and_si256(_mm256_srli_epi32(sw[k], 8 * b), mf);
                        sc[4 * k + b] = _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
                    }
                for (int k = 0; k < 4; k++)
                    for (int t = 0; t < 2; t++) /* mins of sub-blocks 4k + 2t, 4k + 2t + 1: high nibbles of bytes 2t, 2t + 1 */
                        mnp[2 * k + t] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(sw[k], 16 * t + 4), mf),
                                                         _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sw[k], 16 * t + 12), mf), 16));
            }
            __m256i hq[8];
            if (three) {
                for (int r = 0; r < 8; r++) hq[r] = _mm256_loadu_si256((const __m256i *)(base + (size_t)r * wst));
                transpose8(hq); /* word j: hmask[4j .. +3] */
            }
            for (int h = 0; h < 2; h++) {
                __m256i q[8];
                for (int r = 0; r < 8; r++) q[r] = _mm256_loadu_si256((const __m256i *)(base + (size_t)r * wst + qs_off + 32 * h));
                transpose8(q); /* word j: qs[32h + 4j .. +3] */
                for (int j = 0; j < 8; j++)
                    for (int l = 0; l < 4; l++) {
                        __m256i c = _mm256_and_si256(_mm256_srli_epi16(q[j], 2 * l), m3);
                        if (three)
                            c = _mm256_or_si256(c, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hq[j], 4 * h + l), one), 2));
                        cq[32 * h + 4 * j + l] = c;
                    }
            }
            for (int r = 0; r < rn; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)(r0 + r) * as) + i;
                __m256i isum = _mm256_setzero_si256(), corr = _mm256_setzero_si256();
                for (int h = 0; h < 2; h++)
                    for (int l = 0; l < 4; l++) {
                        /* sub-blocks 8h + 2l (j < 4) and 8h + 2l + 1 (j >= 4) */
                        __m256i p[2];
                        for (int j = 0; j < 8; j++) {
                            int32_t q8;
                            memcpy(&q8, y->qs + 128 * h + 32 * l + 4 * j, 4);
                            const __m256i m = _mm256_maddubs_epi16(cq[32 * h + 4 * j + l], _mm256_set1_epi32(q8));
                            p[j / 4] = j % 4 ? _mm256_add_epi16(p[j / 4], m) : m;
                        }
                        const int sb = 8 * h + 2 * l;
                        isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(p[0], sc[sb]), _mm256_madd_epi16(p[1], sc[sb + 1])));
                    }
                for (int t = 0; t < 8; t++) {
                    const uint32_t bp = (uint32_t)(uint16_t)y->bsums[2 * t] | (uint32_t)(uint16_t)y->bsums[2 * t + 1] << 16;
                    corr = _mm256_add_epi32(corr, _mm256_madd_epi16(three ? scp[t] : mnp[t], _mm256_set1_epi32((int)bp)));
                }
                __m256 res;
                if (three) {
                    res = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 2))), dx);
                } else {
                    res = _mm256_fnmadd_ps(dmx, _mm256_cvtepi32_ps(corr), _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dx));
                }
                _mm256_storeu_ps(acc[r], _mm256_fmadd_ps(res, _mm256_set1_ps(y->d), _mm256_loadu_ps(acc[r])));
            }
        }
        for (int r = 0; r < rn; r++) memcpy(s + (size_t)(r0 + r) * ss, acc[r], sizeof acc[r]);
    }
}

TGT void vec_dot_q2_K_q8_K_tiled_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                          size_t ss, int nr) {
    for (int g = 0; g < 16; g += 8) lowk_8w(n / QK_K, (const char *)w + (size_t)g * wst, wst, a, as, s + g, ss, nr, 0);
}
TGT void vec_dot_q3_K_q8_K_tiled_16w_avx2(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                          size_t ss, int nr) {
    for (int g = 0; g < 16; g += 8) lowk_8w(n / QK_K, (const char *)w + (size_t)g * wst, wst, a, as, s + g, ss, nr, 1);
}

TGT void vec_dot_q2_K_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q2_K_nr, n, (const char *)w, 0, (const char *)a, as, s, ss, LOWK_VEC_DOT, 1);
}
TGT void vec_dot_q2_K_q8_K_tiled_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q2_K_nr, n, (const char *)w, 0, (const char *)a, as, s, ss, LOWK_TILED, 1);
}
TGT void vec_dot_q2_K_q8_K_gemm_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q2_K_nr, n, (const char *)w, 0, (const char *)a, as, s, ss, LOWK_GEMM, 1);
}
TGT void vec_dot_q3_K_q8_K_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q3_K_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_q3_K_q8_K_tiled_avx2(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q3_K_nr, n, w, (const char *)a, as, s, ss, 1);
}


/* coli_argmax_generic's index, 8 lanes: the largest non-NaN value (max_ps returns its second
 * operand when either is NaN, so the running max, seeded with x[0], never takes a NaN), then
 * the first index holding a value equal to it (-0 == +0, as the scalar loop's strict > keeps
 * the first of them). A NaN at x[0] wins outright, as in the scalar loop. */
TGT int32_t coli_argmax_avx2(const float *x, int n) {
    if (n < 32 || x[0] != x[0]) return coli_argmax_generic(x, n);
    const __m256 x0 = _mm256_set1_ps(x[0]);
    __m256 m0 = x0, m1 = x0, m2 = x0, m3 = x0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    m0 = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)); /* no NaN in any */
    float lanes[8], m = x[0];
    _mm256_storeu_ps(lanes, m0);
    for (int j = 0; j < 8; j++) m = lanes[j] > m ? lanes[j] : m;
    for (int k = i; k < n; k++) m = x[k] > m ? x[k] : m;
    const __m256 vm = _mm256_set1_ps(m);
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        const int bits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + k), vm, _CMP_EQ_OQ));
        if (bits) return k + __builtin_ctz((unsigned)bits);
    }
    for (; k < n; k++)
        if (x[k] == m) return k;
    return 0; /* unreachable: m is one of x */
}

#else
typedef int coli_quant_avx2_unused;
#endif
