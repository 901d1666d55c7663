/* cpu.c — run-time CPU feature detection (cpuid + xgetbv on x86).
 *
 * A feature counts only when the OS saves its register state: AVX needs
 * XCR0 bits 1-2 (xmm, ymm), AVX-512 also bits 5-7 (opmask, zmm hi256, hi16 zmm).
 * On other architectures every flag is false and the kernels run "scalar".
 *
 * COLI_CPU_ISA (scalar, avx2, avxvnni, avx512; unset: all this CPU has) hides the features above that set,
 * so the engine runs as it would on a CPU without them (an AVX2-only Zen 2, an Alder Lake without AVX-512):
 * the test suite checks the AVX2 kernels that way against an AVX2-only llama.cpp. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../include/colibri.h"
#include "quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void) {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

static void detect(coli_cpu_caps *c) {
    unsigned a, b, cx, d;
    memset(c, 0, sizeof *c);
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return;
    c->sse3 = (cx >> 0) & 1;
    c->ssse3 = (cx >> 9) & 1;
    const bool fma = (cx >> 12) & 1, osxsave = (cx >> 27) & 1, avx = (cx >> 28) & 1, f16c = (cx >> 29) & 1;
    const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    const bool os_ymm = (xcr0 & 0x6) == 0x6;
    const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;
    c->avx = avx && os_ymm;
    c->fma = fma && c->avx;
    c->f16c = f16c && c->avx;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7) return;
    __cpuid_count(7, 0, a, b, cx, d);
    c->avx2 = ((b >> 5) & 1) && c->avx;
    c->avx512f = ((b >> 16) & 1) && os_zmm;
    c->avx512dq = ((b >> 17) & 1) && c->avx512f;
    c->avx512bw = ((b >> 30) & 1) && c->avx512f;
    c->avx512vl = ((b >> 31) & 1) && c->avx512f;
    c->avx512vbmi = ((cx >> 1) & 1) && c->avx512f;
    c->avx512vnni = ((cx >> 11) & 1) && c->avx512f;
    __cpuid_count(7, 1, a, b, cx, d);
    c->avxvnni = ((a >> 4) & 1) && c->avx;
    c->avx512bf16 = ((a >> 5) & 1) && c->avx512f;
}
#else
static void detect(coli_cpu_caps *c) { memset(c, 0, sizeof *c); }
#endif

/* COLI_CPU_ISA: clear what lies above the named set (an unknown name hides nothing) */
static void cap_to_env(coli_cpu_caps *c) {
    const char *isa = getenv("COLI_CPU_ISA");
    if (!isa || !*isa || !strcmp(isa, "avx512")) return;
    const bool scalar = !strcmp(isa, "scalar"), avx2 = !strcmp(isa, "avx2");
    if (!scalar && !avx2 && strcmp(isa, "avxvnni")) return;
    c->avx512f = c->avx512bw = c->avx512vl = c->avx512dq = c->avx512vnni = c->avx512vbmi = c->avx512bf16 = false;
    if (avx2 || scalar) c->avxvnni = false;
    if (scalar) c->avx = c->avx2 = c->fma = c->f16c = false;
}

static coli_cpu_caps g_caps;     /* written once under g_once */
static char g_features[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_once(void) {
    detect(&g_caps);
    cap_to_env(&g_caps);
    const struct { bool on; const char *name; } f[] = {
        {g_caps.sse3, "sse3"}, {g_caps.ssse3, "ssse3"}, {g_caps.avx, "avx"}, {g_caps.avx2, "avx2"},
        {g_caps.fma, "fma"}, {g_caps.f16c, "f16c"}, {g_caps.avxvnni, "avxvnni"},
        {g_caps.avx512f, "avx512f"}, {g_caps.avx512bw, "avx512bw"}, {g_caps.avx512vl, "avx512vl"},
        {g_caps.avx512dq, "avx512dq"}, {g_caps.avx512vnni, "avx512vnni"},
        {g_caps.avx512vbmi, "avx512vbmi"}, {g_caps.avx512bf16, "avx512bf16"},
    };
    size_t len = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].on) continue;
        size_t k = strlen(f[i].name);
        if (len + k + 2 > sizeof g_features) break;
        if (len) g_features[len++] = ' ';
        memcpy(g_features + len, f[i].name, k);
        len += k;
    }
    g_features[len] = '\0';
}

const coli_cpu_caps *coli_cpu(void) {
    pthread_once(&g_once, init_once);
    return &g_caps;
}

bool coli_cpu_can_avx2(void) {
    const coli_cpu_caps *c = coli_cpu();
    return c->avx2 && c->fma && c->f16c;
}

bool coli_cpu_can_avx512(void) {
    const coli_cpu_caps *c = coli_cpu();
    return coli_cpu_can_avx2() && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512vnni;
}

const char *colibri_cpu_features(void) {
    pthread_once(&g_once, init_once);
    return g_features;
}
