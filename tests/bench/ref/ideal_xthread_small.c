/* Bench reference, not a tracker and not a bench row of its own: ideal_xthread.c with as many
 * sets per thread as oomtrace's nursery before it grows (NURSERY_SETS, passed in as IDEAL_SETS by
 * tests/bench/bench.mk), the floor of handoff_server, whose threads hold a few thousand blocks
 * each. */
#ifndef IDEAL_SETS
#error "IDEAL_SETS: built by tests/bench/bench.mk from interpose/live_fast.h's NURSERY_SETS"
#endif
#include "ideal_xthread.c"
