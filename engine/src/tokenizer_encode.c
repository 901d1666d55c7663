/* tokenizer_encode.c — text to tokens and tokens to bytes (see tokenizer.h).
 *
 * Follows llama.cpp's llama_vocab::impl::tokenize:
 *   1. special tokens are cut out of the text first (tokenizer_st_partition):
 *      longest token first, each one's leftmost non-overlapping occurrences in
 *      what is still raw text. Control and unknown tokens only when the caller
 *      asks (parse_special); user-defined tokens always.
 *   2. each raw fragment is tokenized on its own: SPM merges the best-scored
 *      adjacent pair until none is a token, then falls back to <0xXX> bytes;
 *      BPE pre-tokenizes, maps bytes to GPT-2's unicode characters, and merges
 *      the lowest-ranked pair inside each piece (gemma4's BPE escapes spaces
 *      as U+2581 first and keeps the UTF-8 as it is).
 * Every call allocates its own scratch, so the tokenizer is shared read-only. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tokenizer.h"

#define MAX_TEXT (1u << 28)  /* bytes per call (256 MiB): keeps every offset and count in 32 bits */

/* ---- growable arrays ---------------------------------------------------- */

typedef struct {
    int32_t *v;
    size_t n, cap;
} ivec;

static int grow(void **v, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need) ncap *= 2;
    void *nv = realloc(*v, ncap * elem);
    if (!nv) return coli_fail(COLI_E_NOMEM, "tokenizer: out of memory");
    *v = nv;
    *cap = ncap;
    return 0;
}

static inline int ivec_push(ivec *a, int32_t x) {
    if (a->n == a->cap && grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v)) return COLI_E_NOMEM;
    a->v[a->n++] = x;
    return 0;
}

typedef struct {
    char *v;
    size_t n, cap;
} cbuf;

static inline int cbuf_put(cbuf *b, const void *p, size_t k) {
    if (b->n + k > b->cap && grow((void **)&b->v, &b->cap, b->n + k, 1)) return COLI_E_NOMEM;
    memcpy(b->v + b->n, p, k);
    b->n += k;
    return 0;
}

/* A piece of the input: a special token, or raw text [off, off + len). */
typedef struct {
    int32_t token;  /* >= 0: special token; -1: raw text */
    uint32_t off, len;
} frag;

typedef struct {
    frag *v;
    size_t n, cap;
} fragvec;

static inline int frag_push(fragvec *a, int32_t token, uint32_t off, uint32_t len) {
    if (a->n == a->cap && grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v)) return COLI_E_NOMEM;
    a->v[a->n++] = (frag){token, off, len};
    return 0;
}

/* A symbol of a word being merged: bytes [off, off + n) of the word; n = 0
 * once merged into its left neighbour. */
typedef struct {
    int32_t prev, next;
    uint32_t off, n;
} sym;

/* A candidate merge of two adjacent symbols. SPM orders by score (higher
 * first), BPE by rank (lower first); ties go to the leftmost pair. */
typedef struct {
    union {
        float score;
        int32_t rank;
    } key;
    int32_t left, right;
    uint32_t size;  /* bytes of the pair when queued: stale if the symbols changed */
} bigram;

typedef struct {
    bigram *v;
    size_t n, cap;
    int spm;  /* 1: max-score heap, 0: min-rank heap */
} heap;

/* Per-call scratch. */
typedef struct {
    sym *syms;
    size_t nsyms, cap_syms;
    heap q;
    cbuf buf;          /* escaped SPM text or byte-encoded BPE word */
    cbuf esc;          /* a BPE fragment with its spaces escaped (spm_style) */
    coli_u32vec cps;   /* code points of a BPE fragment */
    coli_u32vec segs, segs2;
} work;

static void work_free(work *w) {
    free(w->syms);
    free(w->q.v);
    free(w->buf.v);
    free(w->esc.v);
    coli_u32vec_free(&w->cps);
    coli_u32vec_free(&w->segs);
    coli_u32vec_free(&w->segs2);
}

/* ---- the merge queue -------------------------------------------------------
 * A binary heap that moves its elements exactly as libstdc++'s push_heap and
 * pop_heap do under std::priority_queue, with llama.cpp's comparators. With a
 * strict order any heap pops the same sequence; this one also matches when
 * the file's scores hold NaNs, for which the comparison is no order at all. */

