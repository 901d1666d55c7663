/* draft_model.c — drafts from a second, smaller model with the same vocabulary (draft_model.h). */
#define _POSIX_C_SOURCE 200112L
#include "draft_model.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "experts.h"
#include "matmul.h"
#include "sample.h"
#include "tokenizer.h"

/* The same tokens under the same ids: drafts are ids of the target's vocabulary. */
static int same_vocabulary(const struct coli_tokenizer *a, const struct coli_tokenizer *b, const char *path) {
    if (a->n_tokens != b->n_tokens)
        return coli_fail(COLI_E_ARG, "the draft model %s has %d tokens, the model %d: a draft model must share its "
                         "vocabulary", path, b->n_tokens, a->n_tokens);
    for (int32_t i = 0; i < a->n_tokens; i++) {
        size_t la, lb;
        const char *ta = coli_tok_text(a, i, &la), *tb = coli_tok_text(b, i, &lb);
        if (la != lb || memcmp(ta, tb, la) != 0)
            return coli_fail(COLI_E_ARG, "the draft model %s names token %d otherwise than the model: a draft model "
                             "must share its vocabulary", path, i);
    }
    return 0;
}

int coli_dm_open(colibri_engine *e) {
    const colibri_config *c = &e->cfg;
    if (!c->draft_model_path || !c->draft_model_path[0] || e->draft_k <= 0) return 0;
    if (!(e->dm_gguf = gguf_open(c->draft_model_path))) return colibri_last_error_code();
    struct coli_tokenizer *tok = coli_tokenizer_load(e->dm_gguf);
    if (!tok) return colibri_last_error_code();
    int rc = same_vocabulary(e->tok, tok, c->draft_model_path);
    coli_tokenizer_free(tok);
    if (rc) return rc;
    if (!(e->dm = calloc(1, sizeof *e->dm))) return coli_fail(COLI_E_NOMEM, "out of memory");
    if ((rc = coli_model_load(e->dm, e->dm_gguf))) return rc;
    e->dm->file = e->dm_gguf;
    if (e->dm->hp.gdn)
        return coli_fail(COLI_E_UNSUPPORTED, "unsupported: the draft model %s has a recurrent state (Gated DeltaNet), "
                         "which cannot take back a rejected guess", c->draft_model_path);
    if (e->dm->hp.n_expert > 0) {
        const coli_store_config resident = {0, 0, 0, false, false, 0};
        if (!(e->dm_experts = coli_experts_open(e->dm, e->dm_gguf, &resident))) return colibri_last_error_code();
    }
    const int n_ctx = c->n_ctx < e->dm->hp.n_ctx_train ? c->n_ctx : e->dm->hp.n_ctx_train;
    if ((rc = coli_state_init(&e->dm_state, e->dm, e->dm_experts, n_ctx, c->n_batch, COLI_MAX_SLOTS, c->n_threads)))
        return rc;
    coli_state_borrow_pool(&e->dm_state, &e->state);
    if (!(e->dm_rows = calloc((size_t)c->n_batch, sizeof *e->dm_rows))) return coli_fail(COLI_E_NOMEM, "out of memory");
    for (int i = 0; i < c->n_slots; i++) {
        if ((rc = coli_kv_init(&e->slots[i].dm_kv, &e->dm->hp, n_ctx, c->n_batch))) return rc;
        e->slots[i].mtp_want = 1;
    }
    return 0;
}

void coli_dm_close(colibri_engine *e) {
    for (int i = 0; e->slots && i < e->cfg.n_slots; i++) coli_kv_free(&e->slots[i].dm_kv);
    coli_state_free(&e->dm_state);
    coli_experts_close(e->dm_experts);
    if (e->dm) coli_model_free(e->dm);
    free(e->dm);
    free(e->dm_rows);
    gguf_close(e->dm_gguf);
}

static int run(colibri_engine *e, int n) { return coli_forward(e->dm, &e->dm_state, e->dm_rows, n, COLI_ROWS_BATCH); }

/* its time joins the target's phases: the profile shows where every millisecond goes */
static void add_times(colibri_engine *e) { coli_state_take_times(&e->state, &e->dm_state); }

/* The draft model's cache of slot sl up to position `to` (exclusive), in batches; 0 or the error. */
static int catch_up(colibri_engine *e, coli_slot *sl, int to) {
    while (sl->dm_n < to) {
        int n = to - sl->dm_n < e->cfg.n_batch ? to - sl->dm_n : e->cfg.n_batch;
        for (int i = 0; i < n; i++) e->dm_rows[i] = coli_row_at(sl->hist[sl->dm_n + i], sl->dm_n + i, &sl->dm_kv);
        const int rc = run(e, n);
        add_times(e);
        if (rc) return rc;
        sl->dm_n += n;
    }
    return 0;
}

