#include <math.h>

#include "sample.h"
#include "kernels.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void coli_rng_seed(coli_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(coli_rng *r) {
    uint64_t *s = r->s;
    const uint64_t out = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double coli_rng_uniform(coli_rng *r) { return (double)(next_u64(r) >> 11) * 0x1.0p-53; }

/* The scalar twin of the kernels' argmax: a later logit wins only when strictly greater,
 * so ties keep the first index, a NaN never wins, and a NaN at [0] wins outright. */
int32_t coli_argmax_generic(const float *logits, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

int32_t coli_argmax(const float *logits, int n) { return coli_kernels()->argmax(logits, n); }

float coli_logprob(const float *logits, int n, int32_t tok) {
    float max = logits[coli_argmax(logits, n)];
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - max);
    return (float)((double)logits[tok] - max - log(sum));
}

/* max-heap of indices keyed by p[] */
static void sift_down(int32_t *h, int n, int i, const float *p) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && p[h[l]] > p[h[m]]) m = l;
        if (r < n && p[h[r]] > p[h[m]]) m = r;
        if (m == i) return;
        int32_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* top-k's order: a higher logit first, the lower id on ties (as coli_argmax) */
static int weaker(const float *v, int32_t a, int32_t b) { return v[a] < v[b] || (v[a] == v[b] && a > b); }

/* min-heap of kept ids under that order: the root is the weakest kept */
static void sift_down_weak(int32_t *h, int n, int i, const float *v) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && weaker(v, h[l], h[m])) m = l;
        if (r < n && weaker(v, h[r], h[m])) m = r;
        if (m == i) return;
        int32_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* llama.cpp's top-k sampler (llama_sampler_top_k: the k largest logits, the
 * rest dropped), then its top-p over the survivors' renormalised mass, then a
 * draw among what is left; 0 < k < n */
static int32_t sample_top_k(const float *logits, int n, float temperature, float top_p, int k, coli_rng *rng,
                            float *p, int32_t *ids) {
    for (int i = 0; i < k; i++) ids[i] = i;
    for (int i = k / 2 - 1; i >= 0; i--) sift_down_weak(ids, k, i, logits);
    for (int i = k; i < n; i++)
        if (weaker(logits, ids[0], i)) {
            ids[0] = i;
            sift_down_weak(ids, k, 0, logits);
        }
    for (int size = k - 1; size > 0; size--) { /* heapsort: the weakest go to the back, ids[0] is the best */
        int32_t t = ids[0];
        ids[0] = ids[size];
        ids[size] = t;
        sift_down_weak(ids, size, 0, logits);
    }
    const float max = logits[ids[0]];
    double sum = 0.0;
    for (int j = 0; j < k; j++) {
        p[j] = expf((logits[ids[j]] - max) / temperature);
        sum += p[j];
    }
    int m = k; /* nucleus among the k, best first: the fewest whose mass reaches top_p */
    double kept = sum;
    if (top_p < 1.0f) {
        const double target = (double)top_p * sum;
        kept = 0.0;
        for (m = 0; m < k;) {
            kept += p[m++];
            if (kept >= target) break;
        }
    }
    double u = coli_rng_uniform(rng) * kept, acc = 0.0;
    for (int j = 0; j < m; j++) {
        acc += p[j];
        if (acc > u) return ids[j];
    }
    return ids[0];
}

int32_t coli_sample(const float *logits, int n, float temperature, float top_p, int top_k, coli_rng *rng, float *p,
                    int32_t *heap) {
    if (top_k > 0 && top_k < n) return sample_top_k(logits, n, temperature, top_p, top_k, rng, p, heap);
    const float max = logits[coli_argmax(logits, n)];
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        p[i] = expf((logits[i] - max) / temperature);
        sum += p[i];
    }
    if (top_p >= 1.0f) {
        double u = coli_rng_uniform(rng) * sum, acc = 0.0;
        for (int i = 0; i < n; i++) {
            acc += p[i];
            if (acc > u) return i;
        }
        return coli_argmax(logits, n);
    }
    /* nucleus: pop tokens by probability until their mass reaches top_p, then
     * sample among them; a heap avoids sorting a 262k vocabulary */
    for (int i = 0; i < n; i++) heap[i] = i;
    for (int i = n / 2 - 1; i >= 0; i--) sift_down(heap, n, i, p);
    const double target = (double)top_p * sum;
    double kept = 0.0;
    int size = n, k = 0;
    while (size > 0) {
        int32_t top = heap[0];
        heap[0] = heap[--size];
        sift_down(heap, size, 0, p);
        heap[n - 1 - k++] = top; /* popped tokens collect at the end, best first */
        kept += p[top];
        if (kept >= target) break;
    }
    double u = coli_rng_uniform(rng) * kept, acc = 0.0;
    for (int j = 0; j < k; j++) {
        int32_t t = heap[n - 1 - j];
        acc += p[t];
        if (acc > u) return t;
    }
    return heap[n - 1];
}

/* min-heap of k indices keyed by logits: the root is the weakest kept */
static void sift_down_min(int32_t *h, int n, int i, const float *v) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && v[h[l]] < v[h[m]]) m = l;
        if (r < n && v[h[r]] < v[h[m]]) m = r;
        if (m == i) return;
        int32_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

float coli_readout(const float *logits, int n, int32_t tok, int k, int32_t *top_ids, float *top_lp) {
    const float max = logits[coli_argmax(logits, n)];
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - max);
    const double lse = (double)max + log(sum);
    if (k > n) k = n;
    if (k > 0) {
        for (int i = 0; i < k; i++) top_ids[i] = i;
        for (int i = k / 2 - 1; i >= 0; i--) sift_down_min(top_ids, k, i, logits);
        for (int i = k; i < n; i++)
            if (logits[i] > logits[top_ids[0]]) {
                top_ids[0] = i;
                sift_down_min(top_ids, k, 0, logits);
            }
        for (int i = 0; i < k; i++) top_lp[i] = (float)((double)logits[top_ids[i]] - lse);
    }
    return tok >= 0 ? (float)((double)logits[tok] - lse) : NAN;
}
