/* draft_model.h — drafts from a second, smaller model with the same vocabulary (colibri_config.draft_model_path,
 * `--draft-model`), for the verify in slots.c, as llama-server's draft model.
 *
 * The draft model keeps a KV cache of its own per slot, filled over the prompt and the kept tokens. A step's
 * drafts are its greedy continuation of the slot's text from the pending token: k one-row steps of the small
 * model, the first batched with the tokens its cache lacks. Guesses the verify rejects are written over on the
 * next step. Drafts change no output: slots.c keeps a draft only where plain decoding picks the same token. */
#ifndef COLI_DRAFT_MODEL_H
#define COLI_DRAFT_MODEL_H

#include "engine.h"

/* After the target's state and slots exist: the draft model, its run state (sharing the target's threads) and
 * each slot's cache; 0 with e->dm NULL when none is asked for or drafting is off; a named error when the file
 * cannot be loaded or its vocabulary differs. */
int coli_dm_open(colibri_engine *e);
void coli_dm_close(colibri_engine *e);
/* After a prefill chunk: the draft model's cache of slot sl up to position upto (exclusive). */
void coli_dm_prefill(colibri_engine *e, coli_slot *sl, int upto);
/* Before a decode step: every decoding slot's draft (sl->drafted, sl->n_ready). */
void coli_dm_draft(colibri_engine *e);
/* After a decode step kept slot sl's rows up to sl->n_past. */
void coli_dm_keep(colibri_engine *e, coli_slot *sl);

#endif
