/* stats.c — what the dashboard and /metrics read: routing heat per expert,
 * tiers, phase times, and a ring of the last turns' records. The engine
 * thread updates it once per forward pass under a mutex; readers copy. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "clock.h"
#include "error.h"
#include "experts.h"

#define HEAT_DECAY 0.96f /* per forward pass: an expert routed every step settles near 25 */
#define CO_MAX_EXPERTS 256 /* co-routing is counted up to this many experts per layer (E^2 per layer) */

static size_t n_cells(const colibri_engine *e) { return (size_t)e->model.hp.n_layer * (size_t)e->model.hp.n_expert; }

int coli_stats_init(colibri_engine *e) {
    coli_stats_book *b = &e->stats;
    pthread_mutex_init(&b->mu, NULL);
    const size_t n = n_cells(e) + 1;
    b->counts = calloc(n, sizeof *b->counts);
    b->heat = calloc(n, sizeof *b->heat);
    b->last_hits = calloc(n, 1);
    if (!b->counts || !b->heat || !b->last_hits) return coli_fail(COLI_E_NOMEM, "out of memory");
    const size_t E = (size_t)e->model.hp.n_expert;
    if (E > 0 && E <= CO_MAX_EXPERTS) { /* optional: without it the Explore map says "not measured" */
        b->co_same = calloc((size_t)e->model.hp.n_layer * E * E, sizeof *b->co_same);
        b->co_next = calloc((size_t)e->model.hp.n_layer * E * E, sizeof *b->co_next);
        if (!b->co_same || !b->co_next) {
            free(b->co_same);
            free(b->co_next);
            b->co_same = b->co_next = NULL;
        }
    }
    return 0;
}

void coli_stats_free(colibri_engine *e) {
    coli_stats_book *b = &e->stats;
    if (!b->counts && !b->heat) return;
    free(b->counts);
    free(b->heat);
    free(b->last_hits);
    free(b->co_same);
    free(b->co_next);
    pthread_mutex_destroy(&b->mu);
}

/* One token's pairs: experts it used together in layer il, and with layer il + 1. */
static void co_route(coli_stats_book *b, const coli_hparams *hp, const coli_layer *layers, const int32_t *row, int il) {
    const size_t E = (size_t)hp->n_expert;
    const int K = hp->n_expert_used;
    const int32_t *a = row + (size_t)il * K;
    uint32_t *same = b->co_same + (size_t)il * E * E;
    for (int x = 0; x < K; x++)
        for (int y = 0; y < K; y++)
            if (x != y) same[(size_t)a[x] * E + a[y]]++;
    if (il + 1 < hp->n_layer && layers[il + 1].is_moe) {
        const int32_t *nb = row + (size_t)(il + 1) * K;
        uint32_t *next = b->co_next + (size_t)il * E * E;
        for (int x = 0; x < K; x++)
            for (int y = 0; y < K; y++) next[(size_t)a[x] * E + nb[y]]++;
    }
}

void coli_stats_forward(colibri_engine *e) {
    coli_stats_book *b = &e->stats;
    const coli_state *s = &e->state;
    pthread_mutex_lock(&b->mu);
    b->seq++;
    b->forward_s = s->t_forward;
    b->attention_s = s->t_attention;
    b->linear_s = s->t_linear;
    b->ffn_s = s->t_ffn;
    b->lm_head_s = s->t_lm_head;
    pthread_mutex_unlock(&b->mu);
}

void coli_stats_rows(colibri_engine *e, int n, bool generated, const uint8_t *kept) {
    coli_stats_book *b = &e->stats;
    const coli_hparams *hp = &e->model.hp;
    const coli_state *s = &e->state;
    pthread_mutex_lock(&b->mu);
    int n_kept = 0;
    for (int i = 0; i < n; i++) n_kept += !kept || kept[i];
    if (generated) b->tokens_generated += (uint64_t)n_kept;
    else b->tokens_prompt += (uint64_t)n_kept;
    if (hp->n_expert > 0) {
        const size_t cells = n_cells(e);
        const int K = hp->n_expert_used;
        for (size_t c = 0; c < cells; c++) b->heat[c] *= HEAT_DECAY;
        memset(b->last_hits, 0, cells);
        for (int i = 0; i < n; i++) {
            if (kept && !kept[i]) continue;
            for (int il = 0; il < hp->n_layer; il++) {
                if (!e->model.layers[il].is_moe) continue;
                const int32_t *ids = s->route_ids + ((size_t)i * hp->n_layer + il) * K;
                for (int k = 0; k < K; k++) {
                    const size_t c = (size_t)il * hp->n_expert + ids[k];
                    b->counts[c]++;
                    b->heat[c] += 1.0f;
                    b->last_hits[c] = 1;
                }
                if (b->co_same) co_route(b, hp, e->model.layers, s->route_ids + (size_t)i * hp->n_layer * K, il);
            }
        }
        if (b->co_same) b->co_tokens += (uint64_t)n_kept;
    }
    pthread_mutex_unlock(&b->mu);
}

