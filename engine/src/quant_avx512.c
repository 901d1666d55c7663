/* quant_avx512.c — AVX-512 (F/BW/VL/DQ/VNNI) kernels; types without a
 * 512-bit kernel use the AVX2 ones (kernels.c builds the table).
 *
 * Same contract as quant_avx2.c: exact integer block sums, and the float
 * accumulation of llama.cpp's AVX-512 build operation for operation, per row
 * whatever the number of rows a call tiles. Where ggml accumulates a row in 8
 * lanes (Q8_0/Q4_0/Q5_0), a zmm carries two rows (or two weight rows) in its
 * halves, so each row keeps ggml's association. */
#include "quant.h"

#ifdef COLI_X86
#include <immintrin.h>

#include "gcc_dot.h"
#include "prefetch.h"
#include <math.h>
#include <stddef.h>
#include <string.h>

#define ISA "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(ISA)))
#define INL static inline __attribute__((always_inline, target(ISA)))

#include "transpose_avx512.h"

#include "quant_avx2_inl.h" /* h2f, hsum_i32_8, the 8-row transpose and scales (a subset target: they inline) */

/* two 32-byte halves -> one zmm */
INL __m512i load2x256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

#define Q4K_ROWS 64 /* activation rows per pass over a 16-row weight tile (the 16w kernels) */

/* hsum_float_8 of ggml (x86/quants.c) and tinyBLAS's hsum(__m256) */
INL float hsum8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* ---- float rows ------------------------------------------------------------------- */

/* ggml_vec_dot_f32/_f16 on an AVX-512 build: four 16-lane accumulators over
 * steps of 64, reduced (0+2, 1+3), (0+1), _mm512_reduce_add_ps; leftovers one
 * by one (f32: in float, see below; f16: in double). */
INL __m512 ld16(const void *p, int i, const int f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const coli_half *)p + i)))
               : _mm512_loadu_ps((const float *)p + i);
}
INL float el(const void *p, int i, const int f16) { return f16 ? h2f(((const coli_half *)p)[i]) : ((const float *)p)[i]; }

/* af16: the activation rows' storage (f16, or f32 holding f16 values: attention's
 * query and probabilities widened once, the same products) when the weights are f16 */
INL void fdot_nr_a(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int f16, const int af16,
                   const int nr) {
    __m512 acc[COLI_MAX_NR][4];
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < 4; k++) acc[r][k] = _mm512_setzero_ps();
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64)
        for (int k = 0; k < 4; k++) {
            const __m512 wv = ld16(w, i + 16 * k, f16);
            for (int r = 0; r < nr; r++) acc[r][k] = _mm512_fmadd_ps(wv, ld16(a + r * as, i + 16 * k, af16), acc[r][k]);
        }
    for (int r = 0; r < nr; r++) {
        const void *x = a + r * as;
        const __m512 t = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][2]), _mm512_add_ps(acc[r][1], acc[r][3]));
        const float red = _mm512_reduce_add_ps(t);
        if (f16) {
            double sumf = red;
            for (int j = np; j < n; j++) sumf += (double)(el(w, j, 1) * el(x, j, af16));
            s[r * ss] = (float)sumf;
        } else { /* the leftover loop as GCC vectorised it (an MLA head of 32 takes 16 then 8) */
            s[r * ss] = coli_gcc_dot((const float *)w + np, (const float *)x + np, n - np, red, 16);
        }
    }
}

INL void fdot_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int f16, const int nr) {
    fdot_nr_a(n, w, a, as, s, ss, f16, f16, nr);
}
INL void fdot_f32a_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    fdot_nr_a(n, w, a, as, s, ss, 1, 0, nr);
}

/* llamafile's tinyBLAS<16> (batches; n % 16 == 0): one 16-lane accumulator
 * per output, one fma per 16 elements, _mm512_reduce_add_ps at the end. */
INL void fdot_mm_nr_a(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int f16,
                      const int af16, const int nr) {
    __m512 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        const __m512 wv = ld16(w, i, f16);
        for (int r = 0; r < nr; r++) acc[r] = _mm512_fmadd_ps(wv, ld16(a + r * as, i, af16), acc[r]);
    }
    for (int r = 0; r < nr; r++) s[r * ss] = _mm512_reduce_add_ps(acc[r]);
}
INL void fdot_mm_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int f16, const int nr) {
    fdot_mm_nr_a(n, w, a, as, s, ss, f16, f16, nr);
}
INL void fdot_mm_f32a_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    fdot_mm_nr_a(n, w, a, as, s, ss, 1, 0, nr);
}

/* tinyBLAS<16> for two weight rows: twice the independent fma chains */
INL void fdot_mm_2w_nr_a(int n, const void *w, size_t wst, const char *a, size_t as, float *s, size_t ss,
                         const int f16, const int af16, const int nr) {
    const char *w1 = (const char *)w + wst;
    __m512 acc[COLI_MAX_NR][2];
    for (int r = 0; r < nr; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        const __m512 w0v = ld16(w, i, f16), w1v = ld16(w1, i, f16);
        for (int r = 0; r < nr; r++) {
            const __m512 x = ld16(a + r * as, i, af16);
            acc[r][0] = _mm512_fmadd_ps(w0v, x, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(w1v, x, acc[r][1]);
        }
    }
    for (int r = 0; r < nr; r++) {
        s[r * ss] = _mm512_reduce_add_ps(acc[r][0]);
        s[r * ss + 1] = _mm512_reduce_add_ps(acc[r][1]);
    }
}

INL void fdot_mm_2w_nr(int n, const void *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int f16,
                       const int nr) {
    fdot_mm_2w_nr_a(n, w, wst, a, as, s, ss, f16, f16, nr);
}
INL void fdot_mm_2w_f32a_nr(int n, const void *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int nr) {
    fdot_mm_2w_nr_a(n, w, wst, a, as, s, ss, 1, 0, nr);
}

/* f16 -> f32, 16 at a time (exact: attention's widening of its f16 query and probabilities) */
TGT void coli_f16_to_f32_avx512(const void *src, float *dst, int64_t n) {
    const coli_half *x = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
    for (; i < n; i++) dst[i] = h2f(x[i]);
}

/* F16 weights against activations widened to f32 (attention's query and
 * probabilities, f16 values): the bits of the f16_f16 kernels, one conversion
 * per weight load instead of one more per activation row */
TGT void vec_dot_f16_f32a_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_f32a_nr, n, w, (const char *)a, as, s, ss);
}
TGT void vec_dot_f16_f32a_mm_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_mm_f32a_nr, n, w, (const char *)a, as, s, ss);
}
TGT void vec_dot_f16_f32a_mm_2w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                       int nr) {
    COLI_DISPATCH_NR(nr, fdot_mm_2w_f32a_nr, n, w, wst, (const char *)a, as, s, ss);
}

TGT void vec_dot_f32_f32_mm_2w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                      int nr) {
    COLI_DISPATCH_NR(nr, fdot_mm_2w_nr, n, w, wst, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_f16_f16_mm_2w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                      int nr) {
    COLI_DISPATCH_NR(nr, fdot_mm_2w_nr, n, w, wst, (const char *)a, as, s, ss, 1);
}

/* fdot_nr's arithmetic (f16, n % 64 == 0) turned on its side: a zmm holds 16
 * value dims instead of 16 cells. Lane l of fdot_nr's accumulator k sums the
 * cells c = 16k + l (mod 64) in order; here acc[l] does, for pass k. The
 * passes are combined as (0 + 2) + (1 + 3), and the 16 "lanes" by GCC's
 * _mm512_reduce_add_ps tree (halves, quarters, then [0]+[2], [1]+[3], sum),
 * each an exact vertical add, so every output has the bits of fdot_nr. */
/* Heads 0 .. nh - 1 (up to 4) of one 16-dim block: each value load serves
 * every head, the 16 lanes of an accumulator taken 4 at a time so 4 x 4
 * accumulators stay in registers. */
INL void pv_block(int len, const coli_half *v, size_t v_stride, const coli_half *p, size_t p_stride, float *out,
                  size_t out_stride, const int nh) {
    __m512 part[4][4][16]; /* [head][k][lane] */
    for (int k = 0; k < 4; k++)
        for (int l0 = 0; l0 < 16; l0 += 4) {
            __m512 acc[4][4];
            for (int j = 0; j < nh; j++)
                for (int l = 0; l < 4; l++) acc[j][l] = _mm512_setzero_ps();
            const int off = 16 * k + l0;
            for (int i = 0; i < len; i += 64) {
                const coli_half *vr = v + (size_t)(i + off) * v_stride;
                __m512 vv[4];
                for (int l = 0; l < 4; l++) vv[l] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vr + (size_t)l * v_stride)));
                for (int j = 0; j < nh; j++) {
                    const __m128 pj = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(p + (size_t)j * p_stride + i + off)));
                    acc[j][0] = _mm512_fmadd_ps(vv[0], _mm512_broadcastss_ps(pj), acc[j][0]);
                    acc[j][1] = _mm512_fmadd_ps(vv[1], _mm512_broadcastss_ps(_mm_shuffle_ps(pj, pj, 0x55)), acc[j][1]);
                    acc[j][2] = _mm512_fmadd_ps(vv[2], _mm512_broadcastss_ps(_mm_shuffle_ps(pj, pj, 0xaa)), acc[j][2]);
                    acc[j][3] = _mm512_fmadd_ps(vv[3], _mm512_broadcastss_ps(_mm_shuffle_ps(pj, pj, 0xff)), acc[j][3]);
                }
            }
            for (int j = 0; j < nh; j++)
                for (int l = 0; l < 4; l++) part[j][k][l0 + l] = acc[j][l];
        }
    for (int j = 0; j < nh; j++) {
        __m512 t[16];
        for (int l = 0; l < 16; l++)
            t[l] = _mm512_add_ps(_mm512_add_ps(part[j][0][l], part[j][2][l]), _mm512_add_ps(part[j][1][l], part[j][3][l]));
        for (int l = 0; l < 8; l++) t[l] = _mm512_add_ps(t[l + 8], t[l]);
        for (int l = 0; l < 4; l++) t[l] = _mm512_add_ps(t[l + 4], t[l]);
        const __m512 s0 = _mm512_add_ps(t[0], t[2]), s1 = _mm512_add_ps(t[1], t[3]);
        _mm512_storeu_ps(out + (size_t)j * out_stride, _mm512_add_ps(s0, s1));
    }
}

TGT void coli_pv_rows_f16_avx512(int len, const coli_half *v, size_t v_stride, int n_d, const coli_half *p,
                                 size_t p_stride, float *out, size_t out_stride, int nr) {
    for (int d0 = 0; d0 < n_d; d0 += 16) {
        const coli_half *vd = v + d0;
        float *od = out + d0;
        COLI_DISPATCH_NR(nr, pv_block, len, vd, v_stride, p, p_stride, od, out_stride); /* a constant head count */
    }
}

/* The widened P.V (probabilities in f32, up to COLI_PV_MAX_HEADS heads a call,
 * len % 64 == 0), blocked for the caches as the AVX2 twin: value dims go in
 * groups of one cache line (32 dims: two zmm), the cells of a group in blocks
 * of PV512_CELLS (64 KB of lines: L2) whose sums are parked in `sums` between
 * blocks (loads and stores: exact). A pass holds 4 heads x 32 dims of one of
 * fdot_nr's 64 lane classes (cell mod 64 = 16k + l: lane l of accumulator k),
 * so each line load serves 4 heads; the reduce is pv_block's, so every output
 * has fdot_nr's bits. The next block's lines are prefetched during this one. */
#define PV512_CELLS 1024
#define PV512_GROUP 32
#define PV512_CLASSES 64

/* One pass: class `cls` of the group's nz zmm blocks (2, or 1 for a last half group)
 * for heads 0 .. nh - 1, cells cb + cls, + 64 .. < ce */
INL void pv_pass_avx512(const coli_half *v, size_t v_stride, const float *p, size_t p_stride, int cb, int ce, int cls,
                        float *sums, const int nh, const int nz) {
    __m512 acc[4][2];
    for (int j = 0; j < nh; j++)
        for (int b = 0; b < nz; b++)
            acc[j][b] = _mm512_load_ps(sums + (((size_t)j * 2 + b) * PV512_CLASSES + cls) * 16);
    for (int i = cb + cls; i < ce; i += PV512_CLASSES) {
        const coli_half *vr = v + (size_t)i * v_stride;
        const __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)vr));
        const __m512 v1 = nz == 2 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vr + 16))) : v0;
        for (int j = 0; j < nh; j++) {
            const __m512 pj = _mm512_set1_ps(p[(size_t)j * p_stride + i]);
            acc[j][0] = _mm512_fmadd_ps(v0, pj, acc[j][0]);
            if (nz == 2) acc[j][1] = _mm512_fmadd_ps(v1, pj, acc[j][1]);
        }
    }
    for (int j = 0; j < nh; j++)
        for (int b = 0; b < nz; b++)
            _mm512_store_ps(sums + (((size_t)j * 2 + b) * PV512_CLASSES + cls) * 16, acc[j][b]);
}

/* One 16-dim block's 64 class sums -> out, pv_block's reduce */
INL void pv_reduce_avx512(const float *sums, float *out) {
    __m512 t[16];
    for (int l = 0; l < 16; l++)
        t[l] = _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(sums + l * 16), _mm512_load_ps(sums + (32 + l) * 16)),
                             _mm512_add_ps(_mm512_load_ps(sums + (16 + l) * 16), _mm512_load_ps(sums + (48 + l) * 16)));
    for (int l = 0; l < 8; l++) t[l] = _mm512_add_ps(t[l + 8], t[l]);
    for (int l = 0; l < 4; l++) t[l] = _mm512_add_ps(t[l + 4], t[l]);
    const __m512 s0 = _mm512_add_ps(t[0], t[2]), s1 = _mm512_add_ps(t[1], t[3]);
    _mm512_storeu_ps(out, _mm512_add_ps(s0, s1));
}

