/* Bench reference, not a tracker and not a bench row: ideal_table.c with the table as threads
 * share it (IDEAL_SHARED, described in ideal_table.h), to measure what the locked claim alone costs
 * against ideal_table.so. Built by tests/bench/bench.mk. */
#define IDEAL_SHARED 1
#include "ideal_table.c"
