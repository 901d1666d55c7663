/* engine.c — colibri_open/colibri_close: the lifetime of one loaded model. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "experts.h"
#include "error.h"
#include "jsonbuf.h"
#include "kernels.h"
#include "matmul.h"
#include "quant.h"
#include "draft_model.h"
#include "mtp.h"
#include "repack.h"
#include "threadpool.h"
#include "tokenizer.h"

void colibri_config_default(colibri_config *cfg) {
    if (cfg) memset(cfg, 0, sizeof *cfg);
}

/* A digest of the file's size, its metadata and tensor table, and the first
 * and last bytes of its data: what a persisted KV cache must match. */
/* Tokens drafted per decode step where colibri_config.draft_tokens is 0 (bench/bench_draft.py) */
#define DRAFT_DEFAULT 4

/* An integer from the environment, lo..hi, else the default. */
static int env_int(const char *name, int dflt, int lo, int hi) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    const long x = strtol(v, &end, 10);
    return (*end || x < lo || x > hi) ? dflt : (int)x;
}

static void model_identity(colibri_engine *e) {
    const uint64_t size = gguf_file_size(e->gguf), head = gguf_data_offset(e->gguf);
    uint64_t h = coli_hash64(0x636f6c69627269ULL, &size, sizeof size);
    char *buf = malloc(1 << 16);
    const int fd = gguf_fd(e->gguf);
    const uint64_t spans[3][2] = {{0, head}, {head, 1 << 16}, {size > (1 << 16) ? size - (1 << 16) : 0, 1 << 16}};
    for (int i = 0; buf && i < 3; i++)
        for (uint64_t at = spans[i][0], end = spans[i][0] + spans[i][1]; at < end && at < size;) {
            size_t want = end - at < (1 << 16) ? (size_t)(end - at) : (1 << 16);
            ssize_t got = pread(fd, buf, want, (off_t)at);
            if (got <= 0) break;
            h = coli_hash64(h, buf, (size_t)got);
            at += (uint64_t)got;
        }
    free(buf);
    e->model_id = h;
    snprintf(e->model_id_hex, sizeof e->model_id_hex, "%016llx", (unsigned long long)h);
}

