/* gguf_api.c — the public colibri_gguf_* functions: metadata as JSON, tensor
 * infos, and the summary behind `coli models info`. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "ggml_types.h"
#include "gguf.h"
#include "jsonbuf.h"
#include "kernels.h"

#define AS_FILE(g) ((const gguf_file *)(const void *)(g))

colibri_gguf *colibri_gguf_open(const char *path) {
    coli_clear_error();
    return (colibri_gguf *)(void *)gguf_open(path);
}

void colibri_gguf_close(colibri_gguf *g) { gguf_close((gguf_file *)(void *)g); }

uint32_t colibri_gguf_version(const colibri_gguf *g) { return g ? gguf_version(AS_FILE(g)) : 0; }
int64_t colibri_gguf_n_kv(const colibri_gguf *g) { return g ? gguf_n_kv(AS_FILE(g)) : 0; }
int64_t colibri_gguf_n_tensors(const colibri_gguf *g) { return g ? gguf_n_tensors(AS_FILE(g)) : 0; }
uint64_t colibri_gguf_data_offset(const colibri_gguf *g) { return g ? gguf_data_offset(AS_FILE(g)) : 0; }
uint32_t colibri_gguf_alignment(const colibri_gguf *g) { return g ? gguf_alignment(AS_FILE(g)) : 0; }

int64_t colibri_gguf_find_key(const colibri_gguf *g, const char *key) {
    return (g && key) ? gguf_find_key(AS_FILE(g), key) : -1;
}

int64_t colibri_gguf_find_tensor(const colibri_gguf *g, const char *name) {
    return (g && name) ? gguf_find_tensor_index(AS_FILE(g), name) : -1;
}

int colibri_gguf_tensor(const colibri_gguf *g, int64_t i, colibri_tensor_info *out) {
    const gguf_tensor *t = g ? gguf_tensor_at(AS_FILE(g), i) : NULL;
    if (!t || !out) return coli_fail(COLI_E_ARG, "no tensor %" PRId64, i);
    out->name = t->name;
    out->type = t->type;
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->offset = t->offset;
    out->nbytes = t->nbytes;
    return 0;
}

const void *colibri_gguf_tensor_data(const colibri_gguf *g, int64_t i) {
    const gguf_tensor *t = g ? gguf_tensor_at(AS_FILE(g), i) : NULL;
    return t ? t->data : NULL;
}

/* ---- values as JSON --------------------------------------------------- */

/* Write one value of type t at *p and advance *p. The bytes were validated
 * at open, so this walks without re-checking bounds. */
static void value_json(jsonbuf *b, uint32_t t, const uint8_t **p, int64_t max_array);

static void array_json(jsonbuf *b, uint32_t et, uint64_t n, const uint8_t **p, int64_t max_array) {
    uint64_t shown = (max_array >= 0 && n > (uint64_t)max_array) ? (uint64_t)max_array : n;
    jb_raw(b, "[", 1);
    for (uint64_t i = 0; i < n; i++) {
        if (i < shown) {
            if (i) jb_raw(b, ",", 1);
            value_json(b, et, p, max_array);
        } else {
            jsonbuf sink; /* skip the rest without writing */
            jb_init(&sink);
            sink.oom = 1;
            value_json(&sink, et, p, max_array);
        }
    }
    jb_raw(b, "]", 1);
}