/* llama.cpp's comparator: a ranks below b (pops later). */
static inline int below(const heap *h, const bigram *a, const bigram *b) {
    if (h->spm) return a->key.score < b->key.score || (a->key.score == b->key.score && a->left > b->left);
    return a->key.rank > b->key.rank || (a->key.rank == b->key.rank && a->left > b->left);
}

/* libstdc++ __push_heap: sift `x` up from `hole` towards `top`. */
static void sift_up(heap *h, size_t hole, size_t top, bigram x) {
    while (hole > top) {
        size_t parent = (hole - 1) / 2;
        if (!below(h, &h->v[parent], &x)) break;
        h->v[hole] = h->v[parent];
        hole = parent;
    }
    h->v[hole] = x;
}

static int heap_push(heap *h, bigram x) {
    if (h->n == h->cap && grow((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v)) return COLI_E_NOMEM;
    h->n++;
    sift_up(h, h->n - 1, 0, x);
    return 0;
}

/* libstdc++ pop_heap + pop_back: the top out, the last element re-seated by
 * __adjust_heap (down to a leaf along the larger children, then up). */
static bigram heap_pop(heap *h) {
    bigram top = h->v[0];
    size_t len = --h->n;
    if (len == 0) return top;
    bigram x = h->v[len];
    size_t hole = 0, child = 0;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (below(h, &h->v[child], &h->v[child - 1])) child--;
        h->v[hole] = h->v[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        h->v[hole] = h->v[child - 1];
        hole = child - 1;
    }
    sift_up(h, hole, 0, x);
    return top;
}

/* Split s[0..n) into symbols, one per UTF-8 sequence as its lead byte says
 * (the last one cut at the end): invalid bytes are symbols of their own. */
static int split_symbols(work *w, const uint8_t *s, size_t n) {
    static const uint8_t lead_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    w->nsyms = 0;
    if (grow((void **)&w->syms, &w->cap_syms, n, sizeof *w->syms)) return COLI_E_NOMEM;
    size_t off = 0;
    int32_t i = 0;
    while (off < n) {
        size_t len = lead_len[s[off] >> 4];
        if (len > n - off) len = n - off;
        sym *y = &w->syms[w->nsyms++];
        y->off = (uint32_t)off;
        y->n = (uint32_t)len;
        off += len;
        y->prev = i - 1;
        y->next = off == n ? -1 : i + 1;
        i++;
    }
    return 0;
}

/* Merge the pair's right symbol into its left one. */
static inline void merge_pair(work *w, const bigram *b) {
    sym *l = &w->syms[b->left], *r = &w->syms[b->right];
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0) w->syms[r->next].prev = b->left;
}

/* ---- SPM --------------------------------------------------------------------- */

static int spm_try_pair(const struct coli_tokenizer *t, work *w, const char *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    uint32_t size = w->syms[left].n + w->syms[right].n;
    int32_t id = coli_tok_find(t, s + w->syms[left].off, size);
    if (id < 0) return 0;
    bigram b = {.left = left, .right = right, .size = size};
    b.key.score = t->score[id];
    return heap_push(&w->q, b);
}

/* Tokenize one escaped fragment s[0..n) (n > 0): llm_tokenizer_spm_session. */
static int spm_fragment(const struct coli_tokenizer *t, work *w, const char *s, size_t n, ivec *out) {
    if (split_symbols(w, (const uint8_t *)s, n)) return COLI_E_NOMEM;
    w->q.n = 0;
    w->q.spm = 1;
    for (int32_t i = 1; i < (int32_t)w->nsyms; i++)
        if (spm_try_pair(t, w, s, i - 1, i)) return COLI_E_NOMEM;

    /* keep merging the best-scored pair while any is left */
    while (w->q.n) {
        bigram b = heap_pop(&w->q);
        sym *l = &w->syms[b.left], *r = &w->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;  /* stale */
        merge_pair(w, &b);
        if (spm_try_pair(t, w, s, w->syms[b.left].prev, b.left)) return COLI_E_NOMEM;
        if (spm_try_pair(t, w, s, b.left, w->syms[b.left].next)) return COLI_E_NOMEM;
    }

    /* every merged symbol is a token; a lone character may not be: its bytes */
    for (int32_t i = 0; i != -1; i = w->syms[i].next) {
        const sym *y = &w->syms[i];
        int32_t id = coli_tok_find(t, s + y->off, y->n);
        if (id >= 0) {
            if (ivec_push(out, id)) return COLI_E_NOMEM;
            continue;
        }
        for (uint32_t k = 0; k < y->n; k++) {
            int32_t bt = t->byte_token[(uint8_t)s[y->off + k]];
            if (bt < 0) bt = t->unk;  /* llama.cpp throws here: no byte token at all */
            if (bt >= 0 && ivec_push(out, bt)) return COLI_E_NOMEM;
        }
    }
    return 0;
}

