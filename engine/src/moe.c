/* moe.c — the routed FFN, computed as llama.cpp's build_moe_ffn does:
 * probabilities from the router (softmax or sigmoid), top-k on them (plus a
 * selection bias where the family has one), weights taken from the unbiased
 * probabilities, optionally renormalised and scaled, each expert's SwiGLU FFN,
 * and the weighted outputs summed in rank order. */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "error.h"
#include "kernels.h"
#include "matmul.h"
#include "moe.h"
#include "experts.h"
#include "ops.h"
#include "quant.h"
#include "ggml_types.h"


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

/* DeepSeek V3's group-limited routing (build_moe_ffn's n_expert_groups
 * branch): a group scores the sum of its two best selection values; experts
 * outside the n_group_used best groups become -inf before the top-k. */
static void keep_best_groups(const coli_hparams *hp, const float *choose, float *out) {
    const int G = hp->n_expert_groups, per = hp->n_expert / G;
    float score[4096];
    int32_t best[4096];
    for (int g = 0; g < G; g++) {
        int32_t two[2];
        const int k = per < 2 ? per : 2;
        top_k(choose + (size_t)g * per, per, k, two);
        score[g] = k == 2 ? (float)((double)choose[g * per + two[0]] + (double)choose[g * per + two[1]])
                          : choose[g * per + two[0]];
    }
    top_k(score, G, hp->n_group_used, best);
    for (int e = 0; e < hp->n_expert; e++) out[e] = -INFINITY;
    for (int j = 0; j < hp->n_group_used; j++)
        memcpy(out + (size_t)best[j] * per, choose + (size_t)best[j] * per, (size_t)per * sizeof(float));
}

