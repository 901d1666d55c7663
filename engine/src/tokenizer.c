/* tokenizer.c — load and check a GGUF vocabulary (see tokenizer.h).
 *
 * Mirrors llama.cpp's llama_vocab::impl::load for the two supported models:
 * token attributes from the file's token types, special ids with their
 * defaults, add_bos/add_eos/add_space_prefix, and the text-based detection of
 * end-of-turn, FIM and end-of-generation tokens that llama.cpp applies on top
 * of the file. The file is hostile: every array length is checked against the
 * token count, every id against the vocabulary, and a bad value is a named
 * error, never a crash. Loading is linear in the vocabulary (hash tables). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tokenizer.h"

#define MAX_VOCAB (1 << 24)  /* 16M tokens: far beyond any model, small enough for int32 ids */

/* ---- hashing -------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_bytes(const char *s, size_t n, uint64_t h) {
    h ^= (uint64_t)n * 0x9E3779B97F4A7C15ULL;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001B3ULL;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x100000001B3ULL;
    return mix64(h);
}

static inline uint64_t hash_pair(const char *l, size_t nl, const char *r, size_t nr) {
    return hash_bytes(r, nr, hash_bytes(l, nl, 0x51ED27AB5ull));
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

int32_t coli_tok_find(const struct coli_tokenizer *t, const char *s, size_t n) {
    uint32_t h = (uint32_t)hash_bytes(s, n, 0) & t->hash_mask;
    for (;;) {
        int32_t id = t->hash[h];
        if (id < 0) return COLI_TOKEN_NULL;
        if (t->tok_off[id + 1] - t->tok_off[id] == n && memcmp(t->arena + t->tok_off[id], s, n) == 0) return id;
        h = (h + 1) & t->hash_mask;
    }
}

int32_t coli_tok_merge_rank(const struct coli_tokenizer *t, const char *l, size_t nl, const char *r, size_t nr) {
    if (!t->merge_hash) return -1;
    uint32_t h = (uint32_t)hash_pair(l, nl, r, nr) & t->merge_mask;
    for (;;) {
        int32_t m = t->merge_hash[h];
        if (m < 0) return -1;
        const char *ms = t->merge_arena + t->merge_off[m];
        uint32_t sp = t->merge_split[m], len = t->merge_off[m + 1] - t->merge_off[m];
        if (sp == nl && len - sp - 1 == nr && memcmp(ms, l, nl) == 0 && memcmp(ms + sp + 1, r, nr) == 0) return m;
        h = (h + 1) & t->merge_mask;
    }
}

/* ---- small helpers ------------------------------------------------------ */

static int streq(const struct coli_tokenizer *t, int32_t id, const char *s) {
    size_t n;
    const char *p = coli_tok_text(t, id, &n);
    return n == strlen(s) && memcmp(p, s, n) == 0;
}

static int32_t find_cstr(const struct coli_tokenizer *t, const char *s) {
    return coli_tok_find(t, s, strlen(s));
}

/* The lowest id among tokens spelled as one of `names` (NULL-terminated).
 * llama.cpp takes the first in its hash map's order; that choice only names
 * the id, the attributes it sets are the same. */
static int32_t find_any(const struct coli_tokenizer *t, const char *const *names) {
    int32_t best = COLI_TOKEN_NULL;
    for (; *names; names++) {
        int32_t id = find_cstr(t, *names);
        if (id >= 0 && (best < 0 || id < best)) best = id;
    }
    return best;
}

static int str_is(gguf_str s, const char *c) {
    return s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0;
}

/* Element i of a string array as llama.cpp sees it: a C string, so cut at
 * the first NUL byte. */
static gguf_str arr_cstr(const gguf_kv *kv, uint64_t i) {
    gguf_str s = gguf_arr_str(kv, i);
    const char *nul = s.len ? memchr(s.ptr, 0, s.len) : NULL;
    if (nul) s.len = (uint64_t)(nul - s.ptr);
    return s;
}

static const gguf_kv *string_array(gguf_file *f, const char *key, int *rc) {
    const gguf_kv *kv = gguf_get(f, key);
    *rc = 0;
    if (!kv) return NULL;
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING)
        *rc = coli_fail(COLI_E_CORRUPT, "corrupt: %s has type %s, expected array[string]", key,
                        kv->type == GGUF_TYPE_ARRAY ? gguf_type_name(kv->arr_type) : gguf_type_name(kv->type));
    return kv;
}

/* ---- the model and its pre-tokenizer ------------------------------------ */

typedef struct {
    const char *const *names;
    enum coli_pre_stage stages[COLI_PRE_MAX_STAGES];
    int ignore_merges;
    int add_bos;
    int no_bos;         /* no default BOS id */
    int merges_needed;  /* 0: a file without merges is accepted (Kimi K2) */
    int spm_style;      /* escape_whitespaces and no byte encoding (llama.cpp's gemma4 / sarvam-moe types) */
    int gemma4;         /* LLAMA_VOCAB_PRE_TYPE_GEMMA4: newline runs kept whole, BOS always added */
} pre_def;