/* ---- BPE ---------------------------------------------------------------------- */

static int bpe_try_pair(const struct coli_tokenizer *t, work *w, const char *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    const sym *l = &w->syms[left], *r = &w->syms[right];
    int32_t rank = coli_tok_merge_rank(t, s + l->off, l->n, s + r->off, r->n);
    if (rank < 0) return 0;
    bigram b = {.left = left, .right = right, .size = l->n + r->n};
    b.key.rank = rank;
    return heap_push(&w->q, b);
}

/* One pre-tokenized, byte-encoded word s[0..n): llm_tokenizer_bpe_session. */
static int bpe_word(const struct coli_tokenizer *t, work *w, const char *s, size_t n, ivec *out) {
    if (t->ignore_merges) {
        int32_t id = coli_tok_find(t, s, n);
        if (id >= 0) return ivec_push(out, id);
    } else if (t->newline_runs_whole) {  /* llama.cpp's Gemma 4 fix (its PR 21343) */
        size_t k = 0;
        while (k < n && s[k] == '\n') k++;
        int32_t id = k == n ? coli_tok_find(t, s, n) : COLI_TOKEN_NULL;
        if (id >= 0) return ivec_push(out, id);
    }
    if (split_symbols(w, (const uint8_t *)s, n)) return COLI_E_NOMEM;
    w->q.n = 0;
    w->q.spm = 0;
    for (int32_t i = 1; i < (int32_t)w->nsyms; i++)
        if (bpe_try_pair(t, w, s, i - 1, i)) return COLI_E_NOMEM;
    while (w->q.n) {
        bigram b = heap_pop(&w->q);
        sym *l = &w->syms[b.left], *r = &w->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;  /* stale */
        merge_pair(w, &b);
        if (bpe_try_pair(t, w, s, w->syms[b.left].prev, b.left)) return COLI_E_NOMEM;
        if (bpe_try_pair(t, w, s, b.left, w->syms[b.left].next)) return COLI_E_NOMEM;
    }
    for (size_t i = 0; i < w->nsyms; i++) {
        const sym *y = &w->syms[i];
        if (y->n == 0) continue;
        int32_t id = coli_tok_find(t, s + y->off, y->n);
        if (id >= 0) {
            if (ivec_push(out, id)) return COLI_E_NOMEM;
            continue;
        }
        /* not a token (a merge whose result the vocabulary lacks, or a character
         * without one): each byte of its text that has a byte token (the byte
         * itself, <0xXX> where spm_style), the rest dropped, as llama.cpp */
        for (uint32_t k = 0; k < y->n; k++) {
            int32_t bt = t->byte_token[(uint8_t)s[y->off + k]];
            if (bt >= 0 && ivec_push(out, bt)) return COLI_E_NOMEM;
        }
    }
    return 0;
}

