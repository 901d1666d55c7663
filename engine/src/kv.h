/* kv.h — saving and restoring one sequence's KV cache (coli_kv, model.h). */
#ifndef COLI_KV_H
#define COLI_KV_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Streaming checksum (seed with any constant; same chunks, same value). */
uint64_t coli_hash64(uint64_t h, const void *data, size_t n);

/* A Gated DeltaNet slot's recurrent-state checkpoints (slots.c): n of them, pos[i] the tokens checkpoint i
 * holds (1..n_tokens), rs[i] its state (n_rs_layers * (rs_conv + rs_ssm) floats). On load, cap entries of
 * room: the newest cap of the file's are kept, into rs[i] (malloc'ed where NULL). */
typedef struct {
    int n, cap;
    int *pos;
    float **rs;
} coli_kv_ckpts;

/* Writes tokens[0..n) and their cached K/V (and ck's checkpoints, may be NULL) to path crash-safe: a
 * temporary file, fsync, rename, fsync of the directory. */
int coli_kv_save(const coli_kv *kv, uint64_t model_id, const int32_t *tokens, int n_tokens, const coli_kv_ckpts *ck,
                 const char *path);

/* Reads a file written by coli_kv_save for the same model into kv and tokens
 * (room for kv->n_ctx). Returns the token count, or a named error (missing,
 * truncated, corrupt, not_gguf for a foreign file, unsupported for another
 * model's, too_long when it holds more than the context); on error the
 * caller must treat the cache as empty. */
int coli_kv_load(coli_kv *kv, uint64_t model_id, int32_t *tokens, coli_kv_ckpts *ck, const char *path);

#endif
