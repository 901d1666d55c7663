/* tokenizer_pre.c — BPE pre-tokenizers (see tokenizer_pre.h).
 *
 * The GPT-2 and Llama-3 matchers follow llama.cpp's hand-written fast paths
 * (unicode_regex_split_custom_gpt2 / _llama3): a position-by-position scan
 * where a position outside the current segment reads as "no code point, no
 * flags". llama.cpp runs every other regex through std::regex over a
 * "collapsed" text (one byte per code point: ASCII kept, other code points
 * replaced by a byte per category, non-ASCII whitespace by \v); the matchers
 * here reproduce what those regexes match on that text:
 *   - the Qwen2 regex is the Llama-3 one with \p{N} instead of \p{N}{1,3};
 *     every code point matches one of its alternatives, so there are no gaps
 *     and the leftmost-first ECMAScript match equals the Llama-3 scan;
 *   - [C]+ and \p{N} split a segment into runs (or single code points) of a
 *     class, the text between matches being kept as its own pieces;
 *   - [0-9][0-9][0-9] takes leftmost non-overlapping ASCII digit triples.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tokenizer_pre.h"
#include "unicode_data.h"

int coli_u32vec_reserve(coli_u32vec *a, size_t cap) {
    if (cap <= a->cap) return 0;
    size_t ncap = a->cap ? a->cap : 64;
    while (ncap < cap) ncap *= 2;
    uint32_t *v = realloc(a->v, ncap * sizeof *v);
    if (!v) return coli_fail(COLI_E_NOMEM, "tokenizer: out of memory (%zu code points)", cap);
    a->v = v;
    a->cap = ncap;
    return 0;
}

void coli_u32vec_free(coli_u32vec *a) {
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

static inline int push(coli_u32vec *a, uint32_t x) {
    if (a->n == a->cap && coli_u32vec_reserve(a, a->n + 1)) return COLI_E_NOMEM;
    a->v[a->n++] = x;
    return 0;
}

/* ---- UTF-8 ------------------------------------------------------------ */

/* One code point at s[0..n) (n >= 1), like llama.cpp's unicode_cpt_from_utf8:
 * lead bytes decide the length, continuation bytes must be 10xxxxxx, overlong
 * forms and surrogates are accepted. Returns the bytes used, 0 if invalid.
 * Values past U+10FFFF (which llama.cpp cannot re-encode) count as invalid. */
static size_t utf8_one(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80) { *cp = b; return 1; }
    if (!(b & 0x40)) return 0;
    if (!(b & 0x20)) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (!(b & 0x10)) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    if (!(b & 0x08)) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        uint32_t v = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                     ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        if (v > 0x10FFFF) return 0;
        *cp = v;
        return 4;
    }
    return 0;
}

int coli_utf8_decode(const uint8_t *s, size_t n, coli_u32vec *out) {
    if (coli_u32vec_reserve(out, out->n + n)) return COLI_E_NOMEM;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = utf8_one(s + i, n - i, &cp);
        if (k == 0) { cp = 0xFFFD; k = 1; }
        out->v[out->n++] = cp;
        i += k;
    }
    return 0;
}

int coli_utf8_encode(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | ((cp >> 18) & 0x07));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- GPT-2 byte <-> unicode --------------------------------------------- */

/* Printable Latin-1 bytes stand for themselves; the other 68 bytes map, in
 * order, to U+0100.. . */
static int byte_is_printable(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t coli_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++) n += !byte_is_printable(c);
    return 0x100 + n;
}

int coli_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable((int)cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68) return -1;
    uint32_t n = 0;
    for (int c = 0; c < 256; c++) {
        if (byte_is_printable(c)) continue;
        if (0x100 + n == cp) return c;
        n++;
    }
    return -1;
}

/* ---- flags -------------------------------------------------------------- */

#define OUT_OF_RANGE 0xFFFFFFFFu

/* A segment being scanned: positions outside [ini, end) read as "nothing". */
typedef struct {
    const uint32_t *cps;
    uint32_t ini, end;
    uint32_t prev_end;  /* end of the last piece emitted */
    coli_u32vec *out;
    int err;
} scan;

static inline uint32_t sc_cpt(const scan *s, uint32_t pos) {
    return (pos >= s->ini && pos < s->end) ? s->cps[pos] : OUT_OF_RANGE;
}

