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
} score_job;

/* Rows ith, ith + nth, ...: the scores of their visible cells, then the top k. */
static void score_worker(void *ctx, int ith, int nth) {
    const score_job *J = ctx;
    const coli_hparams *hp = &J->m->hp;
    const coli_layer *L = &J->m->layers[J->il];
    coli_state *s = J->s;
    const int D = hp->idx_head_dim, H = hp->idx_n_head, K = hp->idx_top_k;
    float *sc = s->idx_scratch + (size_t)ith * coli_indexer_scratch_floats(hp, s->n_ctx);
    float *kf = sc + coli_indexer_scratch_floats(hp, s->n_ctx) - 64 - D - H, *qk = kf + D;
    const coli_type_kernels *f32 = &coli_kernels()->type[GGML_TYPE_F32];
    const coli_to_float_fn to_f32 = coli_kernels()->type[GGML_TYPE_F16].to_float;
    for (int i = ith; i < J->n; i += nth) {
        const coli_kv *kv = s->rows[i].kv;
        const int p = s->rows[i].pos;
        const coli_half *kc = kv->ik + (size_t)L->idx_slot * kv->n_ctx * D;
        const float *q = s->idx_q + (size_t)i * H * D, *w = s->idx_w + (size_t)i * H;
        if (p + 1 <= K) { /* every visible cell */
            s->idx_n_sel[i] = p + 1;
            continue;
        }
        for (int c = 0; c <= p; c++) {
            to_f32(kc + (size_t)c * D, kf, D);
            for (int h0 = 0; h0 < H; h0 += COLI_MAX_NR) {
                const int nr = H - h0 < COLI_MAX_NR ? H - h0 : COLI_MAX_NR;
                f32->vec_dot(D, kf, q + (size_t)h0 * D, (size_t)D * sizeof(float), qk + h0, 1, nr);
            }
            float score = 0.0f;
            for (int h = 0; h < H; h++) score = fmaf(qk[h] > 0.0f ? qk[h] : 0.0f, w[h], score);
            sc[c] = score;
        }
        heap_select(s->idx_sel + (size_t)i * K, K, p + 1, sc);
        s->idx_n_sel[i] = K;
    }
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
    score_job job = {m, s, il, n};
    coli_pool_run(s->pool, score_worker, &job);
    return 0;
}
