/* gguf.c — GGUF v2/v3 reader: parse and bounds-check the header, map the file.
 *
 * The file is hostile until proven otherwise: every read is bounded by the
 * bytes left, every count is capped by the bytes it would need before anything
 * is allocated, and every failure is a named error (colibri_last_error) that
 * says what was expected. Nothing here prints, aborts or allocates more than
 * a small multiple of the file's header size. */
#define _GNU_SOURCE /* O_CLOEXEC on older glibc */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "ggml_types.h"
#include "gguf.h"
#include "mapguard.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "colibri reads little-endian GGUF files on little-endian hosts only"
#endif

#define GGUF_MAX_NESTING 8      /* arrays of arrays deeper than this are refused */
#define GGUF_MAX_NAME 4096      /* a tensor name longer than this is corrupt */

struct gguf_file {
    char *path;
    int fd;                  /* kept open for pread by the expert store */
    const uint8_t *map;      /* the whole file, read-only */
    uint64_t size;
    int guard;               /* mapguard slot of the mapping, -1 if unguarded */
    uint64_t dev, ino;       /* the file opened, to tell a replacement at the same path */
    uint32_t version;
    int64_t n_kv;
    gguf_kv *kv;             /* n_kv entries */
    int64_t n_tensors;
    gguf_tensor *tensors;    /* n_tensors entries */
    int64_t *tensor_index;   /* open-addressing hash of tensor names, -1 = empty */
    uint64_t index_cap;      /* power of two */
    uint32_t alignment;
    uint64_t data_offset;
};

/* ---- the bounded cursor ---------------------------------------------- */

typedef struct {
    const uint8_t *base, *p, *end;
} cursor;

static uint64_t cur_off(const cursor *c) { return (uint64_t)(c->p - c->base); }
static uint64_t cur_left(const cursor *c) { return (uint64_t)(c->end - c->p); }

static int need(cursor *c, uint64_t n, const char *what) {
    if (cur_left(c) < n)
        return coli_fail(COLI_E_TRUNCATED,
                         "truncated: %s needs %" PRIu64 " bytes at offset %" PRIu64
                         ", but the file ends at %" PRIu64,
                         what, n, cur_off(c), (uint64_t)(c->end - c->base));
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v, const char *what) {
    int rc = need(c, 4, what);
    if (rc) return rc;
    memcpy(v, c->p, 4);
    c->p += 4;
    return 0;
}

static int rd_u64(cursor *c, uint64_t *v, const char *what) {
    int rc = need(c, 8, what);
    if (rc) return rc;
    memcpy(v, c->p, 8);
    c->p += 8;
    return 0;
}

static int rd_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len;
    int rc = rd_u64(c, &len, what);
    if (rc) return rc;
    if (len > cur_left(c))
        return coli_fail(COLI_E_TRUNCATED,
                         "truncated: %s declares a string of %" PRIu64 " bytes at offset %" PRIu64
                         ", but only %" PRIu64 " bytes are left",
                         what, len, cur_off(c), cur_left(c));
    s->ptr = (const char *)c->p;
    s->len = len;
    c->p += len;
    return 0;
}

/* ---- value types ------------------------------------------------------ */

static const char *const TYPE_NAMES[GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};

const char *gguf_type_name(uint32_t t) { return t < GGUF_TYPE_COUNT ? TYPE_NAMES[t] : "?"; }

