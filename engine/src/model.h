/* model.h — a transformer as the engine runs it: hyper-parameters (read once),
 * weights (pointers into the GGUF mapping, never owned, except small norm
 * vectors copied to f32), and the forward pass over a batch of tokens.
 *
 * Shapes use GGUF order: a matrix W with ne = [n_in, n_out] holds n_out rows
 * of n_in elements; y = W x computes one dot product per row. */
#ifndef COLI_MODEL_H
#define COLI_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "fp16.h"
#include "gguf.h"
#include "threadpool.h"

typedef enum { COLI_ROPE_NORM = 0, COLI_ROPE_NEOX = 2 } coli_rope_type; /* adjacent pairs / two halves */
typedef enum { COLI_ACT_SILU, COLI_ACT_GELU, COLI_ACT_SWIGLU_OAI } coli_act; /* SWIGLU_OAI: gpt-oss's clamped SwiGLU */

/* One layer's RoPE, as ggml_rope_ext's arguments. */
typedef struct {
    float base;        /* theta_i = pos * base^(-2i / n_rot) */
    float freq_scale;  /* 1 / linear scaling factor */
    float ext_factor;  /* YaRN's extrapolation mix, 0: none */
    float attn_factor; /* cos and sin are scaled by this (YaRN's mscale; 1 otherwise) */
    float corr[2];     /* YaRN's correction dims */
    coli_rope_type type;
    const float *freq_factors; /* (n_rot / 2) pair i's angle is divided by [i] (gemma4's rope_freqs), or NULL */
} coli_rope_params;

typedef struct {
    const void *data; /* in the mapping */
    uint32_t type;    /* ggml type */
    int64_t n_in;     /* ne[0]: row length */
    int64_t n_out;    /* ne[1]: rows */
    int mm_flags;     /* or'ed into the rows mode of its matmuls: COLI_ROWS_R16 once repacked (matmul.h) */
} coli_mat;

/* One layer's routed experts as the file stores them: 3-D tensors
 * [n_in, n_out, n_expert], expert e's matrix at data + e * stride. Read
 * through experts.h, never directly, so the streaming store can take over. */
typedef struct {
    coli_mat gate, up, down; /* expert 0's matrices */
    size_t gate_stride, up_stride, down_stride; /* bytes from one expert to the next */
    uint64_t gate_off, up_off, down_off;        /* file offsets of expert 0's matrices (streaming reads) */
    bool gate_up_fused; /* one ffn_gate_up_exps (gemma4): gate is its 2 * n_ff_exp rows (gate rows, then up rows),
                         * up a copy of gate's view with up_stride 0 (nothing of its own to read) */
} coli_layer_experts;

/* SOFTMAX_WEIGHT (gpt-oss): top-k on the raw router logits, then a softmax over the k chosen */
typedef enum { COLI_GATE_SOFTMAX, COLI_GATE_SIGMOID, COLI_GATE_SOFTMAX_WEIGHT } coli_gating;

#define COLI_MAX_EXPERT_USED 64 /* top-k per token, at most */

