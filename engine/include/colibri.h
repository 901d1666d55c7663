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
    COLI_E_STATE = -11,       /* "bad_state": call not valid in the object's current state */
    COLI_E_FILE_CHANGED = -12 /* "model_file_changed": the model file shrank or faulted while in use */
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
 * n_params, tensor_types {type: count}, tensor_bytes {type: bytes},
 * tensor_computes {type: whether this build's kernels compute with it},
 * file_bytes, gguf_version, alignment). Same buffer rules as colibri_gguf_kv_json. */
int64_t colibri_gguf_describe(const colibri_gguf *g, char *out, size_t cap);
/* Whether this engine can run the file, without opening it: its vocabulary, its family's
 * hyper-parameters and every tensor bound as colibri_open binds them (no KV, no run
 * state, no weight read but the norms). 0, or the error colibri_open would give (named). */
int colibri_gguf_check(colibri_gguf *g);

/* ---- kernels (section owned by kernel_api.c and matmul.c; for tests and benchmarks) ---- */
/* KERNELS-BEGIN */
/* Kernel ISA in force: "scalar", "avx2", "avxvnni" (AVX2 + AVX-VNNI) or "avx512" (chosen from the CPU on
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
/* Test hook of the kernels in force: P.V of nr rows of len f16 probabilities p
 * ([nr][len]) against row-major f16 values v ([len][n_d]) into out ([nr][n_d])
 * as attention's decode computes it (kernel pv_rows when the set has one, the
 * probabilities widened first for its widened one; else vec_dot over the transposed values;
 * transposed 2: that with the probabilities widened to f32 first and the set's widened F16
 * dot, as attention runs it, COLI_E_UNSUPPORTED where the set has none).
 * len % 64 == 0, n_d % 16 == 0, nr 1..8. */
int colibri_kernel_pv(int len, int n_d, int nr, const uint16_t *v, const uint16_t *p, float *out, int transposed);
/* Test hook: decode's scores of nr f16 queries q ([nr][n]) against n_rows f16 K rows k
 * ([n_rows][n]) into out ([nr][n_rows]): rows 1, the set's kq_rows (queries widened first,
 * COLI_E_UNSUPPORTED where the set has none); 0, the one-row F16 vec_dot per row.
 * n % 32 == 0, nr 1..8. */
int colibri_kernel_kq(int n, int n_rows, int nr, const uint16_t *k, const uint16_t *q, float *out, int rows);
/* x[i] = silu(x[i]) * g[i] (ggml_vec_swiglu_f32) with the kernels in force (lanes 0), or one
 * lane at a time as a reference built with `lanes` (8 or 16) f32 lanes computes it. */
int colibri_kernel_swiglu(float *x, const float *g, int n, int lanes);
/* Greedy sampling's argmax with the kernels in force: the first index of the largest of
 * x[0..n), a NaN never winning unless at x[0] (n < 1: 0). */
int32_t colibri_kernel_argmax(const float *x, int n);
/* Run-time kernel choice (the sidecar's kernel_choice.py): 1 when every SIMD set
 * gives weight type wtype the same bits (so picking the fastest changes nothing
 * else), 0 otherwise. set_type_isa: weights of wtype take the kernels of `isa`
 * ("avx2", "avxvnni", "avx512"; "auto": the set in force's own) from now on,
 * process-wide, to be called before a model runs; COLI_E_UNSUPPORTED for a type
 * whose sets differ or an ISA this CPU lacks. type_isa: the set wtype runs with
 * now (NULL: unknown type). set_isa undoes every per-type choice. */
int colibri_kernel_same_bits(uint32_t wtype);
/* 1 when this CPU (and build) runs the kernel set `isa`, else 0. */
int colibri_kernel_has_isa(const char *isa);
int colibri_kernel_set_type_isa(uint32_t wtype, const char *isa);
const char *colibri_kernel_type_isa(uint32_t wtype);
/* The same for wtype's decode calls alone (4 activation rows or fewer; a batch
 * keeps the type's set): its sets decode and prefill at different speeds on
 * some cores. "auto": the type's own set. set_isa undoes it too. */
int colibri_kernel_set_type_decode_isa(uint32_t wtype, const char *isa);
const char *colibri_kernel_type_decode_isa(uint32_t wtype);
/* *seconds: the fastest of `reps` one-row products (a decode step's matvec) of
 * the n_out weight rows w with the kernels of `isa`, on the calling thread alone
 * (the set in force stays as it is for every other thread). */
