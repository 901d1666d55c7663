/* engine.h — the colibri_engine object: one opened model and its run state. */
#ifndef COLI_ENGINE_H
#define COLI_ENGINE_H

#include <pthread.h>

#include "../include/colibri.h"
#include "draft.h"
#include "gguf.h"
#include "kv.h"
#include "model.h"
#include "sample.h"

struct coli_tokenizer;

/* The engine's totals at one moment: what a turn's record subtracts. */
typedef struct {
    double at, forward_s, attention_s, ffn_s, lm_head_s, wait_s, disk_s, linear_s;
    uint64_t bytes_read, forwards, hits, misses, predicted, predicted_right;
} coli_totals;

/* Routing heat and the per-turn ring (stats.c); guarded by mu, since
 * colibri_stats may be called from another thread while the engine steps. */
typedef struct {
    pthread_mutex_t mu;
    uint64_t seq, tokens_prompt, tokens_generated;
    uint64_t draft_steps, draft_tokens, draft_accepted; /* slot steps that verified a draft; its tokens; kept */
    double forward_s, attention_s, ffn_s, lm_head_s, linear_s;
    uint32_t *counts;        /* [n_layer * n_expert] */
    float *heat;             /* [n_layer * n_expert] */
    uint8_t *last_hits;      /* [n_layer * n_expert] */
    uint32_t *co_same;       /* [n_layer][n_expert][n_expert]: tokens routed to both (NULL: not measured) */
    uint32_t *co_next;       /* [n_layer][n_expert][n_expert]: e1 in layer il and e2 in layer il + 1 */
    uint64_t co_tokens;
    colibri_turn ring[COLI_MAX_TURNS];
    int ring_len, ring_next;
    uint64_t turn_id;
} coli_stats_book;

#define COLI_RS_CKPT_MAX 64 /* the most recurrent-state checkpoints a slot keeps (COLI_RS_CHECKPOINTS) */

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
    int32_t drafted[COLI_DRAFT_MAX]; /* guesses at the tokens after pending, evaluated with it (draft.h) */
    coli_draft_state draft;
    int n_drafted, n_accepted; /* this request's drafted tokens, and those kept */
    /* the model's MTP block (mtp.h): its cache, the trunk's final normed rows at positions mtp_at .. mtp_at +
     * mtp_rows - 1 not yet through it ([1 + COLI_DRAFT_MAX][n_embd]), the drafts it made for this step in
     * drafted[0 .. n_ready - 1], and how many to make next */
    coli_kv mtp_kv;
    float *mtp_h;
    int mtp_at, mtp_rows, n_ready, mtp_want;
    int mtp_skip, mtp_backoff; /* steps left without the block's guesses, and the next such wait */
    float *rs_snap;          /* Gated DeltaNet models that draft: the recurrent state after each of a verify's rows
                              * but its last, draft_k copies (slots.c take_back) */
    coli_kv dm_kv;           /* the draft model's cache (draft_model.h), holding positions < dm_n */
    int dm_n;
    double prefill_s, decode_s;
    float *echo_lp;          /* [n_prompt] with echo */
    int32_t *echo_ids;       /* [n_prompt][n_logprobs] */
    float *echo_top;         /* [n_prompt][n_logprobs] */
    int echo_cap;            /* positions the echo arrays hold */
    coli_totals turn_start;  /* the engine's totals when this request was submitted */
    float *prompt_logits;    /* [n_vocab]: logits after the last prefilled prompt, so the same */
    int prompt_logits_n;     /* prompt again (all cached) samples from the same bits; 0: none */
    /* Gated DeltaNet models: checkpoints of the recurrent state along the cached tokens (slots.c), so a prompt
     * that branches off inside the history restores the newest one at or before the branch and prefills only
     * the rest; ck_pos[i] the tokens checkpoint i holds (0: empty), ck_rs[i] its state (as kv.rs), malloc'ed
     * on first use */
    int ck_pos[COLI_RS_CKPT_MAX];
    float *ck_rs[COLI_RS_CKPT_MAX];
} coli_slot;