void coli_stats_drafts(colibri_engine *e, int steps, int drafted, int accepted) {
    coli_stats_book *b = &e->stats;
    pthread_mutex_lock(&b->mu);
    b->draft_steps += (uint64_t)steps;
    b->draft_tokens += (uint64_t)drafted;
    b->draft_accepted += (uint64_t)accepted;
    pthread_mutex_unlock(&b->mu);
}

/* The engine's totals now (called on the engine thread). */
static coli_totals totals(colibri_engine *e) {
    coli_totals t = {coli_now_s(), e->state.t_forward, e->state.t_attention, e->state.t_ffn, e->state.t_lm_head, 0, 0,
                     e->state.t_linear, 0, 0, 0, 0, 0, 0};
    pthread_mutex_lock(&e->stats.mu);
    t.forwards = e->stats.seq;
    pthread_mutex_unlock(&e->stats.mu);
    if (e->experts) {
        coli_store_counters c;
        coli_experts_counters(e->experts, &c, NULL);
        t.wait_s = c.wait_s;
        t.disk_s = c.disk_s;
        t.bytes_read = c.bytes_read;
        t.hits = c.hits;
        t.misses = c.misses;
        t.predicted = c.predicted;
        t.predicted_right = c.predicted_right;
    }
    return t;
}

void coli_turn_begin(colibri_engine *e, int slot) { e->slots[slot].turn_start = totals(e); }

static double rate(uint64_t yes, uint64_t all) { return all ? (double)yes / (double)all : NAN; }

