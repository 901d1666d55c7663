/* matmul.c — threaded, tiled y = x . W^T over the kernels in force (kernels.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (clock.h) */
#include "matmul.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "kernels.h"
#include "quant.h"
#include "repack.h"

typedef struct {
    /* conversion */
    const float *x;
    void *xq;
    coli_from_float_fn from_float;
    int64_t n_in, n_rows;
    size_t xq_stride;
    int act_blck;               /* activation block size */
    size_t act_blck_bytes;
    /* dot products */
    const char *w;
    size_t w_row_bytes;
    int64_t n_out;
    float *y;
    coli_vec_dot_fn vec_dot;      /* rows [mm_rows, n_rows): ggml's one-row arithmetic */
    coli_vec_dot_fn vec_dot_mm;   /* rows [0, mm_rows): its batched arithmetic */
    coli_vec_dot_nw_fn vec_dot_2w, vec_dot_16w, vec_dot_mm_2w, vec_dot_mm_16w;
    int64_t mm_rows;
    int64_t chunk_rows;
    int64_t n_chunks;
    coli_lanes chunks;          /* claims of the n_chunks */
    coli_pool *pool;
    int quantize;               /* phase 1 needed */
    int64_t q_parts;            /* conversion chunks per activation row */
    int64_t q_blocks;           /* activation blocks per conversion chunk */
    int64_t q_chunks;           /* n_rows * q_parts */
    atomic_llong q_next;        /* next conversion chunk to claim */
    atomic_llong q_done;        /* conversion chunks finished */
    /* several heads of one shape in one call (coli_matmul_heads): head h reads
     * x + h * x_head, converts into xq + h * xq_head, writes y + h * y_head */
    int64_t n_heads, head_chunks;
    size_t w_head, xq_head;     /* bytes */
    size_t x_row, x_head, y_row, y_head; /* floats */
} mm_ctx;

/* Conversion chunk k: of head k / (n_rows * q_parts), row (k / q_parts) % n_rows, a range of its blocks. */
static void quantize_chunk(mm_ctx *c, int64_t k) {
    const int64_t h = k / (c->n_rows * c->q_parts), r = (k / c->q_parts) % c->n_rows, part = k % c->q_parts;
    const int64_t nb = c->n_in / c->act_blck;
    const int64_t b0 = part * c->q_blocks, b1 = b0 + c->q_blocks < nb ? b0 + c->q_blocks : nb;
    c->from_float(c->x + h * c->x_head + r * c->x_row + b0 * c->act_blck,
                  (char *)c->xq + h * c->xq_head + r * c->xq_stride + b0 * c->act_blck_bytes, (b1 - b0) * c->act_blck);
}

/* 16 weight rows by the 16-row kernels, when they exist for every row's arithmetic */
static int dot_16w(const mm_ctx *c, const char *w, const char *xq, float *y0, int64_t o) {
    if ((c->mm_rows > 0 && !c->vec_dot_mm_16w) || (c->mm_rows < c->n_rows && !c->vec_dot_16w)) return 0;
    const char *wr = w + o * c->w_row_bytes;
    if (c->mm_rows > 0)
        c->vec_dot_mm_16w((int)c->n_in, wr, c->w_row_bytes, xq, c->xq_stride, y0 + o, c->y_row, (int)c->mm_rows);
    if (c->mm_rows < c->n_rows)
        c->vec_dot_16w((int)c->n_in, wr, c->w_row_bytes, xq + c->mm_rows * c->xq_stride, c->xq_stride,
                       y0 + c->mm_rows * c->y_row + o, c->y_row, (int)(c->n_rows - c->mm_rows));
    return 1;
}

