/* forward.c — the scratch of a forward batch and the forward pass over it. */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200112L
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "attention.h"
#include "clock.h"
#include "deltanet.h"
#include "error.h"
#include "experts.h"
#include "ggml_types.h"
#include "indexer.h"
#include "kernels.h"
#include "matmul.h"
#include "model.h"
#include "moe.h"
#include "ops.h"
#include "quant.h"

/* Every buffer of the state comes from here: 64-byte aligned, counted in
 * s->bytes and listed in s->held for coli_state_free, so a new one is one
 * line. NULL (and s->take_failed) when memory runs out. */
static void *take(coli_state *s, size_t bytes) {
    void *p = NULL;
    assert(s->n_held < COLI_STATE_MAX_BUFFERS); /* raise the bound in model.h */
    if (bytes == 0) bytes = 64;
    bytes = (bytes + 63) & ~(size_t)63;
    if (s->n_held < COLI_STATE_MAX_BUFFERS && posix_memalign(&p, 64, bytes) == 0) {
        s->held[s->n_held++] = p;
        s->bytes += bytes;
        return p;
    }
    s->take_failed = true;
    return NULL;
}

int coli_state_init(coli_state *s, const coli_model *m, struct coli_expert_store *experts, int n_ctx, int n_batch,
                    int n_logit_rows, int n_threads) {
    const coli_hparams *hp = &m->hp;
    memset(s, 0, sizeof *s);
    if (n_ctx <= 0 || n_batch <= 0 || n_threads <= 0 || n_logit_rows <= 0)
        return coli_fail(COLI_E_ARG, "n_ctx, n_batch, logit rows and threads must be > 0");
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->n_logit_rows = n_logit_rows;
    s->n_threads = n_threads;
    const size_t nb = (size_t)n_batch;
    const size_t q_dim = (size_t)hp->n_head * hp->head_dim;
    const size_t k_dim = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t v_dim = (size_t)hp->n_head_kv * hp->head_dim_v;
    const size_t att_dim = (size_t)hp->n_head * hp->head_dim_v;
    s->x = take(s, nb * hp->n_embd * sizeof(float));
    s->xn = take(s, nb * hp->n_embd * sizeof(float));
    s->tmp = take(s, nb * hp->n_embd * sizeof(float));
    s->q = take(s, nb * q_dim * sizeof(float));
    s->k = take(s, nb * k_dim * sizeof(float));
    s->v = take(s, nb * v_dim * sizeof(float));
    s->att = take(s, nb * att_dim * sizeof(float));
    s->hb = take(s, nb * hp->n_ff * sizeof(float));
    s->hb2 = take(s, nb * hp->n_ff * sizeof(float));
    s->logits = take(s, (size_t)n_logit_rows * hp->n_vocab * sizeof(float));
    s->att_scratch = take(s, (size_t)n_threads * coli_attention_scratch_halves(hp, n_ctx) * sizeof(coli_half));
    s->att_scores = take(s, (size_t)n_threads * coli_attention_scratch_floats(hp, n_ctx) * sizeof(float));
    if (hp->n_expert > 0) {
        const size_t K = (size_t)hp->n_expert_used;
        const size_t ff = (size_t)(hp->n_ff_exp > hp->n_ff_shexp ? hp->n_ff_exp : hp->n_ff_shexp);
        s->router = take(s, nb * hp->n_expert * sizeof(float));
        s->route_ids = take(s, nb * hp->n_layer * K * sizeof(int32_t));
        s->route_w = take(s, nb * hp->n_layer * K * sizeof(float));
        s->pairs = take(s, nb * K * sizeof(int32_t));
        s->counts = take(s, ((size_t)hp->n_expert + 1) * sizeof(int32_t));
        s->yg = take(s, nb * K * hp->n_embd * sizeof(float));
        s->hg = take(s, nb * K * ff * sizeof(float));
        s->hg2 = take(s, nb * K * ff * sizeof(float));
        s->active = take(s, (size_t)hp->n_expert * sizeof(int32_t));
        s->ex_of = take(s, (size_t)hp->n_expert * sizeof(coli_expert));
        s->slot_of_pair = take(s, nb * K * sizeof(int32_t));
        /* quantized rows are never larger than f32 rows */
        s->xq_in = take(s, nb * K * hp->n_embd * sizeof(float));
        const size_t mid = (size_t)(hp->n_ff_exp > hp->n_embd ? hp->n_ff_exp : hp->n_embd);
        s->xq_mid = take(s, nb * K * mid * sizeof(float)); /* also up's input when its type differs */
        s->eo = take(s, nb * K * hp->n_embd * sizeof(float));
        s->experts = experts;
        s->wave = take(s, (size_t)hp->n_expert * sizeof(int32_t));
        s->predicted = take(s, (size_t)hp->n_expert * sizeof(int32_t));
        s->router_next = take(s, nb * hp->n_expert * sizeof(float));
        if (s->take_failed || !s->experts) {
            coli_state_free(s);
            return coli_fail(COLI_E_NOMEM, "out of memory for the routed-FFN scratch");
        }
    }
    if (hp->mla) {
        const size_t R = (size_t)hp->kv_lora_rank, nope = (size_t)hp->head_dim_nope;
        s->mla_q = take(s, nb * hp->n_head * (nope + hp->n_rot) * sizeof(float));
        s->mla_qa = take(s, nb * (size_t)(hp->q_lora_rank > 0 ? hp->q_lora_rank : 1) * sizeof(float));
        s->mla_att = take(s, nb * hp->n_head * (size_t)hp->head_dim_mla_v * sizeof(float));
        s->vt_of_row = take(s, nb * sizeof(*s->vt_of_row));
        /* the transposed values of up to 16 sequences at once (more go in passes);
         * mapped, so only the cells a batch reaches take memory */
        s->vt_seqs = n_batch < 16 ? n_batch : 16;
        s->vt_cells = (n_ctx + 63) / 64 * 64 + 64;
        s->vt_bytes = (size_t)s->vt_seqs * R * (size_t)s->vt_cells * sizeof(coli_half);
        void *p = mmap(NULL, s->vt_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            s->vt_bytes = 0;
            coli_state_free(s);
            return coli_fail(COLI_E_NOMEM, "out of memory: no address space for the attention values");
        }
        s->vt = p;
    }
    if (hp->dsa) {
        const size_t H = (size_t)hp->idx_n_head, D = (size_t)hp->idx_head_dim;
        s->idx_q = take(s, nb * H * D * sizeof(float));
        s->idx_k = take(s, nb * D * sizeof(float));
        s->idx_w = take(s, nb * H * sizeof(float));
        s->idx_sel = take(s, nb * (size_t)hp->idx_top_k * sizeof(int32_t));
        s->idx_n_sel = take(s, nb * sizeof(int));
        s->idx_scratch = take(s, (size_t)n_threads * coli_indexer_scratch_floats(hp, n_ctx) * sizeof(float));
    }
    if (hp->mla_fused) {
        const size_t qh = (size_t)hp->head_dim_nope + hp->n_rot;
        s->mla_q = take(s, nb * hp->n_head * qh * sizeof(float));
        s->mla_qa = take(s, nb * (size_t)(hp->q_lora_rank > 0 ? hp->q_lora_rank : 1) * sizeof(float));
        s->mla_in = take(s, nb * (size_t)hp->kv_lora_rank * sizeof(float));
        s->mla_kva = take(s, nb * (size_t)(hp->kv_lora_rank + hp->n_rot) * sizeof(float));
        s->mla_kvb = take(s, nb * hp->n_head * (size_t)(hp->head_dim_nope + hp->head_dim_mla_v) * sizeof(float));
    }
    if (hp->gemma4) {
        s->rin = take(s, nb * hp->n_embd * sizeof(float));
        s->tmp2 = take(s, nb * hp->n_embd * sizeof(float));
        if (hp->n_embd_per_layer > 0) {
            const size_t LP = (size_t)hp->n_layer * hp->n_embd_per_layer;
            s->ple = take(s, nb * LP * sizeof(float));
            s->ple_proj = take(s, nb * LP * sizeof(float));
            s->ple_h = take(s, nb * (size_t)hp->n_embd_per_layer * sizeof(float));
        }
    }
    if (m->mtp_view) s->mtp_in = take(s, nb * 2 * hp->n_embd * sizeof(float));
    if (hp->gdn) s->gdn = take(s, nb * coli_gdn_row_floats(hp) * sizeof(float));
    if (hp->gdn || hp->attn_gated) { /* gated attention (an MTP block's view of such a model has no gdn) */
        s->gq = take(s, nb * 2 * q_dim * sizeof(float));
        s->attn_gate = take(s, nb * q_dim * sizeof(float));
    }
    /* the largest activation conversion any matmul of a batch needs */
    size_t need = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const coli_layer *L = &m->layers[il];
        const coli_mat *mats[] = {COLI_LAYER_MATS(L)};
        for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) {
            if (!mats[i]->n_in) continue; /* absent in this layer */
            size_t sz = coli_matmul_scratch_size(mats[i]->type, mats[i]->n_in, n_batch);
            if (mats[i] == &L->wk_b || mats[i] == &L->wv_b) sz *= (size_t)hp->n_head; /* all heads at once */
            if (sz > need) need = sz;
        }
    }
    size_t out_sz = coli_matmul_scratch_size(m->output.type, m->output.n_in, n_batch);
    if (out_sz > need) need = out_sz;
    if (m->mtp_view) {
        const size_t eh_sz = coli_matmul_scratch_size(m->mtp_eh_proj.type, m->mtp_eh_proj.n_in, n_batch);
        if (eh_sz > need) need = eh_sz;
    }
    if (m->ple_model_proj.n_in) {
        const size_t ple_sz = coli_matmul_scratch_size(m->ple_model_proj.type, m->ple_model_proj.n_in, n_batch);
        if (ple_sz > need) need = ple_sz;
    }
    s->mm_scratch = take(s, need);
    if (s->take_failed) {
        size_t want = s->bytes;
        coli_state_free(s);
        return coli_fail(COLI_E_NOMEM, "out of memory: the run state needs about %zu MiB", want >> 20);
    }
    s->pool = coli_pool_create(n_threads);
    if (!s->pool) {
        coli_state_free(s);
        return colibri_last_error_code();
    }
    return 0;
}

