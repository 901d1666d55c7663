/* gguf_check — open GGUF files with the engine's reader and walk everything it
 * exposes (every metadata value as JSON, every tensor info, the summary).
 * Built with AddressSanitizer + UBSan by `make -C engine asan` for the fuzz
 * tests: for each file it prints one line, "OK <path>" or
 * "ERR <error_name> <path>: <message>", and a memory error aborts the run.
 * File paths come from the arguments, or one per line on stdin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

static void check(const char *path) {
    colibri_gguf *g = colibri_gguf_open(path);
    if (!g) {
        printf("ERR %s %s: %s\n", colibri_error_name(colibri_last_error_code()), path, colibri_last_error());
        return;
    }
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    if (!buf) {
        printf("ERR out_of_memory %s\n", path);
        colibri_gguf_close(g);
        return;
    }
    for (int64_t i = 0; i < colibri_gguf_n_kv(g); i++) {
        int64_t n = colibri_gguf_kv_json(g, i, -1, buf, cap);
        if (n >= (int64_t)cap) { /* grow and write again: exercises the retry path */
            char *nb = realloc(buf, (size_t)n + 1);
            if (!nb) break;
            buf = nb;
            cap = (size_t)n + 1;
            colibri_gguf_kv_json(g, i, -1, buf, cap);
        }
        colibri_gguf_kv_json(g, i, 3, buf, 16); /* tiny buffer: must truncate safely */
    }
    colibri_tensor_info t;
    uint64_t sum = 0;
    for (int64_t i = 0; i < colibri_gguf_n_tensors(g); i++) {
        if (colibri_gguf_tensor(g, i, &t) == 0 && t.nbytes) {
            const unsigned char *d = colibri_gguf_tensor_data(g, i);
            sum += d[0] + d[t.nbytes - 1]; /* first and last byte must be mapped */
            if (colibri_gguf_find_tensor(g, t.name) != i) printf("BUG %s: tensor index mismatch\n", path);
        }
    }
    int64_t n = colibri_gguf_describe(g, buf, cap);
    printf(n < 0 ? "ERR %s %s: %s\n" : "OK %s%s%s\n", n < 0 ? colibri_error_name(colibri_last_error_code()) : "",
           path, n < 0 ? colibri_last_error() : "");
    (void)sum;
    free(buf);
    colibri_gguf_close(g);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        for (int i = 1; i < argc; i++) check(argv[i]);
    } else {
        char line[4096];
        while (fgets(line, sizeof line, stdin)) {
            line[strcspn(line, "\n")] = '\0';
            if (line[0]) check(line);
        }
    }
    return 0;
}