void coli_dm_prefill(colibri_engine *e, coli_slot *sl, int upto) {
    if (!e->dm) return;
    const int n_ctx = e->dm_state.n_ctx;
    if (catch_up(e, sl, upto < n_ctx ? upto : n_ctx)) coli_clear_error(); /* drafts are an aid */
}

void coli_dm_draft(colibri_engine *e) {
    if (!e->dm) return;
    coli_state *ds = &e->dm_state;
    const int V = e->model.hp.n_vocab, DV = e->dm->hp.n_vocab;
    int who[COLI_MAX_SLOTS], last[COLI_MAX_SLOTS], want[COLI_MAX_SLOTS], nw = 0, n = 0, most = 0, rc = 0;
    const double t0 = coli_now_s();
    const int share = e->cfg.n_batch / e->cfg.n_slots; /* rows a slot may bring to the shared batch (>= 1) */
    for (int i = 0; i < e->cfg.n_slots && !rc; i++) { /* a slot far behind catches up alone first */
        coli_slot *sl = &e->slots[i];
        if (sl->state == COLI_SLOT_DECODE && sl->mtp_skip == 0 && sl->dm_n < sl->n_past &&
            sl->n_past - sl->dm_n + 1 > share && sl->n_past < ds->n_ctx)
            rc = catch_up(e, sl, sl->n_past);
    }
    for (int i = 0; i < e->cfg.n_slots && !rc; i++) { /* each slot's tokens since its cache, and its pending one */
        coli_slot *sl = &e->slots[i];
        sl->n_ready = 0;
        if (sl->state != COLI_SLOT_DECODE) continue;
        int k = coli_draft_room(sl, sl->mtp_want < e->draft_k ? sl->mtp_want : e->draft_k, ds->n_ctx);
        if (sl->mtp_skip > 0) {
            sl->mtp_skip--;
            k = 0;
        }
        /* no guess this step: its cache catches up in one batch when drafts resume (prefill's pace, not a row
         * a step) */
        if (k <= 0 || sl->n_past >= ds->n_ctx) continue;
        if (sl->dm_n > sl->n_past) sl->dm_n = sl->n_past;
        if (sl->n_past - sl->dm_n + 1 + n > e->cfg.n_batch) continue; /* not caught up (a failed catch-up) */
        for (int p = sl->dm_n; p < sl->n_past; p++) e->dm_rows[n++] = coli_row_at(sl->hist[p], p, &sl->dm_kv);
        e->dm_rows[n++] = coli_row_at(sl->pending, sl->n_past, &sl->dm_kv);
        sl->dm_n = sl->n_past + 1;
        last[nw] = n - 1;
        want[nw] = k;
        if (k > most) most = k;
        who[nw++] = i;
    }
    if (nw > 0 && !rc) rc = run(e, n);
    for (int w = 0; w < nw && !rc; w++) {
        coli_slot *sl = &e->slots[who[w]];
        if ((rc = coli_logits(e->dm, ds, last[w], 1, ds->logits))) break;
        const int32_t d = coli_argmax(ds->logits, DV);
        if (d >= V) {
            want[w] = 0;
            continue;
        }
        sl->drafted[0] = d;
        sl->n_ready = 1;
    }
    for (int c = 1; c < most && !rc; c++) { /* chained: each guess is the next row */
        int idx[COLI_MAX_SLOTS], m = 0;
        add_times(e);
        for (int w = 0; w < nw; w++) {
            coli_slot *sl = &e->slots[who[w]];
            if (want[w] <= c || sl->n_ready < c) continue;
            e->dm_rows[m] = coli_row_at(sl->drafted[c - 1], sl->n_past + c, &sl->dm_kv);
            idx[m++] = w;
        }
        if (m == 0) break;
        if ((rc = run(e, m)) || (rc = coli_logits(e->dm, ds, 0, m, ds->logits))) break;
        for (int r = 0; r < m; r++) {
            coli_slot *sl = &e->slots[who[idx[r]]];
            const int32_t d = coli_argmax(ds->logits + (size_t)r * DV, DV);
            sl->dm_n = sl->n_past + c + 1; /* its cache holds the guess it read */
            if (d >= V) {
                want[idx[r]] = 0;
                continue;
            }
            sl->drafted[c] = d;
            sl->n_ready = c + 1;
        }
    }
    add_times(e);
    if (rc) coli_clear_error(); /* drafts are an aid: a failure leaves what was drafted; decoding goes on */
    coli_drafts_made(e, who, nw, coli_now_s() - t0, 0.0);
}

void coli_dm_keep(colibri_engine *e, coli_slot *sl) {
    if (!e->dm) return;
    /* its cache past the tokens kept holds guesses that were not: they are written again */
    if (sl->dm_n > sl->n_past) sl->dm_n = sl->n_past;
}
