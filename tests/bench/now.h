/* The bench programs' clock: seconds on CLOCK_MONOTONIC. */
#ifndef OOMTRACE_BENCH_NOW_H
#define OOMTRACE_BENCH_NOW_H
#include <time.h>

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
#endif
