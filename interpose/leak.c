/* The leak check's scan: stops the other threads (stopworld.c), scans the roots (each root set in
 * scan_roots, as LSan names them) and marks through the live blocks the table knows. A block no
 * reachable word points into (start or interior) is lost; so is one reachable only from a lost one.
 * Runs at exit only, outside any hook: memory from ot_mmap, no malloc, no stdio, no locks. */
#include <errno.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <immintrin.h>

#include "internal.h"

#define GRAN_SHIFT 20               /* the index's granule: 1 MiB */
#define MAX_GRANULES (16u << 20)    /* more than this (huge device ranges): binary search alone */
#define ARENA_BYTES (64ull << 20)   /* glibc's HEAP_MAX_SIZE on 64-bit: non-main arenas are aligned to it */
#define MAX_THREADS 4096
#define MAX_OWN 8192

enum { VMA_ANON, VMA_HEAP, VMA_STACK, VMA_OWN, VMA_FILE, VMA_SPECIAL };
typedef struct {
    uintptr_t lo, hi;
    uint8_t r, w, priv, type;
    uint8_t handled; /* a thread's stack, scanned from its sp */
} vma_t;

static struct {
    ot_leak_block_t *b;
    size_t n, cap, dropped;
    uintptr_t min, max;
    uint64_t *gkey; /* granule + 1; 0 = empty */
    uint32_t *glo, *ghi;
    size_t gmask;
    bool gidx;
    size_t found; /* the block find_block found last */
    bool avx2; /* the CPU has AVX2: scan_words compares four words at a time */
    uint32_t *stack; /* the blocks found but not read yet: a queue, [qh, qt) */
    size_t qh, qt;
    vma_t *vma;
    size_t nvma;
    uintptr_t own_lo[MAX_OWN], own_hi[MAX_OWN];
    unsigned nown;
    ot_world_thread_t *threads;
    ot_leak_scan_t *out;
    char *maps_buf;
    size_t maps_cap;
    uint8_t bit;       /* the pass's mark: 1 for every block, 2 for the device pass */
    bool device_pass;  /* roots and blocks of the CUDA runtime and driver are left out */
    uintptr_t cuda_lo[32], cuda_hi[32]; /* their images */
    unsigned ncuda;
    uint8_t *site_cuda; /* per site: 0 unknown, 1 allocated by CUDA's own code, 2 not */
    uint32_t nsites;
} S;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void note(const char *s)
{
    S.out->incomplete = true;
    size_t l = ot_strlen(S.out->note);
    if (l + 3 >= sizeof S.out->note) return;
    if (l) ot_strlcpy(S.out->note + l, "; ", sizeof S.out->note - l), l += 2;
    ot_strlcpy(S.out->note + l, s, sizeof S.out->note - l);
}

bool ot_leak_plain_scan; /* tests: the word loop even where the CPU has AVX2 */

/* ---------------------------------------------------------------- the blocks */

static void count_fn(uint64_t key, uint64_t val, void *ctx)
{
    (void)key, (void)val;
    (*(size_t *)ctx)++;
}

static void collect_fn(uint64_t key, uint64_t val, void *ctx)
{
    (void)ctx;
    unsigned kind = ot_unpack_kind(val);
    if (kind == OT_KIND_VMM || (key >> 56)) return; /* a handle, not an address */
    if (S.n >= S.cap) {
        S.dropped++;
        return;
    }
    uint64_t size = ot_unpack_size(val);
    if (size == OT_SIZE_BIG) ot_live_lookup(key, &size, NULL);
    S.b[S.n++] = (ot_leak_block_t){(uintptr_t)key, size, ot_unpack_site(val), (uint8_t)kind, 0};
}

