/* quant_avxvnni.c — kernels for AVX2 machines with AVX-VNNI (Intel client
 * cores since Alder Lake): the 256-bit dpbusd adds u8 x s8 products into
 * int32 lanes in one step and never saturates, so the Q8_0/Q5_0/Q4_0 dot
 * products take the weights as unsigned q + c against the signed activation,
 * starting each lane at -c * (its activation bytes' sum): the exact integers
 * of the sign trick (ggml's AVX-VNNI build gets them with dpbusd too), with
 * the float steps of ggml_vec_dot_q{8,5,4}_0_q8_0 per (weight row,
 * activation row). kernels.c puts them in the "avxvnni" table, otherwise the
 * AVX2 one. */
#include "quant.h"

#ifdef COLI_HAVE_AVXVNNI
#include <immintrin.h>

#include "prefetch.h"
#include <string.h>

#define TGT __attribute__((target("avx2,fma,f16c,avxvnni")))
#define INL static inline __attribute__((always_inline, target("avx2,fma,f16c,avxvnni")))

#include "quant_avx2_inl.h"

INL int wsize(const int kind) {
    return kind == 0 ? (int)sizeof(block_q8_0) : kind == 1 ? (int)sizeof(block_q4_0) : (int)sizeof(block_q5_0);
}

/* block ib's weights as unsigned q + c (Q8_0: q ^ 0x80; Q4_0: the nibble; Q5_0: 5 bits) */
INL __m256i w_unsigned(const char *wr, int ib, const int kind) {
    if (kind == 0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)((const block_q8_0 *)wr + ib)->qs),
                                _mm256_set1_epi8((char)0x80));
    const __m256i b = nibbles_32(kind == 1 ? ((const block_q4_0 *)wr + ib)->qs : ((const block_q5_0 *)wr + ib)->qs);
    if (kind == 1) return b;
    return _mm256_or_si256(b, _mm256_and_si256(bits_32(((const block_q5_0 *)wr + ib)->qh), _mm256_set1_epi8(0x10)));
}

/* W weight rows x nr activation rows, block after block: per pair the chain
 * acc = fma(dw * dy, float(lanes), acc), hsum at the end. pf_lines > 0:
 * prefetch that many lines at pf over the blocks (decode streams weights). */
INL void q0_tile(int nb, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, const int kind,
                 const char *pf, int pf_lines, const int W, const int nr) {
    const int bs = wsize(kind);
    const __m256i cu = _mm256_set1_epi8(kind == 0 ? (char)0x80 : kind == 1 ? 8 : 16);
    __m256 acc[4][4];
    for (int j = 0; j < W; j++)
        for (int r = 0; r < nr; r++) acc[j][r] = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ib++) {
        for (int l = ib * pf_lines / nb; l < (ib + 1) * pf_lines / nb; l++) COLI_PREFETCH_W(pf + 64 * (size_t)l);
        __m256i y[4], ncs[4];
        float dy[4];
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *yb = (const block_q8_0 *)(a + (size_t)r * as) + ib;
            y[r] = _mm256_loadu_si256((const __m256i *)yb->qs);
            ncs[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), cu, y[r]));
            dy[r] = h2f(yb->d);
        }
        for (int j = 0; j < W; j++) {
            const char *wr = w + (size_t)j * wst;
            coli_half hw;
            memcpy(&hw, wr + (size_t)ib * bs, 2);
            const float dw = h2f(hw);
            const __m256i u = w_unsigned(wr, ib, kind);
            for (int r = 0; r < nr; r++)
                acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dy[r]),
                                            _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(ncs[r], u, y[r])), acc[j][r]);
        }
    }
    for (int j = 0; j < W; j++)
        for (int r = 0; r < nr; r++) s[(size_t)r * ss + j] = hsum_f32_8(acc[j][r]);
}

/* Batches: 2 weight rows x up to 4 activation rows (the 16 ymm registers),
 * each block's scale product dw * dy formed 8 blocks at a time (the same
 * float products) and read back as a broadcast. dxf: the 2 rows' scales,
 * dyf: the activation rows' (stride Q0_DY), both padded to whole 8s. */
#define Q0_BATCH_BLOCKS 512
#define Q0_DY (Q0_BATCH_BLOCKS + 8)

