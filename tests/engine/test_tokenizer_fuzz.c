/* test_tokenizer_fuzz.c — drives the tokenizer under AddressSanitizer + UBSan
 * (built and run by test_tokenizer.py::test_tokenizer_under_sanitizers).
 *
 *   test_tokenizer_fuzz ITERATIONS FILE...
 *
 * For each GGUF file: open it vocab-only (a refusal is fine: it must be a
 * named error), read every token's bytes into buffers of random sizes, and
 * tokenize random byte strings (special-token spellings, UTF-8 fragments,
 * invalid bytes, whitespace runs) with every flag and random output room,
 * checking the count rule: the count never depends on the room. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

static unsigned long long rng_state = 0x9E3779B97F4A7C15ULL;

static unsigned rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state >> 11);
}

static const char *const pieces[] = {
    " ", "  ", "\n", "\n\n", "\t", "\r\n", "a", "Z", "1", "123", "'", "'s", "'LL", "<", ">", "<start_of_turn>",
    "<end_of_turn>", "<bos>", "<|im_start|>", "<|im_end|>", "<user_tag>", "<mask>", "<|user|>", "\xe6\x97\xa5",
    "\xf0\x9f\x98\x80", "\xe2\x80\x8d", "\xcc\x81", "\xc3", "\xff", "\xe2\x96\x81", ".", ",", "!!", "\xf4\x90\x80\x80",
    "\xf5\x80", "\x80", "\xed\xa0\x80", "\xc0\x80", "\x00", "\xe3\x80\x80", "\xc2\x85", "\xd9\xa3",
};

static int fuzz_engine(colibri_engine *e, const char *path, int iterations);

static int fuzz_file(const char *path, int iterations) {
    colibri_config cfg;
    colibri_config_default(&cfg);
    cfg.model_path = path;
    cfg.vocab_only = 1;
    colibri_engine *e = colibri_open(&cfg);
    if (!e) {
        const char *name = colibri_error_name(colibri_last_error_code());
        printf("%s: refused (%s: %s)\n", path, name, colibri_last_error());
        return strcmp(name, "unknown_error") == 0 || strcmp(name, "ok") == 0;
    }
    int rc = fuzz_engine(e, path, iterations);
    colibri_close(e);
    return rc;
}

static int fuzz_engine(colibri_engine *e, const char *path, int iterations) {
    int nv = colibri_n_vocab(e);
    char piece[512];
    for (int t = -2; t < nv + 2; t++)
        for (int s = 0; s < 2; s++) {
            int cap = (int)(rnd() % 40);
            int full = colibri_token_bytes(e, t, s, piece, cap);
            if ((t < 0 || t >= nv) != (full < 0)) {
                printf("%s: token_bytes(%d) returned %d\n", path, t, full);
                return 1;
            }
        }
    static int32_t out[4096];
    static char text[2048];
    int npieces = (int)(sizeof pieces / sizeof pieces[0]);
    for (int it = 0; it < iterations; it++) {
        size_t n = 0;
        int k = (int)(rnd() % 48);
        for (int j = 0; j < k; j++) {
            if (rnd() % 4 == 0) {
                text[n++] = (char)(rnd() & 0xFF);
            } else {
                const char *p = pieces[rnd() % npieces];
                size_t l = p[0] ? strlen(p) : 1;
                if (n + l < sizeof text) {
                    memcpy(text + n, p, l);
                    n += l;
                }
            }
        }
        int add_bos = (int)(rnd() % 3) - 1, special = (int)(rnd() % 2);
        if (add_bos == 1 && colibri_token_bos(e) < 0) {  /* "BOS always" without one: refused */
            if (colibri_tokenize(e, text, n, 1, special, out, 4) >= 0) {
                printf("%s: add_bos=1 accepted without a BOS token\n", path);
                return 1;
            }
            continue;
        }
        int want = colibri_tokenize(e, text, n, add_bos, special, NULL, 0);
        int cap = (int)(rnd() % 64);
        int got = colibri_tokenize(e, text, n, add_bos, special, out, cap);
        int all = colibri_tokenize(e, text, n, add_bos, special, out, (int)(sizeof out / sizeof out[0]));
        if (want < 0 || got != want || all != want) {
            printf("%s: tokenize counts %d / %d / %d (%s)\n", path, want, got, all, colibri_last_error());
            return 1;
        }
        for (int i = 0; i < all; i++)
            if (out[i] < 0 || out[i] >= nv) {
                printf("%s: token %d outside the vocabulary\n", path, out[i]);
                return 1;
            }
    }
    if (colibri_tokenize(e, NULL, 3, 0, 0, out, 4) >= 0 || colibri_tokenize(e, text, 1, 5, 0, out, 4) >= 0) {
        printf("%s: bad arguments accepted\n", path);
        return 1;
    }
    printf("%s: ok (%d tokens)\n", path, nv);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s ITERATIONS FILE...\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    int iterations = atoi(argv[1]), failed = 0;
    for (int a = 2; a < argc; a++) failed |= fuzz_file(argv[a], iterations);
    return failed;
}
