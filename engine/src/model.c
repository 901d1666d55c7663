/* model.c — binding a GGUF file's tensors to a transformer: hyper-parameters,
 * then each layer's norms, matrices and routed experts (forward.c runs it).
 *
 * Families differ in a handful of switches (coli_hparams): RoPE layout, FFN
 * activation, q/k norms, Gemma's post-norms, sliding-window layers. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ggml_types.h"
#include "kernels.h"
#include "model.h"
#include "quant.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- hyper-parameters ------------------------------------------------- */

static int get_u32_req(const gguf_file *f, const char *arch, const char *suffix, int *out) {
    char key[160];
    uint32_t v;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int rc = gguf_get_u32(f, key, &v);
    if (rc < 0) return rc;
    if (rc == 0) return coli_fail(COLI_E_MISSING, "missing: the model has no '%s'", key);
    if (v > (1u << 30)) return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' is %u", key, v);
    *out = (int)v;
    return 0;
}

static int get_u32_opt(const gguf_file *f, const char *arch, const char *suffix, int *out) {
    char key[160];
    uint32_t v;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int rc = gguf_get_u32(f, key, &v);
    if (rc < 0) return rc;
    if (rc == 1) {
        if (v > (1u << 30)) return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' is %u", key, v);
        *out = (int)v;
    }
    return 0;
}

static int get_f32_opt(const gguf_file *f, const char *arch, const char *suffix, float *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int rc = gguf_get_f32(f, key, out);
    return rc < 0 ? rc : 0;
}

/* A key llama.cpp reads with get_key_or_arr: one value, or one per block (block_count of them, MTP blocks
 * included). *lo and *hi get the smallest and the largest (untouched when the key is absent); colibri runs
 * one value for every layer, so values that differ are refused unless `per_layer` (gemma4's head_count_kv and
 * feed_forward_length, which its layers read one by one). */
static int get_u32_layers(const gguf_file *f, const char *a, const char *suffix, int n_block, bool per_layer, int *lo,
                          int *hi) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", a, suffix);
    const gguf_kv *kv = gguf_get(f, key);
    if (!kv || kv->type != GGUF_TYPE_ARRAY) {
        int rc = get_u32_opt(f, a, suffix, hi);
        if (!rc && kv) *lo = *hi;
        return rc;
    }
    if ((kv->arr_type != GGUF_TYPE_UINT32 && kv->arr_type != GGUF_TYPE_INT32) || kv->arr_n != (uint64_t)n_block)
        return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' is not %d integers (one per block)", key, n_block);
    int64_t mn = INT64_MAX, mx = INT64_MIN;
    for (int il = 0; il < n_block; il++) {
        const int64_t v = gguf_arr_i64(kv, (uint64_t)il);
        if (v < 0 || v > (1 << 30)) return coli_fail(COLI_E_CORRUPT, "corrupt: '%s'[%d] is %" PRId64, key, il, v);
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    if (mn != mx && !per_layer)
        return coli_fail(COLI_E_UNSUPPORTED, "unsupported: '%s' differs from layer to layer (%" PRId64 " to %" PRId64
                         "); colibri runs one value for every layer of a %s model", key, mn, mx, a);
    *lo = (int)mn;
    *hi = (int)mx;
    return 0;
}

static int get_f32_req(const gguf_file *f, const char *arch, const char *suffix, float *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int rc = gguf_get_f32(f, key, out);
    if (rc < 0) return rc;
    if (rc == 0) return coli_fail(COLI_E_MISSING, "missing: the model has no '%s'", key);
    return 0;
}

static float yarn_get_mscale(float scale, float mscale) {
    return scale <= 1.0f ? 1.0f : (0.1f * mscale * logf(scale) + 1.0f);
}

/* ggml_rope_yarn_corr_dims */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

/* Keys llama.cpp's load_arch_hparams requires of a family beyond the ones every family needs
 * (src/models/<arch>.cpp: get_key without `false`) that colibri could otherwise do without. */
static const struct {
    const char *arch, *suffix;
} family_required_keys[] = {
    {"gpt-oss", "expert_feed_forward_length"}, {"gpt-oss", "attention.sliding_window"},
    {"glm4moe", "expert_shared_count"},        {"deepseek2", "expert_shared_count"},
    {"deepseek32", "expert_shared_count"},     {"glm-dsa", "expert_shared_count"},
};

static int family_required(const gguf_file *f, const char *arch) {
    for (size_t i = 0; i < sizeof family_required_keys / sizeof family_required_keys[0]; i++) {
        if (strcmp(arch, family_required_keys[i].arch) != 0) continue;
        char key[160];
        snprintf(key, sizeof key, "%s.%s", arch, family_required_keys[i].suffix);
        if (gguf_find_key(f, key) < 0) return coli_fail(COLI_E_MISSING, "missing: the model has no '%s'", key);
    }
    return 0;
}

/* Family switches: what llama.cpp's graph for each architecture does. */
static int family_hparams(coli_hparams *hp, const char *arch) {
    hp->attn_scale = 1.0f;
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->act = COLI_ACT_SILU;
    hp->exp_act = COLI_ACT_SILU;
    if (strcmp(arch, "gemma3") == 0) {
        hp->rope_type = COLI_ROPE_NEOX;
        hp->act = COLI_ACT_GELU;
        hp->qk_norm = true;
        hp->post_norms = true;
        hp->swa_pattern = 6; /* five sliding-window layers, then one global */
        hp->rope_base_swa = 10000.0f;
        hp->embd_scale = sqrtf((float)hp->n_embd);
        hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim); /* Gemma scales q, not the scores */
        hp->kq_scale = 1.0f;
        return 0;
    }
    if (strcmp(arch, "gemma4") == 0) { /* src/models/gemma4.cpp; the rest in gemma4_hparams */
        hp->gemma4 = true;
        hp->rope_type = COLI_ROPE_NEOX;
        hp->act = COLI_ACT_GELU;
        hp->exp_act = COLI_ACT_GELU;
        hp->qk_norm = true;
        hp->post_norms = true;
        hp->swa_pattern = 1; /* the file's attention.sliding_window_pattern decides (required: gemma4_hparams) */
        hp->rope_base_swa = 10000.0f;
        hp->embd_scale = sqrtf((float)hp->n_embd);
        hp->attn_scale = 1.0f; /* f_attention_scale 1: neither q nor the scores are scaled */
        hp->kq_scale = 1.0f;
        hp->gating = COLI_GATE_SOFTMAX;
        hp->expert_norm_w = true;
        return 0;
    }
    if (strcmp(arch, "llama") == 0) {
        hp->rope_type = COLI_ROPE_NORM;
        hp->expert_norm_w = true; /* Mixtral: softmax over the chosen experts */
        return 0;
    }
    if (strcmp(arch, "qwen2") == 0) {
        hp->rope_type = COLI_ROPE_NEOX;
        return 0;
    }
    if (strcmp(arch, "qwen3") == 0 || strcmp(arch, "qwen3moe") == 0) {
        hp->rope_type = COLI_ROPE_NEOX;
        hp->qk_norm = true;
        hp->expert_norm_w = true;
        return 0;
    }
    if (strcmp(arch, "glm4moe") == 0) {
        hp->rope_type = COLI_ROPE_NEOX;
        hp->qk_norm = true;
        hp->qk_norm_optional = true;
        hp->ffn_norm_post_attn = true;
        hp->gating = COLI_GATE_SIGMOID;
        return 0;
    }
    if (strcmp(arch, "olmoe") == 0) {
        hp->rope_type = COLI_ROPE_NEOX;
        hp->qk_norm = true;
        hp->qk_norm_full = true;
        return 0;
    }
    if (strcmp(arch, "deepseek2") == 0) { /* DeepSeek V2/V3/R1, Kimi K2, GLM-4.7-Flash */
        hp->rope_type = COLI_ROPE_NORM;
        hp->mla = true;
        return 0;
    }
    /* MLA plus DeepSeek's sparse attention: DeepSeek V3.2(-Exp); GLM-5/5.1/5.2 */
    if (strcmp(arch, "deepseek32") == 0 || strcmp(arch, "glm-dsa") == 0) {
        const bool glm = strcmp(arch, "glm-dsa") == 0;
        hp->rope_type = COLI_ROPE_NORM;
        hp->mla = true;
        hp->dsa = true;
        hp->idx_rope_type = glm ? COLI_ROPE_NORM : COLI_ROPE_NEOX;
        hp->idx_norm_eps = glm ? 0.0f : 1e-6f; /* llama.cpp sets f_norm_eps for deepseek32 only */
        if (glm) hp->gating = COLI_GATE_SIGMOID; /* its default when expert_gating_func is absent */
        return 0;
    }
    if (strcmp(arch, "gpt-oss") == 0) { /* src/models/openai-moe.cpp */
        hp->rope_type = COLI_ROPE_NEOX;
        hp->swa_pattern = 2; /* even layers slide, odd ones are global (load_swa_pattern(ml, 2)) */
        hp->swa_rope_global = true; /* rope_freq_scale_train_swa = rope_freq_scale_train; YaRN everywhere */
        hp->rope_base_swa = hp->rope_base;
        hp->attn_sinks = true;
        hp->ffn_norm_post_attn = true; /* attn_post_norm: the FFN's input norm */
        hp->gating = COLI_GATE_SOFTMAX_WEIGHT;
        hp->exp_act = COLI_ACT_SWIGLU_OAI;
        hp->kq_scale = 1.0f / sqrtf((float)hp->n_rot);
        return 0;
    }
    /* Qwen3-Next, Qwen3-Coder-Next (qwen3next), Qwen3.5/3.6 MoE (qwen35moe): src/models/qwen3next.cpp,
     * qwen35moe.cpp: Gated DeltaNet layers (deltanet.c) between gated full-attention layers */
    if (strcmp(arch, "qwen3next") == 0 || strcmp(arch, "qwen35moe") == 0) {
        /* qwen35moe: IMROPE, which for text (the position in t, h and w, 0 in e) is NEOX wherever every rotated
         * pair takes t, h or w (checked in gdn_hparams); value head h reads key head h % n_k (ggml's broadcast
         * in the fused delta-net op), qwen3next's repeat takes h / (n_v / n_k) */
        hp->gdn_k_modulo = strcmp(arch, "qwen35moe") == 0;
        hp->rope_type = COLI_ROPE_NEOX;
        hp->qk_norm = true;
        hp->expert_norm_w = true;
        hp->ffn_norm_post_attn = true;
        hp->gdn = true;
        hp->attn_gated = true;
        return 0;
    }
    return coli_fail(COLI_E_UNSUPPORTED,
                     "unsupported: architecture '%s' (colibri runs gemma3, gemma4, llama (incl. Mixtral), qwen2, qwen3, qwen3moe, "
                     "olmoe, glm4moe, deepseek2, deepseek32, glm-dsa, gpt-oss, qwen3next and qwen35moe today)", arch);
}

