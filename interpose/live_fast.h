/* The malloc/free fast path of live.c, inlined into the libc hooks: a block recorded in, or freed
 * from, this thread's own nursery costs no call. Everything else goes to the out-of-line functions
 * of live.c (ot_live_record_from, ot_live_forget_host); the fast path changes nothing when it
 * declines. Only live.c and hooks_libc.c include this. */
#ifndef OOMTRACE_LIVE_FAST_H
#define OOMTRACE_LIVE_FAST_H

#include <stdatomic.h>

#include "internal.h"
#include "sites_fast.h"
#include "unwind_fast.h"

static inline void bumpu(_Atomic uint64_t *v, uint64_t d)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d, memory_order_relaxed);
}

/* Live = allocated - freed. Each is a running total that only grows, so a malloc bumps two counters
 * and a free two others; a thread's difference may be negative (it freed other threads' blocks),
 * the sum over all threads is exact. */
typedef struct {
    _Atomic uint64_t total_bytes, total_count; /* allocated on this thread */
    _Atomic uint64_t freed_bytes, freed_count; /* freed on this thread, whoever allocated them */
} kind_counters_t; /* one kind's counters share a cache line: the hot path touches one line */

typedef struct thread_counters {
    /* Written only by the owning thread (relaxed atomics so that readers summing them are not racy). */
    kind_counters_t k[OT_KIND_COUNT];
    int64_t flushed;           /* this thread's host level when last folded into the global level */
    int64_t sample_left;       /* bytes until the next sampled small allocation */
    uint64_t rng;
    _Atomic int in_use;
    struct nursery *nursery;
    /* The nursery the inline fast paths fill: this one (NULL with it), or, where every fill must
     * also write the nursery's ring (a grown one), ot_full_nursery, whose only set is full: the fast
     * paths then find no free way and leave the fill to live.c, which writes the ring. The ring
     * costs other threads nothing, not even a test (small_churn: 2 instructions a malloc with one). */
    struct nursery *fast_nursery;
    /* The nursery the inline free looks in: this one once the thread has filled it (live.c,
     * nursery_in_use, before the first record goes in), NULL until then (and with it). A thread
     * that only frees other threads' blocks (a consumer) then goes straight to live.c, without
     * reading its empty nursery: bursty_pc 8 100000 under callgrind, 20 instructions less per free.
     * Until the first fill fast_nursery is ot_full_nursery too, so that the fill is live.c's. */
    struct nursery *take_nursery;
    uint64_t ring_n; /* records written to the nursery's ring (if it has one) */
    uint32_t nid;
    void *walk;                /* the stack walker's per-thread cache (unwind.c), mmap'ed */
    uint32_t walk_bytes;       /* its size: a record adopted by a later thread keeps its mapping */
    uint32_t walk_embedded;    /* the walk cache lies in the nursery's mapping (never unmapped alone) */
    void *sites_pend;          /* pending call-site counts (sites.c), kept with the block */
    uint32_t evict_turn;       /* which way of a full nursery set goes to the table next */
    uint32_t found_in;         /* where this thread's last search elsewhere found its record:
                                * nursery id + 1, or 0 for the table; the next search looks there
                                * first, and a free prefetches the table only after a table find */
    uint64_t last_forget;      /* the last block this thread freed that was not in its nursery */
    uint32_t ring_src, ring_cur; /* which nursery's ring (id + 1) this thread follows, and where */
    uint32_t ring_skip;          /* finds left before it looks in a ring again (live.c, ring_prefetch) */
    /* Long-lived phases (live.c, place): window_evictions counts the nursery evictions since the
     * thread's host allocation count was window_start; while the count is below window_start (a
     * window that begins after a run), its new records go straight to the table. */
    uint64_t window_start;
    uint32_t window_evictions;
    /* At the last decision (note_eviction): the thread's host allocation and free counts. */
    uint64_t decided_n, decided_freed;
    uint32_t run_len; /* the last run's length, 0 after a window that started none */
    struct thread_counters *next;
} thread_counters_t;

