/* Bench reference (not a tracker): the open-addressing table of live blocks that ideal_table.c
 * describes, used by the floors that keep one (ideal_table.c; ideal_stacks.c built with
 * IDEAL_TABLE). table_insert and table_remove are the whole interface. Included once per floor: its
 * state is static.
 *
 * With IDEAL_SHARED it is the least a table that threads share needs, as the brief's lock-free live
 * table is shared: an insert claims its slot with a locked compare-and-swap (two threads may reach
 * the same free slot), and the counts that decide growth are kept per thread and folded into shared
 * ones every FOLD inserts. A remove stays a plain store: only the thread that frees a block writes
 * its slot, and an insert claims only free slots. Growth is still the one-thread rehash, which no
 * other thread may overlap (a lower bound: a shared table needs a migration that other threads can
 * meet, as oomtrace's has; live_10m_mt's other thread only sleeps). This is the table of
 * ideal_live_safe.c. Alone (ideal_table_shared.so) it measured the same as ideal_table.so on
 * live_10m_mt within the runs' spread: the locked claim costs a table this simple nothing that
 * shows. */
#ifndef BENCH_REF_IDEAL_TABLE_H
#define BENCH_REF_IDEAL_TABLE_H

#include <stdint.h>
#include <sys/mman.h>

#ifndef IDEAL_SHARED
#define IDEAL_SHARED 0
#endif

#define TOMB 1u
typedef struct {
    uint64_t key, val; /* val: the block's size (with the stacks floor: and its site) */
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

static void place(slot_t *t, uint64_t c, uint64_t k, uint64_t v)
{
    uint64_t i = home(k, c);
    while (t[i].key > TOMB)
        if (++i == c) i = 0;
    t[i].key = k;
    t[i].val = v;
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
        if (tab[i].key > TOMB) place(t, nc, tab[i].key, tab[i].val);
    if (tab) munmap(tab, sizeof(slot_t) * cap);
    tab = t;
    cap = nc;
    used = live;
    grow_at = cap * GROW_PCT / 100;
    return 0;
}

#if !IDEAL_SHARED
static inline void table_insert(uint64_t k, uint64_t v)
{
    if (used < grow_at || grow() == 0) {
        /* Blocks allocated one after another fill one granule's slots, then the next one's: its
         * line is fetched while this one is written. */
        __builtin_prefetch(&tab[home(k + 256, cap)], 1, 3);
        place(tab, cap, k, v);
        used++;
        live++;
    }
}
#else
#define FOLD 256
static __thread __attribute__((tls_model("initial-exec"))) uint64_t my_used, my_live;

/* The slot's key from EMPTY or TOMB to k: the one locked instruction a shared insert needs (two
 * threads may reach the same free slot). */
static inline int claim(slot_t *s, uint64_t k)
{
    uint64_t seen = s->key;
    return seen <= TOMB && __atomic_compare_exchange_n(&s->key, &seen, k, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

static inline void table_insert(uint64_t k, uint64_t v)
{
    /* This thread's counts go into the shared ones every FOLD inserts, and growth is decided then. */
    if (__builtin_expect(++my_used >= FOLD, 0) || !tab) {
        __atomic_fetch_add(&used, my_used, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live, my_live, __ATOMIC_RELAXED);
        my_used = my_live = 0;
        if (__atomic_load_n(&used, __ATOMIC_RELAXED) >= grow_at && grow() != 0) return;
    }
    __builtin_prefetch(&tab[home(k + 256, cap)], 1, 3);
    uint64_t i = home(k, cap);
    while (!claim(&tab[i], k))
        if (++i == cap) i = 0;
    tab[i].val = v;
    my_live++;
}
#endif

/* As oomtrace's frees of blocks in its table: the next granule's line in the direction of the last
 * free is prefetched. Returns whether k was there, and its value in *v. */
#if IDEAL_SHARED
static __thread __attribute__((tls_model("initial-exec"))) uint64_t last_free;
#else
static uint64_t last_free;
#endif

static inline int table_remove(uint64_t k, uint64_t *v)
{
    if (!cap) return 0;
    __builtin_prefetch(&tab[home(k >= last_free ? k + 256 : k - 256, cap)], 1, 3);
    last_free = k;
    uint64_t i = home(k, cap);
    while (tab[i].key && tab[i].key != k)
        if (++i == cap) i = 0;
    if (tab[i].key != k) return 0;
    *v = tab[i].val;
#if IDEAL_SHARED
    /* Only the thread that frees a block writes its slot, and inserts claim only free slots: a
     * plain store (a mov on x86-64). */
    __atomic_store_n(&tab[i].key, TOMB, __ATOMIC_RELEASE);
    my_live--;
#else
    tab[i].key = TOMB;
    live--;
#endif
    return 1;
}

#endif
