/* Internal memory straight from mmap: the library never takes memory from the malloc it wraps
 * (that heap may be the thing that failed). Every mapping is registered (and named "[anon:oomtrace]"
 * where the kernel can), so that the leak check never takes the live table's keys for pointers. */
#include <errno.h>
#include <stdatomic.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "internal.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* The registry: slots claimed with a CAS on their start, cleared by the unmap of that start. A
 * mapping that finds no free slot is still named (kernels from 5.17 with CONFIG_ANON_VMA_NAME). */
#define OWN_SLOTS 8192
static struct {
    _Atomic uintptr_t start;
    _Atomic uintptr_t len;
} own[OWN_SLOTS];
static _Atomic unsigned own_high; /* slots below this may be in use */
static _Atomic uint64_t own_lost; /* registrations that found no slot */

void ot_mmap_register(void *p, size_t bytes)
{
    if (!p || !bytes) return;
    /* Different names keep the kernel from merging our mapping with a neighbour of the program's. */
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, (unsigned long)bytes, (unsigned long)"oomtrace");
    for (unsigned i = 0; i < OWN_SLOTS; i++) {
        uintptr_t z = 0;
        if (atomic_load_explicit(&own[i].start, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&own[i].start, &z, (uintptr_t)p)) {
            /* The kernel maps whole pages: the rest of the last page is ours too. Left out, it
             * read as a sliver of the program's that hid the glibc arena the kernel had merged
             * with it (asmap's arena test: 7 of 8 arenas, the 8th's start not aligned). */
            uintptr_t pg = (uintptr_t)getauxval(AT_PAGESZ);
            if (!pg) pg = 4096;
            atomic_store(&own[i].len, (bytes + pg - 1) & ~(pg - 1));
            unsigned h = atomic_load(&own_high);
            while (h < i + 1 && !atomic_compare_exchange_weak(&own_high, &h, i + 1)) {
            }
            return;
        }
    }
    atomic_fetch_add(&own_lost, 1);
}

void ot_mmap_unregister(void *p)
{
    unsigned h = atomic_load(&own_high);
    for (unsigned i = 0; i < h; i++)
        if (atomic_load_explicit(&own[i].start, memory_order_relaxed) == (uintptr_t)p) {
            atomic_store(&own[i].len, 0);
            atomic_store(&own[i].start, 0);
            return;
        }
}

unsigned ot_mmap_own_ranges(uintptr_t *lo, uintptr_t *hi, unsigned max, bool *complete)
{
    unsigned n = 0, h = atomic_load(&own_high);
    for (unsigned i = 0; i < h && n < max; i++) {
        uintptr_t s = atomic_load(&own[i].start), l = atomic_load(&own[i].len);
        if (s && l) lo[n] = s, hi[n] = s + l, n++;
    }
    if (complete) *complete = atomic_load(&own_lost) == 0 && n < max;
    return n;
}

void *ot_mmap(size_t bytes)
{
    int saved = errno;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) ot_mmap_register(p, bytes);
    errno = saved;
    return p == MAP_FAILED ? NULL : p;
}

/* MADV_POPULATE_WRITE (Linux 5.14) faults the range in with one call; elsewhere a store to each page. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
void ot_prefault(void *p, size_t bytes)
{
    int saved = errno;
    if (madvise(p, bytes, MADV_POPULATE_WRITE) != 0)
        for (size_t at = 0; at < bytes; at += 4096) __atomic_store_n((char *)p + at, 0, __ATOMIC_RELAXED);
    errno = saved;
}

void ot_munmap(void *p, size_t bytes)
{
    int saved = errno;
    if (p) {
        ot_mmap_unregister(p);
        munmap(p, bytes);
    }
    errno = saved;
}

/* Permanent bump allocator: chunks of 64 KiB, a CAS on the cursor. Objects are never freed. */
#define PERM_CHUNK (64u * 1024u)
static _Atomic(uintptr_t) perm_cur, perm_end;

void *ot_perm_alloc(size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    if (bytes > PERM_CHUNK / 2) return ot_mmap(bytes);
    for (;;) {
        uintptr_t cur = atomic_load_explicit(&perm_cur, memory_order_acquire);
        uintptr_t end = atomic_load_explicit(&perm_end, memory_order_acquire);
        if (cur && cur + bytes <= end) {
            if (atomic_compare_exchange_weak(&perm_cur, &cur, cur + bytes)) return (void *)cur;
            continue;
        }
        /* Chunk exhausted: map a new one. Two threads may both map; the loser's chunk is used for
         * its own object and the remainder is simply not recycled (bounded waste). */
        char *chunk = ot_mmap(PERM_CHUNK);
        if (!chunk) return NULL;
        uintptr_t c = (uintptr_t)chunk;
        atomic_store_explicit(&perm_end, 0, memory_order_release);
        atomic_store_explicit(&perm_cur, c + bytes, memory_order_release);
        atomic_store_explicit(&perm_end, c + PERM_CHUNK, memory_order_release);
        return chunk;
    }
}