/* Bytes of one fixed-size value; 0 for string/array (variable). */
static uint64_t fixed_size(uint32_t t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

/* Skip over one array payload (element type, count, elements) with every
 * count checked against the bytes left. */
static int skip_value(cursor *c, uint32_t type, int depth, const char *key);

static int skip_array_elems(cursor *c, uint32_t et, uint64_t n, int depth, const char *key) {
    if (et >= GGUF_TYPE_COUNT)
        return coli_fail(COLI_E_CORRUPT, "corrupt: key '%s' has an array of unknown value type %u", key, et);
    uint64_t sz = fixed_size(et);
    if (sz) {
        if (n > cur_left(c) / sz)
            return coli_fail(COLI_E_TRUNCATED,
                             "truncated: key '%s' declares %" PRIu64 " %s elements at offset %" PRIu64
                             ", but only %" PRIu64 " bytes are left",
                             key, n, gguf_type_name(et), cur_off(c), cur_left(c));
        c->p += n * sz;
        return 0;
    }
    /* strings need >= 8 bytes each, nested arrays >= 12 */
    uint64_t min = et == GGUF_TYPE_STRING ? 8 : 12;
    if (n > cur_left(c) / min)
        return coli_fail(COLI_E_TRUNCATED,
                         "truncated: key '%s' declares %" PRIu64 " %s elements at offset %" PRIu64
                         ", more than the %" PRIu64 " bytes left can hold",
                         key, n, gguf_type_name(et), cur_off(c), cur_left(c));
    for (uint64_t i = 0; i < n; i++) {
        int rc = skip_value(c, et, depth, key);
        if (rc) return rc;
    }
    return 0;
}

static int skip_value(cursor *c, uint32_t type, int depth, const char *key) {
    if (type == GGUF_TYPE_STRING) {
        gguf_str s;
        return rd_str(c, &s, "a string value");
    }
    if (type == GGUF_TYPE_ARRAY) {
        if (depth >= GGUF_MAX_NESTING)
            return coli_fail(COLI_E_CORRUPT, "corrupt: key '%s' nests arrays deeper than %d", key,
                             GGUF_MAX_NESTING);
        uint32_t et;
        uint64_t n;
        int rc = rd_u32(c, &et, "an array's element type");
        if (!rc) rc = rd_u64(c, &n, "an array's length");
        if (!rc) rc = skip_array_elems(c, et, n, depth + 1, key);
        return rc;
    }
    uint64_t sz = fixed_size(type);
    if (!sz) return coli_fail(COLI_E_CORRUPT, "corrupt: key '%s' has unknown value type %u", key, type);
    int rc = need(c, sz, "a metadata value");
    if (rc) return rc;
    c->p += sz;
    return 0;
}

/* ---- parsing ---------------------------------------------------------- */

/* A name from the file, fit for an error message: printable ASCII only
 * (other bytes become '?'), cut with "..." when longer than the buffer. */
static const char *printable(const char *s, uint64_t len, char *buf, size_t cap) {
    size_t n = len < cap - 1 ? (size_t)len : cap - 1;
    for (size_t i = 0; i < n; i++) buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    if (len > n && n >= 3) memcpy(buf + n - 3, "...", 3);
    buf[n] = '\0';
    return buf;
}

static void key_cstr(gguf_str k, char *buf, size_t cap) { printable(k.ptr, k.len, buf, cap); }

static int parse_kv(gguf_file *f, cursor *c, gguf_kv *kv, int64_t i) {
    char what[64], key[128];
    snprintf(what, sizeof what, "the key of metadata entry %" PRId64, i);
    int rc = rd_str(c, &kv->key, what);
    if (rc) return rc;
    key_cstr(kv->key, key, sizeof key);
    if (kv->key.len == 0) return coli_fail(COLI_E_CORRUPT, "corrupt: metadata entry %" PRId64 " has an empty key", i);
    if (memchr(kv->key.ptr, '\0', kv->key.len))
        return coli_fail(COLI_E_CORRUPT, "corrupt: metadata key '%s' contains a NUL byte", key);
    for (int64_t j = 0; j < i; j++) {
        if (f->kv[j].key.len == kv->key.len && memcmp(f->kv[j].key.ptr, kv->key.ptr, kv->key.len) == 0)
            return coli_fail(COLI_E_CORRUPT, "corrupt: metadata key '%s' appears twice", key);
    }
    rc = rd_u32(c, &kv->type, "a metadata value type");
    if (rc) return rc;
    if (kv->type >= GGUF_TYPE_COUNT)
        return coli_fail(COLI_E_CORRUPT, "corrupt: key '%s' has unknown value type %u (expected 0..12)", key,
                         kv->type);
    if (kv->type != GGUF_TYPE_ARRAY) {
        const uint8_t *start = c->p;
        if (kv->type == GGUF_TYPE_STRING) {
            gguf_str s;
            rc = rd_str(c, &s, "a string value");
            if (rc) return rc;
            kv->data = (const uint8_t *)s.ptr;
            kv->nbytes = s.len;
        } else {
            rc = skip_value(c, kv->type, 0, key);
            if (rc) return rc;
            kv->data = start;
            kv->nbytes = (uint64_t)(c->p - start);
        }
        return 0;
    }
    rc = rd_u32(c, &kv->arr_type, "an array's element type");
    if (!rc) rc = rd_u64(c, &kv->arr_n, "an array's length");
    if (rc) return rc;
    kv->data = c->p;
    rc = skip_array_elems(c, kv->arr_type, kv->arr_n, 1, key);
    if (rc) return rc;
    kv->nbytes = (uint64_t)(c->p - kv->data);
    if (kv->arr_type == GGUF_TYPE_STRING && kv->arr_n > 0) {
        /* index the strings once: a vocabulary is read by id, not scanned */
        kv->str_offsets = malloc(kv->arr_n * sizeof *kv->str_offsets);
        if (!kv->str_offsets)
            return coli_fail(COLI_E_NOMEM, "out of memory indexing %" PRIu64 " strings of key '%s'", kv->arr_n, key);
        const uint8_t *p = kv->data;
        for (uint64_t j = 0; j < kv->arr_n; j++) {
            uint64_t len;
            kv->str_offsets[j] = (uint64_t)(p - kv->data);
            memcpy(&len, p, 8);
            p += 8 + len; /* validated by skip_array_elems */
        }
    }
    return 0;
}

static int checked_mul(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

static int parse_tensor(gguf_file *f, cursor *c, gguf_tensor *t, int64_t i) {
    char what[64];
    gguf_str name;
    snprintf(what, sizeof what, "the name of tensor %" PRId64, i);
    int rc = rd_str(c, &name, what);
    if (rc) return rc;
    if (name.len == 0) return coli_fail(COLI_E_CORRUPT, "corrupt: tensor %" PRId64 " has an empty name", i);
    if (name.len > GGUF_MAX_NAME)
        return coli_fail(COLI_E_CORRUPT, "corrupt: tensor %" PRId64 " has a name of %" PRIu64 " bytes (limit %d)", i,
                         name.len, GGUF_MAX_NAME);
    if (memchr(name.ptr, '\0', name.len))
        return coli_fail(COLI_E_CORRUPT, "corrupt: the name of tensor %" PRId64 " contains a NUL byte", i);
    t->name = malloc(name.len + 1);
    if (!t->name) return coli_fail(COLI_E_NOMEM, "out of memory reading tensor names");
    memcpy(t->name, name.ptr, name.len);
    t->name[name.len] = '\0';
    char shown[96];
    printable(t->name, name.len, shown, sizeof shown);

    rc = rd_u32(c, &t->n_dims, "a tensor's dimension count");
    if (rc) return rc;
    if (t->n_dims > GGUF_MAX_DIMS)
        return coli_fail(COLI_E_CORRUPT, "corrupt: tensor '%s' has %u dimensions (at most %d)", shown, t->n_dims,
                         GGUF_MAX_DIMS);
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        rc = rd_u64(c, &ne, "a tensor dimension");
        if (rc) return rc;
        if (ne > (uint64_t)INT64_MAX)
            return coli_fail(COLI_E_CORRUPT, "corrupt: tensor '%s' dimension %u is %" PRIu64, shown, d, ne);
        t->ne[d] = (int64_t)ne;
    }
    rc = rd_u32(c, &t->type, "a tensor's type");
    if (!rc) rc = rd_u64(c, &t->offset, "a tensor's data offset");
    if (rc) return rc;

    const ggml_type_traits *tt = ggml_type_get(t->type);
    if (!tt)
        return coli_fail(COLI_E_CORRUPT, "corrupt: tensor '%s' has ggml type id %u, which names no ggml type",
                         shown, t->type);
    int64_t nel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        if (checked_mul(nel, t->ne[d], &nel))
            return coli_fail(COLI_E_CORRUPT, "corrupt: tensor '%s' has an element count that overflows", shown);
    }
    if (t->ne[0] % tt->blck_size)
        return coli_fail(COLI_E_CORRUPT,
                         "corrupt: tensor '%s' row length %" PRId64 " is not a multiple of the %s block size %d",
                         shown, t->ne[0], tt->name, tt->blck_size);
    int64_t nbytes;
    if (checked_mul(nel / tt->blck_size, tt->type_size, &nbytes))
        return coli_fail(COLI_E_CORRUPT, "corrupt: tensor '%s' byte size overflows", shown);
    t->nbytes = (uint64_t)nbytes;
    if (t->offset % f->alignment)
        return coli_fail(COLI_E_CORRUPT,
                         "corrupt: tensor '%s' data offset %" PRIu64 " is not a multiple of the alignment %u",
                         shown, t->offset, f->alignment);
    return 0;
}

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

