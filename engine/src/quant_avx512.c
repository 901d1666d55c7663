/* quant_avx512.c — AVX-512 kernels (placeholder forwarding to AVX2). */
#include "quant.h"

#ifdef COLI_X86
#define FWD(name)                                                                                  \
    void vec_dot_##name##_avx512(int n, const void *w, const void *a, size_t as, float *s, size_t ss, \
                                 int nr) {                                                         \
        vec_dot_##name##_avx2(n, w, a, as, s, ss, nr);                                             \
    }
FWD(f32_f32)
FWD(f16_f16)
FWD(bf16_bf16)
FWD(q4_0_q8_0)
FWD(q5_0_q8_0)
FWD(q8_0_q8_0)
FWD(q4_K_q8_K)
FWD(q5_K_q8_K)
FWD(q6_K_q8_K)
#else
typedef int coli_quant_avx512_unused;
#endif