struct colibri_engine {
    colibri_config cfg;            /* as opened, defaults filled in */
    gguf_file *gguf;               /* owned */
    struct coli_tokenizer *tok;    /* owned */
    bool loaded;                   /* model and state ready (not vocab_only) */
    coli_model model;
    coli_state state;
    struct coli_expert_store *experts; /* MoE models only */
    coli_stats_book stats;
    coli_slot *slots;              /* [n_slots] */
    coli_row *rows;                /* [n_batch]: the rows of a forward batch */
    int next_prefill;              /* round robin among prefilling slots */
    int draft_k;                   /* tokens drafted per decode step and slot; 0: none (draft.h) */
    coli_draft_costs draft_costs;  /* decode steps' seconds by row count, for the drafts' plan */
    coli_model *mtp;               /* the MTP block as a one-layer model (mtp.h); NULL: drafts by prompt lookup */
    coli_state mtp_state;
    struct coli_expert_store *mtp_experts;
    coli_row *mtp_rows;            /* [n_batch] the block's forward batch */
    float *mtp_hid;                /* [n_batch][n_embd] the hidden states its rows read */
    float *mtp_chain;              /* [n_slots][n_embd] each slot's last output of the block, for a chained row */
    gguf_file *dm_gguf;            /* a draft model (draft_model.h); NULL: none */
    coli_model *dm;
    coli_state dm_state;
    struct coli_expert_store *dm_experts;
    coli_row *dm_rows;             /* [n_batch] its forward batch */
    int rs_ckpt_n;                 /* Gated DeltaNet: recurrent-state checkpoints per slot (COLI_RS_CHECKPOINTS) */
    int rs_ckpt_every;             /* ... taken every this many prompt tokens (COLI_RS_CHECKPOINT_EVERY) */
    int64_t repacked_bytes;        /* weights rewritten into 16-row tiles at load (repack.h) */
    uint64_t model_id;
    char model_id_hex[17];
    const float *last_logits;      /* what colibri_sample reads */
    coli_rng rng;
    float *sample_p;               /* n_vocab: sampling scratch */
    int32_t *sample_i;             /* n_vocab */
};

/* slots.c: the recurrent-state checkpoints of a Gated DeltaNet model's slot */
void coli_slot_checkpoint(colibri_engine *e, coli_slot *sl);   /* of the state where it stands now */
void coli_slot_drop_checkpoints(coli_slot *sl, int pos);       /* those holding more than pos tokens */
void coli_slot_free_checkpoints(coli_slot *sl);
/* The newest checkpoint holding at most pos tokens into the slot's state; returns its tokens, 0 when there is
 * none (the state is left alone: a row at position 0 restarts it). */
int coli_slot_restore_checkpoint(coli_slot *sl, int pos);

/* slots.c: the most tokens slot sl may draft now: k, within what its request may still emit and a context of
 * n_ctx positions holds (0: none) */
int coli_draft_room(const coli_slot *sl, int k, int n_ctx);
/* slots.c: a drafter's seconds for the n slots who[] it drafted for: their decode time, and the plan's cost of
 * a drafted token */
void coli_drafts_made(colibri_engine *e, const int *who, int n, double seconds, double upkeep_s);

/* stats.c */
int coli_stats_init(colibri_engine *e);
void coli_stats_free(colibri_engine *e);
/* After each forward pass: its count and the phases' times. */
void coli_stats_forward(colibri_engine *e);
/* Then, for its n rows (prompt rows or generated ones): tokens and routing heat. kept: NULL, or which rows
 * count (a decode step's rows of rejected drafts do not: the tokens and the experts that fired for the
 * text are those of the rows kept). */
void coli_stats_rows(colibri_engine *e, int n, bool generated, const uint8_t *kept);
/* After a decode step that verified drafts. */
void coli_stats_drafts(colibri_engine *e, int steps, int drafted, int accepted);
void coli_turn_begin(colibri_engine *e, int slot);
void coli_turn_end(colibri_engine *e, int slot, int finish);

#endif
