/* deltanet.c — the Gated DeltaNet (linear attention) layers of qwen3next / qwen35moe, as llama.cpp 0.3.36's
 * CPU graph computes them (src/models/qwen3next.cpp build_layer_attn_linear, delta-net-base.cpp, and
 * ggml-cpu/ops.cpp's ssm_conv and the fused gated_delta_net op it takes on the CPU for decode and prefill):
 *
 *   qkv = W_qkv x, z = W_gate x, (beta, alpha) from W_ba x (or W_beta, W_alpha)
 *   qkv -> causal conv of d_conv taps over [conv state | qkv] -> silu -> q, k, v
 *   q, k: per head l2 norm (rms_norm with eps / S, times 1 / sqrt(S))
 *   g = softplus(alpha + dt_bias) * ssm_a; beta = sigmoid(b)
 *   per value head: S *= exp(g); delta = (v - S^T k) * beta; S += k delta^T; o = S^T q / sqrt(S)
 *   o -> per head rms_norm * ssm_norm * silu(z) -> W_out
 *
 * The recurrence runs token by token in both decode and prefill (ggml's fused op does the same), so the rows
 * of one sequence are processed in order; every row updates its own sequence's state in place. */
#define _POSIX_C_SOURCE 200112L /* clock_gettime (clock.h) */
#include <math.h>
#include <string.h>

#include "clock.h"
#include "deltanet.h"
#include "error.h"
#include "ggml_types.h"
#include "kernels.h"
#include "matmul.h"
#include "ops.h"

static int matmul(coli_state *s, const coli_mat *w, const float *x, int n, float *y) {
    return coli_matmul_ex(s->pool, w->data, w->type, w->n_in, w->n_out, x, n, y, s->mm_scratch,
                          (coli_rows_mode)s->rows_mode);
}

/* ggml_vec_dot_f32 (the F32 one-row kernel: its SIMD accumulators and reduction) */
static float dot_f32(const float *a, const float *b, int n) {
    float sum = 0.0f;
    coli_kernels()->type[GGML_TYPE_F32].vec_dot(n, a, b, 0, &sum, 0, 1);
    return sum;
}

/* build_gdn_l2_norm: ggml_rms_norm(x, eps / n) then ggml_scale(1 / sqrt(n)) */
static void l2_norm(float *x, int n, float eps) {
    coli_rmsnorm(x, x, NULL, n, eps / (float)n);
    const float sc = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= sc;
}

size_t coli_gdn_row_floats(const coli_hparams *hp) {
    const size_t S = (size_t)hp->ssm_d_state, KD = S * hp->ssm_n_k, VD = S * hp->ssm_n_v;
    /* qkv(+z of ssm_in) | z | conv out | ba | o */
    return (2 * KD + 2 * VD) + VD + (2 * KD + VD) + 2 * (size_t)hp->ssm_n_v + VD;
}

int coli_gdn_check_rows(const coli_model *m, const coli_row *rows, int n) {
    if (!m->hp.gdn) return 0;
    for (int i = 0; i < n; i++) {
        coli_kv *kv = rows[i].kv;
        if (rows[i].pos == 0) { /* a sequence (re)starts: an empty state */
            memset(kv->rs, 0, (size_t)kv->n_rs_layers * (kv->rs_conv + kv->rs_ssm) * sizeof(float));
            kv->rs_pos = 0;
        }
        if (rows[i].pos != kv->rs_pos)
            return coli_fail(COLI_E_ARG,
                             "a Gated DeltaNet model's recurrent state holds %d tokens and cannot go back or skip to "
                             "position %d (only a restart at 0)", kv->rs_pos, rows[i].pos);
        kv->rs_pos = rows[i].pos + 1;
    }
    return 0;
}

