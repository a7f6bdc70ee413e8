/* Bench reference, not a tracker: the least work an exact table of live blocks can do, as a lower
 * bound for any tracker that keeps one in the process (oomtrace's live table, LeakSanitizer's
 * allocator metadata) on live_10m. On top of forwarder.c it keeps every live block's size in one
 * open-addressing hash table of 16-byte slots, with the homes oomtrace uses (blocks of one
 * 256-byte granule land in neighbouring slots, each from its 32-byte step), linear probing and
 * tombstones; it doubles at 75% full (live + tombstones), by mmap of the new table, a rehash and
 * munmap of the old one, so it holds 10 million blocks at 26.9 bytes each (oomtrace's table: 23.5,
 * within the same 32-byte budget; a less loaded table probes less, so the floor errs on the fast
 * side). Like oomtrace's
 * table it asks for huge pages (from 2 MiB, aligned) and prefetches the next granule's line (on
 * malloc here, where oomtrace has its nursery; on free in the direction of the last free, as
 * oomtrace does). It has none of what makes a tracker usable: no lock or atomic (one thread only:
 * live_10m), no recursion guard, no counters, no stacks, no shrinking, and a failed mmap silently
 * stops recording.
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
static slot_t *tab;
static uint64_t cap, used; /* used: live + tombstones */
static unsigned cap_bits;

static inline uint64_t home(uint64_t k, unsigned bits)
{
    return ((((k >> 8) * 0x9E3779B97F4A7C15ull) >> (64 - bits)) + ((k >> 5) & 7)) & ((1ull << bits) - 1);
}

static void place(slot_t *t, unsigned bits, uint64_t k, uint64_t size)
{
    uint64_t mask = (1ull << bits) - 1, i = home(k, bits);
    while (t[i].key > TOMB) i = (i + 1) & mask;
    t[i].key = k;
    t[i].size = size;
}

static int grow(void)
{
    unsigned bits = cap ? cap_bits + 1 : 12;
    size_t bytes = sizeof(slot_t) << bits;
    /* As oomtrace's table: from 2 MiB on, aligned to 2 MiB, with huge pages. */
    const size_t huge = 2u << 20;
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
    uint64_t live = 0;
    for (uint64_t i = 0; i < cap; i++)
        if (tab[i].key > TOMB) {
            place(t, bits, tab[i].key, tab[i].size);
            live++;
        }
    if (tab) munmap(tab, sizeof(slot_t) * cap);
    tab = t;
    cap_bits = bits;
    cap = 1ull << bits;
    used = live;
    return 0;
}

void *malloc(size_t n)
{
    void *p = call_next_malloc(n);
    if (p && (used * 4 < cap * 3 || grow() == 0)) {
        /* Blocks allocated one after another fill one granule's slots, then the next one's: its
         * line is fetched while this one is written. */
        __builtin_prefetch(&tab[home((uint64_t)(uintptr_t)p + 256, cap_bits)], 1, 3);
        place(tab, cap_bits, (uint64_t)(uintptr_t)p, n);
        used++;
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
        __builtin_prefetch(&tab[home(k >= last_free ? k + 256 : k - 256, cap_bits)], 1, 3);
        last_free = k;
        uint64_t mask = cap - 1, i = home(k, cap_bits);
        while (tab[i].key && tab[i].key != k) i = (i + 1) & mask;
        if (tab[i].key == k) tab[i].key = TOMB;
    }
    call_next_free(p);
}