/* Output columns [o0, o1) of one head: weights w, converted rows xq, output y0. */
static void dot_chunk(const mm_ctx *c, const char *w, const char *xq, float *y0, int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1;) {
        if (o + 16 <= o1 && dot_16w(c, w, xq, y0, o)) {
            o += 16;
            continue;
        }
        const char *wr = w + o * c->w_row_bytes;
        /* a pair of weight rows per call where a kernel does it, same bits */
        const int two = o + 1 < o1 && (c->mm_rows == 0 || c->vec_dot_mm_2w) && (c->mm_rows == c->n_rows || c->vec_dot_2w);
        for (int64_t r = 0; r < c->n_rows;) {
            const int64_t end = r < c->mm_rows ? c->mm_rows : c->n_rows;
            const int nr = (int)(end - r < COLI_MAX_NR ? end - r : COLI_MAX_NR);
            const char *a = xq + r * c->xq_stride;
            float *y = y0 + r * c->y_row + o;
            if (r < c->mm_rows && two) {
                c->vec_dot_mm_2w((int)c->n_in, wr, c->w_row_bytes, a, c->xq_stride, y, c->y_row, nr);
            } else if (r < c->mm_rows) {
                c->vec_dot_mm((int)c->n_in, wr, a, c->xq_stride, y, c->y_row, nr);
            } else if (two) {
                c->vec_dot_2w((int)c->n_in, wr, c->w_row_bytes, a, c->xq_stride, y, c->y_row, nr);
            } else {
                c->vec_dot((int)c->n_in, wr, a, c->xq_stride, y, c->y_row, nr);
            }
            r += nr;
        }
        o += 1 + two;
    }
}

static void mm_worker(void *p, int ith, int nth) {
    mm_ctx *c = p;
    (void)nth;
    /* Work is claimed from atomic counters (coli_pool_run_shared): whichever
     * threads show up share it, and the result does not depend on who did what. */
    if (c->quantize) {
        for (;;) {
            const int64_t k = atomic_fetch_add_explicit(&c->q_next, 1, memory_order_relaxed);
            if (k >= c->q_chunks) break;
            quantize_chunk(c, k);
            atomic_fetch_add_explicit(&c->q_done, 1, memory_order_release);
        }
        for (unsigned i = 1; atomic_load_explicit(&c->q_done, memory_order_acquire) < c->q_chunks; i++)
            if ((i & 1023) == 0) sched_yield();  /* another thread is converting the last chunks */
    }
    int lane = ith;
    for (;;) {
        const int64_t k = coli_lanes_claim(&c->chunks, &lane);
        if (k < 0) break;
        const int64_t h = k / c->head_chunks, o0 = (k % c->head_chunks) * c->chunk_rows;
        const int64_t o1 = o0 + c->chunk_rows < c->n_out ? o0 + c->chunk_rows : c->n_out;
        dot_chunk(c, c->w + h * c->w_head, (const char *)c->xq + h * c->xq_head, c->y + h * c->y_head, o0, o1);
    }
}

size_t coli_matmul_scratch_size(uint32_t wtype, int64_t n_in, int64_t n_rows) {
    if (wtype >= GGML_TYPE_COUNT || n_rows < 0) return 0;
    const coli_type_kernels *k = &coli_kernels()->type[wtype];
    if (!k->vec_dot || k->vec_dot_type == GGML_TYPE_F32) return 0;
    return coli_row_size(k->vec_dot_type, n_in) * (size_t)n_rows;
}

static int check_shape(uint32_t wtype, int64_t n_in, int64_t n_out, int64_t n_rows, const coli_type_kernels **out) {
    if (wtype >= GGML_TYPE_COUNT || !coli_kernels()->type[wtype].vec_dot)
        return coli_fail(COLI_E_UNSUPPORTED, "matmul: no kernels for weight type %u", wtype);
    const coli_type_kernels *k = *out ? *out : coli_weight_kernels(coli_kernels(), wtype, n_out, n_rows);
    if (n_in <= 0 || n_in > INT32_MAX || n_out < 0 || n_rows < 0)
        return coli_fail(COLI_E_ARG, "matmul: bad shape n_in=%lld n_out=%lld n_rows=%lld", (long long)n_in,
                         (long long)n_out, (long long)n_rows);
    if (!coli_row_size(wtype, n_in) || !coli_row_size(k->vec_dot_type, n_in))
        return coli_fail(COLI_E_ARG, "matmul: n_in=%lld is not a multiple of the %s block size", (long long)n_in,
                         ggml_type_get(wtype)->name);
    *out = k;
    return COLI_OK;
}