/* Pre-tokenize a raw fragment, then merge each piece. */
static int bpe_fragment(const struct coli_tokenizer *t, work *w, const uint8_t *text, size_t n, ivec *out) {
    w->cps.n = 0;
    if (coli_utf8_decode(text, n, &w->cps)) return COLI_E_NOMEM;
    w->segs.n = 0;
    if (coli_u32vec_reserve(&w->segs, 1)) return COLI_E_NOMEM;
    w->segs.v[w->segs.n++] = (uint32_t)w->cps.n;
    for (int k = 0; k < t->n_stages; k++) {
        if (coli_pre_apply(t->stages[k], w->cps.v, &w->segs, &w->segs2)) return COLI_E_NOMEM;
        coli_u32vec tmp = w->segs;
        w->segs = w->segs2;
        w->segs2 = tmp;
    }
    size_t pos = 0;
    for (size_t i = 0; i < w->segs.n; i++) {
        w->buf.n = 0;
        for (uint32_t k = 0; k < w->segs.v[i]; k++) {
            uint8_t u[4];
            int m = coli_utf8_encode(w->cps.v[pos + k], u);
            if (t->spm_style) {  /* raw UTF-8: the merges and tokens spell text as it is */
                if (cbuf_put(&w->buf, u, (size_t)m)) return COLI_E_NOMEM;
                continue;
            }
            for (int j = 0; j < m; j++)
                if (cbuf_put(&w->buf, t->gpt2_enc[u[j]], t->gpt2_enc[u[j]][2])) return COLI_E_NOMEM;
        }
        pos += w->segs.v[i];
        if (w->buf.n && bpe_word(t, w, w->buf.v, w->buf.n, out)) return COLI_E_NOMEM;
    }
    return 0;
}

/* ---- special tokens in the text ------------------------------------------- */

/* First occurrence of pat[0..m) in s[from..end), or UINT32_MAX. */
static uint32_t find_in(const uint8_t *s, uint32_t from, uint32_t end, const uint8_t *pat, uint32_t m) {
    while (from + m <= end) {
        const uint8_t *p = memchr(s + from, pat[0], end - m + 1 - from);
        if (!p) return UINT32_MAX;
        uint32_t at = (uint32_t)(p - s);
        if (memcmp(p, pat, m) == 0) return at;
        from = at + 1;
    }
    return UINT32_MAX;
}

/* isspace() in the C locale. */
static inline int is_c_space(uint8_t c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static inline int special_enabled(const struct coli_tokenizer *t, int32_t rank, int parse_special) {
    return parse_special || !(t->attr[t->special[rank]] & (COLI_ATTR_CONTROL | COLI_ATTR_UNKNOWN));
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* tokenizer_st_partition: cut special tokens out of text[0..n) into `out`.
 * Only tokens that occur at all are searched for (a trie walk finds them and
 * their first position); each is then applied in priority order exactly as
 * llama.cpp applies every special token. */
static int partition(const struct coli_tokenizer *t, const uint8_t *text, uint32_t n, int parse_special,
                     fragvec *out, fragvec *tmp) {
    out->n = 0;
    if (n == 0) return 0;
    if (frag_push(out, -1, 0, n)) return COLI_E_NOMEM;
    if (t->n_special == 0) return 0;

    uint32_t *first = malloc((size_t)t->n_special * sizeof *first);
    int32_t *present = malloc((size_t)t->n_special * sizeof *present);
    if (!first || !present) {
        free(first);
        free(present);
        return coli_fail(COLI_E_NOMEM, "tokenizer: out of memory");
    }
    int32_t np = 0;
    for (int32_t r = 0; r < t->n_special; r++) first[r] = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        int32_t node = t->trie_root[text[i]];
        uint32_t k = i;
        while (node >= 0) {
            int32_t r = t->trie[node].rank;
            if (r >= 0 && first[r] == UINT32_MAX && special_enabled(t, r, parse_special)) {
                present[np++] = r;
                first[r] = i;
            }
            if (++k >= n) break;
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != text[k]) c = t->trie[c].sibling;
            node = c;
        }
    }
    qsort(present, (size_t)np, sizeof *present, cmp_i32);

    int rc = 0;
    for (int32_t q = 0; q < np && !rc; q++) {
        int32_t r = present[q], id = t->special[r];
        size_t tl;
        const uint8_t *tt = (const uint8_t *)coli_tok_text(t, id, &tl);
        uint32_t m = (uint32_t)tl, fp = first[r];
        tmp->n = 0;
        for (size_t i = 0; i < out->n && !rc; i++) {
            frag f = out->v[i];
            uint32_t end = f.off + f.len;
            if (f.token >= 0 || end < fp + m) {
                rc = frag_push(tmp, f.token, f.off, f.len);
                continue;
            }
            uint16_t attr = t->attr[id];
            uint32_t base = f.off;
            uint32_t at = find_in(text, base > fp ? base : fp, end, tt, m);
            while (at != UINT32_MAX && !rc) {
                uint32_t left = at - base;
                if (attr & COLI_ATTR_LSTRIP)
                    while (left > 0 && is_c_space(text[base + left - 1])) left--;
                if (left > 0) rc = frag_push(tmp, -1, base, left);
                if (!rc) rc = frag_push(tmp, id, 0, 0);
                base = at + m;
                if (attr & COLI_ATTR_RSTRIP)
                    while (base < end && is_c_space(text[base])) base++;
                at = find_in(text, base, end, tt, m);
            }
            if (!rc && base < end) rc = frag_push(tmp, -1, base, end - base);
        }
        fragvec sw = *out;
        *out = *tmp;
        *tmp = sw;
    }
    free(first);
    free(present);
    return rc;
}

