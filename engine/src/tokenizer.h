/* tokenizer.h — the vocabulary of a GGUF model and its two tokenizers, made to
 * give llama.cpp's tokens for the same text, token for token:
 *   - SentencePiece-style BPE over scores with byte fallback
 *     (tokenizer.ggml.model = "llama": Llama 2, Gemma, ...);
 *   - GPT-2 byte-level BPE over ranked merges, after a pre-tokenizer chosen
 *     by tokenizer.ggml.pre (tokenizer.ggml.model = "gpt2");
 *   - SentencePiece-style BPE over ranked merges: spaces as U+2581, raw UTF-8
 *     with <0xXX> byte fallback, lines apart (tokenizer.ggml.model = "gemma4",
 *     and the pre-tokenizers gemma4 / granite-embed-multi-311m / sarvam-moe).
 * Read-only once loaded: any number of threads may tokenize at once.
 *
 * Split: tokenizer.c loads and checks the vocabulary, tokenizer_encode.c turns
 * text into tokens and tokens into bytes, tokenizer_pre.c holds the BPE
 * pre-tokenizers, tokenizer_api.c the public colibri_* functions. */
#ifndef COLI_TOKENIZER_H
#define COLI_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "tokenizer_pre.h"

#define COLI_TOKEN_NULL (-1)

enum coli_vocab_type {
    COLI_VOCAB_SPM = 1,  /* "llama" */
    COLI_VOCAB_BPE = 2,  /* "gpt2", "gemma4" */
};

/* Token attributes, as llama.cpp derives them (llama_token_attr). The file's
 * token type sets one; loading adds CONTROL/UNUSED to some by their text. */
enum {
    COLI_ATTR_UNDEFINED = 0,
    COLI_ATTR_UNKNOWN = 1 << 0,
    COLI_ATTR_UNUSED = 1 << 1,
    COLI_ATTR_NORMAL = 1 << 2,
    COLI_ATTR_CONTROL = 1 << 3,
    COLI_ATTR_USER_DEFINED = 1 << 4,
    COLI_ATTR_BYTE = 1 << 5,
    COLI_ATTR_LSTRIP = 1 << 7,  /* matched in text: drops the whitespace before it */
    COLI_ATTR_RSTRIP = 1 << 8,  /* matched in text: drops the whitespace after it */
};

/* One node of the byte trie over special-token texts. */
typedef struct {
    int32_t child;    /* first child node, -1 if none */
    int32_t sibling;  /* next node with the same parent, -1 if none */
    int32_t rank;     /* special token ending here (index into special[]), -1 if none */
    uint8_t byte;
} coli_trie_node;

struct coli_tokenizer {
    /* ---- what the file says, checked ---- */
    int type;                      /* enum coli_vocab_type */
    int32_t n_tokens;
    char *arena;                   /* token texts, back to back (owned) */
    uint32_t *tok_off;             /* (n_tokens + 1) text of token i = arena[tok_off[i] .. tok_off[i+1]) */
    float *score;                  /* (n_tokens) SPM merge priority; 0 when the file has none */
    uint8_t *file_type;            /* (n_tokens) tokenizer.ggml.token_type, 1 when absent */
    uint16_t *attr;                /* (n_tokens) COLI_ATTR_* */
    int32_t max_token_len;

    /* ---- text -> id ---- */
    int32_t *hash;                 /* (hash_mask + 1) token ids by text, -1 empty */
    uint32_t hash_mask;

    /* ---- BPE merges: (left, right) -> rank ---- */
    int32_t n_merges;
    char *merge_arena;             /* merge strings "left right", back to back (owned) */
    uint32_t *merge_off;           /* (n_merges + 1) */
    uint32_t *merge_split;         /* (n_merges) offset of the space inside merge i */
    int32_t *merge_hash;           /* (merge_mask + 1) merge ranks, -1 empty */
    uint32_t merge_mask;

    /* ---- pre-tokenizer (BPE) ---- */
    enum coli_pre_stage stages[COLI_PRE_MAX_STAGES];
    int n_stages;
    int ignore_merges;             /* a whole pre-token that is a token is kept as is */
    int merges_optional;           /* the pre-tokenizer works without merges (Kimi K2) */
    int spm_style;                 /* spaces are U+2581 and text stays raw UTF-8, bytes as <0xXX> (gemma4) */
    int newline_runs_whole;        /* a run of line feeds that is a token is kept whole (gemma4) */

    /* ---- special tokens, matched in the text before tokenizing ---- */
    int32_t n_special;
    int32_t *special;              /* (n_special) ids: control, user-defined, unknown; longest first */
    coli_trie_node *trie;          /* (n_trie) */
    int32_t n_trie;
    int32_t trie_root[256];        /* first-level node per byte, -1 if none */

    /* ---- byte fallback ---- */
    int32_t byte_token[256];       /* SPM: <0xXX> (or the byte itself); BPE: the byte as a 1-byte token
                                      (<0xXX> where spm_style) */
    uint8_t gpt2_enc[256][3];      /* BPE: UTF-8 of the code point standing for byte b ([2]: its length) */
    int16_t gpt2_dec[0x144];       /* BPE: the byte a code point < U+0144 stands for, -1 if none */

    /* ---- special ids and flags ---- */
    int32_t bos, eos, eot, eom, unk, pad;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    int add_bos, add_eos, add_space_prefix;
    int force_bos;                 /* BOS added even where the file's add_bos_token is false (gemma4) */
    int32_t *eog;                  /* (n_eog) end-of-generation ids, ascending */
    int32_t n_eog;
};

struct coli_tokenizer *coli_tokenizer_load(gguf_file *f);  /* NULL with the error set */
void coli_tokenizer_free(struct coli_tokenizer *t);

/* Token id by exact text, or COLI_TOKEN_NULL. */
int32_t coli_tok_find(const struct coli_tokenizer *t, const char *s, size_t n);
/* Rank of the merge (left, right), or -1. */
int32_t coli_tok_merge_rank(const struct coli_tokenizer *t, const char *l, size_t nl, const char *r, size_t nr);

static inline const char *coli_tok_text(const struct coli_tokenizer *t, int32_t id, size_t *len) {
    *len = t->tok_off[id + 1] - t->tok_off[id];
    return t->arena + t->tok_off[id];
}

/* Tokenize (tokenizer_encode.c). add_bos: -1 as the file says (BOS per
 * add_bos_token, EOS per add_eos_token), 0 neither, 1 BOS always and EOS per
 * the file. Writes min(count, cap) ids, returns the count or < 0 on error. */
int coli_tok_tokenize(const struct coli_tokenizer *t, const char *text, size_t n, int add_bos,
                      int parse_special, int32_t *out, int cap);
/* Bytes of one token; returns the full length (like snprintf), < 0 on error. */
int coli_tok_piece(const struct coli_tokenizer *t, int32_t id, int special, char *out, int cap);
int coli_tok_is_eog(const struct coli_tokenizer *t, int32_t id);

#endif
