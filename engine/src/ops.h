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
/* x = gelu(x) * g, with ggml's f16-table GELU (tanh approximation). */
void coli_geglu(float *x, const float *g, int n);
/* x = silu(x) * g, as ggml's AVX-512 build computes it. */
void coli_swiglu(float *x, const float *g, int n);
/* Rotate n_heads heads of head_dim floats at position pos (first n_rot dims). */
void coli_rope(float *x, int n_heads, int head_dim, int n_rot, int pos, float base, float scale,
               coli_rope_type type);
/* In place softmax with libm expf, summed in double. */
void coli_softmax(float *x, int n);
/* In place softmax exactly as ggml's AVX-512 soft_max computes it: the SIMD
 * exp over chunks of 16 (each chunk summed as _mm512_reduce_add_ps), libm
 * for the tail, the total in double. */
void coli_softmax_ggml(float *x, int n);

#endif