/* MLA's ranks and head sizes. The converters write the absorbed layout: one
 * key/value head of kv_lora_rank + n_rot (key_length), values kv_lora_rank
 * wide (value_length), and the per-head sizes after decompression in
 * key_length_mla / value_length_mla. */
static int mla_hparams(coli_hparams *hp, const gguf_file *f, const char *a) {
    int rc, k_mla = 0, v_mla = 0;
    if ((rc = get_u32_opt(f, a, "attention.q_lora_rank", &hp->q_lora_rank))) return rc;
    if (strcmp(a, "deepseek2") == 0) { /* required but of its lite variants (llama.cpp's is_lite) */
        const gguf_kv *toks = gguf_get(f, "tokenizer.ggml.tokens");
        uint32_t n_vocab = toks && toks->type == GGUF_TYPE_ARRAY ? (uint32_t)toks->arr_n : 0;
        if (gguf_get_u32(f, "deepseek2.vocab_size", &n_vocab) < 0) return colibri_last_error_code();
        uint32_t nextn = 0;
        if (gguf_get_u32(f, "deepseek2.nextn_predict_layers", &nextn) < 0) return colibri_last_error_code();
        const int64_t trunk = (int64_t)hp->n_layer - nextn; /* hparams.n_layer(): MTP blocks not counted */
        const bool lite = trunk == 27 || trunk == 26 || (trunk == 48 && n_vocab == 128256);
        if (!lite && gguf_find_key(f, "deepseek2.attention.q_lora_rank") < 0)
            return coli_fail(COLI_E_MISSING, "missing: the model has no 'deepseek2.attention.q_lora_rank' (only "
                             "DeepSeek-V2-Lite-sized files, 26 or 27 layers, may leave it out)");
    }
    if ((rc = get_u32_req(f, a, "attention.kv_lora_rank", &hp->kv_lora_rank))) return rc;
    if ((rc = get_u32_opt(f, a, "attention.key_length_mla", &k_mla))) return rc;
    if ((rc = get_u32_opt(f, a, "attention.value_length_mla", &v_mla))) return rc;
    float log_mul = 0.0f;
    if ((rc = get_f32_opt(f, a, "rope.scaling.yarn_log_multiplier", &log_mul))) return rc;
    hp->rope_yarn_log_mul = log_mul / 0.1f; /* the converter wrote 0.1 * mscale_all_dim */
    if (!k_mla && !v_mla) { /* an older converter's file: heads of nope + rot (key_length), fused attn_kv_b */
        if (hp->kv_lora_rank <= 0 || hp->head_dim <= hp->n_rot || hp->n_head_kv != hp->n_head)
            return coli_fail(COLI_E_CORRUPT,
                             "corrupt: a fused-attn_kv_b MLA file needs heads of more than the %d rotary dims and "
                             "as many key/value heads as heads (%d, not %d), and a kv_lora_rank",
                             hp->n_rot, hp->n_head, hp->n_head_kv);
        hp->mla = false;
        hp->mla_fused = true;
        hp->head_dim_nope = hp->head_dim - hp->n_rot;
        hp->head_dim_mla_v = hp->head_dim_v;
        return 0;
    }
    if (!k_mla || !v_mla)
        return coli_fail(COLI_E_CORRUPT, "corrupt: %s has only one of attention.key_length_mla / value_length_mla", a);
    if (hp->kv_lora_rank <= 0 || hp->head_dim != hp->kv_lora_rank + hp->n_rot || hp->n_head_kv != 1)
        return coli_fail(COLI_E_CORRUPT,
                         "corrupt: MLA with kv_lora_rank %d and %d rotary dims needs one key/value head of %d "
                         "(key_length); the file has %d head(s) of %d",
                         hp->kv_lora_rank, hp->n_rot, hp->kv_lora_rank + hp->n_rot, hp->n_head_kv, hp->head_dim);
    hp->head_dim_v = hp->kv_lora_rank; /* the values are the latent itself: llama.cpp reads no value_length here */
    if (k_mla <= hp->n_rot || v_mla <= 0)
        return coli_fail(COLI_E_CORRUPT, "corrupt: MLA head sizes %d (key, %d of them rotary) and %d (value)", k_mla,
                         hp->n_rot, v_mla);
    hp->head_dim_nope = k_mla - hp->n_rot;
    hp->head_dim_mla_v = v_mla;
    return 0;
}

/* llama.cpp's cparams.yarn_attn_factor (llama_context's constructor), and
 * deepseek2's score scale built on it (src/models/deepseek2.cpp). */
static int yarn_attn_factor(coli_hparams *hp, const gguf_file *f, const char *a) {
    float rope_attn_factor = 1.0f;
    int rc = get_f32_opt(f, a, "rope.scaling.attn_factor", &rope_attn_factor);
    if (rc) return rc;
    hp->yarn_attn_factor = 1.0f;
    const float freq_scale = hp->rope_scale;
    if (hp->yarn_ext_factor != 0.0f) {
        const float factor = 1.0f / freq_scale;
        if (hp->rope_yarn_log_mul != 0.0f) {
            const float all_dims = hp->rope_yarn_log_mul;
            /* llama.cpp reads mscale as mscale_all_dim for deepseek2 only (not deepseek32 / glm-dsa) */
            const float mscale = (hp->mla || hp->mla_fused) && !hp->dsa && all_dims != 1.0f ? all_dims : 1.0f;
            hp->yarn_attn_factor = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, all_dims);
        } else {
            hp->yarn_attn_factor = yarn_get_mscale(factor, 1.0f);
        }
        hp->yarn_attn_factor *= 1.0f / (1.0f + 0.1f * logf(factor));
    }
    hp->yarn_attn_factor *= rope_attn_factor;
    if (hp->mla || hp->mla_fused) {
        const float org = hp->yarn_attn_factor * (1.0f + 0.1f * logf(1.0f / freq_scale));
        const float mscale = org * (1.0f + 0.1f * hp->rope_yarn_log_mul * logf(1.0f / freq_scale));
        hp->kq_scale = 1.0f * mscale * mscale / sqrtf((float)(hp->head_dim_nope + hp->n_rot));
    }
    return 0;
}

/* The lightning indexer's keys (llama.cpp's load_arch_hparams of deepseek32 / glm-dsa):
 * all required; the checks are the shapes its graph asserts or could not run. */
static int dsa_hparams(coli_hparams *hp, const gguf_file *f, const char *a) {
    int rc;
    if ((rc = get_u32_req(f, a, "attention.indexer.head_count", &hp->idx_n_head))) return rc;
    if ((rc = get_u32_req(f, a, "attention.indexer.key_length", &hp->idx_head_dim))) return rc;
    if ((rc = get_u32_req(f, a, "attention.indexer.top_k", &hp->idx_top_k))) return rc;
    if (!hp->mla)
        return coli_fail(COLI_E_CORRUPT, "corrupt: %s needs MLA's split layout (attention.key_length_mla), not a "
                         "fused attn_kv_b", a);
    if (hp->q_lora_rank <= 0)
        return coli_fail(COLI_E_CORRUPT, "corrupt: %s needs a q LoRA (attention.q_lora_rank): its indexer reads it", a);
    const int D = hp->idx_head_dim;
    if (hp->idx_n_head <= 0 || hp->idx_top_k <= 0 || D < 64 || D > 1024 || (D & (D - 1)) || hp->n_rot > D)
        return coli_fail(COLI_E_CORRUPT,
                         "corrupt: indexer with %d heads of %d, top-%d (needs heads, a top-k, and a head size that is a "
                         "power of two in 64..1024 for its Hadamard rotation, at least the %d rotary dims)",
                         hp->idx_n_head, D, hp->idx_top_k, hp->n_rot);
    if (strcmp(a, "deepseek32") == 0) { /* llama.cpp requires its gating function */
        char key[160];
        snprintf(key, sizeof key, "%s.expert_gating_func", a);
        if (hp->n_expert > 0 && gguf_find_key(f, key) < 0)
            return coli_fail(COLI_E_MISSING, "missing: the model has no '%s'", key);
    }
    return 0;
}

/* Whether layer il of a DSA model runs an indexer of its own ("full") or reuses
 * the previous full layer's top-k ("shared"): deepseek32's are all full; glm-dsa
 * reads attention.indexer.types (one flag per trunk layer, or one for all), else
 * every layer is full below a 1M trained context (GLM-5/5.1) and GLM-5.2's pattern
 * above it (full: layers 0, 1, then every fourth from 2, for its 78 layers). */
static int indexer_full(const gguf_file *f, const coli_model *m, int il, bool *full) {
    const coli_hparams *hp = &m->hp;
    *full = true;
    if (strcmp(m->arch, "glm-dsa") != 0) return 0;
    if (hp->n_ctx_train >= 1048576) *full = il < 78 && (il < 2 || (il - 2) % 4 == 0);
    char key[160];
    snprintf(key, sizeof key, "%s.attention.indexer.types", m->arch);
    const gguf_kv *kv = gguf_get(f, key);
    if (!kv) return 0;
    if (kv->type != GGUF_TYPE_ARRAY) { /* one value for every layer */
        uint32_t v;
        if (gguf_get_u32(f, key, &v) < 0) return colibri_last_error_code();
        *full = v != 0;
        return 0;
    }
    const uint32_t t = kv->arr_type;
    if (t != GGUF_TYPE_BOOL && t != GGUF_TYPE_UINT32 && t != GGUF_TYPE_INT32)
        return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' is an array of %s (bool or integers)", key, gguf_type_name(t));
    if (kv->arr_n != (uint64_t)hp->n_layer)
        return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' has %" PRIu64 " entries, the model %d layers", key, kv->arr_n,
                         hp->n_layer);
    *full = gguf_arr_i64(kv, (uint64_t)il) != 0;
    return 0;
}