typedef struct {
    int n_layer;
    int n_embd;
    int n_head, n_head_kv;
    int head_dim;      /* key/query head size */
    int head_dim_v;    /* value head size */
    int n_ff;
    int n_vocab;
    int n_ctx_train;
    int n_rot;         /* rotated dims per head */
    float rms_eps;
    float rope_base;       /* global layers */
    float rope_base_swa;   /* sliding-window layers */
    float rope_scale;      /* 1 / linear scaling factor, global layers */
    int n_swa;             /* sliding window in tokens, 0: none */
    int swa_pattern;       /* layer il slides when il % pattern < pattern - 1; 0: none */
    bool swa_rope_global;  /* sliding-window layers rotate with the global layers' scaling and YaRN (gpt-oss) */
    bool attn_sinks;       /* a learned per-head logit joins each softmax's denominator (gpt-oss) */
    coli_act exp_act;      /* the routed experts' activation (act unless a family differs) */
    coli_rope_type rope_type;
    coli_act act;
    float embd_scale;      /* embeddings are multiplied by this (Gemma: sqrt(n_embd)) */
    float attn_scale;      /* queries are multiplied by this before Q.K (Gemma) */
    float kq_scale;        /* scores are multiplied by this inside the softmax (the rest) */
    bool qk_norm;          /* per-head RMS norm of q and k */
    bool post_norms;       /* RMS norm of the attention and FFN outputs (Gemma) */
    bool qk_norm_full;     /* q/k norms span all heads at once (OLMoE), not one head */
    bool qk_norm_optional; /* q/k norms only where the file has them (GLM-4.5) */
    bool ffn_norm_post_attn; /* the FFN's input norm is named post_attention_norm (GLM-4.5) */
    /* mixture of experts (n_expert == 0: dense) */
    int n_expert, n_expert_used;
    int n_ff_exp;          /* hidden size of one routed expert */
    int n_ff_shexp;        /* hidden size of the shared expert(s), 0: none */
    int n_layer_dense_lead; /* the first layers are dense (GLM-4.5) */
    coli_gating gating;
    bool expert_norm_w;    /* renormalise the top-k weights to sum to 1 */
    float expert_w_scale;  /* multiply the weights (0 or 1: no-op) */
    int n_expert_groups;   /* experts are chosen within the n_group_used best groups (DeepSeek V3); 0: no groups */
    int n_group_used;
    /* YaRN RoPE (rope.scaling.type yarn): ramp between interpolated and extrapolated angles */
    float yarn_ext_factor; /* 0: plain (linear) RoPE */
    float yarn_attn_factor; /* llama.cpp's cparams.yarn_attn_factor */
    float yarn_beta_fast, yarn_beta_slow; /* the ramp's ends, in rotations over n_ctx_orig_yarn */
    int n_ctx_orig_yarn;
    float rope_yarn_log_mul; /* deepseek2's mscale_all_dim: its scores are scaled by mscale^2 */
    /* multi-head latent attention (deepseek2): one compressed key/value head
     * of kv_lora_rank + n_rot values per token (head_dim; n_head_kv 1); the
     * queries absorb attn_k_b and the outputs attn_v_b, as llama.cpp's MLA does */
    bool mla;
    bool mla_fused;        /* instead: an older file's fused attn_kv_b, run as llama.cpp does, as MHA over
                            * decompressed heads (head_dim = nope + rot, full K and V cached) */
    int q_lora_rank;       /* 0: one query matrix (V2-Lite) */
    int kv_lora_rank;
    int head_dim_nope;     /* per-head query/key dims without RoPE */
    int head_dim_mla_v;    /* per-head value size after attn_v_b */
    /* DeepSeek sparse attention (deepseek32, glm-dsa): MLA whose queries see only the
     * idx_top_k cells a "lightning indexer" scores highest (src/models/deepseek32.cpp) */
    bool dsa;
    int idx_n_head;        /* indexer query heads */
    int idx_head_dim;      /* indexer head size: a power of two >= 64 (its Hadamard rotation) */
    int idx_top_k;         /* cells each query attends to, at most */
    coli_rope_type idx_rope_type; /* NEOX for deepseek32, NORM for glm-dsa (on the first n_rot dims) */
    float idx_norm_eps;    /* the indexer key's layer norm: 1e-6 (deepseek32), 0 (glm-dsa: never set) */
    int n_idx_layers;      /* layers with an indexer of their own ("full"): the indexer key cache's layers */
    /* the KV cache's row widths: n_head_kv * head sizes, or the latent for MLA (V read from K) */
    int kv_k_dim, kv_v_dim;
    /* Gated DeltaNet hybrids (qwen3next, qwen35moe: src/models/qwen3next.cpp, qwen35moe.cpp, delta-net-base.cpp):
     * linear-attention layers with a recurrent state per sequence between gated full-attention layers */
    bool gdn;
    bool attn_gated;       /* attn_q gives per head [query | gate]; the attention output is times sigmoid(gate) */
    bool gdn_k_modulo;     /* value head h reads key head h % n_k (qwen35moe's broadcast), else h / (n_v / n_k) */
    int ssm_d_conv;        /* the short causal conv's taps */
    int ssm_d_state;       /* key and value head size */
    int ssm_n_k, ssm_n_v;  /* key heads (ssm.group_count), value heads (ssm.time_step_rank) */
    int n_rs_layers;       /* linear layers: the recurrent state's layers */
    int n_kv_layers;       /* layers with a KV cache: n_layer, less the linear layers of a Gated DeltaNet model */
    int n_nextn;           /* multi-token-prediction (nextn) blocks the file has after the trunk's n_layer */
    /* Gemma 4 (gemma4: src/models/gemma4.cpp): head sizes, key/value heads and rotary dims per layer (coli_layer
     * hd, n_kv_head, n_rot; head_dim, head_dim_v and n_head_kv above are the largest, for buffers), layers past
     * n_kv_layers reusing the KV of an earlier one, a dense MLP beside the experts, final logit softcapping */
    bool gemma4;
    int n_head_kv_min;     /* the fewest key/value heads of a layer (attention's scratch), 0: n_head_kv */
    int head_dim_full, head_dim_swa; /* the global and sliding layers' head sizes (keys and values alike) */
    int n_rot_full, n_rot_swa;       /* ... and rotary dims */
    int n_kv_from_start;   /* layers below this have a KV cache of their own; the rest reuse the last sliding
                            * (n_kv_from_start - 2) or global (n_kv_from_start - 1) layer's, as llama.cpp's reuse */
    float final_softcap;   /* logits = tanh(logits / c) * c, 0: none */
    int n_embd_per_layer;  /* per-layer embeddings' width (E2B/E4B: embedding_length_per_layer_input), 0: none */
#define COLI_KV_SWA_BITS 512
    uint64_t kv_swa[COLI_KV_SWA_BITS / 64]; /* bit kv_slot: that cache layer slides (its cache is a window, coli_kv) */
} coli_hparams;

