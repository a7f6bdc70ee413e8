/* Call-site table: stacks deduplicated into small ids with per-site live/peak/total statistics.
 * Lock-free (a CAS publishes each new id in an open-addressed index); memory from mmap only. */
#include <stdatomic.h>

#include "internal.h"
#include "sites_fast.h"

/* The index starts at 64 Ki slots (256 KiB) and adds levels 4x larger when 70% full, so small
 * programs map little (their address space may be capped with RLIMIT_AS) and big ones still fit. */
#define INDEX_LEVELS 4
#define INDEX_BITS0 16

/* A site's running figures (sites_fast.h). */
typedef ot_site_counts_t counts_t;
typedef struct {
    int64_t live_bytes, live_count;
    uint64_t total_bytes, total_count;
} sum_t;

static inline void put_i(_Atomic int64_t *v, int64_t x) { atomic_store_explicit(v, x, memory_order_relaxed); }
static inline int64_t get_i(_Atomic int64_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }
static inline void put_u(_Atomic uint64_t *v, uint64_t x) { atomic_store_explicit(v, x, memory_order_relaxed); }
static inline uint64_t get_u(_Atomic uint64_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }

/* Adds a set of figures to a reader's sum. */
static inline void counts_read(counts_t *c, sum_t *sum)
{
    sum->live_bytes += get_i(&c->live_bytes);
    sum->live_count += get_i(&c->live_count);
    sum->total_bytes += get_u(&c->total_bytes);
    sum->total_count += get_u(&c->total_count);
}

typedef ot_site_t site_t; /* sites_fast.h: the owner's counting is inlined where blocks are recorded */

/* Chunk 0 is static: ids below OT_SITE_CHUNK_SITES, the first sites a process makes (most programs'
 * hot ones), are found by the allocation and free paths without the chunk table (sites_fast.h). */
site_t ot_site_chunk0[OT_SITE_CHUNK_SITES];
_Atomic(site_t *) ot_site_chunks[OT_SITE_MAX_CHUNKS] = {ot_site_chunk0};
typedef struct {
    _Atomic(_Atomic uint32_t *) slots;
    _Atomic uint32_t used;
} index_level_t;
static index_level_t levels[INDEX_LEVELS];
static inline unsigned level_bits(unsigned l) { return INDEX_BITS0 + 2 * l; }
static _Atomic uint32_t next_id = 1; /* id 0 means "no site" */

/* Four lanes, each a multiply chain over every fourth frame, then mixed: a stack of 30 frames costs
 * the latency of 8 multiplies instead of 30 (interning is on the allocation path of stacks=all). */
static uint64_t hash_stack(const uintptr_t *ips, unsigned depth, unsigned kind, int device)
{
    const uint64_t m = 0xff51afd7ed558ccdull;
    uint64_t a = 0x9e3779b97f4a7c15ull ^ ((uint64_t)kind << 32) ^ (uint64_t)(uint32_t)device ^ depth;
    uint64_t b = 0xc2b2ae3d27d4eb4full, c = 0x165667b19e3779f9ull, d = 0x27d4eb2f165667c5ull;
    unsigned i = 0;
    for (; i + 4 <= depth; i += 4) {
        a = (a ^ ips[i]) * m;
        b = (b ^ ips[i + 1]) * m;
        c = (c ^ ips[i + 2]) * m;
        d = (d ^ ips[i + 3]) * m;
        a ^= a >> 29;
        b ^= b >> 29;
        c ^= c >> 29;
        d ^= d >> 29;
    }
    for (; i < depth; i++) {
        a = (a ^ ips[i]) * m;
        a ^= a >> 29;
    }
    uint64_t h = a ^ (b << 17 | b >> 47) ^ (c << 31 | c >> 33) ^ (d << 47 | d >> 17);
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h ? h : 1;
}

