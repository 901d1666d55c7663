/* attention.c — softmax(q.K^T) V for a batch of queries against one layer's
 * KV cache, computed the way llama.cpp's CPU backend does it without flash
 * attention, so that the bits match:
 *
 *   kq  = mul_mat(K, q): q rounded to f16; one query row (decode) is
 *         ggml_vec_dot_f16, a batch is llamafile's tinyBLAS (the F16 kernels'
 *         vec_dot / vec_dot_mm, quant.h);
 *   p   = soft_max_ext(kq * kq_scale, mask): masked cells are -inf; the cells
 *         go by chunks of 16 counted from cell 0 through ggml_v_expf, each
 *         chunk summed in float (the _mm512_reduce_add_ps tree), the chunk
 *         sums in double (coli_exp_sum_fn); p = e * (float)(1 / sum);
 *   kqv = mul_mat(V^T, p): p rounded to f16, the same kernels along the cells.
 *
 * llama.cpp runs the two products over its padded n_kv cells (a multiple of
 * 256); a masked cell adds an exact zero, so running from a multiple of 64
 * below the first visible cell to the next multiple of 64 past the last one
 * gives the same bits with less work.
 *
 * K is cached as [cells][n_head_kv * head_dim] f16, V transposed as
 * [n_head_kv * head_dim_v][cells] f16 (one row per value dimension), a layer's
 * cells holding positions from coli_kv_first() on: 0 for a full layer, the
 * window's start (a multiple of CHUNK) for a sliding-window layer, so each cell
 * keeps its offset in the chunks and a window gives the bits of a full cache. */
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "kernels.h"
#include "matmul.h"
#include "ggml_types.h"
#include "quant.h"

#define CHUNK 64 /* cell alignment: ggml_vec_dot_f16's step, a multiple of the softmax's 16 */

static int ceil_chunk(int x) { return (x + CHUNK - 1) / CHUNK * CHUNK; }

/* Cache blocking of one task: K rows per block of scores, V rows per block of
 * outputs (~150 KB of K for a 576-wide MLA row; 16 V rows of an 8k context
 * are 256 KB), sized for a 512 KB - 2 MB L2. */
#define KQ_CELLS 128
#define V_ROWS 16

/* A kv head's K rows lie a whole cached row apart, too far for the hardware
 * prefetcher: each cell's row is prefetched about this many bytes of rows
 * ahead (Zen 4 sat on every K load of decode's scores without it: 20% of a
 * MoE decode at 400 cells). */
#define KQ_PREFETCH_BYTES 4096
/* V rows are contiguous but short (a row of cells per value dimension): each
 * is prefetched this many rows ahead (the kernel's part of decode 2.46 -> 1.92
 * ms a token at 400 cells) */
#define V_PREFETCH 2

static inline void prefetch_bytes(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)p + o, 0, 3);
}

/* Query heads of one task: the kv group, or its largest divisor <= 16 (MLA's
 * one key head serves all 128 of DeepSeek V3's), which bounds the scratch. */
#define MAX_TASK_HEADS 16

static int group_heads(int group) {
    int per = group < MAX_TASK_HEADS ? group : MAX_TASK_HEADS;
    while (group % per) per--;
    return per;
}

static int task_heads(const coli_hparams *hp) { return group_heads(hp->n_head / hp->n_head_kv); }

/* The most query heads a task of any layer takes (gemma4's layers differ in key/value heads). */
static int max_task_heads(const coli_hparams *hp) {
    const int a = task_heads(hp);
    const int b = hp->n_head_kv_min > 0 ? group_heads(hp->n_head / hp->n_head_kv_min) : a;
    return a > b ? a : b;
}

size_t coli_attention_scratch_halves(const coli_hparams *hp, int n_ctx) {
    const size_t per = (size_t)max_task_heads(hp), cells = (size_t)ceil_chunk(n_ctx) + CHUNK;
    return per * (size_t)hp->head_dim + per * cells + cells + 64;
}

size_t coli_attention_scratch_floats(const coli_hparams *hp, int n_ctx) {
    const size_t per = (size_t)max_task_heads(hp);
    return per * ((size_t)ceil_chunk(n_ctx) + CHUNK) + per * (size_t)hp->head_dim + 16; /* scores, widened query */
}