INL void pv_pass_nh(const coli_half *v, size_t v_stride, const float *p, size_t p_stride, int cb, int ce, int cls,
                    float *sums, int nh, const int nz) {
    switch (nh) { /* a constant head count */
    case 1: pv_pass_avx512(v, v_stride, p, p_stride, cb, ce, cls, sums, 1, nz); break;
    case 2: pv_pass_avx512(v, v_stride, p, p_stride, cb, ce, cls, sums, 2, nz); break;
    case 3: pv_pass_avx512(v, v_stride, p, p_stride, cb, ce, cls, sums, 3, nz); break;
    default: pv_pass_avx512(v, v_stride, p, p_stride, cb, ce, cls, sums, 4, nz); break;
    }
}

TGT void coli_pv_rows_f32a_avx512(int len, const coli_half *v, size_t v_stride, int n_d, const float *p,
                                  size_t p_stride, float *out, size_t out_stride, int nr) {
    /* [head][16-dim block of the group][class: cell mod 64][16 dims]: 64 KB for 8 heads */
    float sums[COLI_PV_MAX_HEADS][2][PV512_CLASSES][16] __attribute__((aligned(64)));
    for (int g0 = 0; g0 < n_d; g0 += PV512_GROUP) {
        const int nz = n_d - g0 < PV512_GROUP ? 1 : 2; /* 16-dim blocks in the group */
        for (int j = 0; j < nr; j++) memset(sums[j], 0, (size_t)nz * sizeof sums[j][0]);
        for (int cb = 0; cb < len; cb += PV512_CELLS) {
            const int ce = cb + PV512_CELLS < len ? cb + PV512_CELLS : len;
            /* the next block's lines (or the next group's first block's), a share before each pass */
            const int n_next = ce < len ? (len - ce < PV512_CELLS ? len - ce : PV512_CELLS) : g0 + PV512_GROUP < n_d ? ce - cb : 0;
            const coli_half *next = ce < len ? v + (size_t)ce * v_stride + g0 : v + g0 + PV512_GROUP;
            const int passes = (nr + 3) / 4 * PV512_CLASSES, share = (n_next + passes - 1) / passes;
            int pre = 0;
            for (int j0 = 0; j0 < nr; j0 += 4) {
                const int nh = nr - j0 < 4 ? nr - j0 : 4;
                const float *pj = p + (size_t)j0 * p_stride;
                for (int cls = 0; cls < PV512_CLASSES; cls++) {
                    for (const int end = pre + share < n_next ? pre + share : n_next; pre < end; pre++)
                        _mm_prefetch((const char *)(next + (size_t)pre * v_stride), _MM_HINT_T1);
                    if (nz == 2)
                        pv_pass_nh(v + g0, v_stride, pj, p_stride, cb, ce, cls, &sums[j0][0][0][0], nh, 2);
                    else
                        pv_pass_nh(v + g0, v_stride, pj, p_stride, cb, ce, cls, &sums[j0][0][0][0], nh, 1);
                }
            }
        }
        for (int j = 0; j < nr; j++)
            for (int b = 0; b < nz; b++) pv_reduce_avx512(&sums[j][b][0][0], out + (size_t)j * out_stride + g0 + 16 * b);
    }
}

/* Decode's scores, vec_dot_f16_f32a's bits (fdot_nr_a: 4 accumulators of 16 lanes over
 * steps of 64, reduced (0 + 2) + (1 + 3), _mm512_reduce_add_ps, a tail past the last
 * 64 in double): accumulator k of every (row, head) is built one at a time, KQ512_ROWS
 * rows x 4 heads in registers (16 chains), so each K load serves 4 heads and each
 * query load KQ512_ROWS rows. */
#define KQ512_ROWS 4
INL void kq_rows_block_avx512(int np, const coli_half *const rows[KQ512_ROWS], const float *q, size_t q_stride,
                              __m512 part[KQ512_ROWS][4][4], const int nh) {
    for (int kk = 0; kk < 4; kk++) {
        __m512 acc[KQ512_ROWS][4];
        for (int r = 0; r < KQ512_ROWS; r++)
            for (int j = 0; j < nh; j++) acc[r][j] = _mm512_setzero_ps();
        for (int i = 16 * kk; i < np; i += 64) {
            __m512 kv[KQ512_ROWS];
            for (int r = 0; r < KQ512_ROWS; r++) kv[r] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rows[r] + i)));
            for (int j = 0; j < nh; j++) {
                __m512 qv = _mm512_loadu_ps(q + (size_t)j * q_stride + i);
                __asm__("" : "+v"(qv)); /* one load for KQ512_ROWS rows, not one folded into each fma */
                for (int r = 0; r < KQ512_ROWS; r++) acc[r][j] = _mm512_fmadd_ps(kv[r], qv, acc[r][j]);
            }
        }
        for (int r = 0; r < KQ512_ROWS; r++)
            for (int j = 0; j < nh; j++) part[r][j][kk] = acc[r][j];
    }
}

TGT void coli_kq_rows_f32a_avx512(int n, const coli_half *k, size_t k_stride, int n_rows, const float *q,
                                  size_t q_stride, float *s, size_t s_stride, int nr) {
    const size_t row_bytes = (size_t)n * sizeof(coli_half);
    const int np = n & ~63;
    for (int c = 0; c < n_rows; c += KQ512_ROWS) {
        const int m = n_rows - c < KQ512_ROWS ? n_rows - c : KQ512_ROWS;
        const coli_half *rows[KQ512_ROWS]; /* the tail repeats its last row, the extra scores dropped */
        for (int r = 0; r < KQ512_ROWS; r++) rows[r] = k + (size_t)(c + (r < m ? r : m - 1)) * k_stride;
        for (int r = c + 2 * KQ512_ROWS; r < c + 3 * KQ512_ROWS && r < n_rows; r++) /* rows far apart: the prefetcher misses them */
            for (size_t o = 0; o < row_bytes; o += 64) _mm_prefetch((const char *)(k + (size_t)r * k_stride) + o, _MM_HINT_T0);
        for (int j0 = 0; j0 < nr; j0 += 4) {
            const int nh = nr - j0 < 4 ? nr - j0 : 4;
            __m512 part[KQ512_ROWS][4][4];
            const float *qj = q + (size_t)j0 * q_stride;
            switch (nh) { /* a constant head count */
            case 1: kq_rows_block_avx512(np, rows, qj, q_stride, part, 1); break;
            case 2: kq_rows_block_avx512(np, rows, qj, q_stride, part, 2); break;
            case 3: kq_rows_block_avx512(np, rows, qj, q_stride, part, 3); break;
            default: kq_rows_block_avx512(np, rows, qj, q_stride, part, 4); break;
            }
            for (int j = 0; j < nh; j++) {
                const float *qr = qj + (size_t)j * q_stride;
                float *sj = s + (size_t)(j0 + j) * s_stride + c;
                for (int r = 0; r < m; r++) {
                    const __m512 t = _mm512_add_ps(_mm512_add_ps(part[r][j][0], part[r][j][2]),
                                                   _mm512_add_ps(part[r][j][1], part[r][j][3]));
                    double sumf = _mm512_reduce_add_ps(t);
                    for (int e = np; e < n; e++) sumf += (double)(h2f(rows[r][e]) * qr[e]);
                    sj[r] = (float)sumf;
                }
            }
        }
    }
}

/* ggml_v_expf (ggml-cpu/vec.h, AVX-512 build), instruction for instruction */
INL __m512 v_expf(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0F)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (_mm512_kortestz(d, d)) return res;
    const __m512 zero = _mm512_setzero_ps();
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ), _mm512_set1_ps(INFINITY), zero);
    return _mm512_mask_blend_ps(d, res, alt);
}

/* coli_geglu_fn: 16 lanes at a time, the same bits as the scalar lookup (vcvtps2ph
 * rounds to nearest even like the software conversion). */
TGT void coli_geglu_avx512(float *x, const float *g, int n, const coli_half *table) {
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i), gv = _mm512_loadu_ps(g + i);
        const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m512i t32 = _mm512_i32gather_epi32(idx, (const void *)table, 2); /* entry in the low half */
        __m512 y = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(t32)), gv);
        y = _mm512_mask_mul_ps(y, _mm512_cmp_ps_mask(v, hi, _CMP_GE_OQ), v, gv);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(v, lo, _CMP_LE_OQ), _mm512_setzero_ps());
        _mm512_storeu_ps(x + i, y);
    }
    for (; i < n; i++) {
        const float v = x[i];
        x[i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v * g[i] : h2f(table[coli_fp32_to_fp16(v)]) * g[i];
    }
}

/* coli_swiglu_fn: ggml_vec_swiglu_f32's 16 lanes (ggml_v_silu: v / (1 + exp(0 - v)), times g) */
TGT void coli_swiglu_avx512(float *x, const float *g, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512 e = v_expf(_mm512_sub_ps(_mm512_setzero_ps(), v));
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), _mm512_loadu_ps(g + i)));
    }
    for (; i < n; i++) x[i] = (x[i] / (1.0f + expf(-x[i]))) * g[i];
}

/* ggml_vec_soft_max_f32's loop (coli_exp_sum_fn) */
TGT double coli_exp_sum_avx512(float *x, int n, float max) {
    double sum = 0.0;
    const __m512 m = _mm512_set1_ps(max);
    for (int i = 0; i + 15 < n; i += 16) {
        const __m512 v = v_expf(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        _mm512_storeu_ps(x + i, v);
        sum += (double)_mm512_reduce_add_ps(v);
    }
    return sum;
}

TGT void vec_dot_f32_f32_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_f16_f16_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_nr, n, w, (const char *)a, as, s, ss, 1);
}
TGT void vec_dot_f32_f32_mm_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_mm_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_f16_f16_mm_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, fdot_mm_nr, n, w, (const char *)a, as, s, ss, 1);
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
    COLI_DISPATCH_NR(nr, bf16_nr, n, (const coli_bf16 *)w, (const char *)a, as, s, ss);
}

/* ---- Q8_0 / Q4_0 / Q5_0 with Q8_0 activations ---------------------------------------- */

/* Signed weight bytes of block ib (sign trick: |w| x sign(a, w)). */
INL __m256i w1_q(const void *wb, int ib, const int kind) {
    if (kind == 0) return _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)wb + ib)->qs);
    const uint8_t *q;
    uint32_t h = 0;
    if (kind == 1) {
        q = ((const block_q4_0 *)wb + ib)->qs;
    } else {
        const block_q5_0 *x = (const block_q5_0 *)wb + ib;
        q = x->qs;
        memcpy(&h, x->qh, 4);
    }
    const __m128i t = _mm_loadu_si128((const __m128i *)q);
    __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    b = _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
    if (kind == 1) return _mm256_sub_epi8(b, _mm256_set1_epi8(8));
    return _mm256_or_si256(b, _mm256_maskz_mov_epi8(~(__mmask32)h, _mm256_set1_epi8((char)0xF0)));  /* q - 16 */
}

INL int wsize(const int kind) {
    return kind == 0 ? (int)sizeof(block_q8_0) : kind == 1 ? (int)sizeof(block_q4_0) : (int)sizeof(block_q5_0);
}

/* the fp16 scales of 16 consecutive blocks (the first 2 bytes of each) as floats */
INL __m512 scales16(const void *blocks, int bsize) {
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(bsize));
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(off, blocks, 1)));
}

/* the same for the first cnt (1..16) blocks, zeros after */
INL __m512 scales16m(const void *blocks, int bsize, int cnt) {
    if (cnt == 16) return scales16(blocks, bsize);
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(bsize));
    const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), (__mmask16)((1u << cnt) - 1), off, blocks, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
}

/* ggml_vec_dot_q{8,4,5}_0_q8_0 and tinyBLAS_Q0_AVX alike: per row one 8-lane
 * accumulator, acc = fma(dw * dy, float(dpbusd lanes), acc) block after block,
 * hsum_float_8 at the end. Rows go in pairs, one per zmm half. The block
 * scale products dw * dy are formed 16 blocks at a time (the same floats). */
INL void q8_0_family_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int kind,
                        const int nr) {
    const int nb = n / QK8_0, bs = wsize(kind);
    const int npair = nr / 2, odd = nr & 1;
    __m512 acc[2];
    __m256 acc1 = _mm256_setzero_ps();
    for (int p = 0; p < 2; p++) acc[p] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    for (int i0 = 0; i0 < nb; i0 += 16) {
        const int cnt = nb - i0 < 16 ? nb - i0 : 16;
        __m512 dxy[COLI_MAX_NR];
        if (cnt == 16) {
            const __m512 dx = scales16((const char *)w + (size_t)i0 * bs, bs);
            for (int r = 0; r < nr; r++)
                dxy[r] = _mm512_mul_ps(dx, scales16(a + r * as + (size_t)i0 * sizeof(block_q8_0), (int)sizeof(block_q8_0)));
        } else {
            float t[COLI_MAX_NR][16];
            for (int k = 0; k < cnt; k++) {
                coli_half hx;
                memcpy(&hx, (const char *)w + (size_t)(i0 + k) * bs, 2);
                for (int r = 0; r < nr; r++) t[r][k] = h2f(hx) * h2f(((const block_q8_0 *)(a + r * as))[i0 + k].d);
            }
            for (int r = 0; r < nr; r++) dxy[r] = _mm512_maskz_loadu_ps((__mmask16)((1u << cnt) - 1), t[r]);
        }
        for (int k = 0; k < cnt; k++) {
            const int ib = i0 + k;
            const __m256i wq = w1_q(w, ib, kind);
            const __m512i wz = _mm512_broadcast_i64x4(wq);
            const __m512i aw = _mm512_abs_epi8(wz);
            const __mmask64 neg = _mm512_movepi8_mask(wz);
            const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi32(k), _mm256_set1_epi32(16 + k), 1);
            for (int p = 0; p < npair; p++) {
                const block_q8_0 *y0 = (const block_q8_0 *)(a + (2 * p) * as) + ib;
                const block_q8_0 *y1 = (const block_q8_0 *)(a + (2 * p + 1) * as) + ib;
                __m512i yq = load2x256(y0->qs, y1->qs);
                yq = _mm512_mask_sub_epi8(yq, neg, zero, yq);
                const __m512i dot = _mm512_dpbusd_epi32(zero, aw, yq);
                const __m512 d = _mm512_permutex2var_ps(dxy[2 * p], sel, dxy[2 * p + 1]);
                acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dot), acc[p]);
            }
            if (odd) {
                const block_q8_0 *y = (const block_q8_0 *)(a + (nr - 1) * as) + ib;
                __m256i yq = _mm256_loadu_si256((const __m256i *)y->qs);
                yq = _mm256_mask_sub_epi8(yq, (__mmask32)neg, _mm256_setzero_si256(), yq);
                const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm512_castsi512_si256(aw), yq);
                const __m256 d = _mm512_castps512_ps256(_mm512_permutexvar_ps(_mm512_set1_epi32(k), dxy[nr - 1]));
                acc1 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot), acc1);
            }
        }
    }
    for (int p = 0; p < npair; p++) {
        s[(2 * p) * ss] = hsum8(_mm512_castps512_ps256(acc[p]));
        s[(2 * p + 1) * ss] = hsum8(_mm512_extractf32x8_ps(acc[p], 1));
    }
    if (odd) s[(nr - 1) * ss] = hsum8(acc1);
}

