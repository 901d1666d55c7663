/* tokenizer_pre.h — the BPE pre-tokenizers: hand-written matchers for the
 * regexes llama.cpp selects by `tokenizer.ggml.pre`, over code points.
 *
 * A text is decoded once into code points (invalid UTF-8 bytes become U+FFFD,
 * one byte each, as llama.cpp's unicode_cpts_from_utf8 does). A split is a
 * list of segment lengths in code points that covers the text; each stage
 * refines every segment of the previous split independently, like
 * llama.cpp's unicode_regex_split. */
#ifndef COLI_TOKENIZER_PRE_H
#define COLI_TOKENIZER_PRE_H

#include <stddef.h>
#include <stdint.h>

/* One pre-tokenizer stage; a pre-tokenizer is up to COLI_PRE_MAX_STAGES. */
enum coli_pre_stage {
    COLI_STAGE_NONE = 0,
    /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
    COLI_STAGE_GPT2,
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
     *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    COLI_STAGE_LLAMA3,
    /* the same with \p{N} (one digit per piece): qwen2, stablelm2 */
    COLI_STAGE_LLAMA3_DIGIT1,
    /* [\p{P}\$\+<=>\^~\|]+ (punctuation runs; "default") */
    COLI_STAGE_PUNCT_RUNS,
    /* \p{N}+ (number runs; "default") */
    COLI_STAGE_NUMBER_RUNS,
    /* \p{N} (each number alone; starcoder family) */
    COLI_STAGE_NUMBER_EACH,
    /* [0-9][0-9][0-9] (ASCII digit triples; "default") */
    COLI_STAGE_DIGIT_TRIPLES,
    /* Qwen2's regex with \p{M} beside \p{L}: qwen35 */
    COLI_STAGE_QWEN35,
    /* \p{N}{1,3} alone (deepseek-v3, first of three) */
    COLI_STAGE_NUMBER_TRIPLES,
    /* [一-龥぀-ゟ゠-ヿ]+ (deepseek-v3, second) */
    COLI_STAGE_CJK_RUNS,
    /* [ASCII punct][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|
     * \s*[\r\n]+|\s+(?!\S)|\s+ (deepseek-v3, third) */
    COLI_STAGE_DEEPSEEK3,
    /* [^\r\n\p{L}\p{N}]?<upper>*<lower>+<'s..>?|[^\r\n\p{L}\p{N}]?<upper>+<lower>*<'s..>?|\p{N}{1,3}|
     *  ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ (gpt-4o, llama4, minimax-m2) */
    COLI_STAGE_GPT4O,
    /* the same without contractions and with \p{N} (tekken) */
    COLI_STAGE_TEKKEN,
    /* llama.cpp's hand-written Kimi-K2 splitter (Han runs apart) */
    COLI_STAGE_KIMI_K2,
    /* [^\n]+|[\n]+ (runs of line feeds apart from the rest: gemma4, sarvam-moe) */
    COLI_STAGE_LINES,
    /* [\r\n] (each line break alone: deepseek-llm, deepseek-coder, first) */
    COLI_STAGE_EACH_LINE_BREAK,
    /* \s?[A-Za-zµÀ-Ö...]+ (deepseek-llm's letters, an explicit list of ranges) */
    COLI_STAGE_DSLLM_LETTERS,
    /* \s?[!-/:-~！-／：-～‘-‟　-。]+ (deepseek-llm's punctuation, ASCII letters included) */
    COLI_STAGE_DSLLM_PUNCT,
    /* \s+$ (the whitespace that ends a piece: deepseek-llm) */
    COLI_STAGE_TRAILING_SPACE,
    /* [一-龥ࠀ-一가-퟿]+ (deepseek-llm, deepseek-coder) */
    COLI_STAGE_DS_CJK,
    /* \s?\p{L}+ (deepseek-coder) */
    COLI_STAGE_DSCODER_LETTERS,
    /* \s?\p{P}+ (deepseek-coder) */
    COLI_STAGE_DSCODER_PUNCT,
};

#define COLI_PRE_MAX_STAGES 6

/* A growable array of uint32_t (code points or segment lengths). */
typedef struct {
    uint32_t *v;
    size_t n, cap;
} coli_u32vec;

int coli_u32vec_reserve(coli_u32vec *a, size_t cap);  /* 0 or COLI_E_NOMEM */
void coli_u32vec_free(coli_u32vec *a);

/* Decode `n` bytes into code points, appending to `out`. */
int coli_utf8_decode(const uint8_t *s, size_t n, coli_u32vec *out);

/* Encode one code point (<= 0x10FFFF) as UTF-8 into out[4]; returns bytes. */
int coli_utf8_encode(uint32_t cp, uint8_t *out);

/* Apply `stage` to the split `segs` of `cps`, writing the refined split to
 * `out` (emptied first). 0 or COLI_E_NOMEM. */
int coli_pre_apply(enum coli_pre_stage stage, const uint32_t *cps, const coli_u32vec *segs, coli_u32vec *out);

/* GPT-2's byte-to-unicode map: the code point that stands for byte b. */
uint32_t coli_byte_to_cp(uint8_t b);
/* Inverse: the byte a code point stands for, or -1. */
int coli_cp_to_byte(uint32_t cp);

#endif
