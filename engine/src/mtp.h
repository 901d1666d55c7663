/* mtp.h — drafts from the model's own multi-token-prediction block (nextn), for the verify in slots.c.
 *
 * DeepSeek V3, GLM-4.5 and their kin ship a block after the trunk that predicts the token after next: its row
 * at position p reads the trunk's final normed hidden state at p and the embedding of the token at p + 1, and
 * its logits guess the token at p + 2 (llama.cpp's graph_mtp, src/models/glm4-moe.cpp). The block has a KV cache
 * of its own per slot, filled over the prompt and over every kept position, so its attention sees the whole
 * text. A draft of k tokens chains the block: the row after the last carries the block's own normed output as
 * its hidden state, as llama.cpp's draft-mtp does with one block.
 *
 * Drafts change no output: slots.c keeps a draft only where plain decoding picks the same token. */
#ifndef COLI_MTP_H
#define COLI_MTP_H

#include "engine.h"

/* After the trunk's state and slots exist: the block seen as a one-layer model, its run state (sharing the
 * trunk's threads), and each slot's cache. 0 with e->mtp NULL when the model has no block or drafts are off. */
int coli_mtp_open(colibri_engine *e);
void coli_mtp_close(colibri_engine *e);

/* After a prefill chunk of slot sl (positions pos0 .. pos0 + n - 1, their final normed rows in e->state.xn):
 * the block's rows of the positions whose next token is known, and the last prompt row kept for its first
 * draft. A failure only stops the slot's drafts from the block. */
void coli_mtp_prefill(colibri_engine *e, coli_slot *sl, int pos0, int n);

/* Rows a slot may hold for the block unrun while its guesses pause (slots.c pace: drafts the plan declined),
 * run in one batch when they resume: a paused block costs the steps nothing. */
enum { COLI_MTP_LAG_MAX = 32 };
enum { COLI_MTP_HELD_MAX = 1 + COLI_DRAFT_MAX + COLI_MTP_LAG_MAX }; /* the rows of sl->mtp_h */

/* Before a decode step: every decoding slot whose trunk rows since its last drafts are kept gets the block's
 * rows for them, then up to its draft count of chained guesses in sl->drafted (sl->n_ready); a slot whose
 * guesses pause keeps its rows for later while they fit. */
void coli_mtp_draft(colibri_engine *e);

/* The block's rows slot sl holds unrun, run now (before a new request replaces its history: the part the next
 * prompt shares stays in the block's cache). */
void coli_mtp_flush(colibri_engine *e, coli_slot *sl);

/* After a decode step kept n rows of slot sl (the first at position pos, its final normed row at e->state.xn
 * row `row`): the rows its next drafts start from, after any it holds unrun. */
void coli_mtp_keep(colibri_engine *e, coli_slot *sl, int row, int n, int pos);

#endif
