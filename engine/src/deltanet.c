/* deltanet.c — the Gated DeltaNet (linear attention) layers of qwen3next / qwen35moe, as llama.cpp 0.3.36's
 * CPU graph computes them (src/models/qwen3next.cpp build_layer_attn_linear, delta-net-base.cpp, and
 * ggml-cpu/ops.cpp's ssm_conv and the fused gated_delta_net op it takes on the CPU for decode and prefill):
 *
 *   qkv = W_qkv x, z = W_gate x, (beta, alpha) from W_ba x (or W_beta, W_alpha)
 *   qkv -> causal conv of d_conv taps over [conv state | qkv] -> silu -> q, k, v
 *   q, k: per head l2 norm (rms_norm with eps / S, times 1 / sqrt(S))
 *   g = softplus(alpha + dt_bias) * ssm_a; beta = sigmoid(b)
 *   per value head: S *= exp(g); delta = (v - S^T k) * beta; S += k delta^T; o = S^T q / sqrt(S)
 *   o -> per head rms_norm * ssm_norm * silu(z) -> W_out
 *
 * The recurrence runs token by token in both decode and prefill (ggml's fused op does the same), so the rows
 * of one sequence are processed in order; every row updates its own sequence's state in place. */
#define _POSIX_C_SOURCE 200112L /* clock_gettime (clock.h) */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "clock.h"
#include "deltanet.h"
#include "error.h"
#include "gcc_dot.h"
#include "ggml_types.h"
#include "kernels.h"
#include "matmul.h"
#include "ops.h"
#include "threadpool.h"


/* ggml_vec_dot_f32 (the F32 one-row kernel: its SIMD accumulators and reduction) */
static float dot_f32(const float *a, const float *b, int n) {
    float sum = 0.0f;
    coli_kernels()->type[GGML_TYPE_F32].vec_dot(n, a, b, 0, &sum, 0, 1);
    return sum;
}

/* build_gdn_l2_norm: ggml_rms_norm(x, eps / n) then ggml_scale(1 / sqrt(n)) */
static void l2_norm(float *x, int n, float eps) {
    coli_rmsnorm(x, x, NULL, n, eps / (float)n);
    const float sc = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= sc;
}

size_t coli_gdn_row_floats(const coli_hparams *hp) {
    const size_t S = (size_t)hp->ssm_d_state, KD = S * hp->ssm_n_k, VD = S * hp->ssm_n_v;
    /* qkv(+z of ssm_in) | z | conv out | ba | o */
    return (2 * KD + 2 * VD) + VD + (2 * KD + VD) + 2 * (size_t)hp->ssm_n_v + VD;
}

int coli_gdn_check_rows(const coli_model *m, const coli_row *rows, int n) {
    if (!m->hp.gdn) return 0;
    for (int i = 0; i < n; i++) {
        coli_kv *kv = rows[i].kv;
        if (rows[i].pos == 0) { /* a sequence (re)starts: an empty state */
            memset(kv->rs, 0, (size_t)kv->n_rs_layers * (kv->rs_conv + kv->rs_ssm) * sizeof(float));
            kv->rs_pos = 0;
        }
        if (rows[i].pos != kv->rs_pos)
            return coli_fail(COLI_E_ARG,
                             "a Gated DeltaNet model's recurrent state holds %d tokens and cannot go back or skip to "
                             "position %d (only a restart at 0)", kv->rs_pos, rows[i].pos);
        kv->rs_pos = rows[i].pos + 1;
    }
    return 0;
}

/* ---- the recurrence, one head and one token: every row j of the state M (M[j][x] = S[x][j], as ggml stores it)
 * is independent of the others, so the op's four passes over the state (ggml_vec_scale_f32 of all of it, the S
 * dots with k, the S ggml_vec_mad_f32, the S dots with q) run here row by row in one pass: the same operations
 * on the same values, in the same order within each row, hence the same bits. Element-wise products and fmas
 * do not depend on the vector width; the dots are ggml_vec_dot_f32's accumulators and reduction per ISA. */
typedef void (*gdn_rows_fn)(float *M, int S, const float *k, const float *q, const float *v, float beta, float eg,
                            float scale, float *out);

