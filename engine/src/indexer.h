/* indexer.h — DeepSeek sparse attention's "lightning indexer" (deepseek32,
 * glm-dsa): for each query, the cells its MLA attention may see. */
#ifndef COLI_INDEXER_H
#define COLI_INDEXER_H

#include <stddef.h>

#include "model.h"

/* Layer il (a full indexer layer) over the batch's n rows: s->xn holds the
 * attention's normed input and s->mla_qa the normed q LoRA (forward.c's
 * mla_queries). Caches each row's indexer key at its position, then leaves in
 * s->idx_sel / s->idx_n_sel the top idx_top_k cells of each row (every visible
 * cell when there are no more). Shared layers reuse what the last call left. */
int coli_indexer(const coli_model *m, coli_state *s, int il, int n);

/* Floats of per-thread scratch coli_indexer needs (s->idx_scratch holds n_threads times this). */
size_t coli_indexer_scratch_floats(const coli_hparams *hp, int n_ctx);

#endif
