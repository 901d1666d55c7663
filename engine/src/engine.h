/* engine.h — the colibri_engine object: one opened model and its run state. */
#ifndef COLI_ENGINE_H
#define COLI_ENGINE_H

#include "../include/colibri.h"
#include "gguf.h"
#include "model.h"
#include "sample.h"

struct coli_tokenizer;

struct colibri_engine {
    colibri_config cfg;            /* as opened, defaults filled in */
    gguf_file *gguf;               /* owned */
    struct coli_tokenizer *tok;    /* owned */
    bool loaded;                   /* model and state ready (not vocab_only) */
    coli_model model;
    coli_state state;
    coli_rng rng;
    float *sample_p;               /* n_vocab: sampling scratch */
    int32_t *sample_i;             /* n_vocab */
};

#endif