/* any S, any kernel table: ggml_vec_dot_f32 through the table (the scalar twin) */
static void gdn_rows_generic(float *M, int S, const float *k, const float *q, const float *v, float beta, float eg,
                             float scale, float *out) {
    for (int j = 0; j < S; j++) {
        float *Mj = M + (size_t)j * S;
        for (int x = 0; x < S; x++) Mj[x] *= eg;
        const float d = (v[j] - dot_f32(Mj, k, S)) * beta;
        for (int x = 0; x < S; x++) Mj[x] = fmaf(k[x], d, Mj[x]);
        out[j] = dot_f32(Mj, q, S) * scale;
    }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define GDN_X86 1
#define TGT512 __attribute__((target("avx512f,avx512dq,avx2,fma")))
#define INL512 static inline __attribute__((always_inline, target("avx512f,avx512dq,avx2,fma")))
#define TGT256 __attribute__((target("avx2,fma")))
#define INL256 static inline __attribute__((always_inline, target("avx2,fma")))

/* ggml_vec_dot_f32 on an AVX-512 build, S % 64 == 0: four 16-lane accumulators over steps of 64 (fmadd from
 * zero), reduced (0+2) + (1+3), then _mm512_reduce_add_ps; no leftovers */
INL512 float red512(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
}

/* one row of NV16 (S / 16, a constant where inlined) vectors kept in registers */
INL512 void row512(float *Mj, const int NV16, const float *k, const float *q, float vj, float beta, __m512 vg,
                   float scale, float *oj) {
    __m512 m[8], a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int c = 0; c < NV16; c++) {
        m[c] = _mm512_mul_ps(_mm512_loadu_ps(Mj + 16 * c), vg);
        a[c & 3] = _mm512_fmadd_ps(m[c], _mm512_loadu_ps(k + 16 * c), a[c & 3]);
    }
    const __m512 vd = _mm512_set1_ps((vj - red512(a[0], a[1], a[2], a[3])) * beta);
    a[0] = a[1] = a[2] = a[3] = _mm512_setzero_ps();
    for (int c = 0; c < NV16; c++) {
        m[c] = _mm512_fmadd_ps(_mm512_loadu_ps(k + 16 * c), vd, m[c]);
        _mm512_storeu_ps(Mj + 16 * c, m[c]);
        a[c & 3] = _mm512_fmadd_ps(m[c], _mm512_loadu_ps(q + 16 * c), a[c & 3]);
    }
    *oj = red512(a[0], a[1], a[2], a[3]) * scale;
}

TGT512 static void gdn_rows_avx512(float *M, int S, const float *k, const float *q, const float *v, float beta,
                                   float eg, float scale, float *out) {
    const __m512 vg = _mm512_set1_ps(eg);
    if (S == 64) {
        for (int j = 0; j < 64; j++) row512(M + (size_t)j * 64, 4, k, q, v[j], beta, vg, scale, out + j);
    } else if (S == 128) {
        for (int j = 0; j < 128; j++) row512(M + (size_t)j * 128, 8, k, q, v[j], beta, vg, scale, out + j);
    } else { /* another multiple of 64: the same order through memory */
        for (int j = 0; j < S; j++) {
            float *Mj = M + (size_t)j * S;
            __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            for (int c = 0; c < S / 16; c++) {
                const __m512 m = _mm512_mul_ps(_mm512_loadu_ps(Mj + 16 * c), vg);
                _mm512_storeu_ps(Mj + 16 * c, m);
                a[c & 3] = _mm512_fmadd_ps(m, _mm512_loadu_ps(k + 16 * c), a[c & 3]);
            }
            const __m512 vd = _mm512_set1_ps((v[j] - red512(a[0], a[1], a[2], a[3])) * beta);
            a[0] = a[1] = a[2] = a[3] = _mm512_setzero_ps();
            for (int c = 0; c < S / 16; c++) {
                const __m512 m = _mm512_fmadd_ps(_mm512_loadu_ps(k + 16 * c), vd, _mm512_loadu_ps(Mj + 16 * c));
                _mm512_storeu_ps(Mj + 16 * c, m);
                a[c & 3] = _mm512_fmadd_ps(m, _mm512_loadu_ps(q + 16 * c), a[c & 3]);
            }
            out[j] = red512(a[0], a[1], a[2], a[3]) * scale;
        }
    }
}

/* ggml_vec_dot_f32 on an AVX2 build, S % 32 == 0: four 8-lane accumulators over steps of 32, reduced (0+2),
 * (1+3), (0+1), then lo + hi and two hadds (quant_avx2.c's reduce4_f32x8) */