/* ggml_gen_hadamard (llama-kv-cache.cpp): the orthonormal n x n Walsh-Hadamard
 * matrix llama.cpp rotates the indexer's q and k with (its self_k_rot_lid). */
static float *hadamard(int n) {
    float *h = malloc((size_t)n * n * sizeof *h);
    if (!h) return NULL;
    h[0] = (float)(1.0 / sqrtf((float)n));
    for (int s = 1; s < n; s *= 2)
        for (int i = 0; i < s; i++)
            for (int j = 0; j < s; j++) {
                const float v = h[i * n + j];
                h[(i + s) * n + j] = v;
                h[i * n + j + s] = v;
                h[(i + s) * n + j + s] = -v;
            }
    return h;
}

/* The Gated DeltaNet keys (llama.cpp's load_arch_hparams of qwen3next / qwen35moe); the layer pattern is read per
 * layer (gdn_layer_recurrent). */
static int gdn_hparams(coli_hparams *hp, const gguf_file *f, const char *a) {
    int rc, inner = 0;
    if ((rc = get_u32_req(f, a, "ssm.conv_kernel", &hp->ssm_d_conv))) return rc;
    if ((rc = get_u32_req(f, a, "ssm.inner_size", &inner))) return rc;
    if ((rc = get_u32_req(f, a, "ssm.state_size", &hp->ssm_d_state))) return rc;
    if ((rc = get_u32_req(f, a, "ssm.time_step_rank", &hp->ssm_n_v))) return rc;
    if ((rc = get_u32_req(f, a, "ssm.group_count", &hp->ssm_n_k))) return rc;
    if (hp->ssm_d_conv < 2 || hp->ssm_d_conv > 64 || hp->ssm_d_state <= 0 || hp->ssm_d_state > 1024 ||
        hp->ssm_n_k <= 0 || hp->ssm_n_v <= 0 || hp->ssm_n_v % hp->ssm_n_k || inner != hp->ssm_d_state * hp->ssm_n_v)
        return coli_fail(COLI_E_CORRUPT,
                         "corrupt: Gated DeltaNet shape: conv %d, head size %d, %d key heads, %d value heads, inner "
                         "size %d (value heads must be a multiple of key heads, inner size their product with the head size)",
                         hp->ssm_d_conv, hp->ssm_d_state, hp->ssm_n_k, hp->ssm_n_v, inner);
    if (hp->gdn_k_modulo) { /* qwen35moe: rope.dimension_sections (required), as ggml_mrope_cache_init reads them */
        char key[160];
        uint32_t et;
        uint64_t n;
        const uint8_t *data;
        snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
        rc = gguf_get_arr(f, key, &et, &n, &data);
        if (rc < 0) return rc;
        if (rc == 0) return coli_fail(COLI_E_MISSING, "missing: key '%s' (qwen35moe's M-RoPE sections)", key);
        if ((et != GGUF_TYPE_INT32 && et != GGUF_TYPE_UINT32) || n < 3)
            return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' is not an array of 3 or 4 integers", key);
        int sec[4] = {0, 0, 0, 0};
        for (uint64_t i = 0; i < n && i < 4; i++) {
            int32_t v;
            memcpy(&v, data + 4 * i, 4);
            sec[i] = v;
        }
        const int dims = sec[0] + sec[1] + sec[2] + sec[3];
        if (sec[0] < 0 || sec[1] < 0 || sec[2] < 0 || sec[3] < 0 || dims <= 0 || dims > hp->head_dim / 2)
            return coli_fail(COLI_E_CORRUPT, "corrupt: M-RoPE sections %d %d %d %d", sec[0], sec[1], sec[2], sec[3]);
        for (int i = 0; i < hp->n_rot / 2; i++) { /* IMROPE: a pair outside t/h/w would rotate by e's position, 0 */
            const int sector = i % dims;
            const bool thw = (sector % 3 == 0 && sector < 3 * sec[0]) || (sector % 3 == 1 && sector < 3 * sec[1]) ||
                             (sector % 3 == 2 && sector < 3 * sec[2]);
            if (!thw)
                return coli_fail(COLI_E_UNSUPPORTED,
                                 "unsupported: M-RoPE sections %d %d %d %d leave rotary pair %d to the fourth section",
                                 sec[0], sec[1], sec[2], sec[3], i);
        }
    }
    int shexp = 0; /* absent or 0: feed_forward_length, as load_block_trunk sizes it */
    if ((rc = get_u32_opt(f, a, "expert_shared_feed_forward_length", &shexp))) return rc;
    if (shexp <= 0) shexp = hp->n_ff;
    hp->n_ff_shexp = shexp;
    return 0;
}

/* Whether layer il is a linear (Gated DeltaNet) layer: attention.recurrent_layers where the file has it, else
 * every full_attention_interval-th layer (4 without the key) is full attention. */
static int gdn_layer_recurrent(const gguf_file *f, const char *a, int il, int n_layer, bool *recr) {
    char key[160];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
    const gguf_kv *kv = gguf_get(f, key);
    if (kv) {
        if (kv->type != GGUF_TYPE_ARRAY || (kv->arr_type != GGUF_TYPE_BOOL && kv->arr_type != GGUF_TYPE_UINT32 &&
                                            kv->arr_type != GGUF_TYPE_INT32))
            return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' is not an array of flags", key);
        *recr = (uint64_t)il < kv->arr_n && gguf_arr_i64(kv, (uint64_t)il) != 0;
        return 0;
    }
    int interval = 4, rc;
    if ((rc = get_u32_opt(f, a, "full_attention_interval", &interval))) return rc;
    if (interval <= 0) return coli_fail(COLI_E_CORRUPT, "corrupt: %s.full_attention_interval is 0", a);
    *recr = il < n_layer && (il + 1) % interval != 0;
    return 0;
}

/* Gemma 4's keys (llama_model_gemma4::load_arch_hparams): the sliding layers' head size and rotary dims, the
 * shared-KV layers, the softcap; its graph fixes the gating (softmax, renormalised over the chosen). */
static int gemma4_hparams(coli_hparams *hp, const gguf_file *f, const char *a) {
    int rc, hd_swa = 0, hdv_swa = 0, shared = 0, per_layer = 0;
    char key[160];
    if ((rc = get_u32_req(f, a, "attention.key_length_swa", &hd_swa))) return rc;
    if ((rc = get_u32_req(f, a, "attention.value_length_swa", &hdv_swa))) return rc;
    if ((rc = get_u32_req(f, a, "attention.sliding_window", &hp->n_swa))) return rc;
    if ((rc = get_u32_req(f, a, "embedding_length_per_layer_input", &per_layer))) return rc;
    if ((rc = get_u32_opt(f, a, "attention.shared_kv_layers", &shared))) return rc;
    hp->final_softcap = 30.0f; /* llama_hparams' default when the key is absent */
    if ((rc = get_f32_opt(f, a, "final_logit_softcapping", &hp->final_softcap))) return rc;
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
    const gguf_kv *pat = gguf_get(f, key);
    if (!pat || pat->type != GGUF_TYPE_ARRAY)
        return coli_fail(COLI_E_MISSING, "missing: '%s' as one flag per layer (gemma4)", key);
    if (per_layer < 0 || per_layer > (1 << 20) / (hp->n_layer > 0 ? hp->n_layer : 1))
        return coli_fail(COLI_E_CORRUPT, "corrupt: %s.embedding_length_per_layer_input is %d", a, per_layer);
    hp->n_embd_per_layer = per_layer;
    if (hp->head_dim != hp->head_dim_v || hd_swa != hdv_swa || hd_swa <= 0)
        return coli_fail(COLI_E_CORRUPT, "corrupt: gemma4 needs key and value heads of one size (%d/%d, sliding %d/%d)",
                         hp->head_dim, hp->head_dim_v, hd_swa, hdv_swa);
    if (shared < 0 || hp->n_layer - shared < 2)
        return coli_fail(COLI_E_CORRUPT, "corrupt: %d of %d layers share the KV of others (at least 2 must have their "
                         "own)", shared, hp->n_layer);
    hp->n_kv_layers = 0; /* counted per layer */
    hp->n_kv_from_start = hp->n_layer - shared;
    hp->head_dim_swa = hd_swa;
    hp->n_rot_swa = hp->n_rot;
    if ((rc = get_u32_opt(f, a, "rope.dimension_count_swa", &hp->n_rot_swa))) return rc;
    hp->head_dim_full = hp->head_dim;
    hp->n_rot_full = hp->n_rot;
    if (hp->n_rot_swa <= 0 || hp->n_rot_swa % 2 || hp->n_rot_swa > hd_swa || hp->n_rot_swa > 1024)
        return coli_fail(COLI_E_CORRUPT, "corrupt: sliding layers' head size %d / rotary dims %d", hd_swa, hp->n_rot_swa);
    if (!hp->n_head_kv_min) hp->n_head_kv_min = hp->n_head_kv;
    if (hd_swa > hp->head_dim) hp->head_dim = hp->head_dim_v = hd_swa; /* the largest, for buffers */
    if (hp->n_expert > 0) { /* its graph: softmax, renormalised over the chosen, unscaled, whatever the keys say */
        hp->gating = COLI_GATE_SOFTMAX;
        hp->expert_norm_w = true;
        hp->expert_w_scale = 0.0f;
        if (hp->n_ff_shexp || hp->n_layer_dense_lead || hp->n_expert_groups > 1)
            return coli_fail(COLI_E_UNSUPPORTED, "unsupported: gemma4 with shared experts, leading dense layers or "
                             "expert groups");
    }
    return 0;
}

