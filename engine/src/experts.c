/* experts.c — the expert store: resident views into the mapping, or a RAM
 * cache of experts streamed from disk under a budget (experts.h).
 *
 * Streaming: each MoE layer owns `cap` entries (the budget split evenly over
 * the layers, since every layer routes the same number of experts per token);
 * an entry holds one expert's gate, up and down, read by an I/O thread with
 * three preads straight from the 3-D tensors. Room is made (policy) by the
 * entry of least recency-decayed routing frequency (LRFU: routed experts
 * are skewed, so a hot expert outlives a burst of cold ones), or the least
 * recently used; never an entry in use (refs) or one the current step asked
 * for; prefetched reads only ever displace entries of their own layer, and
 * only cold ones. Reads a step waits for go before reads on a prediction,
 * and a prediction the router did not confirm is dropped unread.
 * Pinned experts live outside the cache, loaded once from learned heat. One
 * mutex guards the bookkeeping; the reads happen outside it. */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "experts.h"

enum { E_FREE = 0, E_LOADING, E_READY, E_FAILED };
#define DIO_ALIGN 4096
/* LRFU: an expert's routing frequency halves every this many steps of its layer (bench/scale_models.py
 * policies: 16 to 256 all within a point on a steady workload; a shorter one follows a shift sooner) */
#define LRFU_HALF_LIFE 64.0
/* A read on a prediction may evict only an expert routed less than this often (decayed): in a cache that
 * holds little more than a step's experts, guessing evicts the hot ones the next step wants (issue #44:
 * gpt-oss-20b at 4 GiB, 7 entries a layer for top-4, read 35% more per token with the guesses than without) */
#define PREFETCH_COLD_FREQ 1.0f
enum { J_NONE = 0, J_PREFETCH, J_DEMAND }; /* which queue an entry's read waits in */

typedef struct {
    int e;             /* expert held, -1 when free */
    int state;         /* E_* */
    int refs;          /* acquisitions not yet released */
    bool prefetched;   /* read on a prediction and not chosen since */
    uint8_t queued;    /* J_*: its read waits in that queue (not yet started) */
    uint64_t used;     /* LRU clock */
    uint64_t wanted;   /* request generation that needs it */
    uint8_t *buf;
} entry;

typedef struct {
    bool moe;
    uint64_t off[3];   /* file offsets of expert 0's gate, up, down */
    size_t size[3];    /* bytes of one expert's matrix (= the stride between experts) */
    size_t slot[3];    /* bytes reserved per matrix in a buffer */
    size_t buf_bytes;
    int cap;
    entry *ent;        /* [cap] */
    int32_t *where;    /* [n_expert]: entry index or -1 */
    uint8_t **pinned;  /* [n_expert]: a pinned copy or NULL */
    uint8_t *predicted; /* [n_expert]: predicted for this layer's next choice */
    float *freq;       /* [n_expert]: LRFU routing frequency as of freq_at */
    uint64_t *freq_at; /* [n_expert]: the generation freq was last decayed to */
    uint64_t gen;      /* request generation */
} layer_cache;

typedef struct {
    int il, idx;
} io_job;

typedef struct {
    io_job *job;
    int head, len, cap;
} io_queue;

struct coli_expert_store {
    const coli_model *m;
    coli_store_config cfg;
    bool streaming;
    int fd, fd_direct;
    int n_layer, n_expert;
    layer_cache *lc;
    uint8_t *tier;     /* [n_layer * n_expert] COLI_TIER_* */
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    io_queue demand, guess; /* reads a step waits for, then reads on a prediction (the I/O threads' order) */
    pthread_t *io;
    int n_io;
    bool stop;
    uint64_t clock;
    coli_store_counters c;
};

uint64_t coli_experts_bytes(const coli_model *m, int il) {
    const coli_layer *L = &m->layers[il];
    return L->is_moe ? (uint64_t)L->exps.gate_stride + L->exps.up_stride + L->exps.down_stride : 0;
}

/* ---- views ---- */

static coli_mat nth(coli_mat w, size_t stride, int e) {
    w.data = (const uint8_t *)w.data + (size_t)e * stride;
    return w;
}

