/* Bench reference, not a tracker: the least work an exact table of live blocks can do, as a lower
 * bound for any tracker that keeps one in the process (oomtrace's live table, LeakSanitizer's
 * allocator metadata) on live_10m. On top of forwarder.c it keeps every live block's size in one
 * open-addressing hash table of 16-byte slots, with the homes oomtrace uses (blocks of one
 * 256-byte granule land in neighbouring slots, each from its 32-byte step, scaled to any capacity),
 * linear probing and tombstones. It keeps the 32-byte budget of the memory target at every live
 * count, as oomtrace's table does: at 80% full (live + tombstones) it grows to a table whose live
 * blocks fill 51% of it (31.4 bytes each), by mmap of the new table, a rehash and munmap of the old
 * one. (Doubling at 75%, as it did before, moves fewer blocks but holds a block in up to 42.7
 * bytes right after a growth: 41 bytes each at 6.5 million live blocks; its 26.9 at 10 million were
 * luck of the count. Growing at 85% or 90% instead measured the same within the runs' spread.)
 * Like oomtrace's table it asks for huge pages (from 2 MiB, aligned) and prefetches the next
 * granule's line (on malloc here, where oomtrace has its nursery; on free in the direction of the
 * last free, as oomtrace does). It has none of what makes a tracker usable: no lock or atomic (one
 * thread only: live_10m), no recursion guard, no counters, no stacks, no shrinking, and a failed
 * mmap silently stops recording.
 * realloc/calloc are not wrapped. Built by tests/bench/bench.mk; the table is in ideal_table.h.
 *
 * Built with IDEAL_SHARED (ideal_table_shared.c), the table is one that threads share (see
 * ideal_table.h); that build is not a bench row. */
#include <stdint.h>

#include "next.h"
#include "ideal_table.h"

void *malloc(size_t n);
void free(void *p);

void *malloc(size_t n)
{
    void *p = call_next_malloc(n);
    if (p) table_insert((uint64_t)(uintptr_t)p, n);
    return p;
}

void free(void *p)
{
    uint64_t v;
    if (p) (void)table_remove((uint64_t)(uintptr_t)p, &v);
    call_next_free(p);
}