typedef struct {
    float *attn_norm;        /* (n_embd) */
    float *q_norm, *k_norm;  /* (head_dim), (n_head * head_dim) when qk_norm_full, or NULL */
    float *post_attn_norm;   /* (n_embd) or NULL */
    float *ffn_norm;         /* (n_embd) */
    float *post_ffn_norm;    /* (n_embd) or NULL */
    coli_mat wq;             /* n_embd -> n_head * head_dim */
    coli_mat wk;             /* n_embd -> n_head_kv * head_dim */
    coli_mat wv;             /* n_embd -> n_head_kv * head_dim_v */
    coli_mat wo;             /* n_head * head_dim_v -> n_embd */
    float *bq, *bk, *bv, *bo; /* attention biases (Qwen2) or NULL */
    coli_mat ffn_gate;       /* n_embd -> n_ff */
    coli_mat ffn_up;         /* n_embd -> n_ff */
    coli_mat ffn_down;       /* n_ff -> n_embd */
    /* routed FFN (is_moe): router, selection bias, experts, shared expert */
    bool is_moe;
    coli_mat ffn_gate_inp;   /* n_embd -> n_expert */
    float *exp_probs_b;      /* (n_expert) selection bias or NULL */
    float *ffn_gate_inp_b;   /* (n_expert) router logit bias or NULL (gpt-oss) */
    float *gate_exps_b, *up_exps_b; /* [n_expert][n_ff_exp] per-expert biases or NULL (gpt-oss), resident */
    float *down_exps_b;      /* [n_expert][n_embd] or NULL */
    float *attn_sinks;       /* (n_head) sink logits or NULL (gpt-oss) */
    coli_layer_experts exps;
    coli_mat gate_shexp, up_shexp, down_shexp; /* n_in == 0 when absent */
    bool is_swa;             /* sliding-window attention in this layer */
    coli_rope_params rope;
    /* MLA (hp.mla): wq is n_embd -> n_head * (nope + rot) when there is no q LoRA */
    coli_mat wq_a, wq_b;     /* n_embd -> q_lora_rank -> n_head * (nope + rot) */
    float *q_a_norm;         /* (q_lora_rank) */
    coli_mat wkv_a;          /* n_embd -> kv_lora_rank + n_rot: the latent and the shared RoPE key */
    float *kv_a_norm;        /* (kv_lora_rank) */
    coli_mat wk_b, wv_b;     /* head 0's: nope -> kv_lora_rank, kv_lora_rank -> head_dim_mla_v */
    coli_mat wkv_b;          /* mla_fused: kv_lora_rank -> n_head * (nope + head_dim_mla_v) */
    size_t wk_b_stride, wv_b_stride; /* bytes from one head's matrix to the next */
    /* DSA (hp.dsa): a "full" layer runs its indexer (idx_slot: its layer in the indexer
     * key cache); a "shared" one (idx_slot -1, glm-dsa) reuses the previous full layer's top-k */
    int idx_slot;
    coli_mat idx_wq_b;       /* q_lora_rank -> idx_n_head * idx_head_dim */
    coli_mat idx_wk;         /* n_embd -> idx_head_dim */
    coli_mat idx_proj;       /* n_embd -> idx_n_head: the per-head weights */
    float *idx_k_norm, *idx_k_norm_b; /* (idx_head_dim) layer norm weight and bias */
    int kv_slot;             /* the layer's layer in the KV cache (il, but for Gated DeltaNet models; -1: none) */
    /* Gated DeltaNet (hp.gdn): rs_slot >= 0 in a linear layer (its layer in the recurrent state), -1 in a full one */
    int rs_slot;
    coli_mat ssm_qkv;        /* n_embd -> 2 * n_k * S + n_v * S: q, k, v (or ssm_in: q k v z per key-head group) */
    coli_mat ssm_gate;       /* n_embd -> n_v * S: z, the output gate (n_in 0 with ssm_in) */
    coli_mat ssm_ba;         /* n_embd -> 2 * n_v: beta and alpha per key-head group (qwen3next) */
    coli_mat ssm_beta, ssm_alpha; /* n_embd -> n_v each (qwen35moe) */
    coli_mat ssm_out;        /* n_v * S -> n_embd */
    bool ssm_legacy_in;      /* ssm_qkv is an older file's ssm_in */
    float *ssm_conv1d;       /* [conv_dim][d_conv] */
    float *ssm_dt, *ssm_a;   /* (n_v) */
    float *ssm_norm;         /* (S) */
    coli_mat gate_inp_shexp; /* n_embd -> 1: the shared expert's sigmoid gate (n_in 0: ungated) */
    /* gemma4 (hp.gemma4): this layer's head size, key/value heads and rotary dims */
    int hd, n_kv_head, n_rot;
    int n_ff;                /* its dense MLP's width (feed_forward_length, one per layer in E2B/E4B's files) */
    bool kv_shared;          /* no K/V of its own: attends to the cache of layer kv_slot (n_layer_kv_from_start) */
    bool v_from_k;           /* no attn_v: the values are the keys before their norm (attention_k_eq_v) */
    float *gate_inp_s;       /* (n_embd) the router input's scale (ffn_gate_inp.scale) */
    float *down_exps_s;      /* (n_expert) each expert's output scale (ffn_down_exps.scale) or NULL */
    float *pre_ffn_norm_2, *post_ffn_norm_1, *post_ffn_norm_2; /* the experts' input norm, the MLP's and experts' output norms */
    float out_scale;         /* the layer's output times this (layer_output_scale; 1 without) */
    /* gemma4 per-layer embeddings (hp.n_embd_per_layer > 0) */
    coli_mat ple_gate;       /* n_embd -> n_embd_per_layer (inp_gate) */
    coli_mat ple_proj;       /* n_embd_per_layer -> n_embd (proj) */
    float *ple_post_norm;    /* (n_embd) post_norm */
} coli_layer;