static site_t *site_slot(uint32_t id, bool create)
{
    uint32_t c = id >> OT_SITE_CHUNK_SHIFT;
    if (c >= OT_SITE_MAX_CHUNKS) return NULL;
    site_t *chunk = atomic_load_explicit(&ot_site_chunks[c], memory_order_acquire);
    if (!chunk && create) {
        site_t *fresh = ot_mmap(sizeof(site_t) * OT_SITE_CHUNK_SITES);
        if (!fresh) return NULL;
        site_t *expected = NULL;
        if (atomic_compare_exchange_strong(&ot_site_chunks[c], &expected, fresh)) chunk = fresh;
        else {
            ot_munmap(fresh, sizeof(site_t) * OT_SITE_CHUNK_SITES);
            chunk = expected;
        }
    }
    return chunk ? &chunk[id & (OT_SITE_CHUNK_SITES - 1)] : NULL;
}

static _Atomic uint32_t *get_level(unsigned l, bool create)
{
    _Atomic uint32_t *idx = atomic_load_explicit(&levels[l].slots, memory_order_acquire);
    if (idx || !create) return idx;
    size_t bytes = sizeof(uint32_t) << level_bits(l);
    _Atomic uint32_t *fresh = ot_mmap(bytes);
    if (!fresh) return NULL;
    _Atomic uint32_t *expected = NULL;
    if (atomic_compare_exchange_strong(&levels[l].slots, &expected, fresh)) return fresh;
    ot_munmap((void *)fresh, bytes);
    return expected;
}

static bool same_site(site_t *s, uint64_t h, const uintptr_t *ips, unsigned depth, unsigned kind, int device)
{
    if (atomic_load_explicit(&s->hash, memory_order_acquire) != h) return false;
    if (s->kind != kind || s->device != device || s->depth != depth) return false;
    for (unsigned i = 0; i < depth; i++)
        if (s->ips[i] != ips[i]) return false;
    return true;
}

/* An index entry is the site id (OT_SITE_BITS) with 12 more bits of the stack's hash above it, so
 * that a probe passing over other stacks rarely has to read their site_t (a cache miss each). The
 * tag bits are not the ones that chose the position. 0 is an empty slot (ids start at 1). */
#define TAG_SHIFT OT_SITE_BITS
#define ID_MASK ((1u << OT_SITE_BITS) - 1)
static inline uint32_t tag_of(uint64_t h) { return (uint32_t)(h >> 8) & (0xffffffffu >> TAG_SHIFT); }
/* Where a stack of hash h starts its search in a level of 2^bits slots (ot_sites_prefetch's too). */
static inline uint32_t start_of(uint64_t h, unsigned bits) { return (uint32_t)(h >> (64 - bits)); }

/* Looks the stack up in one level; returns its id, or 0 with *empty_pos at the first free slot. */
static uint32_t find_in_level(_Atomic uint32_t *idx, unsigned bits, uint64_t h, const uintptr_t *ips, unsigned depth,
                              unsigned kind, int device, uint32_t *empty_pos)
{
    uint32_t mask = (1u << bits) - 1, pos = start_of(h, bits), tag = tag_of(h);
    for (uint32_t probes = 0; probes <= mask; probes++, pos = (pos + 1) & mask) {
        uint32_t e = atomic_load_explicit(&idx[pos], memory_order_acquire);
        if (!e) {
            *empty_pos = pos;
            return 0;
        }
        if ((e >> TAG_SHIFT) != tag) continue;
        site_t *s = site_slot(e & ID_MASK, false);
        if (s && same_site(s, h, ips, depth, kind, device)) return e & ID_MASK;
    }
    *empty_pos = UINT32_MAX;
    return 0;
}

static uint32_t prepare_site(uint64_t h, const uintptr_t *ips, unsigned depth, unsigned kind, int device)
{
    uint32_t id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    if (id > OT_MAX_SITES) return 0;
    site_t *s = site_slot(id, true);
    uintptr_t *copy = ot_perm_alloc(sizeof(uintptr_t) * (depth ? depth : 1));
    if (!s || !copy) return 0;
    for (unsigned i = 0; i < depth; i++) copy[i] = ips[i];
    s->kind = kind;
    s->device = device;
    s->depth = depth;
    s->ips = copy;
    atomic_store_explicit(&s->hash, h, memory_order_release);
    return id;
}

