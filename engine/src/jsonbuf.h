/* jsonbuf.h — a growable buffer for writing JSON (model info, metadata). */
#ifndef COLI_JSONBUF_H
#define COLI_JSONBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *buf;
    size_t len, cap;
    int oom; /* set once an allocation failed; later writes are dropped */
} jsonbuf;

void jb_init(jsonbuf *b);
void jb_free(jsonbuf *b);
void jb_raw(jsonbuf *b, const char *s, size_t n);
void jb_puts(jsonbuf *b, const char *s);
void jb_printf(jsonbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* A JSON string literal; invalid UTF-8 bytes become U+FFFD. */
void jb_str(jsonbuf *b, const char *s, size_t n);
/* A number; NaN and infinities become null (JSON has no spelling for them). */
void jb_f64(jsonbuf *b, double v, int single_precision);
/* `"key":` */
void jb_key(jsonbuf *b, const char *key);
/* Copy into the caller's buffer with snprintf rules; returns the full length,
 * or a negative code when out of memory. Frees the buffer. */
int64_t jb_finish(jsonbuf *b, char *out, size_t cap);

#endif
