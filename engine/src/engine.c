/* engine.c — colibri_open/colibri_close: the lifetime of one loaded model. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "error.h"

void colibri_config_default(colibri_config *cfg) {
    if (cfg) memset(cfg, 0, sizeof *cfg);
}

colibri_engine *colibri_open(const colibri_config *cfg) {
    coli_clear_error();
    if (!cfg || !cfg->model_path) {
        coli_fail(COLI_E_ARG, "colibri_open: no model path given");
        return NULL;
    }
    if (cfg->n_threads < 0 || cfg->n_ctx < 0 || cfg->n_slots < 0 || cfg->n_batch < 0) {
        coli_fail(COLI_E_ARG, "colibri_open: negative n_threads, n_ctx, n_slots or n_batch");
        return NULL;
    }
    colibri_engine *e = calloc(1, sizeof *e);
    if (!e) {
        coli_fail(COLI_E_NOMEM, "colibri_open: out of memory");
        return NULL;
    }
    e->cfg = *cfg;
    e->cfg.model_path = NULL; /* the caller's string; not kept */
    e->gguf = gguf_open(cfg->model_path);
    if (!e->gguf) goto fail;
    /* the tokenizer (engine/src/tokenizer.c) is loaded here: coli_tokenizer_load(e->gguf) */
    if (!cfg->vocab_only) {
        coli_fail(COLI_E_UNSUPPORTED, "inference is not built yet: open with vocab_only");
        goto fail;
    }
    return e;
fail:
    colibri_close(e);
    return NULL;
}

void colibri_close(colibri_engine *e) {
    if (!e) return;
    /* coli_tokenizer_free(e->tok) */
    gguf_close(e->gguf);
    free(e);
}

int64_t colibri_model_info(colibri_engine *e, char *out, size_t cap) {
    if (!e) return coli_fail(COLI_E_ARG, "colibri_model_info: no engine");
    return colibri_gguf_describe((const colibri_gguf *)e->gguf, out, cap);
}