static const char *const pre_default[] = {"default", NULL};
static const char *const pre_llama3[] = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                                         "midm-2.0", "lfm2", "jina-v5-nano", NULL};
static const char *const pre_llama3_plain[] = {"dbrx", "smaug-bpe", NULL};
/* bailingmoe's regex ends its newline alternative in [\r\n] instead of
 * [\r\n]+, which matches the same text */
static const char *const pre_qwen2[] = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez",
                                        "hunyuan", "solar-open", "grok-2", "bailingmoe", "bailingmoe2",
                                        "llada-moe", NULL};
static const char *const pre_gpt2[] = {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
                                       "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais",
                                       "trillion", "granite-docling", "exaone4", NULL};
static const char *const pre_starcoder[] = {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                                            "minerva-7b", "mellum2", NULL};
static const char *const pre_chatglm[] = {"chatglm-bpe", NULL};
static const char *const pre_glm4[] = {"glm4", "glm5", NULL};
static const char *const pre_qwen35[] = {"qwen35", NULL};
static const char *const pre_deepseek3[] = {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4", NULL};
static const char *const pre_gpt4o[] = {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2", NULL};
static const char *const pre_tekken[] = {"tekken", NULL};
static const char *const pre_kimi_k2[] = {"kimi-k2", NULL};
static const char *const pre_gemma4[] = {"gemma4", "granite-embed-multi-311m", NULL};
static const char *const pre_deepseek_llm[] = {"deepseek-llm", NULL};
static const char *const pre_deepseek_coder[] = {"deepseek-coder", NULL};
static const char *const pre_sarvam[] = {"sarvam-moe", NULL};

/* Which stages each tokenizer.ggml.pre name selects (llama-vocab.cpp,
 * llm_tokenizer_bpe), and the flags llama.cpp sets with it. */
static const pre_def pre_defs[] = {
    {pre_default, {COLI_STAGE_PUNCT_RUNS, COLI_STAGE_GPT2, COLI_STAGE_NUMBER_RUNS, COLI_STAGE_DIGIT_TRIPLES},
     .merges_needed = 1},
    {pre_llama3, {COLI_STAGE_LLAMA3}, .ignore_merges = 1, .add_bos = 1, .merges_needed = 1},
    {pre_llama3_plain, {COLI_STAGE_LLAMA3}, .merges_needed = 1},
    {pre_chatglm, {COLI_STAGE_LLAMA3}, .no_bos = 1, .merges_needed = 1},
    {pre_glm4, {COLI_STAGE_LLAMA3}, .ignore_merges = 1, .no_bos = 1, .merges_needed = 1},
    {pre_qwen2, {COLI_STAGE_LLAMA3_DIGIT1}, .merges_needed = 1},
    {pre_qwen35, {COLI_STAGE_QWEN35}, .merges_needed = 1},
    {pre_gpt2, {COLI_STAGE_GPT2}, .merges_needed = 1},
    {pre_starcoder, {COLI_STAGE_NUMBER_EACH, COLI_STAGE_GPT2}, .merges_needed = 1},
    {pre_deepseek3, {COLI_STAGE_NUMBER_TRIPLES, COLI_STAGE_CJK_RUNS, COLI_STAGE_DEEPSEEK3}, .merges_needed = 1},
    {pre_gpt4o, {COLI_STAGE_GPT4O}, .merges_needed = 1},
    {pre_tekken, {COLI_STAGE_TEKKEN}, .ignore_merges = 1, .add_bos = 1, .merges_needed = 1},
    {pre_kimi_k2, {COLI_STAGE_KIMI_K2}, .merges_needed = 0},
    {pre_gemma4, {COLI_STAGE_LINES}, .merges_needed = 1, .spm_style = 1, .gemma4 = 1},
    {pre_deepseek_llm, {COLI_STAGE_EACH_LINE_BREAK, COLI_STAGE_DSLLM_LETTERS, COLI_STAGE_DSLLM_PUNCT,
                        COLI_STAGE_TRAILING_SPACE, COLI_STAGE_DS_CJK, COLI_STAGE_NUMBER_RUNS}, .merges_needed = 1},
    {pre_deepseek_coder, {COLI_STAGE_EACH_LINE_BREAK, COLI_STAGE_DSCODER_LETTERS, COLI_STAGE_DSCODER_PUNCT,
                          COLI_STAGE_DS_CJK, COLI_STAGE_NUMBER_EACH}, .merges_needed = 1},
    {pre_sarvam, {COLI_STAGE_LINES}, .merges_needed = 1, .spm_style = 1},
};

static int load_model_type(struct coli_tokenizer *t, gguf_file *f) {
    gguf_str model;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &model);
    if (rc < 0) return rc;
    if (rc == 0) return coli_fail(COLI_E_MISSING, "missing: tokenizer.ggml.model (the file has no tokenizer)");
    if (str_is(model, "llama")) {
        t->type = COLI_VOCAB_SPM;
        t->bos = 1;
        t->eos = 2;
        t->unk = 0;
        t->add_space_prefix = 1;
        t->add_bos = 1;
        return 0;
    }
    const int gemma4 = str_is(model, "gemma4");
    if (!gemma4 && !str_is(model, "gpt2"))
        return coli_fail(COLI_E_UNSUPPORTED,
                         "unsupported: tokenizer model '%.*s' (colibri reads 'llama', 'gpt2' and 'gemma4')",
                         (int)(model.len > 64 ? 64 : model.len), model.ptr);
    t->type = COLI_VOCAB_BPE;
    t->bos = gemma4 ? COLI_TOKEN_NULL : 11; /* gemma4: every special id from the file */
    t->eos = gemma4 ? COLI_TOKEN_NULL : 11;
    gguf_str pre = {"", 0};
    rc = gguf_get_str(f, "tokenizer.ggml.pre", &pre);
    if (rc < 0) return rc;
    if (gemma4) pre = (gguf_str){"gemma4", 6}; /* the model names its pre-tokenizer, whatever the file says */
    for (size_t d = 0; d < sizeof pre_defs / sizeof pre_defs[0]; d++) {
        for (const char *const *n = pre_defs[d].names; *n; n++) {
            if (!(str_is(pre, *n) || (pre.len == 0 && d == 0))) continue;
            memcpy(t->stages, pre_defs[d].stages, sizeof t->stages);
            t->n_stages = 0;
            while (t->n_stages < COLI_PRE_MAX_STAGES && t->stages[t->n_stages] != COLI_STAGE_NONE) t->n_stages++;
            t->ignore_merges = pre_defs[d].ignore_merges;
            t->add_bos = pre_defs[d].add_bos;
            t->merges_optional = !pre_defs[d].merges_needed;
            t->spm_style = pre_defs[d].spm_style;
            t->newline_runs_whole = pre_defs[d].gemma4;
            t->force_bos = pre_defs[d].gemma4;
            if (pre_defs[d].no_bos) t->bos = COLI_TOKEN_NULL;
            return 0;
        }
    }
    return coli_fail(COLI_E_UNSUPPORTED, "unsupported: pre-tokenizer '%.*s' (tokenizer.ggml.pre)",
                     (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
}

/* ---- tokens, scores, types ---------------------------------------------- */

static int load_tokens(struct coli_tokenizer *t, gguf_file *f) {
    int rc;
    const gguf_kv *toks = string_array(f, "tokenizer.ggml.tokens", &rc);
    if (rc) return rc;
    if (!toks) return coli_fail(COLI_E_MISSING, "missing: tokenizer.ggml.tokens (the vocabulary)");
    if (toks->arr_n == 0) return coli_fail(COLI_E_CORRUPT, "corrupt: tokenizer.ggml.tokens is empty");
    if (toks->arr_n > MAX_VOCAB)
        return coli_fail(COLI_E_CORRUPT, "corrupt: tokenizer.ggml.tokens has %llu tokens, more than %d",
                         (unsigned long long)toks->arr_n, MAX_VOCAB);
    int32_t n = (int32_t)toks->arr_n;
    t->n_tokens = n;

    /* scores: FLOAT32 (or INT32) per token */
    const gguf_kv *sc = gguf_get(f, "tokenizer.ggml.scores");
    if (sc) {
        if (sc->type != GGUF_TYPE_ARRAY || (sc->arr_type != GGUF_TYPE_FLOAT32 && sc->arr_type != GGUF_TYPE_INT32))
            return coli_fail(COLI_E_CORRUPT, "corrupt: tokenizer.ggml.scores must be array[float32]");
        if (sc->arr_n != (uint64_t)n)
            return coli_fail(COLI_E_CORRUPT, "corrupt: tokenizer.ggml.scores has %llu entries for %d tokens",
                             (unsigned long long)sc->arr_n, n);
    }
    const gguf_kv *tt = gguf_get(f, "tokenizer.ggml.token_type");
    if (tt) {
        if (tt->type != GGUF_TYPE_ARRAY || tt->arr_type != GGUF_TYPE_INT32)
            return coli_fail(COLI_E_CORRUPT, "corrupt: tokenizer.ggml.token_type must be array[int32]");
        if (tt->arr_n != (uint64_t)n)
            return coli_fail(COLI_E_CORRUPT, "corrupt: tokenizer.ggml.token_type has %llu entries for %d tokens",
                             (unsigned long long)tt->arr_n, n);
    }

    /* texts into one arena; an empty text becomes "[EMPTY_<id>]" as in llama.cpp */
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        uint64_t len = arr_cstr(toks, (uint64_t)i).len;
        total += len ? len : 24;
    }
    if (total >= UINT32_MAX) return coli_fail(COLI_E_CORRUPT, "corrupt: token texts total %llu bytes", (unsigned long long)total);
    t->arena = malloc(total + 1);
    t->tok_off = malloc(((size_t)n + 1) * sizeof *t->tok_off);
    t->score = calloc((size_t)n, sizeof *t->score);
    t->file_type = malloc((size_t)n);
    t->attr = malloc((size_t)n * sizeof *t->attr);
    t->hash_mask = pow2_at_least((uint64_t)n * 2) - 1;
    t->hash = malloc(((size_t)t->hash_mask + 1) * sizeof *t->hash);
    if (!t->arena || !t->tok_off || !t->score || !t->file_type || !t->attr || !t->hash)
        return coli_fail(COLI_E_NOMEM, "out of memory loading %d tokens", n);
    memset(t->hash, 0xFF, ((size_t)t->hash_mask + 1) * sizeof *t->hash);

    uint32_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        gguf_str s = arr_cstr(toks, (uint64_t)i);
        t->tok_off[i] = off;
        if (s.len) {
            memcpy(t->arena + off, s.ptr, s.len);
            off += (uint32_t)s.len;
        } else {
            off += (uint32_t)snprintf(t->arena + off, 24, "[EMPTY_%d]", (int)i);
        }
        if ((int32_t)(off - t->tok_off[i]) > t->max_token_len) t->max_token_len = (int32_t)(off - t->tok_off[i]);
    }
    t->tok_off[n] = off;

    for (int32_t i = 0; i < n; i++) {
        size_t len;
        const char *p = coli_tok_text(t, i, &len);
        uint32_t h = (uint32_t)hash_bytes(p, len, 0) & t->hash_mask;
        for (;;) {
            int32_t j = t->hash[h];
            if (j < 0) break;
            if (t->tok_off[j + 1] - t->tok_off[j] == len && memcmp(t->arena + t->tok_off[j], p, len) == 0)
                return coli_fail(COLI_E_CORRUPT, "corrupt: duplicate token in vocabulary: '%.*s' has ids %d and %d",
                                 (int)(len > 64 ? 64 : len), p, (int)j, (int)i);
            h = (h + 1) & t->hash_mask;
        }
        t->hash[h] = i;
    }

    for (int32_t i = 0; i < n; i++) {
        if (sc) t->score[i] = (float)gguf_arr_f64(sc, (uint64_t)i);
        int64_t ty = tt ? gguf_arr_i64(tt, (uint64_t)i) : 1;
        t->file_type[i] = (ty >= 0 && ty <= 6) ? (uint8_t)ty : 0;
        switch (ty) {
        case 1: t->attr[i] = COLI_ATTR_NORMAL; break;
        case 2: t->attr[i] = COLI_ATTR_UNKNOWN; break;
        case 3: t->attr[i] = COLI_ATTR_CONTROL; break;
        case 4: t->attr[i] = COLI_ATTR_USER_DEFINED; break;
        case 5: t->attr[i] = COLI_ATTR_UNUSED; break;
        case 6: t->attr[i] = COLI_ATTR_BYTE; break;
        default: t->attr[i] = COLI_ATTR_UNDEFINED; break;
        }
    }
    return 0;
}

/* ---- BPE merges -------------------------------------------------------- */

static int load_merges(struct coli_tokenizer *t, gguf_file *f) {
    int rc;
    const gguf_kv *mk = string_array(f, "tokenizer.ggml.merges", &rc);
    if (rc) return rc;
    if (!mk && t->merges_optional) return 0;
    if (!mk) return coli_fail(COLI_E_MISSING, "missing: tokenizer.ggml.merges (a gpt2 tokenizer needs its merges)");
    if (mk->arr_n > MAX_VOCAB * 4ull)
        return coli_fail(COLI_E_CORRUPT, "corrupt: tokenizer.ggml.merges has %llu entries", (unsigned long long)mk->arr_n);
    int32_t n = (int32_t)mk->arr_n;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) total += arr_cstr(mk, (uint64_t)i).len;
    if (total >= UINT32_MAX) return coli_fail(COLI_E_CORRUPT, "corrupt: merges total %llu bytes", (unsigned long long)total);
    t->n_merges = n;
    t->merge_arena = malloc(total + 1);
    t->merge_off = malloc(((size_t)n + 1) * sizeof *t->merge_off);
    t->merge_split = malloc(((size_t)n + 1) * sizeof *t->merge_split);
    t->merge_mask = pow2_at_least((uint64_t)n * 2) - 1;
    t->merge_hash = malloc(((size_t)t->merge_mask + 1) * sizeof *t->merge_hash);
    if (!t->merge_arena || !t->merge_off || !t->merge_split || !t->merge_hash)
        return coli_fail(COLI_E_NOMEM, "out of memory loading %d merges", n);
    memset(t->merge_hash, 0xFF, ((size_t)t->merge_mask + 1) * sizeof *t->merge_hash);

    uint32_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        gguf_str s = arr_cstr(mk, (uint64_t)i);
        /* "left right", split at the first space after the first byte */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp)
            return coli_fail(COLI_E_CORRUPT, "corrupt: merge %d ('%.*s') is not two tokens separated by a space",
                             (int)i, (int)(s.len > 64 ? 64 : s.len), s.ptr);
        memcpy(t->merge_arena + off, s.ptr, s.len);
        t->merge_off[i] = off;
        t->merge_split[i] = (uint32_t)(sp - s.ptr);
        off += (uint32_t)s.len;
    }
    t->merge_off[n] = off;

    for (int32_t i = 0; i < n; i++) {
        const char *ms = t->merge_arena + t->merge_off[i];
        uint32_t split = t->merge_split[i], len = t->merge_off[i + 1] - t->merge_off[i];
        if (coli_tok_merge_rank(t, ms, split, ms + split + 1, len - split - 1) >= 0) continue;  /* first rank wins */
        uint32_t h = (uint32_t)hash_pair(ms, split, ms + split + 1, len - split - 1) & t->merge_mask;
        while (t->merge_hash[h] >= 0) h = (h + 1) & t->merge_mask;
        t->merge_hash[h] = i;
    }
    return 0;
}