void coli_state_free(coli_state *s) {
    if (!s) return;
    if (!s->pool_borrowed) coli_pool_free(s->pool);
    for (int i = 0; i < s->n_held; i++) free(s->held[i]);
    if (s->vt_bytes) munmap(s->vt, s->vt_bytes);
    memset(s, 0, sizeof *s);
}

void coli_state_borrow_pool(coli_state *s, const coli_state *owner) {
    if (!s->pool_borrowed) coli_pool_free(s->pool);
    s->pool = owner->pool;
    s->pool_borrowed = true;
}

void coli_state_take_times(coli_state *s, coli_state *from) {
    s->t_forward += from->t_forward;
    s->t_attention += from->t_attention;
    s->t_ffn += from->t_ffn;
    s->t_lm_head += from->t_lm_head;
    from->t_forward = from->t_attention = from->t_ffn = from->t_lm_head = 0.0;
}

int coli_state_matmul(coli_state *s, const coli_mat *w, const float *x, int n, float *y) {
    return coli_matmul_ex(s->pool, w->data, w->type, w->n_in, w->n_out, x, n, y, s->mm_scratch,
                          (coli_rows_mode)(s->rows_mode | w->mm_flags));
}

/* Each of n rows of width w gets b added (no-op without a bias). */
static void add_bias(float *x, const float *b, int n, int w) {
    if (!b) return;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < w; d++) x[(size_t)i * w + d] += b[d];
}

