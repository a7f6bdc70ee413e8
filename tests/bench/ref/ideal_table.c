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
 * realloc/calloc are not wrapped. Built by tests/bench/bench.mk. */
#include <stdint.h>
#include <sys/mman.h>

#include "next.h"

void *malloc(size_t n);
void free(void *p);

#define TOMB 1u
typedef struct {
    uint64_t key, size;
} slot_t;
#define GROW_PCT 80 /* live + tombstones at which the table grows (oomtrace's table: the same) */
#define FILL_PCT 51 /* live blocks in the new table: 16 / 0.51 = 31.4 bytes each */
static slot_t *tab;
static uint64_t cap, used, live, grow_at; /* used: live + tombstones */

static inline uint64_t home(uint64_t k, uint64_t c)
{
    uint64_t h = (uint64_t)(((unsigned __int128)((k >> 8) * 0x9E3779B97F4A7C15ull) * c) >> 64) + ((k >> 5) & 7);
    return h >= c ? h - c : h;
}

static void place(slot_t *t, uint64_t c, uint64_t k, uint64_t size)
{
    uint64_t i = home(k, c);
    while (t[i].key > TOMB)
        if (++i == c) i = 0;
    t[i].key = k;
    t[i].size = size;
}

static int grow(void)
{
    /* As oomtrace's table: from 2 MiB on, aligned to 2 MiB (the slots up to the boundary are used),
     * with huge pages. */
    const size_t huge = 2u << 20;
    uint64_t nc = cap ? live * 100 / FILL_PCT + 1 : 4096;
    size_t bytes = sizeof(slot_t) * nc;
    if (bytes >= huge) {
        bytes = (bytes + huge - 1) & ~(huge - 1);
        nc = bytes / sizeof(slot_t);
    }
    char *q = mmap(NULL, bytes + (bytes >= huge ? huge : 0), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (q == MAP_FAILED) return -1;
    slot_t *t = (slot_t *)q;
    if (bytes >= huge) {
        char *a = (char *)(((uintptr_t)q + huge - 1) & ~(uintptr_t)(huge - 1));
        if (a > q) munmap(q, (size_t)(a - q));
        munmap(a + bytes, (size_t)(q + huge - a));
        t = (slot_t *)a;
#ifdef MADV_HUGEPAGE
        madvise(t, bytes, MADV_HUGEPAGE);
#endif
    }
    for (uint64_t i = 0; i < cap; i++)
        if (tab[i].key > TOMB) place(t, nc, tab[i].key, tab[i].size);
    if (tab) munmap(tab, sizeof(slot_t) * cap);
    tab = t;
    cap = nc;
    used = live;
    grow_at = cap * GROW_PCT / 100;
    return 0;
}

void *malloc(size_t n)
{
    void *p = call_next_malloc(n);
    if (p && (used < grow_at || grow() == 0)) {
        /* Blocks allocated one after another fill one granule's slots, then the next one's: its
         * line is fetched while this one is written. */
        __builtin_prefetch(&tab[home((uint64_t)(uintptr_t)p + 256, cap)], 1, 3);
        place(tab, cap, (uint64_t)(uintptr_t)p, n);
        used++;
        live++;
    }
    return p;
}

/* As oomtrace's frees of blocks in its table: the next granule's line in the direction of the last
 * free is prefetched. */
static uint64_t last_free;

void free(void *p)
{
    uint64_t k = (uint64_t)(uintptr_t)p;
    if (p && cap) {
        __builtin_prefetch(&tab[home(k >= last_free ? k + 256 : k - 256, cap)], 1, 3);
        last_free = k;
        uint64_t i = home(k, cap);
        while (tab[i].key && tab[i].key != k)
            if (++i == cap) i = 0;
        if (tab[i].key == k) {
            tab[i].key = TOMB;
            live--;
        }
    }
    call_next_free(p);
}
