/* Call-site table: stacks deduplicated into small ids with per-site live/peak/total statistics.
 * Lock-free (a CAS publishes each new id in an open-addressed index); memory from mmap only. */
#include <stdatomic.h>

#include "internal.h"

#define CHUNK_SHIFT 10
#define CHUNK_SITES (1u << CHUNK_SHIFT)
#define MAX_CHUNKS ((OT_MAX_SITES + 1) / CHUNK_SITES + 1)
/* The index starts at 64 Ki slots (256 KiB) and adds levels 4x larger when 70% full, so small
 * programs map little (their address space may be capped with RLIMIT_AS) and big ones still fit. */
#define INDEX_LEVELS 4
#define INDEX_BITS0 16

typedef struct {
    _Atomic uint64_t hash; /* 0: not (yet) a valid site */
    uint32_t kind;
    int32_t device;
    uint32_t depth;
    uintptr_t *ips;
    _Atomic int64_t live_bytes, live_count;
    _Atomic uint64_t peak_bytes, total_bytes, total_count;
    _Atomic uint8_t estimated;
} site_t;

static _Atomic(site_t *) chunks[MAX_CHUNKS];
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

/* The site of an id whose chunk exists (the allocation and free paths): no call, no creation. */
static inline __attribute__((always_inline)) site_t *site_of(uint32_t id)
{
    uint32_t c = id >> CHUNK_SHIFT;
    site_t *chunk = OT_LIKELY(c < MAX_CHUNKS) ? atomic_load_explicit(&chunks[c], memory_order_acquire) : NULL;
    return OT_LIKELY(chunk != NULL) ? &chunk[id & (CHUNK_SITES - 1)] : NULL;
}

static site_t *site_slot(uint32_t id, bool create)
{
    uint32_t c = id >> CHUNK_SHIFT;
    if (c >= MAX_CHUNKS) return NULL;
    site_t *chunk = atomic_load_explicit(&chunks[c], memory_order_acquire);
    if (!chunk && create) {
        site_t *fresh = ot_mmap(sizeof(site_t) * CHUNK_SITES);
        if (!fresh) return NULL;
        site_t *expected = NULL;
        if (atomic_compare_exchange_strong(&chunks[c], &expected, fresh)) chunk = fresh;
        else {
            ot_munmap(fresh, sizeof(site_t) * CHUNK_SITES);
            chunk = expected;
        }
    }
    return chunk ? &chunk[id & (CHUNK_SITES - 1)] : NULL;
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

/* Looks the stack up in one level; returns its id, or 0 with *empty_pos at the first free slot. */
static uint32_t find_in_level(_Atomic uint32_t *idx, unsigned bits, uint64_t h, const uintptr_t *ips, unsigned depth,
                              unsigned kind, int device, uint32_t *empty_pos)
{
    uint32_t mask = (1u << bits) - 1, pos = (uint32_t)(h >> (64 - bits)), tag = tag_of(h);
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

uint32_t ot_sites_intern(const uintptr_t *ips, unsigned depth, unsigned kind, int device)
{
    uint64_t h = hash_stack(ips, depth, kind, device);
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

void ot_sites_on_alloc(uint32_t id, uint64_t weight, bool estimated)
{
    site_t *s = site_of(id);
    if (!s) return;
    int64_t now = atomic_fetch_add_explicit(&s->live_bytes, (int64_t)weight, memory_order_relaxed) + (int64_t)weight;
    atomic_fetch_add_explicit(&s->live_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->total_bytes, weight, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->total_count, 1, memory_order_relaxed);
    if (estimated && !atomic_load_explicit(&s->estimated, memory_order_relaxed))
        atomic_store_explicit(&s->estimated, 1, memory_order_relaxed);
    uint64_t peak = atomic_load_explicit(&s->peak_bytes, memory_order_relaxed);
    while (now > 0 && (uint64_t)now > peak &&
           !atomic_compare_exchange_weak_explicit(&s->peak_bytes, &peak, (uint64_t)now, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

void ot_sites_on_free(uint32_t id, uint64_t weight)
{
    site_t *s = site_of(id);
    if (!s) return;
    atomic_fetch_sub_explicit(&s->live_bytes, (int64_t)weight, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->live_count, 1, memory_order_relaxed);
}

bool ot_sites_get(uint32_t id, ot_site_info_t *out)
{
    if (id == 0 || id >= atomic_load_explicit(&next_id, memory_order_acquire)) return false;
    site_t *s = site_slot(id, false);
    if (!s || !atomic_load_explicit(&s->hash, memory_order_acquire)) return false;
    int64_t lb = atomic_load_explicit(&s->live_bytes, memory_order_relaxed);
    int64_t lc = atomic_load_explicit(&s->live_count, memory_order_relaxed);
    out->id = id;
    out->kind = s->kind;
    out->device = s->device;
    out->depth = s->depth;
    out->ips = s->ips;
    out->live_bytes = lb > 0 ? (uint64_t)lb : 0;
    out->live_count = lc > 0 ? (uint64_t)lc : 0;
    out->peak_bytes = atomic_load_explicit(&s->peak_bytes, memory_order_relaxed);
    out->total_bytes = atomic_load_explicit(&s->total_bytes, memory_order_relaxed);
    out->total_count = atomic_load_explicit(&s->total_count, memory_order_relaxed);
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
    for (unsigned c = 0; c < MAX_CHUNKS; c++) {
        site_t *chunk = atomic_exchange(&chunks[c], NULL);
        if (chunk) ot_munmap(chunk, sizeof(site_t) * CHUNK_SITES);
    }
    atomic_store(&next_id, 1);
}