/* The address of every matrix of layer L (n_in 0 when absent; the routed experts' are expert 0's
 * views): for whatever must visit them all (scratch sizing, the load's repack). */
#define COLI_LAYER_MATS(L)                                                                                    \
    &(L)->wq, &(L)->wk, &(L)->wv, &(L)->wo, &(L)->ffn_gate, &(L)->ffn_up, &(L)->ffn_down, &(L)->ffn_gate_inp, \
        &(L)->exps.gate, &(L)->exps.up, &(L)->exps.down, &(L)->gate_shexp, &(L)->up_shexp, &(L)->down_shexp,   \
        &(L)->wq_a, &(L)->wq_b, &(L)->wkv_a, &(L)->wk_b, &(L)->wv_b, &(L)->wkv_b, &(L)->idx_wq_b, &(L)->idx_wk, \
        &(L)->idx_proj, &(L)->ssm_qkv, &(L)->ssm_gate, &(L)->ssm_ba, &(L)->ssm_beta, &(L)->ssm_alpha,          \
        &(L)->ssm_out, &(L)->gate_inp_shexp, &(L)->ple_gate, &(L)->ple_proj

typedef struct {
    char arch[32];
    coli_hparams hp;
    coli_mat tok_embd;   /* n_embd x n_vocab: row t is token t's embedding */
    coli_mat output;     /* n_embd -> n_vocab (tok_embd when tied) */
    float *output_norm;  /* (n_embd) */
    coli_layer *layers;  /* n_layer */
    float *idx_rot;      /* DSA: the idx_head_dim^2 Walsh-Hadamard rotation of indexer q and k */
    float *rope_freqs;   /* gemma4: the global layers' rope_freqs (head_dim / 2), or NULL */
    /* gemma4 per-layer embeddings (hp.n_embd_per_layer > 0, else n_in 0 / NULL): token t's row of
     * per_layer_token_embd ([n_layer][n_embd_per_layer], read from the mapping per token), the projection of
     * the scaled token embedding to the same shape and its norm (n_embd_per_layer) */
    coli_mat ple_tok_embd;   /* n_layer * n_embd_per_layer x n_vocab */
    coli_mat ple_model_proj; /* n_embd -> n_layer * n_embd_per_layer */
    float *ple_proj_norm;
    int64_t n_params;
    const struct gguf_file *file; /* the weights' mapping, watched for changes (gguf_file_state) */
    /* The first multi-token-prediction block (nextn, mtp.h), loaded as layers[n_layer] where the family's drafts
     * can use it: its input projection of [enorm(token embedding) | hnorm(the trunk's final normed hidden state)],
     * its head's norm (NULL: output_norm) and its own head and embedding where the file has them (n_in 0: the
     * model's). has_mtp: layers[n_layer] is allocated; mtp_eh_proj.n_in 0 when the block could not be read (no
     * drafts from it). mtp_view: this model is the block seen as a one-layer model (mtp.c), whose forward takes
     * s->mtp_h. */
    bool has_mtp, mtp_view;
    coli_mat mtp_eh_proj;
    float *mtp_enorm, *mtp_hnorm, *mtp_head_norm;
    coli_mat mtp_head, mtp_embd;
} coli_model;