/* The slot a stack's search starts from in each level there is: the index is touched nowhere else
 * on the allocation path, so under stacks=all that first load is a cache miss (about two thirds of
 * the time in find_in_level on gcc's cc1), which the walker's own filing of the walk can hide. */
uint64_t ot_sites_prefetch(const uintptr_t *ips, unsigned depth, unsigned kind, int device)
{
    uint64_t h = hash_stack(ips, depth, kind, device);
    for (unsigned l = 0; l < INDEX_LEVELS; l++) {
        _Atomic uint32_t *idx = get_level(l, false);
        if (!idx) break;
        __builtin_prefetch((const void *)&idx[start_of(h, level_bits(l))]);
    }
    return h;
}

uint32_t ot_sites_intern(const uintptr_t *ips, unsigned depth, unsigned kind, int device)
{
    return ot_sites_intern_hashed(hash_stack(ips, depth, kind, device), ips, depth, kind, device);
}

uint32_t ot_sites_intern_hashed(uint64_t h, const uintptr_t *ips, unsigned depth, unsigned kind, int device)
{
    uint32_t mine = 0; /* an id we prepared but have not yet published */
    for (unsigned l = 0; l < INDEX_LEVELS; l++) {
        _Atomic uint32_t *idx = get_level(l, false);
        unsigned bits = level_bits(l);
        uint32_t pos, id;
        if (idx && (id = find_in_level(idx, bits, h, ips, depth, kind, device, &pos))) goto found_id;
        /* Not in this level. Insert here if this is the newest level and it has room; a site is
         * never added to an older level once a newer one exists (two threads racing across a level
         * change may each add the same stack once: its statistics are then split, never lost). */
        if (l + 1 < INDEX_LEVELS && (get_level(l + 1, false) ||
                                     atomic_load_explicit(&levels[l].used, memory_order_relaxed) >= (7u << bits) / 10))
            continue;
        if (!idx && !(idx = get_level(l, true))) return 0;
        for (;;) {
            if ((id = find_in_level(idx, bits, h, ips, depth, kind, device, &pos))) goto found_id;
            if (pos == UINT32_MAX) return 0;
            if (!mine && !(mine = prepare_site(h, ips, depth, kind, device))) return 0;
            /* Publish. If another thread filled this slot first, look again: it may be our stack
             * (then our prepared id is withdrawn) or another one (keep probing). */
            uint32_t expected = 0;
            if (atomic_compare_exchange_strong_explicit(&idx[pos], &expected, mine | tag_of(h) << TAG_SHIFT,
                                                        memory_order_acq_rel, memory_order_acquire)) {
                atomic_fetch_add_explicit(&levels[l].used, 1, memory_order_relaxed);
                return mine;
            }
        }
    found_id:
        if (mine) atomic_store_explicit(&site_slot(mine, false)->hash, 0, memory_order_release);
        return id;
    }
    return 0;
}

/* Adds counts to a site's shared counters and raises its peak to the live bytes that makes. */
static inline __attribute__((always_inline)) void shared_add(site_t *s, int64_t lb, int64_t lc, uint64_t tb, uint64_t tc)
{
    int64_t now = atomic_fetch_add_explicit(&s->shared.live_bytes, lb, memory_order_relaxed) + lb;
    if (lc) atomic_fetch_add_explicit(&s->shared.live_count, lc, memory_order_relaxed);
    if (tb) atomic_fetch_add_explicit(&s->shared.total_bytes, tb, memory_order_relaxed);
    if (tc) atomic_fetch_add_explicit(&s->shared.total_count, tc, memory_order_relaxed);
    if (lb > 0) ot_site_raise_peak(s, now + get_i(&s->own.live_bytes));
}