static int load_hparams(coli_model *m, const gguf_file *f) {
    coli_hparams *hp = &m->hp;
    const char *a = m->arch;
    int rc;
    memset(hp, 0, sizeof *hp);
    if ((rc = get_u32_req(f, a, "block_count", &hp->n_layer))) return rc;
    if ((rc = get_u32_req(f, a, "embedding_length", &hp->n_embd))) return rc;
    char key[160];
    const bool gemma4 = strcmp(a, "gemma4") == 0;
    int lo = 0; /* feed_forward_length: optional (MoE-only files); gemma4 E2B/E4B's double-wide MLPs: the largest */
    if ((rc = get_u32_layers(f, a, "feed_forward_length", hp->n_layer, gemma4, &lo, &hp->n_ff))) return rc;
    snprintf(key, sizeof key, "%s.attention.head_count", a);
    if (gguf_find_key(f, key) < 0) return coli_fail(COLI_E_MISSING, "missing: the model has no '%s'", key);
    if ((rc = get_u32_layers(f, a, "attention.head_count", hp->n_layer, false, &lo, &hp->n_head))) return rc;
    hp->n_head_kv = hp->n_head; /* one count per layer (gemma4): the largest sizes the buffers */
    hp->n_head_kv_min = 1 << 30;
    if ((rc = get_u32_layers(f, a, "attention.head_count_kv", hp->n_layer, gemma4, &hp->n_head_kv_min, &hp->n_head_kv)))
        return rc;
    if (hp->n_head_kv_min == 1 << 30) hp->n_head_kv_min = hp->n_head_kv;
    snprintf(key, sizeof key, "%s.attention.head_count_kv", a);
    const gguf_kv *hkv = gguf_get(f, key);
    if (hkv && hkv->type == GGUF_TYPE_ARRAY)
        for (int il = 0; il < hp->n_layer; il++) {
            const int64_t v = gguf_arr_i64(hkv, (uint64_t)il);
            if (v <= 0 || v > hp->n_head || hp->n_head % v)
                return coli_fail(COLI_E_CORRUPT, "corrupt: layer %d: %d heads cannot share %" PRId64 " key/value heads",
                                 il, hp->n_head, v);
        }
    if (hp->n_layer <= 0 || hp->n_embd <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0)
        return coli_fail(COLI_E_CORRUPT, "corrupt: zero layers, width or heads");
    if (hp->n_head % hp->n_head_kv)
        return coli_fail(COLI_E_CORRUPT, "corrupt: %d heads cannot share %d key/value heads", hp->n_head,
                         hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((rc = get_u32_opt(f, a, "attention.key_length", &hp->head_dim))) return rc;
    hp->head_dim_v = hp->n_embd / hp->n_head; /* llama.cpp's default: not key_length */
    if ((rc = get_u32_opt(f, a, "attention.value_length", &hp->head_dim_v))) return rc;
    hp->n_rot = hp->head_dim;
    if ((rc = get_u32_opt(f, a, "rope.dimension_count", &hp->n_rot))) return rc;
    if (hp->head_dim <= 0 || hp->head_dim_v <= 0 || hp->n_rot <= 0 || hp->n_rot > hp->head_dim ||
        hp->n_rot % 2 || hp->n_rot > 1024)
        return coli_fail(COLI_E_CORRUPT, "corrupt: head size %d / rotary dims %d", hp->head_dim, hp->n_rot);
    if ((rc = get_u32_req(f, a, "context_length", &hp->n_ctx_train))) return rc;
    if ((rc = get_f32_req(f, a, "attention.layer_norm_rms_epsilon", &hp->rms_eps))) return rc;
    hp->rope_base = 10000.0f;
    if ((rc = get_f32_opt(f, a, "rope.freq_base", &hp->rope_base))) return rc;
    hp->rope_scale = 1.0f;
    float factor = 0.0f;
    if ((rc = get_f32_opt(f, a, "rope.scaling.factor", &factor))) return rc;
    gguf_str stype = {"", 0};
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (gguf_get_str(f, key, &stype) < 0) return colibri_last_error_code();
    const bool yarn = gguf_str_eq(stype, "yarn");
    if (stype.len && !gguf_str_eq(stype, "none") && !gguf_str_eq(stype, "linear") && !yarn)
        return coli_fail(COLI_E_UNSUPPORTED, "unsupported: RoPE scaling '%.*s' (linear and yarn only)", (int)stype.len,
                         stype.ptr);
    if (factor > 0.0f && !gguf_str_eq(stype, "none")) hp->rope_scale = 1.0f / factor;
    hp->yarn_ext_factor = yarn ? 1.0f : 0.0f;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->n_ctx_orig_yarn = hp->n_ctx_train;
    if ((rc = get_u32_opt(f, a, "rope.scaling.original_context_length", &hp->n_ctx_orig_yarn))) return rc;
    if (hp->n_ctx_orig_yarn <= 0) return coli_fail(COLI_E_CORRUPT, "corrupt: rope.scaling.original_context_length is 0");
    if ((rc = get_u32_opt(f, a, "attention.sliding_window", &hp->n_swa))) return rc;
    if ((rc = get_u32_opt(f, a, "expert_count", &hp->n_expert))) return rc;
    if ((rc = get_u32_layers(f, a, "expert_used_count", hp->n_layer, false, &lo, &hp->n_expert_used))) return rc;
    if (hp->n_expert > 0) {
        if (hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert || hp->n_expert_used > COLI_MAX_EXPERT_USED)
            return coli_fail(COLI_E_CORRUPT, "corrupt: %d experts used per token out of %d (at most %d)",
                             hp->n_expert_used, hp->n_expert, hp->n_expert > COLI_MAX_EXPERT_USED ? COLI_MAX_EXPERT_USED
                                                                                                  : hp->n_expert);
        if (hp->n_expert > 4096) return coli_fail(COLI_E_CORRUPT, "corrupt: %d experts", hp->n_expert);
        hp->n_ff_exp = hp->n_ff;
        /* llama.cpp sizes OLMoE's and Mixtral's experts by feed_forward_length */
        if (strcmp(a, "olmoe") != 0 && strcmp(a, "llama") != 0)
            if ((rc = get_u32_layers(f, a, "expert_feed_forward_length", hp->n_layer, false, &lo, &hp->n_ff_exp)))
                return rc;
        if ((rc = get_f32_opt(f, a, "expert_weights_scale", &hp->expert_w_scale))) return rc;
    } else if (hp->n_expert_used > 0) {
        return coli_fail(COLI_E_CORRUPT, "corrupt: %d experts used per token but no expert_count", hp->n_expert_used);
    }
    hp->embd_scale = 1.0f;
    if ((rc = family_hparams(hp, a))) return rc;
    if ((rc = family_required(f, a))) return rc;
    if ((rc = get_f32_opt(f, a, "rope.freq_base_swa", &hp->rope_base_swa))) return rc;
    if (hp->mla && (rc = mla_hparams(hp, f, a))) return rc;
    if ((rc = yarn_attn_factor(hp, f, a))) return rc;
    hp->kv_k_dim = hp->n_head_kv * hp->head_dim;
    hp->kv_v_dim = hp->mla ? 0 : hp->n_head_kv * hp->head_dim_v;
    if (hp->n_expert > 0) { /* keys only some MoE families write */
        int gating = 0, shared = 0, nextn = 0, norm_w = hp->expert_norm_w;
        if ((rc = get_u32_opt(f, a, "expert_gating_func", &gating))) return rc;
        if (hp->gating == COLI_GATE_SOFTMAX_WEIGHT) { /* gpt-oss: its graph fixes the gating, whatever the key says */
        } else if (gating == 1) hp->gating = COLI_GATE_SOFTMAX;
        else if (gating == 2) hp->gating = COLI_GATE_SIGMOID;
        else if (gating != 0)
            return coli_fail(COLI_E_UNSUPPORTED, "unsupported: expert gating function %d (softmax or sigmoid)", gating);
        snprintf(key, sizeof key, "%s.expert_weights_norm", a);
        if (gguf_get_bool(f, key, &norm_w) < 0) return colibri_last_error_code();
        hp->expert_norm_w = norm_w != 0 && hp->gating != COLI_GATE_SOFTMAX_WEIGHT; /* gpt-oss's graph: never */
        if ((rc = get_u32_opt(f, a, "expert_shared_count", &shared))) return rc;
        hp->n_ff_shexp = shared * hp->n_ff_exp;
        if ((rc = get_u32_opt(f, a, "leading_dense_block_count", &hp->n_layer_dense_lead))) return rc;
        if ((rc = get_u32_opt(f, a, "expert_group_count", &hp->n_expert_groups))) return rc;
        if ((rc = get_u32_opt(f, a, "expert_group_used_count", &hp->n_group_used))) return rc;
        if (hp->n_expert_groups > 1 &&
            (hp->n_expert_groups >= hp->n_expert || hp->n_expert % hp->n_expert_groups || hp->n_group_used <= 0 ||
             hp->n_group_used >= hp->n_expert_groups || hp->n_expert_used > hp->n_group_used * (hp->n_expert / hp->n_expert_groups)))
            return coli_fail(COLI_E_CORRUPT,
                             "corrupt: %d experts in %d groups with %d groups used cannot choose %d experts "
                             "(groups must divide the experts, and 0 < groups used < groups)",
                             hp->n_expert, hp->n_expert_groups, hp->n_group_used, hp->n_expert_used);
        /* GLM-4.5's multi-token-prediction layers follow the trunk; generation skips them */
        if ((rc = get_u32_opt(f, a, "nextn_predict_layers", &nextn))) return rc;
        if (nextn >= hp->n_layer) return coli_fail(COLI_E_CORRUPT, "corrupt: %d of %d layers are MTP layers", nextn, hp->n_layer);
        hp->n_layer -= nextn;
        hp->n_nextn = nextn;
    }
    if (hp->dsa && (rc = dsa_hparams(hp, f, a))) return rc;
    if (hp->gdn && (rc = gdn_hparams(hp, f, a))) return rc;
    if (hp->gemma4 && (rc = gemma4_hparams(hp, f, a))) return rc;
    return 0;
}

/* ---- tensors ---------------------------------------------------------- */

/* A matrix view of tensor t (shape already checked); unsupported when the
 * kernels cannot compute with its type. */
static int mat_from_tensor(coli_mat *w, const gguf_tensor *t, const char *name, int64_t n_in, int64_t n_out) {
    if (!coli_kernels()->type[t->type].vec_dot)
        return coli_fail(COLI_E_UNSUPPORTED, "unsupported: tensor '%s' has type %s, which colibri cannot compute with yet",
                         name, ggml_type_get(t->type)->name);
    w->data = t->data;
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    return 0;
}

static int bind_mat(coli_mat *w, const gguf_file *f, const char *name, int64_t n_in, int64_t n_out) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return coli_fail(COLI_E_MISSING, "missing: tensor '%s' is not in the file", name);
    if (t->n_dims > 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        return coli_fail(COLI_E_CORRUPT,
                         "corrupt: tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 "], expected [%" PRId64
                         ", %" PRId64 "]",
                         name, t->ne[0], t->ne[1], t->ne[2], n_in, n_out);
    return mat_from_tensor(w, t, name, n_in, n_out);
}

/* Slice 0 of a 3-D tensor [n_in, n_out, n] as a matrix, and the bytes from one
 * slice to the next; `what` says in the shape error what the third axis counts. */
static int bind_3d(coli_mat *w, size_t *stride, const gguf_file *f, const char *name, int64_t n_in, int64_t n_out,
                   int n, const char *what) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return coli_fail(COLI_E_MISSING, "missing: tensor '%s' is not in the file", name);
    if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n)
        return coli_fail(COLI_E_CORRUPT,
                         "corrupt: tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 "], expected [%" PRId64
                         ", %" PRId64 ", %d] (%s)",
                         name, t->ne[0], t->ne[1], t->ne[2], n_in, n_out, n, what);
    int rc = mat_from_tensor(w, t, name, n_in, n_out);
    if (rc) return rc;
    *stride = coli_row_size(t->type, n_in) * (size_t)n_out;
    return 0;
}

