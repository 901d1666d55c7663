/* slots.c — several conversations on one model: submit, step, cancel.
 *
 * Each slot owns a KV cache and the history of tokens in it. A step first
 * advances every decoding slot by one token in one forward batch (weights and
 * routed experts read once for all rows; each row computed with the bits it
 * would get alone, and attending to its own cache), or by several when the
 * tokens it drafted (draft.h) turn out to be the ones it picks, then gives one chunk of
 * prefill to one prefilling slot, round robin. A slot's chunks depend only on
 * its own prompt, so a conversation's tokens never depend on its neighbours. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "clock.h"
#include "draft.h"
#include "draft_model.h"
#include "mtp.h"
#include "error.h"
#include "matmul.h"

static int check(const colibri_engine *e, int slot, const char *fn) {
    if (!e) return coli_fail(COLI_E_ARG, "%s: no engine", fn);
    if (!e->loaded) return coli_fail(COLI_E_STATE, "%s: the engine was opened with vocab_only", fn);
    if (slot < 0 || slot >= e->cfg.n_slots)
        return coli_fail(COLI_E_ARG, "%s: slot %d does not exist (0..%d)", fn, slot, e->cfg.n_slots - 1);
    return 0;
}

int colibri_n_slots(const colibri_engine *e) { return (e && e->loaded) ? e->cfg.n_slots : 0; }

int64_t colibri_slot_bytes(const colibri_engine *e) {
    return (e && e->loaded) ? (int64_t)coli_kv_bytes(&e->model.hp, e->cfg.n_ctx, e->cfg.n_batch) : 0;
}

const char *colibri_model_id(const colibri_engine *e) { return (e && e->loaded) ? e->model_id_hex : ""; }

/* ---- Gated DeltaNet: recurrent-state checkpoints ----
 *
 * The state of the linear layers (conv + delta rule, constant size) cannot rewind, so a prompt that branches
 * off inside a slot's history could reuse nothing of it. The slot keeps copies of the state along the history:
 * every rs_ckpt_every prompt tokens (the prefill's chunks end there) and at the end of each prompt, at most
 * rs_ckpt_n of them (the lowest position goes first). A prompt sharing P tokens with the history restores the
 * newest checkpoint at c <= P; the full-attention layers' KV of positions < c is that history's, and the rest
 * is prefilled. The prefill rows run with COLI_ROWS_UNIFORM and the recurrence token by token, so the bits do
 * not depend on where a prefill starts or how it is chunked: the continuation equals a run from position 0. */

static size_t rs_floats(const coli_kv *kv) { return (size_t)kv->n_rs_layers * (kv->rs_conv + kv->rs_ssm); }

void coli_slot_checkpoint(colibri_engine *e, coli_slot *sl) {
    const coli_kv *kv = &sl->kv;
    const int n = e->rs_ckpt_n < COLI_RS_CKPT_MAX ? e->rs_ckpt_n : COLI_RS_CKPT_MAX;
    if (!e->model.hp.gdn || n <= 0 || kv->rs_pos <= 0) return;
    int at = -1;
    for (int i = 0; i < n; i++) {
        if (sl->ck_pos[i] == kv->rs_pos) return; /* held already (the same tokens: the same state) */
        if (at < 0 || (sl->ck_pos[at] > 0 && sl->ck_pos[i] < sl->ck_pos[at])) at = i; /* empty, else lowest */
    }
    if (!sl->ck_rs[at] && !(sl->ck_rs[at] = malloc(rs_floats(kv) * sizeof(float)))) return; /* an optimisation */
    memcpy(sl->ck_rs[at], kv->rs, rs_floats(kv) * sizeof(float));
    sl->ck_pos[at] = kv->rs_pos;
}

void coli_slot_drop_checkpoints(coli_slot *sl, int pos) {
    for (int i = 0; i < COLI_RS_CKPT_MAX; i++)
        if (sl->ck_pos[i] > pos) sl->ck_pos[i] = 0;
}

void coli_slot_free_checkpoints(coli_slot *sl) {
    for (int i = 0; i < COLI_RS_CKPT_MAX; i++) {
        free(sl->ck_rs[i]);
        sl->ck_rs[i] = NULL;
        sl->ck_pos[i] = 0;
    }
}