/* x 2 ways x 16 bytes = 256 KiB per thread (mapped, touched only where its sets are used: a set
 * follows the block's address, so a thread with few blocks touches few pages). Threads that hand
 * their live set on (handoff_server: 4,000 blocks per lane, replaced at random) keep it in their
 * nurseries; at 2,048 records half of their mallocs moved a record to the table and half of their
 * frees took one out (callgrind, handoff_server 2 40 10000 4000: 617 M instructions at 1,024 sets,
 * 365 M at 4,096, 179 M without oomtrace). At 4,096 sets a lane's blocks, at an allocator's
 * addresses, still fell three or more to a set often enough that 3.7% of handoff_server 8's mallocs
 * evicted (about 720 instructions each, with the free that then searched): handoff_server
 * 8 40 10000 4000 ran 1,669 M instructions at 4,096 sets, 1,458 M at 8,192 (bursty_pc 8 100000:
 * 282 M and 287 M, its producers growing a little later; small_churn and producer_consumer
 * unchanged). */
#define NURSERY_SETS 8192
/* A thread whose blocks other threads free, in numbers its nursery cannot hold (a producer:
 * bursty_pc, up to 65,536 live per producer), gets a nursery of this many sets instead (live.c,
 * note_eviction): 1 MiB mapped, touched as it fills. Its records then cost it two plain stores,
 * where the table cost an insert and its consumers a remove (bursty_pc 2 threads, median of 9:
 * 2.40x the program alone with 4,096 sets for every thread, 1.88x with 32,768). */
#define NURSERY_SETS_GROWN 32768
#define MAX_NURSERIES 4096
typedef struct {
    _Atomic uint64_t key, val;
} nursery_way_t;
/* A grown nursery's owner also writes the set of each record it fills, in allocation order, into a
 * ring of NURSERY_RING entries beside it: its consumers free in that order too (a burst at a time),
 * so a consumer that finds its block's set at its place in the ring prefetches the set of the block
 * it will free NURSERY_RING_AHEAD frees later (live.c, locate_elsewhere). A hint only: the ring is
 * never trusted for a record. Sized for a consumer that lags a few bursts behind (bursty_pc: up to
 * 4 of 16,384 blocks in flight). */
#define NURSERY_RING 65536
#define NURSERY_RING_AHEAD 8
typedef struct nursery {
    uint32_t mask; /* sets - 1, set before the nursery is published and never changed */
    uint32_t pad_[1];
    _Atomic uint16_t *ring; /* a grown nursery's ring (NULL: none), set before it is published */
    uint32_t pad2_[12];
    nursery_way_t slot[][2];
} nursery_t;
_Static_assert(sizeof(nursery_t) == 64, "the nursery's header is one line");
extern OT_HIDDEN nursery_t *const ot_full_nursery;
static inline size_t nursery_bytes(unsigned sets) { return sizeof(nursery_t) + (size_t)sets * 2 * sizeof(nursery_way_t); }
#define HINT_MIN_THREADS 8 /* up to this many nurseries, a cross-thread free searches them all */
/* Beyond that, it looks first in the nursery that last recorded a block of the same 256-byte
 * granule: owner hints, one 16-bit nursery id per hash of the granule. */
#define HINT_BITS 16
extern OT_HIDDEN _Atomic uint16_t ot_owner_hint[1u << HINT_BITS];
static inline unsigned hint_index(uint64_t k)
{
    return (unsigned)(((k >> 8) * 0x9e3779b97f4a7c15ull) >> (64 - HINT_BITS));
}
/* Written only when it changes: a thread allocating one granule after another (its own arena)
 * finds its own id there and writes nothing, so the shared array is mostly read. */
static inline void hint_note(uint64_t key, uint32_t nid)
{
    _Atomic uint16_t *h = &ot_owner_hint[hint_index(key)];
    if (atomic_load_explicit(h, memory_order_relaxed) != (uint16_t)nid)
        atomic_store_explicit(h, (uint16_t)nid, memory_order_relaxed);
}
/* The peak is tracked on an approximate running level that each thread updates every
 * PEAK_GRANULE bytes of change (and at once for device kinds), so it is exact to within
 * PEAK_GRANULE per thread; reports also fold in the exact level at the time of the report. */
#define PEAK_GRANULE (256 * 1024)

extern OT_TLS thread_counters_t *ot_my_counters;
extern OT_HIDDEN _Atomic uint32_t ot_n_nurseries;
void ot_live_level_flush(int cls, int64_t delta);

static inline unsigned nursery_set(const nursery_t *n, uint64_t k)
{
    return (unsigned)(((k >> 4) ^ (k >> 14) ^ (k >> 27)) & n->mask);
}