static void sort_blocks(ot_leak_block_t *a, size_t n)
{
    /* Quicksort, median of three, the smaller side first (the explicit stack stays under 64). */
    size_t lo_st[64], hi_st[64];
    int top = 0;
    lo_st[0] = 0, hi_st[0] = n;
    top = 1;
    while (top) {
        top--;
        size_t lo = lo_st[top], hi = hi_st[top];
        while (hi - lo > 16) {
            size_t mid = lo + (hi - lo) / 2;
            uintptr_t x = a[lo].addr, y = a[mid].addr, z = a[hi - 1].addr;
            uintptr_t piv = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
            size_t i = lo, j = hi - 1;
            for (;;) {
                while (a[i].addr < piv) i++;
                while (a[j].addr > piv) j--;
                if (i >= j) break;
                ot_leak_block_t t = a[i];
                a[i] = a[j], a[j] = t;
                i++, j--;
            }
            size_t cut = j + 1; /* [lo, cut) <= piv <= [cut, hi) */
            if (cut - lo < hi - cut) {
                lo_st[top] = cut, hi_st[top] = hi, top++;
                hi = cut;
            } else {
                lo_st[top] = lo, hi_st[top] = cut, top++;
                lo = cut;
            }
        }
        for (size_t i = lo + 1; i < hi; i++) {
            ot_leak_block_t t = a[i];
            size_t j = i;
            for (; j > lo && a[j - 1].addr > t.addr; j--) a[j] = a[j - 1];
            a[j] = t;
        }
    }
}

/* By address, least significant digit first, 11 bits a pass over the bits where the addresses
 * differ (a 1 GiB heap: 3 passes), through a second array of n: 1 M blocks in 1 GiB
 * (scripts/leak_compare.sh), about 50 ms of the check less than the quicksort (sort_blocks, the
 * blocks come in the table's order, by hash). false where that array cannot be had (the caller
 * sorts in place instead). Stable, so equal addresses keep their order. */
#define RADIX_BITS 11
#define RADIX_MIN 4096 /* fewer blocks: the quicksort in place, no second array */
static bool radix_sort_blocks(ot_leak_block_t *a, size_t n)
{
    uintptr_t differ = 0;
    for (size_t i = 1; i < n; i++) differ |= a[i].addr ^ a[0].addr;
    if (!differ) return true;
    unsigned lo = (unsigned)__builtin_ctzll(differ), hi = 64 - (unsigned)__builtin_clzll(differ);
    unsigned passes = (hi - lo + RADIX_BITS - 1) / RADIX_BITS;
    ot_leak_block_t *t = ot_mmap(n * sizeof *a);
    if (!t) return false;
    static size_t count[1u << RADIX_BITS]; /* the check runs on one thread at a time */
    ot_leak_block_t *from = a, *to = t;
    for (unsigned p = 0; p < passes; p++) {
        unsigned shift = lo + p * RADIX_BITS;
        ot_memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++) count[(from[i].addr >> shift) & ((1u << RADIX_BITS) - 1)]++;
        size_t at = 0;
        for (size_t d = 0; d < (1u << RADIX_BITS); d++) {
            size_t c = count[d];
            count[d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++) to[count[(from[i].addr >> shift) & ((1u << RADIX_BITS) - 1)]++] = from[i];
        ot_leak_block_t *x = from;
        from = to, to = x;
    }
    if (from != a) ot_memcpy(a, from, n * sizeof *a);
    ot_munmap(t, n * sizeof *a);
    return true;
}

static inline uint64_t gran_hash(uint64_t g) { return (g * 0x9E3779B97F4A7C15ull) >> 17; }

static void gran_put(uint64_t g, uint32_t i)
{
    for (size_t h = gran_hash(g) & S.gmask;; h = (h + 1) & S.gmask) {
        if (S.gkey[h] == g + 1) {
            S.ghi[h] = i + 1;
            return;
        }
        if (!S.gkey[h]) {
            S.gkey[h] = g + 1, S.glo[h] = i, S.ghi[h] = i + 1;
            return;
        }
    }
}

static inline uintptr_t blk_end(const ot_leak_block_t *b) { return b->addr + (b->size ? b->size : 1); }

