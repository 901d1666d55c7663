/* prefetch.h — where the SIMD kernels' software prefetches of weights land.
 *
 * Decode reads each weight once, so the kernels prefetch the next tile of rows
 * themselves (the hardware prefetcher stops at every 4 KiB page). Into L1 (T0)
 * is right on Intel; on AMD Zen 4 the bursts of T0 prefetches a 16-row AVX-512
 * tile issues stall the core on its L1 miss buffers (Q4_K MoE decode 27 tok/s
 * with T0, 43 with T1). The level is chosen at model load by measuring
 * (kernel_choice.py, colibri_kernel_set_prefetch); it moves when a line
 * arrives, never a result. Include inside COLI_X86 sections only. */
#ifndef COLI_PREFETCH_H
#define COLI_PREFETCH_H

#include <xmmintrin.h>

extern int coli_prefetch_l2; /* 0: into L1 (the default), 1: into L2 */

/* A macro, not an inline function: GCC (12, -O1 and up) dropped the calls of a
 * plain inline helper from the target("avx512...") kernels outright. */
#define COLI_PREFETCH_W(p)                                                      \
    do {                                                                        \
        const char *coli_pf_ = (const char *)(p);                               \
        if (coli_prefetch_l2) _mm_prefetch(coli_pf_, _MM_HINT_T1);              \
        else _mm_prefetch(coli_pf_, _MM_HINT_T0);                               \
    } while (0)

#endif