static int gdn_layer(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_embd, S = hp->ssm_d_state, NK = hp->ssm_n_k, NV = hp->ssm_n_v, r = NV / NK;
    const int KD = S * NK, VD = S * NV, CD = 2 * KD + VD, KC = hp->ssm_d_conv;
    const int in_w = L->ssm_legacy_in ? CD + VD : CD;
    float *in = s->gdn;                               /* [n][in_w] */
    float *zb = in + (size_t)n * in_w;                /* [n][VD] */
    float *conv = zb + (size_t)n * VD;                /* one row: [CD] */
    float *ba = conv + CD;                            /* [n][2 NV] */
    float *o = ba + (size_t)n * 2 * NV;               /* [n][VD] */
    float delta[1024];
    int rc;
    for (int i = 0; i < n; i++) coli_rmsnorm(s->xn + (size_t)i * E, s->x + (size_t)i * E, L->attn_norm, E, hp->rms_eps);
    if ((rc = matmul(s, &L->ssm_qkv, s->xn, n, in))) return rc;
    if (!L->ssm_legacy_in && (rc = matmul(s, &L->ssm_gate, s->xn, n, zb))) return rc;
    if (L->ssm_ba.n_in) {
        if ((rc = matmul(s, &L->ssm_ba, s->xn, n, ba))) return rc;
    } else { /* qwen35moe: beta then alpha, each [NV]; laid out as one group of NV betas and NV alphas */
        if ((rc = matmul(s, &L->ssm_beta, s->xn, n, o))) return rc;
        for (int i = 0; i < n; i++) memcpy(ba + (size_t)i * 2 * NV, o + (size_t)i * NV, (size_t)NV * sizeof(float));
        if ((rc = matmul(s, &L->ssm_alpha, s->xn, n, o))) return rc;
        for (int i = 0; i < n; i++) memcpy(ba + (size_t)i * 2 * NV + NV, o + (size_t)i * NV, (size_t)NV * sizeof(float));
    }
    const float eps = hp->rms_eps, scale = 1.0f / sqrtf((float)S);
    for (int i = 0; i < n; i++) {
        coli_kv *kv = s->rows[i].kv;
        float *rs = kv->rs + (size_t)L->rs_slot * (kv->rs_conv + kv->rs_ssm);
        float *cst = rs, *st = rs + kv->rs_conv;
        float *row = in + (size_t)i * in_w, *z = zb + (size_t)i * VD;
        if (L->ssm_legacy_in) { /* [q k v z] per key-head group -> [q... | k... | v...] and z */
            const int gw = 2 * S + 2 * r * S;
            for (int g = 0; g < NK; g++) {
                const float *src = row + (size_t)g * gw;
                memcpy(conv + g * S, src, (size_t)S * sizeof(float));
                memcpy(conv + KD + g * S, src + S, (size_t)S * sizeof(float));
                memcpy(conv + 2 * KD + g * r * S, src + 2 * S, (size_t)r * S * sizeof(float));
                memcpy(z + g * r * S, src + 2 * S + r * S, (size_t)r * S * sizeof(float));
            }
            memcpy(row, conv, (size_t)CD * sizeof(float));
        }
        /* ggml_ssm_conv over [state | x]: sumf += s * c, fused by ggml's -ffp-contract=fast build */
        for (int c = 0; c < CD; c++) {
            float *w = cst + (size_t)c * (KC - 1);
            const float *k = L->ssm_conv1d + (size_t)c * KC;
            float sum = 0.0f;
            for (int t = 0; t < KC - 1; t++) sum = fmaf(w[t], k[t], sum);
            sum = fmaf(row[c], k[KC - 1], sum);
            conv[c] = sum;
            memmove(w, w + 1, (size_t)(KC - 2) * sizeof(float));
            w[KC - 2] = row[c];
        }
        coli_silu(conv, CD);
        float *q = conv, *k = conv + KD, *v = conv + 2 * KD;
        for (int h = 0; h < NK; h++) {
            l2_norm(q + h * S, S, eps);
            l2_norm(k + h * S, S, eps);
        }
        const float *bar = ba + (size_t)i * 2 * NV;
        float *oi = o + (size_t)i * VD;
        for (int h = 0; h < NV; h++) {
            /* qwen3next: beta/alpha interleaved per key-head group [b (r) | a (r)]; qwen35moe: [all b | all a] */
            const float b = L->ssm_ba.n_in ? bar[(h / r) * 2 * r + h % r] : bar[h];
            const float a = L->ssm_ba.n_in ? bar[(h / r) * 2 * r + r + h % r] : bar[NV + h];
            const float beta = 1.0f / (1.0f + expf(-b));
            const float t = a + L->ssm_dt[h];
            const float sp = t > 20.0f ? t : logf(1.0f + expf(t));
            const float g = sp * L->ssm_a[h];
            const int kh = hp->gdn_k_modulo ? h % NK : h / r;
            const float *qh = q + kh * S, *kk = k + kh * S, *vh = v + h * S;
            float *M = st + (size_t)h * S * S;
            const float eg = expf(g);
            for (int j = 0; j < S * S; j++) M[j] *= eg;
            for (int j = 0; j < S; j++) delta[j] = (vh[j] - dot_f32(M + (size_t)j * S, kk, S)) * beta;
            for (int j = 0; j < S; j++) {
                float *Mj = M + (size_t)j * S;
                const float dj = delta[j];
                for (int x = 0; x < S; x++) Mj[x] = fmaf(kk[x], dj, Mj[x]);
            }
            float *oh = oi + h * S;
            for (int j = 0; j < S; j++) oh[j] = dot_f32(M + (size_t)j * S, qh, S) * scale;
            /* the gated norm: rms_norm(o) * ssm_norm * silu(z) */
            coli_rmsnorm(oh, oh, L->ssm_norm, S, eps);
            float *zh = z + h * S;
            coli_silu(zh, S);
            for (int j = 0; j < S; j++) oh[j] *= zh[j];
        }
    }
    return matmul(s, &L->ssm_out, o, n, s->tmp);
}

int coli_gdn_layer(const coli_model *m, coli_state *s, int il, int n) {
    const double t0 = coli_now_s();
    const int rc = gdn_layer(m, s, il, n);
    s->t_linear += coli_now_s() - t0; /* the forward pass counts it in t_attention too; stats.c takes it apart */
    return rc;
}