/* Weights, run state, sampling scratch: everything beyond the vocabulary. */
static int load_model(colibri_engine *e) {
    int rc = coli_model_load(&e->model, e->gguf);
    if (rc) return rc;
    const coli_hparams *hp = &e->model.hp;
    colibri_config *c = &e->cfg;
    if (c->n_ctx == 0) c->n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (c->n_ctx > hp->n_ctx_train) c->n_ctx = hp->n_ctx_train;
    if (c->n_batch == 0) c->n_batch = 512;
    if (c->n_batch > c->n_ctx) c->n_batch = c->n_ctx;
    if (c->n_threads == 0) c->n_threads = coli_physical_cores();
    if (c->n_slots == 0) c->n_slots = 1;
    if (c->n_slots > COLI_MAX_SLOTS)
        return coli_fail(COLI_E_ARG, "n_slots is %d; colibri serves 1 to %d slots", c->n_slots, COLI_MAX_SLOTS);
    if (c->n_batch < c->n_slots) c->n_batch = c->n_slots; /* a decode step is one batch of every slot */
    e->draft_k = c->draft_tokens < 0 ? 0 : c->draft_tokens == 0 ? DRAFT_DEFAULT : c->draft_tokens;
    if (e->draft_k > COLI_DRAFT_MAX) e->draft_k = COLI_DRAFT_MAX;
    const int logit_rows = COLI_MAX_SLOTS; /* a decode step of every slot; echo read-outs go in runs of this many */
    if (c->expert_cache_bytes < 0 || c->expert_pin_bytes < 0 || c->io_threads < 0)
        return coli_fail(COLI_E_ARG, "negative expert cache, pin budget or I/O threads");
    if (hp->n_expert > 0) {
        if (c->expert_policy < COLI_POLICY_DEFAULT || c->expert_policy > COLI_POLICY_LRFU)
            return coli_fail(COLI_E_ARG, "expert_policy %d: expected 0 (default), 1 (lru) or 2 (lrfu)",
                             c->expert_policy);
        const coli_store_config sc = {c->expert_cache_bytes, c->expert_pin_bytes, c->io_threads, c->direct_io != 0,
                                      c->no_prefetch == 0, c->expert_policy};
        if (!(e->experts = coli_experts_open(&e->model, e->gguf, &sc))) return colibri_last_error_code();
    }
    e->repacked_bytes = coli_model_repack(&e->model, c->expert_cache_bytes == 0, c->n_threads);
    if ((rc = coli_state_init(&e->state, &e->model, e->experts, c->n_ctx, c->n_batch, logit_rows, c->n_threads)))
        return rc;
    e->slots = calloc((size_t)c->n_slots, sizeof *e->slots);
    /* Gated DeltaNet models: recurrent-state checkpoints per slot and their spacing in prompt tokens (slots.c) */
    e->rs_ckpt_n = env_int("COLI_RS_CHECKPOINTS", 8, 0, COLI_RS_CKPT_MAX);
    e->rs_ckpt_every = env_int("COLI_RS_CHECKPOINT_EVERY", 512, 1, 1 << 30);
    e->rows = calloc((size_t)c->n_batch, sizeof *e->rows);
    if (!e->slots || !e->rows) return coli_fail(COLI_E_NOMEM, "out of memory");
    for (int i = 0; i < c->n_slots; i++) {
        if ((rc = coli_kv_init(&e->slots[i].kv, hp, c->n_ctx, c->n_batch))) return rc;
        e->slots[i].hist = malloc((size_t)c->n_ctx * sizeof(int32_t));
        if (!e->slots[i].hist) return coli_fail(COLI_E_NOMEM, "out of memory");
        const coli_kv *kv = &e->slots[i].kv;
        if (hp->gdn && e->draft_k > 0 && /* a verify's rejected rows are taken back from these copies (slots.c) */
            !(e->slots[i].rs_snap =
                  malloc((size_t)e->draft_k * kv->n_rs_layers * (kv->rs_conv + kv->rs_ssm) * sizeof(float))))
            return coli_fail(COLI_E_NOMEM, "out of memory for the recurrent state's copies a verify keeps");
    }
    if ((rc = coli_dm_open(e))) return rc;
    if (!e->dm && (rc = coli_mtp_open(e))) return rc; /* a draft model asked for takes the block's place */
    e->last_logits = e->state.logits;
    if ((rc = coli_stats_init(e))) return rc;
    model_identity(e);
    e->sample_p = malloc((size_t)hp->n_vocab * sizeof(float));
    e->sample_i = malloc((size_t)hp->n_vocab * sizeof(int32_t));
    if (!e->sample_p || !e->sample_i) return coli_fail(COLI_E_NOMEM, "out of memory");
    coli_rng_seed(&e->rng, 0x636f6c69ULL);
    e->loaded = true;
    return 0;
}

colibri_engine *colibri_open(const colibri_config *cfg) {
    coli_clear_error();
    if (!cfg || !cfg->model_path) {
        coli_fail(COLI_E_ARG, "colibri_open: no model path given");
        return NULL;
    }
    if (cfg->n_threads < 0 || cfg->n_ctx < 0 || cfg->n_slots < 0 || cfg->n_batch < 0) {
        coli_fail(COLI_E_ARG, "colibri_open: negative n_threads, n_ctx, n_slots or n_batch");
        return NULL;
    }
    colibri_engine *e = calloc(1, sizeof *e);
    if (!e) {
        coli_fail(COLI_E_NOMEM, "colibri_open: out of memory");
        return NULL;
    }
    e->cfg = *cfg;
    e->cfg.model_path = NULL; /* the caller's string; not kept */
    e->gguf = gguf_open(cfg->model_path);
    if (!e->gguf) goto fail;
    e->tok = coli_tokenizer_load(e->gguf);
    if (!e->tok) goto fail;
    if (!cfg->vocab_only && load_model(e) != 0) goto fail;
    e->cfg.draft_model_path = NULL; /* the caller's string: read while loading only */
    return e;
fail:
    colibri_close(e);
    return NULL;
}