int colibri_kernel_time_decode(const char *isa, uint32_t wtype, const void *w, size_t w_bytes, int64_t n_in,
                               int64_t n_out, int reps, double *seconds);
/* Where the kernels' software prefetches of weights land: "l1" (the default) or
 * "l2" (prefetch.h: AMD Zen 4 stalls on bursts of L1 prefetches). Process-wide;
 * never changes a result. */
int colibri_kernel_set_prefetch(const char *level);
const char *colibri_kernel_prefetch(void);
/* How the AVX-512 kernels of the grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S), and AVX2's IQ2_S, IQ3_XXS and IQ3_S one-row kernels, look up their
 * grid points: "gather" (vpgather: faster on Intel's cores) or "loads" (scalar
 * loads: AMD Zen 4 / 5, whose gathers are slow). The same
 * results either way; the faster here is measured when the kernel tables are
 * first built (about a millisecond), "auto" measures again. Process-wide. */
int colibri_kernel_set_lookup(const char *way);
const char *colibri_kernel_lookup(void);
/* That measurement, ns per super-block by scalar loads and by gathers (both 0
 * where none was made: no AVX2, or a way set by name since). */
void colibri_kernel_lookup_ns(double *loads_ns, double *gather_ns);
/* Decode matvecs over weights streamed from memory, as a model bigger than the
 * caches runs them: the n_out rows at w are copied end to end into a buffer of
 * about stream_bytes (0: twice the last-level cache, 64 to 256 MiB), and each
 * copy multiplied by one activation row. For each variant v (kernel set isas[v]
 * at prefetch level levels[v]) seconds[v] is the fastest pass's time per copy;
 * the variants alternate pass by pass, `rounds` each, on the calling thread
 * (other threads keep the set in force; the prefetch level is process-wide and
 * restored after). A matrix a load rewrites into 16-row tiles (Q4_0, Q4_K,
 * IQ4_NL, MXFP4 of whole tiles, where every timed set has tile kernels, unless
 * COLI_REPACK=0) is timed as tiles, with the kernels its decode runs. */
int colibri_kernel_time_stream(uint32_t wtype, const void *w, size_t w_bytes, int64_t n_in, int64_t n_out,
                               size_t stream_bytes, const char *const *isas, const char *const *levels,
                               int n_variants, int rounds, double *seconds);
/* y[r][o] = dot(W row o, x row r); W has n_out rows of n_in elements. */
int colibri_kernel_matmul(uint32_t wtype, const void *w, size_t w_bytes, int64_t n_in, int64_t n_out,
                          const float *x, int64_t n_rows, float *y, int n_threads);
/* KERNELS-END */

/* ---- engine (model, tokenizer, generation) ---------------------------- */
/* ENGINE-BEGIN */

typedef struct colibri_engine colibri_engine;

enum { COLI_MAX_SLOTS = 16 }; /* the most KV slots (colibri_config.n_slots) one engine serves */

typedef struct {
    const char *model_path;  /* GGUF file */
    int n_threads;           /* 0: physical cores */
    int n_ctx;               /* tokens of context per slot; 0: min(4096, trained) */
    int n_slots;             /* KV slots (conversations), 1..COLI_MAX_SLOTS; 0: 1 */
    int n_batch;             /* prefill chunk in tokens; 0: 512 */
    int vocab_only;          /* 1: load metadata and tokenizer only */
    int64_t expert_cache_bytes; /* routed experts: 0 all resident (file mapping); > 0 streamed
                                   from disk into a RAM cache of this many bytes */
    int64_t expert_pin_bytes;   /* streaming: RAM for experts pinned by colibri_pin_experts */
    int io_threads;          /* streaming: expert read threads; 0: 4 */
    int direct_io;           /* streaming: 1 reads with O_DIRECT where the file system allows */
    int no_prefetch;         /* streaming: 1 turns off one-layer-ahead prefetch */
    int expert_policy;       /* streaming: which cached expert makes room, COLI_POLICY_*; 0: the default */
    int draft_tokens;        /* speculative decoding: tokens drafted per step (by the model's MTP block where it has
                                one, else by prompt lookup), up to 8; 0: the
                                default (colibri_draft_tokens tells it); < 0: none. Never changes the tokens. */
    int draft_always;        /* 1: verify every draft found; 0: those the measured step costs say pay (draft.h) */
    const char *draft_model_path; /* a smaller GGUF model with the same vocabulary that drafts (NULL: none; the
                                     model's MTP block and prompt lookup are then not used) */
} colibri_config;