/* One 3-D expert tensor [n_in, n_out, n_expert] as expert 0's matrix + stride. */
static int bind_exps(coli_mat *w, size_t *stride, uint64_t *off, const gguf_file *f, const char *name, int64_t n_in,
                     int64_t n_out, int n_expert) {
    char what[64];
    snprintf(what, sizeof what, "the file declares %d experts", n_expert);
    int rc = bind_3d(w, stride, f, name, n_in, n_out, n_expert, what);
    if (rc) return rc;
    *off = gguf_data_offset(f) + gguf_find_tensor(f, name)->offset;
    return 0;
}

/* Layer il's routed experts: the three 3-D tensors (named error on wrong shapes or types). */
static int bind_experts(coli_layer_experts *le, const gguf_file *f, int il, int64_t n_embd, int64_t n_ff_exp,
                        int n_expert) {
    char name[96];
    int rc;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", il);
    if ((rc = bind_exps(&le->gate, &le->gate_stride, &le->gate_off, f, name, n_embd, n_ff_exp, n_expert))) return rc;
    snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", il);
    if ((rc = bind_exps(&le->up, &le->up_stride, &le->up_off, f, name, n_embd, n_ff_exp, n_expert))) return rc;
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", il);
    if ((rc = bind_exps(&le->down, &le->down_stride, &le->down_off, f, name, n_ff_exp, n_embd, n_expert))) return rc;
    return 0;
}

/* A norm vector as owned f32 (files store them as F32, sometimes F16). */
static int bind_vec(float **out, const gguf_file *f, const char *name, int64_t n, bool optional) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) {
        if (optional) return 0;
        return coli_fail(COLI_E_MISSING, "missing: tensor '%s' is not in the file", name);
    }
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return coli_fail(COLI_E_CORRUPT, "corrupt: tensor '%s' has %" PRId64 " elements, expected %" PRId64, name,
                         t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3], n);
    coli_to_float_fn to_float = coli_kernels()->type[t->type].to_float;
    if (!to_float)
        return coli_fail(COLI_E_UNSUPPORTED, "unsupported: tensor '%s' has type %s", name,
                         ggml_type_get(t->type)->name);
    *out = malloc((size_t)n * sizeof(float));
    if (!*out) return coli_fail(COLI_E_NOMEM, "out of memory");
    to_float(t->data, *out, n);
    return 0;
}

/* Head 0's matrix of a per-head 3-D tensor [n_in, n_out, n_head] (attn_k_b, attn_v_b). */
static int bind_heads(coli_mat *w, size_t *stride, const gguf_file *f, const char *name, int64_t n_in, int64_t n_out,
                      int n_head) {
    return bind_3d(w, stride, f, name, n_in, n_out, n_head, "does the rank in the metadata match the tensors?");
}

/* MLA's attention tensors (llama.cpp's llama_model_deepseek2::load_arch_tensors). */
static int load_mla(coli_model *m, const gguf_file *f, int il) {
    const coli_hparams *hp = &m->hp;
    coli_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, H = hp->n_head, R = hp->kv_lora_rank;
    const int64_t q_dim = H * (hp->head_dim_nope + hp->n_rot);
    char name[96];
    int rc;
#define T(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    if (hp->q_lora_rank > 0) {
        if ((rc = bind_mat(&L->wq_a, f, T("attn_q_a.weight"), E, hp->q_lora_rank))) return rc;
        if ((rc = bind_vec(&L->q_a_norm, f, T("attn_q_a_norm.weight"), hp->q_lora_rank, false))) return rc;
        if ((rc = bind_mat(&L->wq_b, f, T("attn_q_b.weight"), hp->q_lora_rank, q_dim))) return rc;
    } else {
        if ((rc = bind_mat(&L->wq, f, T("attn_q.weight"), E, q_dim))) return rc;
    }
    if ((rc = bind_mat(&L->wkv_a, f, T("attn_kv_a_mqa.weight"), E, R + hp->n_rot))) return rc;
    if ((rc = bind_vec(&L->kv_a_norm, f, T("attn_kv_a_norm.weight"), R, false))) return rc;
    if (hp->mla_fused) {
        if ((rc = bind_mat(&L->wkv_b, f, T("attn_kv_b.weight"), R, H * (hp->head_dim_nope + hp->head_dim_mla_v))))
            return rc;
    } else {
        if (gguf_find_tensor(f, T("attn_kv_b.weight")) && !gguf_find_tensor(f, T("attn_k_b.weight")))
            return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' is a fused attn_kv_b but the metadata declares the "
                             "split layout (attention.key_length_mla)", name);
        if ((rc = bind_heads(&L->wk_b, &L->wk_b_stride, f, T("attn_k_b.weight"), hp->head_dim_nope, R, (int)H)))
            return rc;
        if ((rc = bind_heads(&L->wv_b, &L->wv_b_stride, f, T("attn_v_b.weight"), R, hp->head_dim_mla_v, (int)H)))
            return rc;
    }
    if ((rc = bind_mat(&L->wo, f, T("attn_output.weight"), H * hp->head_dim_mla_v, E))) return rc;
#undef T
    return 0;
}

/* A full layer's indexer (llama.cpp: required for deepseek32, present on glm-dsa's full layers). */
static int load_indexer(coli_model *m, const gguf_file *f, int il) {
    const coli_hparams *hp = &m->hp;
    coli_layer *L = &m->layers[il];
    const int64_t D = hp->idx_head_dim;
    char name[96];
    int rc;
#define T(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    /* optional for glm-dsa in llama.cpp (deepseek32 requires them): a missing one leaves its ggml_mul /
     * ggml_add out of the norm */
    const bool glm = strcmp(m->arch, "glm-dsa") == 0;
    if ((rc = bind_vec(&L->idx_k_norm, f, T("indexer.k_norm.weight"), D, glm))) return rc;
    if ((rc = bind_vec(&L->idx_k_norm_b, f, T("indexer.k_norm.bias"), D, glm))) return rc;
    if ((rc = bind_mat(&L->idx_proj, f, T("indexer.proj.weight"), hp->n_embd, hp->idx_n_head))) return rc;
    if ((rc = bind_mat(&L->idx_wk, f, T("indexer.attn_k.weight"), hp->n_embd, D))) return rc;
    if ((rc = bind_mat(&L->idx_wq_b, f, T("indexer.attn_q_b.weight"), hp->q_lora_rank, hp->idx_n_head * D))) return rc;
#undef T
    return 0;
}

/* Layer il's place in DSA: its own indexer, or the previous full layer's top-k. */
static int load_dsa_layer(coli_model *m, const gguf_file *f, int il) {
    coli_layer *L = &m->layers[il];
    bool full;
    int rc = indexer_full(f, m, il, &full);
    if (rc) return rc;
    L->idx_slot = -1;
    if (!full) {
        if (m->hp.n_idx_layers == 0)
            return coli_fail(COLI_E_CORRUPT, "corrupt: layer %d shares the indexer top-k of a previous full layer "
                             "(attention.indexer.types), but no full layer precedes it", il);
        return 0;
    }
    if ((rc = load_indexer(m, f, il))) return rc;
    L->idx_slot = m->hp.n_idx_layers++;
    return 0;
}

/* Whether layer il slides: llama.cpp's load_swa_pattern(ml, family's period): the
 * file's attention.sliding_window_pattern as one flag per layer, or as the period
 * (0: every layer), else the family's period (il % period < period - 1 slide). */
static int layer_slides(const gguf_file *f, const coli_model *m, int il, bool *swa) {
    const coli_hparams *hp = &m->hp;
    *swa = false;
    if (hp->n_swa <= 0 || hp->swa_pattern <= 0) return 0;
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", m->arch);
    const gguf_kv *kv = gguf_get(f, key);
    int64_t n = hp->swa_pattern;
    if (kv && kv->type == GGUF_TYPE_ARRAY) {
        const uint32_t t = kv->arr_type;
        if (t != GGUF_TYPE_BOOL && t != GGUF_TYPE_UINT32 && t != GGUF_TYPE_INT32)
            return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' is an array of %s (bool or integers)", key,
                             gguf_type_name(t));
        *swa = (uint64_t)il < kv->arr_n && gguf_arr_i64(kv, (uint64_t)il) != 0;
        return 0;
    }
    if (kv) {
        uint32_t v;
        if (gguf_get_u32(f, key, &v) < 0) return colibri_last_error_code();
        n = v;
    }
    *swa = n == 0 || il % n < n - 1;
    return 0;
}

