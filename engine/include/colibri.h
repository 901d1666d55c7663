/* colibri.h — the public C API of the colibri engine.
 *
 * The one header the Python sidecar reads through cffi (API mode). Everything
 * between CFFI-BEGIN and CFFI-END must stay plain C declarations: no
 * preprocessor conditionals, no macros with arguments, no inline bodies.
 *
 * Conventions: every function returns a status (0 or a count on success, a
 * negative COLI_E_* code on failure) or a pointer (NULL on failure); the
 * reason for the last failure on the calling thread is colibri_last_error().
 * No function prints, exits or aborts on bad input.
 */
#ifndef COLIBRI_H
#define COLIBRI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CFFI-BEGIN */

/* ---- errors ------------------------------------------------------------ */

/* Error codes; colibri_error_name() gives each its stable name. */
enum {
    COLI_OK = 0,
    COLI_E_ARG = -1,          /* "invalid_argument": a caller passed something unusable */
    COLI_E_IO = -2,           /* "io_error": open/stat/mmap/read failed */
    COLI_E_FORMAT = -3,       /* "not_gguf": wrong magic or byte order */
    COLI_E_VERSION = -4,      /* "unsupported_version": GGUF version other than 2 or 3 */
    COLI_E_TRUNCATED = -5,    /* "truncated": the file ends before what it declares */
    COLI_E_CORRUPT = -6,      /* "corrupt": an impossible value (type id, count, offset, shape) */
    COLI_E_UNSUPPORTED = -7,  /* "unsupported": valid file, but something colibri cannot run */
    COLI_E_NOMEM = -8,        /* "out_of_memory" */
    COLI_E_MISSING = -9,      /* "missing": a required key or tensor is absent */
    COLI_E_TOO_LONG = -10,    /* "too_long": input longer than a limit (context, buffer) */
    COLI_E_STATE = -11        /* "bad_state": call not valid in the object's current state */
};

/* Message of the last failure on this thread ("" if none). Valid until the
 * next failing call on the same thread. */
const char *colibri_last_error(void);
/* Code of the last failure on this thread (COLI_OK if none). */
int colibri_last_error_code(void);
/* Stable snake_case name of an error code, e.g. "truncated". */
const char *colibri_error_name(int code);

/* ---- build and machine ------------------------------------------------- */

const char *colibri_version(void);
/* Space-separated CPU features detected at run time, e.g. "avx2 fma f16c avx512f". */
const char *colibri_cpu_features(void);
/* Compiler flags the engine was built with (for bug reports and `coli --version`). */
const char *colibri_build_info(void);

/* ---- GGUF files ------------------------------------------------------- */

/* A read-only view of one GGUF file: metadata parsed and bounds-checked, the
 * tensor data section mapped. */
typedef struct colibri_gguf colibri_gguf;

typedef struct {
    const char *name;   /* NUL-terminated copy, owned by the colibri_gguf */
    uint32_t type;      /* ggml type id */
    uint32_t n_dims;    /* 1..4 */
    int64_t ne[4];      /* elements per dimension, ne[0] fastest; unused dims are 1 */
    uint64_t offset;    /* byte offset from the start of the data section */
    uint64_t nbytes;    /* bytes the tensor's data spans */
} colibri_tensor_info;

colibri_gguf *colibri_gguf_open(const char *path);
void colibri_gguf_close(colibri_gguf *g);

uint32_t colibri_gguf_version(const colibri_gguf *g);
int64_t colibri_gguf_n_kv(const colibri_gguf *g);
int64_t colibri_gguf_n_tensors(const colibri_gguf *g);
/* Byte offset of the data section in the file and the alignment in force. */
uint64_t colibri_gguf_data_offset(const colibri_gguf *g);
uint32_t colibri_gguf_alignment(const colibri_gguf *g);

/* Index of a metadata key, or -1 when absent (not an error). */
int64_t colibri_gguf_find_key(const colibri_gguf *g, const char *key);
/* Metadata entry i as JSON: {"key": ..., "type": "uint32" | "array[string]" | ...,
 * "value": ...}. Arrays longer than max_array elements are cut to max_array and
 * get "n": full length and "truncated": true (max_array < 0: no limit).
 * Writes at most cap bytes including the NUL; returns the length the full
 * JSON needs (without NUL), so a caller can retry with a bigger buffer; < 0 on error. */