/* Reads hyper-parameters and binds every tensor; named error on anything
 * missing, misshapen or of a type the kernels cannot compute with. */
int coli_model_load(coli_model *m, const gguf_file *f);
/* COLI_E_FILE_CHANGED (named, with the path) when m's file shrank or faulted, else 0. */
int coli_model_file_error(const coli_model *m);
void coli_model_free(coli_model *m);

/* One cache layer of a coli_kv: K rows [cells][k_dim], V rows [v_dim][cells]
 * (transposed), cell c holding position first + c where first is 0 for a
 * full layer and kv->swa_base for a sliding-window layer. */
typedef struct {
    coli_half *k, *v;
    int cells;
    bool slides;     /* the model's layer slides (a window file holds its window only) */
    bool swa;        /* ... and its cache is a window (swa_cells < n_ctx) */
} coli_kv_layer;

/* The KV cache of one sequence (a slot's): pages are mapped on first write,
 * so an unused slot costs address space, not memory.
 * Sliding-window layers keep a window, not the context: swa_cells cells
 * holding positions swa_base .. swa_base + swa_cells - 1, swa_base a multiple
 * of 64 (attention's cell alignment, so cells keep their offsets in each
 * chunk and the bits stay those of a full-length cache). A batch whose first
 * row no longer finds its window (n_swa - 1 positions before it) after the
 * cache moved on is refused: coli_kv_resumable() says where a sequence can
 * continue; a restart at position 0 always can. */