/* ---- the owner thread's counts
 * A process with one thread (most of them, and every process until its second thread counts at
 * sites) counts at the sites directly, and the shared counters' locked adds were a tenth of
 * oomtrace's time on gcc's cc1 with stacks=all. So the first thread that counts directly becomes
 * the owner of a second set of counters per site, which no other thread writes: it adds to them
 * with one unlocked instruction each, which a signal handler on the same thread can only run
 * before or after, never in the middle of. Every other thread uses the shared counters; readers
 * add both. Which thread owns them never changes (a thread that ends leaves its counts; a fork
 * child of another thread does not own them). */
static _Atomic int owner_taken;
OT_TLS int ot_site_owner; /* 0: not asked yet, 1: this thread owns them, 2: another thread does */

static OT_NOINLINE bool claim_owner(void)
{
    int expected = 0;
    bool mine = atomic_compare_exchange_strong(&owner_taken, &expected, 1);
    /* A handler that claimed in between has decided already. */
    if (!ot_site_owner) ot_site_owner = mine ? 1 : 2;
    return ot_site_owner == 1;
}

static inline bool owner(void)
{
    int o = ot_site_owner;
    return OT_LIKELY(o != 0) ? o == 1 : claim_owner();
}

bool ot_sites_owned_here(void)
{
    return owner();
}

/* ---- per-thread pending counts
 * A site's counters are shared: threads that allocate at the same call site at once (workers
 * running the same loop) would each pull the site's cache line over on every allocation and free.
 * Instead, once a second thread counts at sites (with one there is nobody to share a line with),
 * each thread keeps what it adds to its hot sites in a small set-associative array of its own
 * (only the owner writes it), and moves that to the shared counters when the entry is given to
 * another site, when its live bytes get PEND_GRANULE away from zero, and when the thread ends.
 * Readers (ot_sites_get) add every thread's pending counts for the site: exact whenever no
 * thread is moving them at that instant, as the per-thread totals of live.c. A site's peak is
 * raised from its shared live bytes plus the raising thread's entry (note_high), so it is exact
 * for a site that one thread allocates at and within PEND_GRANULE per other thread (the same
 * bound as the process's own peak); reports fold in the exact level when they read it.
 * A signal handler that allocates while its thread is updating its entries finds them busy and
 * goes to the shared counters. */
#define PEND_SETS 32
#define PEND_WAYS 2
#define PEND_REPLACE 8
#define PEND_GRANULE (256 * 1024)
typedef struct {
    _Atomic uint32_t site;
    counts_t c;
    int64_t high; /* the highest c.live_bytes since they were last moved to the site (see note_high) */
} pend_entry_t;
typedef struct pend {
    pend_entry_t e[PEND_SETS][PEND_WAYS];
    uint32_t busy, turn, registered;
    struct pend *next; /* every block ever attached, for readers; never freed */
} pend_t;
static _Atomic(pend_t *) all_pends;
_Atomic uint32_t ot_site_n_pends; /* blocks ever attached: threads that counted at sites */
static OT_TLS pend_t *t_pend;

size_t ot_sites_pend_bytes(void) { return sizeof(pend_t); }

static inline void entry_clear(pend_entry_t *e)
{
    put_i(&e->c.live_bytes, 0);
    put_i(&e->c.live_count, 0);
    put_u(&e->c.total_bytes, 0);
    put_u(&e->c.total_count, 0);
}

/* Moves an entry's counts to its site's shared counters (the entry keeps its site). The entry is
 * emptied first: a reader in between sees the counts in neither place, never in both. */
static void pend_flush(pend_entry_t *e)
{
    uint32_t id = atomic_load_explicit(&e->site, memory_order_relaxed);
    site_t *s = id ? ot_site_of(id) : NULL;
    if (!s) return;
    sum_t m = {0};
    counts_read(&e->c, &m);
    e->high = 0;
    if (!m.live_bytes && !m.live_count && !m.total_bytes && !m.total_count) return;
    entry_clear(e);
    shared_add(s, m.live_bytes, m.live_count, m.total_bytes, m.total_count);
}