/* ---- tokenize -------------------------------------------------------------- */

static int tokenize_all(const struct coli_tokenizer *t, const uint8_t *text, uint32_t n, int add_bos,
                        int parse_special, ivec *res) {
    int want_bos = add_bos == 1 ? 1 : (add_bos < 0 ? t->add_bos : 0);
    int want_eos = add_bos != 0 && t->add_eos;
    if (want_bos && t->bos < 0) return coli_fail(COLI_E_UNSUPPORTED, "tokenize: this vocabulary has no BOS token");

    fragvec frags = {0}, tmp = {0};
    work w = {0};
    int rc = partition(t, text, n, parse_special, &frags, &tmp);
    if (!rc && want_bos) rc = ivec_push(res, t->bos);

    int prev_special = 1;  /* SPM: a space is prefixed to text at the start and after a special token */
    for (size_t i = 0; i < frags.n && !rc; i++) {
        const frag *f = &frags.v[i];
        if (f->token >= 0) {
            rc = ivec_push(res, f->token);
            prev_special = 1;
            continue;
        }
        if (t->type == COLI_VOCAB_SPM) {
            w.buf.n = 0;
            if (t->add_space_prefix && prev_special) rc = cbuf_put(&w.buf, "\xe2\x96\x81", 3);
            for (uint32_t k = 0; k < f->len && !rc; k++) {
                uint8_t c = text[f->off + k];
                rc = c == ' ' ? cbuf_put(&w.buf, "\xe2\x96\x81", 3) : cbuf_put(&w.buf, &c, 1);
            }
            if (!rc) rc = spm_fragment(t, &w, w.buf.v, w.buf.n, res);
            prev_special = 0;
        } else if (t->spm_style) {  /* llama_escape_whitespace first */
            w.esc.n = 0;
            for (uint32_t k = 0; k < f->len && !rc; k++) {
                uint8_t c = text[f->off + k];
                rc = c == ' ' ? cbuf_put(&w.esc, "\xe2\x96\x81", 3) : cbuf_put(&w.esc, &c, 1);
            }
            if (!rc) rc = bpe_fragment(t, &w, (const uint8_t *)w.esc.v, w.esc.n, res);
        } else {
            rc = bpe_fragment(t, &w, text + f->off, f->len, res);
        }
    }
    if (!rc && want_eos) rc = ivec_push(res, t->eos);
    free(frags.v);
    free(tmp.v);
    work_free(&w);
    return rc;
}

int coli_tok_tokenize(const struct coli_tokenizer *t, const char *text, size_t n, int add_bos, int parse_special,
                      int32_t *out, int cap) {
    if (!t) return coli_fail(COLI_E_ARG, "tokenize: no tokenizer");
    if (!text && n) return coli_fail(COLI_E_ARG, "tokenize: text is NULL");
    if (cap < 0 || (cap > 0 && !out)) return coli_fail(COLI_E_ARG, "tokenize: no room for the tokens (cap %d)", cap);
    if (add_bos < -1 || add_bos > 1) return coli_fail(COLI_E_ARG, "tokenize: add_bos must be -1, 0 or 1 (got %d)", add_bos);
    if (n > MAX_TEXT) return coli_fail(COLI_E_TOO_LONG, "tokenize: text of %zu bytes is longer than %u", n, MAX_TEXT);
    ivec res = {0};
    int rc = tokenize_all(t, (const uint8_t *)text, (uint32_t)n, add_bos, parse_special != 0, &res);
    if (rc) {
        free(res.v);
        return rc;
    }
    size_t k = res.n < (size_t)cap ? res.n : (size_t)cap;
    if (k) memcpy(out, res.v, k * sizeof *out);
    int count = (int)res.n;
    free(res.v);
    return count;
}