typedef struct {
    int n_ctx;       /* positions it holds */
    size_t k_dim, v_dim;
    int n_layer;     /* cache layers: hp.n_kv_layers (a layer's is coli_layer.kv_slot) */
    coli_half *k;    /* the mapping's start: the layers' K rows, then their V rows, then ik */
    coli_kv_layer *layer; /* [n_layer] */
    int swa_cells;   /* cells of a sliding-window layer: its window plus a batch, or n_ctx (no window kept) */
    int swa_base;    /* the position in a sliding-window layer's cell 0 */
    int swa_keep;    /* positions before a row that it sees: n_swa - 1 */
    size_t ik_dim;   /* DSA: the indexer key cache's row (idx_head_dim), else 0 */
    int n_ik_layers; /* ... and its layers (hp.n_idx_layers) */
    coli_half *ik;   /* [n_ik_layers][n_ctx][ik_dim] f16, as llama.cpp's type_k */
    /* Gated DeltaNet models: the recurrent state after rs_pos tokens, per linear layer the conv's last
     * d_conv - 1 inputs per channel ([conv_dim][d_conv - 1]) and the delta rule's state ([n_v][S][S], row j
     * of head h is column j of its S, as ggml stores it), f32 as llama.cpp's */
    int n_rs_layers;
    size_t rs_conv, rs_ssm; /* floats per layer */
    float *rs;       /* [n_rs_layers][rs_conv + rs_ssm] */
    int rs_pos;      /* tokens the state holds; a row at another position restarts it (pos 0) or is refused */
    size_t bytes;    /* size of the mapping */
} coli_kv;

/* n_batch: the most rows of one sequence a forward batch holds (a window layer keeps them besides its window). */
int coli_kv_init(coli_kv *kv, const coli_hparams *hp, int n_ctx, int n_batch);
void coli_kv_free(coli_kv *kv);
/* Bytes a cache of n_ctx positions maps. */
size_t coli_kv_bytes(const coli_hparams *hp, int n_ctx, int n_batch);
/* Cells of a sliding-window layer's cache (n_ctx when the window would not be smaller). */
int coli_kv_swa_cells(const coli_hparams *hp, int n_ctx, int n_batch);
/* Whether a sequence whose cache holds positions < pos can go on at pos (its windows are still held). */
bool coli_kv_resumable(const coli_kv *kv, int pos);
/* Before a batch writes positions pmin .. pmax: moves the windows on where they must (0, or a named error). */
int coli_kv_prepare(coli_kv *kv, int pmin, int pmax);
/* The first position a cache layer holds (its cell 0). */
static inline int coli_kv_first(const coli_kv *kv, int slot) { return kv->layer[slot].swa ? kv->swa_base : 0; }

/* One row of a forward batch: a token at a position of a sequence. */
typedef struct {
    int32_t token;
    int pos;         /* the cache holds positions < pos of this sequence */
    coli_kv *kv;
    float *snap;     /* Gated DeltaNet: where the recurrent state after this row is copied (as kv->rs); NULL: not */
} coli_row;

