/* The bench programs' clock (seconds on CLOCK_MONOTONIC) and their random numbers (xorshift64). */
#ifndef OOMTRACE_BENCH_NOW_H
#define OOMTRACE_BENCH_NOW_H
#include <stdint.h>
#include <time.h>

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Marsaglia's xorshift64: the next value of the state *s (never 0 from a state that is not 0). */
static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}
#endif
