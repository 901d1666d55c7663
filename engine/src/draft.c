/* draft.c — drafts for speculative decoding, and how many to verify (draft.h).
 *
 * Prompt lookup: the text a model writes often repeats what it has read (code it edits, names, quoted
 * lines), so the tokens that followed the latest earlier occurrence of the sequence's last few tokens are
 * a free guess at the next ones. */
#include "draft.h"

#define NGRAM_MAX 4     /* the longest suffix looked up */
#define NGRAM_MIN 2     /* the shortest: one token matches too often by chance */
#define KEEP_DECAY 0.9f /* a slot's acceptance counts, per verify: about the last ten drafts weigh */
#define IDLE_DECAY 0.97f /* per step it found drafts but verified none */
#define COST_WEIGHT 0.2 /* a new step's weight in its row count's average */

int coli_draft_lookup(const int32_t *seq, int n, int32_t *out, int k) {
    if (k <= 0 || n < NGRAM_MIN + 1) return 0;
    for (int m = NGRAM_MAX; m >= NGRAM_MIN; m--) {
        if (m >= n) continue;
        const int32_t *tail = seq + n - m;
        /* the latest earlier occurrence: its continuation is the most recent context */
        for (int at = n - m - 1; at >= 0; at--) {
            int j = 0;
            while (j < m && seq[at + j] == tail[j]) j++;
            if (j < m) continue;
            int got = 0;
            for (int p = at + m; p < n && got < k; p++) out[got++] = seq[p];
            return got;
        }
    }
    return 0;
}

static float acceptance(const coli_draft_state *d) { return (d->kept + 0.5f) / (d->judged + 1.0f); }

/* Seconds for a step of r rows: measured, else between the nearest measured counts; below the fewest
 * measured, in proportion to the rows (a slot that drafted from the start learns what one row costs);
 * above the most, along the slope between the fewest and the most, flat while one count is measured
 * (so a larger draft gets tried); 1 while nothing is. */
static double cost_of(const coli_draft_costs *c, int r) {
    if (c->seen[r]) return c->s[r];
    int lo = r - 1, hi = r + 1;
    while (lo >= 1 && !c->seen[lo]) lo--;
    while (hi <= COLI_DRAFT_ROWS && !c->seen[hi]) hi++;
    if (lo >= 1 && hi <= COLI_DRAFT_ROWS) return c->s[lo] + (c->s[hi] - c->s[lo]) * (r - lo) / (hi - lo);
    if (hi <= COLI_DRAFT_ROWS) return c->s[hi] * r / hi;
    if (lo < 1) return 1.0;
    int first = 1;
    while (!c->seen[first]) first++;
    const double slope = lo > first ? (c->s[lo] - c->s[first]) / (lo - first) : 0.0;
    return c->s[lo] + (slope > 0 ? slope : 0) * (r - lo);
}

void coli_draft_plan(const coli_draft_costs *c, int n_plain, coli_draft_state *const *slots, const int *avail,
                     int n, int *k) {
    double tokens = n_plain + n;
    int rows = n_plain + n, drafted = 0; /* a drafted token the step verifies costs its drafting too */
    float next[COLI_MAX_SLOTS];
    for (int i = 0; i < n; i++) {
        k[i] = 0;
        next[i] = acceptance(slots[i]); /* the expected gain of slot i's next draft token: a^(k + 1) */
    }
    /* greedily add the run of draft tokens (one slot's next m) that raises tokens per second most, while
     * one does: a run at once, since a measured cost need not rise with every row (noise, kernels that
     * take rows in groups) */
    for (;;) {
        double best_rate = tokens / (cost_of(c, rows) + drafted * c->draft_s) * (1.0 + 1e-6), best_gain = 0.0;
        int best = -1, best_m = 0;
        for (int i = 0; i < n; i++) {
            const float a = acceptance(slots[i]);
            double gain = 0.0, g = next[i];
            for (int m = 1; k[i] + m <= avail[i] && rows + m <= COLI_DRAFT_ROWS; m++, g *= a) {
                gain += g;
                const double rate = (tokens + gain) / (cost_of(c, rows + m) + (drafted + m) * c->draft_s);
                if (rate > best_rate) {
                    best_rate = rate;
                    best = i;
                    best_m = m;
                    best_gain = gain;
                }
            }
        }
        if (best < 0) break;
        tokens += best_gain;
        for (int m = 0; m < best_m; m++) next[best] *= acceptance(slots[best]);
        k[best] += best_m;
        rows += best_m;
        drafted += best_m;
    }
}

void coli_draft_cost(coli_draft_costs *c, int rows, double seconds) {
    if (rows < 1 || rows > COLI_DRAFT_ROWS || !(seconds > 0)) return;
    c->s[rows] = c->seen[rows] ? (1.0 - COST_WEIGHT) * c->s[rows] + COST_WEIGHT * seconds : seconds;
    c->seen[rows] = true;
}

void coli_draft_made(coli_draft_costs *c, int n, double seconds) {
    if (n <= 0 || !(seconds > 0)) return;
    const double per = seconds / n;
    c->draft_s = c->draft_s > 0 ? (1.0 - COST_WEIGHT) * c->draft_s + COST_WEIGHT * per : per;
}

void coli_draft_verified(coli_draft_state *d, int drafted, int accepted) {
    if (drafted <= 0) return;
    d->kept = KEEP_DECAY * d->kept + (float)accepted;
    d->judged = KEEP_DECAY * d->judged + (float)accepted + (accepted < drafted ? 1.0f : 0.0f);
}

void coli_draft_offered(coli_draft_state *d) {
    d->kept *= IDLE_DECAY;
    d->judged *= IDLE_DECAY;
}