typedef struct {
    const coli_model *m;
    coli_state *s;
    int il, i0, n;  /* rows i0 .. i0 + n - 1 */
    int heads_per_task;
    coli_vec_dot_fn kq_dot, kqv_dot;
    coli_vec_dot_nw_fn kq_dot2, kqv_dot2;  /* the same for two K / V rows at once, or NULL */
    coli_exp_sum_fn exp_sum;
    coli_from_float_fn to_f16;
    coli_pv_rows_fn pv_rows;  /* MLA: P.V straight from the latent rows of K (no transposed copy), or NULL */
    coli_pv_rows_f32a_fn pv_rows_w; /* the same with the probabilities widened (taken over pv_rows where the set has it) */
    coli_kq_rows_f32a_fn kq_rows;   /* decode's scores, up to COLI_PV_MAX_HEADS heads per K row read, or NULL */
    /* the kernels above take the query and the probabilities widened to f32 (kernel
     * table's f16_f32a: the same products, converted once instead of per K / V row) */
    int widened;
    coli_to_float_fn widen;
    atomic_int next;  /* the next task to claim: whichever threads turn up share them (coli_pool_run_shared) */
} attn_job;

/* Scores sc[c0..c1) of cells [lo, hi] (the rest masked) -> probabilities ph (f16).
 * sink (gpt-oss; NULL: none): a logit in the denominator only, as ggml's soft_max
 * with sinks: it raises the max, and its expf(sink - max) joins the double sum. */
static void softmax_f16(const attn_job *J, float *sc, coli_half *ph, int c0, int c1, int lo, int hi, float kq_scale,
                        const float *sink) {
    float max = -INFINITY;
    for (int c = lo; c <= hi; c++) {
        if (kq_scale != 1.0f) sc[c - c0] *= kq_scale;
        if (sc[c - c0] > max) max = sc[c - c0];
    }
    if (sink && *sink > max) max = *sink;
    for (int c = c0; c < lo; c++) sc[c - c0] = -INFINITY;
    for (int c = hi + 1; c < c1; c++) sc[c - c0] = -INFINITY;
    double sum = J->exp_sum(sc, c1 - c0, max);
    if (sink) sum += (double)expf(*sink - max);
    const float inv = (float)(1.0 / sum);
    for (int c = c0; c < c1; c++) sc[c - c0] *= inv;
    J->to_f16(sc, ph, c1 - c0);
}