static int attention(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_embd, hd = hp->head_dim, hdv = hp->head_dim_v;
    const int k_dim = hp->n_head_kv * hd, v_dim = hp->n_head_kv * hdv;
    int rc;
    for (int i = 0; i < n; i++) coli_rmsnorm(s->xn + (size_t)i * E, s->x + (size_t)i * E, L->attn_norm, E, hp->rms_eps);
    if (hp->attn_gated) { /* qwen3next: per head [query | output gate] */
        const int H = hp->n_head;
        if ((rc = coli_state_matmul(s, &L->wq, s->xn, n, s->gq))) return rc;
        for (int i = 0; i < n; i++)
            for (int h = 0; h < H; h++) {
                const float *src = s->gq + ((size_t)i * H + h) * 2 * hd;
                memcpy(s->q + ((size_t)i * H + h) * hd, src, (size_t)hd * sizeof(float));
                memcpy(s->attn_gate + ((size_t)i * H + h) * hd, src + hd, (size_t)hd * sizeof(float));
            }
    } else if ((rc = coli_state_matmul(s, &L->wq, s->xn, n, s->q))) {
        return rc;
    }
    if ((rc = coli_state_matmul(s, &L->wk, s->xn, n, s->k))) return rc;
    if ((rc = coli_state_matmul(s, &L->wv, s->xn, n, s->v))) return rc;
    add_bias(s->q, L->bq, n, hp->n_head * hd);
    add_bias(s->k, L->bk, n, k_dim);
    add_bias(s->v, L->bv, n, v_dim);
    for (int i = 0; i < n; i++) {
        const coli_kv *kv = s->rows[i].kv;
        const int pos = s->rows[i].pos;
        const coli_kv_layer *KL = &kv->layer[L->kv_slot];
        const int cell = pos - coli_kv_first(kv, L->kv_slot); /* a window layer's cell of pos */
        float *q = s->q + (size_t)i * hp->n_head * hd;
        float *k = s->k + (size_t)i * k_dim;
        const float *v = s->v + (size_t)i * v_dim;
        if (L->q_norm && hp->qk_norm_full) { /* one norm across all heads (OLMoE) */
            coli_rmsnorm(q, q, L->q_norm, hp->n_head * hd, hp->rms_eps);
            coli_rmsnorm(k, k, L->k_norm, k_dim, hp->rms_eps);
        } else if (L->q_norm) {
            for (int h = 0; h < hp->n_head; h++) coli_rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, hp->rms_eps);
            for (int h = 0; h < hp->n_head_kv; h++) coli_rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, hp->rms_eps);
        }
        coli_rope(q, hp->n_head, hd, hp->n_rot, pos, &L->rope);
        coli_rope(k, hp->n_head_kv, hd, hp->n_rot, pos, &L->rope);
        if (hp->attn_scale != 1.0f)
            for (int d = 0; d < hp->n_head * hd; d++) q[d] *= hp->attn_scale;
        coli_half *kdst = KL->k + (size_t)cell * k_dim;
        for (int d = 0; d < k_dim; d++) kdst[d] = coli_fp32_to_fp16(k[d]);
        for (int d = 0; d < v_dim; d++) KL->v[(size_t)d * KL->cells + cell] = coli_fp32_to_fp16(v[d]);
    }
    coli_attention(m, s, il, n);
    if (hp->attn_gated) { /* attention output times sigmoid(gate) (ggml_sigmoid, ggml_mul) */
        const size_t w = (size_t)hp->n_head * hdv;
        coli_sigmoid(s->attn_gate, (int)(n * w));
        for (size_t j = 0; j < n * w; j++) s->att[j] *= s->attn_gate[j];
    }
    if ((rc = coli_state_matmul(s, &L->wo, s->att, n, s->tmp))) return rc;
    add_bias(s->tmp, L->bo, n, E);
    if (L->post_attn_norm)
        for (int i = 0; i < n; i++)
            coli_rmsnorm(s->tmp + (size_t)i * E, s->tmp + (size_t)i * E, L->post_attn_norm, E, hp->rms_eps);
    return 0;
}

