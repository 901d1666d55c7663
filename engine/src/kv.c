/* kv.c — the KV cache of one sequence and its crash-safe file.
 *
 * File layout (little-endian), written as <path>.tmp.<pid>, fsynced, renamed:
 *   kv_header (below)
 *   version 2 (a cache whose sliding-window layers keep a window): uint32 first, uint32 0 — the
 *          first position those layers' rows hold (a multiple of 64); version 1: all from 0;
 *          version 3 (a Gated DeltaNet slot with recurrent-state checkpoints): uint32 first, uint32 n_ck
 *   int32  tokens[n_tokens]
 *   f16    K of each layer: n_tokens rows of k_dim (a sliding layer in version 2: n_tokens - first)
 *   f16    V of each layer: v_dim rows of n_tokens (likewise)
 *   f16    DSA models: the indexer keys of each full layer, n_tokens rows of ik_dim
 *          (the model identity fixes their shape, so the header is the same)
 *   f32    Gated DeltaNet models: the recurrent state after the n_tokens tokens, per linear layer
 *          (conv state, then delta-rule state; shape fixed by the model identity too)
 *   version 3: n_ck checkpoints of that state along the tokens, newest first, each int32 pos, int32 0,
 *          then the state after tokens[0..pos) (slots.c)
 * The header carries the model's identity and a checksum of itself and of the
 * payload; a file that fails any check is refused whole, before the cache is
 * marked valid, so a bad file never poisons a slot. */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "kv.h"

#define KV_MAGIC "COLIKV\r\n" /* the \r\n catches text-mode mangling */
#define KV_VERSION 3u /* reads 1 (every layer whole), 2 (windows) and 3 (recurrent-state checkpoints) */

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t model_id;
    uint32_t n_layer, k_dim, v_dim, n_tokens;
    uint64_t payload_bytes;
    uint64_t payload_hash;
    uint64_t header_hash; /* of every field above */
} kv_header;

/* DSA's indexer key cache: one f16 row of idx_head_dim per token and full layer (llama.cpp's kv_lid) */
static size_t ik_dim(const coli_hparams *hp) { return hp->dsa ? (size_t)hp->idx_head_dim : 0; }

/* Gated DeltaNet: floats of one linear layer's conv state and delta-rule state */
static size_t rs_conv(const coli_hparams *hp) {
    return hp->gdn ? (size_t)(hp->ssm_d_conv - 1) * (size_t)hp->ssm_d_state * (2 * hp->ssm_n_k + hp->ssm_n_v) : 0;
}
static size_t rs_ssm(const coli_hparams *hp) {
    return hp->gdn ? (size_t)hp->ssm_n_v * hp->ssm_d_state * hp->ssm_d_state : 0;
}

#define CELL_ALIGN 64 /* attention's cell chunk (attention.c CHUNK): a window starts at a multiple of it */

static bool slot_slides(const coli_hparams *hp, int slot) {
    return slot < COLI_KV_SWA_BITS && (hp->kv_swa[slot / 64] >> (slot % 64) & 1);
}

int coli_kv_swa_cells(const coli_hparams *hp, int n_ctx, int n_batch) {
    /* COLI_SWA_FULL=1: every layer keeps every position (llama.cpp's swa_full) */
    const char *full = getenv("COLI_SWA_FULL");
    if (hp->n_swa <= 0 || (full && full[0] == '1')) return n_ctx;
    /* the first row of a batch sees n_swa - 1 positions before it, from the chunk they begin in, and the
     * batch's rows after it (llama.cpp's iSWA cache: n_swa + n_ubatch cells, padded to 256) */
    const int64_t need = ((int64_t)hp->n_swa + CELL_ALIGN + (n_batch > 0 ? n_batch : 1) + CELL_ALIGN - 1) /
                         CELL_ALIGN * CELL_ALIGN;
    return need < n_ctx ? (int)need : n_ctx;
}

