/* repack.c — resident Q4_K weights rewritten at load into 16-row tiles (repack.h). */
#define _DEFAULT_SOURCE
#include "repack.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels.h"
#include "matmul.h"
#include "quant.h"

/* Every matrix of the model with how it is read: `tiles` ones only through the
 * matmuls (coli_state_matmul, the experts' dot_rows), the others also row by row
 * or with other kernels (embeddings, the router's early call, per-head views). */
typedef struct {
    coli_mat *w;
    size_t bytes;
    bool tiles;
} mat_use;

#define MAX_USES_PER_LAYER 40

static void add(mat_use *u, int *n, coli_mat *w, size_t bytes, bool tiles) {
    if (!w->n_in || !w->data) return;
    u[*n].w = w;
    u[*n].bytes = bytes ? bytes : coli_row_size(w->type, w->n_in) * (size_t)w->n_out;
    u[*n].tiles = tiles;
    (*n)++;
}

static bool overlaps(const mat_use *a, const mat_use *b) {
    const char *p = a->w->data, *q = b->w->data;
    return p < q + b->bytes && q < p + a->bytes;
}

static bool eligible(const mat_use *u) {
    const coli_mat *w = u->w;
    return u->tiles && w->type == GGML_TYPE_Q4_K && w->n_in % QK_K == 0 && w->n_out % 16 == 0 &&
           u->bytes % (16 * coli_row_size(w->type, w->n_in)) == 0;
}

/* In place: the mapping is private, so the written pages become this process's
 * own (the file's stay in the page cache, reclaimable) and RSS does not double. */
static bool repack_range(coli_mat *w, size_t bytes, void *tmp) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t from = (uintptr_t)w->data / page * page;
    const uintptr_t to = ((uintptr_t)w->data + bytes + page - 1) / page * page;
    if (mprotect((void *)from, to - from, PROT_READ | PROT_WRITE) != 0) return false;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
    /* the copies made in one call, not a read fault and a write fault per page (an older kernel
     * refuses the advice: the faults then come one by one) */
    madvise((void *)from, to - from, MADV_POPULATE_WRITE);
    const size_t row = coli_row_size(w->type, w->n_in);
    coli_repack_q4_K_r16((void *)w->data, w->n_in, (int64_t)(bytes / row), tmp);
    mprotect((void *)from, to - from, PROT_READ);
    return true;
}

/* Bytes the repacked copies may take: they are the process's own pages, which the kernel
 * cannot drop and read again as it can the mapping's, so they must fit in what is free
 * (MemAvailable, less an eighth and at least 256 MiB); unknown: no bound. */
static int64_t repack_budget(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return INT64_MAX;
    char line[256];
    long long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
    fclose(f);
    if (kib < 0) return INT64_MAX;
    const int64_t avail = (int64_t)kib * 1024, margin = avail / 8 > (256 << 20) ? avail / 8 : (256 << 20);
    return avail - margin;
}

int64_t coli_model_repack(coli_model *m, bool experts_resident) {
    const char *env = getenv("COLI_REPACK");
    if (env && strcmp(env, "0") == 0) return 0;
    if (!coli_kernels()->q4_K_r16.vec_dot_16w) return 0; /* the scalar set (forced, or all this CPU has) */
    const int n_layer = m->hp.n_layer;
    mat_use *u = malloc(((size_t)n_layer * MAX_USES_PER_LAYER + 8) * sizeof *u);
    if (!u) return 0;
    int n = 0;
    add(u, &n, &m->tok_embd, 0, false);
    if (m->output.data != m->tok_embd.data) add(u, &n, &m->output, 0, true);
    add(u, &n, &m->ple_tok_embd, 0, false);
    add(u, &n, &m->ple_model_proj, 0, true);
    for (int il = 0; il < n_layer; il++) {
        coli_layer *L = &m->layers[il];
        coli_mat *tiles[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down,
                             &L->gate_shexp, &L->up_shexp, &L->down_shexp, &L->wq_a, &L->wq_b, &L->wkv_a,
                             &L->wkv_b, &L->idx_wq_b, &L->idx_wk, &L->idx_proj, &L->ssm_qkv, &L->ssm_gate,
                             &L->ssm_ba, &L->ssm_beta, &L->ssm_alpha, &L->ssm_out, &L->gate_inp_shexp,
                             &L->ple_gate, &L->ple_proj};
        for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++) add(u, &n, tiles[i], 0, true);
        add(u, &n, &L->ffn_gate_inp, 0, false); /* the next layer's router runs early on the raw pointer */
        add(u, &n, &L->wk_b, (size_t)L->wk_b_stride * (size_t)m->hp.n_head, false); /* per-head views */
        add(u, &n, &L->wv_b, (size_t)L->wv_b_stride * (size_t)m->hp.n_head, false);
        if (L->is_moe) { /* the n_expert matrices of a 3-D tensor are one matrix of n_expert * n_out rows */
            const coli_layer_experts *le = &L->exps;
            coli_mat *ex[3] = {&L->exps.gate, &L->exps.up, &L->exps.down};
            const size_t stride[3] = {le->gate_stride, le->up_stride, le->down_stride};
            for (int k = 0; k < 3; k++) {
                const size_t one = coli_row_size(ex[k]->type, ex[k]->n_in) * (size_t)ex[k]->n_out;
                /* a fused gate_up is read as two halves: each must be whole tiles */
                const bool halves = k > 0 || !le->gate_up_fused || (ex[k]->n_out / 2) % 16 == 0;
                add(u, &n, ex[k], stride[k] * (size_t)m->hp.n_expert,
                    experts_resident && ex[k]->n_in && stride[k] == one && halves);
            }
        }
    }
    size_t tmp_bytes = 0;
    for (int i = 0; i < n; i++)
        if (eligible(&u[i]) && 16 * coli_row_size(u[i].w->type, u[i].w->n_in) > tmp_bytes)
            tmp_bytes = 16 * coli_row_size(u[i].w->type, u[i].w->n_in);
    void *tmp = tmp_bytes ? malloc(tmp_bytes) : NULL;
    int64_t done = 0;
    const int64_t budget = repack_budget();
    for (int i = 0; tmp && i < n; i++) {
        if (!eligible(&u[i]) || (u[i].w->mm_flags & COLI_ROWS_R16) || done + (int64_t)u[i].bytes > budget) continue;
        bool shared = false; /* bytes another matrix reads as the file lays them out, or already repacked */
        for (int j = 0; j < n && !shared; j++)
            shared = j != i && overlaps(&u[i], &u[j]) &&
                     (!eligible(&u[j]) || u[j].w->data != u[i].w->data || (u[j].w->mm_flags & COLI_ROWS_R16));
        if (shared || !repack_range(u[i].w, u[i].bytes, tmp)) continue;
        u[i].w->mm_flags |= COLI_ROWS_R16;
        for (int j = 0; j < n; j++) /* the same matrix bound twice (one tensor, two uses) */
            if (u[j].w->data == u[i].w->data && u[j].bytes == u[i].bytes) u[j].w->mm_flags |= COLI_ROWS_R16;
        done += (int64_t)u[i].bytes;
    }
    free(tmp);
    free(u);
    return done;
}
