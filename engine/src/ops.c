#include <math.h>
#include <pthread.h>
#include <string.h>

#include "fp16.h"
#include "ggml_expf.h"
#include "kernels.h"
#include "ops.h"
#include "quant.h"

void coli_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) {
        for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
    } else {
        for (int i = 0; i < n; i++) y[i] = x[i] * scale;
    }
}

/* _mm256 squares summed as ggml_vec_cvar_f32's AVX2 branch: halves, then movehl, then movehdup */
static float reduce_add8(const float *a) {
    float t[4];
    for (int j = 0; j < 4; j++) t[j] = a[4 + j] + a[j];
    return (t[0] + t[2]) + (t[1] + t[3]);
}

static float reduce_add16(const float *a);

void coli_layernorm(float *y, const float *x, const float *w, const float *b, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)x[i];
    const float mean = (float)sum / (float)n;
    const int lanes = coli_kernels()->f32_lanes;
    double var = 0.0;
    int i = 0;
    for (; i + lanes - 1 < n; i += lanes) { /* ggml_vec_cvar_f32 */
        float sq[16];
        for (int k = 0; k < lanes; k++) {
            y[i + k] = x[i + k] - mean;
            sq[k] = y[i + k] * y[i + k];
        }
        var += (double)(lanes == 8 ? reduce_add8(sq) : reduce_add16(sq));
    }
    for (; i < n; i++) {
        y[i] = x[i] - mean;
        var += (double)(y[i] * y[i]);
    }
    const float scale = 1.0f / sqrtf((float)(var / n) + eps);
    for (int k = 0; k < n; k++) { /* ggml_norm, then ggml_mul and ggml_add where the tensors exist */
        float v = y[k] * scale;
        if (w) v = v * w[k];
        if (b) v = v + b[k];
        y[k] = v;
    }
}

/* ggml precomputes GELU for every f16 value and looks inputs up after
 * rounding them to f16; we do the same so the FFN matches bit for bit. */
static coli_half gelu_table[(1 << 16) + 2]; /* + padding: the SIMD lookup reads 4 bytes per entry */
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static float gelu_f32(float x) {
    const float GELU_COEF_A = 0.044715f;
    const float SQRT_2_OVER_PI = 0.79788456080286535587989211986876f;
    /* ggml-cpu.c is compiled with GCC's default -ffp-contract=fast, which
     * fuses 1 + (A x) x into one fma; the table entries then match bit for bit */
    return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * x * fmaf(GELU_COEF_A * x, x, 1.0f)));
}

static void gelu_table_init(void) {
    for (uint32_t i = 0; i < (1u << 16); i++) gelu_table[i] = coli_fp32_to_fp16(gelu_f32(coli_fp16_to_fp32((coli_half)i)));
}

void coli_geglu(float *x, const float *g, int n) {
    pthread_once(&gelu_once, gelu_table_init);
    const coli_geglu_fn simd = coli_kernels()->geglu;
    if (simd) {
        simd(x, g, n, gelu_table);
        return;
    }
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (v <= -10.0f)
            x[i] = 0.0f;
        else if (v >= 10.0f)
            x[i] = v * g[i];
        else
            x[i] = coli_fp16_to_fp32(gelu_table[coli_fp32_to_fp16(v)]) * g[i];
    }
}

/* ggml_vec_swiglu_f32: the table's SIMD kernel, else its lanes one at a time (16 lanes of
 * the AVX-512 exp, or 8 of the AVX2 one, as the reference was built), libm for the tail. */
void coli_swiglu(float *x, const float *g, int n) {
    const coli_kernel_table *t = coli_kernels();
    if (t->swiglu) {
        t->swiglu(x, g, n);
        return;
    }
    coli_swiglu_lanes(x, g, n, t->f32_lanes);
}

void coli_swiglu_lanes(float *x, const float *g, int n, int lanes) {
    const int simd_end = n - n % lanes;
    int i = 0;
    if (lanes == 8)
        for (; i < simd_end; i++) x[i] = (x[i] / (1.0f + coli_ggml_expf_avx2(0.0f - x[i]))) * g[i];
    else
        for (; i < simd_end; i++) x[i] = (x[i] / (1.0f + coli_ggml_expf(0.0f - x[i]))) * g[i];
    for (; i < n; i++) x[i] = (x[i] / (1.0f + expf(-x[i]))) * g[i];
}

