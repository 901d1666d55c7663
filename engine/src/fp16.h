/* fp16.h — IEEE half and bfloat16 <-> float, bit-exact with ggml.
 *
 * Integer-only conversions (no FPU rounding-mode or FTZ dependence):
 * half -> float is exact; float -> half rounds to nearest, ties to even, like
 * F16C `vcvtps2ph imm=0` and ggml's GGML_FP32_TO_FP16; NaN becomes 0x7e00
 * (with the sign). bfloat16 rounding is ggml_compute_fp32_to_bf16: nearest,
 * ties to even, NaN forced quiet, no flush of subnormals. */
#ifndef COLI_FP16_H
#define COLI_FP16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t coli_half;  /* IEEE 754 binary16 bits */
typedef uint16_t coli_bf16;  /* top 16 bits of a binary32 */

static inline uint32_t coli_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float coli_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float coli_fp16_to_fp32(coli_half h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return coli_bits_f32(sign | 0x7f800000u | (man << 13));  /* inf, nan */
    if (exp != 0) return coli_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
    if (man == 0) return coli_bits_f32(sign);                                 /* +-0 */
    uint32_t e = 113;                                                         /* subnormal: normalise */
    while (!(man & 0x400u)) { man <<= 1; e--; }
    return coli_bits_f32(sign | (e << 23) | ((man & 0x3ffu) << 13));
}

static inline coli_half coli_fp32_to_fp16(float f) {
    const uint32_t x = coli_f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (coli_half)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) return (coli_half)(sign | 0x7c00u);      /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                                          /* < 2^-14: half subnormal */
        const uint32_t e = ax >> 23;
        const uint32_t shift = 126u - e;                             /* value / 2^-24 = m >> shift */
        if (shift > 24) return (coli_half)sign;
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (coli_half)(sign | r);
    }
    uint32_t r = (ax >> 13) - (112u << 10);                          /* rebias exponent */
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (coli_half)(sign | r);
}

static inline float coli_bf16_to_fp32(coli_bf16 h) { return coli_bits_f32((uint32_t)h << 16); }

static inline coli_bf16 coli_fp32_to_bf16(float f) {
    const uint32_t u = coli_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (coli_bf16)((u >> 16) | 64u);  /* quiet nan */
    return (coli_bf16)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

#endif
