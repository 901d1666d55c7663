/* deltanet.h — the Gated DeltaNet (linear attention) layers of qwen3next / qwen35moe (deltanet.c). */
#ifndef COLI_DELTANET_H
#define COLI_DELTANET_H
#include <stddef.h>

#include "model.h"

/* Floats of s->gdn per batch row (the projections, the conv output, beta/alpha, the output). */
size_t coli_gdn_row_floats(const coli_hparams *hp);
/* Before a forward batch of a Gated DeltaNet model: a row at position 0 restarts its sequence's recurrent
 * state; a row anywhere but where its state stands is refused (the state cannot rewind). */
int coli_gdn_check_rows(const coli_model *m, const coli_row *rows, int n);
/* Layer il (a linear one) over the batch: attn_norm of s->x, the layer's output into s->tmp. */
int coli_gdn_layer(const coli_model *m, coli_state *s, int il, int n);
#endif