TGT void vec_dot_q8_0_q8_0_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q8_0_family_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_q4_0_q8_0_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q8_0_family_nr, n, w, (const char *)a, as, s, ss, 1);
}
TGT void vec_dot_q5_0_q8_0_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q8_0_family_nr, n, w, (const char *)a, as, s, ss, 2);
}

/* Weight bytes of block ib of two rows as unsigned quants q + c (Q8_0:
 * q ^ 0x80 = q + 128; Q4_0: the nibble = q + 8; Q5_0: 5 bits = q + 16),
 * [row 0 | row 1]: dpbusd(-c * sum(y), q + c, y) = sum(q * y) in every lane,
 * the exact integers the sign trick gives, without the per-row sign fix. */
INL __m512i w2rows_u(const char *w0, const char *w1, int ib, const int kind) {
    if (kind == 0)
        return _mm512_xor_si512(load2x256(((const block_q8_0 *)w0 + ib)->qs, ((const block_q8_0 *)w1 + ib)->qs),
                                _mm512_set1_epi8((char)0x80));
    const uint8_t *q0 = kind == 1 ? ((const block_q4_0 *)w0 + ib)->qs : ((const block_q5_0 *)w0 + ib)->qs;
    const uint8_t *q1 = kind == 1 ? ((const block_q4_0 *)w1 + ib)->qs : ((const block_q5_0 *)w1 + ib)->qs;
    const __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                              _mm_loadu_si128((const __m128i *)q1), 1);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1);  /* [r0, r1, r0>>4, r1>>4] */
    z = _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0F));
    if (kind == 1) return z;
    uint32_t h0, h1;
    memcpy(&h0, ((const block_q5_0 *)w0 + ib)->qh, 4);
    memcpy(&h1, ((const block_q5_0 *)w1 + ib)->qh, 4);
    return _mm512_mask_add_epi8(z, (__mmask64)h0 | ((__mmask64)h1 << 32), z, _mm512_set1_epi8(16));
}

/* Signed weight bytes of block ib of two rows: [row 0 | row 1] */
INL __m512i w2rows_q(const char *w0, const char *w1, int ib, const int kind) {
    const __m512i u = w2rows_u(w0, w1, ib, kind);
    return kind == 0 ? _mm512_xor_si512(u, _mm512_set1_epi8((char)0x80)) : _mm512_sub_epi8(u, _mm512_set1_epi8(kind == 1 ? 8 : 16));
}

/* Two weight rows, one per zmm half, against 1..4 activation rows: each
 * weight block is decoded once for all rows, each activation block broadcast
 * to both halves; per (weight row, activation row) the same fma chain as
 * q8_0_family_nr, so the bits are vec_dot's. */
INL void q8_0_family_2w_nr(int n, const void *w, size_t wst, const char *a, size_t as, float *s, size_t ss,
                           const int kind, const int nr) {
    const int nb = n / QK8_0, bs = wsize(kind);
    const char *w0 = w, *w1 = (const char *)w + wst;
    __m512 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    for (int i0 = 0; i0 < nb; i0 += 16) {
        const int cnt = nb - i0 < 16 ? nb - i0 : 16;
        __m512 p0[COLI_MAX_NR], p1[COLI_MAX_NR];  /* dw * dy of the 16 blocks, weight row 0 / 1 */
        if (cnt == 16) {
            const __m512 dx0 = scales16(w0 + (size_t)i0 * bs, bs), dx1 = scales16(w1 + (size_t)i0 * bs, bs);
            for (int r = 0; r < nr; r++) {
                const __m512 dy = scales16(a + r * as + (size_t)i0 * sizeof(block_q8_0), (int)sizeof(block_q8_0));
                p0[r] = _mm512_mul_ps(dx0, dy);
                p1[r] = _mm512_mul_ps(dx1, dy);
            }
        } else {
            float t0[COLI_MAX_NR][16], t1[COLI_MAX_NR][16];
            for (int k = 0; k < cnt; k++) {
                coli_half h0, h1;
                memcpy(&h0, w0 + (size_t)(i0 + k) * bs, 2);
                memcpy(&h1, w1 + (size_t)(i0 + k) * bs, 2);
                for (int r = 0; r < nr; r++) {
                    const float dy = h2f(((const block_q8_0 *)(a + r * as))[i0 + k].d);
                    t0[r][k] = h2f(h0) * dy;
                    t1[r][k] = h2f(h1) * dy;
                }
            }
            for (int r = 0; r < nr; r++) {
                p0[r] = _mm512_maskz_loadu_ps((__mmask16)((1u << cnt) - 1), t0[r]);
                p1[r] = _mm512_maskz_loadu_ps((__mmask16)((1u << cnt) - 1), t1[r]);
            }
        }
        for (int k = 0; k < cnt; k++) {
            const int ib = i0 + k;
            const __m512i wz = w2rows_q(w0, w1, ib, kind);
            const __m512i aw = _mm512_abs_epi8(wz);
            const __mmask64 neg = _mm512_movepi8_mask(wz);
            const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi32(k), _mm256_set1_epi32(16 + k), 1);
            for (int r = 0; r < nr; r++) {
                const __m512i yq = _mm512_broadcast_i64x4(
                    _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)(a + r * as) + ib)->qs));
                const __m512i dot = _mm512_dpbusd_epi32(zero, aw, _mm512_mask_sub_epi8(yq, neg, zero, yq));
                acc[r] = _mm512_fmadd_ps(_mm512_permutex2var_ps(p0[r], sel, p1[r]), _mm512_cvtepi32_ps(dot), acc[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        s[r * ss] = hsum8(_mm512_castps512_ps256(acc[r]));
        s[r * ss + 1] = hsum8(_mm512_extractf32x8_ps(acc[r], 1));
    }
}

#define DEF_2W(name, kind)                                                                                      \
    TGT void name(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss, int nr) {   \
        COLI_DISPATCH_NR(nr, q8_0_family_2w_nr, n, w, wst, (const char *)a, as, s, ss, kind);                   \
    }
DEF_2W(vec_dot_q8_0_q8_0_2w_avx512, 0)
DEF_2W(vec_dot_q4_0_q8_0_2w_avx512, 1)
DEF_2W(vec_dot_q5_0_q8_0_2w_avx512, 2)

#define Q0_PAIRS 4 /* weight-row pairs per pass of the 16-row kernel */

/* vec_dot for 16 weight rows, in halves of Q0_PAIRS pairs (one pair per zmm,
 * as in q8_0_family_2w_nr), against activation rows 4 at a time: the same fma
 * chain per (weight row, activation row), so the same bits. Each weight block
 * is loaded once per half (batches: decoded once per call into ub), and the
 * unsigned-weight dot needs no per-row sign fix. Scales come converted:
 * dxf[j][ib] for weight row j of the half, dyf[r][ib] for activation row r.
 * pf_lines > 0: prefetch that many lines at pf, spread over the blocks
 * (decode reads each weight once; the hardware prefetcher stops at every
 * 4 KiB page). */
INL void q0_half(int nb, const char *wh, size_t wst, const __m512i *ub, const float *dxf, const float *dyf,
                 const char *a, size_t as, float *s, size_t ss, const int kind, const int nr, const char *pf,
                 int pf_lines) {
    const __m512i cu = _mm512_set1_epi8(kind == 0 ? (char)0x80 : kind == 1 ? 8 : 16);
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[Q0_PAIRS][COLI_MAX_NR];
    for (int p = 0; p < Q0_PAIRS; p++)
        for (int r = 0; r < nr; r++) acc[p][r] = _mm512_setzero_ps();
    for (int i0 = 0; i0 < nb; i0 += 16) {
        const int cnt = nb - i0 < 16 ? nb - i0 : 16;
        const __mmask16 m = (__mmask16)((1u << cnt) - 1);
        __m512 dx[2 * Q0_PAIRS];
        if (dxf) {
            for (int j = 0; j < 2 * Q0_PAIRS; j++) dx[j] = _mm512_maskz_loadu_ps(m, dxf + (size_t)j * nb + i0);
        } else { /* one row: the 16 blocks' products dw * dy at once, straight from the blocks */
            const __m512 dy = scales16m(a + (size_t)i0 * sizeof(block_q8_0), (int)sizeof(block_q8_0), cnt);
            for (int j = 0; j < 2 * Q0_PAIRS; j++)
                dx[j] = _mm512_mul_ps(scales16m(wh + j * wst + (size_t)i0 * wsize(kind), wsize(kind), cnt), dy);
        }
        for (int k = 0; k < cnt; k++) {
            const int ib = i0 + k;
            for (int l = ib * pf_lines / nb; l < (ib + 1) * pf_lines / nb; l++)
                COLI_PREFETCH_W(pf + 64 * (size_t)l);
            __m512i y[COLI_MAX_NR], ncs[COLI_MAX_NR];
            for (int r = 0; r < nr; r++) {
                y[r] = _mm512_broadcast_i64x4(
                    _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)(a + r * as) + ib)->qs));
                ncs[r] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, cu, y[r]));
            }
            const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi32(k), _mm256_set1_epi32(16 + k), 1);
            for (int p = 0; p < Q0_PAIRS; p++) {
                const __m512i u = ub ? _mm512_load_si512(ub + (size_t)ib * Q0_PAIRS + p)
                                     : w2rows_u(wh + (2 * p) * wst, wh + (2 * p + 1) * wst, ib, kind);
                const __m512 dw = _mm512_permutex2var_ps(dx[2 * p], sel, dx[2 * p + 1]);  /* [dw0 x8 | dw1 x8] */
                for (int r = 0; r < nr; r++) {
                    const __m512i dot = _mm512_dpbusd_epi32(ncs[r], u, y[r]);
                    const __m512 d = dxf ? _mm512_mul_ps(dw, _mm512_set1_ps(dyf[(size_t)r * nb + ib])) : dw;
                    acc[p][r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dot), acc[p][r]);
                }
            }
        }
    }
    for (int p = 0; p < Q0_PAIRS; p++)
        for (int r = 0; r < nr; r++) {
            s[r * ss + 2 * p] = hsum8(_mm512_castps512_ps256(acc[p][r]));
            s[r * ss + 2 * p + 1] = hsum8(_mm512_extractf32x8_ps(acc[p][r], 1));
        }
}

/* 1..4 activation rows; ub NULL or not, as a constant for the compiler */
INL void q0_group(int nb, const char *wh, size_t wst, const __m512i *ub, const float *dxf, const float *dyf,
                  const char *a, size_t as, float *s, size_t ss, const int kind, int rn, const char *pf, int pl) {
#define Q0_CASE(R)                                                                                   \
    case R:                                                                                          \
        if (ub) q0_half(nb, wh, wst, ub, dxf, dyf, a, as, s, ss, kind, R, pf, pl);                   \
        else q0_half(nb, wh, wst, NULL, dxf, dyf, a, as, s, ss, kind, R, pf, pl);                    \
        break;
    switch (rn) {
    Q0_CASE(1)
    Q0_CASE(2)
    Q0_CASE(3)
    default: Q0_CASE(4)
    }
#undef Q0_CASE
}

/* fp16 scales of nb blocks (bsize bytes apart) -> floats */
INL void scales_row(const char *blocks, int bsize, int nb, float *out) {
    for (int i0 = 0; i0 < nb; i0 += 16) {
        const int cnt = nb - i0 < 16 ? nb - i0 : 16;
        _mm512_mask_storeu_ps(out + i0, (__mmask16)((1u << cnt) - 1), scales16m(blocks + (size_t)i0 * bsize, bsize, cnt));
    }
}

#define Q0_MAX_BLOCKS 1024     /* rows up to 32768 elements take the 16-row path (stack use) */
#define Q0_DECODED_BLOCKS 128  /* batches decode a half's weights once, rows up to this many blocks */
#define Q0_SCALE_FLOATS 8192   /* activation scales converted per slab of rows */