/* ---- token -> bytes ------------------------------------------------------- */

typedef struct {
    char *out;
    size_t cap, n;
} sink;

static inline void put(sink *s, const void *p, size_t k) {
    if (s->n < s->cap) {
        size_t room = s->cap - s->n;
        memcpy(s->out + s->n, p, k < room ? k : room);
    }
    s->n += k;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The byte a byte token stands for: "<0xNN>" -> NN. Like llama.cpp, the two
 * characters after "<0x" read by strtol(.., 16): leading whitespace, a sign
 * and a "0x" are allowed, the value is cut to a byte. */
static uint8_t byte_value(const char *p, size_t n) {
    char s[6] = {0};
    for (size_t i = 3; i < 5 && i < n; i++) s[i - 3] = p[i];
    int i = 0, neg = 0, v = 0;
    while (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) i++;
    if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
    if (s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X') && hexval(s[i + 2]) >= 0) i += 2;
    for (; s[i] && hexval(s[i]) >= 0; i++) v = v * 16 + hexval(s[i]);
    return (uint8_t)(neg ? -v : v);
}

/* GPT-2 byte-level text back to bytes (llama_decode_text). */
static int decode_gpt2(const struct coli_tokenizer *t, const char *p, size_t n, sink *s) {
    coli_u32vec cps = {0};
    if (coli_utf8_decode((const uint8_t *)p, n, &cps)) return COLI_E_NOMEM;
    for (size_t i = 0; i < cps.n; i++) {
        uint32_t cp = cps.v[i];
        int b = cp < 0x144 ? t->gpt2_dec[cp] : -1;
        if (b >= 0) {
            uint8_t c = (uint8_t)b;
            put(s, &c, 1);
            continue;
        }
        static const char hx[] = "0123456789abcdef";
        uint8_t u[4];
        int m = coli_utf8_encode(cp, u);
        put(s, "[UNK_BYTE_0x", 12);
        for (int j = 0; j < m; j++) {
            char h2[2] = {hx[u[j] >> 4], hx[u[j] & 15]};
            put(s, h2, 2);
        }
        put(s, p, n);
        put(s, "]", 1);
    }
    coli_u32vec_free(&cps);
    return 0;
}

int coli_tok_piece(const struct coli_tokenizer *t, int32_t id, int special, char *out, int cap) {
    if (!t) return coli_fail(COLI_E_ARG, "token_bytes: no tokenizer");
    if (id < 0 || id >= t->n_tokens)
        return coli_fail(COLI_E_ARG, "token_bytes: token %d is outside the vocabulary (%d tokens)", (int)id,
                         (int)t->n_tokens);
    if (cap < 0 || (cap > 0 && !out)) return coli_fail(COLI_E_ARG, "token_bytes: no room for the bytes (cap %d)", cap);
    uint16_t attr = t->attr[id];
    if (!special && (attr & (COLI_ATTR_UNKNOWN | COLI_ATTR_CONTROL))) return 0;
    size_t n;
    const char *p = coli_tok_text(t, id, &n);
    sink s = {out, (size_t)cap, 0};
    if (attr & (COLI_ATTR_UNKNOWN | COLI_ATTR_CONTROL | COLI_ATTR_USER_DEFINED)) {
        put(&s, p, n);
    } else if (attr & COLI_ATTR_NORMAL) {
        if (t->type == COLI_VOCAB_BPE && !t->spm_style) {
            int rc = decode_gpt2(t, p, n, &s);
            if (rc) return rc;
        } else {
            for (size_t i = 0; i < n;) {  /* U+2581 stands for a space */
                if (i + 3 <= n && memcmp(p + i, "\xe2\x96\x81", 3) == 0) {
                    put(&s, " ", 1);
                    i += 3;
                } else {
                    put(&s, p + i, 1);
                    i++;
                }
            }
        }
    } else if (attr & COLI_ATTR_BYTE) {
        uint8_t c = byte_value(p, n);
        put(&s, &c, 1);
    }
    if (s.n > (size_t)INT32_MAX) return coli_fail(COLI_E_TOO_LONG, "token_bytes: piece too long");
    return (int)s.n;
}