static int index_tensors(gguf_file *f) {
    uint64_t cap = 16;
    while (cap < (uint64_t)f->n_tensors * 2) cap *= 2;
    f->tensor_index = malloc(cap * sizeof *f->tensor_index);
    if (!f->tensor_index) return coli_fail(COLI_E_NOMEM, "out of memory indexing %" PRId64 " tensors", f->n_tensors);
    f->index_cap = cap;
    for (uint64_t i = 0; i < cap; i++) f->tensor_index[i] = -1;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        uint64_t h = hash_name(f->tensors[i].name) & (cap - 1);
        while (f->tensor_index[h] >= 0) {
            if (strcmp(f->tensors[f->tensor_index[h]].name, f->tensors[i].name) == 0)
                {
                char shown[96];
                const char *nm = f->tensors[i].name;
                return coli_fail(COLI_E_CORRUPT, "corrupt: tensor '%s' appears twice",
                                 printable(nm, strlen(nm), shown, sizeof shown));
            }
            h = (h + 1) & (cap - 1);
        }
        f->tensor_index[h] = i;
    }
    return 0;
}

static int parse(gguf_file *f) {
    cursor c = {f->map, f->map, f->map + f->size};
    if (f->size < 4 || memcmp(f->map, "GGUF", 4) != 0) {
        char m[4] = {'?', '?', '?', '?'};
        for (int i = 0; i < 4 && (uint64_t)i < f->size; i++)
            m[i] = (f->map[i] >= 0x20 && f->map[i] < 0x7f) ? (char)f->map[i] : '?';
        return coli_fail(COLI_E_FORMAT, "not a GGUF file: invalid magic characters '%c%c%c%c', expected 'GGUF'",
                         m[0], m[1], m[2], m[3]);
    }
    c.p += 4;
    int rc = rd_u32(&c, &f->version, "the GGUF version");
    if (rc) return rc;
    uint32_t swapped = __builtin_bswap32(f->version);
    if (f->version > 0xFFFF && swapped >= 1 && swapped <= 3)
        return coli_fail(COLI_E_FORMAT, "big-endian GGUF (version %u) is not supported", swapped);
    if (f->version != 2 && f->version != 3)
        return coli_fail(COLI_E_VERSION, "unsupported GGUF version %u (colibri reads versions 2 and 3)", f->version);
    uint64_t n_tensors, n_kv;
    rc = rd_u64(&c, &n_tensors, "the tensor count");
    if (!rc) rc = rd_u64(&c, &n_kv, "the metadata count");
    if (rc) return rc;
    /* a metadata entry needs >= 13 bytes, a tensor info >= 24: cap before allocating */
    if (n_kv > cur_left(&c) / 13)
        return coli_fail(COLI_E_TRUNCATED,
                         "truncated: the header declares %" PRIu64 " metadata entries, more than the %" PRIu64
                         " bytes left can hold",
                         n_kv, cur_left(&c));
    f->kv = calloc(n_kv ? n_kv : 1, sizeof *f->kv);
    if (!f->kv) return coli_fail(COLI_E_NOMEM, "out of memory for %" PRIu64 " metadata entries", n_kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        f->n_kv = (int64_t)i + 1; /* so close() frees what was built */
        rc = parse_kv(f, &c, &f->kv[i], (int64_t)i);
        if (rc) return rc;
    }
    f->n_kv = (int64_t)n_kv;

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *al = gguf_get(f, "general.alignment");
    if (al) {
        uint32_t a;
        if (al->type != GGUF_TYPE_UINT32)
            return coli_fail(COLI_E_CORRUPT, "corrupt: general.alignment has type %s, expected uint32",
                             gguf_type_name(al->type));
        memcpy(&a, al->data, 4);
        if (a == 0 || (a & (a - 1)))
            return coli_fail(COLI_E_CORRUPT, "corrupt: general.alignment is %u, expected a power of two", a);
        f->alignment = a;
    }

    if (n_tensors > cur_left(&c) / 24)
        return coli_fail(COLI_E_TRUNCATED,
                         "truncated: the header declares %" PRIu64 " tensors, more than the %" PRIu64
                         " bytes left can hold",
                         n_tensors, cur_left(&c));
    f->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *f->tensors);
    if (!f->tensors) return coli_fail(COLI_E_NOMEM, "out of memory for %" PRIu64 " tensor infos", n_tensors);
    for (uint64_t i = 0; i < n_tensors; i++) {
        f->n_tensors = (int64_t)i + 1;
        rc = parse_tensor(f, &c, &f->tensors[i], (int64_t)i);
        if (rc) return rc;
    }
    f->n_tensors = (int64_t)n_tensors;
    rc = index_tensors(f);
    if (rc) return rc;

    uint64_t pos = cur_off(&c);
    f->data_offset = (pos + f->alignment - 1) / f->alignment * f->alignment;
    uint64_t data_size = f->size > f->data_offset ? f->size - f->data_offset : 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        char shown[96];
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return coli_fail(COLI_E_TRUNCATED,
                             "truncated: tensor '%s' data [%" PRIu64 ", %" PRIu64 ") lies past the end of the "
                             "data section (%" PRIu64 " bytes)",
                             printable(t->name, strlen(t->name), shown, sizeof shown), t->offset,
                             t->offset + t->nbytes, data_size);
        t->data = f->map + f->data_offset + t->offset;
    }
    return 0;
}

