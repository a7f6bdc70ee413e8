/* Internal memory straight from mmap: the library never takes memory from the malloc it wraps
 * (that heap may be the thing that failed). */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "internal.h"

/* What ot_mmap holds now, in pages: a report counts it as oomtrace's own address space. */
static _Atomic uint64_t mapped_bytes;

static size_t page_round(size_t bytes) { return (bytes + 4095) & ~(size_t)4095; }

void *ot_mmap(size_t bytes)
{
    int saved = errno;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    errno = saved;
    if (p == MAP_FAILED) return NULL;
    atomic_fetch_add_explicit(&mapped_bytes, page_round(bytes), memory_order_relaxed);
    return p;
}

void ot_munmap(void *p, size_t bytes)
{
    int saved = errno;
    if (p && munmap(p, bytes) == 0) atomic_fetch_sub_explicit(&mapped_bytes, page_round(bytes), memory_order_relaxed);
    errno = saved;
}

uint64_t ot_mmap_bytes(void) { return atomic_load_explicit(&mapped_bytes, memory_order_relaxed); }

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