/* Flushes an entry and frees it for another site. */
static void pend_release(pend_entry_t *e)
{
    uint32_t id = atomic_load_explicit(&e->site, memory_order_relaxed);
    if (!id) return;
    pend_flush(e);
    atomic_store_explicit(&e->site, 0, memory_order_release);
    site_t *s = ot_site_of(id);
    if (s) atomic_fetch_sub_explicit(&s->pending, 1, memory_order_relaxed);
}

/* The end of an update of this thread's entries (a signal handler may use them again). */
static inline __attribute__((always_inline)) void leave(pend_t *p)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    p->busy = 0;
}

/* This thread's entry for site id, if it has one. */
static inline __attribute__((always_inline)) pend_entry_t *pend_hit(pend_t *p, uint32_t id)
{
    pend_entry_t *w = p->e[id & (PEND_SETS - 1)];
    if (OT_LIKELY(atomic_load_explicit(&w[0].site, memory_order_relaxed) == id)) return &w[0];
    if (atomic_load_explicit(&w[1].site, memory_order_relaxed) == id) return &w[1];
    return NULL;
}

/* An entry's live bytes reached a new high since they were last moved to the site: the site's peak
 * is raised to what the site holds with them (its shared and owner's counts and this entry). Other
 * threads' entries are not seen: the peak is exact for a site that one thread allocates at, and
 * within PEND_GRANULE per thread otherwise, as the process's own peak. A loop that allocates and
 * frees at a site reaches no new high and pays one compare. */
static inline __attribute__((always_inline)) void note_high(pend_entry_t *e, uint32_t id)
{
    int64_t live = get_i(&e->c.live_bytes);
    if (OT_LIKELY(live <= e->high)) return;
    e->high = live;
    site_t *s = ot_site_of(id);
    if (s) ot_site_raise_peak(s, live + get_i(&s->shared.live_bytes) + get_i(&s->own.live_bytes));
}

/* Adds to an entry; true when its live bytes got a step from zero (the caller moves them). */
static inline __attribute__((always_inline)) bool entry_add(pend_entry_t *e, int64_t lb, int64_t lc, uint64_t tb,
                                                            uint64_t tc)
{
    int64_t live = get_i(&e->c.live_bytes) + lb;
    put_i(&e->c.live_bytes, live);
    put_i(&e->c.live_count, get_i(&e->c.live_count) + lc);
    if (tc) {
        put_u(&e->c.total_bytes, get_u(&e->c.total_bytes) + tb);
        put_u(&e->c.total_count, get_u(&e->c.total_count) + tc);
    }
    return live >= PEND_GRANULE || live <= -PEND_GRANULE;
}

/* An entry of this thread's for site id, which has none: a free way of its set, or (one miss in
 * PEND_REPLACE) a taken one, whose counts go to its site first. NULL: count at the site this time.
 * A program that allocates at many sites in turn (a compiler) would otherwise move an entry's
 * counts to its site on nearly every call, which costs more than counting at the site; a site that
 * stays hot still gets a way. */
static pend_entry_t *pend_take(pend_t *p, uint32_t id, site_t *s)
{
    pend_entry_t *w = p->e[id & (PEND_SETS - 1)], *e;
    if (!atomic_load_explicit(&w[0].site, memory_order_relaxed)) {
        e = &w[0];
    } else if (!atomic_load_explicit(&w[1].site, memory_order_relaxed)) {
        e = &w[1];
    } else {
        if (++p->turn % PEND_REPLACE) return NULL;
        e = &w[(p->turn / PEND_REPLACE) & 1];
        pend_release(e);
    }
    e->high = 0;
    /* Counted before the entry names it: a reader that finds the entry also scans. */
    atomic_fetch_add_explicit(&s->pending, 1, memory_order_relaxed);
    atomic_store_explicit(&e->site, id, memory_order_release);
    return e;
}

