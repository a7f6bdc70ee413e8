/* Bench reference, not a tracker: ideal_stacks.c with the checks the brief asks of any tracker on
 * the malloc/free path (signal safety, a size that does not fit, two modes, dlclose, rbp, any
 * number of call sites, threads: listed at SAFE there), each made the cheapest way. The floor for
 * the stacks=all <= 2x target of any tracker that meets the brief; it still lacks most of what a
 * tracker does (a process-wide peak, a shared table for blocks that outlive the nursery, site
 * creation, the other threads' counting, sampling). Built by tests/bench/bench.mk. */
#define IDEAL_SAFE 1
#include "ideal_stacks.c"