static int newest_checkpoint(const coli_slot *sl, int pos) {
    int best = -1;
    for (int i = 0; i < COLI_RS_CKPT_MAX; i++)
        if (sl->ck_pos[i] > 0 && sl->ck_pos[i] <= pos && sl->ck_rs[i] && (best < 0 || sl->ck_pos[i] > sl->ck_pos[best]))
            best = i;
    return best;
}

int coli_slot_restore_checkpoint(coli_slot *sl, int pos) {
    const int best = newest_checkpoint(sl, pos);
    if (best < 0) return 0;
    memcpy(sl->kv.rs, sl->ck_rs[best], rs_floats(&sl->kv) * sizeof(float));
    sl->kv.rs_pos = sl->ck_pos[best];
    return sl->ck_pos[best];
}

int colibri_submit(colibri_engine *e, int slot, const int32_t *prompt, int n, const colibri_request *req) {
    coli_clear_error();
    int rc = check(e, slot, "colibri_submit");
    if (rc) return rc;
    coli_slot *sl = &e->slots[slot];
    if (sl->state != COLI_SLOT_IDLE) return coli_fail(COLI_E_STATE, "slot %d is busy with another request", slot);
    if (!prompt || n <= 0 || !req) return coli_fail(COLI_E_ARG, "colibri_submit: an empty prompt or no request");
    if (n > e->cfg.n_ctx)
        return coli_fail(COLI_E_TOO_LONG, "too_long: the prompt has %d tokens, the context holds %d", n, e->cfg.n_ctx);
    const int V = e->model.hp.n_vocab;
    for (int i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return coli_fail(COLI_E_ARG, "token id %d at index %d is outside the vocabulary (0..%d)", prompt[i], i,
                             V - 1);
    const colibri_sampling *sp = &req->sampling;
    if (!(sp->temperature >= 0.0f) || !(sp->top_p > 0.0f && sp->top_p <= 1.0f) || sp->top_k < 0)
        return coli_fail(COLI_E_ARG, "colibri_submit: temperature must be >= 0, top_p in (0, 1] and top_k >= 0");
    if (req->max_tokens < 0 || req->n_logprobs < 0 || req->n_logprobs > COLI_MAX_LOGPROBS)
        return coli_fail(COLI_E_ARG, "colibri_submit: max_tokens must be >= 0 and n_logprobs in 0..%d",
                         COLI_MAX_LOGPROBS);
    if (req->echo && sl->echo_cap < n) {
        float *lp = realloc(sl->echo_lp, (size_t)n * sizeof(float));
        if (lp) sl->echo_lp = lp;
        int32_t *ids = realloc(sl->echo_ids, (size_t)n * COLI_MAX_LOGPROBS * sizeof(int32_t));
        if (ids) sl->echo_ids = ids;
        float *top = realloc(sl->echo_top, (size_t)n * COLI_MAX_LOGPROBS * sizeof(float));
        if (top) sl->echo_top = top;
        if (!lp || !ids || !top) return coli_fail(COLI_E_NOMEM, "out of memory for the read-out of %d positions", n);
        sl->echo_cap = n;
    }
    /* the longest common prefix stays cached; at least one token is evaluated for its logits;
     * a read-out from position p needs the row of p - 1 computed */
    const bool gdn = e->model.hp.gdn;
    int common = 0, limit = n;
    if (req->echo) limit = req->echo_from > 1 ? req->echo_from - 1 : 0;
    while (common < sl->n_past && common < n && sl->hist[common] == prompt[common]) common++;
    int reuse = common < limit ? common : limit;
    /* a Gated DeltaNet model's checkpoints past the branch belong to the old history */
    if (gdn) coli_slot_drop_checkpoints(sl, common);
    /* all cached: the first token comes from the logits this very prompt left,
     * not from re-running its last token alone (which would round differently); a recurrent state that
     * generation moved past the prompt comes back from its end-of-prompt checkpoint */
    bool replay = reuse == n && sl->prompt_logits_n == n && req->max_tokens > 0;
    if (replay && gdn && sl->kv.rs_pos != n) {
        const int c = newest_checkpoint(sl, n);
        replay = c >= 0 && sl->ck_pos[c] == n && coli_slot_restore_checkpoint(sl, n) == n;
    }
    if (reuse == n && !replay) reuse = n - 1;
    /* a Gated DeltaNet model's recurrent state cannot rewind: the cached prefix is reusable up to where the
     * state stands (a continued conversation) or else up to its newest checkpoint at or before the branch;
     * without one the prompt runs again from position 0 */
    if (gdn && !replay && reuse != sl->kv.rs_pos) reuse = coli_slot_restore_checkpoint(sl, reuse);
    /* likewise a sliding-window layer's cache once it has moved past the window the prefix's next row needs
     * (llama.cpp's SWA cache re-processes the prompt then too) */
    if (!replay && !coli_kv_resumable(&sl->kv, reuse)) reuse = 0;
    if (sl->mtp_rows > 0 && common > sl->mtp_at) coli_mtp_flush(e, sl); /* the shared text's, from the old history */
    memcpy(sl->hist, prompt, (size_t)n * sizeof(int32_t));
    sl->n_past = reuse;
    if (!replay) sl->prompt_logits_n = 0;
    sl->req = *req;
    coli_rng_seed(&sl->rng, req->seed);
    sl->n_prompt = n;
    sl->n_reused = reuse;
    sl->n_gen = 0;
    sl->n_drafted = sl->n_accepted = 0;
    sl->draft = (coli_draft_state){0.0f, 0.0f};
    sl->mtp_rows = sl->n_ready = sl->mtp_skip = sl->mtp_backoff = 0; /* drafts again from this prompt's end */
    if (sl->dm_n > reuse) sl->dm_n = reuse; /* the draft model's cache holds the shared prefix at most */
    sl->mtp_want = 1;
    sl->finish = COLI_FINISH_NONE;
    sl->cancel = false;
    sl->prefill_s = sl->decode_s = 0.0;
    sl->state = COLI_SLOT_PREFILL;
    coli_turn_begin(e, slot);
    if (req->echo)
        for (int p = 0; p <= reuse && p < n; p++) { /* no read-out: position 0 and the cached prefix */
            sl->echo_lp[p] = NAN;
            for (int t = 0; t < COLI_MAX_LOGPROBS; t++) sl->echo_ids[(size_t)p * COLI_MAX_LOGPROBS + t] = -1;
        }
    return reuse;
}

int colibri_cancel(colibri_engine *e, int slot) {
    int rc = check(e, slot, "colibri_cancel");
    if (rc) return rc;
    coli_slot *sl = &e->slots[slot];
    if (sl->state == COLI_SLOT_IDLE) return 0;
    sl->cancel = true;
    return 1;
}

/* ---- events ---- */

typedef struct {
    colibri_event *ev;
    int n, cap;
} event_out;

static colibri_event *push(event_out *o, int slot, int type, int32_t token, int finish) {
    colibri_event *ev = &o->ev[o->n++];
    ev->slot = slot;
    ev->type = type;
    ev->token = token;
    ev->finish = finish;
    ev->logprob = NAN;
    ev->n_top = 0;
    return ev;
}

static void finish(event_out *o, colibri_engine *e, int slot, int why, int32_t token) {
    coli_slot *sl = &e->slots[slot];
    sl->state = COLI_SLOT_IDLE;
    sl->finish = why;
    coli_turn_end(e, slot, why);
    sl->cancel = false;
    if (token < 0) push(o, slot, COLI_EVENT_DONE, -1, why);
}

/* The token after `logits` for slot i: sample, read out, decide whether it ends the request. */
static void next_token(event_out *o, colibri_engine *e, int slot, const float *logits) {
    coli_slot *sl = &e->slots[slot];
    const int V = e->model.hp.n_vocab;
    const colibri_sampling *sp = &sl->req.sampling;
    const int32_t tok = sp->temperature == 0.0f
                            ? coli_argmax(logits, V)
                            : coli_sample(logits, V, sp->temperature, sp->top_p, sp->top_k, &sl->rng, e->sample_p,
                                          e->sample_i);
    const bool stop = !sl->req.ignore_eos && colibri_token_is_eog(e, tok);
    colibri_event *ev = push(o, slot, stop ? COLI_EVENT_DONE : COLI_EVENT_TOKEN, tok, stop ? COLI_FINISH_STOP : 0);
    ev->n_top = sl->req.n_logprobs;
    /* the read-out only when the request asked for one: serving must not pay for what nobody reads */
    ev->logprob = ev->n_top == 0 && sl->req.no_logprob
                      ? NAN
                      : coli_readout(logits, V, tok, ev->n_top, ev->top_ids, ev->top_logprobs);
    if (stop) {
        finish(o, e, slot, COLI_FINISH_STOP, tok);
        return;
    }
    sl->n_gen++;
    if (sl->n_gen >= sl->req.max_tokens)
        finish(o, e, slot, COLI_FINISH_LENGTH, -1);
    else if (sl->n_past >= e->cfg.n_ctx) /* no room to evaluate it */
        finish(o, e, slot, COLI_FINISH_CONTEXT, -1);
    else {
        sl->pending = tok;
        sl->state = COLI_SLOT_DECODE;
    }
}

static void fail_all(event_out *o, colibri_engine *e, const int *slots, int n) {
    for (int j = 0; j < n; j++) finish(o, e, slots[j], COLI_FINISH_ERROR, -1);
}

/* ---- the two halves of a step ---- */

/* Tokens a decoding slot could draft this step: the MTP block's, or prompt lookup over its sequence (history
 * and pending token), no more than the request may still emit, the context holds or the step has room for. */
int coli_draft_room(const coli_slot *sl, int k, int n_ctx) {
    const int left = sl->req.max_tokens - sl->n_gen - 1, ctx = n_ctx - sl->n_past - 1;
    if (left < k) k = left;
    if (ctx < k) k = ctx;
    return k > 0 ? k : 0;
}

static int drafts_found(colibri_engine *e, coli_slot *sl, int room) {
    const int k = coli_draft_room(sl, e->draft_k < room ? e->draft_k : room, e->cfg.n_ctx);
    if (k <= 0) return 0;
    if (e->mtp || e->dm) return sl->n_ready < k ? sl->n_ready : k; /* drafted already (mtp.h, draft_model.h) */
    sl->hist[sl->n_past] = sl->pending; /* where it goes once evaluated */
    return coli_draft_lookup(sl->hist, sl->n_past + 1, sl->drafted, k);
}

/* A slot's rows are evaluated: the pending token, then its drafts. Each row's logits pick the next token
 * as plain decoding would; the next row counts only while that pick equals the draft it evaluated.
 * Returns the drafts accepted. */
static int take_rows(event_out *o, colibri_engine *e, int slot, const float *logits, int nd) {
    coli_slot *sl = &e->slots[slot];
    const size_t V = (size_t)e->model.hp.n_vocab;
    int accepted = 0;
    sl->n_drafted += nd; /* counted before a token ends the request: its turn's record reads them */
    for (int j = 0; j <= nd; j++) {
        sl->hist[sl->n_past++] = j == 0 ? sl->pending : sl->drafted[j - 1];
        if (j > 0) { /* reached only when row j - 1 picked the draft this row evaluated */
            accepted++;
            sl->n_accepted++;
        }
        next_token(o, e, slot, logits + (size_t)j * V);
        if (sl->state != COLI_SLOT_DECODE || j == nd || sl->pending != sl->drafted[j]) break;
    }
    return accepted;
}

/* The decoding slots and their rows this step: each slot's drafts that pay (coli_draft_plan), the slots
 * without drafts first, so their logits are one pass of the LM head. Returns the slots; *n_rows. */
static int plan_rows(colibri_engine *e, int room, int *who, int *nd, int *n_rows) {
    int avail[COLI_MAX_SLOTS], cand[COLI_MAX_SLOTS], k[COLI_MAX_SLOTS], plain[COLI_MAX_SLOTS];
    coli_draft_state *st[COLI_MAX_SLOTS];
    int n_cand = 0, n_plain = 0, rows_room = e->cfg.n_batch;
    for (int i = 0; i < e->cfg.n_slots; i++) rows_room -= e->slots[i].state == COLI_SLOT_DECODE;
    if (rows_room < room) room = rows_room;
    for (int i = 0; i < e->cfg.n_slots; i++) {
        coli_slot *sl = &e->slots[i];
        if (sl->state != COLI_SLOT_DECODE) continue;
        const int d = e->draft_k > 0 && room > 0 ? drafts_found(e, sl, room) : 0;
        if (d > 0) {
            room -= d;
            avail[n_cand] = d;
            st[n_cand] = &sl->draft;
            cand[n_cand++] = i;
        } else {
            plain[n_plain++] = i;
        }
    }
    if (n_cand > 0 && e->cfg.draft_always)
        memcpy(k, avail, (size_t)n_cand * sizeof *k);
    else if (n_cand > 0)
        coli_draft_plan(&e->draft_costs, n_plain, st, avail, n_cand, k);
    for (int c = 0; c < n_cand; c++)
        if (k[c] == 0) {
            coli_draft_offered(st[c]);
            plain[n_plain++] = cand[c];
        }
    int n = 0, r = 0;
    for (int j = 0; j < n_plain; j++) {
        coli_slot *sl = &e->slots[plain[j]];
        who[n] = plain[j];
        nd[n++] = 0;
        e->rows[r++] = coli_row_at(sl->pending, sl->n_past, &sl->kv);
    }
    for (int c = 0; c < n_cand; c++) {
        if (k[c] == 0) continue;
        coli_slot *sl = &e->slots[cand[c]];
        who[n] = cand[c];
        nd[n++] = k[c];
        e->rows[r++] = coli_row_at(sl->pending, sl->n_past, &sl->kv);
        for (int j = 0; j < k[c]; j++) e->rows[r++] = coli_row_at(sl->drafted[j], sl->n_past + 1 + j, &sl->kv);
    }
    *n_rows = r;
    return n;
}

void coli_drafts_made(colibri_engine *e, const int *who, int n, double seconds, double upkeep_s) {
    int made = 0;
    for (int w = 0; w < n; w++) {
        e->slots[who[w]].decode_s += seconds / n;
        made += e->slots[who[w]].n_ready;
    }
    /* the plan weighs a verified draft's making too; not the drafter's cache upkeep, owed whether it pays or not */
    coli_draft_made(&e->draft_costs, made, seconds - upkeep_s);
}

enum { MAX_BACKOFF = 32 }; /* decode steps without guesses after drafts the plan declined, at most */

/* How many a drafter (MTP block, draft model) guesses next for slot sl, after a step that verified `drafted` of
 * its guesses and kept `accepted`: one more while all are kept, else one past the kept ones. Guesses the plan
 * declined pause the drafter's head and chain for a while, longer each time in a row (its cache is still kept
 * up, so drafts resume from a whole one when they pay again). */
static void pace(const colibri_engine *e, coli_slot *sl, int drafted, int accepted) {
    int want = drafted == 0 ? sl->mtp_want : accepted == drafted ? drafted + 1 : accepted + 1;
    if (want > e->draft_k) want = e->draft_k;
    sl->mtp_want = want > 0 ? want : 1;
    if (drafted == 0 && sl->n_ready > 0) {
        sl->mtp_backoff = sl->mtp_backoff ? (sl->mtp_backoff < MAX_BACKOFF ? 2 * sl->mtp_backoff : MAX_BACKOFF) : 2;
        sl->mtp_skip = sl->mtp_backoff;
    } else if (drafted > 0) {
        sl->mtp_backoff = 0;
    }
}

/* A Gated DeltaNet model's recurrent state cannot rewind: the verify kept a copy of it after each row but the
 * last (deltanet.c, the rows' snap), and a slot whose verify rejected a draft gets back the one after its last
 * kept row (the bits a run of the kept rows alone would give: each row is computed as alone). Returns the
 * seconds it took. */
static double take_back(colibri_engine *e, const int *who, const int *nd, const int *kept, const int *pos0, int n) {
    const double t0 = coli_now_s();
    for (int j = 0; j < n; j++) {
        if (nd[j] == 0 || kept[j] == nd[j]) continue;
        coli_slot *sl = &e->slots[who[j]];
        const size_t f = rs_floats(&sl->kv);
        memcpy(sl->kv.rs, sl->rs_snap + (size_t)kept[j] * f, f * sizeof(float));
        sl->kv.rs_pos = pos0[j] + kept[j] + 1;
    }
    return coli_now_s() - t0;
}

/* Every decoding slot advances: one row for its pending token and one per drafted token verified, all in
 * one batch (each row computed exactly as alone). */
static void decode(event_out *o, colibri_engine *e) {
    int who[COLI_MAX_SLOTS], nd[COLI_MAX_SLOTS], n_rows = 0;
    if (e->draft_k > 0) {
        coli_mtp_draft(e);
        coli_dm_draft(e);
    }
    const int n = plan_rows(e, o->cap - o->n - 2 * e->cfg.n_slots /* beyond a token and a DONE per slot */, who,
                            nd, &n_rows);
    if (n == 0) return;
    int n_plain = 0, kept[COLI_MAX_SLOTS] = {0}, pos0[COLI_MAX_SLOTS];
    while (n_plain < n && nd[n_plain] == 0) n_plain++;
    for (int j = 0, r = 0; j < n; r += 1 + nd[j], j++) { /* the states to take back rejected rows (take_back) */
        coli_slot *sl = &e->slots[who[j]];
        pos0[j] = sl->n_past;
        if (e->model.hp.gdn)
            for (int i = 0; i < nd[j]; i++) e->rows[r + i].snap = sl->rs_snap + (size_t)i * rs_floats(&sl->kv);
    }
    const double t0 = coli_now_s();
    int rc = coli_forward(&e->model, &e->state, e->rows, n_rows, COLI_ROWS_ALONE);
    if (!rc) coli_stats_forward(e);
    if (!rc && n_plain > 0) rc = coli_logits(&e->model, &e->state, 0, n_plain, e->state.logits);
    double dt = coli_now_s() - t0;
    if (rc) {
        fail_all(o, e, who, n);
        return;
    }
    const size_t V = (size_t)e->model.hp.n_vocab;
    uint8_t keep[COLI_DRAFT_ROWS];
    memset(keep, 0, (size_t)n_rows);
    int row = 0, steps = 0, drafted = 0, accepted = 0;
    for (int j = 0; j < n; j++) {
        coli_slot *sl = &e->slots[who[j]];
        if (nd[j] > 0) { /* its rows' logits in one pass of the LM head, after the plain slots are done */
            const double t1 = coli_now_s();
            rc = coli_logits(&e->model, &e->state, row, 1 + nd[j], e->state.logits);
            dt += coli_now_s() - t1;
            if (rc) {
                coli_stats_rows(e, n_rows, true, keep);
                fail_all(o, e, who + j, n - j);
                return;
            }
        }
        sl->decode_s += dt;
        const float *logits = e->state.logits + (nd[j] > 0 ? 0 : (size_t)j * V);
        const int a = take_rows(o, e, who[j], logits, nd[j]);
        kept[j] = a;
        if (sl->state == COLI_SLOT_DECODE) coli_mtp_keep(e, sl, row, 1 + a, pos0[j]);
        coli_dm_keep(e, sl);
        if (e->mtp || e->dm) pace(e, sl, nd[j], a);
        memset(keep + row, 1, (size_t)(1 + a));
        coli_draft_verified(&sl->draft, nd[j], a);
        steps += nd[j] > 0;
        drafted += nd[j];
        accepted += a;
        row += 1 + nd[j];
    }
    if (e->model.hp.gdn) dt += take_back(e, who, nd, kept, pos0, n); /* the rows' cost includes it */
    coli_stats_rows(e, n_rows, true, keep);
    if (e->draft_k > 0) coli_draft_cost(&e->draft_costs, n_rows, dt);
    if (drafted > 0) coli_stats_drafts(e, steps, drafted, accepted);
}

/* Read-out of the rows of a prompt chunk whose next token is a prompt token. */
static int echo_rows(colibri_engine *e, coli_slot *sl, int pos0, int chunk) {
    const int V = e->model.hp.n_vocab, k = sl->req.n_logprobs, step = e->state.n_logit_rows;
    for (int r = 0; r < chunk; r += step) {
        int m = chunk - r < step ? chunk - r : step;
        if (pos0 + r + m > sl->n_prompt - 1) m = sl->n_prompt - 1 - (pos0 + r); /* the last row predicts output */
        if (m <= 0) break;
        int rc = coli_logits(&e->model, &e->state, r, m, e->state.logits);
        if (rc) return rc;
        for (int j = 0; j < m; j++) {
            const int p = pos0 + r + j + 1; /* the position this row predicts */
            sl->echo_lp[p] = coli_readout(e->state.logits + (size_t)j * V, V, sl->hist[p], k,
                                          sl->echo_ids + (size_t)p * COLI_MAX_LOGPROBS,
                                          sl->echo_top + (size_t)p * COLI_MAX_LOGPROBS);
        }
    }
    return 0;
}

static void prefill(event_out *o, colibri_engine *e) {
    const int ns = e->cfg.n_slots;
    int slot = -1;
    for (int j = 0; j < ns; j++) {
        const int i = (e->next_prefill + j) % ns;
        if (e->slots[i].state == COLI_SLOT_PREFILL) {
            slot = i;
            break;
        }
    }
    if (slot < 0) return;
    e->next_prefill = (slot + 1) % ns;
    coli_slot *sl = &e->slots[slot];
    const int pos0 = sl->n_past, left = sl->n_prompt - pos0;
    if (left == 0) { /* the whole prompt was cached with its logits */
        next_token(o, e, slot, sl->prompt_logits);
        return;
    }
    int chunk = left < e->cfg.n_batch ? left : e->cfg.n_batch;
    const bool ckpt = e->model.hp.gdn && e->rs_ckpt_n > 0 && e->rs_ckpt_every > 0;
    if (ckpt) { /* a chunk ends where a checkpoint is due */
        const int due = (pos0 / e->rs_ckpt_every + 1) * e->rs_ckpt_every;
        if (pos0 + chunk > due) chunk = due - pos0;
    }
    for (int i = 0; i < chunk; i++) e->rows[i] = coli_row_at(sl->hist[pos0 + i], pos0 + i, &sl->kv);
    const double t0 = coli_now_s();
    int rc = coli_forward(&e->model, &e->state, e->rows, chunk, COLI_ROWS_UNIFORM);
    if (!rc) {
        coli_stats_forward(e);
        coli_stats_rows(e, chunk, false, NULL);
    }
    if (!rc && sl->req.echo) rc = echo_rows(e, sl, pos0, chunk);
    const bool last = chunk == left;
    if (!rc && last && sl->req.max_tokens > 0)
        rc = coli_logits(&e->model, &e->state, chunk - 1, 1, e->state.logits);
    if (!rc && sl->req.max_tokens > 0) {
        coli_mtp_prefill(e, sl, pos0, chunk);
        coli_dm_prefill(e, sl, pos0 + chunk);
    }
    sl->prefill_s += coli_now_s() - t0;
    if (rc) {
        fail_all(o, e, &slot, 1);
        return;
    }
    sl->n_past += chunk;
    if (ckpt && (last || sl->n_past % e->rs_ckpt_every == 0)) coli_slot_checkpoint(e, sl);
    if (!last) return;
    if (sl->req.max_tokens == 0) {
        finish(o, e, slot, COLI_FINISH_LENGTH, -1);
        return;
    }
    const size_t V = (size_t)e->model.hp.n_vocab;
    if (!sl->prompt_logits) sl->prompt_logits = malloc(V * sizeof(float));
    if (sl->prompt_logits) {
        memcpy(sl->prompt_logits, e->state.logits, V * sizeof(float));
        sl->prompt_logits_n = sl->n_prompt;
    }
    next_token(o, e, slot, e->state.logits);
}

int colibri_step(colibri_engine *e, colibri_event *events, int cap) {
    coli_clear_error();
    int rc = check(e, 0, "colibri_step");
    if (rc) return rc;
    if (!events || cap < 2 * e->cfg.n_slots) /* drafts take what room there is beyond this */
        return coli_fail(COLI_E_ARG, "colibri_step: room for %d events is needed", 2 * e->cfg.n_slots);
    event_out o = {events, 0, cap};
    for (int i = 0; i < e->cfg.n_slots; i++)
        if (e->slots[i].cancel && e->slots[i].state != COLI_SLOT_IDLE) finish(&o, e, i, COLI_FINISH_CANCELLED, -1);
    decode(&o, e);
    prefill(&o, e);
    return o.n;
}

int colibri_step_wake(colibri_engine *e, colibri_event *events, int cap, const int *wake_fds, int n_wake) {
    static const char byte = 1;
    for (int i = 0; wake_fds && i < n_wake; i++)
        if (wake_fds[i] >= 0 && write(wake_fds[i], &byte, 1) < 0) { /* EAGAIN: a wake is pending anyway */
        }
    return colibri_step(e, events, cap);
}

/* ---- read-outs and persistence ---- */

int colibri_slot_info(const colibri_engine *e, int slot, colibri_slot_status *out) {
    int rc = check(e, slot, "colibri_slot_info");
    if (rc) return rc;
    if (!out) return coli_fail(COLI_E_ARG, "colibri_slot_info: no output");
    const coli_slot *sl = &e->slots[slot];
    *out = (colibri_slot_status){sl->state, sl->n_past, sl->n_prompt, sl->n_reused, sl->n_gen, sl->finish,
                               sl->prefill_s, sl->decode_s};
    return 0;
}

int colibri_slot_tokens(const colibri_engine *e, int slot, int32_t *out, int cap) {
    int rc = check(e, slot, "colibri_slot_tokens");
    if (rc) return rc;
    const coli_slot *sl = &e->slots[slot];
    if (out && cap > 0) memcpy(out, sl->hist, (size_t)(cap < sl->n_past ? cap : sl->n_past) * sizeof(int32_t));
    return sl->n_past;
}

int colibri_slot_readout(const colibri_engine *e, int slot, int first, int n, float *logprobs, int32_t *top_ids,
                         float *top_logprobs) {
    int rc = check(e, slot, "colibri_slot_readout");
    if (rc) return rc;
    const coli_slot *sl = &e->slots[slot];
    if (!sl->req.echo || sl->n_prompt == 0)
        return coli_fail(COLI_E_STATE, "slot %d's last request asked for no read-out", slot);
    if (sl->n_past < sl->n_prompt || (sl->state == COLI_SLOT_PREFILL))
        return coli_fail(COLI_E_STATE, "slot %d has not finished its prefill", slot);
    if (first < 0 || n < 0 || first + n > sl->n_prompt)
        return coli_fail(COLI_E_ARG, "colibri_slot_readout: positions %d..%d are outside the prompt of %d", first,
                         first + n - 1, sl->n_prompt);
    const int k = sl->req.n_logprobs;
    for (int j = 0; j < n; j++) {
        const int p = first + j;
        const bool none = p <= sl->n_reused; /* position 0, or from the cache */
        if (logprobs) logprobs[j] = none ? NAN : sl->echo_lp[p];
        for (int t = 0; t < k; t++) {
            const size_t at = (size_t)p * COLI_MAX_LOGPROBS + t;
            if (top_ids) top_ids[(size_t)j * k + t] = none ? -1 : sl->echo_ids[at];
            if (top_logprobs) top_logprobs[(size_t)j * k + t] = none ? NAN : sl->echo_top[at];
        }
    }
    return n;
}

int colibri_slot_save(colibri_engine *e, int slot, const char *path) {
    coli_clear_error();
    int rc = check(e, slot, "colibri_slot_save");
    if (rc) return rc;
    const coli_slot *sl = &e->slots[slot];
    if (sl->state != COLI_SLOT_IDLE) return coli_fail(COLI_E_STATE, "slot %d is busy; save it between requests", slot);
    /* a Gated DeltaNet slot's checkpoints go with it (newest first), so a branch after a restart finds them */
    int pos[COLI_RS_CKPT_MAX];
    float *rs[COLI_RS_CKPT_MAX];
    coli_kv_ckpts ck = {0, COLI_RS_CKPT_MAX, pos, rs};
    for (int c = sl->n_past; c > 0;) { /* the next older one below c */
        int best = -1;
        for (int i = 0; i < COLI_RS_CKPT_MAX; i++)
            if (sl->ck_pos[i] > 0 && sl->ck_pos[i] <= c && sl->ck_rs[i] && (best < 0 || sl->ck_pos[i] > sl->ck_pos[best]))
                best = i;
        if (best < 0) break;
        pos[ck.n] = sl->ck_pos[best];
        rs[ck.n++] = sl->ck_rs[best];
        c = sl->ck_pos[best] - 1;
    }
    return coli_kv_save(&sl->kv, e->model_id, sl->hist, sl->n_past, &ck, path);
}

int colibri_slot_load(colibri_engine *e, int slot, const char *path) {
    coli_clear_error();
    int rc = check(e, slot, "colibri_slot_load");
    if (rc) return rc;
    coli_slot *sl = &e->slots[slot];
    if (sl->state != COLI_SLOT_IDLE) return coli_fail(COLI_E_STATE, "slot %d is busy", slot);
    sl->n_past = 0; /* empty until the file has proved itself */
    sl->prompt_logits_n = 0;
    sl->mtp_rows = sl->dm_n = 0;
    coli_slot_drop_checkpoints(sl, 0); /* until the file has proved itself */
    int pos[COLI_RS_CKPT_MAX];
    const int cap = e->rs_ckpt_n < COLI_RS_CKPT_MAX ? e->rs_ckpt_n : COLI_RS_CKPT_MAX;
    coli_kv_ckpts ck = {0, cap, pos, sl->ck_rs}; /* into the slot's buffers, in order */
    rc = coli_kv_load(&sl->kv, e->model_id, sl->hist, &ck, path);
    if (rc < 0) return rc;
    const int V = e->model.hp.n_vocab;
    for (int i = 0; i < rc; i++)
        if (sl->hist[i] < 0 || sl->hist[i] >= V)
            return coli_fail(COLI_E_CORRUPT, "kv load: %s holds token id %d outside the vocabulary", path, sl->hist[i]);
    sl->n_past = rc;
    for (int i = 0; i < ck.n; i++) sl->ck_pos[i] = pos[i];
    return rc;
}
