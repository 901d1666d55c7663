/* attention.c — softmax(q.K^T) V for a batch of queries against one layer's KV cache.
 *
 * K is cached as [n_ctx][n_head_kv * head_dim] f16, V transposed as
 * [n_head_kv * head_dim_v][n_ctx] f16, so both products are f16 dot
 * products, as in ggml's non-flash-attention path. */
#include <stdlib.h>

#include "attention.h"
#include "ggml_types.h"
#include "ops.h"
#include "quant.h"

typedef struct {
    const coli_model *m;
    coli_state *s;
    int il, n, pos;
} attn_job;

/* One (token, head) pair per task: scores over the visible cache, softmax,
 * and the weighted sum of values; q and the probabilities are rounded to
 * f16 first, as ggml's F16 matmuls round their second operand. */
static void attn_worker(void *ctx, int ith, int nth) {
    const attn_job *J = ctx;
    const coli_hparams *hp = &J->m->hp;
    const coli_layer *L = &J->m->layers[J->il];
    coli_state *s = J->s;
    const coli_vec_dot_fn dot = coli_kernels()->type[GGML_TYPE_F16].vec_dot;
    const int hd = hp->head_dim, hdv = hp->head_dim_v;
    const int k_dim = hp->n_head_kv * hd;
    const int group = hp->n_head / hp->n_head_kv;
    coli_half *qh = s->att_scratch + (size_t)ith * ((size_t)hd + (size_t)s->n_ctx + 64);
    coli_half *ph = qh + hd + 32;
    float *sc = s->att_scores + (size_t)ith * ((size_t)s->n_ctx + 16);
    const coli_half *kc = s->k_cache + (size_t)J->il * s->n_ctx * k_dim;
    const coli_half *vc = s->v_cache + (size_t)J->il * s->n_ctx * hp->n_head_kv * hdv;
    const int tasks = J->n * hp->n_head;
    for (int t = ith; t < tasks; t += nth) {
        const int i = t / hp->n_head, h = t % hp->n_head, kvh = h / group;
        const int p = J->pos + i;
        const int lo = (L->is_swa && p - hp->n_swa + 1 > 0) ? p - hp->n_swa + 1 : 0;
        const int nk = p - lo + 1;
        const float *q = s->q + ((size_t)i * hp->n_head + h) * hd;
        for (int d = 0; d < hd; d++) qh[d] = coli_fp32_to_fp16(q[d]);
        for (int j = 0; j < nk; j++) dot(hd, kc + (size_t)(lo + j) * k_dim + (size_t)kvh * hd, qh, 0, &sc[j], 0, 1);
        if (hp->kq_scale != 1.0f)
            for (int j = 0; j < nk; j++) sc[j] *= hp->kq_scale; /* ggml_soft_max_ext's scale */
        coli_softmax(sc, nk);
        for (int j = 0; j < nk; j++) ph[j] = coli_fp32_to_fp16(sc[j]);
        float *out = s->att + ((size_t)i * hp->n_head + h) * hdv;
        const coli_half *vh = vc + (size_t)kvh * hdv * s->n_ctx;
        for (int d = 0; d < hdv; d++) dot(nk, vh + (size_t)d * s->n_ctx + lo, ph, 0, &out[d], 0, 1);
    }
}

void coli_attention(const coli_model *m, coli_state *s, int il, int n, int pos) {
    attn_job job = {m, s, il, n, pos};
    coli_pool_run(s->pool, attn_worker, &job);
}