/* colibri_config.expert_policy: COLI_POLICY_LRFU (the default) evicts the expert with the least
 * routing frequency decayed by recency (halved every 64 steps of its layer), the least recently
 * used among equals; COLI_POLICY_LRU the least recently used. */
enum { COLI_POLICY_DEFAULT = 0, COLI_POLICY_LRU = 1, COLI_POLICY_LRFU = 2 };

/* Fill cfg with the defaults above (all zero, model_path NULL). */
void colibri_config_default(colibri_config *cfg);
colibri_engine *colibri_open(const colibri_config *cfg);
void colibri_close(colibri_engine *e);

/* The model as the engine sees it, as JSON (colibri_gguf_describe's keys plus
 * what loading decided). Buffer rules as colibri_gguf_kv_json. */
int64_t colibri_model_info(colibri_engine *e, char *out, size_t cap);
/* What became of the model file since it was opened: COLI_FILE_INTACT;
 * COLI_FILE_CHANGED, it shrank or a mapped page could not be read (the engine
 * survives the fault; every generation fails with COLI_E_FILE_CHANGED until a
 * new engine opens the file); COLI_FILE_REPLACED, another file now stands at
 * the path (this one keeps serving). < 0 on error. Safe from any thread. */
enum { COLI_FILE_INTACT = 0, COLI_FILE_CHANGED = 1, COLI_FILE_REPLACED = 2 };
int colibri_file_state(const colibri_engine *e);

/* ---- tokenizer (section owned by tokenizer.c) ---- */
/* TOKENIZER-BEGIN */

/* Token types as GGUF stores them (tokenizer.ggml.token_type). */
enum {
    COLI_TOKEN_TYPE_UNDEFINED = 0,
    COLI_TOKEN_TYPE_NORMAL = 1,
    COLI_TOKEN_TYPE_UNKNOWN = 2,
    COLI_TOKEN_TYPE_CONTROL = 3,
    COLI_TOKEN_TYPE_USER_DEFINED = 4,
    COLI_TOKEN_TYPE_UNUSED = 5,
    COLI_TOKEN_TYPE_BYTE = 6
};

/* Tokens in the vocabulary (< 0 on error). */
int colibri_n_vocab(const colibri_engine *e);
/* Special ids, -1 when the model has none. EOT is the end-of-turn token
 * (Gemma's <end_of_turn>, ChatML's <|im_end|>). */
int32_t colibri_token_bos(const colibri_engine *e);
int32_t colibri_token_eos(const colibri_engine *e);
int32_t colibri_token_eot(const colibri_engine *e);
/* 1 if generating `tok` ends the generation (EOS, EOT, ... as llama.cpp decides), else 0. */
int colibri_token_is_eog(const colibri_engine *e, int32_t tok);
/* The token's GGUF type (COLI_TOKEN_TYPE_*); < 0 for an id outside the vocabulary. */
int colibri_token_type(const colibri_engine *e, int32_t tok);

/* Tokenize n bytes of text (UTF-8; invalid bytes are tokenized, never refused),
 * token for token as llama.cpp's llama_tokenize.
 *   add_bos: -1 as the model says (BOS if tokenizer.ggml.add_bos_token, EOS if
 *            add_eos_token), 0 neither, 1 BOS always (EOS as the model says).
 *   parse_special: 1 matches control tokens spelled in the text ("<start_of_turn>")
 *            as those tokens (for rendered chat templates); 0 tokenizes them as
 *            plain text, so user text cannot inject control tokens.
 * Writes at most cap ids to out and returns how many the text needs (call
 * again with a larger buffer when that exceeds cap); < 0 on error. */
int colibri_tokenize(colibri_engine *e, const char *text, size_t n, int add_bos, int parse_special, int32_t *out,
                     int cap);
/* The bytes token `tok` stands for (not NUL-terminated; a piece may be part of
 * a UTF-8 sequence). Control and unknown tokens give no bytes unless special
 * is 1 (then their text). Writes at most cap bytes and returns the full length
 * (like snprintf); < 0 on error. */
int colibri_token_bytes(const colibri_engine *e, int32_t tok, int special, char *out, int cap);

/* TOKENIZER-END */

/* ---- evaluation and sampling of one sequence (slot 0's cache) ---- */
/* GENERATION-BEGIN */

