/* indexer.c — DeepSeek sparse attention's lightning indexer as llama.cpp
 * computes it (src/models/deepseek32.cpp and glm-dsa.cpp, the graph its CPU
 * backend runs with the default cparams.fused_lid = true, flash attention or not):
 *
 *   q   = indexer.attn_q_b(normed q LoRA), per head RoPE on its first n_rot dims
 *         (layout [rope | nope]; NEOX for deepseek32, NORM for glm-dsa);
 *   k   = layer norm with bias of indexer.attn_k(x), the same RoPE, one head;
 *   q, k rotated by the Walsh-Hadamard matrix (self_k_rot_lid, always on for
 *         these archs): a plain F32 mul_mat, so q (n_head rows a token) takes
 *         tinyBLAS and k (one row) ggml_vec_dot_f32;
 *   k   cached as f16 (the indexer cache has llama.cpp's type_k);
 *   w   = indexer.proj(x) * 1/sqrt(head_dim * n_head);
 *   score(c) = sum_h relu(q_h . k_c) w_h: ggml_lightning_indexer, each dot
 *         ggml_vec_dot_f32 on the key made f32, the sum an fma per head in
 *         head order (as GCC contracts it), then the causal mask;
 *   the top idx_top_k cells by ggml_top_k: std::partial_sort, whose ties
 *         libstdc++'s heap selection breaks (mirrored below, so the same cells).
 *
 * Every step is per row, so the selection does not depend on the batch: only
 * the three projections take the batch arithmetic (rows_mode). */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "ggml_types.h"
#include "indexer.h"
#include "kernels.h"
#include "matmul.h"
#include "ops.h"

size_t coli_indexer_scratch_floats(const coli_hparams *hp, int n_ctx) {
    const size_t D = (size_t)hp->idx_head_dim, H = (size_t)hp->idx_n_head;
    const size_t scores = (size_t)n_ctx > H * D ? (size_t)n_ctx : H * D; /* or the rotation's output */
    return scores + D + H + 64;
}

/* x (rows vectors of D) = rot . x, each output one kernel dot of a rotation row. */
static void rotate(const float *rot, int D, float *x, int rows, coli_vec_dot_fn dot, float *tmp) {
    for (int j = 0; j < D; j++)
        for (int r0 = 0; r0 < rows; r0 += COLI_MAX_NR) {
            const int nr = rows - r0 < COLI_MAX_NR ? rows - r0 : COLI_MAX_NR;
            dot(D, rot + (size_t)j * D, x + (size_t)r0 * D, (size_t)D * sizeof(float), tmp + (size_t)r0 * D + j,
                (size_t)D, nr);
        }
    memcpy(x, tmp, (size_t)rows * D * sizeof(float));
}

/* libstdc++'s __adjust_heap then __push_heap, with ggml_top_k's comparison
 * (score[a] > score[b]): the heap's top is its lowest score. */
