/* mtp.c — drafts from the model's own multi-token-prediction block (mtp.h). */
#define _POSIX_C_SOURCE 200112L
#include "mtp.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "experts.h"
#include "matmul.h"
#include "sample.h"

/* The block as a model of one layer: the trunk's weights but for its layer, cache, head and embedding. */
static coli_model *view_of(const coli_model *m) {
    coli_model *v = malloc(sizeof *v);
    if (!v) return NULL;
    *v = *m;
    v->layers = &m->layers[m->hp.n_layer];
    v->hp.n_layer = 1;
    v->hp.n_layer_dense_lead = 0;
    v->hp.n_kv_layers = 1;
    v->hp.n_nextn = 0;
    v->hp.gdn = false; /* a Gated DeltaNet model's block is a full-attention one: no recurrent state */
    v->hp.n_rs_layers = 0;
    v->hp.dsa = false; /* a sparse-attention model's block attends to every cell: no indexer state */
    v->hp.n_idx_layers = 0;
    memset(v->hp.kv_swa, 0, sizeof v->hp.kv_swa);
    if (v->layers[0].is_swa) v->hp.kv_swa[0] = 1;
    if (m->mtp_head_norm) v->output_norm = m->mtp_head_norm;
    if (m->mtp_head.n_in) v->output = m->mtp_head;
    if (m->mtp_embd.n_in) v->tok_embd = m->mtp_embd;
    v->has_mtp = false;
    v->mtp_view = true;
    return v;
}

int coli_mtp_open(colibri_engine *e) {
    const coli_model *m = &e->model;
    const colibri_config *c = &e->cfg;
    if (!m->has_mtp || !m->mtp_eh_proj.n_in || e->draft_k <= 0) return 0; /* none, or one that could not load */
    if (!(e->mtp = view_of(m))) return coli_fail(COLI_E_NOMEM, "out of memory");
    const coli_store_config resident = {0, 0, 0, false, false, 0}; /* its experts are read from the mapping */
    if (!(e->mtp_experts = coli_experts_open(e->mtp, e->gguf, &resident))) return colibri_last_error_code();
    int rc = coli_state_init(&e->mtp_state, e->mtp, e->mtp_experts, c->n_ctx, c->n_batch, COLI_MAX_SLOTS,
                             c->n_threads);
    if (rc) return rc;
    coli_state_borrow_pool(&e->mtp_state, &e->state);
    const size_t E = (size_t)m->hp.n_embd;
    e->mtp_rows = calloc((size_t)c->n_batch, sizeof *e->mtp_rows);
    e->mtp_hid = malloc((size_t)c->n_batch * E * sizeof(float));
    e->mtp_chain = malloc((size_t)c->n_slots * E * sizeof(float));
    if (!e->mtp_rows || !e->mtp_hid || !e->mtp_chain) return coli_fail(COLI_E_NOMEM, "out of memory");
    for (int i = 0; i < c->n_slots; i++) {
        coli_slot *sl = &e->slots[i];
        if ((rc = coli_kv_init(&sl->mtp_kv, &e->mtp->hp, c->n_ctx, c->n_batch))) return rc;
        if (!(sl->mtp_h = malloc(COLI_MTP_HELD_MAX * E * sizeof(float))))
            return coli_fail(COLI_E_NOMEM, "out of memory");
        sl->mtp_want = 1;
    }
    return 0;
}

void coli_mtp_close(colibri_engine *e) {
    for (int i = 0; e->slots && i < e->cfg.n_slots; i++) {
        coli_kv_free(&e->slots[i].mtp_kv);
        free(e->slots[i].mtp_h);
    }
    coli_state_free(&e->mtp_state);
    coli_experts_close(e->mtp_experts);
    free(e->mtp_rows);
    free(e->mtp_hid);
    free(e->mtp_chain);
    free(e->mtp); /* a view: its weights are the model's */
}

/* The block's forward over n rows reading e->mtp_hid. */
static int run(colibri_engine *e, int n) {
    e->mtp_state.mtp_h = e->mtp_hid;
    return coli_forward(e->mtp, &e->mtp_state, e->mtp_rows, n, COLI_ROWS_BATCH);
}