/* One task: token i, kv head kvh, query heads h0 .. h0 + ng - 1 (all of one kv group). */
static void attn_task(const attn_job *J, int i, int kvh, int h0, int ng, coli_half *scratch_h, float *scratch_f) {
    const coli_hparams *hp = &J->m->hp;
    const coli_layer *L = &J->m->layers[J->il];
    coli_state *s = J->s;
    const coli_kv *kv = s->rows[i].kv;
    const int hd = hp->head_dim, hdv = hp->head_dim_v;
    const int k_dim = (int)kv->k_dim; /* a cached K row (gemma4: the widest layer's; this layer's heads lead it) */
    const int p = s->rows[i].pos;
    const int lo = (L->is_swa && p - hp->n_swa + 1 > 0) ? p - hp->n_swa + 1 : 0;
    const int c0 = lo / CHUNK * CHUNK, c1 = ceil_chunk(p + 1), len = c1 - c0;
    const size_t cstride = (size_t)ceil_chunk(s->n_ctx) + CHUNK;  /* per head in sc / ph */
    coli_half *qh = scratch_h, *ph = qh + (size_t)ng * hd, *vstage = ph + (size_t)ng * cstride;
    float *sc = scratch_f;
    /* a sliding-window layer's cache holds positions first.. (a multiple of CHUNK, so c0 - first is too):
     * cell c - first of K and V is position c */
    const coli_kv_layer *KL = &kv->layer[L->kv_slot];
    const int first = coli_kv_first(kv, L->kv_slot);
    const coli_half *kc = KL->k + (size_t)kvh * hd - (ptrdiff_t)first * k_dim; /* read at cells c >= lo >= first */
    /* V rows: the cache's, or for MLA the latent transposed out of K (mla_values) */
    const coli_half *vc = hp->mla ? s->vt_of_row[i] : KL->v + (size_t)kvh * hdv * KL->cells;
    /* DSA: fewer cells chosen than visible, so only those (s->idx_sel of row i) */
    const int n_sel = hp->dsa ? s->idx_n_sel[i] : 0;
    const int32_t *sel = hp->dsa && n_sel < p + 1 - lo ? s->idx_sel + (size_t)i * hp->idx_top_k : NULL;
    const int v_cells = hp->mla ? s->vt_cells : KL->cells; /* a V row's length */
    const int v0 = c0 - first, v1 = c1 - first;            /* the cells' span in a V row */
    /* kq for the visible cells, all heads of the task per K row */
    J->to_f16(s->q + ((size_t)i * hp->n_head + h0) * hd, qh, (int64_t)ng * hd); /* the task's heads are adjacent */
    const void *qa = qh; /* the query as the kernels take it */
    size_t qstride = (size_t)hd * sizeof(coli_half);
    if (J->widened) {
        float *qf = sc + (size_t)ng * cstride; /* past the scores */
        J->widen(qh, qf, (int64_t)ng * hd);
        qa = qf;
        qstride = (size_t)hd * sizeof(float);
    }
    if (sel) { /* DSA: the indexer's cells only, the rest masked as llama.cpp's top-k mask does */
        for (int g0 = 0; g0 < ng; g0 += COLI_MAX_NR) {
            const int nr = ng - g0 < COLI_MAX_NR ? ng - g0 : COLI_MAX_NR;
            const void *qg = (const char *)qa + (size_t)g0 * qstride;
            float *sg = sc + (size_t)g0 * cstride;
            for (int g = 0; g < nr; g++)
                for (int c = c0; c < c1; c++) sg[(size_t)g * cstride + (c - c0)] = -INFINITY;
            for (int j = 0; j < n_sel; j++)
                J->kq_dot(hd, kc + (size_t)sel[j] * k_dim, qg, qstride, sg + (sel[j] - c0), cstride, nr);
        }
    }
    /* the kernels take at most COLI_MAX_NR query rows a call: heads go in runs
     * of that many, over blocks of cells small enough that a block's K rows
     * stay in cache for every run (each score is its own dot: the same bits) */
    for (int b0 = lo; !sel && b0 <= p; b0 += KQ_CELLS) {
        const int b1 = b0 + KQ_CELLS - 1 < p ? b0 + KQ_CELLS - 1 : p;
        for (int g0 = 0; J->kq_rows && g0 < ng; g0 += COLI_PV_MAX_HEADS)
            J->kq_rows(hd, kc + (size_t)b0 * k_dim, (size_t)k_dim, b1 - b0 + 1, (const float *)qa + (size_t)g0 * hd, (size_t)hd,
                       sc + (size_t)g0 * cstride + (b0 - c0), cstride, ng - g0 < COLI_PV_MAX_HEADS ? ng - g0 : COLI_PV_MAX_HEADS);
        for (int g0 = 0; !J->kq_rows && g0 < ng; g0 += COLI_MAX_NR) {
            const int nr = ng - g0 < COLI_MAX_NR ? ng - g0 : COLI_MAX_NR;
            const void *qg = (const char *)qa + (size_t)g0 * qstride;
            float *sg = sc + (size_t)g0 * cstride;
            const size_t k_bytes = (size_t)hd * sizeof(coli_half);
            const int ahead = k_bytes >= KQ_PREFETCH_BYTES / 4 ? 4 : (int)(KQ_PREFETCH_BYTES / k_bytes);
            int c = b0;
            if (J->kq_dot2)
                for (; c + 1 <= b1; c += 2) {
                    if (g0 == 0 && c + ahead + 1 <= p) {
                        prefetch_bytes(kc + (size_t)(c + ahead) * k_dim, k_bytes);
                        prefetch_bytes(kc + (size_t)(c + ahead + 1) * k_dim, k_bytes);
                    }
                    J->kq_dot2(hd, kc + (size_t)c * k_dim, (size_t)k_dim * sizeof(coli_half), qg, qstride,
                               sg + (c - c0), cstride, nr);
                }
            for (; c <= b1; c++) {
                if (g0 == 0 && c + ahead <= p) prefetch_bytes(kc + (size_t)(c + ahead) * k_dim, k_bytes);
                J->kq_dot(hd, kc + (size_t)c * k_dim, qg, qstride, sg + (c - c0), cstride, nr);
            }
        }
    }
    for (int g = 0; g < ng; g++)
        softmax_f16(J, sc + (size_t)g * cstride, ph + (size_t)g * cstride, c0, c1, lo, p, hp->kq_scale,
                    L->attn_sinks ? L->attn_sinks + h0 + g : NULL);
    /* kqv: one V row (value dimension) against the probabilities of every head */
    float *out = s->att + ((size_t)i * hp->n_head + h0) * hdv;
    size_t ph_stride = cstride * sizeof(coli_half);
    if (J->pv_rows_w) { /* the latent rows of K, read in place once per COLI_PV_MAX_HEADS heads */
        for (int g = 0; g < ng; g++) J->widen(ph + (size_t)g * cstride, sc + (size_t)g * cstride, len);
        for (int g0 = 0; g0 < ng; g0 += COLI_PV_MAX_HEADS)
            J->pv_rows_w(len, kc + (size_t)c0 * k_dim, (size_t)k_dim, hdv, sc + (size_t)g0 * cstride, cstride,
                         out + (size_t)g0 * hdv, (size_t)hdv, ng - g0 < COLI_PV_MAX_HEADS ? ng - g0 : COLI_PV_MAX_HEADS);
        return;
    }
    if (J->pv_rows) { /* the latent rows of K, read in place, the bits of the loop below */
        for (int g0 = 0; g0 < ng; g0 += COLI_MAX_NR) {
            const int nr = ng - g0 < COLI_MAX_NR ? ng - g0 : COLI_MAX_NR;
            J->pv_rows(len, kc + (size_t)c0 * k_dim, (size_t)k_dim, hdv, ph + (size_t)g0 * cstride, cstride,
                       out + (size_t)g0 * hdv, (size_t)hdv, nr);
        }
        return;
    }
    const char *pa = (const char *)ph; /* the probabilities as the kernels take them */
    if (J->widened) { /* the scores are spent: the f16 probabilities widened into their place */
        for (int g = 0; g < ng; g++) J->widen(ph + (size_t)g * cstride, sc + (size_t)g * cstride, len);
        pa = (const char *)sc;
        ph_stride = cstride * sizeof(float);
    }
    /* a long row's start only: the hardware prefetcher follows the rest */
    const size_t v_head_bytes = len * sizeof(coli_half) < 2048 ? (size_t)len * sizeof(coli_half) : 2048;
    /* likewise value rows in blocks, each block's rows read from memory once for every run of heads */
    for (int d0 = 0; d0 < hdv; d0 += V_ROWS) {
        const int d1 = d0 + V_ROWS < hdv ? d0 + V_ROWS : hdv;
        for (int g0 = 0; g0 < ng; g0 += COLI_MAX_NR) {
            const int nr = ng - g0 < COLI_MAX_NR ? ng - g0 : COLI_MAX_NR;
            const void *pg = pa + (size_t)g0 * ph_stride;
            float *og = out + (size_t)g0 * hdv;
            int d = d0;
            if (J->kqv_dot2 && v1 <= v_cells)
                for (; d + 1 < d1; d += 2)
                    J->kqv_dot2(len, vc + (size_t)d * v_cells + v0, (size_t)v_cells * sizeof(coli_half), pg, ph_stride,
                                og + d, (size_t)hdv, nr);
            for (; d < d1; d++) {
                if (g0 == 0 && d + V_PREFETCH < hdv && v1 <= v_cells)
                    prefetch_bytes(vc + (size_t)(d + V_PREFETCH) * v_cells + v0, v_head_bytes);
                const coli_half *vrow = vc + (size_t)d * v_cells + v0;
                if (v1 > v_cells) {  /* the last chunk runs past the cache: zero-padded copy */
                    memcpy(vstage, vrow, (size_t)(v_cells - v0) * sizeof(coli_half));
                    memset(vstage + (v_cells - v0), 0, (size_t)(v1 - v_cells) * sizeof(coli_half));
                    vrow = vstage;
                }
                J->kqv_dot(len, vrow, pg, ph_stride, og + d, (size_t)hdv, nr);
            }
        }
    }
}