/* ---- special ids and flags --------------------------------------------- */

typedef struct {
    const char *key;
    int32_t *id;
    int strict;  /* an out-of-range id is an error (else: keep the default, as llama.cpp) */
} id_key;

static int load_special_ids(struct coli_tokenizer *t, gguf_file *f) {
    t->eot = t->eom = t->fim_pre = t->fim_suf = t->fim_mid = t->fim_pad = t->fim_rep = t->fim_sep = COLI_TOKEN_NULL;
    if (t->type == COLI_VOCAB_BPE) t->unk = COLI_TOKEN_NULL;
    t->pad = COLI_TOKEN_NULL;
    const id_key keys[] = {
        {"tokenizer.ggml.bos_token_id", &t->bos, 1},
        {"tokenizer.ggml.eos_token_id", &t->eos, 1},
        {"tokenizer.ggml.eot_token_id", &t->eot, 0},
        {"tokenizer.ggml.eom_token_id", &t->eom, 0},
        {"tokenizer.ggml.unknown_token_id", &t->unk, 0},
        {"tokenizer.ggml.padding_token_id", &t->pad, 0},
        {"tokenizer.ggml.fim_pre_token_id", &t->fim_pre, 0},
        {"tokenizer.ggml.fim_suf_token_id", &t->fim_suf, 0},
        {"tokenizer.ggml.fim_mid_token_id", &t->fim_mid, 0},
        {"tokenizer.ggml.fim_pad_token_id", &t->fim_pad, 0},
        {"tokenizer.ggml.fim_rep_token_id", &t->fim_rep, 0},
        {"tokenizer.ggml.fim_sep_token_id", &t->fim_sep, 0},
        {"tokenizer.ggml.prefix_token_id", &t->fim_pre, 0},
        {"tokenizer.ggml.suffix_token_id", &t->fim_suf, 0},
        {"tokenizer.ggml.middle_token_id", &t->fim_mid, 0},
    };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        int32_t *id = keys[k].id;
        if (*id >= t->n_tokens) *id = COLI_TOKEN_NULL;  /* a default past the vocabulary */
        uint32_t v;
        int rc = gguf_get_u32(f, keys[k].key, &v);
        if (rc < 0) {
            if (keys[k].strict) return rc;
            coli_clear_error();
            continue;
        }
        if (rc == 0) continue;
        if (v >= (uint32_t)t->n_tokens) {
            if (keys[k].strict)
                return coli_fail(COLI_E_CORRUPT, "corrupt: %s = %u is outside the vocabulary (%d tokens)", keys[k].key,
                                 v, (int)t->n_tokens);
            continue;
        }
        *id = (int32_t)v;
    }

    int b, rc;
    if ((rc = gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b)) < 0) return rc;
    if (rc) t->add_space_prefix = b;
    if ((rc = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b)) < 0) return rc;
    if (rc) t->add_bos = b;
    if ((rc = gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &b)) < 0) return rc;
    if (rc) t->add_eos = b;
    if (t->type == COLI_VOCAB_BPE) t->add_space_prefix = 0;
    if (t->force_bos) t->add_bos = 1; /* llama.cpp's Gemma 4 workaround: BOS whatever add_bos_token says */
    if (t->add_bos && t->bos < 0)
        return coli_fail(COLI_E_CORRUPT, "corrupt: tokenizer.ggml.add_bos_token is true, but there is no BOS token");
    if (t->add_eos && t->eos < 0)
        return coli_fail(COLI_E_CORRUPT, "corrupt: tokenizer.ggml.add_eos_token is true, but there is no EOS token");
    return 0;
}

