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

#endif
