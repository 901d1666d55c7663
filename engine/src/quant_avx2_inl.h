/* quant_avx2_inl.h — small AVX2 helpers shared by quant_avx2.c and
 * quant_avxvnni.c (whose functions, a superset target, inline them). Include
 * after <immintrin.h> and <string.h>, inside #ifdef COLI_X86. */
#ifndef COLI_QUANT_AVX2_INL_H
#define COLI_QUANT_AVX2_INL_H

#define AVX2_INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))

AVX2_INL float hsum_f32_8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

AVX2_INL int hsum_i32_8(__m256i a) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

AVX2_INL float h2f(coli_half h) { return _cvtsh_ss(h); }

/* int8 x int8 -> 8 x int32 partial sums; x may be -128 (a weight), y is an
 * activation in [-127, 127]. */
AVX2_INL __m256i dot_i8(__m256i ax, __m256i x, __m256i y) {
    const __m256i p16 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* 32 nibbles -> 32 bytes in 0..15: low nibbles (elements 0..15) then high. */
AVX2_INL __m256i nibbles_32(const uint8_t *p) {
    const __m128i t = _mm_loadu_si128((const __m128i *)p);
    const __m256i b = _mm256_insertf128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* bit j of a 32-bit mask -> byte j = 0xFF / 0x00 */
AVX2_INL __m256i bits_32(const uint8_t *p) {
    uint32_t x32;
    memcpy(&x32, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x32), shuf);
    bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

/* q[k], lane j: 32-bit word k of the 16 bytes at b + j * wst (an 8 x 4 transpose) */
AVX2_INL void transpose8x4(const char *b, size_t wst, __m256i q[4]) {
    __m256i A[4];
    for (int t = 0; t < 4; t++) /* lane g of A[t]: the 16 bytes of row 4g + t */
        A[t] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b + (size_t)t * wst))),
                                       _mm_loadu_si128((const __m128i *)(b + (size_t)(t + 4) * wst)), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(A[0], A[1]), t1 = _mm256_unpackhi_epi32(A[0], A[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(A[2], A[3]), t3 = _mm256_unpackhi_epi32(A[2], A[3]);
    q[0] = _mm256_unpacklo_epi64(t0, t2);
    q[1] = _mm256_unpackhi_epi64(t0, t2);
    q[2] = _mm256_unpacklo_epi64(t1, t3);
    q[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* the fp16 at p, p + wst, ..., p + 7 wst as 8 floats (a scale of 8 rows) */
AVX2_INL __m256 halves8(const char *p, size_t wst) {
    coli_half h[8];
    for (int j = 0; j < 8; j++) memcpy(&h[j], p + (size_t)j * wst, 2);
    return _mm256_cvtph_ps(_mm_set_epi16((short)h[7], (short)h[6], (short)h[5], (short)h[4], (short)h[3], (short)h[2],
                                         (short)h[1], (short)h[0]));
}

/* Half h (1: rows 0..7, 2: rows 8..15) of a 16-row tile of 16-quant-byte blocks
 * (coli_repack_b32_r16: Q4_0, IQ4_NL): block ib's 4 quant words with row j in lane j,
 * and its 8 scales as floats */
AVX2_INL void r16b_words8(const char *tile, int ib, int h, __m256i q[4]) {
    for (int k = 0; k < 4; k++) q[k] = _mm256_loadu_si256((const __m256i *)(COLI_R16B_Q(tile, 16, 2, ib, k) + 32 * (h - 1)));
}
AVX2_INL __m256 r16b_scales8(const char *tile, int ib, int h) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(COLI_R16B_D(tile, 16, 2, ib) + 16 * (h - 1))));
}

#endif
