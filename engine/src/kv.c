/* kv.c — the KV cache of one sequence and its crash-safe file.
 *
 * File layout (little-endian), written as <path>.tmp.<pid>, fsynced, renamed:
 *   kv_header (below)
 *   int32  tokens[n_tokens]
 *   f16    K of each layer: n_tokens rows of k_dim
 *   f16    V of each layer: v_dim rows of n_tokens
 *   f16    DSA models: the indexer keys of each full layer, n_tokens rows of ik_dim
 *          (the model identity fixes their shape, so the header is the same)
 *   f32    Gated DeltaNet models: the recurrent state after the n_tokens tokens, per linear layer
 *          (conv state, then delta-rule state; shape fixed by the model identity too)
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
#define KV_VERSION 1u

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

static size_t halves_bytes(const coli_hparams *hp, int n_ctx) {
    const size_t cells = (size_t)hp->n_kv_layers * (size_t)n_ctx;
    const size_t ik_cells = (size_t)hp->n_idx_layers * (size_t)n_ctx;
    return (cells * ((size_t)hp->kv_k_dim + (size_t)hp->kv_v_dim) + ik_cells * ik_dim(hp)) * sizeof(coli_half);
}

size_t coli_kv_bytes(const coli_hparams *hp, int n_ctx) {
    const size_t rs = (size_t)hp->n_rs_layers * (rs_conv(hp) + rs_ssm(hp)) * sizeof(float);
    return (halves_bytes(hp, n_ctx) + 63) / 64 * 64 + rs;
}

int coli_kv_init(coli_kv *kv, const coli_hparams *hp, int n_ctx) {
    memset(kv, 0, sizeof *kv);
    kv->n_ctx = n_ctx;
    kv->n_layer = hp->n_kv_layers;
    kv->k_dim = (size_t)hp->kv_k_dim;
    kv->v_dim = (size_t)hp->kv_v_dim; /* 0 for MLA: the values are the latent, read from K */
    kv->bytes = coli_kv_bytes(hp, n_ctx);
    /* anonymous pages: zero, and taken from the system only when written */
    void *p = mmap(NULL, kv->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return coli_fail(COLI_E_NOMEM, "out of memory: a KV cache of %d tokens needs %zu MiB of address space", n_ctx,
                         kv->bytes >> 20);
    kv->k = p;
    kv->v = kv->k + (size_t)kv->n_layer * n_ctx * kv->k_dim;
    kv->ik_dim = ik_dim(hp);
    kv->n_ik_layers = hp->dsa ? hp->n_idx_layers : 0;
    kv->ik = kv->v + (size_t)kv->n_layer * n_ctx * kv->v_dim;
    kv->n_rs_layers = hp->gdn ? hp->n_rs_layers : 0;
    kv->rs_conv = rs_conv(hp);
    kv->rs_ssm = rs_ssm(hp);
    kv->rs = (float *)((char *)p + (halves_bytes(hp, n_ctx) + 63) / 64 * 64);
    kv->rs_pos = 0;
    return 0;
}

void coli_kv_free(coli_kv *kv) {
    if (kv && kv->k) munmap(kv->k, kv->bytes);
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

int coli_kv_save(const coli_kv *kv, uint64_t model_id, const int32_t *tokens, int n_tokens, const char *path) {
    if (!kv || !kv->k || !path || n_tokens < 0 || n_tokens > kv->n_ctx || (n_tokens > 0 && !tokens))
        return coli_fail(COLI_E_ARG, "kv save: bad arguments");
    if (kv->n_rs_layers && kv->rs_pos != n_tokens)
        return coli_fail(COLI_E_STATE, "kv save: the recurrent state holds %d tokens, the history %d", kv->rs_pos,
                         n_tokens);
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
    h.version = KV_VERSION;
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
    put(&s, tokens, (size_t)n_tokens * sizeof *tokens);
    const size_t n = (size_t)n_tokens;
    for (int il = 0; il < kv->n_layer; il++)
        put(&s, kv->k + (size_t)il * kv->n_ctx * kv->k_dim, n * kv->k_dim * sizeof(coli_half));
    for (int il = 0; il < kv->n_layer; il++)
        for (size_t d = 0; d < kv->v_dim; d++)
            put(&s, kv->v + ((size_t)il * kv->v_dim + d) * kv->n_ctx, n * sizeof(coli_half));
    for (int l = 0; l < kv->n_ik_layers; l++)
        put(&s, kv->ik + (size_t)l * kv->n_ctx * kv->ik_dim, n * kv->ik_dim * sizeof(coli_half));
    if (kv->n_rs_layers)
        put(&s, kv->rs, (size_t)kv->n_rs_layers * (kv->rs_conv + kv->rs_ssm) * sizeof(float));
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

int coli_kv_load(coli_kv *kv, uint64_t model_id, int32_t *tokens, const char *path) {
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
    if (h.version != KV_VERSION || h.header_bytes != sizeof h) {
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
    const uint64_t rs_bytes = (uint64_t)kv->n_rs_layers * (kv->rs_conv + kv->rs_ssm) * sizeof(float);
    const uint64_t want = n * sizeof(int32_t) + (uint64_t)kv->n_layer * n * (kv->k_dim + kv->v_dim) * sizeof(coli_half) +
                          (uint64_t)kv->n_ik_layers * n * kv->ik_dim * sizeof(coli_half) + rs_bytes;
    if (h.payload_bytes != want || (uint64_t)st.st_size != sizeof h + want) {
        rc = coli_fail((uint64_t)st.st_size < sizeof h + want ? COLI_E_TRUNCATED : COLI_E_CORRUPT,
                       "kv load: %s has %lld bytes, its header declares %llu", path, (long long)st.st_size,
                       (unsigned long long)(sizeof h + want));
        goto done;
    }
    uint64_t hash = HASH_SEED;
    int bad = get(f, tokens, n * sizeof *tokens, &hash);
    for (int il = 0; il < kv->n_layer && !bad; il++)
        bad = get(f, kv->k + (size_t)il * kv->n_ctx * kv->k_dim, n * kv->k_dim * sizeof(coli_half), &hash);
    stage = malloc(n ? n * sizeof(coli_half) : 1);
    if (!stage) {
        rc = coli_fail(COLI_E_NOMEM, "kv load: out of memory");
        goto done;
    }
    for (int il = 0; il < kv->n_layer && !bad; il++)
        for (size_t d = 0; d < kv->v_dim && !bad; d++) {
            bad = get(f, stage, n * sizeof(coli_half), &hash);
            if (!bad) memcpy(kv->v + ((size_t)il * kv->v_dim + d) * kv->n_ctx, stage, n * sizeof(coli_half));
        }
    for (int l = 0; l < kv->n_ik_layers && !bad; l++)
        bad = get(f, kv->ik + (size_t)l * kv->n_ctx * kv->ik_dim, n * kv->ik_dim * sizeof(coli_half), &hash);
    kv->rs_pos = -1; /* no state until the file has proved itself (a row at position 0 restarts it) */
    if (rs_bytes && !bad) bad = get(f, kv->rs, (size_t)rs_bytes, &hash);
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
done:
    free(stage);
    fclose(f);
    return rc;
}
