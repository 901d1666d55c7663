/* repack.c — resident Q4_K, Q4_0, IQ4_NL and MXFP4 weights rewritten at load into 16-row tiles (repack.h). */
#define _DEFAULT_SOURCE
#include "repack.h"

#include <pthread.h>
#include <stdatomic.h>
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

/* Whether the table in force has tile kernels for every call on such a weight: a batch's
 * arithmetic (vec_dot_mm) for the rows it serves, the one-row one (vec_dot) for the others;
 * false for the scalar set (forced, or all this CPU has), which has none. */
static bool tiles_cover(uint32_t wtype, int64_t n_in) {
    const coli_type_kernels *k = &coli_kernels()->r16[wtype];
    const bool mm_any = k->vec_dot_mm && n_in % k->mm_in_mult == 0 && 16 % k->mm_out_mult == 0;
    const bool mm_all = mm_any && k->mm_min_rows <= 1 && k->mm_group == 1 && k->mm_id_min_rows == 1;
    return (k->vec_dot_16w || k->vec_dot_mm_16w) && (!mm_any || k->vec_dot_mm_16w) && (mm_all || k->vec_dot_16w);
}

bool coli_repack_shape(uint32_t wtype, int64_t n_in, int64_t n_out) {
    const int in_mult = coli_r16_in_mult(wtype);
    return in_mult && n_in % in_mult == 0 && n_out % 16 == 0 && tiles_cover(wtype, n_in);
}

static bool eligible(const mat_use *u) {
    const coli_mat *w = u->w;
    return u->tiles && u->bytes % (16 * coli_row_size(w->type, w->n_in)) == 0 &&
           coli_repack_shape(w->type, w->n_in, w->n_out);
}

/* The whole pages holding n bytes at p: their start, their length. */
static void *page_span(const void *p, size_t n, size_t *len) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from = (uintptr_t)p / page * page;
    *len = (size_t)(((uintptr_t)p + n + page - 1) / page * page - from);
    return (void *)from;
}

/* The work of a load: the chosen ranges, cut into runs of tiles that threads claim. */
#define TILES_PER_RUN 64
typedef struct {
    mat_use **r;       /* the ranges to repack */
    int64_t *first;    /* run index where range i starts (n_r + 1 entries) */
    int n_r;
    size_t tmp_bytes;  /* 16 rows of the widest range */
    atomic_llong next; /* next run to claim */
} repack_job;

static void run_runs(repack_job *J, void *tmp) {
    for (;;) {
        const int64_t k = atomic_fetch_add(&J->next, 1);
        if (k >= J->first[J->n_r]) return;
        int i = 0;
        while (J->first[i + 1] <= k) i++;
        const coli_mat *w = J->r[i]->w;
        const size_t tile = 16 * coli_row_size(w->type, w->n_in);
        const int64_t tiles = (int64_t)(J->r[i]->bytes / tile), t0 = (k - J->first[i]) * TILES_PER_RUN;
        const int64_t t1 = t0 + TILES_PER_RUN < tiles ? t0 + TILES_PER_RUN : tiles;
        char *at = (char *)w->data + (size_t)t0 * tile;
        size_t len;
        void *from = page_span(at, (size_t)(t1 - t0) * tile, &len);
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
        /* the copies made in one call, not a read fault and a write fault per page (an older kernel
         * refuses the advice: the faults then come one by one) */
        madvise(from, len, MADV_POPULATE_WRITE);
        coli_repack_r16(w->type, at, w->n_in, (t1 - t0) * 16, tmp);
    }
}

static void *repack_thread(void *arg) {
    repack_job *J = arg;
    void *tmp = malloc(J->tmp_bytes);
    if (tmp) run_runs(J, tmp); /* without scratch it takes nothing: the caller, which has some, does the rest */
    free(tmp);
    return NULL;
}

/* In place: the mapping is private, so the written pages become this process's own (the
 * file's stay in the page cache, reclaimable) and RSS does not double. The ranges' pages
 * are writable for the repack and read-only again after; n_threads share the runs. */
static void repack_ranges(mat_use **r, int n_r, int n_threads) {
    repack_job J = {.r = r};
    J.first = malloc(((size_t)n_r + 1) * sizeof *J.first);
    for (int i = 0; i < n_r; i++) {
        const size_t tile = 16 * coli_row_size(r[i]->w->type, r[i]->w->n_in);
        if (tile > J.tmp_bytes) J.tmp_bytes = tile;
    }
    void *tmp = J.tmp_bytes ? malloc(J.tmp_bytes) : NULL;
    if (!J.first || !tmp) {
        free(J.first);
        free(tmp);
        return;
    }
    for (int i = 0; i < n_r; i++) {
        size_t len;
        void *from = page_span(r[i]->w->data, r[i]->bytes, &len);
        if (mprotect(from, len, PROT_READ | PROT_WRITE) == 0) r[J.n_r++] = r[i]; /* else as stored */
    }
    J.first[0] = 0;
    for (int i = 0; i < J.n_r; i++) {
        const size_t tile = 16 * coli_row_size(r[i]->w->type, r[i]->w->n_in);
        J.first[i + 1] = J.first[i] + (int64_t)((r[i]->bytes / tile + TILES_PER_RUN - 1) / TILES_PER_RUN);
    }
    atomic_init(&J.next, 0);
    pthread_t th[16];
    int started = 0;
    while (started < n_threads - 1 && started < 16 && pthread_create(&th[started], NULL, repack_thread, &J) == 0)
        started++;
    run_runs(&J, tmp);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    for (int i = 0; i < J.n_r; i++) {
        size_t len;
        void *from = page_span(r[i]->w->data, r[i]->bytes, &len);
        mprotect(from, len, PROT_READ);
        r[i]->w->mm_flags |= COLI_ROWS_R16;
    }
    free(J.first);
    free(tmp);
}