/* ---- open / close ----------------------------------------------------- */

gguf_file *gguf_open(const char *path) {
    if (!path) {
        coli_fail(COLI_E_ARG, "no path given");
        return NULL;
    }
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        coli_fail(COLI_E_NOMEM, "out of memory");
        return NULL;
    }
    f->fd = -1;
    f->guard = -1;
    f->path = strdup(path);
    /* O_NONBLOCK: opening a FIFO must not hang waiting for a writer */
    f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (!f->path || f->fd < 0) {
        coli_fail(COLI_E_IO, "cannot open '%s': %s", path, f->path ? strerror(errno) : "out of memory");
        goto fail;
    }
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        coli_fail(COLI_E_IO, "cannot stat '%s': %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        coli_fail(COLI_E_IO, "'%s' is not a regular file", path);
        goto fail;
    }
    f->size = (uint64_t)st.st_size;
    if (f->size < 4) {
        coli_fail(COLI_E_TRUNCATED, "truncated: '%s' has %" PRIu64 " bytes, too short for a GGUF header", path,
                  f->size);
        goto fail;
    }
    void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
    if (m == MAP_FAILED) {
        coli_fail(COLI_E_IO, "cannot map '%s' (%" PRIu64 " bytes): %s", path, f->size, strerror(errno));
        goto fail;
    }
    f->map = m;
    f->guard = coli_mapguard_add(m, (size_t)f->size);
    f->dev = (uint64_t)st.st_dev;
    f->ino = (uint64_t)st.st_ino;
    if (parse(f) != 0) goto fail;
    return f;