/* its time joins the trunk's phases: the profile shows where every millisecond goes */
static void add_times(colibri_engine *e) { coli_state_take_times(&e->state, &e->mtp_state); }

void coli_mtp_prefill(colibri_engine *e, coli_slot *sl, int pos0, int n) {
    if (!e->mtp) return;
    const size_t E = (size_t)e->model.hp.n_embd;
    int rows = n;
    if (pos0 + rows > sl->n_prompt - 1) rows = sl->n_prompt - 1 - pos0; /* the last one waits for its token */
    sl->mtp_rows = 0;
    if (rows > 0) {
        for (int i = 0; i < rows; i++) e->mtp_rows[i] = coli_row_at(sl->hist[pos0 + i + 1], pos0 + i, &sl->mtp_kv);
        memcpy(e->mtp_hid, e->state.xn, (size_t)rows * E * sizeof(float));
        const int rc = run(e, rows);
        add_times(e);
        if (rc) {
            coli_clear_error();
            return;
        }
    }
    if (pos0 + n == sl->n_prompt) {
        memcpy(sl->mtp_h, e->state.xn + (size_t)(n - 1) * E, E * sizeof(float));
        sl->mtp_at = sl->n_prompt - 1;
        sl->mtp_rows = 1;
    }
}

/* Slot sl's held rows as the block's batch rows from row n on; returns the rows after them. */
static int held_rows(colibri_engine *e, coli_slot *sl, int n) {
    const size_t E = (size_t)e->model.hp.n_embd;
    for (int j = 0; j < sl->mtp_rows; j++) {
        const int pos = sl->mtp_at + j;
        e->mtp_rows[n] = coli_row_at(pos + 1 < sl->n_past ? sl->hist[pos + 1] : sl->pending, pos, &sl->mtp_kv);
        memcpy(e->mtp_hid + (size_t)n * E, sl->mtp_h + (size_t)j * E, E * sizeof(float));
        n++;
    }
    sl->mtp_rows = 0;
    return n;
}

void coli_mtp_flush(colibri_engine *e, coli_slot *sl) {
    if (!e->mtp || sl->mtp_rows <= 0 || sl->mtp_rows > e->cfg.n_batch) return;
    const int n = held_rows(e, sl, 0);
    if (run(e, n)) coli_clear_error(); /* a hole in the block's cache costs drafts, not output */
    add_times(e);
}

void coli_mtp_draft(colibri_engine *e) {
    if (!e->mtp) return;
    coli_state *ms = &e->mtp_state;
    const size_t E = (size_t)e->model.hp.n_embd, V = (size_t)e->model.hp.n_vocab;
    int who[COLI_MAX_SLOTS], last[COLI_MAX_SLOTS], want[COLI_MAX_SLOTS], nw = 0, n = 0, most = 0;
    const double t0 = coli_now_s();
    for (int i = 0; i < e->cfg.n_slots; i++) { /* each slot's rows since its last drafts, with true hidden states */
        coli_slot *sl = &e->slots[i];
        sl->n_ready = 0;
        if (sl->state != COLI_SLOT_DECODE || sl->mtp_rows <= 0 || sl->mtp_at + sl->mtp_rows != sl->n_past) continue;
        const bool paused = sl->mtp_skip > 0;
        if (paused) { /* no guess this step: its rows wait for the next drafts while the next step's fit too */
            sl->mtp_skip--;
            const int room = COLI_MTP_HELD_MAX < e->cfg.n_batch ? COLI_MTP_HELD_MAX : e->cfg.n_batch;
            if (sl->mtp_rows + 1 + COLI_DRAFT_MAX <= room) continue;
        }
        const int cap = sl->mtp_want < e->draft_k ? sl->mtp_want : e->draft_k;
        const int k = paused ? 0 : coli_draft_room(sl, cap, e->cfg.n_ctx);
        if (n + sl->mtp_rows > e->cfg.n_batch) continue;
        n = held_rows(e, sl, n);
        last[nw] = n - 1;
        want[nw] = k;
        if (k > most) most = k;
        who[nw++] = i;
    }
    if (nw == 0) return;
    const double t_rows = coli_now_s();
    int rc = run(e, n);
    const double upkeep_s = coli_now_s() - t_rows; /* the held rows: the cache's, whatever is guessed */
    for (int w = 0; w < nw && !rc; w++) {
        coli_slot *sl = &e->slots[who[w]];
        if (want[w] == 0) continue;
        if ((rc = coli_logits(e->mtp, ms, last[w], 1, ms->logits))) break;
        sl->drafted[0] = coli_argmax(ms->logits, (int)V);
        sl->n_ready = 1;
        memcpy(e->mtp_chain + (size_t)w * E, ms->xn + (size_t)last[w] * E, E * sizeof(float));
    }
    for (int c = 1; c < most && !rc; c++) { /* chained: the block's own output as the next row's hidden state */
        int idx[COLI_MAX_SLOTS], m = 0;
        add_times(e);
        for (int w = 0; w < nw; w++) {
            coli_slot *sl = &e->slots[who[w]];
            if (want[w] <= c) continue;
            e->mtp_rows[m] = coli_row_at(sl->drafted[c - 1], sl->n_past + c - 1, &sl->mtp_kv);
            memcpy(e->mtp_hid + (size_t)m * E, e->mtp_chain + (size_t)w * E, E * sizeof(float));
            idx[m++] = w;
        }
        if ((rc = run(e, m)) || (rc = coli_logits(e->mtp, ms, 0, m, ms->logits))) break;
        for (int r = 0; r < m; r++) {
            coli_slot *sl = &e->slots[who[idx[r]]];
            sl->drafted[c] = coli_argmax(ms->logits + (size_t)r * V, (int)V);
            sl->n_ready = c + 1;
            memcpy(e->mtp_chain + (size_t)idx[r] * E, ms->xn + (size_t)r * E, E * sizeof(float));
        }
    }
    add_times(e);
    if (rc) coli_clear_error(); /* drafts are an aid: a failure leaves what was drafted; decoding goes on */
    coli_drafts_made(e, who, nw, coli_now_s() - t0, upkeep_s);
}

