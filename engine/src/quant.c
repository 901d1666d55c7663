/* quant.c — the scalar reference kernels (the `_generic` twins, the
 * dequantizers and the quantizers).
 *
 * Every `_generic` dot product follows the arithmetic of ggml's
 * ggml_vec_dot_*_generic (ggml/src/ggml-cpu/quants.c, vec.cpp): exact integer
 * sums per block, then the same float scale products in the same order. The
 * quantizers follow ggml/src/ggml-quants.c (`_ref`) and, for the activation
 * types Q8_0/Q8_1, ggml's x86 CPU path (ggml-cpu/arch/x86/quants.c), because
 * that rounding is what llama.cpp's logits on x86 are made of. */
#include <math.h>
#include <string.h>

#include "ggml_expf.h"
#include "quant.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Round to nearest, ties to even, for |x| < 2^22, without float->int UB:
 * ggml's nearest_int (ggml-quants.c). */
static inline int nearest_int(float x) {
    const float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int8_t clamp_i8(float v) {  /* (int8_t)roundf(v), defined for any input */
    if (!(v > -128.5f)) return -128;      /* also NaN */
    if (v >= 127.5f) return 127;
    return (int8_t)roundf(v);
}

/* ---- float rows ------------------------------------------------------------ */

void dequantize_row_f32(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

void dequantize_row_f16(const void *vx, float *y, int64_t n) {
    const coli_half *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = coli_fp16_to_fp32(x[i]);
}

void dequantize_row_bf16(const void *vx, float *y, int64_t n) {
    const coli_bf16 *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = coli_bf16_to_fp32(x[i]);
}

void quantize_row_f16(const float *x, void *vy, int64_t n) {
    coli_half *y = vy;
    for (int64_t i = 0; i < n; i++) y[i] = coli_fp32_to_fp16(x[i]);
}

void quantize_row_bf16(const float *x, void *vy, int64_t n) {
    coli_bf16 *y = vy;
    for (int64_t i = 0; i < n; i++) y[i] = coli_fp32_to_bf16(x[i]);
}

/* ---- 32-element blocks: dequantize --------------------------------------- */

void dequantize_row_q4_0(const void *vx, float *y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = coli_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_row_q4_1(const void *vx, float *y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / QK4_1; i++, y += QK4_1) {
        const float d = coli_fp16_to_fp32(x[i].d), m = coli_fp16_to_fp32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (x[i].qs[j] & 0x0F) * d + m;
            y[j + QK4_1 / 2] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

static inline uint32_t load_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

void dequantize_row_q5_0(const void *vx, float *y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / QK5_0; i++, y += QK5_0) {
        const float d = coli_fp16_to_fp32(x[i].d);
        const uint32_t qh = load_u32(x[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int x0 = ((x[i].qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
            const int x1 = ((x[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
            y[j] = x0 * d;
            y[j + QK5_0 / 2] = x1 * d;
        }
    }
}

void dequantize_row_q5_1(const void *vx, float *y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / QK5_1; i++, y += QK5_1) {
        const float d = coli_fp16_to_fp32(x[i].d), m = coli_fp16_to_fp32(x[i].m);
        const uint32_t qh = load_u32(x[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int x0 = (x[i].qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10);
            const int x1 = (x[i].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
            y[j] = x0 * d + m;
            y[j + QK5_1 / 2] = x1 * d + m;
        }
    }
}

void dequantize_row_q8_0(const void *vx, float *y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        const float d = coli_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = x[i].qs[j] * d;
    }
}

void dequantize_row_q8_1(const void *vx, float *y, int64_t n) {
    const block_q8_1 *x = vx;
    for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) {
        const float d = coli_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_1; j++) y[j] = x[i].qs[j] * d;
    }
}

/* ---- 32-element blocks: reference quantizers (ggml-quants.c) --------------- */

void quantize_row_q4_0_ref(const float *x, void *vy, int64_t n) {
    block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; j++)
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = coli_fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const uint8_t q0 = (uint8_t)MIN(15, clamp_i8(truncf(x[j] * id + 8.5f)));
            const uint8_t q1 = (uint8_t)MIN(15, clamp_i8(truncf(x[j + QK4_0 / 2] * id + 8.5f)));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quantize_row_q4_1_ref(const float *x, void *vy, int64_t n) {
    block_q4_1 *y = vy;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float min = x[0], max = x[0];
        for (int j = 1; j < QK4_1; j++) { min = MIN(min, x[j]); max = MAX(max, x[j]); }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = coli_fp32_to_fp16(d);
        y[i].m = coli_fp32_to_fp16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const uint8_t q0 = (uint8_t)MIN(15, clamp_i8(truncf((x[j] - min) * id + 0.5f)));
            const uint8_t q1 = (uint8_t)MIN(15, clamp_i8(truncf((x[j + QK4_1 / 2] - min) * id + 0.5f)));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quantize_row_q5_0_ref(const float *x, void *vy, int64_t n) {
    block_q5_0 *y = vy;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK5_0; j++)
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = coli_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const uint8_t q0 = (uint8_t)MIN(31, clamp_i8(truncf(x[j] * id + 16.5f)));
            const uint8_t q1 = (uint8_t)MIN(31, clamp_i8(truncf(x[j + QK5_0 / 2] * id + 16.5f)));
            y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + QK5_0 / 2);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

void quantize_row_q5_1_ref(const float *x, void *vy, int64_t n) {
    block_q5_1 *y = vy;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float min = x[0], max = x[0];
        for (int j = 1; j < QK5_1; j++) { min = MIN(min, x[j]); max = MAX(max, x[j]); }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = coli_fp32_to_fp16(d);
        y[i].m = coli_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const uint8_t q0 = (uint8_t)clamp_i8(truncf((x[j] - min) * id + 0.5f));
            const uint8_t q1 = (uint8_t)clamp_i8(truncf((x[j + QK5_1 / 2] - min) * id + 0.5f));
            y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + QK5_1 / 2);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

void quantize_row_q8_0_ref(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = MAX(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = coli_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = clamp_i8(x[j] * id);
    }
}

void quantize_row_q8_1_ref(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++) amax = MAX(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = coli_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = clamp_i8(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = coli_fp32_to_fp16(sum * d);
    }
}

/* ggml x86 (AVX/AVX2) quantize_row_q8_0/q8_1, in scalar form: the max is
 * order-independent, the product and round-half-even are per element, so
 * this is bit-exact with the SIMD version. */
static inline float amax_32(const float *x) {
    float m = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float a = fabsf(x[j]);
        m = a > m ? a : m;
    }
    return m;
}

void quantize_row_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float amax = amax_32(x);
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = coli_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = (int8_t)MAX(-128, MIN(127, nearest_int(x[j] * id)));
    }
}

void quantize_row_q8_1(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float amax = amax_32(x);
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = coli_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = (int8_t)MAX(-128, MIN(127, nearest_int(x[j] * id)));
            sum += y[i].qs[j];
        }
        y[i].s = coli_fp32_to_fp16(d * (float)sum);
    }
}

/* ---- K-quants: dequantize ---------------------------------------------------- */

/* The 16 6-bit Q3_K scales (biased by 32), unpacked to bytes. */
static inline void q3_K_scales(const uint8_t *packed, int8_t out[16]) {
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    uint32_t aux[4];
    memcpy(aux, packed, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    memcpy(out, aux, 16);
}

void dequantize_row_q2_K(const void *vx, float *y, int64_t n) {
    const block_q2_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d), min = coli_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int k = 0; k < QK_K; k += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; h++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * ((q[l + 16 * h] >> shift) & 3) - ml;
                }
            }
            q += 32;
        }
    }
}

