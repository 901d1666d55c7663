/* kernel_api.c — the public kernel hooks (colibri_kernel_*, colibri.h's
 * KERNELS section but colibri_kernel_matmul, which is matmul.c's): argument
 * checks around the kernels in force, for tests and benchmarks. */
#include <stdlib.h>
#include <string.h>

#include "../include/colibri.h"
#include "error.h"
#include "kernels.h"
#include "ops.h"
#include "quant_iq23.h"

int colibri_kernel_set_isa(const char *isa) { return coli_kernels_select(isa); }

const char *colibri_kernel_isa(void) { return coli_kernels()->name; }

int colibri_kernel_same_bits(uint32_t wtype) { return coli_kernels_same_bits(wtype); }

int colibri_kernel_has_isa(const char *isa) { return coli_kernels_table(isa) != NULL; }

int colibri_kernel_set_type_isa(uint32_t wtype, const char *isa) { return coli_kernels_select_type(wtype, isa); }

int colibri_kernel_set_type_decode_isa(uint32_t wtype, const char *isa) {
    return coli_kernels_select_type_decode(wtype, isa);
}

/* prefetch.h's level (read by the x86 kernels; defined on every target) */
int coli_prefetch_l2;

int coli_prefetch_level_l2(const char *level) {
    return !level ? -1 : !strcmp(level, "l2") ? 1 : !strcmp(level, "l1") ? 0 : -1;
}

int colibri_kernel_set_prefetch(const char *level) {
    const int l2 = coli_prefetch_level_l2(level);
    if (l2 < 0) return coli_fail(COLI_E_ARG, "kernel prefetch level '%s': expected l1 or l2", level ? level : "NULL");
    coli_prefetch_l2 = l2;
    return COLI_OK;
}

const char *colibri_kernel_prefetch(void) { return coli_prefetch_l2 ? "l2" : "l1"; }

/* quant_iq23.h's lookup way (read by the AVX-512 grid i-quant kernels; defined on every target) */
int coli_iq_gather;

int colibri_kernel_set_lookup(const char *way) { return coli_kernels_set_lookup(way); }

const char *colibri_kernel_lookup(void) { return coli_kernels_lookup(); }

void colibri_kernel_lookup_ns(double *loads_ns, double *gather_ns) { coli_kernels_lookup_ns(loads_ns, gather_ns); }

const char *colibri_kernel_type_isa(uint32_t wtype) {
    return wtype < GGML_TYPE_COUNT && ggml_type_get(wtype) ? coli_kernels_type_isa(wtype) : NULL;
}

const char *colibri_kernel_type_decode_isa(uint32_t wtype) {
    return wtype < GGML_TYPE_COUNT && ggml_type_get(wtype) ? coli_kernels_type_decode_isa(wtype) : NULL;
}

/* Checks type, n (> 0, block multiple, <= INT32_MAX for dots) and buffer size. */
static int check_row(const char *what, uint32_t type, int64_t n, size_t bytes, size_t *need) {
    const ggml_type_traits *tt = ggml_type_get(type);
    if (!tt) return coli_fail(COLI_E_ARG, "%s: unknown ggml type %u", what, type);
    if (n <= 0 || n % tt->blck_size)
        return coli_fail(COLI_E_ARG, "%s: n = %lld is not a positive multiple of the %s block size %d", what,
                         (long long)n, tt->name, tt->blck_size);
    *need = coli_row_size(type, n);
    if (bytes < *need)
        return coli_fail(COLI_E_TOO_LONG, "%s: buffer of %zu bytes, %lld %s elements need %zu", what, bytes,
                         (long long)n, tt->name, *need);
    return COLI_OK;
}

int colibri_kernel_partner_type(uint32_t wtype) {
    const coli_type_kernels *k = wtype < GGML_TYPE_COUNT ? &coli_kernels()->type[wtype] : NULL;
    if (!k || !k->to_float) return coli_fail(COLI_E_UNSUPPORTED, "no kernels for ggml type %u", wtype);
    return (int)k->vec_dot_type;
}

int colibri_kernel_dequantize(uint32_t type, const void *src, size_t src_bytes, float *dst, int64_t n) {
    size_t need = 0;
    int rc = check_row("dequantize", type, n, src_bytes, &need);
    if (rc) return rc;
    if (!src || !dst) return coli_fail(COLI_E_ARG, "dequantize: NULL buffer");
    const coli_type_kernels *k = &coli_kernels()->type[type];
    if (!k->to_float) return coli_fail(COLI_E_UNSUPPORTED, "dequantize: type %s not supported", ggml_type_get(type)->name);
    k->to_float(src, dst, n);
    return COLI_OK;
}