/* ggml's rope_yarn_ramp: 1 below the low correction dim, 0 above the high one. */
static float yarn_ramp(float low, float high, int i) {
    const float y = ((float)i - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

void coli_rope(float *x, int n_heads, int head_stride, int n_rot, int pos, const coli_rope_params *p) {
    float cs[512][2];
    const int half = n_rot / 2;
    if (half > 512) return; /* refused at load: n_rot <= 1024 */
    const float theta_scale = powf(p->base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int i = 0; i < half; i++) {
        const float th = p->freq_factors ? theta / p->freq_factors[i] : theta; /* ggml_rope_cache_init's theta / ff */
        float t = p->freq_scale * th, mscale = p->attn_factor;
        if (p->ext_factor != 0.0f) { /* YaRN: ramp between interpolated and extrapolated angles */
            const float mix = yarn_ramp(p->corr[0], p->corr[1], i) * p->ext_factor;
            t = fmaf(t, 1.0f - mix, th * mix); /* as GCC contracts ggml's rope_yarn */
            mscale *= fmaf(0.1f, logf(1.0f / p->freq_scale), 1.0f);
        }
        cs[i][0] = cosf(t);
        cs[i][1] = sinf(t);
        if (mscale != 1.0f) {
            cs[i][0] *= mscale;
            cs[i][1] *= mscale;
        }
        theta *= theta_scale;
    }
    /* ggml's rotate_pairs, as GCC contracts it into fmas (-ffp-contract=fast):
     * both layouts come out as fma(c, x0, -(s * x1)) and fma(s, x0, c * x1)
     * (tests/engine/test_shapes.py: llama with 128-wide heads tells the two
     * fusions of the second output apart, 32- and 64-wide ones seldom do) */
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_stride;
        for (int i = 0; i < half; i++) {
            const float c = cs[i][0], sn = cs[i][1];
            if (p->type == COLI_ROPE_NEOX) {
                const float x0 = v[i], x1 = v[i + half];
                v[i] = fmaf(c, x0, -(sn * x1));
                v[i + half] = fmaf(sn, x0, c * x1);
            } else {
                const float x0 = v[2 * i], x1 = v[2 * i + 1];
                v[2 * i] = fmaf(c, x0, -(sn * x1));
                v[2 * i + 1] = fmaf(sn, x0, c * x1);
            }
        }
    }
}

void coli_softmax(float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* _mm512_reduce_add_ps as GCC expands it: halves, quarters, then pairs. */
static float reduce_add16(const float *a) {
    float t3[8], t6[4];
    for (int j = 0; j < 8; j++) t3[j] = a[8 + j] + a[j];
    for (int j = 0; j < 4; j++) t6[j] = t3[4 + j] + t3[j];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

void coli_swiglu_oai(float *x, const float *g, int n, float alpha, float limit) {
    for (int k = 0; k < n; k++) {
        const float a = limit < x[k] ? limit : x[k];                              /* std::min(x, limit) */
        const float b = g[k] < -limit ? -limit : (limit < g[k] ? limit : g[k]); /* std::clamp */
        const float glu = a / (1.0f + expf(alpha * (-a)));
        x[k] = glu * (b + 1.0f);
    }
}

void coli_softmax_ggml(float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    int i = 0;
    if (coli_kernels()->f32_lanes == 8) {
        sum = coli_exp_sum_avx2(x, n, max); /* its tail included */
        i = n;
    }
    for (; i + 15 < n; i += 16) {
        for (int k = i; k < i + 16; k++) x[k] = coli_ggml_expf(x[k] - max);
        sum += (double)reduce_add16(x + i);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int k = 0; k < n; k++) x[k] *= inv;
}

/* ggml_vec_silu_f32 over one row: the SIMD silu over whole vectors (the kernel table's f32_lanes), libm for the tail. */
void coli_silu(float *x, int n) {
    const int lanes = coli_kernels()->f32_lanes;
    const int simd_end = n - n % lanes;
    int i = 0;
    if (lanes == 8)
        for (; i < simd_end; i++) x[i] = x[i] / (1.0f + coli_ggml_expf_avx2(0.0f - x[i]));
    else
        for (; i < simd_end; i++) x[i] = x[i] / (1.0f + coli_ggml_expf(0.0f - x[i]));
    for (; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

/* ggml_sigmoid: 1 / (1 + expf(-x)), libm, element by element. */
void coli_sigmoid(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = 1.0f / (1.0f + expf(-x[i]));
}
