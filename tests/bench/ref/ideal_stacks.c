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
 * signal safety, no dlclose, a full set silently overwrites a record, realloc/calloc not wrapped. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdbool.h>
#include <stdint.h>

#include "next.h"

void *malloc(size_t n);
void free(void *p);

#define SETS 1024
#define MAXF 64
#define SITES (1u << 16)
#define TLS __thread __attribute__((tls_model("initial-exec")))
static TLS struct {
    uint64_t key, val; /* val: size | site << 40 */
} nursery[SETS][2];
static TLS uint64_t allocated_bytes, allocated_count, freed_bytes, freed_count;

/* The remembered stack: frame 1 (the caller) by (ip, sp), frames 2.. by their return-address slots. */
static TLS uintptr_t m_ip, m_sp;
static TLS unsigned m_n, m_site;
static TLS uintptr_t m_at[MAXF + 1], m_val[MAXF + 1];
static TLS int walking;

static struct {
    uint64_t live_bytes, live_count, peak_bytes, total_bytes, total_count;
    uint64_t hash;
} site[SITES];

static inline unsigned set_of(uint64_t k)
{
    return (unsigned)(((k >> 4) ^ (k >> 14) ^ (k >> 27)) & (SETS - 1));
}

/* Walks from malloc's caller out, remembers the slots, interns the stack by its return addresses. */
static __attribute__((noinline)) unsigned walk(uintptr_t ip, uintptr_t sp)
{
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
    if (p && !walking) {
        uintptr_t ip = (uintptr_t)__builtin_return_address(0);
        uintptr_t sp = (uintptr_t)__builtin_frame_address(0) + 16;
        unsigned s;
        const uintptr_t *at = m_at, *val = m_val;
        if (ip == m_ip && sp == m_sp) {
            while (*(const uintptr_t *)*at == *val) at++, val++;
            s = (unsigned)(at - m_at) == m_n ? m_site : walk(ip, sp);
        } else {
            s = walk(ip, sp);
        }
        site[s].live_bytes += n;
        site[s].live_count++;
        site[s].total_bytes += n;
        site[s].total_count++;
        if (site[s].live_bytes > site[s].peak_bytes) site[s].peak_bytes = site[s].live_bytes;
        uint64_t k = (uint64_t)(uintptr_t)p;
        unsigned w = set_of(k);
        int way = nursery[w][0].key == 0 ? 0 : 1;
        nursery[w][way].key = k;
        nursery[w][way].val = n | (uint64_t)s << 40;
        allocated_bytes += n;
        allocated_count++;
    }
    return p;
}

void free(void *p)
{
    uint64_t k = (uint64_t)(uintptr_t)p;
    unsigned w = set_of(k);
    int way = nursery[w][0].key == k ? 0 : nursery[w][1].key == k ? 1 : -1;
    if (p && way >= 0) {
        uint64_t v = nursery[w][way].val, size = v & ((1ull << 40) - 1);
        unsigned s = (unsigned)(v >> 40);
        site[s].live_bytes -= size;
        site[s].live_count--;
        freed_bytes += size;
        freed_count++;
        nursery[w][way].key = 0;
    }
    call_next_free(p);
}