INL256 float red256(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

TGT256 static void gdn_rows_avx2(float *M, int S, const float *k, const float *q, const float *v, float beta,
                                 float eg, float scale, float *out) {
    const __m256 vg = _mm256_set1_ps(eg);
    for (int j = 0; j < S; j++) {
        float *Mj = M + (size_t)j * S;
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int c = 0; c < S / 8; c++) {
            const __m256 m = _mm256_mul_ps(_mm256_loadu_ps(Mj + 8 * c), vg);
            _mm256_storeu_ps(Mj + 8 * c, m);
            a[c & 3] = _mm256_fmadd_ps(m, _mm256_loadu_ps(k + 8 * c), a[c & 3]);
        }
        const __m256 vd = _mm256_set1_ps((v[j] - red256(a[0], a[1], a[2], a[3])) * beta);
        a[0] = a[1] = a[2] = a[3] = _mm256_setzero_ps();
        for (int c = 0; c < S / 8; c++) {
            const __m256 m = _mm256_fmadd_ps(_mm256_loadu_ps(k + 8 * c), vd, _mm256_loadu_ps(Mj + 8 * c));
            _mm256_storeu_ps(Mj + 8 * c, m);
            a[c & 3] = _mm256_fmadd_ps(m, _mm256_loadu_ps(q + 8 * c), a[c & 3]);
        }
        out[j] = red256(a[0], a[1], a[2], a[3]) * scale;
    }
}
#endif

/* the kernel table's ISA picks the twin whose dot is its F32 vec_dot */
static gdn_rows_fn gdn_rows_pick(int S) {
#ifdef GDN_X86
    const char *isa = coli_kernels()->name;
    if (!strcmp(isa, "avx512") && S % 64 == 0) return gdn_rows_avx512;
    if ((!strcmp(isa, "avx2") || !strcmp(isa, "avxvnni")) && S % 32 == 0) return gdn_rows_avx2;
#endif
    (void)S;
    return gdn_rows_generic;
}

/* One layer's work after the projections, shared by the pool's threads: the conv by channel blocks, silu and
 * the l2 norms by tokens, the recurrence and the gated norm by value heads (each head runs its rows in order,
 * so the rows of one sequence update its state in order). */
typedef struct {
    const coli_model *m;
    coli_state *s;
    const coli_layer *L;
    int n, in_w;
    float *in, *zb, *conv, *ba, *o;
    gdn_rows_fn rows;
    _Atomic int next;
} gdn_job;

enum { GDN_CONV_BLOCK = 128 };

static float *rs_of(const coli_state *s, const coli_layer *L, int i) {
    coli_kv *kv = s->rows[i].kv;
    return kv->rs + (size_t)L->rs_slot * (kv->rs_conv + kv->rs_ssm);
}

/* Row i's snapshot of this layer's state (laid out as rs_of's), or NULL: a verify keeps the state after each
 * drafted row but its last, so that a rejected draft is taken back by a copy, not by running the kept rows again */
static float *snap_of(const coli_state *s, const coli_layer *L, int i) {
    const coli_row *row = &s->rows[i];
    return row->snap ? row->snap + (size_t)L->rs_slot * (row->kv->rs_conv + row->kv->rs_ssm) : NULL;
}

/* ggml_ssm_conv over [state | x], the state moved on by x; channels c0..c1. Its sum over the taps is a plain loop,
 * as GCC vectorised it for the reference build (gcc_dot.h): the released models' 4 taps are 4 fmas on AVX-512 and
 * 4 rounded products added on AVX2. */
static void gdn_conv(gdn_job *j, int c0, int c1) {
    const int KC = j->m->hp.ssm_d_conv, lanes = coli_kernels()->f32_lanes; /* KC <= 64 (model.c) */
    float taps[64];
    const int CD = 2 * j->m->hp.ssm_d_state * j->m->hp.ssm_n_k + j->m->hp.ssm_d_state * j->m->hp.ssm_n_v;
    for (int i = 0; i < j->n; i++) {
        float *cst = rs_of(j->s, j->L, i), *snap = snap_of(j->s, j->L, i);
        const float *row = j->in + (size_t)i * j->in_w;
        float *conv = j->conv + (size_t)i * CD;
        for (int c = c0; c < c1; c++) {
            float *w = cst + (size_t)c * (KC - 1);
            memcpy(taps, w, (size_t)(KC - 1) * sizeof(float));
            taps[KC - 1] = row[c];
            conv[c] = coli_gcc_dot(taps, j->L->ssm_conv1d + (size_t)c * KC, KC, 0.0f, lanes);
            for (int t = 0; t < KC - 2; t++) w[t] = w[t + 1];
            w[KC - 2] = row[c];
        }
        const size_t at = (size_t)c0 * (KC - 1);
        if (snap) memcpy(snap + at, cst + at, (size_t)(c1 - c0) * (KC - 1) * sizeof(float));
    }
}

