/* ggml tensor types as GGUF files name them: ids, block sizes, bytes per block.
 * The ids are part of the file format (ggml.h `enum ggml_type`, as of ggml
 * 0.3.36); gaps are ids that llama.cpp retired and a file must not use. A type
 * known here is one the reader can size and name; which of them colibri can
 * compute with is the kernel tables' business (kernels.h: a NULL vec_dot), so a
 * file using a known type without kernels is refused by name, not as corrupt. */
#ifndef COLI_GGML_TYPES_H
#define COLI_GGML_TYPES_H

#include <stddef.h>
#include <stdint.h>

enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S = 19,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ3_S = 21,
    GGML_TYPE_IQ2_S = 22,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_I8 = 24,
    GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26,
    GGML_TYPE_I64 = 27,
    GGML_TYPE_F64 = 28,
    GGML_TYPE_IQ1_M = 29,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_TQ1_0 = 34,
    GGML_TYPE_TQ2_0 = 35,
    GGML_TYPE_MXFP4 = 39,
    GGML_TYPE_NVFP4 = 40, /* known by name and size only: no kernels (yet) */
    GGML_TYPE_Q1_0 = 41,  /* ditto */
    GGML_TYPE_Q2_0 = 42,  /* ditto */
    GGML_TYPE_COUNT = 43,
};

typedef struct {
    const char *name;  /* as llama.cpp prints it, e.g. "Q4_K"; NULL for a retired id */
    int32_t blck_size; /* elements per block */
    int32_t type_size; /* bytes per block */
} ggml_type_traits;

/* NULL when `type` is not a valid id. */
const ggml_type_traits *ggml_type_get(uint32_t type);

#endif
