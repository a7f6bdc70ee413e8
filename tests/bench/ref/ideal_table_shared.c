/* Bench reference, not a tracker: ideal_table.c as a table that threads share (IDEAL_SHARED there:
 * a locked compare-and-swap claims each insert's slot, per-thread counts folded into shared ones).
 * The floor, on live_10m_mt, of any tracker that keeps its exact table of live blocks in one table
 * that every thread writes, as the brief's lock-free live table is. Built by tests/bench/bench.mk. */
#define IDEAL_SHARED 1
#include "ideal_table.c"