/* ggml_vec_silu_f32: x / (1 + exp(-x)); the table's SIMD swiglu times exact ones where it has one (its whole
 * vectors and libm tail split the row as coli_silu does), else coli_silu */
static void silu(float *x, int n) {
    if (!coli_kernels()->swiglu) {
        coli_silu(x, n);
        return;
    }
    float ones[256];
    for (int i = 0; i < 256; i++) ones[i] = 1.0f;
    for (int i = 0; i < n; i += 256) coli_swiglu(x + i, ones, n - i < 256 ? n - i : 256);
}

/* silu of the conv output, then q, k: per head l2 norm */
static void gdn_qk(gdn_job *j, int i) {
    const coli_hparams *hp = &j->m->hp;
    const int S = hp->ssm_d_state, NK = hp->ssm_n_k, KD = S * NK, CD = 2 * KD + S * hp->ssm_n_v;
    float *conv = j->conv + (size_t)i * CD;
    silu(conv, CD);
    for (int h = 0; h < NK; h++) {
        l2_norm(conv + h * S, S, hp->rms_eps);
        l2_norm(conv + KD + h * S, S, hp->rms_eps);
    }
}

/* value head h over every row: g and beta, the recurrence, the gated norm rms_norm(o) * ssm_norm * silu(z) */
static void gdn_head(gdn_job *j, int h) {
    const coli_hparams *hp = &j->m->hp;
    const coli_layer *L = j->L;
    const int S = hp->ssm_d_state, NK = hp->ssm_n_k, NV = hp->ssm_n_v, r = NV / NK;
    const int KD = S * NK, VD = S * NV, CD = 2 * KD + VD;
    const float eps = hp->rms_eps, scale = 1.0f / sqrtf((float)S);
    const int kh = hp->gdn_k_modulo ? h % NK : h / r;
    for (int i = 0; i < j->n; i++) {
        coli_kv *kv = j->s->rows[i].kv;
        float *M = rs_of(j->s, L, i) + kv->rs_conv + (size_t)h * S * S;
        const float *conv = j->conv + (size_t)i * CD;
        const float *bar = j->ba + (size_t)i * 2 * NV;
        /* qwen3next: beta/alpha interleaved per key-head group [b (r) | a (r)]; qwen35moe: [all b | all a] */
        const float b = L->ssm_ba.n_in ? bar[(h / r) * 2 * r + h % r] : bar[h];
        const float a = L->ssm_ba.n_in ? bar[(h / r) * 2 * r + r + h % r] : bar[NV + h];
        const float beta = 1.0f / (1.0f + expf(-b));
        const float t = a + L->ssm_dt[h];
        const float sp = t > 20.0f ? t : logf(1.0f + expf(t));
        const float g = sp * L->ssm_a[h];
        float *oh = j->o + (size_t)i * VD + h * S;
        j->rows(M, S, conv + KD + kh * S, conv + kh * S, conv + 2 * KD + h * S, beta, expf(g), scale, oh);
        float *snap = snap_of(j->s, L, i);
        if (snap) memcpy(snap + kv->rs_conv + (size_t)h * S * S, M, (size_t)S * S * sizeof(float));
        coli_rmsnorm(oh, oh, L->ssm_norm, S, eps);
        float *zh = j->zb + (size_t)i * VD + h * S;
        silu(zh, S);
        for (int x = 0; x < S; x++) oh[x] *= zh[x];
    }
}

static void gdn_conv_worker(void *ctx, int ith, int nth) {
    gdn_job *j = ctx;
    (void)ith, (void)nth;
    const coli_hparams *hp = &j->m->hp;
    const int CD = 2 * hp->ssm_d_state * hp->ssm_n_k + hp->ssm_d_state * hp->ssm_n_v;
    for (int c; (c = atomic_fetch_add_explicit(&j->next, GDN_CONV_BLOCK, memory_order_relaxed)) < CD;)
        gdn_conv(j, c, c + GDN_CONV_BLOCK < CD ? c + GDN_CONV_BLOCK : CD);
}

