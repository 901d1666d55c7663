/* error.c — per-thread last error: a code and a message, like errno + strerror. */
#include <stdarg.h>
#include <stdio.h>

#include "error.h"

static _Thread_local int last_code;
static _Thread_local char last_msg[512];

int coli_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    last_code = code;
    return code;
}

void coli_clear_error(void) {
    last_code = COLI_OK;
    last_msg[0] = '\0';
}

const char *colibri_last_error(void) { return last_msg; }

int colibri_last_error_code(void) { return last_code; }

const char *colibri_error_name(int code) {
    switch (code) {
    case COLI_OK: return "ok";
    case COLI_E_ARG: return "invalid_argument";
    case COLI_E_IO: return "io_error";
    case COLI_E_FORMAT: return "not_gguf";
    case COLI_E_VERSION: return "unsupported_version";
    case COLI_E_TRUNCATED: return "truncated";
    case COLI_E_CORRUPT: return "corrupt";
    case COLI_E_UNSUPPORTED: return "unsupported";
    case COLI_E_NOMEM: return "out_of_memory";
    case COLI_E_MISSING: return "missing";
    case COLI_E_TOO_LONG: return "too_long";
    case COLI_E_STATE: return "bad_state";
    case COLI_E_FILE_CHANGED: return "model_file_changed";
    default: return "unknown_error";
    }
}