int colibri_kernel_quantize(uint32_t type, const float *src, int64_t n, void *dst, size_t dst_bytes) {
    size_t need = 0;
    int rc = check_row("quantize", type, n, dst_bytes, &need);
    if (rc) return rc;
    if (!src || !dst) return coli_fail(COLI_E_ARG, "quantize: NULL buffer");
    coli_from_float_fn f = NULL;
    switch (type) {
    case GGML_TYPE_F32: memcpy(dst, src, need); return COLI_OK;
    case GGML_TYPE_F16: f = quantize_row_f16; break;
    case GGML_TYPE_BF16: f = quantize_row_bf16; break;
    case GGML_TYPE_Q4_0: f = quantize_row_q4_0_ref; break;
    case GGML_TYPE_Q4_1: f = quantize_row_q4_1_ref; break;
    case GGML_TYPE_Q5_0: f = quantize_row_q5_0_ref; break;
    case GGML_TYPE_Q5_1: f = quantize_row_q5_1_ref; break;
    case GGML_TYPE_Q8_0: f = quantize_row_q8_0_ref; break;
    case GGML_TYPE_Q8_1: f = quantize_row_q8_1_ref; break;
    case GGML_TYPE_Q8_K: f = quantize_row_q8_K_ref; break;
    default: return coli_fail(COLI_E_UNSUPPORTED, "quantize: no reference quantizer for %s", ggml_type_get(type)->name);
    }
    f(src, dst, n);
    return COLI_OK;
}

int colibri_kernel_quantize_act(uint32_t type, const float *src, int64_t n, void *dst, size_t dst_bytes) {
    size_t need = 0;
    int rc = check_row("quantize_act", type, n, dst_bytes, &need);
    if (rc) return rc;
    if (!src || !dst) return coli_fail(COLI_E_ARG, "quantize_act: NULL buffer");
    const coli_type_kernels *k = &coli_kernels()->type[type];
    if (type == GGML_TYPE_F32) { memcpy(dst, src, need); return COLI_OK; }
    if (!k->from_float || k->vec_dot_type != type)
        return coli_fail(COLI_E_UNSUPPORTED, "quantize_act: %s is not an activation type", ggml_type_get(type)->name);
    k->from_float(src, dst, n);
    return COLI_OK;
}

int colibri_kernel_vec_dot(uint32_t wtype, int64_t n, const void *w, size_t w_bytes, const float *x, float *out) {
    size_t need = 0;
    int rc = check_row("vec_dot", wtype, n, w_bytes, &need);
    if (rc) return rc;
    if (!w || !x || !out) return coli_fail(COLI_E_ARG, "vec_dot: NULL buffer");
    if (n > INT32_MAX) return coli_fail(COLI_E_TOO_LONG, "vec_dot: n = %lld too long", (long long)n);
    const coli_kernel_table *t = coli_kernels();
    const coli_type_kernels *k = &t->type[wtype];
    if (!k->vec_dot) return coli_fail(COLI_E_UNSUPPORTED, "vec_dot: type %s not supported", ggml_type_get(wtype)->name);
    const uint32_t at = k->vec_dot_type;
    const void *a = x;
    void *tmp = NULL;
    if (at != GGML_TYPE_F32) {
        size_t bytes = coli_row_size(at, n);
        if (bytes == 0) return coli_fail(COLI_E_ARG, "vec_dot: n = %lld not a multiple of the activation block", (long long)n);
        tmp = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        if (!tmp) return coli_fail(COLI_E_NOMEM, "vec_dot: %zu bytes", bytes);
        t->type[at].from_float(x, tmp, n);
        a = tmp;
    }
    k->vec_dot((int)n, w, a, 0, out, 1, 1);
    free(tmp);
    return COLI_OK;
}