static void gdn_qk_worker(void *ctx, int ith, int nth) {
    gdn_job *j = ctx;
    (void)ith, (void)nth;
    for (int i; (i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n;) gdn_qk(j, i);
}

static void gdn_head_worker(void *ctx, int ith, int nth) {
    gdn_job *j = ctx;
    (void)ith, (void)nth;
    for (int h; (h = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->m->hp.ssm_n_v;) gdn_head(j, h);
}

static void gdn_run(coli_pool *pool, coli_pool_fn fn, gdn_job *j) {
    atomic_store_explicit(&j->next, 0, memory_order_relaxed);
    coli_pool_run_shared(pool, fn, j);
}

static int gdn_layer(const coli_model *m, coli_state *s, int il, int n) {
    const coli_hparams *hp = &m->hp;
    const coli_layer *L = &m->layers[il];
    const int E = hp->n_embd, S = hp->ssm_d_state, NK = hp->ssm_n_k, NV = hp->ssm_n_v, r = NV / NK;
    const int KD = S * NK, VD = S * NV, CD = 2 * KD + VD;
    const int in_w = L->ssm_legacy_in ? CD + VD : CD;
    float *in = s->gdn;                               /* [n][in_w] */
    float *zb = in + (size_t)n * in_w;                /* [n][VD] */
    float *conv = zb + (size_t)n * VD;                /* [n][CD] */
    float *ba = conv + (size_t)n * CD;                /* [n][2 NV] */
    float *o = ba + (size_t)n * 2 * NV;               /* [n][VD] */
    int rc;
    for (int i = 0; i < n; i++) coli_rmsnorm(s->xn + (size_t)i * E, s->x + (size_t)i * E, L->attn_norm, E, hp->rms_eps);
    if ((rc = coli_state_matmul(s, &L->ssm_qkv, s->xn, n, in))) return rc;
    if (!L->ssm_legacy_in && (rc = coli_state_matmul(s, &L->ssm_gate, s->xn, n, zb))) return rc;
    if (L->ssm_ba.n_in) {
        if ((rc = coli_state_matmul(s, &L->ssm_ba, s->xn, n, ba))) return rc;
    } else { /* qwen35moe: beta then alpha, each [NV]; laid out as one group of NV betas and NV alphas */
        if ((rc = coli_state_matmul(s, &L->ssm_beta, s->xn, n, o))) return rc;
        for (int i = 0; i < n; i++) memcpy(ba + (size_t)i * 2 * NV, o + (size_t)i * NV, (size_t)NV * sizeof(float));
        if ((rc = coli_state_matmul(s, &L->ssm_alpha, s->xn, n, o))) return rc;
        for (int i = 0; i < n; i++) memcpy(ba + (size_t)i * 2 * NV + NV, o + (size_t)i * NV, (size_t)NV * sizeof(float));
    }
    if (L->ssm_legacy_in) /* [q k v z] per key-head group -> [q... | k... | v...] and z */
        for (int i = 0; i < n; i++) {
            float *row = in + (size_t)i * in_w, *z = zb + (size_t)i * VD, *tmp = conv + (size_t)i * CD;
            const int gw = 2 * S + 2 * r * S;
            for (int g = 0; g < NK; g++) {
                const float *src = row + (size_t)g * gw;
                memcpy(tmp + g * S, src, (size_t)S * sizeof(float));
                memcpy(tmp + KD + g * S, src + S, (size_t)S * sizeof(float));
                memcpy(tmp + 2 * KD + g * r * S, src + 2 * S, (size_t)r * S * sizeof(float));
                memcpy(z + g * r * S, src + 2 * S + r * S, (size_t)r * S * sizeof(float));
            }
            memcpy(row, tmp, (size_t)CD * sizeof(float));
        }
    gdn_job j = {.m = m, .s = s, .L = L, .n = n, .in_w = in_w, .in = in, .zb = zb, .conv = conv, .ba = ba, .o = o,
                 .rows = gdn_rows_pick(S)};
    /* one decode row of a small state is a few microseconds of work: the pool's hand-off would cost more */
    const int threaded = coli_pool_size(s->pool) > 1 && (double)n * NV * S * S >= 65536.0;
    if (threaded && n > 1) {
        gdn_run(s->pool, gdn_conv_worker, &j);
        gdn_run(s->pool, gdn_qk_worker, &j);
    } else {
        gdn_conv(&j, 0, CD);
        for (int i = 0; i < n; i++) gdn_qk(&j, i);
    }
    if (threaded) {
        gdn_run(s->pool, gdn_head_worker, &j);
    } else {
        for (int h = 0; h < NV; h++) gdn_head(&j, h);
    }
    return coli_state_matmul(s, &L->ssm_out, o, n, s->tmp);
}

int coli_gdn_layer(const coli_model *m, coli_state *s, int il, int n) {
    const double t0 = coli_now_s();
    const int rc = gdn_layer(m, s, il, n);
    s->t_linear += coli_now_s() - t0; /* the forward pass counts it in t_attention too; stats.c takes it apart */
    return rc;
}