static void attn_worker(void *ctx, int ith, int nth) {
    attn_job *J = ctx;
    (void)nth;
    const coli_hparams *hp = &J->m->hp;
    coli_state *s = J->s;
    coli_half *sh = s->att_scratch + (size_t)ith * coli_attention_scratch_halves(hp, s->n_ctx);
    float *sf = s->att_scores + (size_t)ith * coli_attention_scratch_floats(hp, s->n_ctx);
    const int group = hp->n_head / hp->n_head_kv, per = J->heads_per_task, parts = group / per;
    const int tasks = J->n * hp->n_head_kv * parts;
    for (int t; (t = atomic_fetch_add_explicit(&J->next, 1, memory_order_relaxed)) < tasks;) {
        const int i = J->i0 + t / (hp->n_head_kv * parts), kvh = (t / parts) % hp->n_head_kv, part = t % parts;
        attn_task(J, i, kvh, kvh * group + part * per, per, sh, sf);
    }
}

/* ---- MLA's values: the first kv_lora_rank values of each cached K row ----
 * llama.cpp reads V as a view of K and makes it contiguous transposed
 * (ggml_cont of the transpose) before P.V; the same copy here, per sequence
 * of the batch, so P.V runs on the kernels and cells as for any V cache. */

typedef struct {
    const coli_kv *kv[16];
    int cells[16];  /* cells to copy: up to the chunk past the sequence's last row */
    int n_seq, il, R;
    coli_half *vt;
    int vt_cells;
} vt_job;