static void plan_quantize(mm_ctx *c, const ggml_type_traits *at, int nth) {
    c->quantize = 1;
    c->act_blck = at->blck_size;
    c->act_blck_bytes = (size_t)at->type_size;
    const int64_t nb = c->n_in / c->act_blck;
    /* one chunk per row when there are enough rows, else split rows in ~nth parts */
    int64_t parts = c->n_rows >= 2 * nth ? 1 : (2 * nth + c->n_rows - 1) / c->n_rows;
    if (parts > nb) parts = nb;
    c->q_blocks = (nb + parts - 1) / parts;
    c->q_parts = (nb + c->q_blocks - 1) / c->q_blocks;
    c->q_chunks = c->n_heads * c->n_rows * c->q_parts;
    atomic_init(&c->q_next, 0);
    atomic_init(&c->q_done, 0);
}

/* llama.cpp treats the n_rows of one call as one batch (see quant.h); rows
 * "alone" each get the arithmetic a batch of one would get. */
static void set_kernels(mm_ctx *c, const coli_type_kernels *k, coli_rows_mode mode) {
    c->vec_dot = k->vec_dot;
    c->vec_dot_mm = k->vec_dot_mm;
    c->vec_dot_2w = k->vec_dot_2w;
    c->vec_dot_16w = k->vec_dot_16w;
    c->vec_dot_mm_2w = k->vec_dot_mm_2w;
    c->vec_dot_mm_16w = k->vec_dot_mm_16w;
    c->mm_rows = coli_mm_rows(k, c->n_in, c->n_out, c->n_rows);
    if (mode == COLI_ROWS_ALONE) c->mm_rows = coli_mm_rows(k, c->n_in, c->n_out, 1) == 1 ? c->n_rows : 0;
    if (mode == COLI_ROWS_UNIFORM)
        c->mm_rows = k->vec_dot_mm && c->n_in % k->mm_in_mult == 0 && c->n_out % k->mm_out_mult == 0 ? c->n_rows : 0;
}

static void plan_chunks(mm_ctx *c, int nth) {
    /* ~8 chunks per thread for balance (over all heads), at least 16 rows each */
    const int64_t per = (nth * 8 + c->n_heads - 1) / c->n_heads;
    int64_t rows = (c->n_out + per - 1) / per;
    if (rows < 16) rows = 16;
    if (c->vec_dot_16w || c->vec_dot_mm_16w) rows = (rows + 15) & ~(int64_t)15;  /* whole 16-row tiles */
    c->chunk_rows = rows;
    c->head_chunks = (c->n_out + rows - 1) / rows;
    c->n_chunks = c->head_chunks * c->n_heads;
    coli_lanes_init(&c->chunks, c->n_chunks, nth);
}

/* The dot-product half of a context: weights, output and kernels. */
static void mm_init(mm_ctx *c, coli_pool *pool, const void *w, uint32_t wtype, const coli_type_kernels *k,
                    int64_t n_in, int64_t n_out, int64_t n_rows, float *y, coli_rows_mode mode) {
    memset(c, 0, sizeof *c);
    c->n_in = n_in;
    c->n_rows = n_rows;
    c->w = w;
    c->w_row_bytes = coli_row_size(wtype, n_in);
    c->n_out = n_out;
    c->y = y;
    c->n_heads = 1;
    c->x_row = (size_t)n_in;
    c->y_row = (size_t)n_out;
    set_kernels(c, k, mode);
    c->pool = pool;
}

int coli_matmul(coli_pool *pool, const void *w, uint32_t wtype, int64_t n_in, int64_t n_out, const float *x,
                int64_t n_rows, float *y, void *scratch) {
    return coli_matmul_ex(pool, w, wtype, n_in, n_out, x, n_rows, y, scratch, COLI_ROWS_BATCH);
}