void colibri_close(colibri_engine *e) {
    if (!e) return;
    if (e->slots)
        for (int i = 0; i < e->cfg.n_slots; i++) {
            coli_kv_free(&e->slots[i].kv);
            free(e->slots[i].hist);
            free(e->slots[i].echo_lp);
            free(e->slots[i].echo_ids);
            free(e->slots[i].echo_top);
            free(e->slots[i].prompt_logits);
            coli_slot_free_checkpoints(&e->slots[i]);
            free(e->slots[i].rs_snap);
        }
    coli_mtp_close(e); /* before the trunk's state: they borrow its threads */
    coli_dm_close(e);
    free(e->slots);
    free(e->rows);
    coli_state_free(&e->state);
    coli_experts_close(e->experts);
    coli_stats_free(e);
    coli_model_free(&e->model);
    free(e->sample_p);
    free(e->sample_i);
    coli_tokenizer_free(e->tok);
    gguf_close(e->gguf);
    free(e);
}

/* The file's description plus what opening decided (context, threads, memory). */
int64_t colibri_model_info(colibri_engine *e, char *out, size_t cap) {
    if (!e) return coli_fail(COLI_E_ARG, "colibri_model_info: no engine");
    int64_t n = colibri_gguf_describe((const colibri_gguf *)(const void *)e->gguf, NULL, 0);
    if (n < 0) return n;
    char *desc = malloc((size_t)n + 1);
    if (!desc) return coli_fail(COLI_E_NOMEM, "out of memory");
    colibri_gguf_describe((const colibri_gguf *)(const void *)e->gguf, desc, (size_t)n + 1);
    jsonbuf b;
    jb_init(&b);
    jb_raw(&b, desc, (size_t)n - 1); /* without the closing brace */
    free(desc);
    jb_printf(&b, ",\"vocab_only\":%s,\"kernels\":\"%s\"", e->loaded ? "false" : "true", coli_kernels()->name);
    if (e->loaded) {
        const coli_state *s = &e->state;
        const size_t kv_bytes = coli_kv_bytes(&e->model.hp, e->cfg.n_ctx, e->cfg.n_batch);
        jb_printf(&b, ",\"n_ctx\":%d,\"n_batch\":%d,\"n_threads\":%d,\"n_slots\":%d", e->cfg.n_ctx,
                  e->cfg.n_batch, e->cfg.n_threads, e->cfg.n_slots);
        jb_printf(&b, ",\"n_layer_dense_lead\":%d", e->model.hp.n_layer_dense_lead);
        jb_printf(&b, ",\"kv_bytes_per_slot\":%zu,\"state_bytes\":%zu,\"model_id\":\"%s\"", kv_bytes, s->bytes,
                  e->model_id_hex);
        jb_printf(&b, ",\"repacked_bytes\":%lld", (long long)e->repacked_bytes);
    }
    jb_puts(&b, "}");
    return jb_finish(&b, out, cap);
}

int colibri_file_state(const colibri_engine *e) {
    if (!e || !e->gguf) return coli_fail(COLI_E_ARG, "colibri_file_state: no engine");
    return gguf_file_state(e->gguf);
}

static int need_model(const colibri_engine *e, const char *fn) {
    if (!e) return coli_fail(COLI_E_ARG, "%s: no engine", fn);
    if (!e->loaded) return coli_fail(COLI_E_STATE, "%s: the engine was opened with vocab_only", fn);
    return 0;
}

int colibri_n_ctx(const colibri_engine *e) { return (e && e->loaded) ? e->cfg.n_ctx : 0; }

int colibri_n_batch(const colibri_engine *e) { return (e && e->loaded) ? e->cfg.n_batch : 0; }

int colibri_draft_tokens(const colibri_engine *e) { return (e && e->loaded) ? e->draft_k : 0; }
const char *colibri_drafter(const colibri_engine *e) {
    return !e || !e->loaded || e->draft_k <= 0 ? "" : e->dm ? "model" : e->mtp ? "mtp" : "lookup";
}

