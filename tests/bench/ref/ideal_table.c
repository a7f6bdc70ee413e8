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
 * Built with IDEAL_SHARED (ideal_table_shared.c), it is the floor of a table that threads share, as
 * the brief's lock-free live table is: an insert claims its slot with a locked compare-and-swap, and
 * the count that decides growth is kept per thread and folded into a shared one every FOLD inserts.
 * A remove stays a plain store: only the thread that frees a block writes its slot, and an insert
 * claims only free slots. Growth is still the one-thread rehash, which no other thread may overlap
 * (a lower bound: a shared table needs a migration that other threads can meet, as oomtrace's has;
 * live_10m_mt's other thread only sleeps). That table is the one of ideal_live_safe.c, a bench row;
 * ideal_table_shared.so alone is not (on live_10m_mt it measured the same as ideal_table.so within
 * the runs' spread: the locked claim costs a table this simple nothing that shows). */
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