typedef struct {
    float temperature;  /* 0: greedy (the most likely token) */
    float top_p;        /* nucleus sampling; 1: off */
    int top_k;          /* only the k most likely tokens (applied before top_p, as llama.cpp); 0: off */
} colibri_sampling;

/* Positions the context holds, and the most tokens one forward pass takes. */
int colibri_n_ctx(const colibri_engine *e);
int colibri_n_batch(const colibri_engine *e);
/* Tokens a decode step drafts per slot (colibri_config.draft_tokens resolved; 0: off). colibri_step then writes up to (2 + this) events per slot: size its buffer so,
 * or drafts shrink to the room there is. */
int colibri_draft_tokens(const colibri_engine *e);
/* What drafts them: "model" (a draft model), "mtp" (the model's own multi-token-prediction block), "lookup"
 * (prompt lookup: the text's earlier continuations) or "" (none). */
const char *colibri_drafter(const colibri_engine *e);
/* Evaluate n tokens at positions pos..pos+n-1 of slot 0's sequence: the
 * KV cache keeps positions < pos, later ones are overwritten (bad_state while
 * slot 0 serves a request). Long inputs are
 * processed in chunks of n_batch. logits_out: NULL, or n_vocab floats for the
 * last token, or n x n_vocab floats (row i for token i) when all_logits.
 * A sequence that would pass n_ctx is refused before any work (too_long).
 * Gated DeltaNet models: their recurrent state cannot rewind; pos must be where
 * it stands, 0, or past one of slot 0's checkpoints (colibri_submit), from
 * which the cached tokens up to pos run again; else invalid_argument. */
int colibri_eval(colibri_engine *e, const int32_t *tokens, int n, int pos, float *logits_out, int all_logits);
/* Choose the next token from the last evaluated logits. *logprob (may be
 * NULL) gets its log-softmax under the model's unmodified distribution. */
int32_t colibri_sample(colibri_engine *e, const colibri_sampling *p, float *logprob);
void colibri_seed(colibri_engine *e, uint64_t seed);
/* Routing of row `row` of the last evaluated batch: for each layer, the
 * n_expert_used chosen experts (best first) and their weights; -1 and 0 for
 * dense layers. ids and weights hold n_layer * n_expert_used entries.
 * Returns n_expert_used (0 for a dense model). */
int colibri_last_routing(const colibri_engine *e, int row, int32_t *ids, float *weights);
/* Teacher-forced scoring of tokens[0..n) evaluated from position 0: for each
 * position j in [first, n-1), nll_out[j-first] = -log p(tokens[j+1] | tokens[..j])
 * and argmax_out[j-first] = the most likely next token. Either output may be
 * NULL. For perplexity and fidelity checks. */
int colibri_score(colibri_engine *e, const int32_t *tokens, int n, int first, float *nll_out, int32_t *argmax_out);
/* The model's MTP block teacher-forced, for checks against llama.cpp's MTP graph: tokens[0..n) evaluated
 * from position 0 (slot 0, as colibri_eval), then the block's row i < n reading the trunk's final normed state
 * of row i and the embedding of tokens[i + 1] (n + 1 tokens are given); logits_out gets n x n_vocab floats,
 * row i the block's guess at tokens[i + 2]. n <= n_batch; unsupported without a block (or with drafting off). */
int colibri_mtp_eval(colibri_engine *e, const int32_t *tokens, int n, float *logits_out);

/* GENERATION-END */

/* ---- KV slots: conversations decoded together (section owned by slots.c) ---- */
/* SLOTS-BEGIN */

enum { COLI_EVENT_TOKEN = 1, COLI_EVENT_DONE = 2 };
/* Why a request ended. */
enum {
    COLI_FINISH_NONE = 0,
    COLI_FINISH_STOP = 1,      /* an end-of-generation token (reported in the DONE event, not as text) */
    COLI_FINISH_LENGTH = 2,    /* max_tokens generated */
    COLI_FINISH_CONTEXT = 3,   /* the context is full */
    COLI_FINISH_CANCELLED = 4, /* colibri_cancel */
    COLI_FINISH_ERROR = 5      /* the forward pass failed; colibri_last_error says why */
};
enum { COLI_SLOT_IDLE = 0, COLI_SLOT_PREFILL = 1, COLI_SLOT_DECODE = 2, COLI_MAX_LOGPROBS = 32 };

