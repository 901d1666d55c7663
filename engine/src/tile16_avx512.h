/* tile16_avx512.h — ggml's tiled matmul arithmetic (llama.cpp's VNNI microtile) on one decoded
 * super-block of 16 weight rows, one row per 32-bit lane; for the AVX-512 kernel files, which
 * include it after defining ISA / INL (quant_iq14_avx512.c: IQ4_XS, IQ1_S, IQ1_M;
 * quant_iq23_avx512.c: IQ2_XXS .. IQ3_S).
 *
 * Every 4-element step is one dpbusd of a code vector (4 bytes of each of the 16 rows, biased
 * by +128 to be dpbusd's unsigned operand) against an activation row's 4 bytes broadcast;
 * per sub-block the scale multiplies in (mullo), and the bias comes off once per super-block
 * as -128 * scale * the activation's bsums (tile_bias): isum, the super-block's exact integer
 * per row. Then per activation row acc = fma(float(isum) * d0, dy, acc). */
#ifndef COLI_TILE16_AVX512_H
#define COLI_TILE16_AVX512_H

#define TILE16_PASS_ROWS 256 /* activation rows per pass over the decoded tiles (each pass decodes them again) */

/* One super-block of 16 rows, decoded: c[64] the biased codes (dword k of the 256 values;
 * lanes = rows), ls[16] the sub-block scales (8 of 32 values, or 16 of 16), d0 the rows' d
 * (times the type's constant). */
typedef struct {
    __m512i c[64];
    __m512i ls[16];
    __m512 d0;
} tile16;

/* The +128 bias of the codes, -128 * scale * (the activation's bsums), for dpwssd against the
 * bsums' 16-bit pairs: lsb[p], lane j = row j's (-128 * scale) of bsums 2p and 2p + 1 in the
 * two halves (the scale of the sub-block each bsum, 16 values, falls in). */
INL void tile_bias(const tile16 *t, const int nw, __m512i lsb[8]) {
    for (int p = 0; p < 8; p++) {
        const __m512i lo = nw == 4 ? t->ls[2 * p] : t->ls[p], hi = nw == 4 ? t->ls[2 * p + 1] : t->ls[p];
        const __m512i a = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(lo, 7));
        const __m512i b = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(hi, 7));
        lsb[p] = _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(b, 16));
    }
}

/* Super-block i of the decoded tile against G activation rows (rows of a, as apart), in
 * sub-blocks of nw dwords (4: 16 values, 8: 32): each code vector is loaded once for all G
 * (a table read per dpbusd was load-bound), its activation dword broadcast from memory. */
INL void tile_rows(const tile16 *t, const __m512i lsb[8], const char *a, size_t as, int i, const int nw, __m512 *acc,
                   const int G) {
    const int nsub = 64 / nw;
    __m512i isum[8], raw[8];
    for (int r = 0; r < G; r++) { /* the bias, from the bsums' pairs */
        const block_q8_K *y = (const block_q8_K *)(a + (size_t)r * as) + i;
        isum[r] = _mm512_setzero_si512();
        for (int p = 0; p < 8; p++) {
            int32_t bp;
            memcpy(&bp, y->bsums + 2 * p, 4);
            isum[r] = _mm512_dpwssd_epi32(isum[r], lsb[p], _mm512_set1_epi32(bp));
        }
    }
    for (int sb = 0; sb < nsub; sb++) {
        for (int r = 0; r < G; r++) raw[r] = _mm512_setzero_si512();
        for (int k = 0; k < nw; k++) { /* c[nw sb + k]: elements 4k..4k+3 of the sub-block */
            const __m512i c = t->c[nw * sb + k];
            for (int r = 0; r < G; r++) {
                int32_t yd;
                memcpy(&yd, ((const block_q8_K *)(a + (size_t)r * as) + i)->qs + 4 * (nw * sb + k), 4);
                raw[r] = _mm512_dpbusd_epi32(raw[r], c, _mm512_set1_epi32(yd));
            }
        }
        for (int r = 0; r < G; r++) isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(raw[r], t->ls[sb]));
    }
    for (int r = 0; r < G; r++) {
        const float dy = ((const block_q8_K *)(a + (size_t)r * as) + i)->d;
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(isum[r]), t->d0), _mm512_set1_ps(dy), acc[r]);
    }
}

/* the tile against rn activation rows: 8, then 4, then 1 at a time */
INL void tile_all_rows(const tile16 *t, const char *a, size_t as, int i, const int nw, __m512 *acc, int rn) {
    __m512i lsb[8];
    tile_bias(t, nw, lsb);
    int r = 0;
    for (; r + 8 <= rn; r += 8) tile_rows(t, lsb, a + (size_t)r * as, as, i, nw, acc + r, 8);
    for (; r + 4 <= rn; r += 4) tile_rows(t, lsb, a + (size_t)r * as, as, i, nw, acc + r, 4);
    for (; r < rn; r++) tile_rows(t, lsb, a + (size_t)r * as, as, i, nw, acc + r, 1);
}

#endif