static void build_index(void)
{
    __builtin_cpu_init();
    S.avx2 = !ot_leak_plain_scan && __builtin_cpu_supports("avx2");
    S.min = S.n ? S.b[0].addr : 1;
    S.max = 0;
    uint64_t spans = 0;
    for (size_t i = 0; i < S.n; i++) {
        uintptr_t e = blk_end(&S.b[i]);
        if (e > S.max) S.max = e;
        spans += ((e - 1) >> GRAN_SHIFT) - (S.b[i].addr >> GRAN_SHIFT) + 1;
    }
    S.gidx = false;
    if (!S.n || spans > MAX_GRANULES) return;
    size_t cap = 1024;
    while (cap < spans * 2) cap <<= 1;
    S.gkey = ot_mmap(cap * 8);
    S.glo = ot_mmap(cap * 4);
    S.ghi = ot_mmap(cap * 4);
    if (!S.gkey || !S.glo || !S.ghi) return;
    S.gmask = cap - 1;
    for (size_t i = 0; i < S.n; i++) {
        uintptr_t e = blk_end(&S.b[i]);
        for (uint64_t g = S.b[i].addr >> GRAN_SHIFT; g <= (e - 1) >> GRAN_SHIFT; g++) gran_put(g, (uint32_t)i);
    }
    S.gidx = true;
}

/* find_block's search: the granule's blocks, by address. */
static long find_block_searched(uintptr_t p)
{
    size_t lo = 0, hi = S.n;
    if (S.gidx) {
        uint64_t g = p >> GRAN_SHIFT;
        for (size_t h = gran_hash(g) & S.gmask;; h = (h + 1) & S.gmask) {
            if (!S.gkey[h]) return -1;
            if (S.gkey[h] == g + 1) {
                lo = S.glo[h], hi = S.ghi[h];
                break;
            }
        }
    }
    size_t base = lo;
    while (lo < hi) { /* the last block starting at or below p */
        size_t mid = lo + (hi - lo) / 2;
        if (S.b[mid].addr <= p) lo = mid + 1;
        else hi = mid;
    }
    if (lo == base) return -1;
    const ot_leak_block_t *b = &S.b[lo - 1];
    return p < blk_end(b) ? (long)(lo - 1) : -1;
}

/* The block that p points into (start or interior), or -1. The block after the last one found is
 * tried first: an array of pointers to blocks allocated one after another holds them in address
 * order (1 M such, scripts/leak_compare.sh: 45 ms of the check less). */
static long find_block(uintptr_t p)
{
    size_t next = S.found + 1;
    if (next < S.n && S.b[next].addr <= p && p < blk_end(&S.b[next])) return (long)(S.found = next);
    long i = find_block_searched(p);
    if (i >= 0) S.found = (size_t)i;
    return i;
}

/* The first block at or above p. */
static size_t first_block_from(uintptr_t p)
{
    size_t lo = 0, hi = S.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (S.b[mid].addr < p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* ---------------------------------------------------------------- scanning */

/* A word that may point into a block (in [S.min, S.max)): marks the block it points into, if any
 * and not reached yet, and queues its contents. */
static inline __attribute__((always_inline)) void scan_word(uintptr_t v)
{
    long i = find_block(v);
    if (i < 0 || (S.b[i].reachable & S.bit)) return;
    /* glibc's pointer to the next chunk (the top chunk, a free list's) is 16-aligned and falls in
     * the last 8 bytes of a block that uses its neighbour's prev_size field: not a pointer into
     * the block. */
    if (v != S.b[i].addr && !(v & 15) && v + 8 >= S.b[i].addr + S.b[i].size && S.b[i].kind == OT_KIND_HOST) return;
    S.b[i].reachable |= S.bit;
    S.stack[S.qt++] = (uint32_t)i;
}

/* The words of [w, end) one at a time. */
static void scan_range_plain(const uintptr_t *w, const uintptr_t *end)
{
    uintptr_t min = S.min, span = S.max - S.min;
    for (; w < end; w++)
        if (OT_UNLIKELY(*w - min < span)) scan_word(*w);
}

/* The same, four words to a compare with AVX2 (where the CPU has it: scan_words): most words of a
 * heap are not pointers into it (zeros, counts, text, pointers to code and stacks), and a group of
 * four with none in range costs a load, three vector operations and a branch. 1 M blocks of 1 KiB
 * (scripts/leak_compare.sh): about 60 ms of the check's 440 ms, which reads the whole GiB (the
 * rest of the scan is the memory's own speed: prefetching the next block did nothing). */
__attribute__((target("avx2"))) static void scan_range_avx2(const uintptr_t *w, const uintptr_t *end)
{
    /* Unsigned compares as signed ones on words with the top bit flipped. */
    const __m256i flip = _mm256_set1_epi64x(INT64_MIN);
    const __m256i below = _mm256_set1_epi64x((long long)((S.min - 1) ^ (1ull << 63))); /* v > min - 1 */
    const __m256i top = _mm256_set1_epi64x((long long)(S.max ^ (1ull << 63)));         /* v < max */
    for (; end - w >= 4; w += 4) {
        __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)w), flip);
        __m256i in = _mm256_and_si256(_mm256_cmpgt_epi64(v, below), _mm256_cmpgt_epi64(top, v));
        unsigned m = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(in));
        if (OT_LIKELY(m == 0)) continue;
        for (; m; m &= m - 1) scan_word(w[__builtin_ctz(m)]);
    }
    scan_range_plain(w, end);
}