static size_t halves_bytes(const coli_hparams *hp, int n_ctx, int n_batch) {
    const int swa_cells = coli_kv_swa_cells(hp, n_ctx, n_batch);
    size_t cells = 0;
    for (int l = 0; l < hp->n_kv_layers; l++) cells += (size_t)(slot_slides(hp, l) ? swa_cells : n_ctx);
    const size_t ik_cells = (size_t)hp->n_idx_layers * (size_t)n_ctx;
    return (cells * ((size_t)hp->kv_k_dim + (size_t)hp->kv_v_dim) + ik_cells * ik_dim(hp)) * sizeof(coli_half);
}

size_t coli_kv_bytes(const coli_hparams *hp, int n_ctx, int n_batch) {
    const size_t rs = (size_t)hp->n_rs_layers * (rs_conv(hp) + rs_ssm(hp)) * sizeof(float);
    return (halves_bytes(hp, n_ctx, n_batch) + 63) / 64 * 64 + rs;
}

int coli_kv_init(coli_kv *kv, const coli_hparams *hp, int n_ctx, int n_batch) {
    memset(kv, 0, sizeof *kv);
    kv->n_ctx = n_ctx;
    kv->n_layer = hp->n_kv_layers;
    kv->k_dim = (size_t)hp->kv_k_dim;
    kv->v_dim = (size_t)hp->kv_v_dim; /* 0 for MLA: the values are the latent, read from K */
    kv->swa_cells = coli_kv_swa_cells(hp, n_ctx, n_batch);
    kv->swa_keep = hp->n_swa > 0 ? hp->n_swa - 1 : 0;
    kv->bytes = coli_kv_bytes(hp, n_ctx, n_batch);
    kv->layer = calloc(kv->n_layer > 0 ? (size_t)kv->n_layer : 1, sizeof *kv->layer);
    if (!kv->layer) return coli_fail(COLI_E_NOMEM, "out of memory");
    /* anonymous pages: zero, and taken from the system only when written */
    void *p = mmap(NULL, kv->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(kv->layer);
        kv->layer = NULL;
        return coli_fail(COLI_E_NOMEM, "out of memory: a KV cache of %d tokens needs %zu MiB of address space", n_ctx,
                         kv->bytes >> 20);
    }
    kv->k = p;
    coli_half *at = kv->k;
    for (int l = 0; l < kv->n_layer; l++) {
        kv->layer[l].slides = slot_slides(hp, l);
        kv->layer[l].swa = kv->layer[l].slides && kv->swa_cells < n_ctx;
        kv->layer[l].cells = kv->layer[l].swa ? kv->swa_cells : n_ctx;
        kv->layer[l].k = at;
        at += (size_t)kv->layer[l].cells * kv->k_dim;
    }
    for (int l = 0; l < kv->n_layer; l++) {
        kv->layer[l].v = at;
        at += (size_t)kv->layer[l].cells * kv->v_dim;
    }
    kv->ik_dim = ik_dim(hp);
    kv->n_ik_layers = hp->dsa ? hp->n_idx_layers : 0;
    kv->ik = at;
    kv->n_rs_layers = hp->gdn ? hp->n_rs_layers : 0;
    kv->rs_conv = rs_conv(hp);
    kv->rs_ssm = rs_ssm(hp);
    kv->rs = (float *)((char *)p + (halves_bytes(hp, n_ctx, n_batch) + 63) / 64 * 64);
    kv->rs_pos = 0;
    return 0;
}

static bool has_window(const coli_kv *kv) { return kv->swa_cells < kv->n_ctx; }

/* the first position a row at pos sees, floored to its chunk */
static int window_start(const coli_kv *kv, int pos) {
    const int lo = pos - kv->swa_keep > 0 ? pos - kv->swa_keep : 0;
    return lo / CELL_ALIGN * CELL_ALIGN;
}

bool coli_kv_resumable(const coli_kv *kv, int pos) {
    return pos == 0 || !has_window(kv) || window_start(kv, pos) >= kv->swa_base;
}