int coli_matmul_ex(coli_pool *pool, const void *w, uint32_t wtype, int64_t n_in, int64_t n_out, const float *x,
                   int64_t n_rows, float *y, void *scratch, coli_rows_mode mode) {
    return coli_matmul_heads(pool, w, 0, wtype, n_in, n_out, 1, x, (size_t)n_in, 0, n_rows, y, (size_t)n_out, 0,
                             scratch, mode);
}

int coli_matmul_heads(coli_pool *pool, const void *w, size_t w_head, uint32_t wtype, int64_t n_in, int64_t n_out,
                      int n_heads, const float *x, size_t x_row, size_t x_head, int64_t n_rows, float *y,
                      size_t y_row, size_t y_head, void *scratch, coli_rows_mode mode) {
    const coli_type_kernels *k = NULL;
    if (mode & COLI_ROWS_NOT_REPACKED) {
        if (wtype < GGML_TYPE_COUNT) k = coli_plain_kernels(coli_kernels(), wtype);
        mode = (coli_rows_mode)(mode & ~COLI_ROWS_NOT_REPACKED);
    }
    const bool r16 = mode & COLI_ROWS_R16;
    if (r16) {
        k = coli_r16_kernels(wtype);
        if (!k || n_out % 16 || n_heads != 1)
            return coli_fail(COLI_E_ARG, "matmul: a repacked weight must be one matrix of whole 16-row tiles");
        mode = (coli_rows_mode)(mode & ~COLI_ROWS_R16);
    }
    int rc = check_shape(wtype, n_in, n_out, n_rows, &k);
    if (rc) return rc;
    if (n_heads <= 0 || x_row < (size_t)n_in || y_row < (size_t)n_out)
        return coli_fail(COLI_E_ARG, "matmul_heads: %d heads, row strides %zu / %zu", n_heads, x_row, y_row);
    if (n_rows == 0 || n_out == 0) return COLI_OK;
    mm_ctx c;
    mm_init(&c, pool, w, wtype, k, n_in, n_out, n_rows, y, mode);
    if (r16 && ((c.mm_rows > 0 && !c.vec_dot_mm_16w) || (c.mm_rows < n_rows && !c.vec_dot_16w)))
        return coli_fail(COLI_E_ARG, "matmul: no tile kernel for these rows of a repacked %s weight", ggml_type_get(wtype)->name);
    c.x = x;
    c.n_heads = n_heads;
    c.w_head = w_head;
    c.x_row = x_row;
    c.x_head = x_head;
    c.y_row = y_row;
    c.y_head = y_head;
    if (k->vec_dot_type == GGML_TYPE_F32) { /* the kernels read the strided rows in place */
        c.xq = (void *)x;
        c.xq_stride = x_row * sizeof(float);
        c.xq_head = x_head * sizeof(float);
    } else {
        if (!scratch) return coli_fail(COLI_E_ARG, "matmul: scratch is NULL");
        c.xq = scratch;
        c.xq_stride = coli_row_size(k->vec_dot_type, n_in);
        c.xq_head = c.xq_stride * (size_t)n_rows;
        c.from_float = coli_kernels()->type[k->vec_dot_type].from_float;
        plan_quantize(&c, ggml_type_get(k->vec_dot_type), coli_pool_size(pool));
    }
    plan_chunks(&c, coli_pool_size(pool));
    coli_pool_run_shared(pool, mm_worker, &c);
    return COLI_OK;
}