/* A nursery key with this bit set is being moved to the table by its owner (evict_way): its
 * record is about to be, or already is, in the table. Keys are addresses below 2^57 or tagged
 * handles with bit 62; bit 63 is never part of a key. */
#define MOVING (1ull << 63)

enum { NG_NO = 0, NG_FOUND = 1, NG_MOVING = 2 };

/* A set's buddy: the other set of its cache line (a nursery's mapping is page-aligned, its sets
 * 32 bytes). A record whose set is full may take a way of the buddy (live.c, nursery_put), so a
 * search looks there after the set, on the line it has already read. */
static inline unsigned nursery_buddy(unsigned set) { return set ^ 1; }

/* Finds key in set w of a nursery (see nursery_find). */
static inline __attribute__((always_inline)) int set_find(nursery_way_t *w, uint64_t key, uint64_t *val, bool take,
                                                          bool owner)
{
    for (int way = 0; way < 2; way++) {
        uint64_t k = atomic_load_explicit(&w[way].key, memory_order_acquire);
        if (k != key) {
            if (k == (key | MOVING)) return NG_MOVING;
            continue;
        }
        *val = atomic_load_explicit(&w[way].val, memory_order_relaxed);
        if (!take) {
            /* The way may have moved on since the key was read: check it still holds. */
            if (atomic_load_explicit(&w[way].key, memory_order_acquire) != key) return NG_MOVING;
            return NG_FOUND;
        }
        if (owner) {
            atomic_store_explicit(&w[way].key, 0, memory_order_release);
            return NG_FOUND;
        }
        if (atomic_compare_exchange_strong_explicit(&w[way].key, &k, 0, memory_order_acq_rel, memory_order_acquire))
            return NG_FOUND;
        return NG_MOVING; /* its owner is moving it */
    }
    return NG_NO;
}

/* Finds key in nursery n; if take, also clears its way. The owner takes with a plain store (it
 * cannot race with its own eviction); another thread takes with a CAS, which fails if the owner
 * has meanwhile marked the way MOVING. NG_MOVING: the record is on its way to the table. The
 * key's set is looked at first, then its buddy. */
static inline __attribute__((always_inline)) int nursery_find_at(nursery_t *n, unsigned set, uint64_t key,
                                                                 uint64_t *val, bool take, bool owner)
{
    int r = set_find(n->slot[set], key, val, take, owner);
    if (OT_LIKELY(r != NG_NO)) return r;
    return set_find(n->slot[nursery_buddy(set)], key, val, take, owner);
}

static inline __attribute__((always_inline)) int nursery_find(nursery_t *n, uint64_t key, uint64_t *val, bool take,
                                                              bool owner)
{
    return nursery_find_at(n, nursery_set(n, key), key, val, take, owner);
}

static inline bool nursery_get(nursery_t *n, uint64_t key, uint64_t *val, bool take)
{
    return nursery_find(n, key, val, take, true) == NG_FOUND;
}

/* Folds this thread's host level into the approximate global level once it is at least step away
 * from what was folded last. */
static inline __attribute__((always_inline)) void host_level_fold(thread_counters_t *c, int64_t level, int64_t step)
{
    int64_t delta = level - c->flushed;
    if (OT_LIKELY(delta < step && delta > -step)) return;
    c->flushed = level;
    ot_live_level_flush(0, delta);
}

/* A change of this thread's level: the host level folded per PEAK_GRANULE, device kinds at once. */
static inline __attribute__((always_inline)) void level_change(thread_counters_t *c, unsigned kind, int64_t delta,
                                                                uint64_t allocated, uint64_t freed)
{
    int cls = ot_kind_is_device(kind);
    if (cls == 0) host_level_fold(c, (int64_t)(allocated - freed), PEAK_GRANULE);
    else ot_live_level_flush(cls, delta);
}

/* A block of `size` becomes live / stops being live on this thread's counters. */
static inline __attribute__((always_inline)) void count_alloc(thread_counters_t *c, unsigned kind, uint64_t size)
{
    kind_counters_t *kc = &c->k[kind];
    uint64_t tb = atomic_load_explicit(&kc->total_bytes, memory_order_relaxed) + size;
    atomic_store_explicit(&kc->total_bytes, tb, memory_order_relaxed);
    bumpu(&kc->total_count, 1);
    level_change(c, kind, (int64_t)size, tb, atomic_load_explicit(&kc->freed_bytes, memory_order_relaxed));
}

