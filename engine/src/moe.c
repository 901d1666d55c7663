/* moe.c — the routed FFN, computed as llama.cpp's build_moe_ffn does:
 * probabilities from the router (softmax or sigmoid), top-k on them (plus a
 * selection bias where the family has one), weights taken from the unbiased
 * probabilities, optionally renormalised and scaled, each expert's SwiGLU FFN,
 * and the weighted outputs summed in rank order. */
#include <math.h>
#include <string.h>

#include "error.h"
#include "matmul.h"
#include "moe.h"
#include "ops.h"

static int matmul(coli_state *s, const coli_mat *w, const float *x, int n, float *y) {
    return coli_matmul(s->pool, w->data, w->type, w->n_in, w->n_out, x, n, y, s->mm_scratch);
}

/* Indices of the k largest values, largest first (ties: lower index first). */
static void top_k(const float *v, int n, int k, int32_t *out) {
    for (int j = 0; j < k; j++) out[j] = -1;
    for (int e = 0; e < n; e++) {
        int j = k;
        while (j > 0 && (out[j - 1] < 0 || v[e] > v[out[j - 1]])) j--;
        if (j >= k) continue;
        memmove(out + j + 1, out + j, (size_t)(k - 1 - j) * sizeof *out);
        out[j] = e;
    }
}

/* Router -> chosen experts and their weights for each of the n rows. */
static int route(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_expert, K = hp->n_expert_used;
    int rc = matmul(s, &L->ffn_gate_inp, s->xn, n, s->router);
    if (rc) return rc;
    float sel[4096];
    for (int i = 0; i < n; i++) {
        float *p = s->router + (size_t)i * E;
        if (hp->gating == COLI_GATE_SIGMOID)
            for (int e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
        else
            coli_softmax_ggml(p, E);
        const float *choose = p;
        if (L->exp_probs_b) { /* the bias steers the choice, not the weights */
            for (int e = 0; e < E; e++) sel[e] = p[e] + L->exp_probs_b[e];
            choose = sel;
        }
        int32_t *ids = s->route_ids + ((size_t)i * hp->n_layer + il) * K;
        float *w = s->route_w + ((size_t)i * hp->n_layer + il) * K;
        top_k(choose, E, K, ids);
        for (int k = 0; k < K; k++) w[k] = p[ids[k]];
        if (hp->expert_norm_w) {
            double sum = 0.0;
            for (int k = 0; k < K; k++) sum += (double)w[k];
            float fsum = (float)sum;
            if (fsum < 6.103515625e-5f) fsum = 6.103515625e-5f; /* ggml_clamp to the smallest normal f16 */
            for (int k = 0; k < K; k++) w[k] = w[k] / fsum;
        }
        if (hp->expert_w_scale != 0.0f && hp->expert_w_scale != 1.0f)
            for (int k = 0; k < K; k++) w[k] *= hp->expert_w_scale;
    }
    return 0;
}

int coli_moe_ffn(const coli_model *m, coli_state *s, coli_expert_store *st, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_expert, K = hp->n_expert_used, D = hp->n_embd, F = hp->n_ff_exp;
    int rc = route(m, s, il, n);
    if (rc) return rc;

    /* group (row, rank) pairs by expert: each expert is visited once per batch */
    memset(s->counts, 0, (size_t)(E + 1) * sizeof *s->counts);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < K; k++) s->counts[s->route_ids[((size_t)i * hp->n_layer + il) * K + k] + 1]++;
    for (int e = 0; e < E; e++) s->counts[e + 1] += s->counts[e];
    int32_t fill[4096];
    memcpy(fill, s->counts, (size_t)E * sizeof *fill);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < K; k++) {
            const int e = s->route_ids[((size_t)i * hp->n_layer + il) * K + k];
            s->pairs[fill[e]++] = i * K + k;
        }

    for (int e = 0; e < E; e++) {
        const int lo = s->counts[e], cnt = s->counts[e + 1] - lo;
        if (cnt == 0) continue;
        coli_expert ex;
        if ((rc = coli_experts_get(st, il, e, &ex))) return rc;
        for (int j = 0; j < cnt; j++)
            memcpy(s->xg + (size_t)j * D, s->xn + (size_t)(s->pairs[lo + j] / K) * D, (size_t)D * sizeof(float));
        if (!rc) rc = matmul(s, &ex.gate, s->xg, cnt, s->hg);
        if (!rc) rc = matmul(s, &ex.up, s->xg, cnt, s->hg2);
        if (!rc)
            for (int j = 0; j < cnt; j++) coli_swiglu(s->hg + (size_t)j * F, s->hg2 + (size_t)j * F, F);
        if (!rc) rc = matmul(s, &ex.down, s->hg, cnt, s->yg);
        coli_experts_release(st, il, e);
        if (rc) return rc;
        for (int j = 0; j < cnt; j++) {
            const int pair = s->pairs[lo + j], i = pair / K, k = pair % K;
            const float w = s->route_w[((size_t)i * hp->n_layer + il) * K + k];
            float *dst = s->eo + (size_t)pair * D;
            const float *src = s->yg + (size_t)j * D;
            for (int d = 0; d < D; d++) dst[d] = src[d] * w;
        }
    }
    /* the weighted outputs, summed in rank order */
    for (int i = 0; i < n; i++) {
        float *out = s->tmp + (size_t)i * D;
        memcpy(out, s->eo + (size_t)i * K * D, (size_t)D * sizeof(float));
        for (int k = 1; k < K; k++) {
            const float *src = s->eo + ((size_t)i * K + k) * D;
            for (int d = 0; d < D; d++) out[d] += src[d];
        }
    }
    if (L->gate_shexp.n_in) { /* shared expert: a dense SwiGLU FFN on the same input, added */
        const int FS = hp->n_ff_shexp;
        if ((rc = matmul(s, &L->gate_shexp, s->xn, n, s->hg))) return rc;
        if ((rc = matmul(s, &L->up_shexp, s->xn, n, s->hg2))) return rc;
        for (int i = 0; i < n; i++) coli_swiglu(s->hg + (size_t)i * FS, s->hg2 + (size_t)i * FS, FS);
        if ((rc = matmul(s, &L->down_shexp, s->hg, n, s->yg))) return rc;
        for (size_t j = 0; j < (size_t)n * D; j++) s->tmp[j] += s->yg[j];
    }
    return 0;
}