static void adjust_heap(int32_t *heap, long hole, long len, int32_t value, const float *sc) {
    const long top = hole;
    long child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (sc[heap[child]] > sc[heap[child - 1]]) child--;
        heap[hole] = heap[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        heap[hole] = heap[child - 1];
        hole = child - 1;
    }
    long parent = (hole - 1) / 2;
    while (hole > top && sc[heap[parent]] > sc[value]) {
        heap[hole] = heap[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    heap[hole] = value;
}

/* std::partial_sort(idx, idx + k, idx + n)'s __heap_select over cells 0..n-1:
 * the k cells it keeps (in heap order; the order does not matter). */
static void heap_select(int32_t *heap, int k, int n, const float *sc) {
    for (int i = 0; i < k; i++) heap[i] = i;
    if (k >= 2)
        for (long parent = (k - 2) / 2;; parent--) {
            adjust_heap(heap, parent, k, heap[parent], sc);
            if (parent == 0) break;
        }
    for (int i = k; i < n; i++)
        if (sc[i] > sc[heap[0]]) adjust_heap(heap, 0, k, i, sc);
}

typedef struct {
    const coli_model *m;
    coli_state *s;
    int il, n;
    int cells_per_item, items_per_row; /* score_cells_worker: a row's cells in items of this many */
    atomic_int next;                   /* score_cells_worker: the next item to claim */
} score_job;

/* A thread's scratch: the scores of a row's cells, then a key made f32 and its H dots (key_of). */
static float *scratch_of(const coli_state *s, const coli_hparams *hp, int slot) {
    return s->idx_scratch + (size_t)slot * coli_indexer_scratch_floats(hp, s->n_ctx);
}

static float *key_of(const coli_state *s, const coli_hparams *hp, int slot) {
    return scratch_of(s, hp, slot + 1) - 64 - hp->idx_head_dim - hp->idx_n_head;
}

/* sc[c] for cells [c0, c1) of row i: sum_h relu(q_h . k_c) w_h (kf, qk: this thread's). */
static void score_cells(const score_job *J, int i, int c0, int c1, float *sc, float *kf, float *qk) {
    const coli_hparams *hp = &J->m->hp;
    const coli_state *s = J->s;
    const int D = hp->idx_head_dim, H = hp->idx_n_head;
    const coli_kv *kv = s->rows[i].kv;
    const coli_half *kc = kv->ik + (size_t)J->m->layers[J->il].idx_slot * kv->n_ctx * D;
    const float *q = s->idx_q + (size_t)i * H * D, *w = s->idx_w + (size_t)i * H;
    const coli_type_kernels *f32 = &coli_kernels()->type[GGML_TYPE_F32];
    const coli_to_float_fn to_f32 = coli_kernels()->type[GGML_TYPE_F16].to_float;
    for (int c = c0; c < c1; c++) {
        to_f32(kc + (size_t)c * D, kf, D);
        for (int h0 = 0; h0 < H; h0 += COLI_MAX_NR) {
            const int nr = H - h0 < COLI_MAX_NR ? H - h0 : COLI_MAX_NR;
            f32->vec_dot(D, kf, q + (size_t)h0 * D, (size_t)D * sizeof(float), qk + h0, 1, nr);
        }
        float score = 0.0f;
        for (int h = 0; h < H; h++) score = fmaf(qk[h] > 0.0f ? qk[h] : 0.0f, w[h], score);
        sc[c] = score;
    }
}

/* Row i's selection from its scores sc (or every visible cell when they are no more than k). */
static void select_row(const score_job *J, int i, const float *sc) {
    const int K = J->m->hp.idx_top_k, p = J->s->rows[i].pos;
    if (p + 1 <= K) {
        J->s->idx_n_sel[i] = p + 1;
        return;
    }
    heap_select(J->s->idx_sel + (size_t)i * K, K, p + 1, sc);
    J->s->idx_n_sel[i] = K;
}

/* Rows ith, ith + nth, ...: the scores of their visible cells, then the top k. */
static void score_worker(void *ctx, int ith, int nth) {
    const score_job *J = ctx;
    const coli_hparams *hp = &J->m->hp;
    float *sc = scratch_of(J->s, hp, ith), *kf = key_of(J->s, hp, ith);
    for (int i = ith; i < J->n; i += nth) {
        const int p = J->s->rows[i].pos;
        if (p + 1 > hp->idx_top_k) score_cells(J, i, 0, p + 1, sc, kf, kf + hp->idx_head_dim);
        select_row(J, i, sc);
    }
}

/* Fewer rows than threads (decode): each row's cells shared out in items, row i's scores
 * in scratch slot i, each thread's key and dots in its own slot's tail; the selection after. */
static void score_cells_worker(void *ctx, int ith, int nth) {
    score_job *J = ctx;
    const coli_hparams *hp = &J->m->hp;
    (void)nth;
    float *kf = key_of(J->s, hp, ith);
    for (int it; (it = atomic_fetch_add_explicit(&J->next, 1, memory_order_relaxed)) < J->n * J->items_per_row;) {
        const int i = it / J->items_per_row, cells = J->s->rows[i].pos + 1;
        const int c0 = it % J->items_per_row * J->cells_per_item;
        const int c1 = c0 + J->cells_per_item < cells ? c0 + J->cells_per_item : cells;
        if (cells > hp->idx_top_k && c0 < c1)
            score_cells(J, i, c0, c1, scratch_of(J->s, hp, i), kf, kf + hp->idx_head_dim);
    }
}

/* Cells an item: ~8 items a thread, 16 to 1024 cells (1024: ~17 MFLOP at DeepSeek V3.2's 64 heads of 128). */
static int score_cells_per_item(int cells, int nth) {
    const int c = (cells / (8 * nth) + 15) & ~15;
    return c < 16 ? 16 : c > 1024 ? 1024 : c;
}

int coli_indexer(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int D = hp->idx_head_dim, H = hp->idx_n_head;
    int rc;
    if ((rc = coli_state_matmul(s, &L->idx_wq_b, s->mla_qa, n, s->idx_q))) return rc;
    if ((rc = coli_state_matmul(s, &L->idx_wk, s->xn, n, s->idx_k))) return rc;
    if ((rc = coli_state_matmul(s, &L->idx_proj, s->xn, n, s->idx_w))) return rc;
    coli_rope_params rope = L->rope;
    rope.type = hp->idx_rope_type;
    const coli_type_kernels *f32 = &coli_kernels()->type[GGML_TYPE_F32];
    /* mul_mat(rot, q) is one tinyBLAS call per token of n_head rows (where its shapes allow) */
    const coli_vec_dot_fn q_dot = coli_mm_rows(f32, D, D, H) == H ? f32->vec_dot_mm : f32->vec_dot;
    const float w_scale = 1.0f / sqrtf((float)(D * H)); /* prescaled weights, not scores */
    float *tmp = s->idx_scratch;
    for (int i = 0; i < n; i++) {
        const int pos = s->rows[i].pos;
        float *q = s->idx_q + (size_t)i * H * D, *k = s->idx_k + (size_t)i * D, *w = s->idx_w + (size_t)i * H;
        coli_rope(q, H, D, hp->n_rot, pos, &rope);
        coli_layernorm(k, k, L->idx_k_norm, L->idx_k_norm_b, D, hp->idx_norm_eps);
        coli_rope(k, 1, D, hp->n_rot, pos, &rope);
        rotate(m->idx_rot, D, q, H, q_dot, tmp);
        rotate(m->idx_rot, D, k, 1, f32->vec_dot, tmp);
        const coli_kv *kv = s->rows[i].kv;
        coli_half *dst = kv->ik + ((size_t)L->idx_slot * kv->n_ctx + (size_t)pos) * D;
        for (int d = 0; d < D; d++) dst[d] = coli_fp32_to_fp16(k[d]);
        for (int h = 0; h < H; h++) w[h] *= w_scale;
    }
    score_job job = {m, s, il, n, 0, 0, 0};
    const int nth = coli_pool_size(s->pool);
    if (n >= nth) { /* a batch: a row a thread */
        coli_pool_run(s->pool, score_worker, &job);
        return 0;
    }
    int max_cells = 0;
    for (int i = 0; i < n; i++)
        if (s->rows[i].pos + 1 > max_cells) max_cells = s->rows[i].pos + 1;
    job.cells_per_item = score_cells_per_item(max_cells, nth);
    job.items_per_row = (max_cells + job.cells_per_item - 1) / job.cells_per_item;
    atomic_init(&job.next, 0);
    coli_pool_run_shared(s->pool, score_cells_worker, &job);
    for (int i = 0; i < n; i++) select_row(&job, i, scratch_of(s, hp, i));
    return 0;
}