INL void q8_0_family_16w(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss, int nr,
                         const int kind) {
    const int nb = n / QK8_0, bs = wsize(kind), halves = 16 / (2 * Q0_PAIRS);
    if (nb > Q0_MAX_BLOCKS) {
        for (int j = 0; j < 16; j += 2)
            for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
                const char *ar = (const char *)a + (size_t)r0 * as;
                float *sr = s + (size_t)r0 * ss + j;
                const int rows = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
                COLI_DISPATCH_NR(rows, q8_0_family_2w_nr, n, (const char *)w + j * wst, wst, ar, as, sr, ss, kind);
            }
        return;
    }
    const int pf_lines = (int)((16 * wst + 63) / 64);  /* the next tile, spread over the halves */
    if (nr == 1) { /* decode: scales straight from the blocks */
        for (int h = 0; h < halves; h++) {
            const int l0 = h * pf_lines / halves, l1 = (h + 1) * pf_lines / halves;
            q0_half(nb, (const char *)w + (size_t)(2 * Q0_PAIRS * h) * wst, wst, NULL, NULL, NULL, a, as,
                    s + 2 * Q0_PAIRS * h, ss, kind, 1, (const char *)w + 16 * wst + 64 * (size_t)l0, l1 - l0);
        }
        return;
    }
    int slab = Q0_SCALE_FLOATS / nb;
    slab = slab < COLI_MAX_NR ? COLI_MAX_NR : slab - slab % COLI_MAX_NR;
    if (slab > nr) slab = nr;
    const int decode_once = nr > COLI_MAX_NR && nb <= Q0_DECODED_BLOCKS;
    float dyf[(size_t)slab * nb], dxf[2 * Q0_PAIRS * (size_t)nb];
    __m512i ub[decode_once ? nb * Q0_PAIRS : 1];
    for (int r0 = 0; r0 < nr; r0 += slab) {
        const int rs = nr - r0 < slab ? nr - r0 : slab;
        for (int r = 0; r < rs; r++)
            scales_row((const char *)a + (size_t)(r0 + r) * as, (int)sizeof(block_q8_0), nb, dyf + (size_t)r * nb);
        for (int h = 0; h < halves; h++) {
            const char *wh = (const char *)w + (size_t)(2 * Q0_PAIRS * h) * wst;
            for (int j = 0; j < 2 * Q0_PAIRS; j++) scales_row(wh + j * wst, bs, nb, dxf + (size_t)j * nb);
            if (decode_once && rs > COLI_MAX_NR)
                for (int ib = 0; ib < nb; ib++)
                    for (int p = 0; p < Q0_PAIRS; p++)
                        _mm512_store_si512(ub + (size_t)ib * Q0_PAIRS + p,
                                           w2rows_u(wh + (2 * p) * wst, wh + (2 * p + 1) * wst, ib, kind));
            const int l0 = h * pf_lines / halves, l1 = (h + 1) * pf_lines / halves;
            for (int g = 0; g < rs; g += COLI_MAX_NR) {
                const int rn = rs - g < COLI_MAX_NR ? rs - g : COLI_MAX_NR;
                q0_group(nb, wh, wst, decode_once && rs > COLI_MAX_NR ? ub : NULL, dxf, dyf + (size_t)g * nb,
                         (const char *)a + (size_t)(r0 + g) * as, as, s + (size_t)(r0 + g) * ss + 2 * Q0_PAIRS * h, ss,
                         kind, rn, (const char *)w + 16 * wst + 64 * (size_t)l0, r0 == 0 && g == 0 ? l1 - l0 : 0);
            }
        }
    }
}

#define DEF_16W(name, kind)                                                                                     \
    TGT void name(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss, int nr) {   \
        q8_0_family_16w(n, w, wst, a, as, s, ss, nr, kind);                                                     \
    }
DEF_16W(vec_dot_q8_0_q8_0_16w_avx512, 0)
DEF_16W(vec_dot_q4_0_q8_0_16w_avx512, 1)
DEF_16W(vec_dot_q5_0_q8_0_16w_avx512, 2)

/* Q4_0 as llama.cpp computes it when it repacks the weights (n_out % 8 == 0:
 * block_q4_0x8, ggml_gemv/gemm_q4_0_8x8_q8_0): per output, block after block,
 * acc = fma(float(isum), dw * dy, acc) with isum the block's exact integer sum. */

INL void q4_0_repacked_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    const int nb = n / QK4_0;
    float acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = 0.0f;
    for (int ib = 0; ib < nb; ib++) {
        const float dw = h2f(((const block_q4_0 *)w + ib)->d);
        const __m256i wq = w1_q(w, ib, 1);
        const __m256i aw = _mm256_abs_epi8(wq);
        const __mmask32 neg = _mm256_movepi8_mask(wq);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + r * as) + ib;
            __m256i yq = _mm256_loadu_si256((const __m256i *)y->qs);
            yq = _mm256_mask_sub_epi8(yq, neg, _mm256_setzero_si256(), yq);
            const int isum = hsum_i32_8(_mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, yq));
            acc[r] = fmaf((float)isum, dw * h2f(y->d), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = acc[r];
}

TGT void vec_dot_q4_0_q8_0_mm_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q4_0_repacked_nr, n, w, (const char *)a, as, s, ss);
}

/* The same for 16 weight rows, one per lane. A block's 16 x 16 quant bytes
 * are transposed in registers (row j's dword k -> lane j of q[k]); its
 * nibbles, q + 8 as unsigned bytes, dot the activation's signed bytes from a
 * start of -8 * sum(y): each lane ends on the row's exact integer sum. */
/* r16: w is a tile coli_repack_b32_r16 made: the words are loads */
INL void q4_0_block16(const char *w, size_t wst, int ib, __m512i wk[8], const int r16) {
    __m512i q[4];
    if (r16)
        for (int k = 0; k < 4; k++) q[k] = _mm512_loadu_si512(COLI_R16B_Q(w, 16, 2, ib, k));
    else
        transpose16x4(w + (size_t)ib * sizeof(block_q4_0) + offsetof(block_q4_0, qs), wst, q);
    const __m512i m4 = _mm512_set1_epi8(0xF);
    for (int k = 0; k < 4; k++) {
        wk[k] = _mm512_and_si512(q[k], m4);                          /* elements 4k..4k+3 */
        wk[4 + k] = _mm512_and_si512(_mm512_srli_epi16(q[k], 4), m4); /* elements 16+4k.. */
    }
}

/* the 16 rows' scales of block ib: gathered (off: the rows' offsets), or a tile's 16 halves */
INL __m512 q4_0_scales16(const char *w, __m512i off, int ib, const int r16) {
    if (r16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)COLI_R16B_D(w, 16, 2, ib)));
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(off, w + (size_t)ib * sizeof(block_q4_0), 1)));
}

/* -8 * sum of a Q8_0 block's quants */
INL int q8_0_neg8sum(const block_q8_0 *y) {
    const __m256i d = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                          _mm256_loadu_si256((const __m256i *)y->qs));
    return -8 * hsum_i32_8(d);
}

INL __m512i q4_0_isum16(const __m512i wk[8], const block_q8_0 *y, int ncs) {
    __m512i isum = _mm512_set1_epi32(ncs);
    for (int k = 0; k < 8; k++) {
        int yk;
        memcpy(&yk, y->qs + 4 * k, 4);
        isum = _mm512_dpbusd_epi32(isum, wk[k], _mm512_set1_epi32(yk));
    }
    return isum;
}

/* nr (1..4) activation rows, accumulators in registers: decode and small batches */
INL void q4_0_16w_few(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int r16,
                      const int nr) {
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)wst));
    const char *pf = w + 16 * wst;  /* the next tile: see q0_half (a repacked one is one stream: none) */
    const int pf_lines = r16 ? 0 : (int)((16 * wst + 63) / 64);
    __m512 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm512_setzero_ps();
    for (int ib = 0; ib < nb; ib++) {
        for (int l = ib * pf_lines / nb; l < (ib + 1) * pf_lines / nb; l++) COLI_PREFETCH_W(pf + 64 * (size_t)l);
        const __m512 dw = q4_0_scales16(w, off, ib, r16);
        __m512i wk[8];
        q4_0_block16(w, wst, ib, wk, r16);
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
            const __m512i isum = q4_0_isum16(wk, y, q8_0_neg8sum(y));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(h2f(y->d))), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) _mm512_storeu_ps(s + (size_t)r * ss, acc[r]);
}

INL void q4_0_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr, const int r16) {
    const int nb = n / QK4_0;
    if (nr <= COLI_MAX_NR) {
        COLI_DISPATCH_NR(nr, q4_0_16w_few, nb, w, wst, a, as, s, ss, r16);
        return;
    }
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)wst));
    float acc[Q4K_ROWS][16];
    for (int r0 = 0; r0 < nr; r0 += Q4K_ROWS) {
        const int rn = nr - r0 < Q4K_ROWS ? nr - r0 : Q4K_ROWS;
        memset(acc, 0, (size_t)rn * sizeof acc[0]);
        for (int ib = 0; ib < nb; ib++) {
            const __m512 dw = q4_0_scales16(w, off, ib, r16);
            __m512i wk[8];
            q4_0_block16(w, wst, ib, wk, r16);
            for (int r = 0; r < rn; r++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)(r0 + r) * as) + ib;
                const __m512i isum = q4_0_isum16(wk, y, q8_0_neg8sum(y));
                const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(h2f(y->d)));
                _mm512_storeu_ps(acc[r], _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, _mm512_loadu_ps(acc[r])));
            }
        }
        for (int r = 0; r < rn; r++)
            for (int j = 0; j < 16; j++) s[(size_t)(r0 + r) * ss + j] = acc[r][j];
    }
}

TGT void vec_dot_q4_0_q8_0_mm_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                         size_t ss, int nr) {
    q4_0_16w(n, w, wst, a, as, s, ss, nr, 0);
}
TGT void vec_dot_q4_0_q8_0_r16_mm_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                             size_t ss, int nr) {
    q4_0_16w(n, w, wst, a, as, s, ss, nr, 1);
}

/* The AVX2 set's repacked Q4_0 on cores with AVX-512 VNNI (Zen 4 runs that
 * set's Q4_0 fastest: its 512-bit kernel gathers the scales): 8 rows per ymm
 * as quant_avx2.c's q4_0_8w_few, each lane's integer sum by 256-bit dpbusd
 * instead of maddubs, adds and madd (the same exact integers), then the same
 * float steps: 14.6 -> 13.7 us a 1024x512 decode matvec, cache-hot, Zen 4.
 * Batches keep the AVX2 kernel. */
INL void q4_0_8w_vnni(int nb, const char *w, size_t wst, const char *a, size_t as, const int *ncs, float *s, size_t ss,
                      const int h, const int nr) { /* h: 0, rows as stored; 1 or 2, a half of the tile at w */
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const int pf_lines = h ? 0 : (int)((8 * wst + 63) / 64); /* the next 8 rows, over the blocks (a tile: none) */
    __m256 acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ib++) {
        for (int l = ib * pf_lines / nb; l < (ib + 1) * pf_lines / nb; l++) COLI_PREFETCH_W(w + 8 * wst + 64 * (size_t)l);
        const char *b = w + (size_t)ib * sizeof(block_q4_0);
        /* (a vpgatherdd of the 8 scales: 16% slower on Zen 4) */
        const __m256 dw = h ? r16b_scales8(w, ib, h) : halves8(b, wst);
        __m256i q[4];
        if (h)
            r16b_words8(w, ib, h, q);
        else
            transpose8x4(b + offsetof(block_q4_0, qs), wst, q);
        __m256i lo[4], hi[4]; /* elements 4k..4k+3 and 16+4k.. of each row */
        for (int k = 0; k < 4; k++) {
            lo[k] = _mm256_and_si256(q[k], m4);
            hi[k] = _mm256_and_si256(_mm256_srli_epi16(q[k], 4), m4);
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(a + (size_t)r * as) + ib;
            __m256i c[4] = {_mm256_set1_epi32(ncs[(size_t)r * nb + ib]), _mm256_setzero_si256(), _mm256_setzero_si256(),
                            _mm256_setzero_si256()}; /* short chains: dpbusd's latency, not its throughput, bounds one row */
            for (int k = 0; k < 4; k++) {
                int yl, yh;
                memcpy(&yl, y->qs + 4 * k, 4);
                memcpy(&yh, y->qs + 16 + 4 * k, 4);
                c[k & 1] = _mm256_dpbusd_epi32(c[k & 1], lo[k], _mm256_set1_epi32(yl));
                c[2 + (k & 1)] = _mm256_dpbusd_epi32(c[2 + (k & 1)], hi[k], _mm256_set1_epi32(yh));
            }
            const __m256i isum = _mm256_add_epi32(_mm256_add_epi32(c[0], c[1]), _mm256_add_epi32(c[2], c[3]));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(h2f(y->d))), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) _mm256_storeu_ps(s + (size_t)r * ss, acc[r]);
}

INL void q4_0_16w_vnni(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss, int nr,
                       const int r16) {
    if (nr > COLI_MAX_NR) {
        (r16 ? vec_dot_q4_0_q8_0_r16_mm_16w_avx2 : vec_dot_q4_0_q8_0_mm_16w_avx2)(n, w, wst, a, as, s, ss, nr);
        return;
    }
    const int nb = n / QK4_0;
    int ncs[(size_t)COLI_MAX_NR * nb];
    for (int r = 0; r < nr; r++)
        for (int ib = 0; ib < nb; ib++)
            ncs[(size_t)r * nb + ib] = q8_0_neg8sum((const block_q8_0 *)((const char *)a + (size_t)r * as) + ib);
    for (int g = 0; g < 16; g += 8)
        COLI_DISPATCH_NR(nr, q4_0_8w_vnni, nb, r16 ? (const char *)w : (const char *)w + (size_t)g * wst, wst,
                         (const char *)a, as, ncs, s + g, ss, r16 ? 1 + g / 8 : 0);
}

TGT void vec_dot_q4_0_q8_0_mm_16w_vnni256(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                          size_t ss, int nr) {
    q4_0_16w_vnni(n, w, wst, a, as, s, ss, nr, 0);
}
TGT void vec_dot_q4_0_q8_0_r16_mm_16w_vnni256(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                              size_t ss, int nr) {
    q4_0_16w_vnni(n, w, wst, a, as, s, ss, nr, 1);
}

/* ---- K-quants ---------------------------------------------------------------------- */

/* int16 lanes 0..15 = v[i0], 16..31 = v[i1] (v: 8 or 16 int16 in the low lanes) */
INL __m512i bcast2_16(__m512i v, int i0, int i1) {
    const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi16((short)i0), _mm256_set1_epi16((short)i1), 1);
    return _mm512_permutexvar_epi16(idx, v);
}

/* 0x10 where bit `bit` of each byte of h (zmm) is set */
INL __m512i hbit_10(__m512i h, int bit) {
    return _mm512_slli_epi16(_mm512_and_si512(_mm512_srl_epi16(h, _mm_cvtsi32_si128(bit)), _mm512_set1_epi8(1)), 4);
}