int colibri_kernel_pv(int len, int n_d, int nr, const uint16_t *v, const uint16_t *p, float *out, int transposed) {
    if (len <= 0 || len % 64 || n_d <= 0 || n_d % 16 || nr < 1 || nr > COLI_PV_MAX_HEADS || !v || !p || !out)
        return coli_fail(COLI_E_ARG, "pv: len %% 64, n_d %% 16 must be 0 and nr 1..%d", COLI_PV_MAX_HEADS);
    const coli_kernel_table *t = coli_kernels();
    const coli_type_kernels *w = &t->f16_f32a;
    if (!transposed && !t->pv_rows_f32a && !t->pv_rows_f16)
        return coli_fail(COLI_E_UNSUPPORTED, "pv: the %s kernels have no pv_rows", t->name);
    if (transposed == 2 && !w->vec_dot)
        return coli_fail(COLI_E_UNSUPPORTED, "pv: the %s kernels have no widened F16 dots", t->name);
    const int widen = transposed == 2 || (!transposed && t->pv_rows_f32a);
    uint16_t *vt = transposed ? malloc((size_t)len * n_d * sizeof *vt) : NULL;
    float *pf = widen ? malloc((size_t)nr * len * sizeof *pf) : NULL;
    if ((transposed && !vt) || (widen && !pf)) {
        free(vt);
        free(pf);
        return coli_fail(COLI_E_NOMEM, "pv: out of memory");
    }
    if (pf) w->to_float(p, pf, (int64_t)nr * len); /* attention's widening */
    if (!transposed) { /* the rows kernels: widened where the set has them, else up to COLI_MAX_NR heads a call */
        if (pf)
            t->pv_rows_f32a(len, v, (size_t)n_d, n_d, pf, (size_t)len, out, (size_t)n_d, nr);
        for (int r0 = 0; !pf && r0 < nr; r0 += COLI_MAX_NR)
            t->pv_rows_f16(len, v, (size_t)n_d, n_d, p + (size_t)r0 * len, (size_t)len, out + (size_t)r0 * n_d,
                           (size_t)n_d, nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR);
        free(pf);
        return COLI_OK;
    }
    for (int c = 0; c < len; c++)
        for (int d = 0; d < n_d; d++) vt[(size_t)d * len + c] = v[(size_t)c * n_d + d];
    for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR) { /* the one-row dots take COLI_MAX_NR rows a call */
        const int nr1 = nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR;
        for (int d = 0; d < n_d; d++) {
            float *o = out + (size_t)r0 * n_d + d;
            if (pf)
                w->vec_dot(len, vt + (size_t)d * len, pf + (size_t)r0 * len, (size_t)len * sizeof *pf, o, (size_t)n_d, nr1);
            else
                t->type[GGML_TYPE_F16].vec_dot(len, vt + (size_t)d * len, p + (size_t)r0 * len, (size_t)len * sizeof *p,
                                               o, (size_t)n_d, nr1);
        }
    }
    free(vt);
    free(pf);
    return COLI_OK;
}

int colibri_kernel_kq(int n, int n_rows, int nr, const uint16_t *k, const uint16_t *q, float *out, int rows) {
    if (n <= 0 || n % 32 || n_rows < 1 || nr < 1 || nr > COLI_PV_MAX_HEADS || !k || !q || !out)
        return coli_fail(COLI_E_ARG, "kq: n %% 32 must be 0, n_rows >= 1 and nr 1..%d", COLI_PV_MAX_HEADS);
    const coli_kernel_table *t = coli_kernels();
    if (rows) {
        if (!t->kq_rows_f32a) return coli_fail(COLI_E_UNSUPPORTED, "kq: the %s kernels have no kq_rows", t->name);
        float *qf = malloc((size_t)nr * n * sizeof *qf);
        if (!qf) return coli_fail(COLI_E_NOMEM, "kq: out of memory");
        t->f16_f32a.to_float(q, qf, (int64_t)nr * n); /* attention's widening */
        t->kq_rows_f32a(n, k, (size_t)n, n_rows, qf, (size_t)n, out, (size_t)n_rows, nr);
        free(qf);
        return COLI_OK;
    }
    for (int c = 0; c < n_rows; c++) /* the one-row F16 dot, COLI_MAX_NR queries a call */
        for (int r0 = 0; r0 < nr; r0 += COLI_MAX_NR)
            t->type[GGML_TYPE_F16].vec_dot(n, k + (size_t)c * n, q + (size_t)r0 * n, (size_t)n * sizeof *q,
                                           out + (size_t)r0 * n_rows + c, (size_t)n_rows,
                                           nr - r0 < COLI_MAX_NR ? nr - r0 : COLI_MAX_NR);
    return COLI_OK;
}

int colibri_kernel_swiglu(float *x, const float *g, int n, int lanes) {
    if (!x || !g || n < 0) return coli_fail(COLI_E_ARG, "swiglu: NULL buffer or n < 0");
    if (lanes != 0 && lanes != 8 && lanes != 16) return coli_fail(COLI_E_ARG, "swiglu: lanes %d is not 0, 8 or 16", lanes);
    if (lanes)
        coli_swiglu_lanes(x, g, n, lanes);
    else
        coli_swiglu(x, g, n);
    return COLI_OK;
}

int32_t colibri_kernel_argmax(const float *x, int n) {
    if (!x || n < 1) return 0;
    return coli_kernels()->argmax(x, n);
}
