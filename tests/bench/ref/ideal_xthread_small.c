/* Bench reference, not a tracker and not a bench row of its own: ideal_xthread.c with 4,096 sets
 * per thread (128 KiB, oomtrace's nursery before it grows), the floor of handoff_server, whose
 * threads hold a few thousand blocks each. Built by tests/bench/bench.mk. */
#define IDEAL_SETS 4096
#include "ideal_xthread.c"