static inline __attribute__((always_inline)) void count_free(thread_counters_t *c, unsigned kind, uint64_t size)
{
    kind_counters_t *kc = &c->k[kind];
    uint64_t fb = atomic_load_explicit(&kc->freed_bytes, memory_order_relaxed) + size;
    atomic_store_explicit(&kc->freed_bytes, fb, memory_order_relaxed);
    bumpu(&kc->freed_count, 1);
    level_change(c, kind, -(int64_t)size, atomic_load_explicit(&kc->total_bytes, memory_order_relaxed), fb);
}

/* The way of key's set in this thread's nursery that a new record takes on the fast paths: a free
 * one, when neither way still holds key (a block whose free went past us: nursery_put's case).
 * NULL otherwise: nursery_put then tries the buddy. The buddy is not searched for such a stale
 * record here: one left there stays counted live, as one does where the block's next record goes
 * to another thread's nursery or to the table. */
static inline __attribute__((always_inline)) nursery_way_t *free_way_at(nursery_t *n, unsigned set, uint64_t key)
{
    nursery_way_t *w = n->slot[set];
    uint64_t k0 = atomic_load_explicit(&w[0].key, memory_order_relaxed);
    uint64_t k1 = atomic_load_explicit(&w[1].key, memory_order_relaxed);
    int way = k0 == 0 ? 0 : k1 == 0 ? 1 : -1;
    return OT_LIKELY(way >= 0 && k0 != key && k1 != key) ? &w[way] : NULL;
}

static inline __attribute__((always_inline)) nursery_way_t *free_way(nursery_t *n, uint64_t key)
{
    return free_way_at(n, nursery_set(n, key), key);
}

/* Fills way w of this thread's nursery with a record (the value before the key that publishes it).
 * With a few threads a cross-thread free simply looks at every nursery; the owner hint (a line of
 * a shared array, written when it names another nursery) only pays for itself with many. */
static inline __attribute__((always_inline)) void fill_way(thread_counters_t *c, nursery_way_t *w, uint64_t key,
                                                           uint64_t val)
{
    atomic_store_explicit(&w->val, val, memory_order_relaxed);
    atomic_store_explicit(&w->key, key, memory_order_release);
    if (OT_UNLIKELY(atomic_load_explicit(&ot_n_nurseries, memory_order_relaxed) > HINT_MIN_THREADS))
        hint_note(key, c->nid);
}

/* The set of a record just filled in this thread's grown nursery, at the end of its ring. */
static inline __attribute__((always_inline)) void ring_note_at(thread_counters_t *c, unsigned set)
{
    atomic_store_explicit(&c->nursery->ring[c->ring_n++ & (NURSERY_RING - 1)], (uint16_t)set, memory_order_relaxed);
}

static inline __attribute__((always_inline)) void ring_note(thread_counters_t *c, uint64_t key)
{
    ring_note_at(c, nursery_set(c->nursery, key));
}

/* Way w (free_way's) of this thread's nursery filled with a host block's record, and the block
 * counted: both fast paths' common case, and live.c's fills of a nursery with a ring. */
static inline __attribute__((always_inline)) void fill_counted(thread_counters_t *c, nursery_way_t *w, uint64_t key,
                                                               uint64_t val, uint64_t size)
{
    fill_way(c, w, key, val);
    count_alloc(c, OT_KIND_HOST, size);
}

/* May a default-mode host malloc of size on c (the caller tests the mode) take an inline fill: a
 * thread with a nursery, a block below the full-stack size, not huge? */
static inline __attribute__((always_inline)) bool host_fill_eligible(const thread_counters_t *c, uint64_t size)
{
    return OT_LIKELY(c != NULL) && OT_LIKELY(size < ot_opt.stack_min_bytes) && OT_LIKELY(size < OT_SIZE_BIG) &&
           OT_LIKELY(c->fast_nursery != NULL);
}

/* A host malloc in the common case of the default mode (stacks=sampled: the caller tests that): a
 * thread with a nursery, a block below the full-stack size and not sampled, a set with a free way,
 * few threads. Returns false, having changed nothing, for every other case: the caller then calls
 * ot_live_record. (It takes only the free-way case of live.c's nursery_put, free_way and fill_way,
 * on purpose: nursery_put, with its stale-record and eviction branches, costs six saved registers
 * and ~15 instructions per malloc: measured with callgrind on small_churn.) */
