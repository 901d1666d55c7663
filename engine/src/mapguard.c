/* mapguard.c — SIGBUS on a guarded file mapping becomes zero pages and a count (mapguard.h). */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include "mapguard.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_GUARDS 64

typedef struct {
    _Atomic(uintptr_t) base; /* 0: free */
    _Atomic(size_t) size;
    atomic_int faults;
} guard;

static guard guards[MAX_GUARDS];
static struct sigaction previous;
static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;

static _Atomic(uintptr_t) last_chained; /* the address last handed on */

/* Not our fault: hand it on as if we were not there. Once per address: a
 * handler that hands it back (one installed after ours, that restores ours
 * and re-raises) gets the default action the second time, never a loop. */
static void chain(int sig, siginfo_t *info, void *uctx) {
    if (atomic_exchange(&last_chained, (uintptr_t)info->si_addr) == (uintptr_t)info->si_addr) {
        signal(sig, SIG_DFL);
        return;
    }
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) {
            previous.sa_sigaction(sig, info, uctx);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* the default action: returning re-runs the access, which now kills the process as it would have */
    signal(sig, SIG_DFL);
}

static void on_sigbus(int sig, siginfo_t *info, void *uctx) {
    const uintptr_t at = (uintptr_t)info->si_addr;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < MAX_GUARDS; i++) {
        const uintptr_t base = atomic_load(&guards[i].base);
        const size_t size = atomic_load(&guards[i].size);
        if (!base || at < base || at >= base + size) continue;
        /* the rest of the mapping from the faulting page: zeros (mmap is a plain
         * system call, safe here in practice; the kernel serializes racing faults) */
        const uintptr_t from = at / page * page, end = (base + size + page - 1) / page * page;
        if (mmap((void *)from, end - from, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
            break;
        atomic_fetch_add(&guards[i].faults, 1);
        return;
    }
    chain(sig, info, uctx);
}

/* Our handler, first in line; again whenever a guard is added, since another
 * library (Python's faulthandler, say) may have put its own in front since. */
static void install(void) {
    struct sigaction now;
    if (sigaction(SIGBUS, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_sigbus) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    struct sigaction old;
    if (sigaction(SIGBUS, &sa, &old) == 0) previous = old;
}

int coli_mapguard_add(const void *base, size_t size) {
    if (!base || !size) return -1;
    pthread_mutex_lock(&install_mu);
    install();
    int id = -1;
    for (int i = 0; i < MAX_GUARDS && id < 0; i++)
        if (!atomic_load(&guards[i].base)) {
            atomic_store(&guards[i].size, size);
            atomic_store(&guards[i].faults, 0);
            atomic_store(&guards[i].base, (uintptr_t)base);
            id = i;
        }
    pthread_mutex_unlock(&install_mu);
    return id;
}

void coli_mapguard_remove(int id) {
    if (id < 0 || id >= MAX_GUARDS) return;
    pthread_mutex_lock(&install_mu);
    atomic_store(&guards[id].base, 0);
    pthread_mutex_unlock(&install_mu);
}

int coli_mapguard_faults(int id) {
    return id >= 0 && id < MAX_GUARDS ? atomic_load(&guards[id].faults) : 0;
}