void dequantize_row_q3_K(const void *vx, float *y, int64_t n) {
    const block_q3_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d_all = coli_fp16_to_fp32(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        int8_t scales[16];
        q3_K_scales(x[i].scales, scales);
        uint8_t m = 1;
        int is = 0;
        for (int k = 0; k < QK_K; k += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; h++) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 16 * h; l < 16 * h + 16; l++)
                        *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
                m <<= 1;
            }
            q += 32;
        }
    }
}

void coli_repack_q4_K_r16(void *w, int64_t n_in, int64_t n_out, void *tmp) {
    const int64_t nb = n_in / QK_K;
    const size_t row = (size_t)nb * sizeof(block_q4_K);
    for (int64_t t = 0; t < n_out / 16; t++) {
        uint8_t *tile = (uint8_t *)w + (size_t)t * 16 * row;
        memcpy(tmp, tile, 16 * row);
        for (int64_t i = 0; i < nb; i++) {
            uint32_t *o = (uint32_t *)(tile + (size_t)i * 16 * sizeof(block_q4_K)); /* 36 words x 16 lanes */
            for (int r = 0; r < 16; r++) {
                const block_q4_K *x = (const block_q4_K *)((const uint8_t *)tmp + (size_t)r * row) + i;
                memcpy(&o[r], x, 4); /* d | dmin << 16 */
                for (int k = 0; k < 3; k++) memcpy(&o[16 * (1 + k) + r], x->scales + 4 * k, 4);
                for (int q = 0; q < 32; q++) memcpy(&o[16 * (4 + q) + r], x->qs + 4 * q, 4);
            }
        }
    }
}

