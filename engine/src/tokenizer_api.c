/* tokenizer_api.c — the public tokenizer functions (colibri.h, TOKENIZER section). */
#include "engine.h"
#include "error.h"
#include "tokenizer.h"

static const struct coli_tokenizer *tok_of(const colibri_engine *e, const char *fn) {
    if (!e || !e->tok) {
        coli_fail(COLI_E_ARG, "%s: no engine", fn);
        return NULL;
    }
    return e->tok;
}

int colibri_n_vocab(const colibri_engine *e) {
    const struct coli_tokenizer *t = tok_of(e, "colibri_n_vocab");
    return t ? t->n_tokens : COLI_E_ARG;
}

int32_t colibri_token_bos(const colibri_engine *e) {
    const struct coli_tokenizer *t = tok_of(e, "colibri_token_bos");
    return t ? t->bos : COLI_TOKEN_NULL;
}

int32_t colibri_token_eos(const colibri_engine *e) {
    const struct coli_tokenizer *t = tok_of(e, "colibri_token_eos");
    return t ? t->eos : COLI_TOKEN_NULL;
}

int32_t colibri_token_eot(const colibri_engine *e) {
    const struct coli_tokenizer *t = tok_of(e, "colibri_token_eot");
    return t ? t->eot : COLI_TOKEN_NULL;
}

int colibri_token_is_eog(const colibri_engine *e, int32_t tok) {
    const struct coli_tokenizer *t = tok_of(e, "colibri_token_is_eog");
    return t ? coli_tok_is_eog(t, tok) : 0;
}

int colibri_token_type(const colibri_engine *e, int32_t tok) {
    const struct coli_tokenizer *t = tok_of(e, "colibri_token_type");
    if (!t) return COLI_E_ARG;
    if (tok < 0 || tok >= t->n_tokens)
        return coli_fail(COLI_E_ARG, "colibri_token_type: token %d is outside the vocabulary (%d tokens)", (int)tok,
                         (int)t->n_tokens);
    return t->file_type[tok];
}

int colibri_tokenize(colibri_engine *e, const char *text, size_t n, int add_bos, int parse_special, int32_t *out,
                     int cap) {
    const struct coli_tokenizer *t = tok_of(e, "colibri_tokenize");
    if (!t) return COLI_E_ARG;
    return coli_tok_tokenize(t, text, n, add_bos, parse_special, out, cap);
}

int colibri_token_bytes(const colibri_engine *e, int32_t tok, int special, char *out, int cap) {
    const struct coli_tokenizer *t = tok_of(e, "colibri_token_bytes");
    if (!t) return COLI_E_ARG;
    return coli_tok_piece(t, tok, special, out, cap);
}
