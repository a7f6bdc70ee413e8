/* The owner thread's call-site counting (sites.c), inlined into live.c's record and free paths: a
 * process with one counting thread adds to the site's owner counters without a call. Every other
 * case (other threads, pending counts, a sampled allocation, which marks its site estimated, a
 * thread that has not asked yet whether it owns them) goes to ot_sites_on_alloc / ot_sites_on_free,
 * which do the same for the owner. sites.c owns these structures; only it and live_fast.h include
 * this. */
#ifndef OOMTRACE_SITES_FAST_H
#define OOMTRACE_SITES_FAST_H

#include <stdatomic.h>
#include <stddef.h>

#include "internal.h"

/* A site's running figures. A site has two sets (the shared one, and the owner thread's), and each
 * of a thread's pending entries one more (sites.c). */
typedef struct {
    _Atomic int64_t live_bytes, live_count;
    _Atomic uint64_t total_bytes, total_count;
} ot_site_counts_t;

typedef struct {
    /* The first line holds all that the owner's count of an allocation or a free reads and writes
     * (ot_site_owner_add: its counters, the peak, the shared live bytes), which used to lie across
     * the second and third lines of a 112-byte site, unaligned. */
    ot_site_counts_t own;      /* what the owner thread counts here (ot_site_owner_add): only it writes these */
    _Atomic uint64_t peak_bytes;
    ot_site_counts_t shared;   /* live_bytes in the first line */
    _Atomic uint64_t hash; /* 0: not (yet) a valid site */
    uint32_t kind;
    int32_t device;
    uint32_t depth;
    _Atomic uint32_t pending;  /* threads' pending entries naming this site (sites.c) */
    uintptr_t *ips;
    _Atomic uint8_t estimated;
} __attribute__((aligned(64))) ot_site_t;
_Static_assert(offsetof(ot_site_t, shared.live_bytes) + 8 <= 64, "the owner's count touches one line");
_Static_assert(sizeof(ot_site_t) == 128, "a site is two lines");

#define OT_SITE_CHUNK_SHIFT 10
#define OT_SITE_CHUNK_SITES (1u << OT_SITE_CHUNK_SHIFT)
#define OT_SITE_MAX_CHUNKS ((OT_MAX_SITES + 1) / OT_SITE_CHUNK_SITES + 1)
extern OT_HIDDEN _Atomic(ot_site_t *) ot_site_chunks[OT_SITE_MAX_CHUNKS];
extern OT_HIDDEN ot_site_t ot_site_chunk0[OT_SITE_CHUNK_SITES]; /* ot_site_chunks[0], static */
extern OT_HIDDEN _Atomic uint32_t ot_site_n_pends; /* threads that ever counted at sites */
extern OT_TLS int ot_site_owner;        /* 0: not asked yet, 1: this thread owns them, 2: another does */

/* The site of an id whose chunk exists (the allocation and free paths): no call, no creation. */
static inline __attribute__((always_inline)) ot_site_t *ot_site_of(uint32_t id)
{
    if (OT_LIKELY(id < OT_SITE_CHUNK_SITES)) return &ot_site_chunk0[id];
    uint32_t c = id >> OT_SITE_CHUNK_SHIFT;
    ot_site_t *chunk = OT_LIKELY(c < OT_SITE_MAX_CHUNKS) ? atomic_load_explicit(&ot_site_chunks[c], memory_order_acquire)
                                                         : NULL;
    return OT_LIKELY(chunk != NULL) ? &chunk[id & (OT_SITE_CHUNK_SITES - 1)] : NULL;
}

/* Raises a site's peak to now: its shared and owner's live bytes together, right after an add. */
static inline __attribute__((always_inline)) void ot_site_raise_peak(ot_site_t *s, int64_t now)
{
    uint64_t peak = atomic_load_explicit(&s->peak_bytes, memory_order_relaxed);
    while (now > 0 && (uint64_t)now > peak &&
           !atomic_compare_exchange_weak_explicit(&s->peak_bytes, &peak, (uint64_t)now, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

/* Adds counts to the owner's counters of s and raises its peak to the live bytes that makes. Each
 * add is one unlocked instruction (ot_own_add), which a signal handler on the same thread can only
 * run before or after, never in the middle of (sites.c explains the ownership). The peak is taken
 * from the live bytes read back after the add: a handler in between only makes that a later value
 * the counter really had. (An xadd, which hands the old value back, cost more here: small_churn
 * stacks=all 2-3% in wall time for the free's, about 1.5% for the malloc's.) */
static inline __attribute__((always_inline)) void ot_site_owner_add(ot_site_t *s, int64_t lb, int64_t lc, uint64_t tb,
                                                                     uint64_t tc)
{
    ot_own_add(&s->own.live_bytes, (uint64_t)lb);
    if (lc) ot_own_add(&s->own.live_count, (uint64_t)lc);
    if (tb) ot_own_add(&s->own.total_bytes, tb);
    if (tc) ot_own_add(&s->own.total_count, tc);
    if (lb > 0)
        ot_site_raise_peak(s, atomic_load_explicit(&s->own.live_bytes, memory_order_relaxed) +
                                  atomic_load_explicit(&s->shared.live_bytes, memory_order_relaxed));
}

/* The owner thread, while it is the only thread that counts at sites, counting a block that is not
 * a sampled allocation: true once counted, false (nothing done) for the caller's
 * ot_sites_on_alloc / ot_sites_on_free. */
static inline __attribute__((always_inline)) bool ot_sites_owner_count(uint32_t id, int64_t lb, int64_t lc, uint64_t tb,
                                                                        uint64_t tc)
{
    if (OT_UNLIKELY(ot_site_owner != 1) || OT_UNLIKELY(atomic_load_explicit(&ot_site_n_pends, memory_order_relaxed) >= 2))
        return false;
    ot_site_t *s = ot_site_of(id);
    if (OT_UNLIKELY(s == NULL)) return false;
    ot_site_owner_add(s, lb, lc, tb, tc);
    return true;
}

#endif