int coli_matmul_quantize(coli_pool *pool, uint32_t wtype, int64_t n_in, const float *x, int64_t n_rows, void *xq) {
    const coli_type_kernels *k = NULL;
    int rc = check_shape(wtype, n_in, 0, n_rows, &k);
    if (rc) return rc;
    if (n_rows == 0) return COLI_OK;
    if (k->vec_dot_type == GGML_TYPE_F32) {
        memcpy(xq, x, (size_t)(n_in * n_rows) * sizeof(float));
        return COLI_OK;
    }
    const ggml_type_traits *at = ggml_type_get(k->vec_dot_type);
    mm_ctx c;
    memset(&c, 0, sizeof c);
    c.x = x;
    c.xq = xq;
    c.n_in = n_in;
    c.n_rows = n_rows;
    c.n_heads = 1;
    c.x_row = (size_t)n_in;
    c.xq_stride = coli_row_size(k->vec_dot_type, n_in);
    c.from_float = coli_kernels()->type[k->vec_dot_type].from_float;
    c.pool = pool;
    plan_quantize(&c, at, coli_pool_size(pool));
    coli_lanes_init(&c.chunks, 0, 1);  /* no chunks: phase 2 is empty */
    coli_pool_run_shared(pool, mm_worker, &c);
    return COLI_OK;
}

int coli_matmul_q(coli_pool *pool, const void *w, uint32_t wtype, int64_t n_in, int64_t n_out, const void *xq,
                  size_t xq_stride, int64_t n_rows, float *y) {
    const coli_type_kernels *k = NULL;
    int rc = check_shape(wtype, n_in, n_out, n_rows, &k);
    if (rc) return rc;
    if (n_rows == 0 || n_out == 0) return COLI_OK;
    mm_ctx c;
    mm_init(&c, pool, w, wtype, k, n_in, n_out, n_rows, y, COLI_ROWS_BATCH);
    c.xq = (void *)xq;
    c.xq_stride = xq_stride;
    plan_chunks(&c, coli_pool_size(pool));
    coli_pool_run_shared(pool, mm_worker, &c);
    return COLI_OK;
}

/* ---- public test hook ------------------------------------------------------------ */

int colibri_kernel_matmul(uint32_t wtype, const void *w, size_t w_bytes, int64_t n_in, int64_t n_out,
                          const float *x, int64_t n_rows, float *y, int n_threads) {
    const coli_type_kernels *k = NULL;
    int rc = check_shape(wtype, n_in, n_out, n_rows, &k);
    if (rc) return rc;
    if (!w || !x || !y) return coli_fail(COLI_E_ARG, "matmul: NULL buffer");
    const size_t row = coli_row_size(wtype, n_in);
    if ((uint64_t)n_out > SIZE_MAX / row || w_bytes < row * (size_t)n_out)
        return coli_fail(COLI_E_TOO_LONG, "matmul: weight buffer of %zu bytes, %lld rows of %zu bytes needed", w_bytes,
                         (long long)n_out, row);
    if (n_threads < 1 || n_threads > 256) return coli_fail(COLI_E_ARG, "matmul: n_threads = %d", n_threads);
    const size_t sbytes = coli_matmul_scratch_size(wtype, n_in, n_rows);
    void *scratch = sbytes ? aligned_alloc(64, (sbytes + 63) & ~(size_t)63) : NULL;
    if (sbytes && !scratch) return coli_fail(COLI_E_NOMEM, "matmul: %zu bytes of scratch", sbytes);
    coli_pool *pool = n_threads > 1 ? coli_pool_create(n_threads) : NULL;
    if (n_threads > 1 && !pool) { free(scratch); return colibri_last_error_code(); }
    rc = coli_matmul(pool, w, wtype, n_in, n_out, x, n_rows, y, scratch);
    coli_pool_free(pool);
    free(scratch);
    return rc;
}

/* activations of a decode step: small, signed, deterministic */
static void decode_activations(float *x, int64_t n) {
    uint32_t r = 0x9e3779b9u;
    for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)((int32_t)(r >> 8) - (1 << 23)) * (1.0f / (float)(1 << 23));
    }
}