/* ---- Gemma 4 (src/models/gemma4.cpp) -----------------------------------
 * Each layer has its own head size and key/value heads; a layer past n_kv_from_start computes only its
 * queries and attends to an earlier layer's cache. Per head: q and k RMS-normed with their weights, v
 * with none (the keys' raw projection where there is no attn_v), RoPE on the layer's rotary dims (the
 * global layers' rope_freqs leave most pairs unrotated), no scaling of q or the scores. */
static int gemma4_attention(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_embd, H = hp->n_head, hd = L->hd, kvd = L->n_kv_head * L->hd;
    int rc;
    for (int i = 0; i < n; i++) coli_rmsnorm(s->xn + (size_t)i * E, s->x + (size_t)i * E, L->attn_norm, E, hp->rms_eps);
    if ((rc = coli_state_matmul(s, &L->wq, s->xn, n, s->q))) return rc;
    if (!L->kv_shared) {
        if ((rc = coli_state_matmul(s, &L->wk, s->xn, n, s->k))) return rc;
        if (L->v_from_k)
            memcpy(s->v, s->k, (size_t)n * kvd * sizeof(float));
        else if ((rc = coli_state_matmul(s, &L->wv, s->xn, n, s->v)))
            return rc;
    }
    for (int i = 0; i < n; i++) {
        const int pos = s->rows[i].pos;
        float *q = s->q + (size_t)i * H * hd;
        for (int h = 0; h < H; h++) coli_rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, hp->rms_eps);
        coli_rope(q, H, hd, L->n_rot, pos, &L->rope);
        if (L->kv_shared) continue;
        const coli_kv *kv = s->rows[i].kv;
        const coli_kv_layer *KL = &kv->layer[L->kv_slot];
        const int cell = pos - coli_kv_first(kv, L->kv_slot);
        float *k = s->k + (size_t)i * kvd, *v = s->v + (size_t)i * kvd;
        for (int h = 0; h < L->n_kv_head; h++) {
            coli_rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, hp->rms_eps);
            coli_rmsnorm(v + h * hd, v + h * hd, NULL, hd, hp->rms_eps);
        }
        coli_rope(k, L->n_kv_head, hd, L->n_rot, pos, &L->rope);
        coli_half *kdst = KL->k + (size_t)cell * kv->k_dim;
        for (int d = 0; d < kvd; d++) kdst[d] = coli_fp32_to_fp16(k[d]);
        for (int d = 0; d < kvd; d++) KL->v[(size_t)d * KL->cells + cell] = coli_fp32_to_fp16(v[d]);
    }
    coli_attention(m, s, il, n);
    if ((rc = coli_state_matmul(s, &L->wo, s->att, n, s->tmp))) return rc;
    for (int i = 0; i < n; i++)
        coli_rmsnorm(s->tmp + (size_t)i * E, s->tmp + (size_t)i * E, L->post_attn_norm, E, hp->rms_eps);
    return 0;
}

/* Gemma 4's FFN: the dense GEGLU MLP on ffn_norm(x); in a MoE layer besides it (post_ffw_norm_1) the experts
 * on pre_ffw_norm_2(x) (post_ffw_norm_2), routed on rms_norm(x) / sqrt(n_embd) * ffn_gate_inp.scale; their
 * sum, or the MLP alone, through post_ffw_norm. */