/* A [rows][n] F32 (or F16...) matrix of per-expert biases as owned f32 (gpt-oss's expert biases). */
static int bind_rows(float **out, const gguf_file *f, const char *name, int64_t n, int64_t rows) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return coli_fail(COLI_E_MISSING, "missing: tensor '%s' is not in the file", name);
    if (t->ne[0] != n || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
        return coli_fail(COLI_E_CORRUPT,
                         "corrupt: tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 "], expected [%" PRId64
                         ", %" PRId64 "]",
                         name, t->ne[0], t->ne[1], t->ne[2], n, rows);
    coli_to_float_fn to_float = coli_kernels()->type[t->type].to_float;
    if (!to_float)
        return coli_fail(COLI_E_UNSUPPORTED, "unsupported: tensor '%s' has type %s", name,
                         ggml_type_get(t->type)->name);
    *out = malloc((size_t)n * (size_t)rows * sizeof(float));
    if (!*out) return coli_fail(COLI_E_NOMEM, "out of memory");
    const size_t rb = coli_row_size(t->type, n);
    for (int64_t r = 0; r < rows; r++) to_float((const char *)t->data + (size_t)r * rb, *out + (size_t)r * n, n);
    return 0;
}

/* A Gated DeltaNet layer's tensors (llama.cpp's load_block_trunk, is_recr branch). */
static int load_gdn_layer(coli_model *m, const gguf_file *f, int il) {
    coli_hparams *hp = &m->hp;
    coli_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, S = hp->ssm_d_state, NV = hp->ssm_n_v;
    const int64_t KD = S * hp->ssm_n_k, VD = S * NV, conv_dim = 2 * KD + VD;
    char name[96];
    int rc;
#define T(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    if (gguf_find_tensor(f, T("attn_qkv.weight"))) {
        if ((rc = bind_mat(&L->ssm_qkv, f, name, E, conv_dim))) return rc;
        if ((rc = bind_mat(&L->ssm_gate, f, T("attn_gate.weight"), E, VD))) return rc;
    } else { /* an older qwen3next file: one ssm_in, q k v z per key-head group */
        if ((rc = bind_mat(&L->ssm_qkv, f, T("ssm_in.weight"), E, conv_dim + VD))) return rc;
        L->ssm_legacy_in = true;
    }
    const gguf_tensor *t = gguf_find_tensor(f, T("ssm_conv1d.weight"));
    if (!t) return coli_fail(COLI_E_MISSING, "missing: tensor '%s' is not in the file", name);
    if (t->type != GGML_TYPE_F32 || t->ne[0] != hp->ssm_d_conv || t->ne[1] != conv_dim || t->ne[2] != 1)
        return coli_fail(COLI_E_CORRUPT, "corrupt: tensor '%s' must be F32 [%d, %" PRId64 "] (llama.cpp's ssm_conv)",
                         name, hp->ssm_d_conv, conv_dim);
    if ((rc = bind_rows(&L->ssm_conv1d, f, name, hp->ssm_d_conv, conv_dim))) return rc;
    if ((rc = bind_vec(&L->ssm_dt, f, T("ssm_dt.bias"), NV, false))) return rc;
    if ((rc = bind_vec(&L->ssm_a, f, T("ssm_a"), NV, false))) return rc;
    if (hp->gdn_k_modulo) {
        if ((rc = bind_mat(&L->ssm_beta, f, T("ssm_beta.weight"), E, NV))) return rc;
        if ((rc = bind_mat(&L->ssm_alpha, f, T("ssm_alpha.weight"), E, NV))) return rc;
    } else if ((rc = bind_mat(&L->ssm_ba, f, T("ssm_ba.weight"), E, 2 * NV))) {
        return rc;
    }
    if ((rc = bind_vec(&L->ssm_norm, f, T("ssm_norm.weight"), S, false))) return rc;
    if ((rc = bind_mat(&L->ssm_out, f, T("ssm_out.weight"), VD, E))) return rc;
#undef T
    L->rs_slot = hp->n_rs_layers++;
    return 0;
}

/* Layer L's RoPE over n_rot dims: the global layers' base, scaling and YaRN, or the sliding layers' base. */
static void layer_rope(const coli_hparams *hp, coli_layer *L, int n_rot) {
    coli_rope_params *r = &L->rope;
    const bool scaled = !L->is_swa || hp->swa_rope_global; /* the global layers' scaling and YaRN */
    r->base = L->is_swa ? hp->rope_base_swa : hp->rope_base;
    r->freq_scale = scaled ? hp->rope_scale : 1.0f;
    r->ext_factor = scaled ? hp->yarn_ext_factor : 0.0f;
    r->attn_factor = scaled ? hp->yarn_attn_factor : 1.0f;
    r->type = hp->rope_type;
    /* ggml_rope_yarn_corr_dims */
    const float lo = floorf(yarn_corr_dim(n_rot, hp->n_ctx_orig_yarn, hp->yarn_beta_fast, r->base));
    const float hi = ceilf(yarn_corr_dim(n_rot, hp->n_ctx_orig_yarn, hp->yarn_beta_slow, r->base));
    r->corr[0] = lo > 0.0f ? lo : 0.0f;
    r->corr[1] = hi < (float)(n_rot - 1) ? hi : (float)(n_rot - 1);
}

static int load_layer(coli_model *m, const gguf_file *f, int il) {
    const coli_hparams *hp = &m->hp;
    coli_layer *L = &m->layers[il];
    char name[96];
    int rc;
#define T(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    bool recr = false; /* a Gated DeltaNet layer */
    L->rs_slot = -1;
    if (hp->gdn && (rc = gdn_layer_recurrent(f, m->arch, il, hp->n_layer, &recr))) return rc;
    L->kv_slot = recr ? -1 : m->hp.n_kv_layers++;
    if ((rc = bind_vec(&L->attn_norm, f, T("attn_norm.weight"), hp->n_embd, false))) return rc;
    if ((rc = bind_vec(&L->ffn_norm, f, hp->ffn_norm_post_attn ? T("post_attention_norm.weight") : T("ffn_norm.weight"),
                       hp->n_embd, false)))
        return rc;
    if (hp->qk_norm && !recr) {
        const int64_t qn = hp->qk_norm_full ? (int64_t)hp->n_head * hp->head_dim : hp->head_dim;
        const int64_t kn = hp->qk_norm_full ? (int64_t)hp->n_head_kv * hp->head_dim : hp->head_dim;
        if ((rc = bind_vec(&L->q_norm, f, T("attn_q_norm.weight"), qn, hp->qk_norm_optional))) return rc;
        if ((rc = bind_vec(&L->k_norm, f, T("attn_k_norm.weight"), kn, hp->qk_norm_optional))) return rc;
    }
    if (hp->post_norms) {
        if ((rc = bind_vec(&L->post_attn_norm, f, T("post_attention_norm.weight"), hp->n_embd, false))) return rc;
        if ((rc = bind_vec(&L->post_ffn_norm, f, T("post_ffw_norm.weight"), hp->n_embd, false))) return rc;
    }
    if (recr) {
        if ((rc = load_gdn_layer(m, f, il))) return rc;
    } else if (hp->mla || hp->mla_fused) {
        if ((rc = load_mla(m, f, il))) return rc;
        if (hp->dsa && (rc = load_dsa_layer(m, f, il))) return rc;
    } else {
        const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim;
        const int64_t k_dim = (int64_t)hp->n_head_kv * hp->head_dim;
        const int64_t v_dim = (int64_t)hp->n_head_kv * hp->head_dim_v;
        if ((rc = bind_mat(&L->wq, f, T("attn_q.weight"), hp->n_embd, hp->attn_gated ? 2 * q_dim : q_dim))) return rc;
        if ((rc = bind_mat(&L->wk, f, T("attn_k.weight"), hp->n_embd, k_dim))) return rc;
        if ((rc = bind_mat(&L->wv, f, T("attn_v.weight"), hp->n_embd, v_dim))) return rc;
        if ((rc = bind_mat(&L->wo, f, T("attn_output.weight"), (int64_t)hp->n_head * hp->head_dim_v, hp->n_embd)))
            return rc;
        if ((rc = bind_vec(&L->bq, f, T("attn_q.bias"), q_dim, true))) return rc;
        if ((rc = bind_vec(&L->bk, f, T("attn_k.bias"), k_dim, true))) return rc;
        if ((rc = bind_vec(&L->bv, f, T("attn_v.bias"), v_dim, true))) return rc;
        if ((rc = bind_vec(&L->bo, f, T("attn_output.bias"), hp->n_embd, !hp->attn_sinks))) return rc;
        if (hp->attn_sinks && (rc = bind_vec(&L->attn_sinks, f, T("attn_sinks.weight"), hp->n_head, false))) return rc;
    }
    L->is_moe = hp->n_expert > 0 && il >= hp->n_layer_dense_lead;
    if (L->is_moe) {
        const gguf_tensor *router = gguf_find_tensor(f, T("ffn_gate_inp.weight"));
        if (router && router->ne[0] == hp->n_embd && router->ne[1] != hp->n_expert)
            return coli_fail(COLI_E_CORRUPT, "corrupt: router '%s' chooses among %" PRId64 " experts, but the file "
                             "declares %d experts", name, router->ne[1], hp->n_expert);
        if ((rc = bind_mat(&L->ffn_gate_inp, f, name, hp->n_embd, hp->n_expert))) return rc;
        /* glm4moe's trunk requires its selection bias (src/models/glm4-moe.cpp); the others may lack it */
        if ((rc = bind_vec(&L->exp_probs_b, f, T("exp_probs_b.bias"), hp->n_expert, strcmp(m->arch, "glm4moe") != 0)))
            return rc;
        if ((rc = bind_experts(&L->exps, f, il, hp->n_embd, hp->n_ff_exp, hp->n_expert))) return rc;
        if (hp->gating == COLI_GATE_SOFTMAX_WEIGHT) { /* gpt-oss: router and per-expert biases, all required */
            if ((rc = bind_vec(&L->ffn_gate_inp_b, f, T("ffn_gate_inp.bias"), hp->n_expert, false))) return rc;
            if ((rc = bind_rows(&L->gate_exps_b, f, T("ffn_gate_exps.bias"), hp->n_ff_exp, hp->n_expert))) return rc;
            if ((rc = bind_rows(&L->up_exps_b, f, T("ffn_up_exps.bias"), hp->n_ff_exp, hp->n_expert))) return rc;
            if ((rc = bind_rows(&L->down_exps_b, f, T("ffn_down_exps.bias"), hp->n_embd, hp->n_expert))) return rc;
        }
        if (hp->n_ff_shexp > 0) {
            if (hp->gdn && (rc = bind_mat(&L->gate_inp_shexp, f, T("ffn_gate_inp_shexp.weight"), hp->n_embd, 1)))
                return rc;
            if ((rc = bind_mat(&L->gate_shexp, f, T("ffn_gate_shexp.weight"), hp->n_embd, hp->n_ff_shexp))) return rc;
            if ((rc = bind_mat(&L->up_shexp, f, T("ffn_up_shexp.weight"), hp->n_embd, hp->n_ff_shexp))) return rc;
            if ((rc = bind_mat(&L->down_shexp, f, T("ffn_down_shexp.weight"), hp->n_ff_shexp, hp->n_embd))) return rc;
        }
    } else {
        if (hp->n_ff <= 0)
            return coli_fail(COLI_E_MISSING, "missing: the model has no '%s.feed_forward_length' (layer %d has a "
                             "dense feed-forward)", m->arch, il);
        if ((rc = bind_mat(&L->ffn_gate, f, T("ffn_gate.weight"), hp->n_embd, hp->n_ff))) return rc;
        if ((rc = bind_mat(&L->ffn_up, f, T("ffn_up.weight"), hp->n_embd, hp->n_ff))) return rc;
        if ((rc = bind_mat(&L->ffn_down, f, T("ffn_down.weight"), hp->n_ff, hp->n_embd))) return rc;
    }
#undef T
    if ((rc = layer_slides(f, m, il, &L->is_swa))) return rc;
    if (L->is_swa && L->kv_slot >= 0 && L->kv_slot < COLI_KV_SWA_BITS) /* its cache keeps the window only */
        m->hp.kv_swa[L->kv_slot / 64] |= 1ull << (L->kv_slot % 64);
    layer_rope(hp, L, hp->n_rot);
    return 0;
}