int colibri_kernel_time_decode(const char *isa, uint32_t wtype, const void *w, size_t w_bytes, int64_t n_in,
                               int64_t n_out, int reps, double *seconds) {
    if (!seconds || !w) return coli_fail(COLI_E_ARG, "time_decode: NULL argument");
    const coli_kernel_table *t = coli_kernels_table(isa);
    if (!t) return coli_fail(COLI_E_UNSUPPORTED, "time_decode: kernel isa '%s' not one this CPU runs", isa ? isa : "NULL");
    if (reps < 1 || reps > 100000) return coli_fail(COLI_E_ARG, "time_decode: reps = %d", reps);
    coli_kernels_set_thread_table(t);
    const coli_type_kernels *k = NULL;
    int rc = check_shape(wtype, n_in, n_out, 1, &k);
    const size_t row = rc ? 0 : coli_row_size(wtype, n_in);
    if (!rc && ((uint64_t)n_out > SIZE_MAX / row || w_bytes < row * (size_t)n_out))
        rc = coli_fail(COLI_E_TOO_LONG, "time_decode: weight buffer of %zu bytes, %lld rows of %zu bytes needed",
                       w_bytes, (long long)n_out, row);
    float *x = NULL, *y = NULL;
    void *scratch = NULL;
    if (!rc) {
        const size_t sbytes = coli_matmul_scratch_size(wtype, n_in, 1);
        x = malloc((size_t)n_in * sizeof *x);
        y = malloc((size_t)(n_out > 0 ? n_out : 1) * sizeof *y);
        scratch = sbytes ? aligned_alloc(64, (sbytes + 63) & ~(size_t)63) : NULL;
        if (!x || !y || (sbytes && !scratch)) rc = coli_fail(COLI_E_NOMEM, "time_decode: buffers");
    }
    if (!rc) {
        decode_activations(x, n_in);
        double best = 1e30;
        for (int i = 0; i < reps && !rc; i++) {
            const double t0 = coli_now_s();
            rc = coli_matmul(NULL, w, wtype, n_in, n_out, x, 1, y, scratch);
            const double dt = coli_now_s() - t0;
            if (dt < best) best = dt;
        }
        *seconds = best;
    }
    coli_kernels_set_thread_table(NULL);
    free(x);
    free(y);
    free(scratch);
    return rc;
}

/* The biggest CPU cache Linux lists (the last level), 0 when unknown. */
static size_t last_level_cache_bytes(void) {
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[80], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            size_t v = strtoul(buf, &end, 10);
            v <<= *end == 'K' ? 10 : *end == 'M' ? 20 : 0;
            if (v > best) best = v;
        }
        fclose(f);
    }
    return best;
}

#define STREAM_MIN_BYTES ((size_t)64 << 20)
#define STREAM_MAX_BYTES ((size_t)256 << 20) /* a model load in a small container pays it for a moment */
#define STREAM_MAX_VARIANTS 16

/* Whether a load with each timed set in force would rewrite this matrix into tiles (repack.c). */
static int time_stream_tiles(uint32_t wtype, int64_t n_in, int64_t n_out, const coli_kernel_table *const *tables,
                             int n_tables) {
    int tiles = !coli_repack_off();
    for (int v = 0; v < n_tables && tiles; v++) {
        coli_kernels_set_thread_table(tables[v]);
        tiles = coli_repack_shape(wtype, n_in, n_out);
    }
    coli_kernels_set_thread_table(NULL);
    return tiles;
}

