/* engine.h — the colibri_engine object: one opened model and its run state. */
#ifndef COLI_ENGINE_H
#define COLI_ENGINE_H

#include "../include/colibri.h"
#include "gguf.h"
#include "kv.h"
#include "model.h"
#include "sample.h"

struct coli_tokenizer;

/* One conversation: its cache, history and the request it serves. */
typedef struct {
    coli_kv kv;
    int32_t *hist;           /* [n_ctx]: tokens of the cache, then the prompt still to prefill */
    int n_past;              /* positions cached */
    int state;               /* COLI_SLOT_* */
    bool cancel;
    colibri_request req;
    coli_rng rng;
    int n_prompt, n_reused, n_gen, finish;
    int32_t pending;         /* sampled, to be evaluated by the next decode step */
    double prefill_s, decode_s;
    float *echo_lp;          /* [n_prompt] with echo */
    int32_t *echo_ids;       /* [n_prompt][n_logprobs] */
    float *echo_top;         /* [n_prompt][n_logprobs] */
    int echo_cap;            /* positions the echo arrays hold */
    float *prompt_logits;    /* [n_vocab]: logits after the last prefilled prompt, so the same */
    int prompt_logits_n;     /* prompt again (all cached) samples from the same bits; 0: none */
} coli_slot;

struct colibri_engine {
    colibri_config cfg;            /* as opened, defaults filled in */
    gguf_file *gguf;               /* owned */
    struct coli_tokenizer *tok;    /* owned */
    bool loaded;                   /* model and state ready (not vocab_only) */
    coli_model model;
    coli_state state;
    coli_slot *slots;              /* [n_slots] */
    coli_row *rows;                /* [n_batch]: the rows of a forward batch */
    int next_prefill;              /* round robin among prefilling slots */
    uint64_t model_id;
    char model_id_hex[17];
    const float *last_logits;      /* what colibri_sample reads */
    coli_rng rng;
    float *sample_p;               /* n_vocab: sampling scratch */
    int32_t *sample_i;             /* n_vocab */
};

#endif