/* Layer il's key/value heads: attention.head_count_kv's entry for it when the file has one per layer. */
static int layer_kv_heads(const gguf_file *f, const coli_model *m, int il) {
    char key[160];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch);
    const gguf_kv *kv = gguf_get(f, key);
    if (kv && kv->type == GGUF_TYPE_ARRAY) return (int)gguf_arr_i64(kv, (uint64_t)il); /* checked in load_hparams */
    return m->hp.n_head_kv;
}

/* A Gemma 4 layer (llama_model_gemma4::load_arch_tensors): its head size and key/value heads by its kind, K/V
 * of its own below n_kv_from_start (the values the keys where attn_v is absent), a dense MLP, and where it has a
 * router the experts beside it with their norms and scales. */
static int load_gemma4_layer(coli_model *m, const gguf_file *f, int il) {
    coli_hparams *hp = &m->hp;
    coli_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, H = hp->n_head;
    char name[96];
    int rc;
#define T(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    L->rs_slot = -1;
    L->out_scale = 1.0f;
    if ((rc = layer_slides(f, m, il, &L->is_swa))) return rc;
    L->hd = L->is_swa ? hp->head_dim_swa : hp->head_dim_full;
    L->n_rot = L->is_swa ? hp->n_rot_swa : hp->n_rot_full;
    L->n_kv_head = layer_kv_heads(f, m, il);
    if (!L->is_swa && !m->rope_freqs) /* llama.cpp: required on the first global layer */
        return coli_fail(COLI_E_MISSING, "missing: tensor 'rope_freqs.weight' is not in the file");
    const int64_t hd = L->hd, kvd = (int64_t)L->n_kv_head * hd;
    if (il < hp->n_kv_from_start) {
        L->kv_slot = hp->n_kv_layers++;
    } else { /* llama.cpp's layer_reuse_cb: the last sliding or global layer with a cache */
        const int src = hp->n_kv_from_start - (L->is_swa ? 2 : 1);
        const coli_layer *S = &m->layers[src];
        if (S->is_swa != L->is_swa || S->hd != L->hd || S->n_kv_head != L->n_kv_head)
            return coli_fail(COLI_E_UNSUPPORTED,
                             "unsupported: gemma4 layer %d (%s) would reuse the KV of layer %d (%s, %d heads of %d, "
                             "not %d of %d)", il, L->is_swa ? "sliding" : "global", src,
                             S->is_swa ? "sliding" : "global", S->n_kv_head, S->hd, L->n_kv_head, L->hd);
        L->kv_slot = S->kv_slot;
        L->kv_shared = true;
    }
    if (gguf_find_tensor(f, T("attn_qkv.weight")))
        return coli_fail(COLI_E_UNSUPPORTED, "unsupported: gemma4 with a fused '%s'", name);
    if ((rc = bind_vec(&L->attn_norm, f, T("attn_norm.weight"), E, false))) return rc;
    if ((rc = bind_mat(&L->wq, f, T("attn_q.weight"), E, H * hd))) return rc;
    if ((rc = bind_vec(&L->q_norm, f, T("attn_q_norm.weight"), hd, false))) return rc;
    if (!L->kv_shared) {
        if ((rc = bind_mat(&L->wk, f, T("attn_k.weight"), E, kvd))) return rc;
        if ((rc = bind_vec(&L->k_norm, f, T("attn_k_norm.weight"), hd, false))) return rc;
        if (gguf_find_tensor(f, T("attn_v.weight"))) {
            if ((rc = bind_mat(&L->wv, f, name, E, kvd))) return rc;
        } else {
            L->v_from_k = true;
        }
    }
    if ((rc = bind_mat(&L->wo, f, T("attn_output.weight"), H * hd, E))) return rc;
    if ((rc = bind_vec(&L->post_attn_norm, f, T("post_attention_norm.weight"), E, false))) return rc;
    if ((rc = bind_vec(&L->ffn_norm, f, T("ffn_norm.weight"), E, false))) return rc;
    L->n_ff = hp->n_ff;
    snprintf(name, sizeof name, "%s.feed_forward_length", m->arch);
    const gguf_kv *hff = gguf_get(f, name);
    if (hff && hff->type == GGUF_TYPE_ARRAY) L->n_ff = (int)gguf_arr_i64(hff, (uint64_t)il); /* checked above */
    if ((rc = bind_mat(&L->ffn_gate, f, T("ffn_gate.weight"), E, L->n_ff))) return rc;
    if ((rc = bind_mat(&L->ffn_up, f, T("ffn_up.weight"), E, L->n_ff))) return rc;
    if ((rc = bind_mat(&L->ffn_down, f, T("ffn_down.weight"), L->n_ff, E))) return rc;
    if ((rc = bind_vec(&L->post_ffn_norm, f, T("post_ffw_norm.weight"), E, false))) return rc;
    float *os = NULL;
    if ((rc = bind_vec(&os, f, T("layer_output_scale.weight"), 1, true))) return rc;
    if (os) L->out_scale = os[0];
    free(os);
    L->is_moe = gguf_find_tensor(f, T("ffn_gate_inp.weight")) != NULL;
    if (!L->is_moe && (gguf_find_tensor(f, T("ffn_gate_up_exps.weight")) || gguf_find_tensor(f, T("ffn_down_exps.weight"))))
        return coli_fail(COLI_E_MISSING, "missing: tensor 'blk.%d.ffn_gate_inp.weight' (layer %d has routed experts "
                         "but no router)", il, il);
    if (L->is_moe) {
        const int X = hp->n_expert;
        const int64_t F = hp->n_ff_exp;
        if (X <= 0) return coli_fail(COLI_E_CORRUPT, "corrupt: '%s' routes, but the file declares no experts", name);
        if ((rc = bind_mat(&L->ffn_gate_inp, f, name, E, X))) return rc;
        if ((rc = bind_vec(&L->gate_inp_s, f, T("ffn_gate_inp.scale"), E, false))) return rc;
        if ((rc = bind_vec(&L->pre_ffn_norm_2, f, T("pre_ffw_norm_2.weight"), E, false))) return rc;
        if ((rc = bind_vec(&L->post_ffn_norm_1, f, T("post_ffw_norm_1.weight"), E, false))) return rc;
        if ((rc = bind_vec(&L->post_ffn_norm_2, f, T("post_ffw_norm_2.weight"), E, false))) return rc;
        coli_layer_experts *le = &L->exps;
        if (gguf_find_tensor(f, T("ffn_gate_up_exps.weight"))) {
            if ((rc = bind_exps(&le->gate, &le->gate_stride, &le->gate_off, f, name, E, 2 * F, X))) return rc;
            le->gate_up_fused = true;
            le->up = le->gate;
            le->up_stride = 0;
            le->up_off = 0;
            if ((rc = bind_exps(&le->down, &le->down_stride, &le->down_off, f, T("ffn_down_exps.weight"), F, E, X)))
                return rc;
        } else if ((rc = bind_experts(le, f, il, E, F, X))) {
            return rc;
        }
        if ((rc = bind_vec(&L->down_exps_s, f, T("ffn_down_exps.scale"), X, true))) return rc;
    }
    if (hp->n_embd_per_layer > 0) { /* per-layer embeddings (E2B/E4B) */
        const int64_t P = hp->n_embd_per_layer;
        if ((rc = bind_mat(&L->ple_gate, f, T("inp_gate.weight"), E, P))) return rc;
        if ((rc = bind_mat(&L->ple_proj, f, T("proj.weight"), P, E))) return rc;
        if ((rc = bind_vec(&L->ple_post_norm, f, T("post_norm.weight"), E, false))) return rc;
    }
#undef T
    if (L->is_swa && !L->kv_shared && L->kv_slot < COLI_KV_SWA_BITS)
        hp->kv_swa[L->kv_slot / 64] |= 1ull << (L->kv_slot % 64);
    layer_rope(hp, L, L->n_rot);
    if (!L->is_swa) L->rope.freq_factors = m->rope_freqs;
    return 0;
}

