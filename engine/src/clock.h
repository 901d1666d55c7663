/* clock.h — a monotonic clock in seconds, for the profile's phase timers.
 * Include after the file's _POSIX_C_SOURCE / _GNU_SOURCE definition. */
#ifndef COLI_CLOCK_H
#define COLI_CLOCK_H

#include <time.h>

static inline double coli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
