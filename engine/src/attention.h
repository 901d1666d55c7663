/* attention.h — the attention of one layer over a batch of queries. */
#ifndef COLI_ATTENTION_H
#define COLI_ATTENTION_H

#include <stddef.h>

#include "model.h"

/* s->q holds n rows of n_head queries (normed, rotated, scaled) for s->rows;
 * each row's cache of layer il holds its positions 0..pos (this batch's keys
 * and values already written). Writes s->att: n rows of n_head * head_dim_v. Sliding-window
 * layers see the last n_swa positions only. */
void coli_attention(const coli_model *m, coli_state *s, int il, int n);

/* Per-thread scratch coli_attention needs: s->att_scratch holds n_threads
 * times coli_attention_scratch_halves() halves, s->att_scores as many times
 * coli_attention_scratch_floats() floats. */
size_t coli_attention_scratch_halves(const coli_hparams *hp, int n_ctx);
size_t coli_attention_scratch_floats(const coli_hparams *hp, int n_ctx);

#endif