static void value_json(jsonbuf *b, uint32_t t, const uint8_t **p, int64_t max_array) {
    const uint8_t *q = *p;
    switch (t) {
    case GGUF_TYPE_UINT8: jb_printf(b, "%u", q[0]); *p += 1; return;
    case GGUF_TYPE_INT8: { int8_t v; memcpy(&v, q, 1); jb_printf(b, "%d", v); *p += 1; return; }
    case GGUF_TYPE_BOOL: jb_puts(b, q[0] ? "true" : "false"); *p += 1; return;
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, q, 2); jb_printf(b, "%u", v); *p += 2; return; }
    case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, q, 2); jb_printf(b, "%d", v); *p += 2; return; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, q, 4); jb_printf(b, "%" PRIu32, v); *p += 4; return; }
    case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, q, 4); jb_printf(b, "%" PRId32, v); *p += 4; return; }
    case GGUF_TYPE_FLOAT32: { float v; memcpy(&v, q, 4); jb_f64(b, v, 1); *p += 4; return; }
    case GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, q, 8); jb_printf(b, "%" PRIu64, v); *p += 8; return; }
    case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, q, 8); jb_printf(b, "%" PRId64, v); *p += 8; return; }
    case GGUF_TYPE_FLOAT64: { double v; memcpy(&v, q, 8); jb_f64(b, v, 0); *p += 8; return; }
    case GGUF_TYPE_STRING: {
        uint64_t len;
        memcpy(&len, q, 8);
        jb_str(b, (const char *)q + 8, (size_t)len);
        *p += 8 + len;
        return;
    }
    case GGUF_TYPE_ARRAY: {
        uint32_t et;
        uint64_t n;
        memcpy(&et, q, 4);
        memcpy(&n, q + 4, 8);
        *p += 12;
        array_json(b, et, n, p, max_array);
        return;
    }
    default: jb_puts(b, "null"); return;
    }
}

/* "array[array[uint8]]" for nested arrays: the element type of the first element. */
static void type_json(jsonbuf *b, const gguf_kv *kv) {
    if (kv->type != GGUF_TYPE_ARRAY) {
        jb_printf(b, "\"%s\"", gguf_type_name(kv->type));
        return;
    }
    jb_printf(b, "\"array[%s]\"", gguf_type_name(kv->arr_type));
}

static void kv_value_json(jsonbuf *b, const gguf_kv *kv, int64_t max_array) {
    const uint8_t *p = kv->data;
    if (kv->type == GGUF_TYPE_STRING) {
        jb_str(b, (const char *)kv->data, (size_t)kv->nbytes);
    } else if (kv->type == GGUF_TYPE_ARRAY) {
        array_json(b, kv->arr_type, kv->arr_n, &p, max_array);
    } else {
        value_json(b, kv->type, &p, max_array);
    }
}

int64_t colibri_gguf_kv_json(const colibri_gguf *g, int64_t i, int64_t max_array, char *out, size_t cap) {
    const gguf_kv *kv = g ? gguf_kv_at(AS_FILE(g), i) : NULL;
    if (!kv) return coli_fail(COLI_E_ARG, "no metadata entry %" PRId64, i);
    jsonbuf b;
    jb_init(&b);
    jb_puts(&b, "{\"key\":");
    jb_str(&b, kv->key.ptr, (size_t)kv->key.len);
    jb_puts(&b, ",\"type\":");
    type_json(&b, kv);
    if (kv->type == GGUF_TYPE_ARRAY) {
        jb_printf(&b, ",\"n\":%" PRIu64, kv->arr_n);
        if (max_array >= 0 && kv->arr_n > (uint64_t)max_array) jb_puts(&b, ",\"truncated\":true");
    }
    jb_puts(&b, ",\"value\":");
    kv_value_json(&b, kv, max_array);
    jb_puts(&b, "}");
    return jb_finish(&b, out, cap);
}

/* ---- summary ---------------------------------------------------------- */

/* `"name":<value of key>` with the value as stored (a scalar, or an array
 * for per-layer values), null when absent. */
static void field_from_key(jsonbuf *b, const gguf_file *f, const char *name, const char *key) {
    const gguf_kv *kv = gguf_get(f, key);
    jb_puts(b, ",");
    jb_key(b, name);
    if (kv)
        kv_value_json(b, kv, 64);
    else
        jb_puts(b, "null");
}