INL void q0_batch(int nb, const char *w, size_t wst, const float *dxf, const char *a, size_t as, const float *dyf,
                  float *s, size_t ss, const int kind, const char *pf, int pf_lines, const int nr) {
    const __m256i cu = _mm256_set1_epi8(kind == 0 ? (char)0x80 : kind == 1 ? 8 : 16);
    __m256 acc[2][4];
    for (int j = 0; j < 2; j++)
        for (int r = 0; r < nr; r++) acc[j][r] = _mm256_setzero_ps();
    for (int i0 = 0; i0 < nb; i0 += 8) {
        const int cnt = nb - i0 < 8 ? nb - i0 : 8;
        for (int l = i0 * pf_lines / nb; l < (i0 + cnt) * pf_lines / nb; l++) COLI_PREFETCH_W(pf + 64 * (size_t)l);
        float d[2][4][8];
        for (int j = 0; j < 2; j++) {
            const __m256 dx = _mm256_loadu_ps(dxf + (size_t)j * Q0_DY + i0);
            for (int r = 0; r < nr; r++) _mm256_storeu_ps(d[j][r], _mm256_mul_ps(dx, _mm256_loadu_ps(dyf + (size_t)r * Q0_DY + i0)));
        }
        for (int k = 0; k < cnt; k++) {
            const int ib = i0 + k;
            __m256i y[4], ncs[4];
            for (int r = 0; r < nr; r++) {
                y[r] = _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)(a + (size_t)r * as) + ib)->qs);
                ncs[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), cu, y[r]));
            }
            for (int j = 0; j < 2; j++) {
                const __m256i u = w_unsigned(w + (size_t)j * wst, ib, kind);
                for (int r = 0; r < nr; r++)
                    acc[j][r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[j][r][k]),
                                                _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(ncs[r], u, y[r])), acc[j][r]);
            }
        }
    }
    for (int j = 0; j < 2; j++)
        for (int r = 0; r < nr; r++) s[(size_t)r * ss + j] = hsum_f32_8(acc[j][r]);
}

/* 16 weight rows: decode 4 at a time (4 chains, next tile prefetched) */
INL void q0_16w(int n, const char *w, size_t wst, const char *a, size_t as, float *s, size_t ss, int nr,
                const int kind) {
    const int nb = n / QK8_0, bs = wsize(kind);
    const int pf_lines = (int)((16 * wst + 63) / 64);
    if (nr == 1 || nb > Q0_BATCH_BLOCKS) {
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < 16; j += 4) {
                const int l0 = j * pf_lines / 16, l1 = (j + 4) * pf_lines / 16;
                q0_tile(nb, w + (size_t)j * wst, wst, a + (size_t)r * as, as, s + (size_t)r * ss + j, ss, kind,
                        w + 16 * wst + 64 * (size_t)l0, r == 0 ? l1 - l0 : 0, 4, 1);
            }
        return;
    }
    float dxf[16 * Q0_DY], dyf[COLI_MAX_NR * Q0_DY];
    for (int j = 0; j < 16; j++)
        for (int ib = 0; ib < nb + 8; ib++) {
            coli_half h = 0;
            if (ib < nb) memcpy(&h, w + (size_t)j * wst + (size_t)ib * bs, 2);
            dxf[(size_t)j * Q0_DY + ib] = h2f(h);
        }
    for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) {
        const int rn = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
        const char *ar = a + (size_t)r0 * as;
        for (int r = 0; r < rn; r++)
            for (int ib = 0; ib < nb + 8; ib++)
                dyf[(size_t)r * Q0_DY + ib] = ib < nb ? h2f(((const block_q8_0 *)(ar + (size_t)r * as))[ib].d) : 0.0f;
        for (int j = 0; j < 16; j += 2) {
            float *sj = s + (size_t)r0 * ss + j;
            const char *wj = w + (size_t)j * wst;
            const float *dj = dxf + (size_t)j * Q0_DY;
            /* the first row group streams the weights: fetch the next tile meanwhile */
            const int l0 = j * pf_lines / 16, pl = r0 == 0 ? (j + 2) * pf_lines / 16 - l0 : 0;
            const char *pf = w + 16 * wst + 64 * (size_t)l0;
            COLI_DISPATCH_NR(rn, q0_batch, nb, wj, wst, dj, ar, as, dyf, sj, ss, kind, pf, pl);
        }
    }
}

TGT void vec_dot_q8_0_q8_0_16w_avxvnni(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                       size_t ss, int nr) {
    q0_16w(n, w, wst, a, as, s, ss, nr, 0);
}
TGT void vec_dot_q4_0_q8_0_16w_avxvnni(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                       size_t ss, int nr) {
    q0_16w(n, w, wst, a, as, s, ss, nr, 1);
}
TGT void vec_dot_q5_0_q8_0_16w_avxvnni(int n, const void *w, size_t wst, const void *a, size_t as, float *s,
                                       size_t ss, int nr) {
    q0_16w(n, w, wst, a, as, s, ss, nr, 2);
}

#endif
