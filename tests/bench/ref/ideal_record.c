/* Bench reference, not a tracker: the least work an exact per-block record can do on a malloc/free
 * pair, as a lower bound for oomtrace's default mode on small_churn. On top of forwarder.c it keeps
 * each block's size in a per-thread 2-way set-associative array (the shape of oomtrace's nursery,
 * 32 KiB) and two running totals per direction. It has none of what makes a tracker usable: a full
 * set silently overwrites a record, nothing is shared between threads, there is no recursion guard,
 * no option, no sampling, no peak, no table. realloc/calloc are not wrapped. */
#include <stdint.h>

#include "next.h"

void *malloc(size_t n);
void free(void *p);

#define SETS 1024
#define TLS __thread __attribute__((tls_model("initial-exec")))
static TLS struct {
    uint64_t key, size;
} nursery[SETS][2];
static TLS uint64_t allocated_bytes, allocated_count, freed_bytes, freed_count;

static inline unsigned set_of(uint64_t k)
{
    return (unsigned)(((k >> 4) ^ (k >> 14) ^ (k >> 27)) & (SETS - 1));
}

void *malloc(size_t n)
{
    void *p = call_next_malloc(n);
    if (p) {
        uint64_t k = (uint64_t)(uintptr_t)p;
        unsigned s = set_of(k);
        int way = nursery[s][0].key == 0 ? 0 : 1;
        nursery[s][way].key = k;
        nursery[s][way].size = n;
        allocated_bytes += n;
        allocated_count++;
    }
    return p;
}

void free(void *p)
{
    uint64_t k = (uint64_t)(uintptr_t)p;
    unsigned s = set_of(k);
    int way = nursery[s][0].key == k ? 0 : nursery[s][1].key == k ? 1 : -1;
    if (p && way >= 0) {
        freed_bytes += nursery[s][way].size;
        freed_count++;
        nursery[s][way].key = 0;
    }
    call_next_free(p);
}