static void arch_field(jsonbuf *b, const gguf_file *f, const char *name, gguf_str arch, const char *suffix) {
    char key[256];
    snprintf(key, sizeof key, "%.*s.%s", (int)(arch.len < 64 ? arch.len : 64), arch.ptr, suffix);
    field_from_key(b, f, name, key);
}

int64_t colibri_gguf_describe(const colibri_gguf *g, char *out, size_t cap) {
    if (!g) return coli_fail(COLI_E_ARG, "colibri_gguf_describe: no file");
    const gguf_file *f = AS_FILE(g);
    gguf_str arch = {"", 0};
    if (gguf_get_str(f, "general.architecture", &arch) < 0) return colibri_last_error_code();

    jsonbuf b;
    jb_init(&b);
    jb_puts(&b, "{\"arch\":");
    if (arch.len)
        jb_str(&b, arch.ptr, (size_t)arch.len);
    else
        jb_puts(&b, "null");
    field_from_key(&b, f, "name", "general.name");
    arch_field(&b, f, "n_layer", arch, "block_count");
    arch_field(&b, f, "n_embd", arch, "embedding_length");
    arch_field(&b, f, "n_head", arch, "attention.head_count");
    arch_field(&b, f, "n_head_kv", arch, "attention.head_count_kv");
    arch_field(&b, f, "n_ff", arch, "feed_forward_length");
    arch_field(&b, f, "n_expert", arch, "expert_count");
    arch_field(&b, f, "n_expert_used", arch, "expert_used_count");
    arch_field(&b, f, "n_ctx_train", arch, "context_length");
    arch_field(&b, f, "rope_freq_base", arch, "rope.freq_base");
    field_from_key(&b, f, "tokenizer_model", "tokenizer.ggml.model");
    field_from_key(&b, f, "tokenizer_pre", "tokenizer.ggml.pre");
    const gguf_kv *tokens = gguf_get(f, "tokenizer.ggml.tokens");
    if (tokens && tokens->type == GGUF_TYPE_ARRAY)
        jb_printf(&b, ",\"vocab_size\":%" PRIu64, tokens->arr_n);
    else
        jb_puts(&b, ",\"vocab_size\":null");
    jb_printf(&b, ",\"has_chat_template\":%s", gguf_get(f, "tokenizer.chat_template") ? "true" : "false");

    int64_t counts[GGML_TYPE_COUNT] = {0};
    uint64_t bytes[GGML_TYPE_COUNT] = {0};
    int64_t n_params = 0;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        int64_t nel = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; /* overflow ruled out at open */
        n_params += nel;
        counts[t->type]++;
        bytes[t->type] += t->nbytes;
    }
    jb_printf(&b, ",\"n_tensors\":%" PRId64 ",\"n_params\":%" PRId64, gguf_n_tensors(f), n_params);
    /* per type: tensors, bytes, and whether this build's kernels compute with it
     * (model.c refuses a matrix of a type without a vec_dot, by name) */
    const char *maps[3] = {"tensor_types", "tensor_bytes", "tensor_computes"};
    const coli_kernel_table *kt = coli_kernels();
    for (int m = 0; m < 3; m++) {
        jb_puts(&b, ",");
        jb_key(&b, maps[m]);
        jb_puts(&b, "{");
        int first = 1;
        for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
            if (!counts[t]) continue;
            if (!first) jb_puts(&b, ",");
            first = 0;
            jb_key(&b, ggml_type_get(t)->name);
            if (m == 0)
                jb_printf(&b, "%" PRId64, counts[t]);
            else if (m == 1)
                jb_printf(&b, "%" PRIu64, bytes[t]);
            else
                jb_puts(&b, kt->type[t].vec_dot ? "true" : "false");
        }
        jb_puts(&b, "}");
    }
    jb_printf(&b, ",\"file_bytes\":%" PRIu64 ",\"gguf_version\":%u,\"alignment\":%u}", gguf_file_size(f),
              gguf_version(f), gguf_alignment(f));
    return jb_finish(&b, out, cap);
}