static int gemma4_ffn(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_embd, F = L->n_ff;
    const size_t nE = (size_t)n * E;
    float *mlp = L->is_moe ? s->tmp2 : s->tmp;
    int rc;
    for (int i = 0; i < n; i++) coli_rmsnorm(s->xn + (size_t)i * E, s->x + (size_t)i * E, L->ffn_norm, E, hp->rms_eps);
    if ((rc = coli_state_matmul(s, &L->ffn_gate, s->xn, n, s->hb))) return rc;
    if ((rc = coli_state_matmul(s, &L->ffn_up, s->xn, n, s->hb2))) return rc;
    for (int i = 0; i < n; i++) coli_geglu(s->hb + (size_t)i * F, s->hb2 + (size_t)i * F, F);
    if ((rc = coli_state_matmul(s, &L->ffn_down, s->hb, n, mlp))) return rc;
    if (L->is_moe) {
        for (int i = 0; i < n; i++) coli_rmsnorm(mlp + (size_t)i * E, mlp + (size_t)i * E, L->post_ffn_norm_1, E, hp->rms_eps);
        const float rscale = 1.0f / sqrtf((float)E);
        for (int i = 0; i < n; i++) {
            const float *x = s->x + (size_t)i * E;
            float *r = s->rin + (size_t)i * E;
            coli_rmsnorm(s->xn + (size_t)i * E, x, L->pre_ffn_norm_2, E, hp->rms_eps);
            coli_rmsnorm(r, x, NULL, E, hp->rms_eps);
            for (int d = 0; d < E; d++) r[d] = (r[d] * rscale) * L->gate_inp_s[d];
        }
        if ((rc = coli_moe_ffn(m, s, s->experts, il, n))) return rc;
        for (int i = 0; i < n; i++)
            coli_rmsnorm(s->tmp + (size_t)i * E, s->tmp + (size_t)i * E, L->post_ffn_norm_2, E, hp->rms_eps);
        for (size_t j = 0; j < nE; j++) s->tmp[j] = mlp[j] + s->tmp[j];
    }
    for (int i = 0; i < n; i++)
        coli_rmsnorm(s->tmp + (size_t)i * E, s->tmp + (size_t)i * E, L->post_ffn_norm, E, hp->rms_eps);
    return 0;
}

/* Gemma 4 E2B/E4B's per-layer inputs (llama_model_gemma4::graph build_inp_per_layer and
 * project_per_layer_inputs), from the scaled token embeddings in s->x: per row and layer,
 * ((rms_norm(per_layer_model_proj x / sqrt(n_embd)) * per_layer_proj_norm) + per_layer_token_embd[token] *
 * sqrt(n_embd_per_layer)) / sqrt(2), each op rounded as ggml's graph rounds it. Only the rows' tokens of the
 * table are read. */
static int gemma4_ple_inputs(const coli_model *m, coli_state *s, int n) {
    const coli_hparams *hp = &m->hp;
    const int P = hp->n_embd_per_layer, NL = hp->n_layer;
    const size_t LP = (size_t)NL * P;
    const coli_to_float_fn to_float = coli_kernels()->type[m->ple_tok_embd.type].to_float;
    const size_t row_bytes = coli_row_size(m->ple_tok_embd.type, (int64_t)LP);
    const float tok_scale = sqrtf((float)P), proj_scale = 1.0f / sqrtf((float)hp->n_embd),
                in_scale = 1.0f / sqrtf(2.0f);
    int rc;
    if ((rc = coli_state_matmul(s, &m->ple_model_proj, s->x, n, s->ple_proj))) return rc;
    for (int i = 0; i < n; i++) {
        float *t = s->ple + (size_t)i * LP, *p = s->ple_proj + (size_t)i * LP;
        to_float((const uint8_t *)m->ple_tok_embd.data + (size_t)s->rows[i].token * row_bytes, t, (int64_t)LP);
        for (size_t j = 0; j < LP; j++) t[j] *= tok_scale;
        for (size_t j = 0; j < LP; j++) p[j] *= proj_scale;
        for (int l = 0; l < NL; l++) coli_rmsnorm(p + (size_t)l * P, p + (size_t)l * P, m->ple_proj_norm, P, hp->rms_eps);
        for (size_t j = 0; j < LP; j++) t[j] = (p[j] + t[j]) * in_scale;
    }
    return 0;
}

/* Layer il's per-layer embedding on its output x: x += post_norm(proj(gelu(inp_gate x) * input_il)). */
static int gemma4_ple_layer(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_embd, P = hp->n_embd_per_layer;
    const size_t LP = (size_t)hp->n_layer * P;
    int rc;
    if ((rc = coli_state_matmul(s, &L->ple_gate, s->x, n, s->ple_h))) return rc;
    for (int i = 0; i < n; i++) /* ggml_gelu then ggml_mul: one table lookup, one product, as geglu */
        coli_geglu(s->ple_h + (size_t)i * P, s->ple + (size_t)i * LP + (size_t)il * P, P);
    if ((rc = coli_state_matmul(s, &L->ple_proj, s->ple_h, n, s->tmp))) return rc;
    for (int i = 0; i < n; i++)
        coli_rmsnorm(s->tmp + (size_t)i * E, s->tmp + (size_t)i * E, L->ple_post_norm, E, hp->rms_eps);
    for (size_t j = 0; j < (size_t)n * E; j++) s->x[j] += s->tmp[j];
    return 0;
}

/* ---- multi-head latent attention (deepseek2) ---------------------------
 * llama.cpp's absorbed MLA (src/models/deepseek2.cpp, the is_mla branch):
 * the cache holds per token the normed latent (kv_lora_rank) and the roped
 * shared key (n_rot); each head's non-rotary query goes through attn_k_b into
 * latent space, so attention is one-key-head MQA over the cache, and its
 * output comes back per head through attn_v_b before attn_output. */

/* y[i][h] = W_h x[i][h] for every head h: rows of x are `x_stride` floats with
 * head h's n_in inputs at h * x_head; y likewise (y_stride, y_head). As
 * ggml's mul_mat of a 3-D weight: never repacked, and with a strided
 * (permuted) input an F32 weight takes the one-row kernel for every row
 * (ggml only retries tinyBLAS after converting the input, which F32 skips).
 * All heads go through the pool at once: one pass, not one per head. */