/* Token spellings llama.cpp recognizes (llama-vocab.cpp, load()). */
static const char *const names_eot[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                         "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                         "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                         "<end_of_utterance>", NULL};
static const char *const names_eom[] = {"<|eom_id|>", NULL};
static const char *const names_fim_pre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>",
                                            "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const names_fim_suf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>",
                                            "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const names_fim_mid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>",
                                            "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const names_fim_pad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const names_fim_rep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const names_fim_sep[] = {"<|file_sep|>", NULL};
static const char *const names_eog[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                        "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>",
                                        "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                                        "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                                        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                        "[e~[", "<|plamo:eos|>", NULL};
static const char *const names_user_defined[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};

/* A token named by its spelling becomes a control token (llama.cpp warns). */
static void force_control(struct coli_tokenizer *t, int32_t id) {
    if (id >= 0) t->attr[id] |= COLI_ATTR_CONTROL;
}

static void detect_by_text(struct coli_tokenizer *t, int32_t *id, const char *const *names) {
    if (*id != COLI_TOKEN_NULL) return;
    *id = find_any(t, names);
    force_control(t, *id);
}

static int eog_has(const struct coli_tokenizer *t, int32_t id) {
    for (int32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return 1;
    return 0;
}

static void eog_add(struct coli_tokenizer *t, int32_t id) {
    if (id >= 0 && !eog_has(t, id)) t->eog[t->n_eog++] = id;
}

static void eog_remove(struct coli_tokenizer *t, int32_t id) {
    for (int32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) {
            t->eog[i] = t->eog[--t->n_eog];
            return;
        }
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int derive_special(struct coli_tokenizer *t) {
    detect_by_text(t, &t->eot, names_eot);
    detect_by_text(t, &t->eom, names_eom);
    detect_by_text(t, &t->fim_pre, names_fim_pre);
    detect_by_text(t, &t->fim_suf, names_fim_suf);
    detect_by_text(t, &t->fim_mid, names_fim_mid);
    detect_by_text(t, &t->fim_pad, names_fim_pad);
    detect_by_text(t, &t->fim_rep, names_fim_rep);
    detect_by_text(t, &t->fim_sep, names_fim_sep);

    /* control tokens named "...unused..." are unused */
    for (int32_t i = 0; i < t->n_tokens; i++) {
        if (!(t->attr[i] & COLI_ATTR_CONTROL) || (t->attr[i] & COLI_ATTR_UNUSED)) continue;
        size_t n;
        const char *p = coli_tok_text(t, i, &n);
        for (size_t k = 0; k + 6 <= n; k++)
            if (memcmp(p + k, "unused", 6) == 0) {
                t->attr[i] |= COLI_ATTR_UNUSED;
                break;
            }
    }

    /* end of generation: FIM pad/repo/sep, every token spelled as an EOG, eos/eot/eom */
    size_t n_names = sizeof names_eog / sizeof names_eog[0];
    t->eog = malloc((n_names + 8) * sizeof *t->eog);
    if (!t->eog) return coli_fail(COLI_E_NOMEM, "out of memory");
    eog_add(t, t->fim_pad);
    eog_add(t, t->fim_rep);
    eog_add(t, t->fim_sep);
    for (const char *const *nm = names_eog; *nm; nm++) {
        int32_t id = find_cstr(t, *nm);
        if (id < 0) continue;
        eog_add(t, id);
        force_control(t, id);
    }
    for (const char *const *nm = names_user_defined; *nm; nm++) {  /* gpt-oss: always rendered */
        int32_t id = find_cstr(t, *nm);
        if (id >= 0) t->attr[id] = COLI_ATTR_USER_DEFINED;
    }
    eog_add(t, t->eos);
    eog_add(t, t->eot);
    eog_add(t, t->eom);

    /* harmony / solar-open: "<|end|>" ends a message, not the generation */
    int has_return = 0, has_call = 0, has_flush = 0;
    int32_t end_id = COLI_TOKEN_NULL;
    for (int32_t i = 0; i < t->n_eog; i++) {
        int32_t id = t->eog[i];
        if (streq(t, id, "<|return|>")) has_return = 1;
        else if (streq(t, id, "<|call|>") || streq(t, id, "<|calls|>")) has_call = 1;
        else if (streq(t, id, "<|flush|>")) has_flush = 1;
        else if (streq(t, id, "<|end|>")) end_id = id;
    }
    if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
        eog_remove(t, end_id);
        t->attr[end_id] = COLI_ATTR_USER_DEFINED;
    }
    /* gemma4 / plamo: "</s>" is an ordinary (HTML) token there */
    int32_t s_id = COLI_TOKEN_NULL;
    int keep_s = 1;
    for (int32_t i = 0; i < t->n_eog; i++) {
        int32_t id = t->eog[i];
        if (streq(t, id, "<|tool_response>") || streq(t, id, "<|plamo:eos|>")) keep_s = 0;
        else if (streq(t, id, "</s>")) s_id = id;
    }
    if (s_id >= 0 && !keep_s) {
        eog_remove(t, s_id);
        t->attr[s_id] = COLI_ATTR_NORMAL;
    }
    qsort(t->eog, (size_t)t->n_eog, sizeof *t->eog, cmp_i32);
    return 0;
}

/* ---- special-token matcher ----------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int trie_child(const struct coli_tokenizer *t, int32_t node, uint8_t c) {
    for (int32_t k = t->trie[node].child; k >= 0; k = t->trie[k].sibling)
        if (t->trie[k].byte == c) return k;
    return -1;
}

static int trie_new(struct coli_tokenizer *t, int32_t *cap, uint8_t c) {
    if (t->n_trie == *cap) {
        int32_t ncap = *cap ? *cap * 2 : 1024;
        coli_trie_node *nt = realloc(t->trie, (size_t)ncap * sizeof *nt);
        if (!nt) return coli_fail(COLI_E_NOMEM, "out of memory building the special-token matcher");
        t->trie = nt;
        *cap = ncap;
    }
    coli_trie_node *nd = &t->trie[t->n_trie];
    nd->child = nd->sibling = nd->rank = -1;
    nd->byte = c;
    return t->n_trie++;
}

static int build_special(struct coli_tokenizer *t) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_tokens; i++)
        n += (t->attr[i] & (COLI_ATTR_CONTROL | COLI_ATTR_USER_DEFINED | COLI_ATTR_UNKNOWN)) != 0;
    t->special = malloc(((size_t)n + 1) * sizeof *t->special);
    uint64_t *keys = malloc(((size_t)n + 1) * sizeof *keys);
    if (!t->special || !keys) {
        free(keys);
        return coli_fail(COLI_E_NOMEM, "out of memory");
    }
    /* longest first; equal lengths by id (llama.cpp's std::sort leaves their order unspecified) */
    t->n_special = 0;
    for (int32_t i = 0; i < t->n_tokens; i++) {
        if (!(t->attr[i] & (COLI_ATTR_CONTROL | COLI_ATTR_USER_DEFINED | COLI_ATTR_UNKNOWN))) continue;
        uint32_t len = t->tok_off[i + 1] - t->tok_off[i];
        keys[t->n_special++] = ((uint64_t)(UINT32_MAX - len) << 32) | (uint32_t)i;
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_u64);
    for (int32_t r = 0; r < n; r++) t->special[r] = (int32_t)(keys[r] & 0xFFFFFFFFu);
    free(keys);

    for (int c = 0; c < 256; c++) t->trie_root[c] = -1;
    int32_t cap = 0;
    for (int32_t r = 0; r < n; r++) {
        size_t len;
        const uint8_t *p = (const uint8_t *)coli_tok_text(t, t->special[r], &len);
        int32_t node = t->trie_root[p[0]];
        if (node < 0) {
            node = trie_new(t, &cap, p[0]);
            if (node < 0) return node;
            t->trie_root[p[0]] = node;
        }
        for (size_t k = 1; k < len; k++) {
            int32_t nx = trie_child(t, node, p[k]);
            if (nx < 0) {
                nx = trie_new(t, &cap, p[k]);
                if (nx < 0) return nx;
                t->trie[nx].sibling = t->trie[node].child;
                t->trie[node].child = nx;
            }
            node = nx;
        }
        t->trie[node].rank = r;
    }
    return 0;
}

