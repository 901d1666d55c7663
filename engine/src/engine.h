/* engine.h — the colibri_engine object: one opened model and its run state. */
#ifndef COLI_ENGINE_H
#define COLI_ENGINE_H

#include "../include/colibri.h"
#include "gguf.h"

struct coli_tokenizer;

struct colibri_engine {
    colibri_config cfg;            /* as opened, defaults filled in */
    gguf_file *gguf;               /* owned */
    struct coli_tokenizer *tok;    /* owned */
};

#endif