static int per_head_matmul(coli_state *s, const coli_mat *w, size_t stride, int n_head, const float *x,
                           size_t x_stride, size_t x_head, int n, float *y, size_t y_stride, size_t y_head,
                           bool strided_input) {
    int mode = s->rows_mode | COLI_ROWS_NOT_REPACKED;
    if (strided_input && w->type == GGML_TYPE_F32) mode = COLI_ROWS_ALONE | COLI_ROWS_NOT_REPACKED;
    return coli_matmul_heads(s->pool, w->data, stride, w->type, w->n_in, w->n_out, n_head, x, x_stride, x_head, n,
                             y, y_stride, y_head, s->mm_scratch, (coli_rows_mode)mode);
}

/* Queries of MLA's layers: attn_norm, then the q LoRA (wq_a, its norm, wq_b) or one attn_q. */
static int mla_queries(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_embd;
    int rc;
    for (int i = 0; i < n; i++) coli_rmsnorm(s->xn + (size_t)i * E, s->x + (size_t)i * E, L->attn_norm, E, hp->rms_eps);
    if (hp->q_lora_rank <= 0) return coli_state_matmul(s, &L->wq, s->xn, n, s->mla_q);
    if ((rc = coli_state_matmul(s, &L->wq_a, s->xn, n, s->mla_qa))) return rc;
    for (int i = 0; i < n; i++) {
        float *qa = s->mla_qa + (size_t)i * hp->q_lora_rank;
        coli_rmsnorm(qa, qa, L->q_a_norm, hp->q_lora_rank, hp->rms_eps);
    }
    return coli_state_matmul(s, &L->wq_b, s->mla_qa, n, s->mla_q);
}

static int mla_attention(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int H = hp->n_head, R = hp->kv_lora_rank, rot = hp->n_rot, nope = hp->head_dim_nope;
    const int qh = nope + rot; /* a projected query head */
    const int kd = R + rot;    /* a cached row, and an absorbed query head */
    const int V = hp->head_dim_mla_v;
    int rc;
    if ((rc = mla_queries(m, s, il, n))) return rc;
    /* DSA: a full layer's indexer picks the cells (a shared one keeps the last full layer's) */
    if (hp->dsa && L->idx_slot >= 0 && (rc = coli_indexer(m, s, il, n))) return rc;
    if ((rc = coli_state_matmul(s, &L->wkv_a, s->xn, n, s->k))) return rc;
    for (int i = 0; i < n; i++) {
        const int pos = s->rows[i].pos;
        float *kv = s->k + (size_t)i * kd;
        coli_rope(kv + R, 1, rot, rot, pos, &L->rope);
        coli_rmsnorm(kv, kv, L->kv_a_norm, R, hp->rms_eps);
        coli_rope(s->mla_q + (size_t)i * H * qh + nope, H, qh, rot, pos, &L->rope);
    }
    /* absorbed queries: [q_nope . attn_k_b, q_pe] per head */
    if ((rc = per_head_matmul(s, &L->wk_b, L->wk_b_stride, H, s->mla_q, (size_t)H * qh, (size_t)qh, n, s->q,
                              (size_t)H * kd, (size_t)kd, true))) /* q_nope: a permuted view */
        return rc;
    for (int i = 0; i < n; i++) {
        for (int h = 0; h < H; h++)
            memcpy(s->q + ((size_t)i * H + h) * kd + R, s->mla_q + ((size_t)i * H + h) * qh + nope, (size_t)rot * sizeof(float));
        if (hp->attn_scale != 1.0f)
            for (int d = 0; d < H * kd; d++) s->q[(size_t)i * H * kd + d] *= hp->attn_scale;
        const coli_kv *kv = s->rows[i].kv;
        coli_half *dst = kv->layer[il].k + (size_t)s->rows[i].pos * kd;
        const float *src = s->k + (size_t)i * kd;
        for (int d = 0; d < kd; d++) dst[d] = coli_fp32_to_fp16(src[d]);
    }
    coli_attention(m, s, il, n); /* -> s->att: n x H latent outputs of R */
    if ((rc = per_head_matmul(s, &L->wv_b, L->wv_b_stride, H, s->att, (size_t)H * R, (size_t)R, n, s->mla_att,
                              (size_t)H * V, (size_t)V, false))) /* kqv: contiguous */
        return rc;
    return coli_state_matmul(s, &L->wo, s->mla_att, n, s->tmp);
}

/* An older file's MLA (one fused attn_kv_b, no attention.key_length_mla):
 * llama.cpp decompresses the latent into full heads and runs plain
 * multi-head attention (src/models/deepseek2.cpp, the !is_mla branch):
 * K = [k_nope | the shared RoPE key], V per head, both cached whole. */