/* A sampled block marks its site estimated. */
static inline __attribute__((always_inline)) void mark_estimated(site_t *s, bool estimated)
{
    if (OT_UNLIKELY(estimated) && !atomic_load_explicit(&s->estimated, memory_order_relaxed))
        atomic_store_explicit(&s->estimated, 1, memory_order_relaxed);
}

/* This thread's entries have none for the site, or the block is sampled: an entry if one can be
 * had, else the site's own counters. p is held busy by the caller and left here. */
static OT_NOINLINE void count_miss(pend_t *p, uint32_t id, int64_t lb, int64_t lc, uint64_t tb, uint64_t tc,
                                   bool estimated)
{
    site_t *s = ot_site_of(id);
    if (s) {
        mark_estimated(s, estimated);
        pend_entry_t *e = pend_hit(p, id);
        if (!e) e = pend_take(p, id, s);
        if (!e) shared_add(s, lb, lc, tb, tc);
        else if (entry_add(e, lb, lc, tb, tc)) pend_flush(e);
        else if (lb > 0) note_high(e, id);
    }
    leave(p);
}

static OT_NOINLINE void flush_and_leave(pend_t *p, pend_entry_t *e)
{
    pend_flush(e);
    leave(p);
}

/* The common case, kept free of calls but tail calls: this thread's entry for the site exists.
 * busy is set before the entries are looked at: a signal handler that counted in between could
 * have given the entry to another site. */
static inline __attribute__((always_inline)) void count(uint32_t id, int64_t lb, int64_t lc, uint64_t tb,
                                                        uint64_t tc, bool estimated)
{
    pend_t *p = t_pend;
    /* With one thread there is nobody to share a site's line with: count at the site. */
    if (atomic_load_explicit(&ot_site_n_pends, memory_order_relaxed) < 2 || OT_UNLIKELY(p == NULL) ||
        OT_UNLIKELY(p->busy)) {
        site_t *s = ot_site_of(id);
        if (OT_UNLIKELY(s == NULL)) return;
        mark_estimated(s, estimated);
        if (owner()) ot_site_owner_add(s, lb, lc, tb, tc);
        else shared_add(s, lb, lc, tb, tc);
        return;
    }
    p->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pend_entry_t *e = OT_LIKELY(!estimated) ? pend_hit(p, id) : NULL;
    if (OT_UNLIKELY(e == NULL)) {
        count_miss(p, id, lb, lc, tb, tc, estimated);
        return;
    }
    if (OT_UNLIKELY(entry_add(e, lb, lc, tb, tc))) {
        flush_and_leave(p, e);
        return;
    }
    if (lb > 0) note_high(e, id);
    leave(p);
}

void ot_sites_on_alloc(uint32_t id, uint64_t weight, bool estimated)
{
    count(id, (int64_t)weight, 1, weight, 1, estimated);
}

void ot_sites_on_free(uint32_t id, uint64_t weight)
{
    count(id, -(int64_t)weight, -1, 0, 0, false);
}

void ot_sites_attach(void *mem)
{
    pend_t *old = t_pend;
    if (old) {
        old->busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        for (unsigned i = 0; i < PEND_SETS; i++)
            for (unsigned w = 0; w < PEND_WAYS; w++) pend_release(&old->e[i][w]);
        t_pend = NULL;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        old->busy = 0;
    }
    pend_t *p = mem;
    if (!p) return;
    if (!p->registered) {
        p->registered = 1;
        atomic_fetch_add_explicit(&ot_site_n_pends, 1, memory_order_relaxed);
        p->next = atomic_load_explicit(&all_pends, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&all_pends, &p->next, p, memory_order_release,
                                                      memory_order_relaxed)) {
        }
    }
    p->busy = 0;
    t_pend = p;
}

