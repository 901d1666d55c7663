/* transpose_avx512.h — rows into 32-bit lanes (row j -> lane j), for the AVX-512 kernel files,
 * which include it after defining ISA / INL (quant_avx512.c, quant_iq14_avx512.c,
 * quant_iq23_avx512.c). */
#ifndef COLI_TRANSPOSE_AVX512_H
#define COLI_TRANSPOSE_AVX512_H

/* q[k], lane j: 32-bit word k of the 16 bytes at b + j * wst (a 16 x 4 transpose) */
INL void transpose16x4(const char *b, size_t wst, __m512i q[4]) {
    __m512i A[4];
    for (int t = 0; t < 4; t++) { /* lane g of A[t]: the 16 bytes of row 4g + t */
        __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b + (size_t)t * wst)));
        z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(b + (size_t)(t + 4) * wst)), 1);
        z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(b + (size_t)(t + 8) * wst)), 2);
        A[t] = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(b + (size_t)(t + 12) * wst)), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(A[0], A[1]), t1 = _mm512_unpackhi_epi32(A[0], A[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(A[2], A[3]), t3 = _mm512_unpackhi_epi32(A[2], A[3]);
    q[0] = _mm512_unpacklo_epi64(t0, t2);
    q[1] = _mm512_unpackhi_epi64(t0, t2);
    q[2] = _mm512_unpacklo_epi64(t1, t3);
    q[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* c[e] = 32-bit word e of the 16 rows r[0..15] (a 16x16 int32 transpose) */
INL void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int q = 0; q < 4; q++) {
        u[4 * q + 0] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
        u[4 * q + 3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
    }
    /* u[4q + k], 128-bit lane L: rows 4q..4q+3 of word 4L + k */
    for (int k = 0; k < 4; k++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88), v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xDD);
        const __m512i v2 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x88), v3 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xDD);
        r[k] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        r[8 + k] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
        r[4 + k] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        r[12 + k] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

#endif