void coli_repack_b32_r16(void *w, int64_t n_in, int64_t n_out, int qb, int sb, void *tmp) {
    const int64_t nb = n_in / 32;
    const size_t bsz = (size_t)sb + (size_t)qb, row = (size_t)nb * bsz;
    for (int64_t t = 0; t < n_out / 16; t++) {
        uint8_t *tile = (uint8_t *)w + (size_t)t * 16 * row;
        memcpy(tmp, tile, 16 * row);
        for (int64_t i = 0; i < nb; i++)
            for (int r = 0; r < 16; r++) {
                const uint8_t *x = (const uint8_t *)tmp + (size_t)r * row + (size_t)i * bsz; /* scale, then qs */
                memcpy(tile + COLI_R16B_DOFF(qb, sb, i) + (size_t)sb * r, x, (size_t)sb);
                for (int k = 0; k < qb / 4; k++)
                    memcpy(tile + COLI_R16B_QOFF(qb, sb, i, k) + 4 * r, x + sb + 4 * k, 4);
            }
    }
}

int coli_r16_in_mult(uint32_t wtype) {
    switch (wtype) {
    case GGML_TYPE_Q4_K: return QK_K;
    case GGML_TYPE_Q4_0: case GGML_TYPE_IQ4_NL: case GGML_TYPE_MXFP4: return 64;
    default: return 0;
    }
}

void coli_repack_r16(uint32_t wtype, void *w, int64_t n_in, int64_t n_out, void *tmp) {
    if (wtype == GGML_TYPE_Q4_K)
        coli_repack_q4_K_r16(w, n_in, n_out, tmp);
    else if (coli_r16_in_mult(wtype))
        coli_repack_b32_r16(w, n_in, n_out, 16, wtype == GGML_TYPE_MXFP4 ? 1 : 2, tmp);
}