static int64_t read_i64(const char *path, const char *key) { /* a file's number, or key's in a "key value" file */
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long long v = -1;
    const size_t kl = key ? strlen(key) : 0;
    while (fgets(line, sizeof line, f)) {
        if (key && (strncmp(line, key, kl) != 0 || line[kl] != ' ')) continue;
        if (sscanf(key ? line + kl : line, "%lld", &v) != 1) v = -1; /* "max": no limit */
        break;
    }
    fclose(f);
    return v;
}

/* The least room any memory cgroup of this process leaves for more anonymous memory
 * (v2: memory.max less the level's anon; v1: memory.limit_in_bytes less rss), walking up
 * to the root; INT64_MAX without a limit. The sidecar's plan reads the same limits
 * more fully (container.py); this bound only keeps the repack from overrunning one. */
static int64_t cgroup_room(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return INT64_MAX;
    char line[1024], path[1024 + 64];
    int64_t room = INT64_MAX;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const bool v2 = strncmp(line, "0::", 3) == 0;
        char *rel = v2 ? line + 3 : strstr(line, ":memory:");
        if (!rel) continue;
        if (!v2) rel += strlen(":memory:");
        for (;;) {
            const char *root = !v2 ? "/sys/fs/cgroup/memory"
                               : access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) == 0 ? "/sys/fs/cgroup/unified"
                                                                                             : "/sys/fs/cgroup";
            snprintf(path, sizeof path, "%s%s/%s", root, rel, v2 ? "memory.max" : "memory.limit_in_bytes");
            const int64_t lim = read_i64(path, NULL);
            snprintf(path, sizeof path, "%s%s/memory.stat", root, rel);
            const int64_t used = read_i64(path, v2 ? "anon" : "total_rss");
            if (lim > 0 && lim < ((int64_t)1 << 60) && lim - (used > 0 ? used : 0) < room)
                room = lim - (used > 0 ? used : 0);
            char *slash = strrchr(rel, '/');
            if (!slash || slash == rel) {
                if (rel[0] && strcmp(rel, "/") != 0) { rel[0] = 0; continue; } /* the root itself */
                break;
            }
            *slash = 0;
        }
    }
    fclose(f);
    return room;
}

/* Bytes the repacked copies may take: they are the process's own pages, which the kernel
 * cannot drop and read again as it can the mapping's, so they must fit in what is free
 * (MemAvailable and the cgroups' room, less an eighth and at least 256 MiB). */
static int64_t repack_budget(void) {
    int64_t avail = read_i64("/proc/meminfo", "MemAvailable:");
    avail = avail < 0 ? INT64_MAX / 2 : avail * 1024;
    const int64_t room = cgroup_room();
    if (room < avail) avail = room;
    const int64_t margin = avail / 8 > (256 << 20) ? avail / 8 : (256 << 20);
    return avail - margin;
}

bool coli_repack_off(void) {
    const char *env = getenv("COLI_REPACK");
    return env && strcmp(env, "0") == 0;
}

int64_t coli_model_repack(coli_model *m, bool experts_resident, int n_threads) {
    if (coli_repack_off()) return 0;
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
        coli_mat *mats[] = {COLI_LAYER_MATS(L)};
        for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) {
            coli_mat *w = mats[i];
            if (w == &L->exps.gate || w == &L->exps.up || w == &L->exps.down) continue; /* below: 3-D */
            if (w == &L->wk_b || w == &L->wv_b) /* per-head views of a 3-D tensor */
                add(u, &n, w, (w == &L->wk_b ? L->wk_b_stride : L->wv_b_stride) * (size_t)m->hp.n_head, false);
            else /* the router: the next layer's runs early on the raw pointer */
                add(u, &n, w, 0, w != &L->ffn_gate_inp);
        }
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
    mat_use **chosen = malloc((size_t)n * sizeof *chosen + 1);
    int n_chosen = 0;
    int64_t bytes = 0;
    const int64_t budget = repack_budget();
    for (int i = 0; chosen && i < n; i++) {
        if (!eligible(&u[i]) || bytes + (int64_t)u[i].bytes > budget) continue;
        bool skip = false; /* bytes another matrix reads as the file lays them out, or a matrix bound twice */
        for (int j = 0; j < n && !skip; j++)
            skip = j != i && overlaps(&u[i], &u[j]) && (!eligible(&u[j]) || u[j].w->data != u[i].w->data || j < i);
        if (skip) continue;
        chosen[n_chosen++] = &u[i];
        bytes += (int64_t)u[i].bytes;
    }
    repack_ranges(chosen, n_chosen, n_threads);
    int64_t done = 0;
    for (int i = 0; i < n; i++) {
        if (!(u[i].w->mm_flags & COLI_ROWS_R16)) continue;
        bool first = true;
        for (int j = 0; j < i && first; j++) first = u[j].w->data != u[i].w->data;
        for (int j = i + 1; j < n; j++) /* the same matrix bound twice (one tensor, two uses) */
            if (u[j].w->data == u[i].w->data && u[j].bytes == u[i].bytes) u[j].w->mm_flags |= COLI_ROWS_R16;
        if (first) done += (int64_t)u[i].bytes;
    }
    free(chosen);
    free(u);
    return done;
}
