/* attention.h — the attention of one layer over a batch of queries. */
#ifndef COLI_ATTENTION_H
#define COLI_ATTENTION_H

#include "model.h"

/* s->q holds n rows of n_head queries (normed, rotated, scaled); the cache of
 * layer il holds positions 0..pos+n-1 (this batch's keys and values already
 * written). Writes s->att: n rows of n_head * head_dim_v. Sliding-window
 * layers see the last n_swa positions only. */
void coli_attention(const coli_model *m, coli_state *s, int il, int n, int pos);

#endif