int coli_kv_prepare(coli_kv *kv, int pmin, int pmax) {
    if (!has_window(kv)) return 0;
    if (pmin == 0) { /* a restart: nothing before it is read */
        kv->swa_base = 0;
    } else if (window_start(kv, pmin) < kv->swa_base) {
        return coli_fail(COLI_E_STATE,
                         "position %d needs the %d positions before it, and the sliding-window cache has moved on to "
                         "position %d: evaluate again from position 0",
                         pmin, kv->swa_keep, kv->swa_base);
    }
    if (pmax - kv->swa_base < kv->swa_cells) return 0;
    /* move the window on: cells from the first row's window start become cells 0.. */
    const int base = window_start(kv, pmin), d = base - kv->swa_base, n = kv->swa_cells - d;
    if (pmax - base >= kv->swa_cells)
        return coli_fail(COLI_E_ARG, "a batch of positions %d..%d is longer than the sliding-window cache's %d cells",
                         pmin, pmax, kv->swa_cells);
    for (int l = 0; l < kv->n_layer; l++) {
        const coli_kv_layer *L = &kv->layer[l];
        if (!L->swa) continue;
        memmove(L->k, L->k + (size_t)d * kv->k_dim, (size_t)n * kv->k_dim * sizeof(coli_half));
        for (size_t r = 0; r < kv->v_dim; r++) {
            coli_half *row = L->v + r * (size_t)L->cells;
            memmove(row, row + d, (size_t)n * sizeof(coli_half));
        }
    }
    kv->swa_base = base;
    return 0;
}

void coli_kv_free(coli_kv *kv) {
    if (kv && kv->k) munmap(kv->k, kv->bytes);
    if (kv) free(kv->layer);
    if (kv) memset(kv, 0, sizeof *kv);
}

/* ---- checksums: 64-bit FNV-1a over words, then a final avalanche ---- */

uint64_t coli_hash64(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; n; n--, p++) h = (h ^ *p) * 0x100000001b3ULL;
    return h;
}