static int mla_fused_attention(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int H = hp->n_head, R = hp->kv_lora_rank, rot = hp->n_rot, nope = hp->head_dim_nope;
    const int hd = nope + rot, V = hp->head_dim_mla_v, kvw = nope + V;
    int rc;
    if ((rc = mla_queries(m, s, il, n))) return rc;
    if ((rc = coli_state_matmul(s, &L->wkv_a, s->xn, n, s->mla_kva))) return rc;
    for (int i = 0; i < n; i++) {
        float *kva = s->mla_kva + (size_t)i * (R + rot);
        coli_rope(kva + R, 1, rot, rot, s->rows[i].pos, &L->rope);
        coli_rmsnorm(s->mla_in + (size_t)i * R, kva, L->kv_a_norm, R, hp->rms_eps);
    }
    if ((rc = coli_state_matmul(s, &L->wkv_b, s->mla_in, n, s->mla_kvb))) return rc;
    for (int i = 0; i < n; i++) {
        const coli_kv *kv = s->rows[i].kv;
        const int pos = s->rows[i].pos;
        float *q = s->q + (size_t)i * H * hd;
        memcpy(q, s->mla_q + (size_t)i * H * hd, (size_t)H * hd * sizeof(float));
        coli_rope(q + nope, H, hd, rot, pos, &L->rope); /* the trailing rot dims of each head */
        const float *kvb = s->mla_kvb + (size_t)i * H * kvw, *k_pe = s->mla_kva + (size_t)i * (R + rot) + R;
        coli_half *kdst = kv->layer[il].k + (size_t)pos * kv->k_dim;
        coli_half *vc = kv->layer[il].v;
        for (int h = 0; h < H; h++) {
            for (int d = 0; d < nope; d++) kdst[h * hd + d] = coli_fp32_to_fp16(kvb[h * kvw + d]);
            for (int d = 0; d < rot; d++) kdst[h * hd + nope + d] = coli_fp32_to_fp16(k_pe[d]);
            for (int d = 0; d < V; d++) vc[((size_t)h * V + d) * kv->n_ctx + pos] = coli_fp32_to_fp16(kvb[h * kvw + nope + d]);
        }
    }
    coli_attention(m, s, il, n);
    return coli_state_matmul(s, &L->wo, s->att, n, s->tmp);
}

/* ---- feed-forward ----------------------------------------------------- */

static int ffn(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_embd, F = hp->n_ff;
    int rc;
    for (int i = 0; i < n; i++) coli_rmsnorm(s->xn + (size_t)i * E, s->x + (size_t)i * E, L->ffn_norm, E, hp->rms_eps);
    if (L->is_moe) return coli_moe_ffn(m, s, s->experts, il, n);
    if ((rc = coli_state_matmul(s, &L->ffn_gate, s->xn, n, s->hb))) return rc;
    if ((rc = coli_state_matmul(s, &L->ffn_up, s->xn, n, s->hb2))) return rc;
    for (int i = 0; i < n; i++) {
        if (hp->act == COLI_ACT_GELU)
            coli_geglu(s->hb + (size_t)i * F, s->hb2 + (size_t)i * F, F);
        else
            coli_swiglu(s->hb + (size_t)i * F, s->hb2 + (size_t)i * F, F);
    }
    if ((rc = coli_state_matmul(s, &L->ffn_down, s->hb, n, s->tmp))) return rc;
    if (L->post_ffn_norm)
        for (int i = 0; i < n; i++)
            coli_rmsnorm(s->tmp + (size_t)i * E, s->tmp + (size_t)i * E, L->post_ffn_norm, E, hp->rms_eps);
    return 0;
}

/* ---- the forward pass ------------------------------------------------- */

/* An MTP block's input (llama.cpp's graph_mtp): eh_proj of [enorm(the token's embedding) | hnorm(the trunk's
 * final normed hidden state at the position before)], which becomes the residual stream. */
static int mtp_input(const coli_model *m, coli_state *s, int n) {
    const int E = m->hp.n_embd;
    if (!s->mtp_h) return coli_fail(COLI_E_ARG, "an MTP block's forward needs the trunk's hidden states");
    for (int i = 0; i < n; i++) {
        float *in = s->mtp_in + (size_t)i * 2 * E;
        coli_rmsnorm(in, s->x + (size_t)i * E, m->mtp_enorm, E, m->hp.rms_eps);
        coli_rmsnorm(in + E, s->mtp_h + (size_t)i * E, m->mtp_hnorm, E, m->hp.rms_eps);
    }
    return coli_state_matmul(s, &m->mtp_eh_proj, s->mtp_in, n, s->x);
}