/* ---- per-model strip attributes ------------------------------------------ */

static int contains(gguf_str hay, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= hay.len; i++)
        if (memcmp(hay.ptr + i, needle, n) == 0) return 1;
    return 0;
}

static void set_strip(struct coli_tokenizer *t, const char *text, uint16_t bit, int on) {
    int32_t id = find_cstr(t, text);
    if (id < 0) return;
    t->attr[id] = on ? (uint16_t)(t->attr[id] | bit) : (uint16_t)(t->attr[id] & ~bit);
}

/* llama.cpp sets LSTRIP/RSTRIP by model: the file does not say. Phi-3's
 * special tokens swallow the whitespace after them; some BERT-style models'
 * mask token the whitespace before it. */
static void strip_attributes(struct coli_tokenizer *t, gguf_file *f) {
    gguf_str name = {"", 0}, pre = {"", 0}, arch = {"", 0};
    if (gguf_get_str(f, "general.name", &name) < 0) name.len = 0;
    if (gguf_get_str(f, "tokenizer.ggml.pre", &pre) < 0) pre.len = 0;
    if (gguf_get_str(f, "general.architecture", &arch) < 0) arch.len = 0;
    coli_clear_error();
    char lower[256];
    size_t n = name.len < sizeof lower ? name.len : sizeof lower;
    for (size_t i = 0; i < n; i++) lower[i] = (char)((name.ptr[i] >= 'A' && name.ptr[i] <= 'Z') ? name.ptr[i] + 32 : name.ptr[i]);
    gguf_str lname = {lower, n};
    if (contains(pre, "jina-v2-de") || contains(pre, "jina-v2-es") || contains(pre, "jina-v2-code") ||
        contains(arch, "nomic-bert-moe") || contains(arch, "jina-bert-v3")) {
        set_strip(t, "<mask>", COLI_ATTR_LSTRIP, 1);
    } else if (contains(lname, "phi-3") || contains(lname, "phi3")) {
        for (int32_t r = 0; r < t->n_special; r++) t->attr[t->special[r]] |= COLI_ATTR_RSTRIP;
        set_strip(t, "</s>", COLI_ATTR_RSTRIP, 1);
        set_strip(t, "<unk>", COLI_ATTR_RSTRIP, 0);
        set_strip(t, "<s>", COLI_ATTR_RSTRIP, 0);
        set_strip(t, "<|endoftext|>", COLI_ATTR_RSTRIP, 0);
    } else if (contains(lname, "modern-bert")) {
        set_strip(t, "[MASK]", COLI_ATTR_LSTRIP, 1);
    }
}

