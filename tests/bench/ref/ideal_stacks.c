/* Bench reference, not a tracker: the least work an exact stack for every allocation can cost on a
 * malloc/free pair, as a lower bound for oomtrace's `stacks=all` on small_churn. On top of
 * ideal_record.c (a per-thread 2-way array of records, two running totals per direction), each
 * malloc finds its call site the cheapest exact way there is for code without frame pointers:
 *  - a stack met before is recognised by its caller's return address and stack pointer plus the
 *    return-address slot of every outer frame (read from the stack and compared with the walk that
 *    found them); only a stack that fails this is walked with libunwind and interned;
 *  - the site's live bytes and count, its total and its peak are plain adds on one array entry;
 *  - a free subtracts from the site its record names.
 * It has none of what makes a tracker usable: one remembered stack, no rbp slots checked (an
 * optimistic floor), nothing shared between threads, no recursion guard beyond the walk's own, no
 * signal safety, no dlclose, a full set silently overwrites a record, realloc/calloc not wrapped.
 *
 * Built with IDEAL_SAFE (ideal_stacks_safe.c), it adds the checks that the brief asks of any
 * tracker on this path, each the cheapest way, and nothing else of oomtrace's (SAFE below).
 * Built with IDEAL_TABLE as well (ideal_live_safe.c), blocks are recorded in ideal_table.h's table
 * as threads share it (size and site in the slot) instead of the per-thread array: the floor of the
 * same for a program whose blocks stay live (live_10m, live_10m_mt). */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdbool.h>
#include <stdint.h>

#include "next.h"
#ifndef IDEAL_TABLE
#define IDEAL_TABLE 0
#endif
#if IDEAL_TABLE
#define IDEAL_SHARED 1
#include "ideal_table.h"
#endif

void *malloc(size_t n);
void free(void *p);

#define SETS 1024
#define MAXF 64
#define SITES (1u << 16)
#define TLS __thread __attribute__((tls_model("initial-exec")))
#if !IDEAL_TABLE
static TLS struct {
    uint64_t key, val; /* val: size | site << 40 */
} nursery[SETS][2];
#endif
static TLS uint64_t allocated_bytes, allocated_count, freed_bytes, freed_count;

/* The remembered stack: frame 1 (the caller) by (ip, sp), frames 2.. by their return-address slots. */
static TLS uintptr_t m_ip, m_sp;
static TLS unsigned m_n, m_site;
static TLS uintptr_t m_at[MAXF + 1], m_val[MAXF + 1];
static TLS int walking;

/* SAFE: what the brief requires of every tracker on this path, beyond the record and the stack:
 *  - signal safety: a handler's malloc in the middle of the compare must not use (or rewrite) the
 *    remembered stack, or the compare can run off its end (busy, checked, and held around it);
 *  - a block whose size does not fit the record goes another way (a compare; here: not recorded);
 *  - two modes in one library (default sampling, stacks=all): a load and a compare;
 *  - dlclose: a stack remembered from before code was unloaded is not this one, whatever the
 *    return addresses say (a generation, compared);
 *  - code whose frames are found from rbp: rbp compared where the walk says it matters;
 *  - any number of call sites (report_1m has 100 000): past a static array, sites in chunks
 *    found through a chunk table (a compare);
 *  - threads: a site's counters take plain adds only from the thread that owns them (a compare;
 *    the other threads' way is not modelled). */
#ifndef IDEAL_SAFE
#define IDEAL_SAFE 0
#endif
#if IDEAL_SAFE
static TLS int busy, owner; /* owner: 0 not asked yet, 1 this thread owns its sites */
static TLS uintptr_t m_bp;
static TLS unsigned m_gen, m_matters0;
static unsigned code_gen, mode = 1;
#endif

typedef struct {
    uint64_t live_bytes, live_count, peak_bytes, total_bytes, total_count;
    uint64_t hash;
} site_t;
static site_t site[SITES];

#if IDEAL_SAFE
/* Sites past the static array are in chunks made when needed (none here, as this floor interns
 * at most SITES stacks), found through a chunk table: a compare on the way to the static ones.
 * (Not one large reservation for every site instead: address space taken up front is what a
 * program under RLIMIT_AS would miss.) */
#define CHUNK_SITES 1024
static site_t *chunks[64 * SITES / CHUNK_SITES];
static site_t nowhere; /* the site of an id whose chunk does not exist */

static inline site_t *site_of(unsigned id)
{
    if (__builtin_expect(id < SITES, 1)) return &site[id];
    unsigned c = id / CHUNK_SITES;
    site_t *chunk = c < sizeof chunks / sizeof *chunks ? __atomic_load_n(&chunks[c], __ATOMIC_ACQUIRE) : NULL;
    return chunk != NULL ? &chunk[id % CHUNK_SITES] : &nowhere;
}
#define COUNTS_OK() (owner == 1)
#else
#define site_of(id) (&site[id])
#define COUNTS_OK() 1
#endif