typedef struct {
    colibri_sampling sampling;
    uint64_t seed;      /* the slot's random generator, reseeded per request */
    int max_tokens;     /* >= 0; 0 prefills (and reads out) only */
    int n_logprobs;     /* 0..32: entries of the top-k table per generated token and echoed position */
    int echo;           /* 1: read-out at prompt positions from echo_from on (the prefix before
                           echo_from - 1 may come from the cache) */
    int echo_from;      /* with echo: the first position read out; 0 or 1: all of them */
    int ignore_eos;     /* 1: end-of-generation tokens are ordinary tokens */
    int no_logprob;     /* 1: with n_logprobs 0, events carry no logprob (NaN): the log-softmax over the
                           vocabulary (a pass of exp per token, 2 ms on a 262k vocabulary) is skipped */
} colibri_request;

typedef struct {
    int slot;
    int type;                /* COLI_EVENT_* */
    int32_t token;           /* TOKEN: the generated token; DONE: the stop token (COLI_FINISH_STOP) or -1 */
    int finish;              /* DONE: COLI_FINISH_*; TOKEN: 0 */
    float logprob;           /* log-softmax of token under the model's unmodified distribution
                                (NaN when the request set no_logprob and n_logprobs is 0) */
    int n_top;               /* the request's n_logprobs (0 when token is -1) */
    int32_t top_ids[32];     /* the n_top most likely tokens, in no particular order */
    float top_logprobs[32];
} colibri_event;

typedef struct {
    int state;               /* COLI_SLOT_* */
    int n_past;              /* tokens whose keys and values are cached */
    int n_prompt;            /* the current (or last) request's prompt */
    int n_reused;            /* prompt tokens taken from the cache */
    int n_generated;
    int finish;              /* the last request's COLI_FINISH_*, 0 while it runs */
    double prefill_s;        /* seconds of forward passes the request spent prefilling */
    double decode_s;         /* seconds of decode steps it took part in */
} colibri_slot_status;

int colibri_n_slots(const colibri_engine *e);
/* Bytes one slot's KV cache maps (its pages are taken as they are written). */
int64_t colibri_slot_bytes(const colibri_engine *e);
/* Identity of the model file, 16 hex digits (keys persisted KV files). */
const char *colibri_model_id(const colibri_engine *e);

/* Start a request on an idle slot: the prompt is matched against the slot's
 * history and the longest common prefix reused (with echo, at most up to
 * echo_from - 1: the positions read out are computed). Returns
 * the reused token count; too_long (before any work) when the prompt does not
 * fit the context, bad_state when the slot is busy. Gated DeltaNet models reuse
 * up to where the slot's recurrent state stands, or else up to its newest
 * checkpoint at or before the branch (COLI_RS_CHECKPOINTS per slot, taken every
 * COLI_RS_CHECKPOINT_EVERY prompt tokens and at each prompt's end), the same
 * bits as a run from position 0. The rest is prefilled by
 * colibri_step, one chunk of n_batch tokens per step. */
int colibri_submit(colibri_engine *e, int slot, const int32_t *prompt, int n, const colibri_request *req);
/* Ask a slot to stop; its DONE event (COLI_FINISH_CANCELLED) comes from the
 * next step. Returns 1 if it was running, 0 if idle. */
int colibri_cancel(colibri_engine *e, int slot);
/* One step: every decoding slot advances one token in one batch (each row
 * computed exactly as alone), then one prefilling slot gets one chunk.
 * Writes at most cap events (cap >= 2 * n_slots) and returns how many;
 * 0 when nothing is running. */
int colibri_step(colibri_engine *e, colibri_event *events, int cap);
/* colibri_step, after first writing one byte to each of wake_fds[0..n_wake)
 * (pipes the consumers of earlier events wait on; a failed write, a full
 * pipe whose reader is already due to wake, is ignored). The writes come from
 * inside the call, after the caller has let go of any lock it held around it
 * (Python's GIL): a consumer woken then runs beside this step instead of
 * taking that lock first and holding up the step's start. */
int colibri_step_wake(colibri_engine *e, colibri_event *events, int cap, const int *wake_fds, int n_wake);
int colibri_slot_info(const colibri_engine *e, int slot, colibri_slot_status *out);
/* The slot's history: up to cap token ids whose KV is cached; returns n_past. */
int colibri_slot_tokens(const colibri_engine *e, int slot, int32_t *out, int cap);
/* The echo read-out of prompt positions [first, first + n) of the slot's last
 * request (valid once its prefill is done): logprobs[j] of the prompt token
 * at that position, and n_logprobs (top_ids, top_logprobs) entries per
 * position. Positions without a read-out (0, and those before echo_from that
 * came from the cache) have NaN and ids -1. Any output may be NULL. */