static inline coli_row coli_row_at(int32_t token, int pos, coli_kv *kv) {
    return (coli_row){.token = token, .pos = pos, .kv = kv}; /* no snapshot */
}

#define COLI_STATE_MAX_BUFFERS 64 /* buffers a coli_state holds, at most (forward.c take() checks) */

/* Scratch of a forward batch, shared by every sequence. */
typedef struct {
    int n_ctx;       /* the longest sequence (sizes attention scratch) */
    int n_batch;     /* most rows per forward call */
    int n_logit_rows; /* rows of logits[] */
    const coli_row *rows; /* the batch being evaluated */
    int rows_mode;   /* coli_rows_mode (matmul.h) of the batch being evaluated */
    float *x;        /* [n_batch][n_embd] residual stream */
    float *xn;       /* [n_batch][n_embd] normed input of a block; after coli_forward the final normed rows */
    float *tmp;      /* [n_batch][n_embd] a block's output */
    float *q;        /* [n_batch][n_head * head_dim] */
    float *k;        /* [n_batch][n_head_kv * head_dim] */
    float *v;        /* [n_batch][n_head_kv * head_dim_v] */
    float *att;      /* [n_batch][n_head * head_dim_v] */
    float *hb, *hb2; /* [n_batch][n_ff] */
    float *logits;   /* [n_logit_rows][n_vocab] */
    coli_half *att_scratch; /* per thread: coli_attention_scratch_halves() (attention.h) */
    float *att_scores;      /* per thread: coli_attention_scratch_floats() */
    /* routed FFN (MoE models only) */
    float *router;          /* [n_batch][n_expert] router logits, then probabilities */
    int32_t *route_ids;     /* [n_batch][n_layer][n_expert_used]: the last batch's routing */
    float *route_w;         /* [n_batch][n_layer][n_expert_used]: its weights */
    int32_t *pairs;         /* [n_batch * n_expert_used] row * K + k, grouped by expert */
    int32_t *counts;        /* [n_expert + 1] group offsets into pairs */
    float *yg;              /* [n_batch * n_expert_used][n_embd]: expert outputs in expert order */
    float *hg, *hg2;        /* [n_batch * n_expert_used][max(n_ff_exp, n_ff_shexp)] */
    float *eo;              /* [n_batch][n_expert_used][n_embd] weighted expert outputs */
    int32_t *active;        /* [n_expert] experts chosen by some row of the batch */
    struct coli_expert *ex_of; /* [n_expert] the active experts' matrices, from the store */
    int32_t *slot_of_pair;  /* [n_batch * n_expert_used] pair -> its row in the expert-ordered buffers */
    void *xq_in, *xq_mid;   /* [n_batch * n_expert_used] rows quantized for gate/up, for down */
    size_t xq_in_stride, xq_mid_stride;
    struct coli_expert_store *experts; /* not owned */
    int32_t *wave;          /* [n_expert] experts of the current wave */
    int32_t *predicted;     /* [n_expert] the next layer's predicted experts */
    float *router_next;     /* [n_batch][n_expert] the next layer's router on the current state */
    void *mm_scratch;       /* quantized activations for matmuls */
    /* MLA (hp.mla) */
    float *mla_q;           /* [n_batch][n_head * (nope + rot)] the projected queries */
    float *mla_qa;          /* [n_batch][q_lora_rank] */
    float *mla_in;          /* mla_fused: [n_batch][kv_lora_rank] the normed latent */
    float *mla_att;         /* [n_batch][n_head * head_dim_mla_v] attention output after attn_v_b */
    float *mla_kva, *mla_kvb; /* mla_fused: [n_batch][kv_lora_rank + n_rot], [n_batch][n_head * (nope + v)] */
    coli_half *vt;          /* values transposed per sequence: [vt_seqs][kv_lora_rank][vt_cells] (mapped lazily) */
    size_t vt_bytes;
    int vt_seqs, vt_cells;
    const coli_half **vt_of_row; /* [n_batch] row -> its sequence's transposed values */
    /* DSA (hp.dsa) */
    float *idx_q;           /* [n_batch][idx_n_head * idx_head_dim] rotated indexer queries */
    float *idx_k;           /* [n_batch][idx_head_dim] the indexer keys before caching */
    float *idx_w;           /* [n_batch][idx_n_head] per-head weights, prescaled */
    int32_t *idx_sel;       /* [n_batch][idx_top_k] the cells each row attends to (the last full layer's) */
    int *idx_n_sel;         /* [n_batch] how many; > pos: every visible cell */
    float *idx_scratch;     /* per thread: coli_indexer_scratch_floats() */
    /* Gated DeltaNet models (hp.gdn) */
    float *gdn;             /* [n_batch] x coli_gdn_row_floats() (deltanet.c) */
    float *gq;              /* hp.attn_gated: [n_batch][n_head * 2 * head_dim] attn_q's output, query | gate per head */
    float *attn_gate;       /* [n_batch][n_head * head_dim] the gates, then their sigmoids */
    /* gemma4 */
    float *rin;             /* [n_batch][n_embd] the router's input */
    float *tmp2;            /* [n_batch][n_embd] the dense MLP's output beside the experts' */
    float *ple;             /* per-layer embeddings: [n_batch][n_layer][n_embd_per_layer] each layer's input */
    float *ple_proj;        /* [n_batch][n_layer][n_embd_per_layer] the projection part of ple */
    float *ple_h;           /* [n_batch][n_embd_per_layer] a layer's gated input */
    /* an MTP block's view (coli_model.mtp_view): the trunk's final normed hidden state of each row (set by the
     * caller, row i at mtp_h + i * n_embd) and the block's input, [n_batch][2 * n_embd] */
    const float *mtp_h;
    float *mtp_in;
    coli_pool *pool;
    bool pool_borrowed; /* another state's pool (coli_state_free leaves it) */
    int n_threads;
    size_t bytes;    /* memory held by this state */
    void *held[COLI_STATE_MAX_BUFFERS]; /* every buffer above, for coli_state_free */
    int n_held;
    bool take_failed; /* a buffer could not be allocated */
    /* seconds spent, for the profile (written by the forward pass only) */
    double t_forward, t_attention, t_ffn, t_lm_head;
    double t_linear;  /* of t_attention: the Gated DeltaNet (linear attention) layers (deltanet.c) */
} coli_state;