int colibri_eval(colibri_engine *e, const int32_t *tokens, int n, int pos, float *logits_out, int all_logits) {
    int rc = need_model(e, "colibri_eval");
    if (rc) return rc;
    coli_clear_error();
    if (!tokens || n <= 0 || pos < 0) return coli_fail(COLI_E_ARG, "colibri_eval: no tokens or a negative position");
    coli_slot *sl = &e->slots[0];
    if (sl->state != COLI_SLOT_IDLE) return coli_fail(COLI_E_STATE, "colibri_eval: slot 0 is serving a request");
    if ((int64_t)pos + n > e->cfg.n_ctx)
        return coli_fail(COLI_E_TOO_LONG, "too_long: %d tokens at position %d need %lld positions, the context holds %d",
                         n, pos, (long long)pos + n, e->cfg.n_ctx);
    if (pos > sl->n_past) return coli_fail(COLI_E_ARG, "colibri_eval: position %d is past the %d cached", pos, sl->n_past);
    const int V = e->model.hp.n_vocab;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return coli_fail(COLI_E_ARG, "token id %d at index %d is outside the vocabulary (0..%d)", tokens[i], i,
                             V - 1);
    sl->n_past = pos; /* later positions are overwritten */
    sl->prompt_logits_n = 0;
    coli_slot_drop_checkpoints(sl, pos);
    if (!coli_kv_resumable(&sl->kv, pos)) {
        /* a rewind past what the sliding-window layers still hold: the cached tokens run again from 0 */
        int32_t *again = malloc((size_t)pos * sizeof(int32_t));
        if (!again) return coli_fail(COLI_E_NOMEM, "out of memory");
        memcpy(again, sl->hist, (size_t)pos * sizeof(int32_t));
        sl->n_past = 0;
        rc = colibri_eval(e, again, pos, 0, NULL, 0);
        free(again);
        if (rc) return rc;
    }
    if (e->model.hp.gdn && pos > 0 && sl->kv.rs_pos != pos) {
        /* a Gated DeltaNet model's state cannot rewind: from the newest checkpoint at or before pos, the cached
         * tokens after it run again (none: the forward pass refuses by name) */
        const int c = coli_slot_restore_checkpoint(sl, pos);
        if (c > 0 && c < pos) {
            int32_t *again = malloc((size_t)(pos - c) * sizeof(int32_t));
            if (!again) return coli_fail(COLI_E_NOMEM, "out of memory");
            memcpy(again, sl->hist + c, (size_t)(pos - c) * sizeof(int32_t));
            sl->n_past = c;
            rc = colibri_eval(e, again, pos - c, c, NULL, 0);
            free(again);
            if (rc) return rc;
        }
    }
    for (int done = 0; done < n;) {
        const int chunk = n - done < e->cfg.n_batch ? n - done : e->cfg.n_batch;
        for (int i = 0; i < chunk; i++) e->rows[i] = coli_row_at(tokens[done + i], pos + done + i, &sl->kv);
        rc = coli_forward(&e->model, &e->state, e->rows, chunk, COLI_ROWS_BATCH); /* llama.cpp's bits */
        if (!rc) {
            coli_stats_forward(e);
            coli_stats_rows(e, chunk, false, NULL);
        }
        if (!rc && logits_out && all_logits)
            rc = coli_logits(&e->model, &e->state, 0, chunk, logits_out + (size_t)done * V);
        else if (!rc && done + chunk == n)
            rc = coli_logits(&e->model, &e->state, chunk - 1, 1, e->state.logits);
        if (rc) return rc;
        memcpy(sl->hist + pos + done, tokens + done, (size_t)chunk * sizeof(int32_t));
        sl->n_past = pos + done + chunk;
        done += chunk;
    }
    if (all_logits && logits_out)
        memcpy(e->state.logits, logits_out + (size_t)(n - 1) * V, (size_t)V * sizeof(float));
    e->last_logits = e->state.logits;
    if (logits_out && !all_logits) memcpy(logits_out, e->state.logits, (size_t)V * sizeof(float));
    return 0;
}

