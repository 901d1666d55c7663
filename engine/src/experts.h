/* experts.h — where routed experts come from: "give me expert e of layer l".
 *
 * Every access to a routed expert's weights goes through this interface, so
 * that the streaming store (RAM budget, disk tiers, prefetch) can replace the
 * resident one without the forward pass noticing. Today every expert is
 * resident: its matrices are views into the file mapping of the 3-D GGUF
 * tensors ffn_{gate,up,down}_exps ([n_in, n_out, n_expert]). */
#ifndef COLI_EXPERTS_H
#define COLI_EXPERTS_H

#include "gguf.h"
#include "model.h"

typedef struct coli_expert {
    coli_mat gate; /* n_embd -> n_ff_exp */
    coli_mat up;   /* n_embd -> n_ff_exp */
    coli_mat down; /* n_ff_exp -> n_embd */
} coli_expert;

typedef struct coli_expert_store coli_expert_store;

/* Binds layer il's expert tensors (named error on wrong shapes or types). */
int coli_layer_experts_bind(coli_layer_experts *le, const gguf_file *f, int il, int64_t n_embd, int64_t n_ff_exp,
                            int n_expert);

coli_expert_store *coli_experts_open(const coli_model *m);
void coli_experts_close(coli_expert_store *st);
/* Expert e of layer il, readable until coli_experts_release. */
int coli_experts_get(coli_expert_store *st, int il, int e, coli_expert *out);
void coli_experts_release(coli_expert_store *st, int il, int e);

#endif