fail:
    gguf_close(f);
    return NULL;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->kv)
        for (int64_t i = 0; i < f->n_kv; i++) free(f->kv[i].str_offsets);
    if (f->tensors)
        for (int64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    free(f->tensor_index);
    coli_mapguard_remove(f->guard);
    if (f->map) munmap((void *)f->map, (size_t)f->size);
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f);
}

/* ---- accessors -------------------------------------------------------- */

uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint64_t gguf_file_size(const gguf_file *f) { return f->size; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
uint32_t gguf_alignment(const gguf_file *f) { return f->alignment; }
const char *gguf_path(const gguf_file *f) { return f->path; }
int gguf_fd(const gguf_file *f) { return f->fd; }

int gguf_file_changed(const gguf_file *f) {
    struct stat st;
    return coli_mapguard_faults(f->guard) > 0 || fstat(f->fd, &st) != 0 || (uint64_t)st.st_size < f->size;
}

int gguf_file_state(const gguf_file *f) {
    struct stat st;
    if (gguf_file_changed(f)) return GGUF_FILE_CHANGED;
    if (stat(f->path, &st) != 0 || (uint64_t)st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino)
        return GGUF_FILE_REPLACED;
    return GGUF_FILE_INTACT;
}
int64_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
int64_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }

const gguf_kv *gguf_kv_at(const gguf_file *f, int64_t i) {
    return (i >= 0 && i < f->n_kv) ? &f->kv[i] : NULL;
}

int gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

int64_t gguf_find_key(const gguf_file *f, const char *key) {
    for (int64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key)) return i;
    return -1;
}

const gguf_kv *gguf_get(const gguf_file *f, const char *key) {
    int64_t i = gguf_find_key(f, key);
    return i < 0 ? NULL : &f->kv[i];
}

int64_t gguf_find_tensor_index(const gguf_file *f, const char *name) {
    if (!f->tensor_index || !name) return -1;
    uint64_t h = hash_name(name) & (f->index_cap - 1);
    while (f->tensor_index[h] >= 0) {
        int64_t i = f->tensor_index[h];
        if (strcmp(f->tensors[i].name, name) == 0) return i;
        h = (h + 1) & (f->index_cap - 1);
    }
    return -1;
}

const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i) {
    return (i >= 0 && i < f->n_tensors) ? &f->tensors[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    return gguf_tensor_at(f, gguf_find_tensor_index(f, name));
}

/* ---- typed getters ---------------------------------------------------- */

static int is_int_type(uint32_t t) {
    return t <= GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_INT64 || t == GGUF_TYPE_BOOL;
}

/* Scalar integer at p of type t, widened; *neg set when the value is negative. */
static uint64_t load_int(const uint8_t *p, uint32_t t, int *neg) {
    *neg = 0;
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: return p[0];
    case GGUF_TYPE_INT8: { int8_t v; memcpy(&v, p, 1); *neg = v < 0; return (uint64_t)(int64_t)v; }
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); *neg = v < 0; return (uint64_t)(int64_t)v; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); *neg = v < 0; return (uint64_t)(int64_t)v; }
    case GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); return v; }
    case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p, 8); *neg = v < 0; return (uint64_t)v; }
    default: return 0;
    }
}

static int wrong_type(const gguf_kv *kv, const char *expected) {
    char key[128];
    key_cstr(kv->key, key, sizeof key);
    return coli_fail(COLI_E_CORRUPT, "corrupt: key '%s' has type %s, expected %s", key, gguf_type_name(kv->type),
                     expected);
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    const gguf_kv *kv = gguf_get(f, key);
    if (!kv) return 0;
    if (!is_int_type(kv->type) || kv->type == GGUF_TYPE_BOOL) return wrong_type(kv, "an integer");
    int neg;
    uint64_t v = load_int(kv->data, kv->type, &neg);
    if (neg || v > UINT32_MAX) {
        char k[128];
        key_cstr(kv->key, k, sizeof k);
        return coli_fail(COLI_E_CORRUPT, "corrupt: key '%s' is out of range for a uint32", k);
    }
    *out = (uint32_t)v;
    return 1;
}

