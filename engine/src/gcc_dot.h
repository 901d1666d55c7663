/* gcc_dot.h — a plain float loop `sum += a[i] * b[i]` as GCC vectorises it in ggml's x86 builds (-O3, contraction
 * on): while a vector of products is left (8 on AVX2, 16 on AVX-512), that many, each rounded, added one by one;
 * then one half vector alike; the rest fused (fma). ggml_vec_dot_f32's leftovers and ggml_ssm_conv's taps add up
 * this way, so their bits depend on the build's vector width (`lanes`: the kernel table's f32_lanes). */
#ifndef COLI_GCC_DOT_H
#define COLI_GCC_DOT_H

#include <math.h>

static inline float coli_gcc_dot(const float *a, const float *b, int n, float sum, int lanes) {
    int i = 0;
    for (; i + lanes <= n;)
        for (const int e = i + lanes; i < e; i++) sum += a[i] * b[i];
    if (i + lanes / 2 <= n)
        for (const int e = i + lanes / 2; i < e; i++) sum += a[i] * b[i];
    for (; i < n; i++) sum = fmaf(a[i], b[i], sum);
    return sum;
}

#endif
