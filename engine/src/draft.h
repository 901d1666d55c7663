/* draft.h — speculative decoding's drafts, and how many to verify (slots.c verifies them).
 *
 * A decode step evaluates the slot's pending token and up to k drafted ones after it in one batch
 * (every row computed exactly as alone), then picks each next token from its row as plain decoding
 * would (argmax, or a draw from the slot's generator) and keeps going while the pick equals the draft.
 * The emitted tokens are therefore the ones plain decoding gives, greedy or sampled with the same seed:
 * a deterministic draft is accepted with the target's probability of it, and a rejected one is
 * replaced by a draw from the rest, which is the standard acceptance rule for such drafts.
 *
 * How many: a draft pays when the tokens it is expected to add outweigh what its rows cost, and on a
 * MoE model each row routes to experts of its own, so rows cost more than on a dense one. The engine
 * measures a step's time by its row count and each slot's acceptance as it goes, and each step
 * verifies the drafts that maximise expected tokens per second (coli_draft_plan). */
#ifndef COLI_DRAFT_H
#define COLI_DRAFT_H

#include <stdbool.h>
#include <stdint.h>

#include "../include/colibri.h" /* COLI_MAX_SLOTS */

enum { COLI_DRAFT_MAX = 8 };                                      /* the most tokens drafted per step and slot */
enum { COLI_DRAFT_ROWS = COLI_MAX_SLOTS * (1 + COLI_DRAFT_MAX) }; /* the most rows a decode step has */

/* Prompt lookup: up to k tokens that followed the latest earlier occurrence of seq's last 4 (down to 2)
 * tokens; returns how many were written to out (0: no match). */
int coli_draft_lookup(const int32_t *seq, int n, int32_t *out, int k);

/* A slot's acceptance: drafted tokens kept, out of those judged (a rejection ends a draft), both decayed
 * so the recent text counts most; the estimate starts at 1/2. */
typedef struct {
    float kept, judged;
} coli_draft_state;

/* Decode steps' seconds by row count, and a drafter's seconds per drafted token (a model's MTP block or a draft
 * model: prompt lookup costs nothing), exponential moving averages, for the plan. */
typedef struct {
    double s[COLI_DRAFT_ROWS + 1];
    bool seen[COLI_DRAFT_ROWS + 1];
    double draft_s;
} coli_draft_costs;

/* How many of each slot's drafted tokens to verify this step: n slots offering avail[i] tokens each, with
 * n_plain slots decoding one row besides; writes k[i] (0..avail[i]). */
void coli_draft_plan(const coli_draft_costs *c, int n_plain, coli_draft_state *const *slots, const int *avail,
                     int n, int *k);
/* After a decode step of rows rows that took seconds. */
void coli_draft_cost(coli_draft_costs *c, int rows, double seconds);
/* After a drafter made n tokens in seconds. */
void coli_draft_made(coli_draft_costs *c, int n, double seconds);
/* After a slot's verify: drafted tokens, and how many of them were kept (offered: drafts were found but the
 * plan verified none, which lets the estimate drift back towards 1/2 so the slot tries again later). */
void coli_draft_verified(coli_draft_state *d, int drafted, int accepted);
void coli_draft_offered(coli_draft_state *d);

#endif