/* The same two arithmetics for 16 weight rows at once, with the rows in the
 * 16 lanes (as llama.cpp's repacked layout has them, here transposed on the
 * fly, once per super-block for up to 64 activation rows): every lane holds
 * one output's exact integer sum, so no horizontal reduction is needed. */

/* q[k], lane j: 32-bit word k of the 32 bytes at b + j * wst (a 16 x 8 transpose
 * from 256-bit loads: rows t and t + 4 share a register, then 24 shuffles) */
INL void transpose16x8(const char *b, size_t wst, __m512i q[8]) {
    __m512i A[8], U[8], W[8];
    for (int p = 0; p < 8; p++) { /* A[p]: [row t | row t + 4], t = 0..3, 8..11 */
        const int t = (p & 3) + 8 * (p >> 2);
        A[p] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + (size_t)t * wst))),
                                  _mm256_loadu_si256((const __m256i *)(b + (size_t)(t + 4) * wst)), 1);
    }
    for (int p = 0; p < 8; p += 2) {
        U[p] = _mm512_unpacklo_epi32(A[p], A[p + 1]);
        U[p + 1] = _mm512_unpackhi_epi32(A[p], A[p + 1]);
    }
    /* W[4h + m], 128-bit lane L: word 4 (L & 1) + m of rows 8h + 4 (L >> 1) + 0..3 */
    for (int h = 0; h < 2; h++) {
        W[4 * h + 0] = _mm512_unpacklo_epi64(U[4 * h], U[4 * h + 2]);
        W[4 * h + 1] = _mm512_unpackhi_epi64(U[4 * h], U[4 * h + 2]);
        W[4 * h + 2] = _mm512_unpacklo_epi64(U[4 * h + 1], U[4 * h + 3]);
        W[4 * h + 3] = _mm512_unpackhi_epi64(U[4 * h + 1], U[4 * h + 3]);
    }
    for (int m = 0; m < 4; m++) {
        q[m] = _mm512_shuffle_i32x4(W[m], W[4 + m], 0x88);     /* lanes 0, 2 of each */
        q[4 + m] = _mm512_shuffle_i32x4(W[m], W[4 + m], 0xDD); /* lanes 1, 3 of each */
    }
}

/* d, dmin, the 8 scales and 8 mins of super-block i of the 16 rows, in lanes; r16: the tile is
 * repacked (quant.h coli_repack_q4_K_r16), its 4 head words already in lanes at base */
INL void q4_K_scales16(const char *base, size_t wst, __m512 *dx, __m512 *dmx, __m512i sc[8], __m512i mn[8],
                       const int r16) {
    const __m512i m8 = _mm512_set1_epi32(0xFF);
    __m512i head[4];  /* the first 16 bytes of each row's block: d | dmin << 16, then 12 scale bytes */
    if (r16)
        for (int k = 0; k < 4; k++) head[k] = _mm512_loadu_si512(base + 64 * k);
    else
        transpose16x4(base, wst, head);
    const __m512i dd = head[0];
    *dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    *dmx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
    /* the 12 scale bytes of each row, unpacked in lanes as coli_k4_scales_mins does */
    const __m512i kmask1 = _mm512_set1_epi32(0x3f3f3f3f), kmask2 = _mm512_set1_epi32(0x0f0f0f0f),
                  kmask3 = _mm512_set1_epi32(0x03030303);
    __m512i u0 = head[1], u1 = head[2];
    const __m512i u2 = head[3];
    const __m512i u3 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), kmask2),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), kmask3), 4));
    const __m512i mlo = _mm512_and_si512(u1, kmask1);  /* mins 0..3 */
    u1 = _mm512_or_si512(_mm512_and_si512(u2, kmask2), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), kmask3), 4));
    u0 = _mm512_and_si512(u0, kmask1);                 /* scales 0..3; u1: scales 4..7; u3: mins 4..7 */
    for (int k = 0; k < 4; k++) {
        sc[k] = _mm512_and_si512(_mm512_srli_epi32(u0, 8 * k), m8);
        sc[4 + k] = _mm512_and_si512(_mm512_srli_epi32(u1, 8 * k), m8);
        mn[k] = _mm512_and_si512(_mm512_srli_epi32(mlo, 8 * k), m8);
        mn[4 + k] = _mm512_and_si512(_mm512_srli_epi32(u3, 8 * k), m8);
    }
}

/* `gemm` of the 16-row Q4_K kernels: 0 the repacked gemv's float steps, 1 its
 * gemm's, Q4_K_TILED ggml's tiled matmul of weights not repacked
 * (q45_K_nr in quant_avx2.c): per super-block r = float(isum) * d - dmin *
 * float(imin) (one fnmadd), acc = fma(r, dy, acc); each lane one row. */
#define Q4_K_TILED 2
INL __m512 q4_K_tiled_res16(__m512i itot, __m512i mtot, __m512 dx, __m512 dmx) {
    return _mm512_fnmadd_ps(dmx, _mm512_cvtepi32_ps(mtot), _mm512_mul_ps(_mm512_cvtepi32_ps(itot), dx));
}

/* Q4_K, 16 weight rows in lanes, 1..8 activation rows: each transposed word
 * is used as it comes (no nibble table) by every activation row. A 32-byte group's words come from 256-bit loads (transpose16x8); the high
 * nibbles are dotted in place (byte & 0xF0, 16 x the nibble: the sum is
 * exactly 16 x the nibbles' sum, shifted back once per group), the mins
 * against the bsum pairs in one madd. */
#define Q4K_FEW_MAX 8 /* activation rows of one pass (lo / hi: 16 zmm accumulators) */
INL void q4_K_16w_few(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss,
                      const int gemm, const int r16, const int nr) {
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const int pf_lines = (int)((16 * wst + 63) / 64);
    __m512 fa[Q4K_FEW_MAX], fm[Q4K_FEW_MAX];
    for (int r = 0; r < nr; r++) fa[r] = fm[r] = _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const char *base = w + (size_t)i * sizeof(block_q4_K);
        /* a repacked tile is one stream, which the hardware prefetcher follows: software prefetches
         * only got in its way (Q4_K MoE decode on Zen 4, 1 thread: 68 tok/s without, 62 into L2, 52 into L1) */
        for (int l = r16 ? 0 : i * pf_lines / nb; !r16 && l < (i + 1) * pf_lines / nb; l++)
            COLI_PREFETCH_W(w + 16 * wst + 64 * (size_t)l);
        __m512 dx, dmx;
        __m512i sc[Q4K_FEW_MAX], mn[Q4K_FEW_MAX];
        q4_K_scales16(r16 ? COLI_R16_AT(w, i, 0) : base, wst, &dx, &dmx, sc, mn, r16);
        __m512i mnp[4]; /* min 2g | min 2g+1 << 16 */
        for (int g = 0; g < 4; g++) mnp[g] = _mm512_or_si512(mn[2 * g], _mm512_slli_epi32(mn[2 * g + 1], 16));
        __m512i itot[Q4K_FEW_MAX], mtot[Q4K_FEW_MAX];
        for (int r = 0; r < nr; r++) itot[r] = mtot[r] = _mm512_setzero_si512();
        for (int g = 0; g < 4; g++) { /* words 8g..8g+7: sub-blocks 2g (low nibbles), 2g + 1 (high) */
            __m512i lo[Q4K_FEW_MAX], hi[Q4K_FEW_MAX];
            for (int r = 0; r < nr; r++) lo[r] = hi[r] = _mm512_setzero_si512();
            {
                __m512i q[Q4K_FEW_MAX];  /* words 8g + j of the 16 rows */
                if (r16) /* words 8g..8g+7 of the 16 rows, one vector each */
                    for (int j = 0; j < 8; j++)
                        q[j] = _mm512_loadu_si512(COLI_R16_AT(w, i, 4 + 8 * g + j));
                else
                    transpose16x8(base + offsetof(block_q4_K, qs) + 32 * g, wst, q);
                for (int j = 0; j < 8; j++) {
                    const __m512i nl = _mm512_and_si512(q[j], m4);
                    const __m512i nh = _mm512_andnot_si512(m4, q[j]); /* 16 x the high nibble: hi is 16 x its sum */
                    for (int r = 0; r < nr; r++) {
                        const int32_t *q8 = (const int32_t *)((const block_q8_K *)(a + (size_t)r * as) + i)->qs;
                        int32_t ql, qh;
                        memcpy(&ql, q8 + 16 * g + j, 4);
                        memcpy(&qh, q8 + 16 * g + 8 + j, 4);
                        lo[r] = _mm512_dpbusd_epi32(lo[r], nl, _mm512_set1_epi32(ql));
                        hi[r] = _mm512_dpbusd_epi32(hi[r], nh, _mm512_set1_epi32(qh));
                    }
                }
            }
            for (int r = 0; r < nr; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
                const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(lo[r], sc[2 * g]),
                                                      _mm512_mullo_epi32(_mm512_srai_epi32(hi[r], 4), sc[2 * g + 1]));
                const __m512i imin = _mm512_madd_epi16(mnp[g], _mm512_set1_epi32(coli_k4_bsum_pair(y->bsums, g)));
                if (gemm == 1) {
                    const __m512 dy = _mm512_set1_ps(y->d);
                    fa[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dx, dy), fa[r]);
                    fm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(dmx, dy), fm[r]);
                } else {
                    itot[r] = _mm512_add_epi32(itot[r], isum);
                    mtot[r] = _mm512_add_epi32(mtot[r], imin);
                }
            }
        }
        if (gemm == Q4_K_TILED)
            for (int r = 0; r < nr; r++) {
                const __m512 dy = _mm512_set1_ps(((const block_q8_K *)(a + (size_t)r * as) + i)->d);
                fa[r] = _mm512_fmadd_ps(q4_K_tiled_res16(itot[r], mtot[r], dx, dmx), dy, fa[r]);
            }
        else if (!gemm)
            for (int r = 0; r < nr; r++) {
                const __m512 dy = _mm512_set1_ps(((const block_q8_K *)(a + (size_t)r * as) + i)->d);
                fa[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(itot[r]), _mm512_mul_ps(dx, dy), fa[r]);
                fm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mtot[r]), _mm512_mul_ps(dmx, dy), fm[r]);
            }
    }
    for (int r = 0; r < nr; r++) _mm512_storeu_ps(s + (size_t)r * ss, _mm512_sub_ps(fa[r], fm[r]));
}

/* Batches in groups of 8 activation rows, then 4: each transposed word serves
 * them all from registers (a table of the tile's nibbles cost 2 loads per
 * dpbusd and was 10-15% slower on Zen 4). */
INL void q4_K_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                  const int gemm, const int r16) {
    const int nb = n / QK_K;
    int r0 = 0;
    for (; r0 + Q4K_FEW_MAX <= nr; r0 += Q4K_FEW_MAX)
        q4_K_16w_few(nb, w, wst, a + (size_t)r0 * as, as, s + (size_t)r0 * ss, ss, gemm, r16, Q4K_FEW_MAX);
    for (; r0 < nr; r0 += COLI_MAX_NR) {
        const int rn = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
        COLI_DISPATCH_NR(rn, q4_K_16w_few, nb, w, wst, a + (size_t)r0 * as, as, s + (size_t)r0 * ss, ss, gemm, r16);
    }
}

TGT void vec_dot_q4_K_q8_K_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                      int nr) {
    q4_K_16w(n, w, wst, a, as, s, ss, nr, 0, 0);
}
TGT void vec_dot_q4_K_q8_K_mm_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                         size_t ss, int nr) {
    q4_K_16w(n, w, wst, a, as, s, ss, nr, 1, 0);
}
TGT void vec_dot_q4_K_q8_K_tiled_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                            size_t ss, int nr) {
    q4_K_16w(n, w, wst, a, as, s, ss, nr, Q4_K_TILED, 0);
}
/* The same on a repacked tile (16 rows read as one stream, no transposes): the repacked gemv's and
 * gemm's arithmetic, which are what llama.cpp gives every Q4_K weight it repacks (n_out % 8 == 0) */
TGT void vec_dot_q4_K_q8_K_r16_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                          size_t ss, int nr) {
    q4_K_16w(n, w, wst, a, as, s, ss, nr, 0, 1);
}
TGT void vec_dot_q4_K_q8_K_r16_mm_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                             size_t ss, int nr) {
    q4_K_16w(n, w, wst, a, as, s, ss, nr, 1, 1);
}
/* Q5_K, ggml's tiled matmul (8+ rows; Q5_K is never repacked), 16 weight rows
 * in lanes: each super-block of the 16 rows is decoded once per pass into a
 * table of 5-bit codes (the fifth bit of element l of sub-block 2g / 2g + 1 is
 * bit 2g / 2g + 1 of qh[l]), then dotted with the pass's activation rows 8 at
 * a time, each code vector loaded once for the 8. The same exact integer sums
 * and float steps (q4_K_tiled_res16) as q45_K_nr in quant_avx2.c. */
typedef struct {
    __m512i c[64]; /* c[16g + j]: words j of sub-block 2g's codes, c[16g + 8 + j]: of 2g + 1's */
    __m512i sc[8], mnp[4];
    __m512 dx, dmx;
} q5_K_tile;

INL void q5_K_decode16(const char *base, size_t wst, q5_K_tile *t) {
    const __m512i m4 = _mm512_set1_epi8(0xF), m1 = _mm512_set1_epi8(1);
    __m512i mn[8], qhw[8];
    q4_K_scales16(base, wst, &t->dx, &t->dmx, t->sc, mn, 0); /* the same d, dmin, scales[12] head as Q4_K */
    for (int g = 0; g < 4; g++) t->mnp[g] = _mm512_or_si512(mn[2 * g], _mm512_slli_epi32(mn[2 * g + 1], 16));
    transpose16x8(base + offsetof(block_q5_K, qh), wst, qhw);
    for (int g = 0; g < 4; g++) {
        __m512i q[8];
        transpose16x8(base + offsetof(block_q5_K, qs) + 32 * g, wst, q);
        for (int j = 0; j < 8; j++) {
            const __m512i bl = _mm512_and_si512(_mm512_srli_epi32(qhw[j], 2 * g), m1);
            const __m512i bh = _mm512_and_si512(_mm512_srli_epi32(qhw[j], 2 * g + 1), m1);
            t->c[16 * g + j] = _mm512_or_si512(_mm512_and_si512(q[j], m4), _mm512_slli_epi32(bl, 4));
            t->c[16 * g + 8 + j] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(q[j], 4), m4), _mm512_slli_epi32(bh, 4));
        }
    }
}

