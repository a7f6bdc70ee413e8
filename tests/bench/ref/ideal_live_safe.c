/* Bench reference, not a tracker: ideal_stacks_safe.c with every block recorded in a table that
 * threads share (ideal_table.h with IDEAL_SHARED) instead of a per-thread array. The
 * floor of stacks=all on live_10m and live_10m_mt for any tracker that meets the brief and keeps its
 * exact table of live blocks in the process: an exact stack for every allocation, the checks of
 * ideal_stacks_safe.c, a locked claim of each slot. It still lacks most of what a tracker does (a
 * migration other threads can meet, a process-wide peak, site creation for many stacks, sampling,
 * a report). Built by tests/bench/bench.mk. */
#define IDEAL_SAFE 1
#define IDEAL_TABLE 1
#include "ideal_stacks.c"