#define VT_TILE 64

static void vt_worker(void *ctx, int ith, int nth) {
    const vt_job *J = ctx;
    const int d_tiles = (J->R + VT_TILE - 1) / VT_TILE;
    coli_half tile[VT_TILE][VT_TILE]; /* [cell][dim]: rows read whole, columns written whole */
    for (int t = ith; t < J->n_seq * d_tiles; t += nth) {
        const int r = t / d_tiles, d0 = (t % d_tiles) * VT_TILE, nd = d0 + VT_TILE < J->R ? VT_TILE : J->R - d0;
        const coli_kv *kv = J->kv[r];
        const coli_half *k = kv->layer[J->il].k + d0;
        coli_half *out = J->vt + (size_t)r * J->R * J->vt_cells + (size_t)d0 * J->vt_cells;
        for (int c0 = 0; c0 < J->cells[r]; c0 += VT_TILE) {
            const int nc = c0 + VT_TILE < J->cells[r] ? VT_TILE : J->cells[r] - c0;
            for (int c = 0; c < nc; c++) memcpy(tile[c], k + (size_t)(c0 + c) * kv->k_dim, (size_t)nd * sizeof(coli_half));
            for (int d = 0; d < nd; d++) {
                coli_half *o = out + (size_t)d * J->vt_cells + c0;
                for (int c = 0; c < nc; c++) o[c] = tile[c][d];
            }
        }
    }
}

/* Rows [i0, i1) take at most s->vt_seqs sequences (rows of one sequence are
 * consecutive): copy their values out and point each row at its copy. */
static int mla_values(coli_state *s, int il, int i0, int n, int R) {
    vt_job J = {.il = il, .R = R, .vt = s->vt, .vt_cells = s->vt_cells};
    int i = i0;
    while (i < n && J.n_seq < s->vt_seqs) {
        const coli_kv *kv = s->rows[i].kv;
        int last = s->rows[i].pos;
        for (; i < n && s->rows[i].kv == kv; i++) {
            if (s->rows[i].pos > last) last = s->rows[i].pos;
            s->vt_of_row[i] = s->vt + (size_t)J.n_seq * R * s->vt_cells;
        }
        const int cells = ceil_chunk(last + 1);
        J.kv[J.n_seq] = kv;
        J.cells[J.n_seq++] = cells < kv->n_ctx ? cells : kv->n_ctx;
    }
    coli_pool_run(s->pool, vt_worker, &J);
    return i;
}