/* super-block i of the tile against G activation rows; acc[r] += r's tiled result */
INL void q5_K_tile_rows(const q5_K_tile *t, const char *a, size_t as, int i, __m512 *acc, const int G) {
    __m512i itot[8];
    for (int r = 0; r < G; r++) itot[r] = _mm512_setzero_si512();
    for (int g = 0; g < 4; g++) {
        __m512i lo[8], hi[8];
        for (int r = 0; r < G; r++) lo[r] = hi[r] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const __m512i cl = t->c[16 * g + j], ch = t->c[16 * g + 8 + j];
            for (int r = 0; r < G; r++) {
                const int32_t *q8 = (const int32_t *)((const block_q8_K *)(a + (size_t)r * as) + i)->qs;
                int32_t ql, qh;
                memcpy(&ql, q8 + 16 * g + j, 4);
                memcpy(&qh, q8 + 16 * g + 8 + j, 4);
                lo[r] = _mm512_dpbusd_epi32(lo[r], cl, _mm512_set1_epi32(ql));
                hi[r] = _mm512_dpbusd_epi32(hi[r], ch, _mm512_set1_epi32(qh));
            }
        }
        for (int r = 0; r < G; r++)
            itot[r] = _mm512_add_epi32(itot[r], _mm512_add_epi32(_mm512_mullo_epi32(lo[r], t->sc[2 * g]),
                                                                 _mm512_mullo_epi32(hi[r], t->sc[2 * g + 1])));
    }
    for (int r = 0; r < G; r++) {
        const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
        __m512i mtot = _mm512_setzero_si512();
        for (int g = 0; g < 4; g++)
            mtot = _mm512_add_epi32(mtot, _mm512_madd_epi16(t->mnp[g], _mm512_set1_epi32(coli_k4_bsum_pair(y->bsums, g))));
        acc[r] = _mm512_fmadd_ps(q4_K_tiled_res16(itot[r], mtot, t->dx, t->dmx), _mm512_set1_ps(y->d), acc[r]);
    }
}

TGT void vec_dot_q5_K_q8_K_tiled_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                            size_t ss, int nr) {
    const int nb = n / QK_K;
    const int pf_lines = (int)((16 * wst + 63) / 64);
    __m512 acc[Q4K_ROWS];
    q5_K_tile t;
    for (int r0 = 0; r0 < nr; r0 += Q4K_ROWS) {
        const int rn = nr - r0 < Q4K_ROWS ? nr - r0 : Q4K_ROWS;
        const char *ar = (const char *)a + (size_t)r0 * as;
        for (int r = 0; r < rn; r++) acc[r] = _mm512_setzero_ps();
        for (int i = 0; i < nb; i++) {
            const char *base = (const char *)w + (size_t)i * sizeof(block_q5_K);
            if (r0 == 0) /* the next tile, spread over the super-blocks */
                for (int l = i * pf_lines / nb; l < (i + 1) * pf_lines / nb; l++)
                    COLI_PREFETCH_W((const char *)w + 16 * wst + 64 * (size_t)l);
            q5_K_decode16(base, wst, &t);
            int r = 0;
            for (; r + 8 <= rn; r += 8) q5_K_tile_rows(&t, ar + (size_t)r * as, as, i, acc + r, 8);
            for (; r + 4 <= rn; r += 4) q5_K_tile_rows(&t, ar + (size_t)r * as, as, i, acc + r, 4);
            for (; r < rn; r++) q5_K_tile_rows(&t, ar + (size_t)r * as, as, i, acc + r, 1);
        }
        for (int r = 0; r < rn; r++) _mm512_storeu_ps(s + (size_t)(r0 + r) * ss, acc[r]);
    }
}


/* Q5_K (not in the table: ggml's AVX2 arithmetic is used) */
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
        coli_k4_scales_mins(scp, utmp);
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

/* Q4_K as llama.cpp computes it (weights repacked at load to block_q4_Kx8,
 * ggml_gemv/gemm_q4_K_8x8_q8_K): per output, in float,
 *   gemv (one row):          per super-block acc = fma(isum, d * dy, acc),
 *                                            accm = fma(imin, dmin * dy, accm)
 *   gemm (groups of 4 rows): the same per 64 elements (two sub-blocks),
 * result acc - accm; isum / imin are exact integer sums. Here each 64-element
 * group is one zmm (its two sub-blocks' nibbles side by side), and the four
 * groups' integer sums are reduced together. */
INL __m128i reduce4_i32x16(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
    const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
    const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
    const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

INL void q4_K_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int gemm, const int nr) {
    const int nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    float acc[COLI_MAX_NR], accm[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = accm[r] = 0.0f;
    for (int i = 0; i < nb; i++) {
        const block_q4_K *x = (const block_q4_K *)w + i;
        const float dx = h2f(x->d), dminx = h2f(x->dmin);
        uint32_t utmp[4];
        coli_k4_scales_mins(x->scales, utmp);
        const __m256i ms16 = _mm256_cvtepu8_epi16(_mm_set_epi32((int)utmp[3], (int)utmp[2], (int)utmp[1], (int)utmp[0]));
        const __m512i sc16 = _mm512_castsi256_si512(ms16);  /* int16 lanes 0..7: scales */
        const __m128i mins16 = _mm256_extracti128_si256(ms16, 1);
        __m512i wq[4], sq[4];
        for (int jj = 0; jj < 2; jj++) {
            const __m512i bits = _mm512_loadu_si512(x->qs + 64 * jj);
            const __m512i lo = _mm512_and_si512(bits, m4);                       /* [sub 4jj, sub 4jj+2] */
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4);  /* [sub 4jj+1, sub 4jj+3] */
            wq[2 * jj] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));     /* elements 128jj + 0..63 */
            wq[2 * jj + 1] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2)); /* elements 128jj + 64..127 */
            sq[2 * jj] = bcast2_16(sc16, 4 * jj + 0, 4 * jj + 1);
            sq[2 * jj + 1] = bcast2_16(sc16, 4 * jj + 2, 4 * jj + 3);
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + r * as) + i;
            __m512i v[4];
            for (int g = 0; g < 4; g++)
                v[g] = _mm512_madd_epi16(_mm512_maddubs_epi16(wq[g], _mm512_loadu_si512(y->qs + 64 * g)), sq[g]);
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *)y->bsums);
            const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
            int32_t isum[4], imin[4];
            _mm_storeu_si128((__m128i *)isum, reduce4_i32x16(v[0], v[1], v[2], v[3]));
            _mm_storeu_si128((__m128i *)imin, _mm_madd_epi16(mins16, q8s));
            const float dd = dx * y->d, dm = dminx * y->d;
            if (gemm) {
                for (int g = 0; g < 4; g++) {
                    acc[r] = fmaf((float)isum[g], dd, acc[r]);
                    accm[r] = fmaf((float)imin[g], dm, accm[r]);
                }
            } else {
                acc[r] = fmaf((float)(isum[0] + isum[1] + isum[2] + isum[3]), dd, acc[r]);
                accm[r] = fmaf((float)(imin[0] + imin[1] + imin[2] + imin[3]), dm, accm[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = acc[r] - accm[r];
}

TGT void vec_dot_q4_K_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q4_K_nr, n, w, (const char *)a, as, s, ss, 0);
}
TGT void vec_dot_q4_K_q8_K_mm_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q4_K_nr, n, w, (const char *)a, as, s, ss, 1);
}
TGT void vec_dot_q5_K_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q45_K_nr, n, w, (const char *)a, as, s, ss, 1);
}

/* Q6_K in batches of 8 rows or more: ggml's tiled K-quant matmul, which adds
 * each super-block's exact integer sum as acc = fma(float(isum) * d, dy, acc)
 * (ggml writes a mul and an add of intrinsics; GCC's default
 * -ffp-contract=fast fuses them). q in 0..63 via maddubs, scales via dpwssd, -32 offset from
 * bsums; the one-row arithmetic is ggml's AVX2 kernel (quant_avx2.c). */
INL void q6_K_tiled_nr(int n, const void *w, const char *a, size_t as, float *s, size_t ss, const int nr) {
    const int nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF), m3 = _mm512_set1_epi8(3);
    float acc[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = 0.0f;
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
            const float dy = ((const block_q8_K *)(a + r * as) + i)->d;
            acc[r] = fmaf((float)_mm512_reduce_add_epi32(sumi[r]) * dx, dy, acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r * ss] = acc[r];
}

TGT void vec_dot_q6_K_q8_K_mm_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q6_K_tiled_nr, n, w, (const char *)a, as, s, ss);
}

/* The tiled arithmetic for 16 weight rows at once, rows in lanes (see q4_K_16w):
 * per 16-element sub-block an exact dpbusd sum of the unsigned 6-bit quants,
 * less 32 * bsum, times the row's int8 scale. */
INL void q6_K_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr) {
    const int nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF), m3 = _mm512_set1_epi8(3);
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)wst));
    __m512i q6[64];  /* [h][j'][k]: quants of elements 128h + 32k + 4j' .. +3 of the 16 rows */
    float acc[Q4K_ROWS][16];
    for (int r0 = 0; r0 < nr; r0 += Q4K_ROWS) {
        const int rn = nr - r0 < Q4K_ROWS ? nr - r0 : Q4K_ROWS;
        memset(acc, 0, (size_t)rn * sizeof acc[0]);
        for (int i = 0; i < nb; i++) {
            const char *base = w + (size_t)i * sizeof(block_q6_K);
            /* bytes 206..209: scales[14], scales[15], d */
            const __m512 dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(
                _mm512_i32gather_epi32(off, base + offsetof(block_q6_K, d) - 2, 1), 16)));
            __m512i sc[16];
            for (int k = 0; k < 4; k++) {
                const __m512i wd = _mm512_i32gather_epi32(off, base + offsetof(block_q6_K, scales) + 4 * k, 1);
                for (int b = 0; b < 4; b++) sc[4 * k + b] = _mm512_srai_epi32(_mm512_slli_epi32(wd, 24 - 8 * b), 24);
            }
            for (int h = 0; h < 2; h++) {
                __m512i ql[16], qa[16];
                for (int r = 0; r < 16; r++) {
                    const block_q6_K *x = (const block_q6_K *)(base + (size_t)r * wst);
                    ql[r] = _mm512_loadu_si512(x->ql + 64 * h);
                    qa[r] = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
                }
                transpose16(ql);  /* words 0..7: ql[64h + 4j'], 8..15: ql[64h + 32 + 4j'] */
                transpose16(qa);  /* words 0..7: qh[32h + 4j'] */
                for (int j = 0; j < 8; j++) {
                    const __m512i A = ql[j], B = ql[8 + j], H = qa[j];
                    __m512i *o = q6 + 32 * h + 4 * j;
                    o[0] = _mm512_or_si512(_mm512_and_si512(A, m4), _mm512_slli_epi16(_mm512_and_si512(H, m3), 4));
                    o[1] = _mm512_or_si512(_mm512_and_si512(B, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 2), m3), 4));
                    o[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(A, 4), m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 4), m3), 4));
                    o[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(B, 4), m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H, 6), m3), 4));
                }
            }
            for (int r = 0; r < rn; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)(r0 + r) * as) + i;
                __m512i isum = _mm512_setzero_si512();
                for (int h = 0; h < 2; h++)
                    for (int k = 0; k < 4; k++) {
                        /* sub-blocks 8h + 2k (j' < 4) and 8h + 2k + 1 (j' >= 4) */
                        __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
                        for (int j = 0; j < 8; j++) {
                            int32_t q;
                            memcpy(&q, y->qs + 128 * h + 32 * k + 4 * j, 4);
                            if (j < 4) d0 = _mm512_dpbusd_epi32(d0, q6[32 * h + 4 * j + k], _mm512_set1_epi32(q));
                            else d1 = _mm512_dpbusd_epi32(d1, q6[32 * h + 4 * j + k], _mm512_set1_epi32(q));
                        }
                        const int sb = 8 * h + 2 * k;
                        d0 = _mm512_sub_epi32(d0, _mm512_set1_epi32(32 * y->bsums[sb]));
                        d1 = _mm512_sub_epi32(d1, _mm512_set1_epi32(32 * y->bsums[sb + 1]));
                        isum = _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(d0, sc[sb]), _mm512_mullo_epi32(d1, sc[sb + 1])));
                    }
                const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), dx);
                _mm512_storeu_ps(acc[r], _mm512_fmadd_ps(t, _mm512_set1_ps(y->d), _mm512_loadu_ps(acc[r])));
            }
        }
        for (int r = 0; r < rn; r++)
            for (int j = 0; j < 16; j++) s[(size_t)(r0 + r) * ss + j] = acc[r][j];
    }
}

TGT void vec_dot_q6_K_q8_K_mm_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                         size_t ss, int nr) {
    q6_K_16w(n, w, wst, a, as, s, ss, nr);
}

/* ---- Q2_K / Q3_K: one weight row, two 32-byte chunks per zmm ---------------------------- */

/* ggml's AVX2 Q2_K / Q3_K vec_dot (see quant_avx2.c) with each zmm holding two
 * of its 32-byte product vectors: chunks (h, 2p) and (h, 2p + 1) of a
 * super-block side by side, against the 64 activation bytes that follow each
 * other; the two halves' int32 lanes added at the end of a super-block give
 * ggml's 8 lanes, the same integers (exact sums), then ggml's float steps.
 * Q2_K's repacked gemv takes the lanes' total instead (reduce). */
#ifndef LOWK_PF_DIST
#define LOWK_PF_DIST 2048 /* rows lie end to end: stream ahead of the hardware prefetcher's 4 KiB pages */
#endif
#define LOWK_PF(p) do { if (LOWK_PF_DIST) COLI_PREFETCH_W((p) + LOWK_PF_DIST); } while (0)