/* The one routine every root set and every block goes through: each aligned word that points into
 * a block not yet reached marks it and queues its contents. */
static void scan_words(uintptr_t lo, uintptr_t hi)
{
    lo = (lo + 7) & ~(uintptr_t)7;
    if (hi < lo + 8 || S.min == 0 || S.max <= S.min) return; /* no word, or no block to point into */
    const uintptr_t *w = (const uintptr_t *)lo, *end = w + (hi - lo) / 8;
    if (S.avx2) scan_range_avx2(w, end);
    else scan_range_plain(w, end);
}

static const vma_t *vma_of(uintptr_t p)
{
    size_t lo = 0, hi = S.nvma;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (S.vma[mid].hi <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo < S.nvma && S.vma[lo].lo <= p ? &S.vma[lo] : NULL;
}

/* Scans the readable parts of [lo, hi) only: a block freed behind our back, or a segment partly
 * unmapped, must not fault. Returns the bytes scanned. */
static uint64_t scan_readable(uintptr_t lo, uintptr_t hi)
{
    uint64_t done = 0;
    while (lo < hi) {
        const vma_t *v = vma_of(lo);
        if (!v) {
            /* Skip to the next mapping. */
            size_t k = 0, h = S.nvma;
            while (k < h) {
                size_t mid = k + (h - k) / 2;
                if (S.vma[mid].lo <= lo) k = mid + 1;
                else h = mid;
            }
            if (k >= S.nvma || S.vma[k].lo >= hi) break;
            lo = S.vma[k].lo;
            continue;
        }
        uintptr_t e = v->hi < hi ? v->hi : hi;
        if (v->r) {
            scan_words(lo, e);
            done += e - lo;
        }
        lo = e;
    }
    return done;
}

/* A piece of a mapping of the program's own, scanned where its pages are resident (mincore): a
 * large reservation costs nothing for the pages never touched, which hold only zeros. */
static uint64_t scan_resident(uintptr_t lo, uintptr_t hi)
{
    unsigned char vec[512];
    uint64_t done = 0;
    const uintptr_t pg = 4096;
    for (uintptr_t a = lo & ~(pg - 1); a < hi;) {
        uintptr_t e = a + sizeof vec * pg;
        if (e > hi || e < a) e = (hi + pg - 1) & ~(pg - 1);
        bool all = syscall(SYS_mincore, a, e - a, vec) != 0;
        for (uintptr_t p = a; p < e; p += pg)
            if (all || (vec[(p - a) / pg] & 1)) {
                uintptr_t from = p < lo ? lo : p, to = p + pg < hi ? p + pg : hi;
                if (from < to) scan_words(from, to), done += to - from;
            }
        a = e;
    }
    return done;
}

static bool in_cuda(uintptr_t ip)
{
    for (unsigned i = 0; i < S.ncuda; i++)
        if (ip >= S.cuda_lo[i] && ip < S.cuda_hi[i]) return true;
    return false;
}

/* Was this block allocated by the CUDA runtime's or driver's own code (a frame in their images)?
 * Their records of every device allocation must not make one reachable. */
static bool site_is_cuda(uint32_t site)
{
    if (!site || !S.site_cuda || site >= S.nsites) return false;
    if (!S.site_cuda[site]) {
        ot_site_info_t si;
        bool c = false;
        if (ot_sites_get(site, &si))
            for (unsigned i = 0; i < si.depth && !c; i++) c = in_cuda(si.ips[i]);
        S.site_cuda[site] = c ? 1 : 2;
    }
    return S.site_cuda[site] == 1;
}

static void drain(void)
{
    /* First found, first read (a queue, not a stack): blocks found by one scan in address order
     * (an array of them, one allocated after another) are then read in that order, one stream
     * the hardware prefetches, where the stack read them backwards, a block at a time (1 M blocks
     * of 1 KiB, scripts/leak_compare.sh: 65 ms of the check less). Each block is queued at most
     * once a pass (marked first), so the queue never outgrows its n. */
    while (S.qh < S.qt) {
        const ot_leak_block_t *b = &S.b[S.stack[S.qh++]];
        /* Device and managed memory is not read from the host (managed pages would migrate). */
        if (b->kind != OT_KIND_HOST && b->kind != OT_KIND_PINNED) continue;
        if (S.device_pass && site_is_cuda(b->site)) continue;
        S.out->scanned_block_bytes += scan_readable(b->addr, b->addr + b->size);
    }
    S.qh = S.qt = 0;
}

/* ---------------------------------------------------------------- the maps */

static uintptr_t parse_hex(const char **s)
{
    uintptr_t v = 0;
    for (;; (*s)++) {
        char c = **s;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return v;
        v = v << 4 | (uintptr_t)d;
    }
}

static bool read_maps(void)
{
    size_t cap = 8u << 20;
    char *buf = NULL;
    ssize_t len = 0;
    for (int tries = 0; tries < 3; tries++, cap *= 8) {
        buf = ot_mmap(cap);
        if (!buf) return false;
        len = ot_read_file("/proc/self/maps", buf, cap);
        if (len >= 0 && (size_t)len + 1 < cap) break;
        ot_munmap(buf, cap);
        buf = NULL;
    }
    if (!buf || len <= 0) return false;
    size_t lines = 0;
    for (ssize_t i = 0; i < len; i++) lines += buf[i] == '\n';
    S.vma = ot_mmap((lines + 1) * sizeof(vma_t));
    if (!S.vma) return false;
    S.nvma = 0;
    for (const char *p = buf; *p;) {
        const char *line = p;
        while (*p && *p != '\n') p++;
        const char *end = p;
        if (*p) p++;
        const char *s = line;
        vma_t v = {0};
        v.lo = parse_hex(&s);
        if (*s++ != '-') continue;
        v.hi = parse_hex(&s);
        if (*s++ != ' ' || end - s < 4) continue;
        v.r = s[0] == 'r', v.w = s[1] == 'w', v.priv = s[3] == 'p';
        /* offset dev inode name */
        for (int f = 0; f < 4 && s < end; f++) {
            while (s < end && *s != ' ') s++;
            while (s < end && *s == ' ') s++;
        }
        size_t nl = (size_t)(end - s);
        if (nl == 0) v.type = VMA_ANON;
        else if (nl == 6 && !ot_strncmp(s, "[heap]", 6)) v.type = VMA_HEAP;
        else if (nl == 7 && !ot_strncmp(s, "[stack]", 7)) v.type = VMA_STACK;
        else if (nl >= 16 && !ot_strncmp(s, "[anon:oomtrace]", 15)) v.type = VMA_OWN;
        else if (nl > 6 && !ot_strncmp(s, "[anon:", 6)) v.type = VMA_ANON;
        else if (s[0] == '[') v.type = VMA_SPECIAL;
        else v.type = VMA_FILE;
        if (v.hi > v.lo) S.vma[S.nvma++] = v;
    }
    S.maps_buf = buf, S.maps_cap = cap; /* unmapped after the scan: the list names it */
    return true;
}

/* A glibc non-main arena: 64 MiB aligned, starting with heap_info {ar_ptr, prev, size,
 * mprotect_size}. Its free chunks hold stale pointers; its live blocks are scanned as blocks. */
static bool is_arena(const vma_t *v)
{
    if (v->lo % ARENA_BYTES || v->hi - v->lo > ARENA_BYTES || !v->r) return false;
    const uintptr_t *h = (const uintptr_t *)v->lo;
    return h[0] && !(h[0] & 7) && h[2] && h[2] <= ARENA_BYTES && h[3] <= ARENA_BYTES && !(h[2] & 4095);
}

/* A glibc thread stack with no live thread on it (the stack cache): the thread descriptor at its
 * top starts with tcbhead_t {tcb, dtv, self}, tcb == self == its own address. */
static uintptr_t live_tp[4097]; /* the live threads' descriptors (this one's too) */
static unsigned nlive_tp;

static bool is_cached_stack(const vma_t *v)
{
    /* A live thread's descriptor outside its stack (the main thread's, which ld.so allocated with
     * its static TLS): a root like any thread's TLS, whatever else shares its mapping (without
     * named mappings the kernel merges neighbours, oomtrace's own among them). */
    for (unsigned i = 0; i < nlive_tp; i++)
        if (live_tp[i] >= v->lo && live_tp[i] < v->hi) return false;
    uintptr_t from = v->hi - 16384 > v->lo ? v->hi - 16384 : v->lo;
    for (uintptr_t a = (from + 63) & ~(uintptr_t)63; a + 24 <= v->hi; a += 64) {
        const uintptr_t *w = (const uintptr_t *)a;
        if (w[0] == a && w[2] == a) return true;
    }
    return false;
}

/* ---------------------------------------------------------------- the roots */

static uintptr_t own_base_lo, own_base_hi; /* liboomtrace's own image: not a root */

static int module_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size, (void)ctx;
    bool own = false;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if ((uintptr_t)&module_cb >= lo && (uintptr_t)&module_cb < hi) own = true;
    }
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    /* liboomtrace.so's data holds keys (the big-block table, nursery pointers); a program the core
     * is linked into (the unit tests) is scanned all the same. */
    if (own && name[0]) return 0;
    /* The CUDA driver and runtime keep a record of every device allocation: in the device pass,
     * their data is no root and what they allocated is not followed. */
    bool cuda = ot_strstr(name, "/libcuda.so") || ot_strstr(name, "/libcudart.so") || ot_strstr(name, "/libnvidia-") ||
                ot_strstr(name, "/libcudadebugger.so");
    if (cuda && !S.device_pass && S.ncuda < 32) {
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        for (int i = 0; i < info->dlpi_phnum; i++) {
            const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
            if (ph->p_type != PT_LOAD) continue;
            uintptr_t a = info->dlpi_addr + ph->p_vaddr;
            if (a < lo) lo = a;
            if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
        }
        S.cuda_lo[S.ncuda] = lo, S.cuda_hi[S.ncuda] = hi, S.ncuda++;
    }
    if (cuda && S.device_pass) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        S.out->roots_modules += scan_readable(lo, hi);
    }
    return 0;
}

