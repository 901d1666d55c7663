/* error.h — the calling thread's last error, read by colibri_last_error(). */
#ifndef COLI_ERROR_H
#define COLI_ERROR_H

#include "../include/colibri.h"

#if defined(__GNUC__)
#define COLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define COLI_PRINTF(a, b)
#endif

/* Record a failure and return `code` (so callers can `return coli_fail(...)`). */
int coli_fail(int code, const char *fmt, ...) COLI_PRINTF(2, 3);
void coli_clear_error(void);

#endif