#if !IDEAL_TABLE
static inline unsigned set_of(uint64_t k)
{
    return (unsigned)(((k >> 4) ^ (k >> 14) ^ (k >> 27)) & (SETS - 1));
}
#endif

/* Walks from malloc's caller out, remembers the slots, interns the stack by its return addresses. */
static __attribute__((noinline)) unsigned walk(uintptr_t ip, uintptr_t sp, uintptr_t bp)
{
    (void)bp;
    unw_context_t ctx;
    unw_cursor_t cur;
    uintptr_t ips[MAXF];
    unsigned n = 0, d = 0;
    walking = 1;
    unw_getcontext(&ctx);
    unw_init_local(&cur, &ctx);
    bool in = false;
    while (unw_step(&cur) > 0 && n < MAXF) {
        unw_word_t fip, fsp;
        unw_get_reg(&cur, UNW_REG_IP, &fip);
        unw_get_reg(&cur, UNW_REG_SP, &fsp);
        if (!in) {
            if (fip != ip || fsp != sp) continue;
            in = true;
        } else {
            m_at[d] = (uintptr_t)fsp - 8;
            m_val[d++] = (uintptr_t)fip;
        }
        ips[n++] = (uintptr_t)fip;
    }
    walking = 0;
    if (!in) return m_n = 0, m_ip = 0, 0;
    /* The end marker: a slot that never holds its value. */
    m_at[d] = (uintptr_t)&m_at[d];
    m_val[d] = m_at[d] + 1;
    m_ip = ip;
    m_sp = sp;
    m_n = d;
#if IDEAL_SAFE
    m_bp = bp;
    m_gen = __atomic_load_n(&code_gen, __ATOMIC_ACQUIRE);
    owner = 1; /* asked (each thread owns its own here) */
    m_matters0 = 0; /* the frames' rules are not looked at here: rbp never matters */
#endif
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned i = 0; i < n; i++) h = (h ^ ips[i]) * 0x100000001b3ull;
    h |= 1;
    unsigned s = (unsigned)(h >> 48) | 1;
    while (site[s].hash && site[s].hash != h) s = (s + 1) & (SITES - 1) ? (s + 1) & (SITES - 1) : 1;
    site[s].hash = h;
    return m_site = s;
}

__attribute__((optimize("no-omit-frame-pointer"))) void *malloc(size_t n)
{
    void *p = call_next_malloc(n);
#if IDEAL_SAFE
    if (p && !walking && __builtin_expect(n < (1ull << 40), 1) && __atomic_load_n(&mode, __ATOMIC_RELAXED) == 1 &&
        !busy) {
#else
    if (p && !walking) {
#endif
        uintptr_t ip = (uintptr_t)__builtin_return_address(0);
        uintptr_t sp = (uintptr_t)__builtin_frame_address(0) + 16;
        uintptr_t bp = *(const uintptr_t *)__builtin_frame_address(0); /* the caller's rbp, saved by us */
        unsigned s;
        const uintptr_t *at = m_at, *val = m_val;
#if IDEAL_SAFE
        busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (ip == m_ip && sp == m_sp && (!m_matters0 || bp == m_bp) &&
            m_gen == __atomic_load_n(&code_gen, __ATOMIC_ACQUIRE)) {
#else
        if (ip == m_ip && sp == m_sp) {
#endif
            while (*(const uintptr_t *)*at == *val) at++, val++;
            s = (unsigned)(at - m_at) == m_n ? m_site : walk(ip, sp, bp);
        } else {
            s = walk(ip, sp, bp);
        }
#if IDEAL_SAFE
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        busy = 0;
#endif
        site_t *st = site_of(s);
        if (COUNTS_OK()) {
            st->live_bytes += n;
            st->live_count++;
            st->total_bytes += n;
            st->total_count++;
            if (st->live_bytes > st->peak_bytes) st->peak_bytes = st->live_bytes;
        }
        uint64_t k = (uint64_t)(uintptr_t)p;
#if IDEAL_TABLE
        table_insert(k, n | (uint64_t)s << 40);
#else
        unsigned w = set_of(k);
        int way = nursery[w][0].key == 0 ? 0 : 1;
        nursery[w][way].key = k;
        nursery[w][way].val = n | (uint64_t)s << 40;
#endif
        allocated_bytes += n;
        allocated_count++;
    }
    return p;
}

void free(void *p)
{
    uint64_t k = (uint64_t)(uintptr_t)p, v;
#if IDEAL_TABLE
    if (p && table_remove(k, &v)) {
#else
    unsigned w = set_of(k);
    int way = nursery[w][0].key == k ? 0 : nursery[w][1].key == k ? 1 : -1;
    if (p && way >= 0) {
        v = nursery[w][way].val;
#endif
        uint64_t size = v & ((1ull << 40) - 1);
        unsigned s = (unsigned)(v >> 40);
        site_t *st = site_of(s);
        if (COUNTS_OK()) {
            st->live_bytes -= size;
            st->live_count--;
        }
        freed_bytes += size;
        freed_count++;
#if !IDEAL_TABLE
        nursery[w][way].key = 0;
#endif
    }
    call_next_free(p);
}