int colibri_slot_readout(const colibri_engine *e, int slot, int first, int n, float *logprobs, int32_t *top_ids,
                         float *top_logprobs);
/* Persist an idle slot's history and KV cache (and a Gated DeltaNet model's
 * recurrent state with its checkpoints) to path (crash-safe), or restore it; restore returns the token count, or a named error after which
 * the slot is empty. */
int colibri_slot_save(colibri_engine *e, int slot, const char *path);
int colibri_slot_load(colibri_engine *e, int slot, const char *path);

/* SLOTS-END */

/* ---- observability: routing heat, tiers, phases (section owned by stats.c) ---- */
/* STATS-BEGIN */

enum { COLI_TIER_DISK = 0, COLI_TIER_RAM = 1, COLI_TIER_PINNED = 2, COLI_TIER_LOADING = 3 };
enum { COLI_MAX_TURNS = 120 };

typedef struct {
    int n_layer, n_expert;       /* per-expert arrays hold n_layer * n_expert entries, layer-major */
    int streaming;               /* 1: experts stream from disk into a RAM cache */
    uint64_t seq;                /* forward passes so far; last_hits belong to pass seq */
    uint64_t turns;              /* requests finished so far (the id of the newest colibri_turn) */
    uint64_t tokens_prompt, tokens_generated;
    double forward_s, attention_s, matmul_s, lm_head_s; /* time in each phase (matmul: FFN and experts, waits excluded) */
    double io_wait_s, disk_s;    /* compute blocked on expert reads; read service time over the I/O threads */
    uint64_t bytes_read, loads;
    uint64_t hits, misses;       /* chosen experts found in RAM / not */
    uint64_t prefetch_issued, prefetch_used, predicted, predicted_right;
    int64_t cache_bytes, pinned_bytes;
    int n_cached, n_pinned;
    double linear_attention_s;   /* Gated DeltaNet models: the linear-attention layers (not in attention_s) */
    uint64_t draft_steps;        /* slot steps that verified drafted tokens */
    uint64_t draft_tokens, draft_accepted; /* tokens drafted, and those the model then picked */
} colibri_stats_t;

/* One finished request ("turn"): its wall time and the engine's work while it ran
 * (shared batch work counts fully in each turn it served). */
typedef struct {
    uint64_t id;                 /* 1, 2, ... in finishing order */
    int slot, finish;            /* COLI_FINISH_* */
    int prompt_tokens, reused_tokens, completion_tokens;
    double wall_s, prefill_s, attention_s, matmul_s, lm_head_s, io_wait_s, disk_s, other_s;
    double end_time;             /* when it ended, seconds since the Unix epoch */
    uint64_t bytes_read, forwards;
    double cache_hit_rate, prefetch_hit_rate; /* NaN when no expert was chosen / predicted */
    double linear_attention_s;   /* Gated DeltaNet models: the linear-attention layers (not in attention_s) */
    int draft_tokens, draft_accepted; /* speculative decoding: tokens drafted, and those kept */
} colibri_turn;

/* Counters, and optionally per expert: tier (COLI_TIER_*), routing count since
 * open, decayed heat, and 1 for experts the latest pass routed to. Any array
 * may be NULL. Safe to call from any thread while another one steps. */
int colibri_stats(colibri_engine *e, colibri_stats_t *out, uint8_t *tiers, uint32_t *counts, float *heat,
                  uint8_t *last_hits);
/* The last turns, oldest first (at most COLI_MAX_TURNS); returns how many. */
int colibri_turns(colibri_engine *e, colibri_turn *out, int cap);
/* Streaming: load the hottest experts by counts (n_layer * n_expert, e.g. a
 * previous run's colibri_stats counts) and pin them within the pin budget;
 * returns how many were pinned. Call between steps. */
int colibri_pin_experts(colibri_engine *e, const uint32_t *counts);

/* For every expert (cell il * n_expert + e), its k (1..64) strongest
 * co-routing partners in its own layer and the two neighbouring ones: nbr
 * gets partner cells, weight the tokens routed through both, strongest first
 * (UINT32_MAX / 0 pad a short list); arrays of n_layer * n_expert * k.
 * Returns the tokens observed (0: not measured, e.g. over 256 experts per layer). */
int64_t colibri_coroute(colibri_engine *e, int k, uint32_t *nbr, uint32_t *weight);

/* STATS-END */

/* ENGINE-END */

/* CFFI-END */

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_H */