static void scan_stack_from(uintptr_t sp)
{
    vma_t *v = (vma_t *)vma_of(sp);
    if (!v) return;
    v->handled = 1;
    uintptr_t lo = sp >= v->lo + 128 ? sp - 128 : v->lo; /* the red zone below sp may be live */
    S.out->roots_stacks += scan_readable(lo, v->hi);
}

/* This thread: callee-saved registers spilled into this frame, then the stack from here up. */
static OT_NOINLINE void scan_own_stack(void)
{
    __builtin_unwind_init();
    volatile uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    scan_stack_from(here - 256);
}

/* [lo, hi) less the library's own ranges (sorted, disjoint). */
static uint64_t scan_not_own(uintptr_t lo, uintptr_t hi)
{
    uint64_t done = 0;
    size_t a = 0, b = S.nown;
    while (a < b) { /* the first own range ending above lo */
        size_t mid = a + (b - a) / 2;
        if (S.own_hi[mid] <= lo) a = mid + 1;
        else b = mid;
    }
    for (; lo < hi && a < S.nown && S.own_lo[a] < hi; a++) {
        if (S.own_lo[a] > lo) done += scan_resident(lo, S.own_lo[a]);
        if (S.own_hi[a] > lo) lo = S.own_hi[a];
    }
    if (lo < hi) done += scan_resident(lo, hi);
    return done;
}

