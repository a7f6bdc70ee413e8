/* Bench reference, not a tracker: an LD_PRELOAD malloc/free that only forwards to the next
 * definition (dlsym RTLD_NEXT, as oomtrace does). Its ratio on small_churn is the cost of
 * interposing at all, before anything is recorded. Built by tests/bench/bench.mk. */
#include "next.h"

void *malloc(size_t n);
void free(void *p);

void *malloc(size_t n) { return call_next_malloc(n); }

void free(void *p) { call_next_free(p); }