static void add_rows(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

int coli_model_file_error(const coli_model *m) {
    if (!m->file || !gguf_file_changed(m->file)) return 0;
    return coli_fail(COLI_E_FILE_CHANGED,
                     "model_file_changed: '%s' is no longer the file that was loaded (it shrank below %llu bytes or "
                     "a page of it could not be read); generations are refused until it is whole and loaded again",
                     gguf_path(m->file), (unsigned long long)gguf_file_size(m->file));
}

int coli_forward(const coli_model *m, coli_state *s, const coli_row *rows, int n, int rows_mode) {
    const coli_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    int rc;
    /* before: a shrunk file is never touched; after: a pass that faulted read zeros */
    if ((rc = coli_model_file_error(m))) return rc;
    if (n <= 0 || n > s->n_batch) return coli_fail(COLI_E_ARG, "a forward batch holds 1..%d rows, got %d", s->n_batch, n);
    for (int i = 0; i < n; i++) {
        const coli_row *r = &rows[i];
        if (!r->kv || r->kv->n_layer != hp->n_kv_layers) return coli_fail(COLI_E_ARG, "row %d has no KV cache of this model", i);
        if (r->pos < 0 || r->pos >= r->kv->n_ctx || r->kv->n_ctx > s->n_ctx)
            return coli_fail(COLI_E_TOO_LONG, "too_long: position %d does not fit the context of %d tokens", r->pos,
                             r->kv->n_ctx);
        if (r->token < 0 || r->token >= hp->n_vocab)
            return coli_fail(COLI_E_ARG, "token id %d is outside the vocabulary (0..%d)", r->token, hp->n_vocab - 1);
    }
    if ((rc = coli_gdn_check_rows(m, rows, n))) return rc;
    /* sliding-window caches: each sequence's window moves on before its rows are written */
    for (int i = 0; i < n; i++) {
        if (i > 0 && rows[i].kv == rows[i - 1].kv) continue;
        int pmin = rows[i].pos, pmax = rows[i].pos;
        for (int j = i + 1; j < n; j++)
            if (rows[j].kv == rows[i].kv) {
                if (rows[j].pos < pmin) pmin = rows[j].pos;
                if (rows[j].pos > pmax) pmax = rows[j].pos;
            }
        if ((rc = coli_kv_prepare(rows[i].kv, pmin, pmax))) return rc;
    }
    s->rows = rows;
    s->rows_mode = rows_mode;
    const coli_to_float_fn embed = coli_kernels()->type[m->tok_embd.type].to_float;
    const size_t row_bytes = coli_row_size(m->tok_embd.type, E);
    for (int i = 0; i < n; i++) {
        float *x = s->x + (size_t)i * E;
        embed((const uint8_t *)m->tok_embd.data + (size_t)rows[i].token * row_bytes, x, E);
        if (hp->embd_scale != 1.0f)
            for (int d = 0; d < E; d++) x[d] *= hp->embd_scale;
    }
    if (hp->n_embd_per_layer > 0 && (rc = gemma4_ple_inputs(m, s, n))) return rc;
    if (m->mtp_view && (rc = mtp_input(m, s, n))) return rc;
    const double t_start = coli_now_s();
    for (int il = 0; il < hp->n_layer; il++) {
        const double t0 = coli_now_s();
        rc = m->layers[il].rs_slot >= 0 ? coli_gdn_layer(m, s, il, n)
             : m->hp.gemma4             ? gemma4_attention(m, s, il, n)
             : m->hp.mla                ? mla_attention(m, s, il, n)
             : m->hp.mla_fused          ? mla_fused_attention(m, s, il, n)
                                        : attention(m, s, il, n);
        if (rc) return rc;
        const double t1 = coli_now_s();
        add_rows(s->x, s->tmp, (size_t)n * E);
        if ((rc = hp->gemma4 ? gemma4_ffn(m, s, il, n) : ffn(m, s, il, n))) return rc;
        s->t_attention += t1 - t0;
        s->t_ffn += coli_now_s() - t1;
        add_rows(s->x, s->tmp, (size_t)n * E);
        if (hp->n_embd_per_layer > 0) { /* gemma4 E2B/E4B: the per-layer embedding, before the output scale */
            const double t2 = coli_now_s();
            if ((rc = gemma4_ple_layer(m, s, il, n))) return rc;
            s->t_ffn += coli_now_s() - t2;
        }
        if (hp->gemma4 && m->layers[il].out_scale != 1.0f) /* layer_output_scale (ggml_mul) */
            for (size_t j = 0; j < (size_t)n * E; j++) s->x[j] *= m->layers[il].out_scale;
    }
    for (int i = 0; i < n; i++)
        coli_rmsnorm(s->xn + (size_t)i * E, s->x + (size_t)i * E, m->output_norm, E, hp->rms_eps);
    s->t_forward += coli_now_s() - t_start;
    return coli_model_file_error(m);
}

int coli_logits(const coli_model *m, coli_state *s, int first, int n, float *out) {
    if (first < 0 || n <= 0 || first + n > s->n_batch) return coli_fail(COLI_E_ARG, "coli_logits: rows out of range");
    const double t0 = coli_now_s();
    int rc = coli_state_matmul(s, &m->output, s->xn + (size_t)first * m->hp.n_embd, n, out);
    const float cap = m->hp.final_softcap;
    if (!rc && cap != 0.0f) { /* ggml_scale(1 / c), ggml_tanh, ggml_scale(c) */
        const float inv = 1.0f / cap;
        for (size_t j = 0; j < (size_t)n * m->hp.n_vocab; j++) out[j] = tanhf(out[j] * inv) * cap;
    }
    const double dt = coli_now_s() - t0;
    s->t_lm_head += dt;
    s->t_forward += dt;
    return rc ? rc : coli_model_file_error(m);
}
