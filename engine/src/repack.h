/* repack.h — resident Q4_K, Q4_0, IQ4_NL and MXFP4 weights rewritten at load into
 * 16-row tiles, as llama.cpp repacks them (its q4_K_8x8, q4_0_8x8, iq4_nl_8x8, mxfp4_8x8): the tile
 * kernels then read 16 rows as one stream, with no transposes in registers (Q4_K MoE
 * decode 1.3x with the AVX-512 set on Zen 4, 1.2x with AVX2; the same bits: the
 * arithmetic is that of the type's kernels).
 *
 * Only matrices read nowhere but through the matmuls, with whole 16-row tiles, where
 * a SIMD set is in force; experts only when they are resident (a streamed expert
 * is read from the file as stored); no more bytes than the memory free at load allows
 * (the rewritten pages are the process's own, not the page cache's). COLI_REPACK=0
 * keeps every weight as stored. */
#ifndef COLI_REPACK_H
#define COLI_REPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* Repacks what qualifies, in place, on n_threads threads, and flags it (coli_mat.mm_flags);
 * returns the bytes repacked. */
int64_t coli_model_repack(coli_model *m, bool experts_resident, int n_threads);
/* COLI_REPACK=0: nothing is repacked. */
bool coli_repack_off(void);
/* Whether a matrix of this type and shape qualifies for tiles with the kernel table in force
 * (the calling thread's, where one is set): whole 16-row tiles, and tile kernels for its calls. */
bool coli_repack_shape(uint32_t wtype, int64_t n_in, int64_t n_out);

#endif
