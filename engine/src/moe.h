/* moe.h — the routed feed-forward block: router, gating, top-k, the chosen
 * experts (each visited once per batch, for all the rows routed to it), and
 * the weighted sum; plus the shared expert where the family has one. */
#ifndef COLI_MOE_H
#define COLI_MOE_H

#include "experts.h"
#include "model.h"

/* s->xn holds the n normed rows; writes the block's output to s->tmp and
 * records each row's routing (expert ids and weights) in s->route_*. */
int coli_moe_ffn(const coli_model *m, coli_state *s, coli_expert_store *st, int il, int n);

#endif