int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_get(f, key);
    if (!kv) return 0;
    if (!is_int_type(kv->type) || kv->type == GGUF_TYPE_BOOL) return wrong_type(kv, "an integer");
    int neg;
    uint64_t v = load_int(kv->data, kv->type, &neg);
    if (!neg && v > (uint64_t)INT64_MAX) {
        char k[128];
        key_cstr(kv->key, k, sizeof k);
        return coli_fail(COLI_E_CORRUPT, "corrupt: key '%s' is out of range for an int64", k);
    }
    *out = (int64_t)v;
    return 1;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    const gguf_kv *kv = gguf_get(f, key);
    if (!kv) return 0;
    if (kv->type == GGUF_TYPE_FLOAT32) {
        memcpy(out, kv->data, 4);
    } else if (kv->type == GGUF_TYPE_FLOAT64) {
        double d;
        memcpy(&d, kv->data, 8);
        *out = (float)d;
    } else {
        return wrong_type(kv, "a float");
    }
    return 1;
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out) {
    const gguf_kv *kv = gguf_get(f, key);
    if (!kv) return 0;
    if (kv->type != GGUF_TYPE_BOOL) return wrong_type(kv, "bool");
    *out = kv->data[0] != 0;
    return 1;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_get(f, key);
    if (!kv) return 0;
    if (kv->type != GGUF_TYPE_STRING) return wrong_type(kv, "string");
    out->ptr = (const char *)kv->data;
    out->len = kv->nbytes;
    return 1;
}

int gguf_get_arr(const gguf_file *f, const char *key, uint32_t *elem_type, uint64_t *n, const uint8_t **data) {
    const gguf_kv *kv = gguf_get(f, key);
    if (!kv) return 0;
    if (kv->type != GGUF_TYPE_ARRAY) return wrong_type(kv, "array");
    *elem_type = kv->arr_type;
    *n = kv->arr_n;
    *data = kv->data;
    return 1;
}

gguf_str gguf_arr_str(const gguf_kv *kv, uint64_t i) {
    gguf_str s = {"", 0};
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING || i >= kv->arr_n) return s;
    const uint8_t *p = kv->data + kv->str_offsets[i];
    memcpy(&s.len, p, 8);
    s.ptr = (const char *)p + 8;
    return s;
}

double gguf_arr_f64(const gguf_kv *kv, uint64_t i) {
    if (kv->type != GGUF_TYPE_ARRAY || i >= kv->arr_n) return 0.0;
    uint64_t sz = fixed_size(kv->arr_type);
    if (!sz) return 0.0;
    const uint8_t *p = kv->data + i * sz;
    if (kv->arr_type == GGUF_TYPE_FLOAT32) { float v; memcpy(&v, p, 4); return v; }
    if (kv->arr_type == GGUF_TYPE_FLOAT64) { double v; memcpy(&v, p, 8); return v; }
    int neg;
    uint64_t v = load_int(p, kv->arr_type, &neg);
    return neg ? (double)(int64_t)v : (double)v;
}

/* A float element as an integer: truncated, saturated at the int64 range, NaN as 0 (a plain
 * cast of NaN or of 1e30 is undefined behaviour: found by tools/fuzz_gguf.c). */
static int64_t f64_to_i64(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

int64_t gguf_arr_i64(const gguf_kv *kv, uint64_t i) {
    if (kv->type != GGUF_TYPE_ARRAY || i >= kv->arr_n) return 0;
    uint64_t sz = fixed_size(kv->arr_type);
    if (!sz) return 0;
    const uint8_t *p = kv->data + i * sz;
    if (kv->arr_type == GGUF_TYPE_FLOAT32) { float v; memcpy(&v, p, 4); return f64_to_i64(v); }
    if (kv->arr_type == GGUF_TYPE_FLOAT64) { double v; memcpy(&v, p, 8); return f64_to_i64(v); }
    int neg;
    return (int64_t)load_int(p, kv->arr_type, &neg);
}