void coli_turn_end(colibri_engine *e, int slot, int finish) {
    const coli_slot *sl = &e->slots[slot];
    const coli_totals a = sl->turn_start, z = totals(e);
    colibri_turn t = {0};
    t.slot = slot;
    t.finish = finish;
    t.prompt_tokens = sl->n_prompt;
    t.reused_tokens = sl->n_reused;
    t.completion_tokens = sl->n_gen;
    t.draft_tokens = sl->n_drafted;
    t.draft_accepted = sl->n_accepted;
    t.wall_s = z.at - a.at;
    t.prefill_s = sl->prefill_s;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    t.end_time = (double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec;
    t.linear_attention_s = z.linear_s - a.linear_s;
    t.attention_s = (z.attention_s - a.attention_s) - t.linear_attention_s;
    t.io_wait_s = z.wait_s - a.wait_s;
    t.matmul_s = (z.ffn_s - a.ffn_s) - t.io_wait_s;
    if (t.matmul_s < 0) t.matmul_s = 0;
    t.lm_head_s = z.lm_head_s - a.lm_head_s;
    t.disk_s = z.disk_s - a.disk_s;
    t.other_s = t.wall_s - t.attention_s - t.linear_attention_s - t.matmul_s - t.lm_head_s - t.io_wait_s;
    if (t.other_s < 0) t.other_s = 0;
    t.bytes_read = z.bytes_read - a.bytes_read;
    t.forwards = z.forwards - a.forwards;
    t.cache_hit_rate = rate(z.hits - a.hits, (z.hits - a.hits) + (z.misses - a.misses));
    t.prefetch_hit_rate = rate(z.predicted_right - a.predicted_right, z.predicted - a.predicted);
    coli_stats_book *b = &e->stats;
    pthread_mutex_lock(&b->mu);
    t.id = ++b->turn_id;
    b->ring[b->ring_next] = t;
    b->ring_next = (b->ring_next + 1) % COLI_MAX_TURNS;
    if (b->ring_len < COLI_MAX_TURNS) b->ring_len++;
    pthread_mutex_unlock(&b->mu);
}

int colibri_stats(colibri_engine *e, colibri_stats_t *out, uint8_t *tiers, uint32_t *counts, float *heat,
                  uint8_t *last_hits) {
    if (!e || !out) return coli_fail(COLI_E_ARG, "colibri_stats: no engine or output");
    if (!e->loaded) return coli_fail(COLI_E_STATE, "colibri_stats: the engine was opened with vocab_only");
    memset(out, 0, sizeof *out);
    const coli_hparams *hp = &e->model.hp;
    out->n_layer = hp->n_layer;
    out->n_expert = hp->n_expert;
    if (e->experts) {
        coli_store_counters c;
        coli_experts_counters(e->experts, &c, tiers);
        out->streaming = coli_experts_streaming(e->experts);
        out->io_wait_s = c.wait_s;
        out->disk_s = c.disk_s;
        out->bytes_read = c.bytes_read;
        out->loads = c.loads;
        out->hits = c.hits;
        out->misses = c.misses;
        out->prefetch_issued = c.prefetch_issued;
        out->prefetch_used = c.prefetch_used;
        out->predicted = c.predicted;
        out->predicted_right = c.predicted_right;
        out->cache_bytes = c.cache_bytes;
        out->pinned_bytes = c.pinned_bytes;
        out->n_cached = c.n_cached;
        out->n_pinned = c.n_pinned;
    }
    coli_stats_book *b = &e->stats;
    const size_t cells = n_cells(e);
    pthread_mutex_lock(&b->mu);
    out->seq = b->seq;
    out->turns = b->turn_id;
    out->tokens_prompt = b->tokens_prompt;
    out->tokens_generated = b->tokens_generated;
    out->draft_steps = b->draft_steps;
    out->draft_tokens = b->draft_tokens;
    out->draft_accepted = b->draft_accepted;
    out->forward_s = b->forward_s;
    out->attention_s = b->attention_s - b->linear_s;
    out->linear_attention_s = b->linear_s;
    out->matmul_s = b->ffn_s - out->io_wait_s > 0 ? b->ffn_s - out->io_wait_s : 0;
    out->lm_head_s = b->lm_head_s;
    if (counts) memcpy(counts, b->counts, cells * sizeof *counts);
    if (heat) memcpy(heat, b->heat, cells * sizeof *heat);
    if (last_hits) memcpy(last_hits, b->last_hits, cells);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

int colibri_turns(colibri_engine *e, colibri_turn *out, int cap) {
    if (!e || (!out && cap > 0) || cap < 0) return coli_fail(COLI_E_ARG, "colibri_turns: bad arguments");
    coli_stats_book *b = &e->stats;
    if (!e->loaded) return 0;
    pthread_mutex_lock(&b->mu);
    const int n = b->ring_len < cap ? b->ring_len : cap;
    const int first = (b->ring_next - b->ring_len + COLI_MAX_TURNS) % COLI_MAX_TURNS + (b->ring_len - n);
    for (int i = 0; i < n; i++) out[i] = b->ring[(first + i) % COLI_MAX_TURNS];
    pthread_mutex_unlock(&b->mu);
    return n;
}

int colibri_pin_experts(colibri_engine *e, const uint32_t *counts) {
    if (!e || !counts) return coli_fail(COLI_E_ARG, "colibri_pin_experts: no engine or counts");
    if (!e->loaded || !e->experts) return 0;
    return coli_experts_pin(e->experts, counts);
}

/* For every expert, its k strongest co-routing partners in its layer and the
 * two neighbouring ones: partner cells (il * n_expert + e) and token counts,
 * strongest first, UINT32_MAX / 0 padding. Returns tokens observed, 0 when
 * co-routing is not measured (more than CO_MAX_EXPERTS experts). */
int64_t colibri_coroute(colibri_engine *e, int k, uint32_t *nbr, uint32_t *weight) {
    if (!e || k <= 0 || k > 64 || !nbr || !weight) return coli_fail(COLI_E_ARG, "colibri_coroute: bad arguments");
    if (!e->loaded) return 0;
    coli_stats_book *b = &e->stats;
    const int L = e->model.hp.n_layer, E = e->model.hp.n_expert;
    const size_t cells = (size_t)L * E;
    for (size_t i = 0; i < cells * (size_t)k; i++) {
        nbr[i] = UINT32_MAX;
        weight[i] = 0;
    }
    if (!b->co_same) return 0;
    pthread_mutex_lock(&b->mu);
    const uint64_t tokens = b->co_tokens;
    for (int il = 0; il < L; il++)
        for (int x = 0; x < E; x++) {
            uint32_t *tn = nbr + ((size_t)il * E + x) * k, *tw = weight + ((size_t)il * E + x) * k;
            for (int src = 0; src < 3; src++) { /* same layer, next layer, previous layer */
                const int jl = src == 0 ? il : src == 1 ? il + 1 : il - 1;
                if (jl < 0 || jl >= L || (src == 1 && !e->model.layers[il].is_moe)) continue;
                for (int y = 0; y < E; y++) {
                    uint32_t w;
                    if (src == 0) w = b->co_same[((size_t)il * E + x) * E + y];
                    else if (src == 1) w = b->co_next[((size_t)il * E + x) * E + y];
                    else w = b->co_next[((size_t)jl * E + y) * E + x];
                    if (w == 0 || tw[k - 1] >= w) continue;
                    int j = k - 1; /* insertion into the sorted top k */
                    while (j > 0 && tw[j - 1] < w) {
                        tw[j] = tw[j - 1];
                        tn[j] = tn[j - 1];
                        j--;
                    }
                    tw[j] = w;
                    tn[j] = (uint32_t)((size_t)jl * E + y);
                }
            }
        }
    pthread_mutex_unlock(&b->mu);
    return (int64_t)tokens;
}