/* ---- byte fallback ------------------------------------------------------ */

static void build_byte_tokens(struct coli_tokenizer *t) {
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char one = (char)b;
        if (t->type == COLI_VOCAB_SPM) {
            char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            int32_t id = coli_tok_find(t, buf, 6);
            t->byte_token[b] = id >= 0 ? id : coli_tok_find(t, &one, 1);
        } else if (t->spm_style) {
            char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            t->byte_token[b] = coli_tok_find(t, buf, 6);
        } else {
            t->byte_token[b] = coli_tok_find(t, &one, 1);  /* a raw byte spelled as a token */
        }
        uint8_t u[4];
        int k = coli_utf8_encode(coli_byte_to_cp((uint8_t)b), u);
        t->gpt2_enc[b][0] = u[0];
        t->gpt2_enc[b][1] = k > 1 ? u[1] : 0;
        t->gpt2_enc[b][2] = (uint8_t)k;
    }
    for (uint32_t cp = 0; cp < 0x144; cp++) t->gpt2_dec[cp] = (int16_t)coli_cp_to_byte(cp);
}

/* A byte token's byte is read from its text after "<0x": llama.cpp refuses a
 * vocabulary whose byte token is too short for that (it throws while loading). */
static int check_byte_tokens(const struct coli_tokenizer *t) {
    for (int32_t i = 0; i < t->n_tokens; i++) {
        uint16_t a = t->attr[i];
        if (!(a & COLI_ATTR_BYTE) ||
            (a & (COLI_ATTR_UNKNOWN | COLI_ATTR_CONTROL | COLI_ATTR_USER_DEFINED | COLI_ATTR_NORMAL)))
            continue;
        size_t n;
        const char *p = coli_tok_text(t, i, &n);
        if (n < 3)
            return coli_fail(COLI_E_CORRUPT, "corrupt: byte token %d is '%.*s', not <0xNN>", (int)i, (int)n, p);
    }
    return 0;
}