static void sort_own(void)
{
    for (unsigned gap = S.nown / 2; gap; gap /= 2)
        for (unsigned i = gap; i < S.nown; i++)
            for (unsigned j = i; j >= gap && S.own_lo[j - gap] > S.own_lo[j]; j -= gap) {
                uintptr_t l = S.own_lo[j], h = S.own_hi[j];
                S.own_lo[j] = S.own_lo[j - gap], S.own_hi[j] = S.own_hi[j - gap];
                S.own_lo[j - gap] = l, S.own_hi[j - gap] = h;
            }
}

/* Writable private anonymous mappings that are neither the allocator's ([heap], glibc's arenas),
 * nor oomtrace's, nor a live thread's stack (scanned from its sp), nor a dead thread's cached
 * stack: the program's own pools and arenas (CPython's obmalloc, a framework's buffers). The
 * tracked blocks inside (malloc's mmap'd chunks, which the kernel may merge with a neighbour) are
 * left out here: they are scanned as blocks, if reachable. */
static void scan_program_maps(bool unknown_stacks)
{
    for (size_t i = 0; i < S.nvma; i++) {
        const vma_t *v = &S.vma[i];
        if (!v->r || !v->w || !v->priv || v->handled) continue;
        if (v->type != VMA_ANON && v->type != VMA_STACK) continue;
        if (is_arena(v)) continue;
        if (!unknown_stacks && is_cached_stack(v)) continue;
        uintptr_t lo = v->lo;
        size_t k = first_block_from(v->lo);
        if (k > 0 && blk_end(&S.b[k - 1]) > lo) lo = blk_end(&S.b[k - 1]);
        for (; k < S.n && S.b[k].addr < v->hi && lo < v->hi; k++) {
            if (S.b[k].addr > lo) S.out->roots_maps += scan_not_own(lo, S.b[k].addr);
            if (blk_end(&S.b[k]) > lo) lo = blk_end(&S.b[k]);
        }
        if (lo < v->hi) S.out->roots_maps += scan_not_own(lo, v->hi);
        S.out->maps_scanned++;
        drain();
    }
}