/* Router -> chosen experts and their weights for each of the n rows. */
static int route(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_expert, K = hp->n_expert_used;
    /* gemma4: the router reads its own input (rms_norm(x) / sqrt(n_embd) * ffn_gate_inp.scale, forward.c) */
    int rc = coli_state_matmul(s, &L->ffn_gate_inp, L->gate_inp_s ? s->rin : s->xn, n, s->router);
    if (rc) return rc;
    float sel[4096], masked[4096];
    for (int i = 0; i < n; i++) {
        float *p = s->router + (size_t)i * E;
        if (L->ffn_gate_inp_b) /* gpt-oss: the router's bias, on the logits (ggml_add) */
            for (int e = 0; e < E; e++) p[e] += L->ffn_gate_inp_b[e];
        if (hp->gating == COLI_GATE_SIGMOID)
            for (int e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
        else if (hp->gating == COLI_GATE_SOFTMAX)
            coli_softmax_ggml(p, E); /* SOFTMAX_WEIGHT: the logits choose, the softmax comes after the top-k */
        const float *choose = p;
        if (L->exp_probs_b) { /* the bias steers the choice, not the weights */
            for (int e = 0; e < E; e++) sel[e] = p[e] + L->exp_probs_b[e];
            choose = sel;
        }
        int32_t *ids = s->route_ids + ((size_t)i * hp->n_layer + il) * K;
        float *w = s->route_w + ((size_t)i * hp->n_layer + il) * K;
        if (hp->n_expert_groups > 1) {
            keep_best_groups(hp, choose, masked);
            choose = masked;
        }
        top_k(choose, E, K, ids);
        for (int k = 0; k < K; k++) w[k] = p[ids[k]];
        if (hp->gating == COLI_GATE_SOFTMAX_WEIGHT) coli_softmax_ggml(w, K); /* over the chosen, in rank order */
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


/* ---- the experts of one layer, fused into two pool runs ----------------
 * Each chosen expert's gate/up products for all the rows routed to it are
 * work items of one run, its down products items of a second, so a decode
 * step costs two dispatches per layer instead of three per expert. The dot
 * products are the same kernels on the same quantized rows as coli_matmul,
 * so results are bit-identical to calling it per expert. */

/* Output rows per work item: as many as still leave ~8 items per thread, so
 * a thread streams long runs of a matrix (fewer claims, prefetch that runs
 * on) while the last items still even out. */
#define MOE_CHUNK_MIN 32
#define MOE_CHUNK_MAX 256

static int moe_chunk(int64_t rows, int nth) {
    int64_t c = rows / (8 * (int64_t)nth) & ~(int64_t)15;
    return (int)(c < MOE_CHUNK_MIN ? MOE_CHUNK_MIN : c > MOE_CHUNK_MAX ? MOE_CHUNK_MAX : c);
}

typedef struct {
    const coli_model *m;
    coli_state *s;
    const coli_expert *ex_of;  /* [E] matrices of each active expert */
    const int32_t *experts;    /* the wave's experts */
    int phase;                 /* 0: gate and up, 1: down */
    int up_separate;           /* up's activation type differs from gate's: its rows are in xq_mid */
    size_t up_stride;
    bool fused;                /* gate and up are one ffn_gate_up_exps matrix per expert (gemma4) */
    int chunk;                 /* output rows per work item */
    int n_items;
    coli_lanes items;          /* claims of the n_items */
} moe_job;

/* y[r][o] for o in [o0, o1) and the `rows` activation rows of one expert,
 * with the arithmetic ggml's mul_mat_id uses: one-row vec_dot, except for
 * weights llama.cpp repacks at load (Q4_0 with n_out % 8 == 0: their gemv /
 * gemm serves every row) and the K-quants its tiled matmul takes once an
 * expert has 8 rows (Q6_K, Q5_K, Q4_K not repacked): mm_id_min_rows. A batch
 * of rows "alone" counts as one row each, "uniform" rows as many.
 * Through the 16- or 2-weight-row kernels when the type has them. */
static void dot_rows(const coli_mat *w, int64_t o0, int64_t o1, const char *xq, size_t xq_stride, int rows,
                     int as_rows, float *y, size_t y_stride) {
    const coli_type_kernels *k = (w->mm_flags & COLI_ROWS_R16) ? coli_r16_kernels(w->type)
                                                                : coli_weight_kernels(coli_kernels(), w->type, w->n_out, as_rows);
    const bool mm = k->mm_id_min_rows > 0 && as_rows >= k->mm_id_min_rows && w->n_in % k->mm_in_mult == 0 &&
                    w->n_out % k->mm_out_mult == 0;
    const coli_vec_dot_fn dot1 = mm ? k->vec_dot_mm : k->vec_dot;
    const coli_vec_dot_nw_fn dot2 = mm ? k->vec_dot_mm_2w : k->vec_dot_2w;
    const coli_vec_dot_nw_fn dot16 = mm ? k->vec_dot_mm_16w : k->vec_dot_16w;
    const size_t row_bytes = coli_row_size(w->type, w->n_in);
    const int n = (int)w->n_in;
    int64_t o = o0;
    if (dot16)
        for (; o + 16 <= o1; o += 16)
            dot16(n, (const char *)w->data + o * row_bytes, row_bytes, xq, xq_stride, y + o, y_stride, rows);
    for (; o < o1; o += (dot2 && o + 2 <= o1) ? 2 : 1) {
        const char *wr = (const char *)w->data + o * row_bytes;
        for (int r = 0; r < rows; r += COLI_MAX_NR) {
            const int nr = rows - r < COLI_MAX_NR ? rows - r : COLI_MAX_NR;
            if (dot2 && o + 2 <= o1)
                dot2(n, wr, row_bytes, xq + (size_t)r * xq_stride, xq_stride, y + (size_t)r * y_stride + o, y_stride, nr);
            else
                dot1(n, wr, xq + (size_t)r * xq_stride, xq_stride, y + (size_t)r * y_stride + o, y_stride, nr);
        }
    }
}

/* Work item it -> (expert group g, which matrix, row chunk). Items are laid
 * out group by group; within a group: gate chunks then up chunks (phase 0)
 * or down chunks (phase 1). */
static void moe_worker(void *ctx, int ith, int nth) {
    moe_job *J = ctx;
    coli_state *s = J->s;
    const coli_hparams *hp = &J->m->hp;
    (void)nth;
    const int D = hp->n_embd, F = hp->n_ff_exp;
    const int C = J->chunk;
    const int per_mat = J->phase == 0 ? (F + C - 1) / C : (D + C - 1) / C;
    const int per_group = J->phase == 0 ? 2 * per_mat : per_mat;
    int lane = ith;
    for (;;) {
        const int it = (int)coli_lanes_claim(&J->items, &lane);
        if (it < 0) return;
        const int g = it / per_group, r = it % per_group;
        const int e = J->experts[g], lo = s->counts[e], cnt = s->counts[e + 1] - lo;
        const coli_expert *ex = &J->ex_of[e];
        const int as_rows = s->rows_mode == COLI_ROWS_ALONE ? 1 : s->rows_mode == COLI_ROWS_UNIFORM ? INT_MAX : cnt;
        if (J->phase == 0) {
            const int which = r / per_mat, c = r % per_mat; /* 0 gate, 1 up */
            const int64_t o0 = (int64_t)c * C, o1 = o0 + C < F ? o0 + C : F;
            const coli_mat *w = which == 0 ? &ex->gate : &ex->up;
            coli_mat up_rows;
            if (which == 1 && J->fused) { /* ffn_gate_up_exps: up is the second half of gate's rows */
                up_rows = ex->gate;
                up_rows.data = (const char *)ex->gate.data + (size_t)F * coli_row_size(ex->gate.type, ex->gate.n_in);
                w = &up_rows;
            }
            float *y = (which == 0 ? s->hg : s->hg2) + (size_t)lo * F;
            if (which == 1 && J->up_separate) /* up reads its own conversion of the rows */
                dot_rows(w, o0, o1, (const char *)s->xq_mid + (size_t)lo * J->up_stride, J->up_stride, cnt, as_rows, y,
                         (size_t)F);
            else
                dot_rows(w, o0, o1, (const char *)s->xq_in + (size_t)lo * s->xq_in_stride, s->xq_in_stride, cnt, as_rows, y,
                         (size_t)F);
        } else {
            const int64_t o0 = (int64_t)r * C, o1 = o0 + C < D ? o0 + C : D;
            dot_rows(&ex->down, o0, o1, (const char *)s->xq_mid + (size_t)lo * s->xq_mid_stride, s->xq_mid_stride,
                     cnt, as_rows, s->yg + (size_t)lo * D, (size_t)D);
        }
    }
}

/* Quantize row `src` for a weight of type wtype (F32 weights read floats as they are). */
static void to_vec_dot_type(uint32_t wtype, const float *src, void *dst, int64_t n) {
    const coli_type_kernels *k = &coli_kernels()->type[wtype];
    const coli_from_float_fn from = coli_kernels()->type[k->vec_dot_type].from_float;
    if (from && k->vec_dot_type != GGML_TYPE_F32)
        from(src, dst, n);
    else
        memcpy(dst, src, (size_t)n * sizeof(float));
}

/* Bytes of one activation row of n elements as a wtype weight reads it. */
static size_t act_row_bytes(uint32_t wtype, int64_t n) {
    const uint32_t t = coli_kernels()->type[wtype].vec_dot_type;
    return t == GGML_TYPE_F32 ? (size_t)n * sizeof(float) : coli_row_size(t, n);
}

/* The per-row steps around the matmuls of a wave: its input rows quantized and laid out by
 * expert (step 0), and each row's biases, activation and down-input quantization (step 1).
 * A wave of many rows (a prefill) spreads them over the pool, one expert per work item:
 * each row's arithmetic is its own, so the split changes no bits. */
typedef struct {
    const coli_model *m;
    coli_state *s;
    int il;
    const int32_t *wave;
    int nw, step, up_separate;
    size_t up_stride;
    atomic_int next;
} wave_rows_job;

#define WAVE_ROWS_PARALLEL 16 /* rows in a wave from which the pool shares these steps (decode keeps them on one thread) */

static void wave_rows_expert(const wave_rows_job *J, int g) {
    const coli_model *m = J->m;
    coli_state *s = J->s;
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[J->il];
    const coli_layer_experts *le = &L->exps;
    const int K = hp->n_expert_used, D = hp->n_embd, F = hp->n_ff_exp;
    const int e = J->wave[g], lo = s->counts[e], cnt = s->counts[e + 1] - lo;
    for (int j = 0; j < cnt; j++) {
        const int slot = lo + j;
        if (J->step == 0) {
            const int pair = s->pairs[slot];
            s->slot_of_pair[pair] = slot;
            const float *row = s->xn + (size_t)(pair / K) * D;
            to_vec_dot_type(le->gate.type, row, (char *)s->xq_in + (size_t)slot * s->xq_in_stride, D);
            if (J->up_separate) to_vec_dot_type(le->up.type, row, (char *)s->xq_mid + (size_t)slot * J->up_stride, D);
            continue;
        }
        float *gate = s->hg + (size_t)slot * F, *up = s->hg2 + (size_t)slot * F;
        if (L->up_exps_b) /* gpt-oss: each expert's biases (ggml_add_id) */
            for (int i = 0; i < F; i++) up[i] += L->up_exps_b[(size_t)e * F + i];
        if (L->gate_exps_b)
            for (int i = 0; i < F; i++) gate[i] += L->gate_exps_b[(size_t)e * F + i];
        if (hp->exp_act == COLI_ACT_SWIGLU_OAI)
            coli_swiglu_oai(gate, up, F, 1.702f, 7.0f); /* build_moe_ffn's alpha and limit */
        else if (hp->exp_act == COLI_ACT_GELU) /* gemma4: ggml_geglu_split */
            coli_geglu(gate, up, F);
        else
            coli_swiglu(gate, up, F);
        to_vec_dot_type(le->down.type, gate, (char *)s->xq_mid + (size_t)slot * s->xq_mid_stride, F);
    }
}

static void wave_rows_worker(void *ctx, int ith, int nth) {
    wave_rows_job *J = ctx;
    (void)ith;
    (void)nth;
    for (int g; (g = atomic_fetch_add(&J->next, 1)) < J->nw;) wave_rows_expert(J, g);
}

static void wave_rows(wave_rows_job *J, int rows) {
    if (rows >= WAVE_ROWS_PARALLEL && coli_pool_size(J->s->pool) > 1) {
        atomic_store(&J->next, 0);
        coli_pool_run_shared(J->s->pool, wave_rows_worker, J);
    } else
        for (int g = 0; g < J->nw; g++) wave_rows_expert(J, g);
}

/* gate/up, SwiGLU, down for the experts of one wave (all acquired). */
static void compute_wave(const coli_model *m, coli_state *s, int il, const int32_t *wave, int nw) {
    const coli_hparams *hp = &m->hp;
    const int D = hp->n_embd, F = hp->n_ff_exp;
    const coli_layer_experts *le = &m->layers[il].exps;
    const uint32_t gate_act = coli_kernels()->type[le->gate.type].vec_dot_type;
    const int up_separate = coli_kernels()->type[le->up.type].vec_dot_type != gate_act;
    const size_t up_stride = act_row_bytes(le->up.type, D);
    int rows = 0;
    for (int g = 0; g < nw; g++) rows += s->counts[wave[g] + 1] - s->counts[wave[g]];
    wave_rows_job rj = {.m = m, .s = s, .il = il, .wave = wave, .nw = nw, .step = 0, .up_separate = up_separate,
                        .up_stride = up_stride};
    wave_rows(&rj, rows);
    moe_job job = {.m = m, .s = s, .ex_of = s->ex_of, .experts = wave, .phase = 0, .up_separate = up_separate,
                   .up_stride = up_stride, .fused = le->gate_up_fused};
    const int nth = coli_pool_size(s->pool);
    job.chunk = moe_chunk((int64_t)nw * 2 * F, nth);
    job.n_items = nw * 2 * ((F + job.chunk - 1) / job.chunk);
    coli_lanes_init(&job.items, job.n_items, nth);
    coli_pool_run_shared(s->pool, moe_worker, &job);  /* items are claimed: a worker preempted meanwhile is not waited for */
    const coli_layer *L = &m->layers[il];
    rj.step = 1;
    wave_rows(&rj, rows);
    job.phase = 1;
    job.chunk = moe_chunk((int64_t)nw * D, nth);
    job.n_items = nw * ((D + job.chunk - 1) / job.chunk);
    coli_lanes_init(&job.items, job.n_items, nth);
    coli_pool_run_shared(s->pool, moe_worker, &job);
    if (L->down_exps_s) /* gemma4: each expert's output scale (build_lora_mm_id's ggml_mul) */
        for (int g = 0; g < nw; g++) {
            const int e = wave[g];
            const float sc = L->down_exps_s[e];
            for (int slot = s->counts[e]; slot < s->counts[e + 1]; slot++) {
                float *y = s->yg + (size_t)slot * D;
                for (int d = 0; d < D; d++) y[d] *= sc;
            }
        }
    if (L->down_exps_b)
        for (int g = 0; g < nw; g++) {
            const int e = wave[g];
            const float *b = L->down_exps_b + (size_t)e * D;
            for (int slot = s->counts[e]; slot < s->counts[e + 1]; slot++) {
                float *y = s->yg + (size_t)slot * D;
                for (int d = 0; d < D; d++) y[d] += b[d];
            }
        }
}

/* One layer ahead: the next MoE layer's router on the current hidden state
 * predicts its experts, whose reads start now (streaming only). */
static void predict_next(const coli_model *m, coli_state *s, coli_expert_store *st, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const int next = il + 1, E = hp->n_expert, K = hp->n_expert_used, D = hp->n_embd;
    if (!coli_experts_streaming(st) || next >= hp->n_layer || !m->layers[next].is_moe) return;
    const coli_layer *N = &m->layers[next];
    float *xn = s->eo; /* free until this layer's experts are weighted */
    for (int i = 0; i < n; i++) {
        float *r = xn + (size_t)i * D;
        if (N->gate_inp_s) { /* gemma4: its router's own input (forward.c's gemma4_ffn) */
            coli_rmsnorm(r, s->x + (size_t)i * D, NULL, D, hp->rms_eps);
            const float rscale = 1.0f / sqrtf((float)D);
            for (int d = 0; d < D; d++) r[d] = (r[d] * rscale) * N->gate_inp_s[d];
        } else {
            coli_rmsnorm(r, s->x + (size_t)i * D, N->ffn_norm, D, hp->rms_eps);
        }
    }
    if (coli_matmul(s->pool, N->ffn_gate_inp.data, N->ffn_gate_inp.type, D, E, xn, n, s->router_next, s->mm_scratch))
        return;
    uint8_t seen[4096] = {0};
    int np = 0;
    int32_t ids[64];
    const int k = K < 64 ? K : 64;
    for (int i = 0; i < n; i++) {
        float *r = s->router_next + (size_t)i * E;
        if (N->ffn_gate_inp_b)
            for (int e = 0; e < E; e++) r[e] += N->ffn_gate_inp_b[e];
        if (N->exp_probs_b) /* GLM: sigmoid scores plus the selection bias choose */
            for (int e = 0; e < E; e++) r[e] = 1.0f / (1.0f + expf(-r[e])) + N->exp_probs_b[e];
        top_k(r, E, k, ids); /* softmax keeps the order of the logits */
        for (int j = 0; j < k; j++)
            if (!seen[ids[j]]) {
                seen[ids[j]] = 1;
                s->predicted[np++] = ids[j];
            }
    }
    coli_experts_predict(st, next, s->predicted, np);
}

/* Every chosen expert of the batch, in waves: first those already in RAM
 * (computed while the store reads the rest), then each as it arrives. Waves
 * only change the order experts are computed in, never their results. */
static int run_experts(const coli_model *m, coli_state *s, coli_expert_store *st, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const int E = hp->n_expert, D = hp->n_embd, F = hp->n_ff_exp;
    const coli_layer_experts *le = &m->layers[il].exps;
    s->xq_in_stride = act_row_bytes(le->gate.type, D);
    s->xq_mid_stride = act_row_bytes(le->down.type, F);
    int n_left = 0;
    for (int e = 0; e < E; e++)
        if (s->counts[e + 1] > s->counts[e]) s->active[n_left++] = e;
    coli_experts_chosen(st, il, s->active, n_left);
    coli_experts_request(st, il, s->active, n_left, false);
    predict_next(m, s, st, il, n); /* after this layer's reads are queued: those come first */
    const int cap = coli_experts_capacity(st, il);
    while (n_left > 0) {
        int nw = 0, kept = 0;
        for (int j = 0; j < n_left; j++) {
            const int e = s->active[j];
            if (nw < cap && coli_experts_try_acquire(st, il, e, &s->ex_of[e]))
                s->wave[nw++] = e;
            else
                s->active[kept++] = e;
        }
        if (nw == 0) { /* nothing in RAM yet: wait for whichever arrives first */
            int j = 0;
            coli_expert got;
            int rc = coli_experts_acquire_any(st, il, s->active, kept, &j, &got);
            if (rc) return rc;
            const int e = s->active[j];
            s->ex_of[e] = got;
            s->wave[nw++] = e;
            memmove(s->active + j, s->active + j + 1, (size_t)(--kept - j) * sizeof *s->active);
        }
        n_left = kept;
        compute_wave(m, s, il, s->wave, nw);
        for (int g = 0; g < nw; g++) coli_experts_release(st, il, s->wave[g]);
        if (n_left > 0) coli_experts_request(st, il, s->active, n_left, false); /* room freed */
    }
    return 0;
}

int coli_moe_ffn(const coli_model *m, coli_state *s, coli_expert_store *st, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_expert, K = hp->n_expert_used, D = hp->n_embd;
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

    if ((rc = run_experts(m, s, st, il, n))) return rc;
    for (int p = 0; p < n * K; p++) { /* expert output times its routing weight (ggml_mul) */
        const int i = p / K, k = p % K;
        const float w = s->route_w[((size_t)i * hp->n_layer + il) * K + k];
        float *dst = s->eo + (size_t)p * D;
        const float *src = s->yg + (size_t)s->slot_of_pair[p] * D;
        for (int d = 0; d < D; d++) dst[d] = src[d] * w;
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
        if ((rc = coli_state_matmul(s, &L->gate_shexp, s->xn, n, s->hg))) return rc;
        if ((rc = coli_state_matmul(s, &L->up_shexp, s->xn, n, s->hg2))) return rc;
        for (int i = 0; i < n; i++) coli_swiglu(s->hg + (size_t)i * FS, s->hg2 + (size_t)i * FS, FS);
        if ((rc = coli_state_matmul(s, &L->down_shexp, s->hg, n, s->yg))) return rc;
        if (L->gate_inp_shexp.n_in) { /* qwen3next: times sigmoid(ffn_gate_inp_shexp . x), one per row */
            float *g = s->router; /* free: the routing is done */
            if ((rc = coli_state_matmul(s, &L->gate_inp_shexp, s->xn, n, g))) return rc;
            coli_sigmoid(g, n);
            for (int i = 0; i < n; i++)
                for (int d = 0; d < D; d++) s->yg[(size_t)i * D + d] *= g[i];
        }
        for (size_t j = 0; j < (size_t)n * D; j++) s->tmp[j] += s->yg[j];
    }
    return 0;
}