int64_t colibri_gguf_kv_json(const colibri_gguf *g, int64_t i, int64_t max_array, char *out, size_t cap);

int colibri_gguf_tensor(const colibri_gguf *g, int64_t i, colibri_tensor_info *out);
/* Index of a tensor by name, or -1 when absent. */
int64_t colibri_gguf_find_tensor(const colibri_gguf *g, const char *name);
/* Pointer to tensor i's bytes in the mapping (valid until close). */
const void *colibri_gguf_tensor_data(const colibri_gguf *g, int64_t i);

/* Summary for `coli models info` as JSON (keys: arch, name, n_layer, n_embd,
 * n_head, n_head_kv, n_ff, n_expert, n_expert_used, n_ctx_train, rope_freq_base,
 * tokenizer_model, tokenizer_pre, vocab_size, has_chat_template, n_tensors,
 * n_params, tensor_types {type: count}, tensor_bytes {type: bytes}, file_bytes,
 * gguf_version, alignment). Same buffer rules as colibri_gguf_kv_json. */
int64_t colibri_gguf_describe(const colibri_gguf *g, char *out, size_t cap);

/* ---- kernels (section owned by quant.c; for tests and benchmarks) ----- */
/* KERNELS-BEGIN */
/* Kernel ISA in force: "scalar", "avx2" or "avx512" (chosen from the CPU on
 * first use). set_isa accepts "auto" or one of those; COLI_E_UNSUPPORTED when
 * this CPU cannot run it. Process-wide: for tests and benchmarks. */
int colibri_kernel_set_isa(const char *isa);
const char *colibri_kernel_isa(void);
/* The activation type a weight type dots with (ggml's vec_dot_type), or < 0. */
int colibri_kernel_partner_type(uint32_t wtype);
/* n elements of `type` (a multiple of its block size) from src -> dst floats. */
int colibri_kernel_dequantize(uint32_t type, const void *src, size_t src_bytes, float *dst, int64_t n);
/* ggml's reference quantizer (quantize_row_<t>_ref) for F32, F16, BF16, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q8_K. */
int colibri_kernel_quantize(uint32_t type, const float *src, int64_t n, void *dst, size_t dst_bytes);
/* The activation quantizer the matmuls use for `type` (Q8_0, Q8_1, Q8_K, F16,
 * BF16, F32): for Q8_0/Q8_1 ggml's x86 CPU rounding (127/amax, half to even). */
int colibri_kernel_quantize_act(uint32_t type, const float *src, int64_t n, void *dst, size_t dst_bytes);
/* *out = dot(w, x): x is converted to the partner type first, as ggml does. */
int colibri_kernel_vec_dot(uint32_t wtype, int64_t n, const void *w, size_t w_bytes, const float *x, float *out);
/* y[r][o] = dot(W row o, x row r); W has n_out rows of n_in elements. */
int colibri_kernel_matmul(uint32_t wtype, const void *w, size_t w_bytes, int64_t n_in, int64_t n_out,
                          const float *x, int64_t n_rows, float *y, int n_threads);
/* KERNELS-END */

/* ---- engine (model, tokenizer, generation) ---------------------------- */
/* ENGINE-BEGIN */

typedef struct colibri_engine colibri_engine;

typedef struct {
    const char *model_path;  /* GGUF file */
    int n_threads;           /* 0: physical cores */
    int n_ctx;               /* tokens of context per slot; 0: min(4096, trained) */
    int n_slots;             /* KV slots (conversations); 0: 1 */
    int n_batch;             /* prefill chunk in tokens; 0: 512 */
    int vocab_only;          /* 1: load metadata and tokenizer only */
} colibri_config;

/* Fill cfg with the defaults above (all zero, model_path NULL). */
void colibri_config_default(colibri_config *cfg);
colibri_engine *colibri_open(const colibri_config *cfg);
void colibri_close(colibri_engine *e);

/* The model as the engine sees it, as JSON (colibri_gguf_describe's keys plus
 * what loading decided). Buffer rules as colibri_gguf_kv_json. */
int64_t colibri_model_info(colibri_engine *e, char *out, size_t cap);

/* ---- tokenizer (section owned by tokenizer.c) ---- */
/* TOKENIZER-BEGIN */
/* TOKENIZER-END */

/* ENGINE-END */

/* CFFI-END */

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_H */