void ot_live_record_host_fill(thread_counters_t *c, uint64_t key, uint64_t size, int64_t left);

static inline __attribute__((always_inline)) bool ot_live_record_host_fast(uint64_t key, uint64_t size)
{
    thread_counters_t *c = ot_my_counters;
    if (OT_UNLIKELY(!host_fill_eligible(c, size))) return false;
    int64_t left = c->sample_left - (int64_t)size;
    nursery_way_t *w = free_way(c->fast_nursery, key);
    if (OT_UNLIKELY(left <= 0 || w == NULL)) {
        /* A thread with a ring, or that has not filled its nursery yet (its fast nursery the full
         * one), not sampled: live.c fills it, with what was tested here known, and no origin or
         * second test of the above. */
        if (left <= 0 || c->fast_nursery != ot_full_nursery) return false;
        ot_live_record_host_fill(c, key, size, left);
        return true;
    }
    c->sample_left = left;
    fill_counted(c, w, key, size /* ot_pack(size, HOST, 0) */, size);
    return true;
}

/* What a call site found for a stack depends on besides the stack: a note made under another tag
 * (another kind, device or depth limit) is not taken. 0: do not use notes. */
static inline uint32_t ot_note_tag(unsigned kind, int device)
{
    if (device < -1 || device > 4094 || kind > 127) return 0;
    return 1u << 31 | (uint32_t)kind << 24 | (uint32_t)(device + 1) << 12 | (ot_opt.stack_depth & 0xfff);
}

/* The site noted for the thread's last walk if the stack from origin is that walk, else 0, walking
 * nothing (unwind_fast.h). The checking build asks stack.c, which compares it with libunwind and
 * asks the other remembered walks too. */
static inline __attribute__((always_inline)) uint32_t ot_live_noted(const ot_origin_t *origin, uint32_t tag)
{
    unsigned depth;
#ifdef OT_UNWIND_VERIFY
    return ot_stack_noted_at(ot_opt.stack_depth, origin, tag, &depth);
#else
    return ot_unwind_noted_inline(origin->ip, origin->sp, origin->bp, ot_opt.stack_depth, tag, &depth);
#endif
}

/* Where ot_live_noted found nothing: the site noted for another remembered walk that is this stack,
 * else 0 (unwind.c, out of line), and *searched for the walk that follows (ot_stack_note_t). The
 * checking build's ot_live_noted asked them already; its walks search again. */
static inline uint32_t ot_live_noted_others(const ot_origin_t *origin, uint32_t tag, uint32_t *searched)
{
#ifdef OT_UNWIND_VERIFY
    (void)origin;
    (void)tag;
    *searched = 0;
    return 0;
#else
    unsigned depth;
    return ot_unwind_noted_others(origin->ip, origin->sp, origin->bp, ot_opt.stack_depth, tag, &depth, searched);
#endif
}

/* The out-of-line rests of ot_live_record_all_fast: a host block whose call site is known (counted
 * there already), wherever it goes; and one whose stack is not the noted one, walked without asking
 * the walker that again, from the origin read off the hook's own frame (frame: its
 * __builtin_frame_address(0), ot_origin_of). */
void ot_live_record_host_sited(thread_counters_t *c, uint64_t key, uint64_t size, uint32_t site);
void ot_live_record_host_unnoted(const void *frame, uint64_t key, uint64_t size);

/* A stacks=all host block whose call site is known (site): the site counted (inline by its owner
 * thread, sites_fast.h), the block in a free way of its nursery set inline, or else through
 * ot_live_record_host_sited. */
static inline __attribute__((always_inline)) void ot_live_place_sited(thread_counters_t *c, uint64_t key, uint64_t size,
                                                                       uint32_t site)
{
    if (OT_UNLIKELY(!ot_sites_owner_count(site, (int64_t)size, 1, size, 1))) ot_sites_on_alloc(site, size, false);
    nursery_way_t *w = free_way(c->fast_nursery, key); /* read here, not kept across the calls above */
    if (OT_UNLIKELY(w == NULL)) {
        ot_live_record_host_sited(c, key, size, site);
        return;
    }
    fill_counted(c, w, key, ot_pack(size, OT_KIND_HOST, site), size);
}

