/* ops.h — the small element-wise steps of the forward pass, each computed the
 * way ggml's CPU backend computes it (sums in double where ggml uses
 * ggml_float, GELU through its f16 lookup table, RoPE angles by repeated
 * multiplication), because those choices move logits. */
#ifndef COLI_OPS_H
#define COLI_OPS_H

#include <stdint.h>

#include "model.h"

/* y = x / rms(x) * w  (w may be NULL: no weight); x and y may alias. */
void coli_rmsnorm(float *y, const float *x, const float *w, int n, float eps);
/* y = (x - mean) / sqrt(var + eps) * w + b, as ggml_norm then ggml_mul and ggml_add
 * compute it (the mean summed in double, the variance by SIMD vectors of the
 * kernel table's f32_lanes, each reduced in float, summed in double); x and y may alias. */
void coli_layernorm(float *y, const float *x, const float *w, const float *b, int n, float eps);
/* x = gelu(x) * g, with ggml's f16-table GELU (tanh approximation). */
void coli_geglu(float *x, const float *g, int n);
/* x = silu(x) * g, as ggml's AVX-512 or AVX2 build computes it (the kernel table's f32_lanes). */
void coli_swiglu(float *x, const float *g, int n);
/* The same one lane at a time, as a reference built with `lanes`-wide f32 vectors (8: AVX2's exp). */
void coli_swiglu_lanes(float *x, const float *g, int n, int lanes);
/* x = min(x, limit) * sigmoid(alpha * min(x, limit)) * (clamp(g, -limit, limit) + 1): gpt-oss's
 * clamped SwiGLU as ggml's swiglu_oai computes it (scalar, libm expf); alpha 1.702, limit 7. */
void coli_swiglu_oai(float *x, const float *g, int n, float alpha, float limit);
/* RoPE of the first n_rot values of each of n_heads vectors head_stride apart,
 * at position pos, as ggml_rope_ext computes it (YaRN included). */
void coli_rope(float *x, int n_heads, int head_stride, int n_rot, int pos, const coli_rope_params *p);
/* In place softmax with libm expf, summed in double. */
void coli_softmax(float *x, int n);
/* In place softmax exactly as ggml's soft_max computes it: the SIMD exp over
 * whole vectors (16 AVX-512 lanes summed as _mm512_reduce_add_ps, or 8 AVX2
 * ones as its horizontal adds), libm for the tail, the total in double. */
void coli_softmax_ggml(float *x, int n);

/* x = silu(x) over one row, as ggml_silu computes it (SIMD exp over whole vectors of the
 * kernel table's f32_lanes, libm for the tail). */
void coli_silu(float *x, int n);
/* x = 1 / (1 + expf(-x)), as ggml_sigmoid (scalar, libm). */
void coli_sigmoid(float *x, int n);
#endif