/* experts: the store routed FFNs read (owned by the caller; NULL for dense models). */
int coli_state_init(coli_state *s, const coli_model *m, struct coli_expert_store *experts, int n_ctx, int n_batch,
                    int n_logit_rows, int n_threads);
void coli_state_free(coli_state *s);

/* Evaluates the n rows (n <= n_batch) and leaves their final normed hidden
 * states in s->xn, ready for coli_logits. Rows of one sequence must be
 * consecutive positions in order. rows_mode (coli_rows_mode, matmul.h):
 * COLI_ROWS_ALONE for rows of different sequences decoded together,
 * COLI_ROWS_UNIFORM for a prompt chunk whose bits must not depend on the
 * chunking, COLI_ROWS_BATCH for llama.cpp's own batch arithmetic. */
int coli_forward(const coli_model *m, coli_state *s, const coli_row *rows, int n, int rows_mode);

/* s runs on owner's threads instead of its own (a drafter's state: the two never run at once). */
void coli_state_borrow_pool(coli_state *s, const coli_state *owner);
/* from's phase times moved into s (a drafter's forward passes count in the engine's profile). */
void coli_state_take_times(coli_state *s, coli_state *from);

/* y = x . W^T for n rows of the batch being evaluated (its rows mode, the state's pool and scratch). */
int coli_state_matmul(coli_state *s, const coli_mat *w, const float *x, int n, float *y);

/* Logits of rows [first, first + n) of the last forward batch -> out
 * (n x n_vocab floats), with the same rows_mode as that batch. */
int coli_logits(const coli_model *m, coli_state *s, int first, int n, float *out);

#endif