static uint64_t finish_hash(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

#define HASH_SEED 0xcbf29ce484222325ULL

/* ---- saving ---- */

typedef struct {
    FILE *f;
    uint64_t hash, bytes;
    int failed;
} sink;

static void put(sink *s, const void *p, size_t n) {
    if (s->failed) return;
    if (fwrite(p, 1, n, s->f) != n) s->failed = errno ? errno : EIO;
    s->hash = coli_hash64(s->hash, p, n);
    s->bytes += n;
}

static uint64_t header_hash(const kv_header *h) {
    return finish_hash(coli_hash64(HASH_SEED, h, offsetof(kv_header, header_hash)));
}

/* fsync the directory holding path, so the rename itself is durable */
static void sync_dir(const char *path) {
    char *copy = strdup(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

int coli_kv_save(const coli_kv *kv, uint64_t model_id, const int32_t *tokens, int n_tokens, const coli_kv_ckpts *ck,
                 const char *path) {
    if (!kv || !kv->k || !path || n_tokens < 0 || n_tokens > kv->n_ctx || (n_tokens > 0 && !tokens))
        return coli_fail(COLI_E_ARG, "kv save: bad arguments");
    if (kv->n_rs_layers && kv->rs_pos != n_tokens)
        return coli_fail(COLI_E_STATE, "kv save: the recurrent state holds %d tokens, the history %d", kv->rs_pos,
                         n_tokens);
    const int first = has_window(kv) ? kv->swa_base : 0; /* the window layers' first position held */
    if (first > n_tokens) return coli_fail(COLI_E_ARG, "kv save: %d tokens, the window holds from %d", n_tokens, first);
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return coli_fail(COLI_E_ARG, "kv save: path too long");
    FILE *f = fopen(tmp, "wb");
    if (!f) return coli_fail(COLI_E_IO, "kv save: cannot create %s: %s", tmp, strerror(errno));
    char *buf = malloc(1 << 20);
    if (buf) setvbuf(f, buf, _IOFBF, 1 << 20);
    kv_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, KV_MAGIC, 8);
    const int n_ck = kv->n_rs_layers && ck ? ck->n : 0;
    for (int i = 0; i < n_ck; i++)
        if (ck->pos[i] <= 0 || ck->pos[i] > n_tokens || !ck->rs[i] || (i && ck->pos[i] >= ck->pos[i - 1]))
            return coli_fail(COLI_E_ARG, "kv save: checkpoint %d holds %d tokens of %d (newest first)", i, ck->pos[i],
                             n_tokens);
    /* a cache with every position and no checkpoint is the version-1 file it always was */
    h.version = n_ck > 0 ? 3u : first > 0 ? 2u : 1u;
    h.header_bytes = sizeof h;
    h.model_id = model_id;
    h.n_layer = (uint32_t)kv->n_layer;
    h.k_dim = (uint32_t)kv->k_dim;
    h.v_dim = (uint32_t)kv->v_dim;
    h.n_tokens = (uint32_t)n_tokens;
    sink s = {f, HASH_SEED, 0, 0};
    put(&s, &h, sizeof h); /* placeholder, rewritten with the checksums */
    s.hash = HASH_SEED;
    s.bytes = 0;
    errno = 0;
    if (h.version >= 2) {
        const uint32_t ext[2] = {(uint32_t)first, (uint32_t)n_ck};
        put(&s, ext, sizeof ext);
    }
    put(&s, tokens, (size_t)n_tokens * sizeof *tokens);
    for (int il = 0; il < kv->n_layer; il++) {
        const size_t n = (size_t)(n_tokens - (kv->layer[il].swa ? first : 0));
        put(&s, kv->layer[il].k, n * kv->k_dim * sizeof(coli_half));
    }
    for (int il = 0; il < kv->n_layer; il++) {
        const size_t n = (size_t)(n_tokens - (kv->layer[il].swa ? first : 0));
        for (size_t d = 0; d < kv->v_dim; d++)
            put(&s, kv->layer[il].v + d * (size_t)kv->layer[il].cells, n * sizeof(coli_half));
    }
    const size_t n = (size_t)n_tokens;
    for (int l = 0; l < kv->n_ik_layers; l++)
        put(&s, kv->ik + (size_t)l * kv->n_ctx * kv->ik_dim, n * kv->ik_dim * sizeof(coli_half));
    if (kv->n_rs_layers)
        put(&s, kv->rs, (size_t)kv->n_rs_layers * (kv->rs_conv + kv->rs_ssm) * sizeof(float));
    for (int i = 0; i < n_ck; i++) {
        const int32_t at[2] = {ck->pos[i], 0};
        put(&s, at, sizeof at);
        put(&s, ck->rs[i], (size_t)kv->n_rs_layers * (kv->rs_conv + kv->rs_ssm) * sizeof(float));
    }
    h.payload_bytes = s.bytes;
    h.payload_hash = finish_hash(s.hash);
    h.header_hash = header_hash(&h);
    if (!s.failed && (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0)) s.failed = errno ? errno : EIO;
    if (!s.failed && fwrite(&h, 1, sizeof h, f) != sizeof h) s.failed = errno ? errno : EIO;
    if (!s.failed && (fflush(f) != 0 || fsync(fileno(f)) != 0)) s.failed = errno ? errno : EIO;
    if (fclose(f) != 0 && !s.failed) s.failed = errno ? errno : EIO;
    free(buf);
    if (!s.failed && rename(tmp, path) != 0) s.failed = errno ? errno : EIO;
    if (s.failed) {
        unlink(tmp);
        return coli_fail(COLI_E_IO, "kv save: writing %s failed: %s", path, strerror(s.failed));
    }
    sync_dir(path);
    return 0;
}

/* ---- loading ---- */

static int get(FILE *f, void *p, size_t n, uint64_t *hash) {
    if (fread(p, 1, n, f) != n) return -1;
    *hash = coli_hash64(*hash, p, n);
    return 0;
}

int coli_kv_load(coli_kv *kv, uint64_t model_id, int32_t *tokens, coli_kv_ckpts *ck, const char *path) {
    if (!kv || !kv->k || !tokens || !path) return coli_fail(COLI_E_ARG, "kv load: bad arguments");
    FILE *f = fopen(path, "rb");
    if (!f) return coli_fail(errno == ENOENT ? COLI_E_MISSING : COLI_E_IO, "kv load: cannot open %s: %s", path,
                             strerror(errno));
    struct stat st;
    kv_header h;
    int rc = 0;
    coli_half *stage = NULL;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = coli_fail(COLI_E_IO, "kv load: %s is not a regular file", path);
        goto done;
    }
    if (fread(&h, 1, sizeof h, f) != sizeof h) {
        rc = coli_fail(COLI_E_TRUNCATED, "kv load: %s ends inside its header", path);
        goto done;
    }
    if (memcmp(h.magic, KV_MAGIC, 8) != 0) {
        rc = coli_fail(COLI_E_FORMAT, "kv load: %s is not a colibri KV file", path);
        goto done;
    }
    if ((h.version < 1 || h.version > KV_VERSION) || h.header_bytes != sizeof h) {
        rc = coli_fail(COLI_E_VERSION, "kv load: %s has format version %u, this engine reads %u", path, h.version,
                       KV_VERSION);
        goto done;
    }
    if (header_hash(&h) != h.header_hash) {
        rc = coli_fail(COLI_E_CORRUPT, "kv load: %s has a damaged header", path);
        goto done;
    }
    if (h.model_id != model_id || h.n_layer != (uint32_t)kv->n_layer || h.k_dim != kv->k_dim || h.v_dim != kv->v_dim) {
        rc = coli_fail(COLI_E_UNSUPPORTED, "kv load: %s belongs to another model", path);
        goto done;
    }
    const size_t n = h.n_tokens;
    if (n > (size_t)kv->n_ctx) {
        rc = coli_fail(COLI_E_TOO_LONG, "kv load: %s holds %zu tokens, the context holds %d", path, n, kv->n_ctx);
        goto done;
    }
    uint64_t hash = HASH_SEED;
    uint32_t ext[2] = {0, 0}; /* version 2: the window layers' first position; 3: and the checkpoints */
    if (h.version >= 2 && get(f, ext, sizeof ext, &hash)) {
        rc = coli_fail(COLI_E_TRUNCATED, "kv load: %s ends early", path);
        goto done;
    }
    const size_t first = ext[0], n_ck = h.version == 3 ? ext[1] : 0;
    if (first > n || first % 64 || (h.version == 2 && ext[1]) || (n_ck && !kv->n_rs_layers) || n_ck > n) {
        rc = coli_fail(COLI_E_CORRUPT, "kv load: %s declares a window from position %zu of %zu", path, first, n);
        goto done;
    }
    if (first > 0 && !has_window(kv)) {
        rc = coli_fail(COLI_E_UNSUPPORTED,
                       "kv load: %s keeps its sliding-window layers from position %zu only; this context (%d) keeps "
                       "every position",
                       path, first, kv->n_ctx);
        goto done;
    }
    size_t rows_total = 0; /* K / V rows of all layers in the file */
    for (int il = 0; il < kv->n_layer; il++) rows_total += n - (kv->layer[il].slides ? first : 0);
    const uint64_t rs_bytes = (uint64_t)kv->n_rs_layers * (kv->rs_conv + kv->rs_ssm) * sizeof(float);
    const uint64_t want = (h.version >= 2 ? sizeof ext : 0) + n * sizeof(int32_t) +
                          (uint64_t)rows_total * (kv->k_dim + kv->v_dim) * sizeof(coli_half) +
                          (uint64_t)kv->n_ik_layers * n * kv->ik_dim * sizeof(coli_half) + rs_bytes +
                          (uint64_t)n_ck * (2 * sizeof(int32_t) + rs_bytes);
    if (h.payload_bytes != want || (uint64_t)st.st_size != sizeof h + want) {
        rc = coli_fail((uint64_t)st.st_size < sizeof h + want ? COLI_E_TRUNCATED : COLI_E_CORRUPT,
                       "kv load: %s has %lld bytes, its header declares %llu", path, (long long)st.st_size,
                       (unsigned long long)(sizeof h + want));
        goto done;
    }
    /* a window layer keeps the positions from where the next row's window begins (or the file's first) */
    size_t base = 0;
    if (has_window(kv)) {
        base = (size_t)window_start(kv, (int)n);
        if (base < first) base = first;
    }
    int bad = get(f, tokens, n * sizeof *tokens, &hash);
    stage = malloc((n ? n : 1) * (kv->k_dim > 1 ? kv->k_dim : 1) * sizeof(coli_half));
    if (!stage) {
        rc = coli_fail(COLI_E_NOMEM, "kv load: out of memory");
        goto done;
    }
    for (int il = 0; il < kv->n_layer && !bad; il++) { /* K: rows from the file's first, kept from base */
        const coli_kv_layer *L = &kv->layer[il];
        const size_t from = L->slides ? first : 0, keep = L->swa ? base : 0;
        if (!L->swa) { /* straight into the cache, as ever */
            bad = get(f, L->k, n * kv->k_dim * sizeof(coli_half), &hash);
            continue;
        }
        bad = get(f, stage, (n - from) * kv->k_dim * sizeof(coli_half), &hash);
        if (!bad) memcpy(L->k, stage + (keep - from) * kv->k_dim, (n - keep) * kv->k_dim * sizeof(coli_half));
    }
    for (int il = 0; il < kv->n_layer && !bad; il++) {
        const coli_kv_layer *L = &kv->layer[il];
        const size_t from = L->slides ? first : 0, keep = L->swa ? base : 0;
        for (size_t d = 0; d < kv->v_dim && !bad; d++) {
            bad = get(f, stage, (n - from) * sizeof(coli_half), &hash);
            if (!bad) memcpy(L->v + d * (size_t)L->cells, stage + (keep - from), (n - keep) * sizeof(coli_half));
        }
    }
    for (int l = 0; l < kv->n_ik_layers && !bad; l++)
        bad = get(f, kv->ik + (size_t)l * kv->n_ctx * kv->ik_dim, n * kv->ik_dim * sizeof(coli_half), &hash);
    kv->rs_pos = -1; /* no state until the file has proved itself (a row at position 0 restarts it) */
    if (rs_bytes && !bad) bad = get(f, kv->rs, (size_t)rs_bytes, &hash);
    /* the checkpoints, newest first: the first ck->cap kept, the rest read for the checksum only */
    float *spare = NULL;
    int32_t prev = INT32_MAX;
    if (ck) ck->n = 0;
    for (size_t i = 0; i < n_ck && !bad; i++) {
        int32_t at[2];
        bad = get(f, at, sizeof at, &hash);
        if (bad) break;
        if (at[0] <= 0 || (size_t)at[0] > n || at[1] || at[0] >= prev) {
            free(spare);
            rc = coli_fail(COLI_E_CORRUPT, "kv load: %s declares a checkpoint of %d tokens of %zu", path, at[0], n);
            goto done;
        }
        float *into = NULL;
        if (ck && ck->n < ck->cap) {
            if (!ck->rs[ck->n]) ck->rs[ck->n] = malloc((size_t)rs_bytes);
            into = ck->rs[ck->n];
        }
        if (!into && !spare) spare = malloc((size_t)rs_bytes);
        if (!into && !spare) {
            rc = coli_fail(COLI_E_NOMEM, "kv load: out of memory");
            goto done;
        }
        prev = at[0];
        bad = get(f, into ? into : spare, (size_t)rs_bytes, &hash);
        if (!bad && into) ck->pos[ck->n++] = at[0];
    }
    free(spare);
    if (bad) {
        rc = coli_fail(COLI_E_TRUNCATED, "kv load: %s ends early", path);
        goto done;
    }
    if (finish_hash(hash) != h.payload_hash) {
        rc = coli_fail(COLI_E_CORRUPT, "kv load: %s fails its checksum", path);
        goto done;
    }
    rc = (int)n;
    kv->rs_pos = (int)n;
    kv->swa_base = (int)base;
done:
    free(stage);
    fclose(f);
    return rc;
}