INL void lowk_z_consts(__m512i shift[2], __m512i sidx[4]) {
    for (int p = 0; p < 2; p++) /* 16-bit shift counts: 4p in the low 256 bits, 4p + 2 in the high */
        shift[p] = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * p)), _mm256_set1_epi16((short)(4 * p + 2)), 1);
    for (int c = 0; c < 4; c++) { /* 16-bit lane i of zmm c: scale of sub-block 4c + i / 8 */
        const __m256i lo = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_add_epi16(lo, _mm256_set1_epi16(2)), 1);
        sidx[c] = _mm512_add_epi16(v, _mm512_set1_epi16((short)(4 * c)));
    }
}

/* the 2-bit fields of a super-block's 64 bytes qs: zmm 2h + p = chunks (h, 2p) | (h, 2p + 1) */
INL void lowk_z_codes(const uint8_t *qs, const __m512i shift[2], __m512i q[4]) {
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * h)));
        for (int p = 0; p < 2; p++) q[2 * h + p] = _mm512_and_si512(_mm512_srlv_epi16(b, shift[p]), m3);
    }
}

INL __m256i fold_i32x16(__m512i z) { return _mm256_add_epi32(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1)); }

/* Q2_K: each 2-bit quant times its sub-block's 4-bit scale is at most 45, a
 * byte: the scaled quants are looked up per 128-bit lane (pshufb of the
 * lane's [0, s, 2s, 3s]) and dotted with the activation by dpbusd, whose
 * int32 lanes are then exactly ggml's scale * (4-byte sums) (lane i of zmm c
 * holds sub-block 4c + i). W (1..4) weight rows, wst bytes apart, against nr
 * activation rows: s[r * ss + j] for weight row j (several rows: independent
 * chains, the call and set-up shared). */
INL void q2_K_z(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int gemv,
                const int W, const int nr) {
    const int nb = n / QK_K;
    const __m128i m4 = _mm_set1_epi8(0xF);
    __m512i shift[2], sidx[4], tidx[4];
    lowk_z_consts(shift, sidx);
    for (int c = 0; c < 4; c++) /* dword 0 of 128-bit lane i: the table of sub-block 4c + i */
        tidx[c] = _mm512_add_epi32(_mm512_set1_epi32(4 * c), _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    __m256 acc[4][COLI_MAX_NR];
    __m128 am[4][COLI_MAX_NR]; /* gemv: lane 0 acc, lane 1 accm (lanes 2, 3 unused) */
    for (int j = 0; j < W; j++)
        for (int r = 0; r < nr; r++) { acc[j][r] = _mm256_setzero_ps(); am[j][r] = _mm_setzero_ps(); }
    for (int i = 0; i < nb; i++) {
        __m512i q[4][4];
        __m256i mins[4];
        float dx[4], dminx[4];
        __m128 dd2[4];
        for (int j = 0; j < W; j++) {
            const block_q2_K *x = (const block_q2_K *)(w + (size_t)j * wst) + i;
            LOWK_PF((const char *)x);
            dx[j] = h2f(x->d);
            dminx[j] = h2f(x->dmin);
            int32_t ddm;
            memcpy(&ddm, &x->d, 4); /* d | dmin << 16 */
            dd2[j] = _mm_cvtph_ps(_mm_cvtsi32_si128(ddm));
            const __m128i ms = _mm_loadu_si128((const __m128i *)x->scales);
            mins[j] = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(ms, 4), m4));
            const __m512i tabs = _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(ms, m4)), _mm512_set1_epi32(0x03020100));
            __m512i codes[4];
            lowk_z_codes(x->qs, shift, codes);
            for (int c = 0; c < 4; c++) q[j][c] = _mm512_shuffle_epi8(_mm512_permutexvar_epi32(tidx[c], tabs), codes[c]);
        }
        const __m128 dx4 = _mm_setr_ps(dx[0], dx[W > 1 ? 1 : 0], dx[W > 2 ? 2 : 0], dx[W > 3 ? 3 : 0]);
        const __m128 dm4 = _mm_setr_ps(dminx[0], dminx[W > 1 ? 1 : 0], dminx[W > 2 ? 2 : 0], dminx[W > 3 ? 3 : 0]);
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
            const __m256i bsums = _mm256_loadu_si256((const __m256i *)y->bsums);
            __m512i q8[4];
            for (int c = 0; c < 4; c++) q8[c] = _mm512_loadu_si512(y->qs + 64 * c);
            if (gemv && W == 4) { /* the four rows' sums reduced together: [s1 of rows 0..3], [s2 of rows 0..3] */
                __m256i zf[4], pr[4];
                for (int j = 0; j < 4; j++) {
                    __m512i z = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[j][0], q8[0]);
                    for (int c = 1; c < 4; c++) z = _mm512_dpbusd_epi32(z, q[j][c], q8[c]);
                    zf[j] = fold_i32x16(z);
                    pr[j] = _mm256_madd_epi16(mins[j], bsums);
                }
                const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(zf[0], zf[1]), _mm256_hadd_epi32(zf[2], zf[3]));
                const __m256i h2 = _mm256_hadd_epi32(_mm256_hadd_epi32(pr[0], pr[1]), _mm256_hadd_epi32(pr[2], pr[3]));
                const __m128i s1 = _mm_add_epi32(_mm256_castsi256_si128(h1), _mm256_extracti128_si256(h1, 1));
                const __m128i s2 = _mm_add_epi32(_mm256_castsi256_si128(h2), _mm256_extracti128_si256(h2, 1));
                const __m128 dy = _mm_set1_ps(y->d);
                am[0][r] = _mm_fmadd_ps(_mm_cvtepi32_ps(s1), _mm_mul_ps(dx4, dy), am[0][r]);
                am[1][r] = _mm_fmadd_ps(_mm_cvtepi32_ps(s2), _mm_mul_ps(dm4, dy), am[1][r]);
                continue;
            }
            for (int j = 0; j < W; j++) {
                const __m256i prod = _mm256_madd_epi16(mins[j], bsums);
                if (!gemv) acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(-y->d * dminx[j]), _mm256_cvtepi32_ps(prod), acc[j][r]);
                __m512i z = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[j][0], q8[0]);
                for (int c = 1; c < 4; c++) z = _mm512_dpbusd_epi32(z, q[j][c], q8[c]);
                if (gemv) { /* [s1, s2] reduced together, then [acc, accm] = fma([s1, s2], [d, dmin] * dy, ...) */
                    __m256i t = _mm256_hadd_epi32(fold_i32x16(z), prod);
                    t = _mm256_hadd_epi32(t, t);
                    const __m128i st = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
                    am[j][r] = _mm_fmadd_ps(_mm_cvtepi32_ps(st), _mm_mul_ps(dd2[j], _mm_set1_ps(y->d)), am[j][r]);
                } else {
                    acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * dx[j]), _mm256_cvtepi32_ps(fold_i32x16(z)), acc[j][r]);
                }
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        if (gemv && W == 4) { /* am[0]: acc of rows 0..3, am[1]: their accm */
            _mm_storeu_ps(s + (size_t)r * ss, _mm_sub_ps(am[0][r], am[1][r]));
            continue;
        }
        for (int j = 0; j < W; j++)
            s[(size_t)r * ss + j] = gemv ? _mm_cvtss_f32(am[j][r]) - _mm_cvtss_f32(_mm_movehdup_ps(am[j][r])) : hsum8(acc[j][r]);
    }
}

/* 16 weight rows, four at a time, against any number of activation rows */
INL void q2_K_z16(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr, const int gemv) {
    for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
        const int rn = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
        for (int g = 0; g < 16; g += 4)
            COLI_DISPATCH_NR(rn, q2_K_z, n, w + (size_t)g * wst, wst, a + (size_t)r0 * as, as, s + (size_t)r0 * ss + g, ss,
                             gemv, 4);
    }
}

/* The 16 Q3_K scales (6 bits, less 32), as ggml's AVX2 kernel unpacks them */
INL __m128i q3_K_scales8_z(const uint8_t *packed) {
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    uint32_t aux[3];
    memcpy(aux, packed, 12);
    const __m128i s = _mm_set_epi32((int)(((aux[1] >> 4) & kmask2) | (((aux[2] >> 6) & kmask1) << 4)),
                                    (int)(((aux[0] >> 4) & kmask2) | (((aux[2] >> 4) & kmask1) << 4)),
                                    (int)((aux[1] & kmask2) | (((aux[2] >> 2) & kmask1) << 4)),
                                    (int)((aux[0] & kmask2) | (((aux[2] >> 0) & kmask1) << 4)));
    return _mm_sub_epi8(s, _mm_set1_epi8(32));
}

/* (W = 1 only in the table: two rows' 12 vectors each spill) */
INL void q3_K_z(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int W,
                const int nr) {
    const int nb = n / QK_K;
    __m512i shift[2], sidx[4], hsel[4];
    lowk_z_consts(shift, sidx);
    for (int c = 0; c < 4; c++) /* the hmask bit of chunk (h, l) is 4h + l: zmm 2h + p holds l = 2p, 2p + 1 */
        hsel[c] = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * c))), _mm256_set1_epi8((char)(1 << (2 * c + 1))), 1);
    __m256 acc[2][COLI_MAX_NR];
    for (int j = 0; j < W; j++)
        for (int r = 0; r < nr; r++) acc[j][r] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        __m512i ql[2][4], qh[2][4], sc[2][4];
        float dx[2];
        for (int j = 0; j < W; j++) {
            const block_q3_K *x = (const block_q3_K *)(w + (size_t)j * wst) + i;
            LOWK_PF((const char *)x);
            dx[j] = h2f(x->d);
            const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(q3_K_scales8_z(x->scales)));
            const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x->hmask));
            lowk_z_codes(x->qs, shift, ql[j]);
            for (int c = 0; c < 4; c++) {
                sc[j][c] = _mm512_permutexvar_epi16(sidx[c], sc16);
                /* 4 where the high bit is clear: the value is ql - 4 */
                qh[j][c] = _mm512_maskz_mov_epi8(_mm512_testn_epi8_mask(hb, hsel[c]), _mm512_set1_epi8(4));
            }
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
            __m512i q8[4];
            for (int c = 0; c < 4; c++) q8[c] = _mm512_loadu_si512(y->qs + 64 * c);
            for (int j = 0; j < W; j++) {
                __m512i z = _mm512_setzero_si512();
                for (int c = 0; c < 4; c++) {
                    const __m512i p16 = _mm512_sub_epi16(_mm512_maddubs_epi16(ql[j][c], q8[c]), _mm512_maddubs_epi16(qh[j][c], q8[c]));
                    z = _mm512_add_epi32(z, _mm512_madd_epi16(sc[j][c], p16));
                }
                acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(y->d * dx[j]), _mm256_cvtepi32_ps(fold_i32x16(z)), acc[j][r]);
            }
        }
    }
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < W; j++) s[(size_t)r * ss + j] = hsum8(acc[j][r]);
}

TGT void vec_dot_q2_K_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q2_K_z, n, (const char *)w, 0, (const char *)a, as, s, ss, 0, 1);
}
TGT void vec_dot_q2_K_q8_K_gemv_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q2_K_z, n, (const char *)w, 0, (const char *)a, as, s, ss, 1, 1);
}
TGT void vec_dot_q3_K_q8_K_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q3_K_z, n, (const char *)w, 0, (const char *)a, as, s, ss, 1);
}
TGT void vec_dot_q2_K_q8_K_2w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                     int nr) {
    COLI_DISPATCH_NR(nr, q2_K_z, n, (const char *)w, wst, (const char *)a, as, s, ss, 0, 2);
}
TGT void vec_dot_q2_K_q8_K_gemv_2w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                          size_t ss, int nr) {
    COLI_DISPATCH_NR(nr, q2_K_z, n, (const char *)w, wst, (const char *)a, as, s, ss, 1, 2);
}
TGT void vec_dot_q2_K_q8_K_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s, size_t ss,
                                      int nr) {
    q2_K_z16(n, (const char *)w, wst, (const char *)a, as, s, ss, nr, 0);
}

/* ---- Q2_K / Q3_K: 16 weight rows, one per lane ----------------------------------------- */

/* The arithmetic of quant_avx2.c's Q2_K / Q3_K kernels whose float steps take
 * a super-block's (or half super-block's) whole integer sums in batches:
 * ggml's tiled matmul (Q2_K, Q3_K), Q2_K's repacked gemm (see quant_avx2.c). As
 * q6_K_16w: the 16 rows' 2-bit quants transposed (lane r: row r), the 3-bit
 * codes of Q3_K as q + 4 * hbit (the value plus 4), each 16-element sub-block
 * an exact dpbusd sum against the activation's bytes (Q3_K: less 4 * its
 * bsum), times the row's scale; Q2_K's mins against the bsums by pairs
 * (madd). Then the float steps of the mode, lane by lane. */
enum { LOWK16_TILED, LOWK16_GEMM };
#define LOWK_ROWS 64 /* activation rows per pass over a 16-row weight tile */