/* The root sets, in one place: module data and bss, each thread's registers and stack (with the
 * static TLS and thread descriptor at its top), and memory the program maps for itself. The
 * dynamic TLS blocks, the DTV and pthread key data are malloc'd: tracked blocks, reached from
 * there. */
static void scan_roots(unsigned nthreads)
{
    dl_iterate_phdr(module_cb, NULL);
    drain();
    scan_own_stack();
    drain();
    bool unknown = false;
    nlive_tp = 0;
    live_tp[nlive_tp++] = (uintptr_t)__builtin_thread_pointer();
    for (unsigned i = 0; i < nthreads; i++) {
        ot_world_thread_t *t = &S.threads[i];
        int st = t->state;
        if (st == OT_WORLD_GONE) continue;
        if (t->tp && nlive_tp < sizeof live_tp / sizeof *live_tp) live_tp[nlive_tp++] = t->tp;
        else unknown = true; /* its descriptor could be anywhere: no mapping is taken for a dead thread's */
        S.out->threads++;
        if (st == OT_WORLD_STOPPED) {
            S.out->threads_with_regs++;
            scan_words((uintptr_t)t->regs, (uintptr_t)(t->regs + t->nregs));
            S.out->roots_regs += t->nregs * sizeof(uintptr_t);
        } else {
            S.out->threads_without_regs++;
        }
        if (t->sp) scan_stack_from(t->sp);
        else unknown = true;
        drain();
    }
    if (S.out->threads_without_regs) note("threads that block the leak check's signal or did not answer were scanned without their registers");
    if (unknown) note("a thread's stack pointer was unknown: every thread stack mapping was scanned whole");
    scan_program_maps(unknown);
}

