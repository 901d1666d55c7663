/* gguf.h — the engine's internal view of a GGUF file (see colibri.h for the
 * public wrapper). Layout of the format: magic "GGUF", u32 version, u64 tensor
 * count, u64 metadata count, metadata key/values, tensor infos, padding to
 * `general.alignment` (default 32), then the data section. All little-endian. */
#ifndef COLI_GGUF_H
#define COLI_GGUF_H

#include <stdint.h>
#include <stddef.h>

enum gguf_value_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT = 13,
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

/* A string inside the mapping: not NUL-terminated, may be any bytes. */
typedef struct {
    const char *ptr;
    uint64_t len;
} gguf_str;

typedef struct {
    gguf_str key;
    uint32_t type;          /* enum gguf_value_type */
    uint32_t arr_type;      /* element type when type == ARRAY */
    uint64_t arr_n;         /* element count when type == ARRAY */
    const uint8_t *data;    /* first byte of the value (of the elements, for arrays) */
    uint64_t nbytes;        /* bytes the value (the elements) span */
    uint64_t *str_offsets;  /* ARRAY of STRING: offset of element i from `data` (owned) */
} gguf_kv;

typedef struct {
    char *name;             /* NUL-terminated copy (owned) */
    uint32_t type;          /* enum ggml_type */
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t offset;        /* from the start of the data section */
    uint64_t nbytes;
    const uint8_t *data;    /* in the mapping */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* NULL on failure with colibri_last_error() set (a named error, never a crash). */
gguf_file *gguf_open(const char *path);
void gguf_close(gguf_file *f);

uint32_t gguf_version(const gguf_file *f);
uint64_t gguf_file_size(const gguf_file *f);
uint64_t gguf_data_offset(const gguf_file *f);
uint32_t gguf_alignment(const gguf_file *f);
const char *gguf_path(const gguf_file *f);
int gguf_fd(const gguf_file *f); /* for pread by the expert store */

/* What became of the opened file: INTACT; CHANGED, shorter than when opened
 * or a mapped page faulted (mapguard.h: what is read from it is no longer the
 * model); REPLACED, another file now at its path (this one still serves). */
enum { GGUF_FILE_INTACT = 0, GGUF_FILE_CHANGED = 1, GGUF_FILE_REPLACED = 2 };
int gguf_file_state(const gguf_file *f);
/* 1 when the file is CHANGED (faulted or shrunk), else 0: gguf_file_state without the path's
 * stat, for the check around every forward pass (a replaced file still serves its mapping) */
int gguf_file_changed(const gguf_file *f);

int64_t gguf_n_kv(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, int64_t i);
int64_t gguf_find_key(const gguf_file *f, const char *key);  /* -1 when absent */
const gguf_kv *gguf_get(const gguf_file *f, const char *key); /* NULL when absent */

int64_t gguf_n_tensors(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name); /* NULL when absent */
int64_t gguf_find_tensor_index(const gguf_file *f, const char *name);

/* Typed getters. Return 1 and store the value when the key exists with a
 * compatible type, 0 when the key is absent (out untouched), and a negative
 * COLI_E_CORRUPT with the error set when it exists with a wrong type.
 * Integer getters accept any integer type whose value fits; float getters
 * accept FLOAT32/FLOAT64. */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
int gguf_get_bool(const gguf_file *f, const char *key, int *out);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* Arrays: element type and count; data points at the raw little-endian
 * elements (possibly unaligned: read with memcpy). Same return rules. */
int gguf_get_arr(const gguf_file *f, const char *key, uint32_t *elem_type, uint64_t *n, const uint8_t **data);
/* Element i of a string array (kv->type == ARRAY, arr_type == STRING). */
gguf_str gguf_arr_str(const gguf_kv *kv, uint64_t i);

/* Element i of a numeric array as a double/int64 (any numeric element type). */
double gguf_arr_f64(const gguf_kv *kv, uint64_t i);
int64_t gguf_arr_i64(const gguf_kv *kv, uint64_t i);

const char *gguf_type_name(uint32_t t); /* "uint32", "string", ...; "?" if unknown */

/* Compare a gguf_str with a C string. */
int gguf_str_eq(gguf_str s, const char *c);

#endif