void coli_mtp_keep(colibri_engine *e, coli_slot *sl, int row, int n, int pos) {
    if (!e->mtp) return;
    const size_t E = (size_t)e->model.hp.n_embd;
    const bool after = sl->mtp_rows > 0 && sl->mtp_at + sl->mtp_rows == pos && sl->mtp_rows + n <= COLI_MTP_HELD_MAX;
    if (!after) { /* else the rows it holds are gone: the block's cache misses them (its drafts, not output) */
        sl->mtp_at = pos;
        sl->mtp_rows = 0;
    }
    memcpy(sl->mtp_h + (size_t)sl->mtp_rows * E, e->state.xn + (size_t)row * E, (size_t)n * E * sizeof(float));
    sl->mtp_rows += n;
}

int colibri_mtp_eval(colibri_engine *e, const int32_t *tokens, int n, float *logits_out) {
    if (!e || !e->loaded) return coli_fail(COLI_E_STATE, "colibri_mtp_eval: no model is loaded");
    if (!e->mtp) return coli_fail(COLI_E_UNSUPPORTED, "unsupported: the model has no MTP block to draft with (or "
                                  "drafting is off)");
    if (!tokens || !logits_out || n <= 0 || n > e->cfg.n_batch)
        return coli_fail(COLI_E_ARG, "colibri_mtp_eval: 1..%d rows and an output", e->cfg.n_batch);
    if (tokens[n] < 0 || tokens[n] >= e->model.hp.n_vocab)
        return coli_fail(COLI_E_ARG, "token id %d at index %d is outside the vocabulary", tokens[n], n);
    int rc = colibri_eval(e, tokens, n, 0, NULL, 0); /* one chunk: its rows stay in e->state.xn */
    if (rc) return rc;
    coli_slot *sl = &e->slots[0];
    for (int i = 0; i < n; i++) e->mtp_rows[i] = coli_row_at(tokens[i + 1], i, &sl->mtp_kv);
    memcpy(e->mtp_hid, e->state.xn, (size_t)n * e->model.hp.n_embd * sizeof(float));
    sl->mtp_rows = 0; /* the slot's drafts start again from its next prompt */
    if ((rc = run(e, n))) return rc;
    rc = coli_logits(e->mtp, &e->mtp_state, 0, n, logits_out);
    add_times(e);
    return rc;
}