int32_t colibri_sample(colibri_engine *e, const colibri_sampling *p, float *logprob) {
    int rc = need_model(e, "colibri_sample");
    if (rc) return rc;
    const int V = e->model.hp.n_vocab;
    const float *logits = e->last_logits;
    float temperature = p ? p->temperature : 0.0f;
    float top_p = p ? p->top_p : 1.0f;
    int top_k = p ? p->top_k : 0;
    if (!(temperature >= 0.0f) || !(top_p > 0.0f && top_p <= 1.0f) || top_k < 0)
        return coli_fail(COLI_E_ARG, "colibri_sample: temperature must be >= 0, top_p in (0, 1] and top_k >= 0");
    int32_t tok = temperature == 0.0f ? coli_argmax(logits, V)
                                      : coli_sample(logits, V, temperature, top_p, top_k, &e->rng, e->sample_p,
                                                    e->sample_i);
    if (logprob) *logprob = coli_logprob(logits, V, tok);
    return tok;
}

void colibri_seed(colibri_engine *e, uint64_t seed) {
    if (e) coli_rng_seed(&e->rng, seed);
}

int colibri_score(colibri_engine *e, const int32_t *tokens, int n, int first, float *nll_out, int32_t *argmax_out) {
    int rc = need_model(e, "colibri_score");
    if (rc) return rc;
    if (!tokens || n < 2 || first < 0 || first >= n - 1)
        return coli_fail(COLI_E_ARG, "colibri_score: need n >= 2 tokens and 0 <= first < n - 1");
    const int V = e->model.hp.n_vocab;
    if (first > 0 && (rc = colibri_eval(e, tokens, first, 0, NULL, 0))) return rc;
    /* score in slices so the logits buffer stays small (slice x n_vocab floats) */
    const int slice = e->cfg.n_batch < 64 ? e->cfg.n_batch : 64;
    float *logits = malloc((size_t)slice * V * sizeof(float));
    if (!logits) return coli_fail(COLI_E_NOMEM, "out of memory for %d rows of logits", slice);
    for (int j = first; j < n - 1 && rc == 0; j += slice) {
        const int m = (n - 1 - j) < slice ? (n - 1 - j) : slice;
        rc = colibri_eval(e, tokens + j, m, j, logits, 1);
        for (int r = 0; r < m && rc == 0; r++) {
            const float *row = logits + (size_t)r * V;
            if (nll_out) nll_out[j - first + r] = -coli_logprob(row, V, tokens[j + r + 1]);
            if (argmax_out) argmax_out[j - first + r] = coli_argmax(row, V);
        }
    }
    free(logits);
    return rc;
}

int colibri_last_routing(const colibri_engine *e, int row, int32_t *ids, float *weights) {
    int rc = need_model(e, "colibri_last_routing");
    if (rc) return rc;
    const coli_hparams *hp = &e->model.hp;
    if (hp->n_expert == 0) return 0;
    if (row < 0 || row >= e->cfg.n_batch || !ids || !weights)
        return coli_fail(COLI_E_ARG, "colibri_last_routing: row %d is outside the batch of %d", row, e->cfg.n_batch);
    const int K = hp->n_expert_used;
    for (int il = 0; il < hp->n_layer; il++) {
        const size_t at = ((size_t)row * hp->n_layer + il) * K;
        for (int k = 0; k < K; k++) {
            const bool moe = e->model.layers[il].is_moe;
            ids[il * K + k] = moe ? e->state.route_ids[at + k] : -1;
            weights[il * K + k] = moe ? e->state.route_w[at + k] : 0.0f;
        }
    }
    return K;
}

/* colibri_gguf_check lives here, not in gguf_api.c: the GGUF fuzzer links the reader alone. */
int colibri_gguf_check(colibri_gguf *g) {
    coli_clear_error();
    if (!g) return coli_fail(COLI_E_ARG, "check: no file");
    gguf_file *f = (gguf_file *)(void *)g;
    struct coli_tokenizer *tok = coli_tokenizer_load(f);
    if (!tok) return colibri_last_error_code();
    coli_tokenizer_free(tok);
    coli_model *m = calloc(1, sizeof *m);
    if (!m) return coli_fail(COLI_E_NOMEM, "out of memory");
    const int rc = coli_model_load(m, f);
    coli_model_free(m);
    free(m);
    return rc;
}
