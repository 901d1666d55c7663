/* experts.c — the resident expert store: every expert is a view into the
 * file mapping. The streaming store (tiers, RAM budget, prefetch) replaces
 * this file's internals behind the same four functions. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "experts.h"
#include "ggml_types.h"
#include "quant.h"

struct coli_expert_store {
    const coli_model *m;
};

/* One 3-D expert tensor [n_in, n_out, n_expert] as expert 0's matrix + stride. */
static int bind_exps(coli_mat *w, size_t *stride, const gguf_file *f, const char *name, int64_t n_in, int64_t n_out,
                     int n_expert) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return coli_fail(COLI_E_MISSING, "missing: tensor '%s' is not in the file", name);
    if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_expert)
        return coli_fail(COLI_E_CORRUPT,
                         "corrupt: tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 "], expected [%" PRId64
                         ", %" PRId64 ", %d] (the file declares %d experts)",
                         name, t->ne[0], t->ne[1], t->ne[2], n_in, n_out, n_expert, n_expert);
    int rc = coli_mat_from_tensor(w, t, name, n_in, n_out);
    if (rc) return rc;
    *stride = coli_row_size(t->type, n_in) * (size_t)n_out;
    return 0;
}

int coli_layer_experts_bind(coli_layer_experts *le, const gguf_file *f, int il, int64_t n_embd, int64_t n_ff_exp,
                            int n_expert) {
    char name[96];
    int rc;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", il);
    if ((rc = bind_exps(&le->gate, &le->gate_stride, f, name, n_embd, n_ff_exp, n_expert))) return rc;
    snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", il);
    if ((rc = bind_exps(&le->up, &le->up_stride, f, name, n_embd, n_ff_exp, n_expert))) return rc;
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", il);
    if ((rc = bind_exps(&le->down, &le->down_stride, f, name, n_ff_exp, n_embd, n_expert))) return rc;
    return 0;
}

coli_expert_store *coli_experts_open(const coli_model *m) {
    coli_expert_store *st = calloc(1, sizeof *st);
    if (!st) {
        coli_fail(COLI_E_NOMEM, "out of memory");
        return NULL;
    }
    st->m = m;
    return st;
}

void coli_experts_close(coli_expert_store *st) { free(st); }

static coli_mat nth(coli_mat w, size_t stride, int e) {
    w.data = (const uint8_t *)w.data + (size_t)e * stride;
    return w;
}

int coli_experts_get(coli_expert_store *st, int il, int e, coli_expert *out) {
    const coli_model *m = st->m;
    if (il < 0 || il >= m->hp.n_layer || e < 0 || e >= m->hp.n_expert || !m->layers[il].is_moe)
        return coli_fail(COLI_E_ARG, "no expert %d in layer %d", e, il);
    const coli_layer_experts *le = &m->layers[il].exps;
    out->gate = nth(le->gate, le->gate_stride, e);
    out->up = nth(le->up, le->up_stride, e);
    out->down = nth(le->down, le->down_stride, e);
    return 0;
}

void coli_experts_release(coli_expert_store *st, int il, int e) {
    (void)st;
    (void)il;
    (void)e; /* resident experts need no release */
}