/* The first MTP (nextn) block, for drafts (mtp.h): a full-attention (or MLA) block with a routed FFN, as
 * llama.cpp's graph_mtp (src/models/glm4-moe.cpp, deepseek2.cpp, qwen35moe.cpp) reads it. The sparse-attention
 * families' block (deepseek32.cpp, glm-dsa.cpp) runs dense MLA: the file's indexer for it goes unread, and
 * attention.indexer.types speaks of the trunk's layers only. A file without the block's tensors (a trunk-only
 * conversion) has no drafts from it. */
static int load_mtp_block(coli_model *m, const gguf_file *f) {
    coli_hparams *hp = &m->hp;
    if (hp->n_nextn <= 0 || hp->gemma4 || hp->n_expert == 0) return 0;
    const int il = hp->n_layer;
    char name[96];
#define T(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, il), name)
    if (!gguf_find_tensor(f, T("nextn.eh_proj.weight"))) return 0;
    coli_layer *grown = realloc(m->layers, (size_t)(il + 1) * sizeof *m->layers);
    if (!grown) return coli_fail(COLI_E_NOMEM, "out of memory");
    m->layers = grown;
    memset(&m->layers[il], 0, sizeof *m->layers);
    m->has_mtp = true; /* from here coli_model_free frees the block's vectors */
    const int n_kv = hp->n_kv_layers;
    const uint64_t swa0 = hp->kv_swa[n_kv / 64];
    const bool dsa = hp->dsa;
    hp->dsa = false; /* no indexer: n_idx_layers (the trunk's indexer key cache) stays as it is */
    int rc = load_layer(m, f, il);
    hp->dsa = dsa;
    hp->n_kv_layers = n_kv; /* the block's cache is its own (one layer: kv_slot 0 of its view) */
    hp->kv_swa[n_kv / 64] = swa0;
    if (rc) return rc;
    m->layers[il].kv_slot = 0;
    m->layers[il].idx_slot = -1;
    if ((rc = bind_mat(&m->mtp_eh_proj, f, T("nextn.eh_proj.weight"), 2 * (int64_t)hp->n_embd, hp->n_embd))) return rc;
    if ((rc = bind_vec(&m->mtp_enorm, f, T("nextn.enorm.weight"), hp->n_embd, false))) return rc;
    if ((rc = bind_vec(&m->mtp_hnorm, f, T("nextn.hnorm.weight"), hp->n_embd, false))) return rc;
    if ((rc = bind_vec(&m->mtp_head_norm, f, T("nextn.shared_head_norm.weight"), hp->n_embd, true))) return rc;
    if (gguf_find_tensor(f, T("nextn.shared_head_head.weight")) &&
        (rc = bind_mat(&m->mtp_head, f, name, hp->n_embd, hp->n_vocab)))
        return rc;
    if (gguf_find_tensor(f, T("nextn.embed_tokens.weight")) &&
        (rc = bind_mat(&m->mtp_embd, f, name, hp->n_embd, hp->n_vocab)))
        return rc;
#undef T
    if (m->mtp_embd.n_in && !coli_kernels()->type[m->mtp_embd.type].to_float)
        return coli_fail(COLI_E_UNSUPPORTED, "unsupported: the MTP block's embedding has type %s",
                         ggml_type_get(m->mtp_embd.type)->name);
    return 0;
}

int coli_model_load(coli_model *m, const gguf_file *f) {
    memset(m, 0, sizeof *m);
    m->file = f;
    gguf_str arch;
    int rc = gguf_get_str(f, "general.architecture", &arch);
    if (rc < 0) return rc;
    if (rc == 0) return coli_fail(COLI_E_MISSING, "missing: the file names no general.architecture");
    if (arch.len == 0 || arch.len >= sizeof m->arch || memchr(arch.ptr, '\0', arch.len))
        return coli_fail(COLI_E_UNSUPPORTED, "unsupported: architecture name of %" PRIu64 " bytes", arch.len);
    memcpy(m->arch, arch.ptr, arch.len);
    if ((rc = load_hparams(m, f))) return rc;
    coli_hparams *hp = &m->hp;

    const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb) return coli_fail(COLI_E_MISSING, "missing: tensor 'token_embd.weight' is not in the file");
    if (emb->ne[1] <= 0 || emb->ne[1] > (1 << 24))
        return coli_fail(COLI_E_CORRUPT, "corrupt: token_embd.weight has %" PRId64 " rows", emb->ne[1]);
    hp->n_vocab = (int)emb->ne[1];
    char key[160];
    uint32_t gating;
    snprintf(key, sizeof key, "%s.expert_gating_func", m->arch);
    if (!hp->dsa && (hp->mla || hp->mla_fused) && hp->n_expert > 0 && gguf_get_u32(f, key, &gating) == 0 && (hp->n_layer == 47 || hp->n_layer == 48) &&
        hp->n_vocab == 154880)
        hp->gating = COLI_GATE_SIGMOID; /* GLM-4.7-Flash files without the key (llama.cpp's special case) */
    if ((rc = bind_mat(&m->tok_embd, f, "token_embd.weight", hp->n_embd, hp->n_vocab))) return rc;
    if (gguf_find_tensor(f, "output.weight")) {
        if ((rc = bind_mat(&m->output, f, "output.weight", hp->n_embd, hp->n_vocab))) return rc;
    } else if (strcmp(m->arch, "olmoe") == 0 || strcmp(m->arch, "gpt-oss") == 0) { /* their output is required */
        return coli_fail(COLI_E_MISSING, "missing: tensor 'output.weight' is not in the file (%s ties no embeddings)",
                         m->arch);
    } else {
        m->output = m->tok_embd; /* tied embeddings */
    }
    if ((rc = bind_vec(&m->output_norm, f, "output_norm.weight", hp->n_embd, false))) return rc;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return coli_fail(COLI_E_NOMEM, "out of memory");
    if (hp->gemma4) { /* the global layers' proportional RoPE (one tensor for all of them) */
        if (gguf_find_tensor(f, "rope_freqs.weight") && (rc = bind_vec(&m->rope_freqs, f, "rope_freqs.weight", hp->head_dim_full / 2, false))) return rc;
        if (hp->n_embd_per_layer > 0) { /* per-layer embeddings: the table stays in the mapping, read per token */
            const int64_t LP = (int64_t)hp->n_layer * hp->n_embd_per_layer;
            if ((rc = bind_mat(&m->ple_tok_embd, f, "per_layer_token_embd.weight", LP, hp->n_vocab))) return rc;
            if (!coli_kernels()->type[m->ple_tok_embd.type].to_float)
                return coli_fail(COLI_E_UNSUPPORTED, "unsupported: tensor 'per_layer_token_embd.weight' has type %s",
                                 ggml_type_get(m->ple_tok_embd.type)->name);
            if ((rc = bind_mat(&m->ple_model_proj, f, "per_layer_model_proj.weight", hp->n_embd, LP))) return rc;
            if ((rc = bind_vec(&m->ple_proj_norm, f, "per_layer_proj_norm.weight", hp->n_embd_per_layer, false)))
                return rc;
        }
    }
    for (int il = 0; il < hp->n_layer; il++)
        if ((rc = hp->gemma4 ? load_gemma4_layer(m, f, il) : load_layer(m, f, il))) return rc;
    if (hp->gemma4) { /* the cache's rows: the widest layer's (each layer reads its own heads of them) */
        hp->kv_k_dim = 0;
        for (int il = 0; il < hp->n_layer; il++) {
            const coli_layer *L = &m->layers[il];
            if (!L->kv_shared && L->n_kv_head * L->hd > hp->kv_k_dim) hp->kv_k_dim = L->n_kv_head * L->hd;
        }
        hp->kv_v_dim = hp->kv_k_dim;
    }
    if (hp->dsa && !(m->idx_rot = hadamard(hp->idx_head_dim))) return coli_fail(COLI_E_NOMEM, "out of memory");
    /* llama.cpp skips the block unless asked to draft with it: a block it cannot read costs the drafts only */
    if ((rc = load_mtp_block(m, f))) {
        if (rc == COLI_E_NOMEM) return rc;
        m->mtp_eh_proj.n_in = 0;
        coli_clear_error();
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        m->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    return 0;
}

void coli_model_free(coli_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int il = 0; il < m->hp.n_layer + (m->has_mtp ? 1 : 0); il++) {
            coli_layer *L = &m->layers[il];
            free(L->attn_norm);
            free(L->q_norm);
            free(L->k_norm);
            free(L->post_attn_norm);
            free(L->ffn_norm);
            free(L->post_ffn_norm);
            free(L->bq);
            free(L->bk);
            free(L->bv);
            free(L->bo);
            free(L->exp_probs_b);
            free(L->ffn_gate_inp_b);
            free(L->gate_exps_b);
            free(L->up_exps_b);
            free(L->down_exps_b);
            free(L->attn_sinks);
            free(L->q_a_norm);
            free(L->kv_a_norm);
            free(L->idx_k_norm);
            free(L->idx_k_norm_b);
            free(L->ssm_conv1d);
            free(L->ssm_dt);
            free(L->ssm_a);
            free(L->ssm_norm);
            free(L->gate_inp_s);
            free(L->down_exps_s);
            free(L->pre_ffn_norm_2);
            free(L->post_ffn_norm_1);
            free(L->post_ffn_norm_2);
            free(L->ple_post_norm);
        }
    }
    free(m->layers);
    free(m->idx_rot);
    free(m->rope_freqs);
    free(m->ple_proj_norm);
    free(m->output_norm);
    free(m->mtp_enorm);
    free(m->mtp_hnorm);
    free(m->mtp_head_norm);
    memset(m, 0, sizeof *m);
}