static void mapped_views(const coli_layer_experts *le, int e, coli_expert *out) {
    out->gate = nth(le->gate, le->gate_stride, e);
    out->up = nth(le->up, le->up_stride, e);
    out->down = nth(le->down, le->down_stride, e);
}

/* An expert's matrices inside a buffer laid out by layer_cache.slot. */
static void buffer_views(const coli_store_config *cfg, const coli_layer_experts *le, const layer_cache *lc, int e,
                         const uint8_t *buf, coli_expert *out) {
    const coli_mat *src[3] = {&le->gate, &le->up, &le->down};
    coli_mat *dst[3] = {&out->gate, &out->up, &out->down};
    size_t at = 0;
    for (int k = 0; k < 3; k++) {
        *dst[k] = *src[k];
        dst[k]->mm_flags = 0; /* read from the file as stored */
        const size_t skew = cfg->direct_io ? (size_t)((lc->off[k] + (uint64_t)e * lc->size[k]) % DIO_ALIGN) : 0;
        dst[k]->data = buf + at + skew;
        at += lc->slot[k];
    }
}

/* ---- reading ---- */

/* n bytes at off; the end of the file may come after `need` of them (an
 * O_DIRECT read rounded up past the last expert). */
static int read_range(int fd, uint8_t *dst, size_t n, size_t need, uint64_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t got = pread(fd, dst + done, n - done, (off_t)(off + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return errno;
        if (got == 0) return done >= need ? 0 : EIO;
        done += (size_t)got;
    }
    return 0;
}

/* Read expert e of a layer into buf; returns 0 or an errno. Buffered reads
 * tell the page cache to drop the range, so only the budget holds it. */
static int read_expert(coli_expert_store *st, const layer_cache *lc, int e, uint8_t *buf, uint64_t *bytes) {
    size_t at = 0;
    for (int k = 0; k < 3; k++) {
        const uint64_t off = lc->off[k] + (uint64_t)e * lc->size[k];
        int rc;
        if (st->fd_direct >= 0) {
            const uint64_t start = off / DIO_ALIGN * DIO_ALIGN;
            const size_t len = (size_t)((off + lc->size[k] - start + DIO_ALIGN - 1) / DIO_ALIGN * DIO_ALIGN);
            rc = read_range(st->fd_direct, buf + at, len, (size_t)(off + lc->size[k] - start), start);
            *bytes += len;
        } else {
            rc = read_range(st->fd, buf + at, lc->size[k], lc->size[k], off);
            posix_fadvise(st->fd, (off_t)off, (off_t)lc->size[k], POSIX_FADV_DONTNEED);
            *bytes += lc->size[k];
        }
        if (rc) return rc;
        at += lc->slot[k];
    }
    return 0;
}

static void push(io_queue *q, io_job j) {
    q->job[(q->head + q->len) % q->cap] = j;
    q->len++;
}

static io_job pop(io_queue *q) {
    const io_job j = q->job[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return j;
}

/* Drop the jobs of q whose entry no longer waits there (moved to the demand queue, or dropped), so a
 * queue never holds more jobs than there are entries. Caller holds st->mu. */
static void unqueue_stale(coli_expert_store *st, io_queue *q, uint8_t kind) {
    const int n = q->len;
    q->len = 0;
    for (int i = 0; i < n; i++) {
        const io_job j = q->job[(q->head + i) % q->cap];
        const entry *en = &st->lc[j.il].ent[j.idx];
        if (en->state == E_LOADING && en->queued == kind) q->job[(q->head + q->len++) % q->cap] = j;
    }
}

/* The next read to start: demanded ones first. Caller holds st->mu. */
static bool next_job(coli_expert_store *st, io_job *out) {
    if (!st->demand.len && !st->guess.len) return false;
    *out = pop(st->demand.len ? &st->demand : &st->guess);
    st->lc[out->il].ent[out->idx].queued = J_NONE;
    return true;
}

static void *io_main(void *arg) {
    coli_expert_store *st = arg;
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (!st->stop && st->demand.len == 0 && st->guess.len == 0) pthread_cond_wait(&st->work, &st->mu);
        if (st->stop) break;
        io_job j;
        if (!next_job(st, &j)) continue;
        layer_cache *lc = &st->lc[j.il];
        entry *en = &lc->ent[j.idx];
        const int e = en->e;
        pthread_mutex_unlock(&st->mu);
        uint64_t bytes = 0;
        const double t0 = coli_now_s();
        const int rc = read_expert(st, lc, e, en->buf, &bytes);
        const double dt = coli_now_s() - t0;
        pthread_mutex_lock(&st->mu);
        st->c.disk_s += dt;
        st->c.bytes_read += bytes;
        st->c.loads++;
        en->state = rc ? E_FAILED : E_READY;
        st->tier[(size_t)j.il * st->n_expert + e] = rc ? COLI_TIER_DISK : COLI_TIER_RAM;
        pthread_cond_broadcast(&st->done);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* ---- the cache (callers hold st->mu) ---- */

/* Expert e's routing frequency now: decayed by the layer steps since it was last counted. */
static float frequency(const layer_cache *lc, int e) {
    const uint64_t age = lc->gen - lc->freq_at[e];
    return age ? lc->freq[e] * exp2f(-(float)((double)age / LRFU_HALF_LIFE)) : lc->freq[e];
}

/* A free entry, else the one the policy gives up among those nobody holds or needs now; -1 if none.
 * For a read on a prediction (guess), only an expert colder than PREFETCH_COLD_FREQ gives way. */
static int victim(const coli_expert_store *st, layer_cache *lc, bool guess) {
    const bool lrfu = st->cfg.policy != COLI_POLICY_LRU;
    int best = -1;
    float best_f = 0.0f;
    for (int i = 0; i < lc->cap; i++) {
        entry *en = &lc->ent[i];
        if (en->state == E_FREE) return i;
        if (en->state == E_LOADING || en->refs > 0 || en->wanted == lc->gen) continue;
        if (guess && frequency(lc, en->e) >= PREFETCH_COLD_FREQ) continue;
        const float f = lrfu ? frequency(lc, en->e) : 0.0f;
        if (best < 0 || f < best_f || (f == best_f && en->used < lc->ent[best].used)) {
            best = i;
            best_f = f;
        }
    }
    return best;
}

static void start_load(coli_expert_store *st, int il, int idx, int e, bool prefetch) {
    layer_cache *lc = &st->lc[il];
    entry *en = &lc->ent[idx];
    if (en->e >= 0) {
        lc->where[en->e] = -1;
        st->tier[(size_t)il * st->n_expert + en->e] = COLI_TIER_DISK;
    }
    en->e = e;
    en->state = E_LOADING;
    en->refs = 0;
    en->prefetched = prefetch;
    en->used = ++st->clock;
    en->wanted = lc->gen;
    lc->where[e] = idx;
    st->tier[(size_t)il * st->n_expert + e] = COLI_TIER_LOADING;
    en->queued = prefetch ? J_PREFETCH : J_DEMAND;
    push(prefetch ? &st->guess : &st->demand, (io_job){il, idx});
    if (prefetch) st->c.prefetch_issued++;
    pthread_cond_signal(&st->work);
}

/* ---- public ---- */

coli_expert_store *coli_experts_open(const coli_model *m, const gguf_file *f, const coli_store_config *cfg) {
    coli_expert_store *st = calloc(1, sizeof *st);
    if (!st) {
        coli_fail(COLI_E_NOMEM, "out of memory");
        return NULL;
    }
    st->m = m;
    st->cfg = *cfg;
    st->n_layer = m->hp.n_layer;
    st->n_expert = m->hp.n_expert;
    st->fd = st->fd_direct = -1;
    st->streaming = cfg->cache_bytes > 0;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->work, NULL);
    pthread_cond_init(&st->done, NULL);
    st->tier = malloc((size_t)st->n_layer * st->n_expert + 1);
    st->lc = calloc((size_t)st->n_layer, sizeof *st->lc);
    if (!st->tier || !st->lc) goto nomem;
    memset(st->tier, st->streaming ? COLI_TIER_DISK : COLI_TIER_RAM, (size_t)st->n_layer * st->n_expert);
    if (!st->streaming) return st;

    st->fd = open(gguf_path(f), O_RDONLY | O_CLOEXEC);
    if (st->fd < 0) {
        coli_fail(COLI_E_IO, "cannot open %s for expert reads: %s", gguf_path(f), strerror(errno));
        goto fail;
    }
    if (cfg->direct_io) {
        st->fd_direct = open(gguf_path(f), O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (st->fd_direct < 0) st->cfg.direct_io = false; /* e.g. tmpfs: buffered reads with fadvise instead */
    }
    /* the budget, split evenly over the MoE layers */
    uint64_t per_token = 0;
    for (int il = 0; il < st->n_layer; il++) per_token += coli_experts_bytes(m, il);
    int64_t cap = per_token ? (int64_t)((uint64_t)cfg->cache_bytes / per_token) : 0;
    if (cap < 1) cap = 1;
    if (cap > st->n_expert) cap = st->n_expert;
    int total = 0;
    for (int il = 0; il < st->n_layer; il++) {
        layer_cache *lc = &st->lc[il];
        const coli_layer_experts *le = &m->layers[il].exps;
        lc->moe = m->layers[il].is_moe;
        if (!lc->moe) continue;
        const uint64_t offs[3] = {le->gate_off, le->up_off, le->down_off};
        const size_t sizes[3] = {le->gate_stride, le->up_stride, le->down_stride};
        lc->buf_bytes = 0;
        for (int k = 0; k < 3; k++) {
            lc->off[k] = offs[k];
            lc->size[k] = sizes[k];
            lc->slot[k] = st->cfg.direct_io ? (sizes[k] + 2 * DIO_ALIGN - 1) / DIO_ALIGN * DIO_ALIGN
                                            : (sizes[k] + 63) / 64 * 64;
            lc->buf_bytes += lc->slot[k];
        }
        lc->cap = (int)cap;
        lc->ent = calloc((size_t)cap, sizeof *lc->ent);
        lc->where = malloc((size_t)st->n_expert * sizeof *lc->where);
        lc->pinned = calloc((size_t)st->n_expert, sizeof *lc->pinned);
        lc->predicted = calloc((size_t)st->n_expert, 1);
        lc->freq = calloc((size_t)st->n_expert, sizeof *lc->freq);
        lc->freq_at = calloc((size_t)st->n_expert, sizeof *lc->freq_at);
        if (!lc->ent || !lc->where || !lc->pinned || !lc->predicted || !lc->freq || !lc->freq_at) goto nomem;
        for (int e = 0; e < st->n_expert; e++) lc->where[e] = -1;
        for (int i = 0; i < cap; i++) {
            lc->ent[i].e = -1;
            if (posix_memalign((void **)&lc->ent[i].buf, DIO_ALIGN, lc->buf_bytes)) goto nomem;
        }
        st->c.cache_bytes += (int64_t)cap * (int64_t)lc->buf_bytes;
        total += (int)cap;
    }
    st->demand.cap = st->guess.cap = total + 1; /* at most one job per entry in each */
    st->demand.job = malloc((size_t)st->demand.cap * sizeof *st->demand.job);
    st->guess.job = malloc((size_t)st->guess.cap * sizeof *st->guess.job);
    st->n_io = cfg->io_threads > 0 ? cfg->io_threads : 4;
    st->io = calloc((size_t)st->n_io, sizeof *st->io);
    if (!st->demand.job || !st->guess.job || !st->io) goto nomem;
    for (int i = 0; i < st->n_io; i++)
        if (pthread_create(&st->io[i], NULL, io_main, st) != 0) {
            st->n_io = i;
            coli_fail(COLI_E_NOMEM, "cannot start the expert I/O threads");
            goto fail;
        }
    return st;
nomem:
    coli_fail(COLI_E_NOMEM, "out of memory for the expert cache (%lld MiB asked)",
              (long long)(cfg->cache_bytes >> 20));
fail:
    coli_experts_close(st);
    return NULL;
}

void coli_experts_close(coli_expert_store *st) {
    if (!st) return;
    pthread_mutex_lock(&st->mu);
    st->stop = true;
    pthread_cond_broadcast(&st->work);
    pthread_mutex_unlock(&st->mu);
    for (int i = 0; i < st->n_io; i++) pthread_join(st->io[i], NULL);
    if (st->lc)
        for (int il = 0; il < st->n_layer; il++) {
            layer_cache *lc = &st->lc[il];
            for (int i = 0; lc->ent && i < lc->cap; i++) free(lc->ent[i].buf);
            for (int e = 0; lc->pinned && e < st->n_expert; e++) free(lc->pinned[e]);
            free(lc->ent);
            free(lc->where);
            free(lc->pinned);
            free(lc->predicted);
            free(lc->freq);
            free(lc->freq_at);
        }
    if (st->fd >= 0) close(st->fd);
    if (st->fd_direct >= 0) close(st->fd_direct);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->work);
    pthread_cond_destroy(&st->done);
    free(st->lc);
    free(st->tier);
    free(st->demand.job);
    free(st->guess.job);
    free(st->io);
    free(st);
}

bool coli_experts_streaming(const coli_expert_store *st) { return st && st->streaming; }

int coli_experts_capacity(const coli_expert_store *st, int il) {
    return st->streaming && st->lc[il].moe ? st->lc[il].cap : st->n_expert;
}

/* The router has chosen layer il's experts: guessed reads for it not started yet are dropped (the
 * bandwidth goes to reads a step waits for). Caller holds st->mu. */
static void drop_unconfirmed(coli_expert_store *st, int il) {
    layer_cache *lc = &st->lc[il];
    for (int i = 0; i < lc->cap; i++) {
        entry *en = &lc->ent[i];
        if (en->queued != J_PREFETCH) continue;
        lc->where[en->e] = -1;
        st->tier[(size_t)il * st->n_expert + en->e] = COLI_TIER_DISK;
        en->queued = J_NONE;
        en->state = E_FREE;
        en->e = -1;
        en->prefetched = false;
        st->c.prefetch_issued--; /* never read: not a guess made, for the waste it counts */
    }
    unqueue_stale(st, &st->guess, J_PREFETCH);
}

void coli_experts_request(coli_expert_store *st, int il, const int32_t *ids, int n, bool prefetch) {
    if (!st->streaming || !st->lc[il].moe) return;
    layer_cache *lc = &st->lc[il];
    pthread_mutex_lock(&st->mu);
    if (!prefetch) {
        lc->gen++;
        for (int j = 0; j < n; j++) { /* what is here stays: mark it needed; a guessed read not started moves up */
            const int idx = lc->where[ids[j]];
            if (idx < 0) continue;
            entry *en = &lc->ent[idx];
            en->wanted = lc->gen;
            if (en->queued == J_PREFETCH) {
                en->queued = J_DEMAND;
                push(&st->demand, (io_job){il, idx});
            }
        }
        drop_unconfirmed(st, il);
    }
    for (int j = 0; j < n; j++) {
        const int e = ids[j];
        if (lc->pinned[e] || lc->where[e] >= 0) continue;
        const int idx = victim(st, lc, prefetch);
        if (idx < 0) break; /* the layer's cache is full of needed experts: later */
        start_load(st, il, idx, e, prefetch);
    }
    pthread_mutex_unlock(&st->mu);
}

void coli_experts_chosen(coli_expert_store *st, int il, const int32_t *ids, int n) {
    if (!st->streaming || !st->lc[il].moe) return;
    layer_cache *lc = &st->lc[il];
    pthread_mutex_lock(&st->mu);
    for (int j = 0; j < n; j++) {
        const int e = ids[j], idx = lc->where[e];
        const bool ready = lc->pinned[e] || (idx >= 0 && lc->ent[idx].state == E_READY);
        if (ready) st->c.hits++;
        else st->c.misses++;
        if (idx >= 0 && lc->ent[idx].prefetched) {
            st->c.prefetch_used++;
            lc->ent[idx].prefetched = false;
        }
        st->c.predicted++;
        if (lc->predicted[e]) st->c.predicted_right++;
        lc->freq[e] = frequency(lc, e) + 1.0f;
        lc->freq_at[e] = lc->gen;
    }
    memset(lc->predicted, 0, (size_t)st->n_expert);
    pthread_mutex_unlock(&st->mu);
}

/* Mark the experts predicted for layer il (prefetch hit-rate bookkeeping) and read them ahead. */
void coli_experts_predict(coli_expert_store *st, int il, const int32_t *ids, int n) {
    if (!st->streaming || il >= st->n_layer || !st->lc[il].moe) return;
    pthread_mutex_lock(&st->mu);
    for (int j = 0; j < n; j++) st->lc[il].predicted[ids[j]] = 1;
    pthread_mutex_unlock(&st->mu);
    if (st->cfg.prefetch) coli_experts_request(st, il, ids, n, true);
}

static int take_ready(coli_expert_store *st, int il, int e, coli_expert *out) {
    layer_cache *lc = &st->lc[il];
    const coli_layer_experts *le = &st->m->layers[il].exps;
    if (lc->pinned[e]) {
        buffer_views(&st->cfg, le, lc, e, lc->pinned[e], out);
        return 1;
    }
    const int idx = lc->where[e];
    if (idx < 0 || lc->ent[idx].state != E_READY) return 0;
    entry *en = &lc->ent[idx];
    en->refs++;
    en->used = ++st->clock;
    buffer_views(&st->cfg, le, lc, e, en->buf, out);
    return 1;
}

int coli_experts_try_acquire(coli_expert_store *st, int il, int e, coli_expert *out) {
    if (!st->streaming || !st->lc[il].moe) {
        if (!st->m->layers[il].is_moe) return 0;
        mapped_views(&st->m->layers[il].exps, e, out);
        return 1;
    }
    pthread_mutex_lock(&st->mu);
    const int got = take_ready(st, il, e, out);
    pthread_mutex_unlock(&st->mu);
    return got;
}

int coli_experts_acquire(coli_expert_store *st, int il, int e, coli_expert *out) {
    const coli_model *m = st->m;
    if (il < 0 || il >= m->hp.n_layer || e < 0 || e >= m->hp.n_expert || !m->layers[il].is_moe)
        return coli_fail(COLI_E_ARG, "no expert %d in layer %d", e, il);
    if (!st->streaming) {
        mapped_views(&m->layers[il].exps, e, out);
        return 0;
    }
    layer_cache *lc = &st->lc[il];
    pthread_mutex_lock(&st->mu);
    const double t0 = coli_now_s();
    int rc = 0;
    for (;;) {
        if (take_ready(st, il, e, out)) break;
        const int idx = lc->where[e];
        if (idx >= 0 && lc->ent[idx].state == E_FAILED) {
            lc->where[e] = -1;
            lc->ent[idx].state = E_FREE;
            lc->ent[idx].e = -1;
            if (!(rc = coli_model_file_error(st->m)))  /* a short read of a shrunk file is named for what it is */
                rc = coli_fail(COLI_E_IO, "io_error: reading expert %d of layer %d failed", e, il);
            break;
        }
        if (idx < 0) {
            const int v = victim(st, lc, false);
            if (v >= 0) {
                start_load(st, il, v, e, false);
                continue;
            }
        }
        pthread_cond_wait(&st->done, &st->mu); /* its read, or a release that frees room */
    }
    st->c.wait_s += coli_now_s() - t0;
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int coli_experts_acquire_any(coli_expert_store *st, int il, const int32_t *ids, int n, int *which, coli_expert *out) {
    if (n <= 0) return coli_fail(COLI_E_ARG, "no expert to acquire in layer %d", il);
    if (!st->streaming || !st->lc[il].moe) {
        *which = 0;
        return coli_experts_acquire(st, il, ids[0], out);
    }
    layer_cache *lc = &st->lc[il];
    pthread_mutex_lock(&st->mu);
    const double t0 = coli_now_s();
    int rc = 0, failed = -1;
    for (;;) {
        int placed = 0, j;
        for (j = 0; j < n; j++) {
            if (take_ready(st, il, ids[j], out)) break;
            const int idx = lc->where[ids[j]];
            if (idx >= 0 && lc->ent[idx].state == E_FAILED) failed = j;
            placed += idx >= 0;
        }
        if (j < n) {
            *which = j;
            break;
        }
        if (failed >= 0) break; /* named below, by the single-expert path */
        if (!placed) { /* none under way: read the first where there is room */
            const int v = victim(st, lc, false);
            if (v >= 0) {
                start_load(st, il, v, ids[0], false);
                continue;
            }
        }
        pthread_cond_wait(&st->done, &st->mu); /* a read done, or a release that frees room */
    }
    st->c.wait_s += coli_now_s() - t0;
    pthread_mutex_unlock(&st->mu);
    if (failed >= 0 && rc == 0) {
        *which = failed;
        return coli_experts_acquire(st, il, ids[failed], out); /* clears the entry, names the error */
    }
    return rc;
}

void coli_experts_release(coli_expert_store *st, int il, int e) {
    if (!st->streaming || !st->lc[il].moe) return;
    layer_cache *lc = &st->lc[il];
    pthread_mutex_lock(&st->mu);
    const int idx = lc->where[e];
    if (!lc->pinned[e] && idx >= 0 && lc->ent[idx].refs > 0) {
        lc->ent[idx].refs--;
        pthread_cond_broadcast(&st->done);
    }
    pthread_mutex_unlock(&st->mu);
}

typedef struct {
    uint32_t count;
    int il, e;
} heat_item;

static int by_count_desc(const void *a, const void *b) {
    const heat_item *x = a, *y = b;
    return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

int coli_experts_pin(coli_expert_store *st, const uint32_t *counts) {
    if (!st->streaming || st->cfg.pin_bytes <= 0 || !counts) return 0;
    const size_t n = (size_t)st->n_layer * st->n_expert;
    heat_item *items = malloc(n * sizeof *items);
    if (!items) return coli_fail(COLI_E_NOMEM, "out of memory");
    size_t k = 0;
    for (int il = 0; il < st->n_layer; il++)
        for (int e = 0; e < st->n_expert; e++)
            if (st->lc[il].moe && counts[(size_t)il * st->n_expert + e] > 0)
                items[k++] = (heat_item){counts[(size_t)il * st->n_expert + e], il, e};
    qsort(items, k, sizeof *items, by_count_desc);
    int pinned = 0;
    for (size_t i = 0; i < k; i++) {
        layer_cache *lc = &st->lc[items[i].il];
        const int e = items[i].e;
        if (lc->pinned[e]) continue;
        if (st->c.pinned_bytes + (int64_t)lc->buf_bytes > st->cfg.pin_bytes) continue; /* a smaller one may fit */
        uint8_t *buf = NULL;
        if (posix_memalign((void **)&buf, DIO_ALIGN, lc->buf_bytes)) break;
        uint64_t bytes = 0;
        const double t0 = coli_now_s();
        if (read_expert(st, lc, e, buf, &bytes)) {
            free(buf);
            continue;
        }
        pthread_mutex_lock(&st->mu);
        st->c.disk_s += coli_now_s() - t0;
        st->c.bytes_read += bytes;
        lc->pinned[e] = buf;
        st->c.pinned_bytes += (int64_t)lc->buf_bytes;
        st->c.n_pinned++;
        const int idx = lc->where[e];
        if (idx >= 0 && lc->ent[idx].refs == 0 && lc->ent[idx].state != E_LOADING) { /* its LRU copy is spare now */
            lc->ent[idx].state = E_FREE;
            lc->ent[idx].e = -1;
            lc->where[e] = -1;
        }
        st->tier[(size_t)items[i].il * st->n_expert + e] = COLI_TIER_PINNED;
        pthread_mutex_unlock(&st->mu);
        pinned++;
    }
    free(items);
    return pinned;
}

void coli_experts_counters(coli_expert_store *st, coli_store_counters *out, uint8_t *tiers) {
    pthread_mutex_lock(&st->mu);
    *out = st->c;
    int cached = 0;
    if (st->streaming)
        for (int il = 0; il < st->n_layer; il++)
            for (int i = 0; i < st->lc[il].cap; i++) cached += st->lc[il].ent[i].state == E_READY;
    out->n_cached = cached;
    if (tiers) memcpy(tiers, st->tier, (size_t)st->n_layer * st->n_expert);
    pthread_mutex_unlock(&st->mu);
}