int colibri_kernel_time_stream(uint32_t wtype, const void *w, size_t w_bytes, int64_t n_in, int64_t n_out,
                               size_t stream_bytes, const char *const *isas, const char *const *levels,
                               int n_variants, int rounds, double *seconds) {
    if (!seconds || !w || !isas || !levels) return coli_fail(COLI_E_ARG, "time_stream: NULL argument");
    if (n_variants < 1 || n_variants > STREAM_MAX_VARIANTS)
        return coli_fail(COLI_E_ARG, "time_stream: %d variants (1..%d)", n_variants, STREAM_MAX_VARIANTS);
    if (rounds < 1 || rounds > 1000) return coli_fail(COLI_E_ARG, "time_stream: rounds = %d", rounds);
    const coli_kernel_table *tables[STREAM_MAX_VARIANTS];
    int l2[STREAM_MAX_VARIANTS];
    for (int v = 0; v < n_variants; v++) {
        tables[v] = coli_kernels_table(isas[v]);
        if (!tables[v])
            return coli_fail(COLI_E_UNSUPPORTED, "time_stream: kernel isa '%s' not one this CPU runs",
                             isas[v] ? isas[v] : "NULL");
        l2[v] = coli_prefetch_level_l2(levels[v]);
        if (l2[v] < 0)
            return coli_fail(COLI_E_ARG, "time_stream: prefetch level '%s': expected l1 or l2",
                             levels[v] ? levels[v] : "NULL");
    }
    const coli_type_kernels *k = NULL;
    int rc = check_shape(wtype, n_in, n_out, 1, &k);
    if (rc) return rc;
    const size_t row = coli_row_size(wtype, n_in);
    if ((uint64_t)n_out > SIZE_MAX / row || w_bytes < row * (size_t)n_out)
        return coli_fail(COLI_E_TOO_LONG, "time_stream: weight buffer of %zu bytes, %lld rows of %zu bytes needed",
                         w_bytes, (long long)n_out, row);
    const size_t mat = row * (size_t)n_out;
    if (!stream_bytes) {
        stream_bytes = 2 * last_level_cache_bytes();
        if (stream_bytes < STREAM_MIN_BYTES) stream_bytes = STREAM_MIN_BYTES;
    }
    if (stream_bytes > STREAM_MAX_BYTES) stream_bytes = STREAM_MAX_BYTES;
    if (mat > STREAM_MAX_BYTES / 2)
        return coli_fail(COLI_E_TOO_LONG, "time_stream: %zu weight bytes, at most %zu", mat, STREAM_MAX_BYTES / 2);
    const size_t copies = stream_bytes / mat < 2 ? 2 : stream_bytes / mat;
    const size_t total = (copies * mat + 4095) & ~(size_t)4095;
    char *buf = aligned_alloc(4096, total);
    const size_t sbytes = coli_matmul_scratch_size(wtype, n_in, 1);
    float *x = malloc((size_t)n_in * sizeof *x), *y = malloc((size_t)n_out * sizeof *y);
    void *scratch = sbytes ? aligned_alloc(64, (sbytes + 63) & ~(size_t)63) : NULL;
    /* a matrix a load rewrites into 16-row tiles (repack.c) decodes with the tile kernels: timed as such */
    const int tiles = time_stream_tiles(wtype, n_in, n_out, tables, n_variants);
    void *tmp = tiles ? malloc(16 * row) : NULL;
    if (!buf || !x || !y || (sbytes && !scratch) || (tiles && !tmp))
        rc = coli_fail(COLI_E_NOMEM, "time_stream: %zu bytes", total);
    const int saved_l2 = coli_prefetch_l2;
    const coli_rows_mode mode = tiles ? (coli_rows_mode)(COLI_ROWS_ALONE | COLI_ROWS_R16) : COLI_ROWS_BATCH;
    if (!rc) {
        for (size_t c = 0; c < copies; c++) {
            memcpy(buf + c * mat, w, mat);
            if (tiles) coli_repack_r16(wtype, buf + c * mat, n_in, n_out, tmp);
        }
        decode_activations(x, n_in);
        for (int v = 0; v < n_variants; v++) seconds[v] = 1e30;
        for (int r = -1; r < rounds && !rc; r++) /* round -1: untimed, the buffer's pages and the code warm */
            for (int v = 0; v < n_variants && !rc; v++) {
                coli_kernels_set_thread_table(tables[v]);
                coli_prefetch_l2 = l2[v];
                const double t0 = coli_now_s();
                for (size_t c = 0; c < copies && !rc; c++)
                    rc = coli_matmul_ex(NULL, buf + c * mat, wtype, n_in, n_out, x, 1, y, scratch, mode);
                const double dt = (coli_now_s() - t0) / (double)copies;
                if (r >= 0 && dt < seconds[v]) seconds[v] = dt;
            }
    }
    coli_prefetch_l2 = saved_l2;
    coli_kernels_set_thread_table(NULL);
    free(tmp);
    free(buf);
    free(x);
    free(y);
    free(scratch);
    return rc;
}