INL void lowk_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                  const int three, const int mode) {
    const int nb = n / QK_K;
    const size_t bsize = three ? sizeof(block_q3_K) : sizeof(block_q2_K);
    const size_t qs_off = three ? offsetof(block_q3_K, qs) : offsetof(block_q2_K, qs);
    const __m512i m3 = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1), mf = _mm512_set1_epi32(0xF);
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)wst));
    const int pf_lines = (int)((16 * wst + 63) / 64);
    __m512i cq[64]; /* [h][j][l]: codes of elements 128h + 32l + 4j .. +3 of the 16 rows */
    float acc[LOWK_ROWS][2][16];
    for (int r0 = 0; r0 < nr; r0 += LOWK_ROWS) {
        const int rn = nr - r0 < LOWK_ROWS ? nr - r0 : LOWK_ROWS;
        memset(acc, 0, (size_t)rn * sizeof acc[0]);
        for (int i = 0; i < nb; i++) {
            const char *base = w + (size_t)i * bsize;
            if (r0 == 0) /* the next tile, spread over the super-blocks */
                for (int l = i * pf_lines / nb; l < (i + 1) * pf_lines / nb; l++)
                    COLI_PREFETCH_W(w + 16 * wst + 64 * (size_t)l);
            __m512 dx, dmx = _mm512_setzero_ps();
            __m512i sc[16], mnp[8];
            if (three) {
                /* bytes 106..109: scales[10], scales[11], d */
                dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(
                    _mm512_i32gather_epi32(off, base + offsetof(block_q3_K, d) - 2, 1), 16)));
                const __m512i kmask1 = _mm512_set1_epi32(0x03030303), kmask2 = _mm512_set1_epi32(0x0f0f0f0f);
                const __m512i a0 = _mm512_i32gather_epi32(off, base + offsetof(block_q3_K, scales), 1);
                const __m512i a1 = _mm512_i32gather_epi32(off, base + offsetof(block_q3_K, scales) + 4, 1);
                const __m512i a2 = _mm512_i32gather_epi32(off, base + offsetof(block_q3_K, scales) + 8, 1);
                __m512i u[4]; /* q3_K_scales8's words, in lanes */
                u[0] = _mm512_or_si512(_mm512_and_si512(a0, kmask2), _mm512_slli_epi32(_mm512_and_si512(a2, kmask1), 4));
                u[1] = _mm512_or_si512(_mm512_and_si512(a1, kmask2), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 2), kmask1), 4));
                u[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a0, 4), kmask2), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 4), kmask1), 4));
                u[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a1, 4), kmask2), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 6), kmask1), 4));
                for (int k = 0; k < 4; k++)
                    for (int b = 0; b < 4; b++)
                        sc[4 * k + b] = _mm512_sub_epi32(_mm512_and_si512(_mm512_srli_epi32(u[k], 8 * b), _mm512_set1_epi32(0x3F)),
                                                         _mm512_set1_epi32(32));
            } else {
                const __m512i dd = _mm512_i32gather_epi32(off, base + offsetof(block_q2_K, d), 1); /* d | dmin << 16 */
                dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
                dmx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
                __m512i mn[16];
                for (int k = 0; k < 4; k++) {
                    const __m512i wd = _mm512_i32gather_epi32(off, base + offsetof(block_q2_K, scales) + 4 * k, 1);
                    for (int b = 0; b < 4; b++) {
                        sc[4 * k + b] = _mm512_and_si512(_mm512_srli_epi32(wd, 8 * b), mf);
                        mn[4 * k + b] = _mm512_and_si512(_mm512_srli_epi32(wd, 8 * b + 4), mf);
                    }
                }
                for (int t = 0; t < 8; t++) mnp[t] = _mm512_or_si512(mn[2 * t], _mm512_slli_epi32(mn[2 * t + 1], 16));
            }
            __m512i q[16], hq[16];
            for (int r = 0; r < 16; r++) q[r] = _mm512_loadu_si512(base + (size_t)r * wst + qs_off);
            transpose16(q); /* word 8h + j: qs[32h + 4j .. +3] */
            if (three) {
                for (int r = 0; r < 16; r++)
                    hq[r] = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(base + (size_t)r * wst)));
                transpose16(hq); /* words 0..7: hmask[4j .. +3] */
            }
            for (int h = 0; h < 2; h++)
                for (int j = 0; j < 8; j++)
                    for (int l = 0; l < 4; l++) {
                        __m512i c = _mm512_and_si512(_mm512_srli_epi16(q[8 * h + j], 2 * l), m3);
                        if (three)
                            c = _mm512_or_si512(c, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hq[j], 4 * h + l), one), 2));
                        cq[32 * h + 4 * j + l] = c;
                    }
            for (int r = 0; r < rn; r++) {
                const block_q8_K *y = (const block_q8_K *)(a + (size_t)(r0 + r) * as) + i;
                __m512i isum[2], imin[2];
                for (int h = 0; h < 2; h++) {
                    isum[h] = _mm512_setzero_si512();
                    for (int l = 0; l < 4; l++) {
                        /* sub-blocks 8h + 2l (j < 4) and 8h + 2l + 1 (j >= 4) */
                        __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
                        for (int j = 0; j < 8; j++) {
                            int32_t q8;
                            memcpy(&q8, y->qs + 128 * h + 32 * l + 4 * j, 4);
                            if (j < 4) d0 = _mm512_dpbusd_epi32(d0, cq[32 * h + 4 * j + l], _mm512_set1_epi32(q8));
                            else d1 = _mm512_dpbusd_epi32(d1, cq[32 * h + 4 * j + l], _mm512_set1_epi32(q8));
                        }
                        const int sb = 8 * h + 2 * l;
                        if (three) {
                            d0 = _mm512_sub_epi32(d0, _mm512_set1_epi32(4 * y->bsums[sb]));
                            d1 = _mm512_sub_epi32(d1, _mm512_set1_epi32(4 * y->bsums[sb + 1]));
                        }
                        isum[h] = _mm512_add_epi32(isum[h], _mm512_add_epi32(_mm512_mullo_epi32(d0, sc[sb]), _mm512_mullo_epi32(d1, sc[sb + 1])));
                    }
                    imin[h] = _mm512_setzero_si512();
                    if (!three)
                        for (int t = 4 * h; t < 4 * h + 4; t++) {
                            const uint32_t bp = (uint32_t)(uint16_t)y->bsums[2 * t] | (uint32_t)(uint16_t)y->bsums[2 * t + 1] << 16;
                            imin[h] = _mm512_add_epi32(imin[h], _mm512_madd_epi16(mnp[t], _mm512_set1_epi32((int)bp)));
                        }
                }
                const __m512 dy = _mm512_set1_ps(y->d);
                __m512 fa = _mm512_loadu_ps(acc[r][0]);
                if (mode == LOWK16_TILED) {
                    __m512 res = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(isum[0], isum[1])), dx);
                    if (!three) res = _mm512_fnmadd_ps(dmx, _mm512_cvtepi32_ps(_mm512_add_epi32(imin[0], imin[1])), res);
                    fa = _mm512_fmadd_ps(res, dy, fa);
                } else {
                    __m512 fm = _mm512_loadu_ps(acc[r][1]);
                    const __m512 dd = _mm512_mul_ps(dx, dy), dm = _mm512_mul_ps(dmx, dy);
                    for (int h = 0; h < 2; h++) {
                        fa = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[h]), dd, fa);
                        fm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin[h]), dm, fm);
                    }
                    _mm512_storeu_ps(acc[r][1], fm);
                }
                _mm512_storeu_ps(acc[r][0], fa);
            }
        }
        for (int r = 0; r < rn; r++) {
            float out[16];
            __m512 v = _mm512_loadu_ps(acc[r][0]);
            if (mode != LOWK16_TILED) v = _mm512_sub_ps(v, _mm512_loadu_ps(acc[r][1]));
            _mm512_storeu_ps(out, v);
            memcpy(s + (size_t)(r0 + r) * ss, out, sizeof out);
        }
    }
}

/* Q2_K's repacked gemv (ggml_gemv_q2_K_8x8_q8_K: per super-block
 * acc = fma(isum, d * dy, acc), accm = fma(imin, dmin * dy, accm), result
 * acc - accm) for 16 weight rows, one per lane, against 1..4 activation rows:
 * the rows' scale bytes and quants transposed from 128- and 256-bit loads
 * (transpose16x4, transpose16x8), each 2-bit field dotted in place (byte &
 * (3 << 2l): 4^l times the code, so each sub-block's dpbusd sum is exactly
 * 4^l times its own, shifted back once per sub-block), times the row's scale;
 * the mins against the bsum pairs by madd. The same integer sums as q2_K_z. */
INL void q2_K_16w_few(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss,
                      const int nr) {
    const __m512i mf = _mm512_set1_epi32(0xF), mf2 = _mm512_set1_epi32(0x000F000F);
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)wst));
    const int pf_lines = (int)((16 * wst + 63) / 64);
    __m512 fa[COLI_MAX_NR], fm[COLI_MAX_NR];
    for (int r = 0; r < nr; r++) fa[r] = fm[r] = _mm512_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const char *base = w + (size_t)i * sizeof(block_q2_K);
        for (int l = i * pf_lines / nb; l < (i + 1) * pf_lines / nb; l++)
            COLI_PREFETCH_W(w + 16 * wst + 64 * (size_t)l);
        const __m512i dd = _mm512_i32gather_epi32(off, base + offsetof(block_q2_K, d), 1); /* d | dmin << 16 */
        const __m512 dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
        const __m512 dmx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        __m512i u[4]; /* scale bytes 4k..4k+3 of the 16 rows */
        transpose16x4(base + offsetof(block_q2_K, scales), wst, u);
        __m512i sc[16], mnp[8]; /* sc[t]: scale of sub-block t; mnp[t]: min 2t | min 2t+1 << 16 */
        for (int k = 0; k < 4; k++) {
            for (int b = 0; b < 4; b++) sc[4 * k + b] = _mm512_and_si512(_mm512_srli_epi32(u[k], 8 * b), mf);
            for (int b = 0; b < 4; b += 2) {
                const __m512i x = _mm512_srli_epi32(u[k], 8 * b + 4); /* min 4k+b in bits 0..3, min 4k+b+1 in 8..11 */
                mnp[2 * k + b / 2] = _mm512_and_si512(_mm512_mask_blend_epi16(0xAAAAAAAA, x, _mm512_slli_epi32(x, 8)), mf2);
            }
        }
        __m512i isum[COLI_MAX_NR];
        for (int r = 0; r < nr; r++) isum[r] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i q[8]; /* word j: qs[32h + 4j .. +3] of the 16 rows */
            transpose16x8(base + offsetof(block_q2_K, qs) + 32 * h, wst, q);
            for (int l = 0; l < 4; l++) {
                const __m512i ml = _mm512_set1_epi8((char)(3 << (2 * l)));
                /* sub-blocks 8h + 2l (j < 4) and 8h + 2l + 1 (j >= 4): elements 128h + 32l + 4j .. +3 */
                __m512i d0[COLI_MAX_NR], d1[COLI_MAX_NR];
                for (int r = 0; r < nr; r++) d0[r] = d1[r] = _mm512_setzero_si512();
                for (int j = 0; j < 8; j++) {
                    const __m512i c = _mm512_and_si512(q[j], ml);
                    for (int r = 0; r < nr; r++) {
                        const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
                        int32_t q8;
                        memcpy(&q8, y->qs + 128 * h + 32 * l + 4 * j, 4);
                        if (j < 4) d0[r] = _mm512_dpbusd_epi32(d0[r], c, _mm512_set1_epi32(q8));
                        else d1[r] = _mm512_dpbusd_epi32(d1[r], c, _mm512_set1_epi32(q8));
                    }
                }
                const int sb = 8 * h + 2 * l;
                for (int r = 0; r < nr; r++)
                    isum[r] = _mm512_add_epi32(isum[r], _mm512_add_epi32(
                        _mm512_mullo_epi32(_mm512_srai_epi32(d0[r], 2 * l), sc[sb]),
                        _mm512_mullo_epi32(_mm512_srai_epi32(d1[r], 2 * l), sc[sb + 1])));
            }
        }
        for (int r = 0; r < nr; r++) {
            const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
            __m512i imin = _mm512_setzero_si512();
            for (int t = 0; t < 8; t++) {
                const uint32_t bp = (uint32_t)(uint16_t)y->bsums[2 * t] | (uint32_t)(uint16_t)y->bsums[2 * t + 1] << 16;
                imin = _mm512_add_epi32(imin, _mm512_madd_epi16(mnp[t], _mm512_set1_epi32((int)bp)));
            }
            const __m512 dy = _mm512_set1_ps(y->d);
            fa[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(dx, dy), fa[r]);
            fm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(dmx, dy), fm[r]);
        }
    }
    for (int r = 0; r < nr; r++) _mm512_storeu_ps(s + (size_t)r * ss, _mm512_sub_ps(fa[r], fm[r]));
}

TGT void vec_dot_q2_K_q8_K_gemv_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                           size_t ss, int nr) {
    if (nr <= COLI_MAX_NR) {
        COLI_DISPATCH_NR(nr, q2_K_16w_few, n / QK_K, (const char *)w, wst, (const char *)a, as, s, ss);
        return;
    }
    q2_K_z16(n, (const char *)w, wst, (const char *)a, as, s, ss, nr, 1);
}

TGT void vec_dot_q2_K_q8_K_tiled_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                            size_t ss, int nr) {
    lowk_16w(n, w, wst, a, as, s, ss, nr, 0, LOWK16_TILED);
}
TGT void vec_dot_q2_K_q8_K_gemm_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                           size_t ss, int nr) {
    lowk_16w(n, w, wst, a, as, s, ss, nr, 0, LOWK16_GEMM);
}
TGT void vec_dot_q3_K_q8_K_tiled_16w_avx512(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                            size_t ss, int nr) {
    lowk_16w(n, w, wst, a, as, s, ss, nr, 1, LOWK16_TILED);
}


/* coli_argmax_avx2's two passes, 16 lanes (max_ps keeps its second operand on a NaN). */
TGT int32_t coli_argmax_avx512(const float *x, int n) {
    if (n < 64 || x[0] != x[0]) return coli_argmax_generic(x, n);
    const __m512 x0 = _mm512_set1_ps(x[0]);
    __m512 m0 = x0, m1 = x0, m2 = x0, m3 = x0;
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
        m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
        m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
    }
    for (; i + 16 <= n; i += 16) m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
    if (i < n) {
        const __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
        m1 = _mm512_mask_max_ps(m1, tail, _mm512_maskz_loadu_ps(tail, x + i), m1);
    }
    const float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    const __m512 vm = _mm512_set1_ps(m);
    int k = 0;
    for (; k + 16 <= n; k += 16) {
        const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + k), vm, _CMP_EQ_OQ);
        if (eq) return k + __builtin_ctz((unsigned)eq);
    }
    for (; k < n; k++)
        if (x[k] == m) return k;
    return 0; /* unreachable: m is one of x */
}

#else
typedef int coli_quant_avx512_unused;
#endif
