/* matmul.h — y = x . W^T for a weight matrix in its GGUF block format.
 *
 * W: n_out rows of n_in elements (GGUF ne[0] = n_in, ne[1] = n_out), each row
 * contiguous in `wtype` blocks. x: n_rows x n_in floats. y: n_rows x n_out.
 * As in ggml's mul_mat, x is first converted to the weight type's vec_dot
 * type (Q8_0 / Q8_1 / Q8_K / F16 / BF16; F32 is used as is), once per call,
 * split across the pool; then output rows are split across threads in
 * chunks, each weight row dotted with up to COLI_MAX_NR activation rows at a
 * time so that prefill loads each weight block once per tile.
 *
 * The n_rows of one call are one batch in llama.cpp's sense: like its CPU
 * backend, a batch may add up its dot products differently from a single row
 * (quant.h: vec_dot_mm, coli_mm_rows), so the bits of a row depend on the
 * batch size exactly as llama.cpp's do. */
#ifndef COLI_MATMUL_H
#define COLI_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "threadpool.h"

/* Bytes of scratch coli_matmul needs for the converted activations (0 for
 * F32 weights), or 0 when wtype has no kernels / n_in is not a multiple of
 * the blocks. Scratch should be 64-byte aligned. */
size_t coli_matmul_scratch_size(uint32_t wtype, int64_t n_in, int64_t n_rows);

/* 0 or a negative COLI_E_* (unsupported type, bad shape). pool may be NULL. */
int coli_matmul(coli_pool *pool, const void *w, uint32_t wtype, int64_t n_in, int64_t n_out,
                const float *x, int64_t n_rows, float *y, void *scratch);

/* How the rows of one call are computed:
 *   BATCH    one batch in llama.cpp's sense (some rows of a batch, and a batch
 *            of one, get the one-row arithmetic, as llama.cpp computes them);
 *   ALONE    every row as a batch of one: rows of different conversations
 *            decoded together equal each decoded alone;
 *   UNIFORM  every row with the batch arithmetic, whatever the batch size: a
 *            prompt's rows get the same bits however it is chunked, so a
 *            prompt continued from a cached prefix equals it prefilled whole. */
typedef enum { COLI_ROWS_BATCH = 0, COLI_ROWS_ALONE = 1, COLI_ROWS_UNIFORM = 2 } coli_rows_mode;
/* Or'ed into a mode: the weight is one llama.cpp never repacks (a head of a
 * 3-D tensor), so its plain kernels apply (kernels.h coli_plain_kernels). */
#define COLI_ROWS_NOT_REPACKED 16
/* Or'ed into a mode: the weight was repacked at load into 16-row tiles
 * (coli_repack_r16): its type's tile kernels apply (coli_r16_kernels). */
#define COLI_ROWS_R16 32

int coli_matmul_ex(coli_pool *pool, const void *w, uint32_t wtype, int64_t n_in, int64_t n_out,
                   const float *x, int64_t n_rows, float *y, void *scratch, coli_rows_mode mode);

/* n_heads products of one shape in one pass over the pool, as n_heads calls
 * of coli_matmul_ex would give them: head h's weight is w + h * w_head bytes,
 * its input row i x + i * x_row + h * x_head floats, its output row i
 * y + i * y_row + h * y_head floats. Scratch: n_heads times
 * coli_matmul_scratch_size(wtype, n_in, n_rows). */
int coli_matmul_heads(coli_pool *pool, const void *w, size_t w_head, uint32_t wtype, int64_t n_in, int64_t n_out,
                      int n_heads, const float *x, size_t x_row, size_t x_head, int64_t n_rows, float *y,
                      size_t y_row, size_t y_head, void *scratch, coli_rows_mode mode);

/* Same, with activations already converted to the weight's vec_dot type
 * (coli_matmul_quantize): n_rows rows of `xq_stride` bytes each. Lets several
 * weights that read the same input (Q/K/V, gate/up) convert it once. */
int coli_matmul_quantize(coli_pool *pool, uint32_t wtype, int64_t n_in, const float *x, int64_t n_rows,
                         void *xq);
int coli_matmul_q(coli_pool *pool, const void *w, uint32_t wtype, int64_t n_in, int64_t n_out,
                  const void *xq, size_t xq_stride, int64_t n_rows, float *y);

#endif