void dequantize_row_q4_K(const void *vx, float *y, int64_t n) {
    const block_q4_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d), min = coli_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        uint32_t sm32[4];
        coli_k4_scales_mins(x[i].scales, sm32);
        const uint8_t *sm = (const uint8_t *)sm32; /* scales 0..7, mins 8..15 */
        for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
            const float d1 = d * sm[is], m1 = min * sm[8 + is];
            const float d2 = d * sm[is + 1], m2 = min * sm[8 + is + 1];
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void dequantize_row_q5_K(const void *vx, float *y, int64_t n) {
    const block_q5_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d), min = coli_fp16_to_fp32(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        uint32_t sm32[4];
        coli_k4_scales_mins(x[i].scales, sm32);
        const uint8_t *sm = (const uint8_t *)sm32; /* scales 0..7, mins 8..15 */
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, ql += 32) {
            const float d1 = d * sm[is], m1 = min * sm[8 + is];
            const float d2 = d * sm[is + 1], m2 = min * sm[8 + is + 1];
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

void dequantize_row_q6_K(const void *vx, float *y, int64_t n) {
    const block_q6_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = coli_fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int k = 0; k < QK_K; k += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void dequantize_row_q8_K(const void *vx, float *y, int64_t n) {
    const block_q8_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++)
        for (int j = 0; j < QK_K; j++) *y++ = x[i].d * x[i].qs[j];
}

/* ggml quantize_row_q8_K_ref: iscale = -127/max where max is the element of
 * largest magnitude (keeping its sign), nearest_int, bsums per 16. */
void quantize_row_q8_K_ref(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K; j++) {
            const float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (!(amax > 0) || !isfinite(amax)) {  /* zero row (ggml), or inf/nan: no UB */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) y[i].qs[j] = (int8_t)MIN(127, nearest_int(iscale * x[j]));
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += y[i].qs[j * 16 + k];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

/* ---- softmax exponentials ---------------------------------------------------------- */

double coli_exp_sum_generic(float *x, int n, float max) {
    double sum = 0.0;
    for (int i = 0; i < n; i += 16) {
        float *e = x + i, r[8], t[4];
        for (int j = 0; j < 16; j++) e[j] = coli_ggml_expf(e[j] - max);
        for (int j = 0; j < 8; j++) r[j] = e[j + 8] + e[j];  /* _mm512_reduce_add_ps */
        for (int j = 0; j < 4; j++) t[j] = r[j + 4] + r[j];
        sum += (double)((t[0] + t[2]) + (t[1] + t[3]));
    }
    return sum;
}

/* _mm256 lanes summed as ggml's AVX2 loops do: halves, then pairs, then the last two. */
float coli_reduce_add8(const float *a) {
    float h[4];
    for (int j = 0; j < 4; j++) h[j] = a[4 + j] + a[j];
    return (h[0] + h[2]) + (h[1] + h[3]);
}

double coli_exp_sum_avx2(float *x, int n, float max) {
    double sum = 0.0;
    int i = 0;
    for (; i + 7 < n; i += 8) {
        for (int j = 0; j < 8; j++) x[i + j] = coli_ggml_expf_avx2(x[i + j] - max);
        sum += (double)coli_reduce_add8(x + i);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    return sum;
}

/* ---- generic dot products ------------------------------------------------------- */

/* One row: returns dot(w, a) of n elements. */
typedef float (*dot1_fn)(int n, const void *w, const void *a);

static float dot1_f32(int n, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    double sumf = 0.0;
    for (int i = 0; i < n; i++) sumf += (double)(w[i] * a[i]);
    return (float)sumf;
}

static float dot1_f16(int n, const void *vw, const void *va) {
    const coli_half *w = vw, *a = va;
    double sumf = 0.0;
    for (int i = 0; i < n; i++) sumf += (double)(coli_fp16_to_fp32(w[i]) * coli_fp16_to_fp32(a[i]));
    return (float)sumf;
}

static float dot1_bf16(int n, const void *vw, const void *va) {
    const coli_bf16 *w = vw, *a = va;
    double sumf = 0.0;
    for (int i = 0; i < n; i++) sumf += (double)(coli_bf16_to_fp32(w[i]) * coli_bf16_to_fp32(a[i]));
    return (float)sumf;
}

static float dot1_q4_0(int n, const void *vw, const void *va) {
    const block_q4_0 *x = vw;
    const block_q8_0 *y = va;
    float sumf = 0;
    for (int ib = 0; ib < n / QK8_0; ib++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK8_0 / 2; j++) {
            sumi0 += ((x[ib].qs[j] & 0x0F) - 8) * y[ib].qs[j];
            sumi1 += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + QK8_0 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += sumi * coli_fp16_to_fp32(x[ib].d) * coli_fp16_to_fp32(y[ib].d);
    }
    return sumf;
}

static float dot1_q4_1(int n, const void *vw, const void *va) {
    const block_q4_1 *x = vw;
    const block_q8_1 *y = va;
    float sumf = 0;
    for (int ib = 0; ib < n / QK8_1; ib++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK8_1 / 2; j++) {
            sumi0 += (x[ib].qs[j] & 0x0F) * y[ib].qs[j];
            sumi1 += (x[ib].qs[j] >> 4) * y[ib].qs[j + QK8_1 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (coli_fp16_to_fp32(x[ib].d) * coli_fp16_to_fp32(y[ib].d)) * sumi +
                coli_fp16_to_fp32(x[ib].m) * coli_fp16_to_fp32(y[ib].s);
    }
    return sumf;
}

static float dot1_q5_0(int n, const void *vw, const void *va) {
    const block_q5_0 *x = vw;
    const block_q8_0 *y = va;
    float sumf = 0;
    for (int ib = 0; ib < n / QK8_0; ib++) {
        const uint32_t qh = load_u32(x[ib].qh);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK8_0 / 2; j++) {
            const int x0 = ((x[ib].qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
            const int x1 = ((x[ib].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
            sumi0 += x0 * y[ib].qs[j];
            sumi1 += x1 * y[ib].qs[j + QK8_0 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (coli_fp16_to_fp32(x[ib].d) * coli_fp16_to_fp32(y[ib].d)) * sumi;
    }
    return sumf;
}

static float dot1_q5_1(int n, const void *vw, const void *va) {
    const block_q5_1 *x = vw;
    const block_q8_1 *y = va;
    float sumf = 0;
    for (int ib = 0; ib < n / QK8_1; ib++) {
        const uint32_t qh = load_u32(x[ib].qh);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK8_1 / 2; j++) {
            const int x0 = (x[ib].qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10);
            const int x1 = (x[ib].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
            sumi0 += x0 * y[ib].qs[j];
            sumi1 += x1 * y[ib].qs[j + QK8_1 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (coli_fp16_to_fp32(x[ib].d) * coli_fp16_to_fp32(y[ib].d)) * sumi +
                coli_fp16_to_fp32(x[ib].m) * coli_fp16_to_fp32(y[ib].s);
    }
    return sumf;
}

static float dot1_q8_0(int n, const void *vw, const void *va) {
    const block_q8_0 *x = vw;
    const block_q8_0 *y = va;
    float sumf = 0;
    for (int ib = 0; ib < n / QK8_0; ib++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += sumi * (coli_fp16_to_fp32(x[ib].d) * coli_fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

static float dot1_q2_K(int n, const void *vw, const void *va) {
    const block_q2_K *x = vw;
    const block_q8_K *y = va;
    float sumf = 0;
    for (int i = 0; i < n / QK_K; i++) {
        const uint8_t *q2 = x[i].qs, *sc = x[i].scales;
        const int8_t *q8 = y[i].qs;
        int summs = 0;
        for (int j = 0; j < 16; j++) summs += y[i].bsums[j] * (sc[j] >> 4);
        const float dall = y[i].d * coli_fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * coli_fp16_to_fp32(x[i].dmin);
        int isum = 0, is = 0;
        for (int k = 0; k < QK_K / 128; k++, q2 += 32) {
            for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
                int d = sc[is++] & 0xF, isuml = 0;
                for (int l = 0; l < 16; l++) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
                d = sc[is++] & 0xF;
                isuml = 0;
                for (int l = 16; l < 32; l++) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
            }
        }
        sumf += fmaf(dall, (float)isum, -(dmin * (float)summs)); /* ggml's build fuses the first product */
    }
    return sumf;
}

/* The K-quant generic kernels of ggml accumulate 8 int32 lanes (element
 * index mod 8) per super-block and 8 float lanes across super-blocks. */
static float dot1_q3_K(int n, const void *vw, const void *va) {
    const block_q3_K *x = vw;
    const block_q8_K *y = va;
    float sums[8] = {0};
    for (int i = 0; i < n / QK_K; i++) {
        const uint8_t *q3 = x[i].qs, *hm = x[i].hmask;
        const int8_t *q8 = y[i].qs;
        int8_t aux8[QK_K], scales[16];
        int8_t *a = aux8;
        uint8_t m = 1;
        for (int j = 0; j < QK_K; j += 128, q3 += 32)
            for (int shift = 0; shift < 8; shift += 2, a += 32, m <<= 1)
                for (int l = 0; l < 32; l++) a[l] = (int8_t)(((q3[l] >> shift) & 3) - (hm[l] & m ? 0 : 4));
        q3_K_scales(x[i].scales, scales);
        int32_t aux32[8] = {0};
        a = aux8;
        for (int j = 0; j < QK_K / 16; j++)
            for (int h = 0; h < 2; h++, q8 += 8, a += 8)
                for (int l = 0; l < 8; l++) aux32[l] += (scales[j] - 32) * (int16_t)(q8[l] * a[l]);
        const float d = coli_fp16_to_fp32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; l++) sums[l] = fmaf(d, (float)aux32[l], sums[l]); /* fused in ggml's build */
    }
    float sumf = 0;
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

static float dot1_q45_K(int n, const block_q4_K *x4, const block_q5_K *x5, const block_q8_K *y) {
    float sums[8] = {0};
    float sumf = 0;
    for (int i = 0; i < n / QK_K; i++) {
        const uint8_t *q4 = x4 ? x4[i].qs : x5[i].qs;
        const uint8_t *hm = x5 ? x5[i].qh : NULL;
        const int8_t *q8 = y[i].qs;
        int8_t aux8[QK_K];
        int8_t *a = aux8;
        uint8_t m = 1;
        for (int j = 0; j < QK_K / 64; j++, q4 += 32) {
            for (int l = 0; l < 32; l++) a[l] = (int8_t)((q4[l] & 0xF) + (hm && (hm[l] & m) ? 16 : 0));
            a += 32;
            m <<= 1;
            for (int l = 0; l < 32; l++) a[l] = (int8_t)((q4[l] >> 4) + (hm && (hm[l] & m) ? 16 : 0));
            a += 32;
            m <<= 1;
        }
        uint32_t sm32[4];
        coli_k4_scales_mins(x4 ? x4[i].scales : x5[i].scales, sm32);
        const uint8_t *sm = (const uint8_t *)sm32; /* scales 0..7, mins 8..15 */
        int sumi = 0;
        for (int j = 0; j < QK_K / 16; j++) sumi += y[i].bsums[j] * sm[8 + j / 2];
        int32_t aux32[8] = {0};
        a = aux8;
        for (int j = 0; j < QK_K / 32; j++) {
            const int32_t scale = sm[j];
            for (int h = 0; h < 4; h++, q8 += 8, a += 8)
                for (int l = 0; l < 8; l++) aux32[l] += scale * (int16_t)(q8[l] * a[l]);
        }
        const float d = coli_fp16_to_fp32(x4 ? x4[i].d : x5[i].d) * y[i].d;
        for (int l = 0; l < 8; l++) sums[l] += d * aux32[l];
        const float dmin = coli_fp16_to_fp32(x4 ? x4[i].dmin : x5[i].dmin) * y[i].d;
        sumf -= dmin * sumi;
    }
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

static float dot1_q4_K(int n, const void *w, const void *a) { return dot1_q45_K(n, w, NULL, a); }
static float dot1_q5_K(int n, const void *w, const void *a) { return dot1_q45_K(n, NULL, w, a); }

static float dot1_q6_K(int n, const void *vw, const void *va) {
    const block_q6_K *x = vw;
    const block_q8_K *y = va;
    float sums[8] = {0};
    for (int i = 0; i < n / QK_K; i++) {
        const uint8_t *q4 = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        int8_t aux8[QK_K];
        int8_t *a = aux8;
        for (int j = 0; j < QK_K; j += 128, a += 128, q4 += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                a[l + 0] = (int8_t)(((q4[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                a[l + 32] = (int8_t)(((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                a[l + 64] = (int8_t)(((q4[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                a[l + 96] = (int8_t)(((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int32_t aux32[8] = {0};
        a = aux8;
        for (int j = 0; j < QK_K / 16; j++) {
            const int scale = x[i].scales[j];
            for (int h = 0; h < 2; h++, q8 += 8, a += 8)
                for (int l = 0; l < 8; l++) aux32[l] += scale * (int16_t)(q8[l] * a[l]);
        }
        const float d = coli_fp16_to_fp32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; l++) sums[l] += d * aux32[l];
    }
    float sumf = 0;
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

#define GENERIC_NR(name, dot1)                                                                    \
    void name(int n, const void *w, const void *a, size_t a_stride, float *s, size_t s_stride,   \
              int nr) {                                                                           \
        for (int r = 0; r < nr; r++) s[r * s_stride] = dot1(n, w, (const char *)a + r * a_stride); \
    }

GENERIC_NR(vec_dot_f32_f32_generic, dot1_f32)
GENERIC_NR(vec_dot_f16_f16_generic, dot1_f16)
GENERIC_NR(vec_dot_bf16_bf16_generic, dot1_bf16)
GENERIC_NR(vec_dot_q4_0_q8_0_generic, dot1_q4_0)
GENERIC_NR(vec_dot_q4_1_q8_1_generic, dot1_q4_1)
GENERIC_NR(vec_dot_q5_0_q8_0_generic, dot1_q5_0)
GENERIC_NR(vec_dot_q5_1_q8_1_generic, dot1_q5_1)
GENERIC_NR(vec_dot_q8_0_q8_0_generic, dot1_q8_0)
GENERIC_NR(vec_dot_q2_K_q8_K_generic, dot1_q2_K)
GENERIC_NR(vec_dot_q3_K_q8_K_generic, dot1_q3_K)
GENERIC_NR(vec_dot_q4_K_q8_K_generic, dot1_q4_K)
GENERIC_NR(vec_dot_q5_K_q8_K_generic, dot1_q5_K)
GENERIC_NR(vec_dot_q6_K_q8_K_generic, dot1_q6_K)

/* ---- row sizes ------------------------------------------------------------------- */

size_t coli_row_size(uint32_t type, int64_t n) {
    const ggml_type_traits *tt = ggml_type_get(type);
    if (!tt || n < 0 || n % tt->blck_size) return 0;
    return (size_t)(n / tt->blck_size) * (size_t)tt->type_size;
}