/* Flags at pos; 0 outside the segment (llama.cpp's unicode_cpt_flags{}),
 * nonzero inside (undefined code points carry a flag of their own there,
 * which FLAG_IN stands for). */
#define FLAG_IN 0x10
static inline unsigned sc_flags(const scan *s, uint32_t pos) {
    if (pos < s->ini || pos >= s->end) return 0;
    return coli_ucd_flags(s->cps[pos]) | FLAG_IN;
}

static inline int f_letter(unsigned f) { return (f & FLAG_IN) && (f & COLI_UCAT_MASK) == COLI_UCAT_LETTER; }
static inline int f_number(unsigned f) { return (f & FLAG_IN) && (f & COLI_UCAT_MASK) == COLI_UCAT_NUMBER; }
static inline int f_space(unsigned f) { return (f & COLI_UFLAG_WS) != 0; }

/* Emit the piece that ends at `end`; returns its length. */
static inline uint32_t sc_add(scan *s, uint32_t end) {
    uint32_t len = end - s->prev_end;
    if (len > 0 && push(s->out, len)) s->err = COLI_E_NOMEM;
    s->prev_end = end;
    return len;
}

static inline uint32_t ascii_lower(uint32_t c) {
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

/* 's|'t|'re|'ve|'m|'ll|'d at pos (case-folded if `fold`): the length, or 0. */
static uint32_t contraction(const scan *s, uint32_t pos, int fold) {
    if (sc_cpt(s, pos) != '\'' || pos + 1 >= s->end) return 0;
    uint32_t c1 = sc_cpt(s, pos + 1);
    if (fold) c1 = ascii_lower(c1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (pos + 2 < s->end) {
        uint32_t c2 = sc_cpt(s, pos + 2);
        if (fold) c2 = ascii_lower(c2);
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    }
    return 0;
}

/* ---- GPT-2 ------------------------------------------------------------- */

static void split_gpt2(scan *s) {
    for (uint32_t pos = s->ini; pos < s->end;) {
        uint32_t cpt = sc_cpt(s, pos);
        unsigned flags = sc_flags(s, pos);

        uint32_t k = contraction(s, pos, 0);
        if (k) {
            pos += sc_add(s, pos + k);
            continue;
        }
        unsigned flags2 = (cpt == ' ') ? sc_flags(s, pos + 1) : flags;
        if (f_letter(flags2)) {                       /* <space>?\p{L}+ */
            pos += (cpt == ' ');
            while (f_letter(flags2)) flags2 = sc_flags(s, ++pos);
            sc_add(s, pos);
            continue;
        }
        if (f_number(flags2)) {                       /* <space>?\p{N}+ */
            pos += (cpt == ' ');
            while (f_number(flags2)) flags2 = sc_flags(s, ++pos);
            sc_add(s, pos);
            continue;
        }
        if (!(f_space(flags2) || f_letter(flags2) || f_number(flags2)) && flags2) {
            pos += (cpt == ' ');                      /* <space>?[^\s\p{L}\p{N}]+ */
            while (!(f_space(flags2) || f_letter(flags2) || f_number(flags2)) && flags2)
                flags2 = sc_flags(s, ++pos);
            sc_add(s, pos);
            continue;
        }
        uint32_t nws = 0;
        while (f_space(sc_flags(s, pos + nws))) nws++;
        if (nws > 1 && sc_cpt(s, pos + nws) != OUT_OF_RANGE) {  /* \s+(?!\S) */
            pos += nws - 1;
            sc_add(s, pos);
            continue;
        }
        if (nws > 0) {                                /* \s+ */
            pos += nws;
            sc_add(s, pos);
            continue;
        }
        sc_add(s, ++pos);                             /* no match */
    }
}

/* ---- Llama 3 / Qwen2 ----------------------------------------------------- */

static inline int f_mark(unsigned f) { return (f & FLAG_IN) && (f & COLI_UCAT_MASK) == COLI_UCAT_MARK; }

/* marks: \p{M} counts with \p{L} (qwen35's [\p{L}\p{M}]+, [^\s\p{L}\p{M}\p{N}]) */
#define LETTERISH(f) (f_letter(f) || (marks && f_mark(f)))
static void split_llama3(scan *s, uint32_t max_digits, int marks) {
    for (uint32_t pos = s->ini; pos < s->end;) {
        uint32_t cpt = sc_cpt(s, pos);
        unsigned flags = sc_flags(s, pos);

        uint32_t k = contraction(s, pos, 1);          /* (?i:'s|'t|...) */
        if (k) {
            pos += sc_add(s, pos + k);
            continue;
        }
        if (!(cpt == '\r' || cpt == '\n' || f_number(flags))) {  /* [^\r\n\p{L}\p{N}]?\p{L}+ */
            if (LETTERISH(flags) || LETTERISH(sc_flags(s, pos + 1))) {
                pos++;
                while (LETTERISH(sc_flags(s, pos))) pos++;
                sc_add(s, pos);
                continue;
            }
        }
        if (f_number(flags)) {                        /* \p{N}{1,max_digits} */
            uint32_t ini = pos;
            while (f_number(sc_flags(s, pos))) {
                if (++pos - ini >= max_digits) {
                    sc_add(s, pos);
                    ini = pos;
                }
            }
            sc_add(s, pos);
            continue;
        }
        unsigned flags2 = (cpt == ' ') ? sc_flags(s, pos + 1) : flags;  /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
        if (!(f_space(flags2) || LETTERISH(flags2) || f_number(flags2)) && flags) {
            pos += (cpt == ' ');
            while (!(f_space(flags2) || LETTERISH(flags2) || f_number(flags2)) && flags2)
                flags2 = sc_flags(s, ++pos);
            uint32_t c2 = sc_cpt(s, pos);
            while (c2 == '\r' || c2 == '\n') c2 = sc_cpt(s, ++pos);
            sc_add(s, pos);
            continue;
        }
        uint32_t nws = 0, last_rn = 0;
        while (f_space(sc_flags(s, pos + nws))) {
            uint32_t c2 = sc_cpt(s, pos + nws);
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) {                            /* \s*[\r\n]+ */
            pos = last_rn;
            sc_add(s, pos);
            continue;
        }
        if (nws > 1 && sc_cpt(s, pos + nws) != OUT_OF_RANGE) {  /* \s+(?!\S) */
            pos += nws - 1;
            sc_add(s, pos);
            continue;
        }
        if (nws > 0) {                                /* \s+ */
            pos += nws;
            sc_add(s, pos);
            continue;
        }
        sc_add(s, ++pos);
    }
}

#undef LETTERISH

/* ---- classes of the collapsed text --------------------------------------- */

/* [\p{P}\$\+<=>\^~\|] on the collapsed text: ASCII punctuation and symbols
 * but the backtick; beyond ASCII, punctuation that is not whitespace. */
static int in_punct_class(uint32_t cp) {
    if (cp < 0x80) return cp != '`' && cp > 0x20 && cp < 0x7F && !(cp >= '0' && cp <= '9') &&
                          !(cp >= 'A' && cp <= 'Z') && !(cp >= 'a' && cp <= 'z');
    uint8_t f = coli_ucd_flags(cp);
    return !(f & COLI_UFLAG_WS) && (f & COLI_UCAT_MASK) == COLI_UCAT_PUNCT;
}

/* \p{N} on the collapsed text. */
static int in_number_class(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    uint8_t f = coli_ucd_flags(cp);
    return !(f & COLI_UFLAG_WS) && (f & COLI_UCAT_MASK) == COLI_UCAT_NUMBER;
}

/* Matches of [C]+ (max_run = 0) or [C] (max_run = 1): pieces are the matches
 * and the text between them. */
static void split_class(scan *s, int (*in)(uint32_t), int max_run) {
    uint32_t pos = s->ini;
    while (pos < s->end) {
        if (!in(s->cps[pos])) { pos++; continue; }
        sc_add(s, pos);  /* the gap before the match */
        uint32_t e = pos + 1;
        if (!max_run) while (e < s->end && in(s->cps[e])) e++;
        sc_add(s, e);
        pos = e;
    }
    sc_add(s, s->end);
}

static inline int is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }

static void split_triples(scan *s) {
    uint32_t pos = s->ini;
    while (pos + 3 <= s->end) {
        if (is_ascii_digit(s->cps[pos]) && is_ascii_digit(s->cps[pos + 1]) && is_ascii_digit(s->cps[pos + 2])) {
            sc_add(s, pos);
            sc_add(s, pos + 3);
            pos += 3;
        } else {
            pos++;
        }
    }
    sc_add(s, s->end);
}

/* ---- regexes over the collapsed text -------------------------------------
 * llama.cpp matches these with std::regex (ECMAScript: leftmost match, first
 * alternative that succeeds, greedy with backtracking) over one byte per code
 * point: ASCII as itself, other whitespace as \v, other code points as a byte
 * per category, where \p{L} becomes [<letter byte>A-Za-z], \p{P} and \p{S}
 * the category byte plus the ASCII characters of that category. A matcher returns the length of the match at
 * a position, 0 for none; split_regex turns matches and the text between
 * them into pieces, as unicode_regex_split_stl does. */

enum { CV_NONE = -1, CV_WS = 0x0B, CV_OTHER = 0xD0, CV_N = 0xD1, CV_L = 0xD2, CV_P = 0xD3, CV_M = 0xD4, CV_S = 0xD5 };

static inline int cv(const scan *s, uint32_t pos) {
    if (pos < s->ini || pos >= s->end) return CV_NONE;
    uint32_t cp = s->cps[pos];
    if (cp < 0x80) return (int)cp;
    uint8_t f = coli_ucd_flags(cp);
    if (f & COLI_UFLAG_WS) return CV_WS;
    switch (f & COLI_UCAT_MASK) {
    case COLI_UCAT_NUMBER: return CV_N;
    case COLI_UCAT_LETTER: return CV_L;
    case COLI_UCAT_PUNCT: return CV_P;
    case COLI_UCAT_MARK: return CV_M;
    case COLI_UCAT_SYMBOL: return CV_S;
    default: return CV_OTHER;
    }
}

static inline int c_lower(int x) { return x >= 'a' && x <= 'z'; }
static inline int c_upper(int x) { return x >= 'A' && x <= 'Z'; }
static inline int c_alpha(int x) { return c_lower(x) || c_upper(x); }
static inline int c_L(int x) { return x == CV_L || c_alpha(x); }
static inline int c_N(int x) { return x == CV_N || (x >= '0' && x <= '9'); }
static inline int c_M(int x) { return x == CV_M; }
static inline int c_P(int x) { return x == CV_P || (x > 0 && x < 0x80 && strchr("!\"#%&'()*,-./:;?@[\\]_{}", x)); }
static inline int c_S(int x) { return x == CV_S || (x > 0 && x < 0x80 && strchr("$+<=>^`|~", x)); }
static inline int c_space(int x) { return x == ' ' || (x >= '\t' && x <= '\r'); }
static inline int c_rn(int x) { return x == '\r' || x == '\n'; }

typedef uint32_t (*matcher)(const scan *s, uint32_t pos);

static void split_regex(scan *s, matcher m) {
    uint32_t pos = s->ini;
    while (pos < s->end) {
        uint32_t len = m(s, pos);
        if (!len) {
            pos++;
            continue;
        }
        sc_add(s, pos);  /* the text since the last match */
        sc_add(s, pos + len);
        pos += len;
    }
    sc_add(s, s->end);
}

/* \s*[\r\n]+|\s+(?!\S)|\s+ */
static uint32_t match_spaces(const scan *s, uint32_t p) {
    uint32_t n = 0, last_rn = 0;
    while (c_space(cv(s, p + n))) {
        if (c_rn(cv(s, p + n))) last_rn = n + 1;
        n++;
    }
    if (last_rn) return last_rn;
    if (n > 1 && p + n < s->end) return n - 1;
    return n;
}

static uint32_t match_number_triple(const scan *s, uint32_t p) {  /* \p{N}{1,3} */
    uint32_t n = 0;
    while (n < 3 && c_N(cv(s, p + n))) n++;
    return n;
}

static uint32_t match_cjk_run(const scan *s, uint32_t p) {  /* [一-龥぀-ゟ゠-ヿ]+ */
    uint32_t n = 0;
    for (;; n++) {
        uint32_t c = sc_cpt(s, p + n);
        if (!((c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF))) return n;
    }
}

static uint32_t match_deepseek3(const scan *s, uint32_t p) {
    int c = cv(s, p), c1 = cv(s, p + 1);
    uint32_t q;
    if (c > 0x20 && c < 0x7F && !c_alpha(c) && !(c >= '0' && c <= '9') && c_alpha(c1)) {
        for (q = p + 1; c_alpha(cv(s, q)); q++) {}    /* [!-/:-@[-`{-~][A-Za-z]+ */
        return q - p;
    }
    if (c != CV_NONE && !c_rn(c) && !c_L(c) && !c_P(c) && !c_S(c) && (c_L(c1) || c_M(c1))) {
        for (q = p + 1; c_L(cv(s, q)) || c_M(cv(s, q)); q++) {}  /* [^\r\n\p{L}\p{P}\p{S}][\p{L}\p{M}]+ */
        return q - p;
    }
    if (c_L(c) || c_M(c)) {                            /* [\p{L}\p{M}]+ */
        for (q = p; c_L(cv(s, q)) || c_M(cv(s, q)); q++) {}
        return q - p;
    }
    q = (c == ' ' && (c_P(c1) || c_S(c1))) ? p + 1 : p;  /*  ?[\p{P}\p{S}]+[\r\n]* */
    if (c_P(cv(s, q)) || c_S(cv(s, q))) {
        while (c_P(cv(s, q)) || c_S(cv(s, q))) q++;
        while (c_rn(cv(s, q))) q++;
        return q - p;
    }
    return match_spaces(s, p);
}

/* The letter part of the GPT-4o regex from q: an "upper" is [A-Z] or a
 * non-ASCII letter, a "lower" [a-z] or a non-ASCII letter. First
 * <upper>*<lower>+, with <upper>* giving characters back until <lower>+ can
 * start; else <upper>+<lower>*. Returns the end, 0 if neither matches. */
static uint32_t gpt4o_letters(const scan *s, uint32_t q, int contractions) {
    uint32_t e = q, last_both = UINT32_MAX, f;
    for (int x; (x = cv(s, e)) == CV_L || c_upper(x); e++)
        if (x == CV_L) last_both = e;
    int xe = cv(s, e);
    if (xe == CV_L || c_lower(xe)) {
        for (f = e; cv(s, f) == CV_L || c_lower(cv(s, f)); f++) {}
    } else if (last_both != UINT32_MAX) {
        f = last_both + 1;
    } else if (e > q) {
        f = e;
    } else {
        return 0;
    }
    return contractions ? f + contraction(s, f, 1) : f;
}

static uint32_t match_gpt4o_like(const scan *s, uint32_t p, int contractions, uint32_t max_digits) {
    int c = cv(s, p);
    uint32_t q = (c != CV_NONE && !c_rn(c) && !c_L(c) && !c_N(c)) ? p + 1 : p;  /* [^\r\n\p{L}\p{N}]? */
    uint32_t f = gpt4o_letters(s, q, contractions);
    if (f) return f - p;
    if (c_N(c)) {                                      /* \p{N}{1,max_digits} */
        uint32_t n = 1;
        while (n < max_digits && c_N(cv(s, p + n))) n++;
        return n;
    }
    int c1 = cv(s, p + 1);                             /*  ?[^\s\p{L}\p{N}]+[\r\n/]* */
    q = (c == ' ' && c1 != CV_NONE && !c_space(c1) && !c_L(c1) && !c_N(c1)) ? p + 1 : p;
    int x = cv(s, q);
    if (x != CV_NONE && !c_space(x) && !c_L(x) && !c_N(x)) {
        for (; (x = cv(s, q)) != CV_NONE && !c_space(x) && !c_L(x) && !c_N(x); q++) {}
        while (c_rn(cv(s, q)) || cv(s, q) == '/') q++;
        return q - p;
    }
    return match_spaces(s, p);
}

static uint32_t match_gpt4o(const scan *s, uint32_t p) { return match_gpt4o_like(s, p, 1, 3); }
static uint32_t match_tekken(const scan *s, uint32_t p) { return match_gpt4o_like(s, p, 0, 1); }

/* ---- Kimi K2 (llama.cpp's unicode_regex_split_custom_kimi_k2) ------------- */

static int is_han(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0x2CEB0 && c <= 0x2EBEF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static void split_kimi_k2(scan *s) {
    for (uint32_t pos = s->ini; pos < s->end;) {
        uint32_t cpt = sc_cpt(s, pos);
        unsigned flags = sc_flags(s, pos);
        if (is_han(cpt)) {                                       /* [\p{Han}]+ */
            while (is_han(sc_cpt(s, pos))) pos++;
            sc_add(s, pos);
            continue;
        }
        /* letters without Han, an optional leading [^\r\n\p{L}\p{N}], an optional contraction */
        int lead = !(cpt == '\r' || cpt == '\n' || f_letter(flags) || f_number(flags));
        int letter_pattern = (f_letter(flags) && !is_han(cpt)) ||
                             (lead && f_letter(sc_flags(s, pos + 1)) && !is_han(sc_cpt(s, pos + 1)));
        if (letter_pattern) {
            if (lead) pos++;
            int has_letters = 0;
            while (f_letter(sc_flags(s, pos)) && !is_han(sc_cpt(s, pos))) {
                has_letters = 1;
                pos++;
            }
            if (has_letters || (!lead && f_letter(sc_flags(s, pos)) && !is_han(sc_cpt(s, pos)))) {
                if (!has_letters) pos++;
                while (f_letter(sc_flags(s, pos)) && !is_han(sc_cpt(s, pos))) pos++;
                pos += contraction(s, pos, 1);
                sc_add(s, pos);
                continue;
            } else if (lead) {
                pos--;
            }
        }
        if (f_number(flags)) {                                   /* \p{N}{1,3} */
            uint32_t ini = pos;
            while (f_number(sc_flags(s, pos))) {
                if (++pos - ini >= 3) {
                    sc_add(s, pos);
                    ini = pos;
                }
            }
            sc_add(s, pos);
            continue;
        }
        unsigned flags2 = (cpt == ' ') ? sc_flags(s, pos + 1) : flags;  /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
        if (!(f_space(flags2) || f_letter(flags2) || f_number(flags2)) && flags2) {
            pos += (cpt == ' ');
            while (!(f_space(flags2) || f_letter(flags2) || f_number(flags2)) && flags2)
                flags2 = sc_flags(s, ++pos);
            uint32_t c2 = sc_cpt(s, pos);
            while (c2 == '\r' || c2 == '\n') c2 = sc_cpt(s, ++pos);
            sc_add(s, pos);
            continue;
        }
        uint32_t nws = 0, last_rn = 0;
        while (f_space(sc_flags(s, pos + nws))) {
            uint32_t c2 = sc_cpt(s, pos + nws);
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) {
            pos = last_rn;
            sc_add(s, pos);
            continue;
        }
        if (nws > 1 && sc_cpt(s, pos + nws) != OUT_OF_RANGE) {
            pos += nws - 1;
            sc_add(s, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            sc_add(s, pos);
            continue;
        }
        sc_add(s, ++pos);
    }
}


/* ---- regexes over the code points (std::wregex) ----------------------------
 * llama.cpp matches a regex without \p{..} with std::wregex over the code
 * points, each non-ASCII whitespace one replaced by \v (so that \s finds it). */

static inline uint32_t wv(const scan *s, uint32_t pos) {
    if (pos < s->ini || pos >= s->end) return UINT32_MAX;
    uint32_t cp = s->cps[pos];
    return cp >= 0x80 && (coli_ucd_flags(cp) & COLI_UFLAG_WS) ? 0x0B : cp;
}

static inline int w_space(uint32_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static int in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n) {
    for (size_t i = 0; i < n; i++)
        if (c >= r[i][0] && c <= r[i][1]) return 1;
    return 0;
}

/* deepseek-llm's letter class, as its regex lists it */
static const uint32_t dsllm_letters[][2] = {
    {'A', 'Z'}, {'a', 'z'}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF}, {0x1C4, 0x293},
    {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A},
    {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5},
    {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57},
    {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115},
    {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134},
    {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
    {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
static const uint32_t dsllm_punct[][2] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};
static const uint32_t ds_cjk[][2] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};

#define N_RANGES(r) (sizeof r / sizeof r[0])

/* \s?[C]+ over the code points */
static uint32_t w_space_then_run(const scan *s, uint32_t p, const uint32_t (*r)[2], size_t n) {
    uint32_t q = p;
    if (w_space(wv(s, q)) && in_ranges(wv(s, q + 1), r, n)) q++;
    uint32_t start = q;
    while (in_ranges(wv(s, q), r, n)) q++;
    return q > start ? q - p : 0;
}

static uint32_t match_dsllm_letters(const scan *s, uint32_t p) {
    return w_space_then_run(s, p, dsllm_letters, N_RANGES(dsllm_letters));
}

static uint32_t match_dsllm_punct(const scan *s, uint32_t p) {
    return w_space_then_run(s, p, dsllm_punct, N_RANGES(dsllm_punct));
}

static uint32_t match_ds_cjk(const scan *s, uint32_t p) {
    uint32_t q = p;
    while (in_ranges(wv(s, q), ds_cjk, N_RANGES(ds_cjk))) q++;
    return q - p;
}

static uint32_t match_trailing_space(const scan *s, uint32_t p) { /* \s+$: a run that reaches the piece's end */
    uint32_t q = p;
    while (q < s->end && w_space(wv(s, q))) q++;
    return q > p && q == s->end ? q - p : 0;
}

static int in_line_break(uint32_t cp) { return cp == '\r' || cp == '\n'; }

/* \s?[C]+ over std::regex's classes (cv), C a class test */
static uint32_t c_space_then_run(const scan *s, uint32_t p, int (*in_class)(int)) {
    uint32_t q = p;
    if (c_space(cv(s, q)) && in_class(cv(s, q + 1))) q++;
    uint32_t start = q;
    while (in_class(cv(s, q))) q++;
    return q > start ? q - p : 0;
}

static uint32_t match_dscoder_letters(const scan *s, uint32_t p) { return c_space_then_run(s, p, c_L); } /* \s?\p{L}+ */
static uint32_t match_dscoder_punct(const scan *s, uint32_t p) { return c_space_then_run(s, p, c_P); } /* \s?\p{P}+ */

/* [^\n]+|[\n]+ (unicode_regex_split_custom_newlines) */
static void split_lines(scan *s) {
    uint32_t pos = s->ini;
    while (pos < s->end) {
        const int nl = s->cps[pos] == '\n';
        while (pos < s->end && (s->cps[pos] == '\n') == nl) pos++;
        sc_add(s, pos);
    }
}

int coli_pre_apply(enum coli_pre_stage stage, const uint32_t *cps, const coli_u32vec *segs, coli_u32vec *out) {
    out->n = 0;
    if (coli_u32vec_reserve(out, segs->n + 16)) return COLI_E_NOMEM;
    uint32_t start = 0;
    for (size_t i = 0; i < segs->n; i++) {
        scan s = { cps, start, start + segs->v[i], start, out, 0 };
        start = s.end;
        switch (stage) {
        case COLI_STAGE_GPT2: split_gpt2(&s); break;
        case COLI_STAGE_LLAMA3: split_llama3(&s, 3, 0); break;
        case COLI_STAGE_LLAMA3_DIGIT1: split_llama3(&s, 1, 0); break;
        case COLI_STAGE_QWEN35: split_llama3(&s, 1, 1); break;
        case COLI_STAGE_NUMBER_TRIPLES: split_regex(&s, match_number_triple); break;
        case COLI_STAGE_CJK_RUNS: split_regex(&s, match_cjk_run); break;
        case COLI_STAGE_DEEPSEEK3: split_regex(&s, match_deepseek3); break;
        case COLI_STAGE_GPT4O: split_regex(&s, match_gpt4o); break;
        case COLI_STAGE_TEKKEN: split_regex(&s, match_tekken); break;
        case COLI_STAGE_KIMI_K2: split_kimi_k2(&s); break;
        case COLI_STAGE_LINES: split_lines(&s); break;
        case COLI_STAGE_EACH_LINE_BREAK: split_class(&s, in_line_break, 1); break;
        case COLI_STAGE_DSLLM_LETTERS: split_regex(&s, match_dsllm_letters); break;
        case COLI_STAGE_DSLLM_PUNCT: split_regex(&s, match_dsllm_punct); break;
        case COLI_STAGE_TRAILING_SPACE: split_regex(&s, match_trailing_space); break;
        case COLI_STAGE_DS_CJK: split_regex(&s, match_ds_cjk); break;
        case COLI_STAGE_DSCODER_LETTERS: split_regex(&s, match_dscoder_letters); break;
        case COLI_STAGE_DSCODER_PUNCT: split_regex(&s, match_dscoder_punct); break;
        case COLI_STAGE_PUNCT_RUNS: split_class(&s, in_punct_class, 0); break;
        case COLI_STAGE_NUMBER_RUNS: split_class(&s, in_number_class, 0); break;
        case COLI_STAGE_NUMBER_EACH: split_class(&s, in_number_class, 1); break;
        case COLI_STAGE_DIGIT_TRIPLES: split_triples(&s); break;
        default: sc_add(&s, s.end); break;
        }
        if (s.err) return s.err;
    }
    return 0;
}