static int find_own_image(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size, (void)ctx;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, e = a + ph->p_memsz;
        if (a < lo) lo = a;
        if (e > hi) hi = e;
    }
    if ((uintptr_t)&find_own_image >= lo && (uintptr_t)&find_own_image < hi) {
        own_base_lo = lo & ~(uintptr_t)4095;
        own_base_hi = (hi + 4095) & ~(uintptr_t)4095;
        return 1;
    }
    return 0;
}

bool ot_leak_scan(ot_leak_scan_t *out)
{
    ot_memset(out, 0, sizeof *out);
    ot_memset(&S, 0, sizeof S);
    S.out = out;
    uint64_t t0 = mono_ns();
    dl_iterate_phdr(find_own_image, NULL);
    /* The threads array is never unmapped: a late handler may still read it. */
    S.threads = ot_mmap(MAX_THREADS * sizeof(ot_world_thread_t));
    if (!S.threads) return false;
    unsigned nthreads = ot_world_stop(S.threads, MAX_THREADS);
    bool ok = false;
    size_t count = 0;
    ot_live_walk(count_fn, &count);
    S.cap = count + 4096;
    S.b = ot_mmap(S.cap * sizeof(ot_leak_block_t));
    S.stack = ot_mmap(S.cap * sizeof(uint32_t));
    if (!S.b || !S.stack || !read_maps()) goto out;
    bool complete;
    S.nown = ot_mmap_own_ranges(S.own_lo, S.own_hi, MAX_OWN, &complete);
    if (!complete) note("some of oomtrace's own mappings were not registered");
    /* liboomtrace's image, its bss included: left out of any mapping the kernel merged it into
     * (the main thread's descriptor, which ld.so allocates next to the libraries, may share one). */
    if (own_base_hi > own_base_lo && S.nown < MAX_OWN) S.own_lo[S.nown] = own_base_lo, S.own_hi[S.nown++] = own_base_hi;
    sort_own();
    ot_live_walk(collect_fn, NULL);
    if (S.dropped) note("blocks allocated during the check were left out");
    if (S.n < RADIX_MIN || !radix_sort_blocks(S.b, S.n)) sort_blocks(S.b, S.n);
    /* Drop duplicates (a record seen in a nursery and in the table while it moved). */
    size_t w = 0;
    for (size_t i = 0; i < S.n; i++)
        if (!w || S.b[w - 1].addr != S.b[i].addr) S.b[w++] = S.b[i];
    S.n = w;
    build_index();
    S.bit = 1;
    scan_roots(nthreads);
    /* Device, managed, pinned and pool blocks: a second pass without the CUDA runtime's and
     * driver's own records (their data, the blocks they allocated). */
    bool any_device = false;
    for (size_t i = 0; i < S.n && !any_device; i++) any_device = S.b[i].kind != OT_KIND_HOST;
    if (any_device) {
        ot_leak_scan_t keep = *out;
        S.nsites = ot_sites_count() + 1;
        S.site_cuda = ot_mmap(S.nsites);
        for (size_t i = 0; i < S.nvma; i++) S.vma[i].handled = 0;
        S.bit = 2, S.device_pass = true;
        scan_roots(nthreads);
        *out = keep;
    }
    for (size_t i = 0; i < S.n; i++) {
        uint8_t r = S.b[i].reachable;
        S.b[i].reachable = S.b[i].kind == OT_KIND_HOST || !any_device ? (r & 1) : (r & 2) >> 1;
    }
    ok = true;
out:
    ot_world_resume();
    if (S.maps_buf) ot_munmap(S.maps_buf, S.maps_cap);
    out->blocks = S.b;
    out->n = ok ? S.n : 0;
    out->ns = mono_ns() - t0;
    return ok;
}
