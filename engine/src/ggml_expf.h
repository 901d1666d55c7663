/* ggml_expf.h — one lane of ggml's SIMD exp, bit-identical on any build: the
 * scalar softmax kernel of quant.c and the element-wise steps of ops.c inline it. */
#ifndef COLI_GGML_EXPF_H
#define COLI_GGML_EXPF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* One lane of ggml's AVX-512 ggml_v_expf (max error 1.45 ulp), written with
 * scalar fmaf so any build computes the same bits as the reference's SIMD. */
static inline float coli_ggml_expf(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return scalbnf(j, (int)n);
}

/* One lane of ggml's AVX2 ggml_v_expf: the same polynomial, but 2^n applied
 * as fma(k, j, k) (and its wide-range path), so some results differ by an
 * ulp from the AVX-512 lane: a reference built for AVX2 needs this one. */
static inline float coli_ggml_expf_avx2(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    uint32_t zb, kb, s1b, s2b;
    memcpy(&zb, &z, 4);
    const uint32_t e = zb << 23;
    kb = e + 0x3f800000u;
    float k, s1, s2;
    memcpy(&k, &kb, 4);
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f)) return fmaf(k, j, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    s1b = g + 0x7f000000u;
    s2b = e - g;
    memcpy(&s1, &s1b, 4);
    memcpy(&s2, &s2b, 4);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

#endif