bool ot_sites_get(uint32_t id, ot_site_info_t *out)
{
    if (id == 0 || id >= atomic_load_explicit(&next_id, memory_order_acquire)) return false;
    site_t *s = site_slot(id, false);
    if (!s || !atomic_load_explicit(&s->hash, memory_order_acquire)) return false;
    sum_t m = {0};
    counts_read(&s->shared, &m);
    counts_read(&s->own, &m);
    if (atomic_load_explicit(&s->pending, memory_order_acquire)) {
        /* Counts that threads have not moved to the site yet. */
        for (pend_t *p = atomic_load_explicit(&all_pends, memory_order_acquire); p; p = p->next) {
            pend_entry_t *w = p->e[id & (PEND_SETS - 1)];
            for (unsigned k = 0; k < PEND_WAYS; k++)
                if (atomic_load_explicit(&w[k].site, memory_order_acquire) == id) counts_read(&w[k].c, &m);
        }
    }
    int64_t lb = m.live_bytes, lc = m.live_count;
    uint64_t peak = atomic_load_explicit(&s->peak_bytes, memory_order_relaxed);
    out->id = id;
    out->kind = s->kind;
    out->device = s->device;
    out->depth = s->depth;
    out->ips = s->ips;
    out->live_bytes = lb > 0 ? (uint64_t)lb : 0;
    out->live_count = lc > 0 ? (uint64_t)lc : 0;
    /* The level seen now counts towards the peak, as the process's own peak does. */
    out->peak_bytes = lb > 0 && (uint64_t)lb > peak ? (uint64_t)lb : peak;
    out->total_bytes = m.total_bytes;
    out->total_count = m.total_count;
    out->estimated = atomic_load_explicit(&s->estimated, memory_order_relaxed) != 0;
    return true;
}

uint32_t ot_sites_count(void)
{
    uint32_t n = atomic_load_explicit(&next_id, memory_order_acquire);
    return n > 0 ? n - 1 : 0;
}

unsigned ot_sites_top(uint32_t *ids, unsigned max, bool device)
{
    static const unsigned cap = 1000;
    uint64_t best[1000];
    unsigned n = 0;
    if (max > cap) max = cap;
    if (max == 0) return 0;
    uint32_t end = atomic_load_explicit(&next_id, memory_order_acquire);
    for (uint32_t id = 1; id < end; id++) {
        ot_site_info_t si;
        if (!ot_sites_get(id, &si) || ot_kind_is_device(si.kind) != device || si.live_bytes == 0) continue;
        if (n == max && si.live_bytes <= best[n - 1]) continue;
        unsigned i = n < max ? n++ : max - 1;
        while (i > 0 && best[i - 1] < si.live_bytes) {
            best[i] = best[i - 1];
            ids[i] = ids[i - 1];
            i--;
        }
        best[i] = si.live_bytes;
        ids[i] = id;
    }
    return n;
}

void ot_sites_reset_for_test(void)
{
    for (unsigned l = 0; l < INDEX_LEVELS; l++) {
        _Atomic uint32_t *idx = atomic_exchange(&levels[l].slots, NULL);
        if (idx) ot_munmap((void *)idx, sizeof(uint32_t) << level_bits(l));
        atomic_store(&levels[l].used, 0);
    }
    ot_memset(ot_site_chunk0, 0, sizeof ot_site_chunk0);
    for (unsigned c = 1; c < OT_SITE_MAX_CHUNKS; c++) {
        site_t *chunk = atomic_exchange(&ot_site_chunks[c], NULL);
        if (chunk) ot_munmap(chunk, sizeof(site_t) * OT_SITE_CHUNK_SITES);
    }
    atomic_store(&next_id, 1);
    /* Pending counts name sites that are gone now. */
    for (pend_t *p = atomic_load(&all_pends); p; p = p->next)
        for (unsigned i = 0; i < PEND_SETS; i++)
            for (unsigned w = 0; w < PEND_WAYS; w++) {
                atomic_store(&p->e[i][w].site, 0);
                entry_clear(&p->e[i][w]);
            }
}
