/* Call-site table: stacks deduplicated into small ids with per-site live/peak/total statistics.
 * Lock-free (a CAS publishes each new id in an open-addressed index); memory from mmap only. */
#include <stdatomic.h>

#include "internal.h"

#define CHUNK_SHIFT 12
#define CHUNK_SITES (1u << CHUNK_SHIFT)
#define MAX_CHUNKS ((OT_MAX_SITES + 1) / CHUNK_SITES + 1)
#define INDEX_BITS 20
#define INDEX_SIZE (1u << INDEX_BITS)
#define INDEX_MAX_FILL (INDEX_SIZE / 10 * 7)

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
static _Atomic(_Atomic uint32_t *) index_slots;
static _Atomic uint32_t next_id = 1; /* id 0 means "no site" */

static uint64_t hash_stack(const uintptr_t *ips, unsigned depth, unsigned kind, int device)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)kind << 32) ^ (uint64_t)(uint32_t)device ^ depth;
    for (unsigned i = 0; i < depth; i++) {
        h ^= ips[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h ? h : 1;
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

static _Atomic uint32_t *get_index(void)
{
    _Atomic uint32_t *idx = atomic_load_explicit(&index_slots, memory_order_acquire);
    if (idx) return idx;
    _Atomic uint32_t *fresh = ot_mmap(sizeof(uint32_t) * INDEX_SIZE);
    if (!fresh) return NULL;
    _Atomic uint32_t *expected = NULL;
    if (atomic_compare_exchange_strong(&index_slots, &expected, fresh)) return fresh;
    ot_munmap((void *)fresh, sizeof(uint32_t) * INDEX_SIZE);
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

uint32_t ot_sites_intern(const uintptr_t *ips, unsigned depth, unsigned kind, int device)
{
    _Atomic uint32_t *idx = get_index();
    if (!idx) return 0;
    uint64_t h = hash_stack(ips, depth, kind, device);
    uint32_t pos = (uint32_t)(h >> (64 - INDEX_BITS));
    uint32_t mine = 0; /* an id we prepared but have not yet published */
    for (uint32_t probes = 0; probes < INDEX_SIZE; probes++, pos = (pos + 1) & (INDEX_SIZE - 1)) {
        uint32_t id = atomic_load_explicit(&idx[pos], memory_order_acquire);
        if (id) {
            site_t *s = site_slot(id, false);
            if (s && same_site(s, h, ips, depth, kind, device)) {
                if (mine) atomic_store_explicit(&site_slot(mine, false)->hash, 0, memory_order_release);
                return id;
            }
            continue;
        }
        if (!mine) {
            mine = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
            if (mine > OT_MAX_SITES || mine > INDEX_MAX_FILL) return 0;
            site_t *s = site_slot(mine, true);
            uintptr_t *copy = ot_perm_alloc(sizeof(uintptr_t) * (depth ? depth : 1));
            if (!s || !copy) return 0;
            for (unsigned i = 0; i < depth; i++) copy[i] = ips[i];
            s->kind = kind;
            s->device = device;
            s->depth = depth;
            s->ips = copy;
            atomic_store_explicit(&s->hash, h, memory_order_release);
        }
        /* Publish. If another thread filled this slot first, re-examine it: it may be our stack
         * (then our prepared id is withdrawn) or another one (keep probing). */
        uint32_t expected = 0;
        if (atomic_compare_exchange_strong_explicit(&idx[pos], &expected, mine, memory_order_acq_rel,
                                                    memory_order_acquire))
            return mine;
        site_t *s = site_slot(expected, false);
        if (s && same_site(s, h, ips, depth, kind, device)) {
            atomic_store_explicit(&site_slot(mine, false)->hash, 0, memory_order_release);
            return expected;
        }
    }
    return 0;
}

void ot_sites_on_alloc(uint32_t id, uint64_t weight, bool estimated)
{
    site_t *s = site_slot(id, false);
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
    site_t *s = site_slot(id, false);
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
    _Atomic uint32_t *idx = atomic_load(&index_slots);
    if (idx) ot_memset((void *)idx, 0, sizeof(uint32_t) * INDEX_SIZE);
    for (unsigned c = 0; c < MAX_CHUNKS; c++) {
        site_t *chunk = atomic_exchange(&chunks[c], NULL);
        if (chunk) ot_munmap(chunk, sizeof(site_t) * CHUNK_SITES);
    }
    atomic_store(&next_id, 1);
}