/* A host malloc under stacks=all. In the common case the stack is the thread's last walk with its
 * call site noted: the site is counted (inline by its owner thread, sites_fast.h) and the block
 * goes to a free way of its nursery set inline, or else through ot_live_record_host_sited. Any
 * other stack goes to ot_live_record_host_unnoted. Returns false, having changed nothing, for a
 * thread without a nursery or a block that is huge or large for the flight recorder (its large
 * ring: before, such a block whose stack was the last walk never reached it): the caller then calls
 * ot_live_record. */
static inline __attribute__((always_inline)) bool ot_live_record_all_fast(const void *frame, uint64_t key,
                                                                          uint64_t size)
{
    thread_counters_t *c = ot_my_counters;
    /* Not huge, nor large for the flight recorder (whose ring record_body writes). */
    if (OT_UNLIKELY(c == NULL) || OT_UNLIKELY(size >= ot_recorder_large_min) || OT_UNLIKELY(c->nursery == NULL))
        return false;
    const ot_origin_t origin = ot_origin_of(frame);
    uint32_t site = ot_live_noted(&origin, ot_note_tag(OT_KIND_HOST, -1));
    if (OT_UNLIKELY(site == 0)) {
        ot_live_record_host_unnoted(frame, key, size);
        return true;
    }
    ot_live_place_sited(c, key, size, site);
    return true;
}

/* A taken record of this thread's (c) with a site, or huge, or not host. */
void ot_live_account_free(thread_counters_t *c, uint64_t key, uint64_t val);
/* The same for a host record of stacks=all, neither huge nor sampled (the common free of that
 * mode): out of line, so that default mode's free keeps its registers. */
void ot_live_account_site_free(thread_counters_t *c, uint64_t val);

/* A record taken out of this thread's nursery (or, realloc, from wherever it was) accounted as
 * freed on c, this thread's record: inline for a plain host record, out of line for one with a
 * call site, of another kind or huge. */
static inline __attribute__((always_inline)) void account_taken(thread_counters_t *c, uint64_t key, uint64_t val)
{
    /* The low 44 bits (size and kind) below OT_SIZE_BIG: a host block, not huge (OT_KIND_HOST is 0). */
    _Static_assert(OT_KIND_HOST == 0, "host records have kind bits 0");
    if (OT_LIKELY(val < OT_SIZE_BIG)) {
        count_free(c, OT_KIND_HOST, val);
    } else if (ot_opt.stacks == OT_STACKS_ALL && (val & ((1ull << OT_SITE_SHIFT) - 1)) < OT_SIZE_BIG) {
        ot_live_account_site_free(c, val);
    } else {
        ot_live_account_free(c, key, val);
    }
}

/* Takes a block's record out of this thread's nursery, *cp being this thread's counters: false,
 * having changed nothing, when it is not there (the caller then calls ot_live_take or
 * ot_live_forget_host). */
static inline __attribute__((always_inline)) bool take_host_fast_on(uint64_t key, uint64_t *val, thread_counters_t **cp)
{
    thread_counters_t *c = ot_my_counters;
    *cp = c; /* read once: not again after the take's release store */
    return OT_LIKELY(c != NULL) && OT_LIKELY(c->take_nursery != NULL) && nursery_get(c->take_nursery, key, val, true);
}

static inline __attribute__((always_inline)) bool ot_live_take_host_fast(uint64_t key, uint64_t *val)
{
    thread_counters_t *c;
    return take_host_fast_on(key, val, &c);
}

/* A host free of a block recorded in this thread's nursery: true once it is forgotten. False,
 * having changed nothing, otherwise: the caller then calls ot_live_forget_host. */
static inline __attribute__((always_inline)) bool ot_live_forget_host_fast(uint64_t key)
{
    uint64_t val;
    thread_counters_t *c;
    if (OT_UNLIKELY(!take_host_fast_on(key, &val, &c))) return false;
    account_taken(c, key, val);
    return true;
}

/* realloc's release of the record it took (ot_live_release where this thread has no record). */
static inline __attribute__((always_inline)) void ot_live_release_host_fast(uint64_t key, uint64_t val)
{
    thread_counters_t *c = ot_my_counters;
    if (OT_LIKELY(c != NULL)) account_taken(c, key, val);
    else ot_live_release(key, val);
}

#endif