void coli_attention(const coli_model *m, coli_state *s, int il, int n) {
    coli_model ml;
    if (m->layers[il].hd) { /* gemma4: this layer's head size and key/value heads */
        ml = *m;
        ml.hp.head_dim = ml.hp.head_dim_v = m->layers[il].hd;
        ml.hp.n_head_kv = m->layers[il].n_kv_head;
        m = &ml;
    }
    const coli_hparams *hp = &m->hp;
    const coli_kernel_table *t = coli_kernels();
    const coli_type_kernels *k = &t->type[GGML_TYPE_F16];
    attn_job job = {m, s, il, 0, n, task_heads(hp), k->vec_dot, k->vec_dot, k->vec_dot_2w, k->vec_dot_2w, t->exp_sum,
                    t->type[GGML_TYPE_F16].from_float, NULL, NULL, NULL, 0, NULL, 0};
    /* llama.cpp's n_kv is a multiple of 256 cells; a batch of queries goes
     * through tinyBLAS, rows alone as a batch of one, uniform rows as in a
     * batch large enough for it whatever their number */
    const int as_batch = s->rows_mode == COLI_ROWS_ALONE ? 1 : s->rows_mode == COLI_ROWS_UNIFORM ? 256 : n;
    if (coli_mm_rows(k, hp->head_dim, 256, as_batch) == as_batch) {
        job.kq_dot = k->vec_dot_mm;
        job.kq_dot2 = k->vec_dot_mm_2w;
    }
    if (coli_mm_rows(k, 256, hp->head_dim_v, as_batch) == as_batch) {
        job.kqv_dot = k->vec_dot_mm;
        job.kqv_dot2 = k->vec_dot_mm_2w;
    }
    /* too few (token, kv head) pairs to keep the threads busy: split each group
     * over the threads, in runs as long as still keep them busy (each K and V
     * row read once per run of heads, not once per head) */
    const int nth = coli_pool_size(s->pool), tasks = n * hp->n_head_kv;
    if (tasks < nth) {
        const int group = hp->n_head / hp->n_head_kv;
        int per = group * tasks / nth;
        if (per > job.heads_per_task) per = job.heads_per_task;
        if (per < 1) per = 1;
        while (group % per) per--;
        job.heads_per_task = per;
    }
    /* MLA with the one-row P.V (decode): read the latent in place when every
     * row's last chunk of cells lies inside its cache */
    int in_place = hp->mla && (t->pv_rows_f32a || t->pv_rows_f16) && job.kqv_dot == k->vec_dot && hp->head_dim_v % 16 == 0;
    for (int i = 0; i < n && in_place; i++)
        if (ceil_chunk(s->rows[i].pos + 1) > s->rows[i].kv->n_ctx) in_place = 0;
    const coli_type_kernels *w = &t->f16_f32a;
    if (in_place && t->pv_rows_f32a && w->vec_dot)
        job.pv_rows_w = t->pv_rows_f32a;
    else if (in_place && t->pv_rows_f16)
        job.pv_rows = t->pv_rows_f16;
    /* the widened twins of the kernels chosen above, where the set has them (not with the f16 pv_rows) */
    if (w->vec_dot && !job.pv_rows) {
        job.kq_dot = job.kq_dot == k->vec_dot_mm ? w->vec_dot_mm : w->vec_dot;
        job.kq_dot2 = job.kq_dot2 && job.kq_dot2 == k->vec_dot_mm_2w ? w->vec_dot_mm_2w : NULL;
        job.kqv_dot = job.kqv_dot == k->vec_dot_mm ? w->vec_dot_mm : w->vec_dot;
        job.kqv_dot2 = job.kqv_dot2 && job.kqv_dot2 == k->vec_dot_mm_2w ? w->vec_dot_mm_2w : NULL;
        job.widened = 1;
        job.widen = w->to_float;
        /* one-row scores (decode): the set's many-head kernel where it has one */
        if (job.kq_dot == w->vec_dot && t->kq_rows_f32a && hp->head_dim % 32 == 0) job.kq_rows = t->kq_rows_f32a;
    }
    if (!hp->mla || job.pv_rows || job.pv_rows_w) {
        atomic_init(&job.next, 0);
        coli_pool_run_shared(s->pool, attn_worker, &job);
        return;
    }
    for (int i0 = 0; i0 < n;) {
        const int i1 = mla_values(s, il, i0, n, hp->head_dim_v);
        job.i0 = i0;
        job.n = i1 - i0;
        atomic_init(&job.next, 0);
        coli_pool_run_shared(s->pool, attn_worker, &job);
        i0 = i1;
    }
}