/* ---- load / free -------------------------------------------------------- */

struct coli_tokenizer *coli_tokenizer_load(gguf_file *f) {
    if (!f) {
        coli_fail(COLI_E_ARG, "coli_tokenizer_load: no file");
        return NULL;
    }
    struct coli_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        coli_fail(COLI_E_NOMEM, "out of memory");
        return NULL;
    }
    int rc = load_model_type(t, f);
    if (!rc) rc = load_tokens(t, f);
    if (!rc && t->type == COLI_VOCAB_BPE) rc = load_merges(t, f);
    if (!rc) rc = load_special_ids(t, f);
    if (!rc) rc = derive_special(t);
    if (!rc) rc = build_special(t);
    if (!rc) strip_attributes(t, f);
    if (!rc) rc = check_byte_tokens(t);
    if (rc) {
        coli_tokenizer_free(t);
        return NULL;
    }
    build_byte_tokens(t);
    return t;
}

void coli_tokenizer_free(struct coli_tokenizer *t) {
    if (!t) return;
    free(t->arena);
    free(t->tok_off);
    free(t->score);
    free(t->file_type);
    free(t->attr);
    free(t->hash);
    free(t->merge_arena);
    free(t->merge_off);
    free(t->merge_split);
    free(t->merge_hash);
    free(t->special);
    free(t->trie);
    free(t->eog);
    free(t);
}

int coli_tok_is_eog(const struct coli_tokenizer *t, int32_t id) {
    if (id < 0) return 0;
    int32_t lo = 0, hi = t->n_eog;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (t->eog[mid] == id) return 1;
        if (t->eog[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}
