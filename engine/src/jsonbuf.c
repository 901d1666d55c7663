#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "jsonbuf.h"

void jb_init(jsonbuf *b) { memset(b, 0, sizeof *b); }

void jb_free(jsonbuf *b) {
    free(b->buf);
    jb_init(b);
}

static int jb_reserve(jsonbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->buf, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->buf = p;
    b->cap = cap;
    return 1;
}

void jb_raw(jsonbuf *b, const char *s, size_t n) {
    if (!jb_reserve(b, n)) return;
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

void jb_puts(jsonbuf *b, const char *s) { jb_raw(b, s, strlen(s)); }

void jb_printf(jsonbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        jb_raw(b, tmp, (size_t)n);
        return;
    }
    if (!jb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) { len = 2; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; min = 0x10000; }
    else return 0;
    if (len > n) return 0;
    unsigned cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

void jb_str(jsonbuf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    jb_raw(b, "\"", 1);
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            jb_raw(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': jb_raw(b, "\\n", 2); break;
            case '\r': jb_raw(b, "\\r", 2); break;
            case '\t': jb_raw(b, "\\t", 2); break;
            default: jb_printf(b, "\\u%04x", c);
            }
            i++;
        } else if (c < 0x80) {
            size_t j = i;
            while (j < n && p[j] >= 0x20 && p[j] < 0x80 && p[j] != '"' && p[j] != '\\') j++;
            jb_raw(b, s + i, j - i);
            i = j;
        } else {
            size_t len = utf8_seq(p + i, n - i);
            if (len) {
                jb_raw(b, s + i, len);
                i += len;
            } else {
                jb_raw(b, "\xEF\xBF\xBD", 3);
                i++;
            }
        }
    }
    jb_raw(b, "\"", 1);
}

void jb_f64(jsonbuf *b, double v, int single_precision) {
    if (!isfinite(v)) {
        jb_raw(b, "null", 4);
        return;
    }
    jb_printf(b, single_precision ? "%.9g" : "%.17g", v);
}

void jb_key(jsonbuf *b, const char *key) {
    jb_str(b, key, strlen(key));
    jb_raw(b, ":", 1);
}

int64_t jb_finish(jsonbuf *b, char *out, size_t cap) {
    if (b->oom) {
        jb_free(b);
        return coli_fail(COLI_E_NOMEM, "out of memory while writing JSON");
    }
    int64_t n = (int64_t)b->len;
    if (out && cap) {
        size_t k = b->len < cap - 1 ? b->len : cap - 1;
        if (k) memcpy(out, b->buf, k);
        out[k] = '\0';
    }
    jb_free(b);
    return n;
}
