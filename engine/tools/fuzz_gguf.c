/* fuzz_gguf — the GGUF reader under libFuzzer (coverage-guided), AddressSanitizer
 * and UBSan: `make -C engine fuzz` builds build/fuzz/fuzz_gguf with clang.
 *
 * Each input is a whole file. It is written into a memfd and opened by its
 * /proc/self/fd path, so the reader runs exactly as on a model file (open,
 * fstat, mmap, parse), and then everything it exposes is walked as
 * tools/gguf_check.c walks it: every metadata value as JSON (whole, grown on
 * demand, and into a tiny buffer that must truncate safely), every tensor's
 * info, first and last data byte and name lookup, the summary, and lookups of
 * the keys the engine reads. A memory error, undefined behaviour, a leak or an
 * inconsistency (a tensor found at another index) aborts the run.
 *
 *   build/fuzz/fuzz_gguf -max_total_time=60 corpus/        # see tests/engine/test_fuzz_gguf_cov.py
 *   build/fuzz/fuzz_gguf -runs=1000000 corpus/             # the soak (bench/fuzz_soak.sh)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "colibri.h"
#include "gguf.h" /* the typed getters the engine reads a model's metadata with */
#include "kernels.h"

/* colibri_gguf_describe asks the kernel tables which tensor types this build
 * computes with; the fuzz build links the reader alone (its coverage is the
 * GGUF code), so here no type has kernels: an empty table. */
const coli_kernel_table *coli_kernels(void) {
    static coli_kernel_table none;
    return &none;
}

static const char *KEYS[] = {
    "general.architecture", "general.name", "general.alignment", "tokenizer.ggml.model", "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores", "tokenizer.ggml.merges", "tokenizer.chat_template", "llama.block_count",
};

static char path[64];
static int fd = -1;
static char *buf;
static volatile unsigned sink; /* keeps the tensor byte reads */
static size_t cap;

/* Every key through every typed getter (a wrong type is a named error), and the
 * elements of every array as the engine reads per-layer values and vocabularies. */
static void getters(const gguf_file *f) {
    char key[256];
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        size_t n = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
        memcpy(key, kv->key.ptr, n);
        key[n] = '\0';
        uint32_t u32, et;
        int64_t i64;
        float f32;
        int b;
        gguf_str str;
        uint64_t an;
        const uint8_t *ad;
        (void)gguf_get_u32(f, key, &u32);
        (void)gguf_get_i64(f, key, &i64);
        (void)gguf_get_f32(f, key, &f32);
        (void)gguf_get_bool(f, key, &b);
        if (gguf_get_str(f, key, &str) == 1 && str.len) sink += (unsigned char)str.ptr[str.len - 1];
        (void)gguf_str_eq(kv->key, "general.architecture");
        if (gguf_get_arr(f, key, &et, &an, &ad) == 1 && kv == gguf_get(f, key)) {
            for (uint64_t j = 0; j < an; j = j < 64 ? j + 1 : (j < an - 1 ? an - 1 : an)) {
                gguf_str s = gguf_arr_str(kv, j);
                if (s.len) sink += (unsigned char)s.ptr[s.len - 1];
                sink += gguf_arr_f64(kv, j) > 0.0;
                sink += (unsigned)(uint64_t)gguf_arr_i64(kv, j);
            }
        }
    }
}

static void walk(colibri_gguf *g) {
    getters((const gguf_file *)(const void *)g);
    for (int64_t i = 0; i < colibri_gguf_n_kv(g); i++) {
        int64_t n = colibri_gguf_kv_json(g, i, -1, buf, cap);
        if (n >= (int64_t)cap) { /* grow and write again: the retry path */
            char *nb = realloc(buf, (size_t)n + 1);
            if (!nb) abort();
            buf = nb;
            cap = (size_t)n + 1;
            if (colibri_gguf_kv_json(g, i, -1, buf, cap) != n) abort();
        }
        if (n >= 0 && strlen(buf) != (size_t)n) abort();
        colibri_gguf_kv_json(g, i, 3, buf, 16); /* tiny buffer: must truncate safely */
    }
    for (size_t k = 0; k < sizeof KEYS / sizeof *KEYS; k++) (void)colibri_gguf_find_key(g, KEYS[k]);
    colibri_tensor_info t;
    for (int64_t i = 0; i < colibri_gguf_n_tensors(g); i++) {
        if (colibri_gguf_tensor(g, i, &t) != 0) continue;
        if (t.nbytes) {
            const unsigned char *d = colibri_gguf_tensor_data(g, i);
            sink += d[0] + d[t.nbytes - 1]; /* first and last byte must be mapped */
        }
        if (colibri_gguf_find_tensor(g, t.name) != i) abort(); /* names are unique at open */
    }
    (void)colibri_gguf_version(g);
    (void)colibri_gguf_data_offset(g);
    (void)colibri_gguf_alignment(g);
    int64_t n = colibri_gguf_describe(g, buf, cap);
    if (n >= (int64_t)cap) {
        char *nb = realloc(buf, (size_t)n + 1);
        if (!nb) abort();
        buf = nb;
        cap = (size_t)n + 1;
        colibri_gguf_describe(g, buf, cap);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
    if (fd < 0) {
        perror("memfd_create");
        abort();
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    cap = 1 << 12;
    buf = malloc(cap);
    if (!buf) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (ftruncate(fd, 0) != 0) abort();
    for (size_t off = 0; off < size;) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    colibri_gguf *g = colibri_gguf_open(path);
    if (!g) {
        /* a named error, never an unnamed one */
        if (colibri_last_error_code() >= 0 || !colibri_error_name(colibri_last_error_code())) abort();
        return 0;
    }
    walk(g);
    colibri_gguf_close(g);
    return 0;
}
