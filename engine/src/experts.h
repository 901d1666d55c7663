/* experts.h — where routed experts come from: "give me expert e of layer l".
 *
 * Every access to a routed expert's weights goes through this interface.
 * Two placements, the same bits:
 *   resident   every expert is a view into the file mapping (the page cache
 *              holds what the OS decides);
 *   streaming  experts live on disk and are read with pread into a RAM cache
 *              of a fixed budget: a per-layer cache of expert buffers (LRFU or LRU) filled by
 *              I/O threads, plus experts pinned by learned heat. The page
 *              cache is told to drop what was read (posix_fadvise), or
 *              bypassed (O_DIRECT), so the budget is the real footprint.
 * The forward pass asks for a layer's experts as soon as the router has
 * chosen them (coli_experts_request), computes the ones that are ready while
 * the rest arrive (coli_experts_try_acquire / coli_experts_acquire), and
 * releases them; it also hints the next layer's likely experts (prefetch). */
#ifndef COLI_EXPERTS_H
#define COLI_EXPERTS_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "model.h"

typedef struct coli_expert {
    coli_mat gate; /* n_embd -> n_ff_exp */
    coli_mat up;   /* n_embd -> n_ff_exp */
    coli_mat down; /* n_ff_exp -> n_embd */
} coli_expert;

#include "../include/colibri.h" /* COLI_TIER_* */

typedef struct {
    int64_t cache_bytes;  /* cache budget; 0: every expert resident in the mapping */
    int64_t pin_bytes;    /* experts pinned by heat (on top of the cache) */
    int io_threads;       /* 0: 4 */
    bool direct_io;       /* O_DIRECT reads (falls back to buffered + fadvise where refused) */
    bool prefetch;        /* one-layer-ahead prefetch */
    int policy;           /* COLI_POLICY_*: which entry makes room */
} coli_store_config;

/* Counters of the store since it opened (streaming; zeros when resident). */
typedef struct {
    uint64_t hits, misses;            /* acquisitions found ready / that had to be read */
    uint64_t loads, bytes_read;
    uint64_t prefetch_issued, prefetch_used; /* predicted experts read ahead, and later chosen */
    uint64_t predicted, predicted_right;     /* per chosen expert: was it predicted */
    double disk_s;                    /* I/O service time, summed over the I/O threads */
    double wait_s;                    /* compute blocked on I/O */
    int64_t cache_bytes, pinned_bytes;
    int n_cached, n_pinned;
} coli_store_counters;

typedef struct coli_expert_store coli_expert_store;

coli_expert_store *coli_experts_open(const coli_model *m, const gguf_file *f, const coli_store_config *cfg);
void coli_experts_close(coli_expert_store *st);
bool coli_experts_streaming(const coli_expert_store *st);
/* Experts of a layer the cache can hold at once (n_expert when resident). */
int coli_experts_capacity(const coli_expert_store *st, int il);

/* Start reading the listed experts that are not in RAM (as many as the
 * layer's cache has room for). prefetch marks reads made on a prediction. */
void coli_experts_request(coli_expert_store *st, int il, const int32_t *ids, int n, bool prefetch);
/* The experts a prediction expects layer il to choose next: marked for the
 * prediction hit rate, and read ahead when prefetch is on. */
void coli_experts_predict(coli_expert_store *st, int il, const int32_t *ids, int n);
/* Record the experts chosen for layer il: prediction and prefetch hit rates. */
void coli_experts_chosen(coli_expert_store *st, int il, const int32_t *ids, int n);
/* Take expert e if it is in RAM now (1), else 0. */
int coli_experts_try_acquire(coli_expert_store *st, int il, int e, coli_expert *out);
/* Take expert e, reading it and waiting as needed (0 or a named error). */
int coli_experts_acquire(coli_expert_store *st, int il, int e, coli_expert *out);
/* Take whichever of the n experts ids reaches RAM first (*which: its index in ids), reading one
 * where none is under way; 0 or a named error. For a caller that holds none of the layer's
 * experts: waiting on one the full cache has no room for yet would wait forever, since the
 * entries that fill it are the other experts the caller needs and only it releases them. */
int coli_experts_acquire_any(coli_expert_store *st, int il, const int32_t *ids, int n, int *which, coli_expert *out);
void coli_experts_release(coli_expert_store *st, int il, int e);

/* Load and pin the hottest experts by counts[il * n_expert + e] within the
 * pin budget; returns how many were pinned. */
int coli_experts_pin(coli_expert_store *st, const uint32_t *counts);
/* Counters, and (arrays of n_layer * n_expert, may be NULL) each expert's tier. */
void coli_experts_counters(coli_expert_store *st, coli_store_counters *out, uint8_t *tiers);
/* Bytes of one expert of layer il (gate + up + down). */
uint64_t coli_experts_bytes(const coli_model *m, int il);

#endif
