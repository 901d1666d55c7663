/* sample.h — choosing the next token from logits: greedy, temperature, top-k,
 * top-p, with a seedable generator, and the log-probability of the choice. */
#ifndef COLI_SAMPLE_H
#define COLI_SAMPLE_H

#include <stdint.h>

typedef struct {
    uint64_t s[4]; /* xoshiro256** state */
} coli_rng;

void coli_rng_seed(coli_rng *r, uint64_t seed);
double coli_rng_uniform(coli_rng *r); /* [0, 1) */

/* Index of the largest logit (the first on ties, as llama.cpp's greedy sampler). */
int32_t coli_argmax(const float *logits, int n);
/* log-softmax of logits[tok] under the unmodified distribution. */
float coli_logprob(const float *logits, int n, int32_t tok);
/* Log-softmax read-out of one row: returns logits[tok]'s log-prob (NaN for
 * tok < 0) and writes the k most likely tokens and their log-probs, in heap
 * order (not sorted). Non-finite values come out as they are. */
float coli_readout(const float *logits, int n, int32_t tok, int k, int32_t *top_ids, float *top_lp);
/* Sample with temperature (> 0), top_k (0 or >= n: off) and nucleus top_p
 * (0 < top_p <= 1), top-k first as llama.cpp's chain; work needs room for n
 * floats and n ints. */
int32_t coli_sample(const float *logits, int n, float temperature, float top_p, int top_k, coli_rng *rng,
                    float *work_p, int32_t *work_i);

#endif
