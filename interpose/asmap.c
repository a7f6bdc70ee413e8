/* Where the address space went: /proc/self/maps streamed through a fixed buffer and broken down into
 * heap, malloc arenas, thread stacks, libraries, files, anonymous, device and oomtrace's own. Runs
 * on the failure path: no malloc, no stdio, static state only (the caller holds the report lock). */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static const char *const kind_names[OT_AS_KINDS] = {
    "heap", "malloc_arenas", "thread_stacks", "libraries", "files", "anonymous",
    "device", "cuda_reserved", "oomtrace", "other", "requested",
};
static const char *const kind_labels[OT_AS_KINDS] = {
    "tracked heap", "glibc malloc arenas", "thread stacks", "executable and libraries", "file mappings",
    "other anonymous mappings", "device-driver mappings", "CUDA driver's virtual reservations",
    "oomtrace's own", "kernel ([vdso], [vvar])", "the request",
};
const char *ot_as_kind_name(unsigned k) { return k < OT_AS_KINDS ? kind_names[k] : "?"; }
const char *ot_as_kind_label(unsigned k) { return k < OT_AS_KINDS ? kind_labels[k] : "?"; }

/* An anonymous ---p mapping at least this big, once CUDA is active, is the driver's reservation
 * (it reserves its unified address range at cuInit: tens of GiB and more). */
#define CUDA_RESERVE_MIN (256ull << 20)
/* A PROT_NONE mapping right below a writable one, at most this big, is a thread stack's guard. */
#define GUARD_MAX (1ull << 20)
/* ... and the stack at least PTHREAD_STACK_MIN (16 KiB: glibc's stacks also hold the thread's TLS). */
#define STACK_MIN (16u << 10)

/* Parser state beyond the plain result: mappings that wait for the next line to be classified,
 * the ranges live blocks are looked up in. Static: one parse at a time (the report lock). */
typedef struct {
    uint64_t start, end;
    char perms[5];
    bool anon;      /* no file, no [name] */
    bool has_path;
    char path[256]; /* file path or [name] */
} map_t;

typedef struct {
    uint64_t start, end, live;
} range_t;

#define MAX_CANDS 8192 /* anonymous rw mappings: heap (they hold tracked blocks) or other anonymous */
#define MAX_ARENAS 1024
static struct {
    map_t pend;        /* an anonymous mapping that the next one may pair with (arena, stack) */
    bool have_pend;
    map_t group;       /* a run of mappings of one file (a library's segments and its bss) */
    bool have_group, group_exec, group_writable;
    uint64_t group_bytes;
    char line[512];    /* a line split across two reads */
    size_t line_len;
    bool line_skip;    /* the line was too long: skip to its end */
    range_t cands[MAX_CANDS];
    unsigned ncands;
    uint64_t cand_overflow_bytes, cand_overflow_count;
    range_t arenas[MAX_ARENAS];
    unsigned narenas;
    uint64_t arena_overflow_live;
    uint64_t heap_start, heap_end;
    uint64_t heap_max; /* glibc's HEAP_MAX_SIZE: 64 MiB on 64-bit, 1 MiB on 32-bit */
    bool cuda;
    const uintptr_t *own_lo, *own_hi;
    unsigned n_own;
    char anon_name[64];
} P;

/* ---------------------------------------------------------------- top lists */

static void top_add(ot_as_cat_t *c, const char *name, uint64_t bytes)
{
    for (unsigned i = 0; i < c->ntop; i++)
        if (!ot_strcmp(c->top[i].name, name)) {
            bytes += c->top[i].bytes;
            for (unsigned j = i; j + 1 < c->ntop; j++) c->top[j] = c->top[j + 1];
            c->ntop--;
            break;
        }
    unsigned at = c->ntop;
    while (at > 0 && c->top[at - 1].bytes < bytes) at--;
    if (at >= OT_AS_TOP) return;
    unsigned last = c->ntop < OT_AS_TOP ? c->ntop : OT_AS_TOP - 1;
    for (unsigned j = last; j > at; j--) c->top[j] = c->top[j - 1];
    size_t n = ot_strlen(name);
    const char *s = n >= sizeof c->top[at].name ? name + n - (sizeof c->top[at].name - 1) : name;
    ot_strlcpy(c->top[at].name, s, sizeof c->top[at].name);
    c->top[at].bytes = bytes;
    if (c->ntop < OT_AS_TOP) c->ntop++;
}

static void put(ot_asmap_t *as, unsigned kind, uint64_t bytes, const char *name)
{
    ot_as_cat_t *c = &as->cat[kind];
    c->bytes += bytes;
    c->count++;
    if (name) top_add(c, name, bytes);
}

static void hex_name(char *out, size_t cap, const map_t *m)
{
    ot_buf_t b;
    ot_buf_init(&b, out, cap, -1);
    ot_buf_hex(&b, m->start);
    ot_buf_putc(&b, '-');
    ot_buf_hex(&b, m->end);
    ot_buf_printf(&b, " %s", m->perms);
    ot_buf_cstr(&b);
}

/* An anonymous mapping, named by its range only where it enters the top list (formatting a name for
 * each of tens of thousands of mappings would cost more than the rest of the parse). */
static void put_range(ot_asmap_t *as, unsigned kind, const map_t *m)
{
    ot_as_cat_t *c = &as->cat[kind];
    uint64_t sz = m->end - m->start;
    if (c->ntop < OT_AS_TOP || c->top[OT_AS_TOP - 1].bytes < sz) {
        hex_name(P.anon_name, sizeof P.anon_name, m);
        put(as, kind, sz, P.anon_name);
    } else {
        c->bytes += sz;
        c->count++;
    }
}

/* ---------------------------------------------------------------- classification */

static bool aligned(uint64_t a) { return (a & (P.heap_max - 1)) == 0; }
static bool is_rw(const map_t *m) { return m->perms[0] == 'r' && m->perms[1] == 'w'; }
static bool is_none(const map_t *m) { return m->perms[0] == '-' && m->perms[1] == '-' && m->perms[2] == '-'; }

static void group_close(ot_asmap_t *as)
{
    if (!P.have_group) return;
    P.have_group = false;
    const char *p = P.group.path;
    if (!ot_strncmp(p, "/dev/", 5) && ot_strncmp(p, "/dev/shm/", 9) && ot_strncmp(p, "/dev/zero", 9))
        put(as, OT_AS_DEVICE, P.group_bytes, p);
    else if (!ot_strncmp(p, "/memfd:", 7))
        put(as, OT_AS_ANON, P.group_bytes, p);
    else
        put(as, P.group_exec ? OT_AS_LIBS : OT_AS_FILES, P.group_bytes, p);
}

/* An anonymous mapping alone: rw ones may hold tracked blocks (decided once the blocks are seen),
 * PROT_NONE ones are reservations. */
static void anon_alone(ot_asmap_t *as, const map_t *m)
{
    uint64_t sz = m->end - m->start;
    if (is_rw(m)) {
        if (P.ncands < MAX_CANDS && (!P.ncands || P.cands[P.ncands - 1].end <= m->start)) {
            P.cands[P.ncands++] = (range_t){m->start, m->end, 0};
        } else {
            P.cand_overflow_bytes += sz;
            P.cand_overflow_count++;
            put_range(as, OT_AS_ANON, m);
        }
        return;
    }
    put_range(as, P.cuda && is_none(m) && sz >= CUDA_RESERVE_MIN ? OT_AS_CUDA : OT_AS_ANON, m);
}

static void arena(ot_asmap_t *as, uint64_t start, uint64_t end)
{
    uint64_t n = (end - start) / P.heap_max;
    as->cat[OT_AS_ARENAS].bytes += end - start;
    as->cat[OT_AS_ARENAS].count += n ? n : 1;
    if (P.narenas < MAX_ARENAS) P.arenas[P.narenas++] = (range_t){start, end, 0};
}

static void pend_flush(ot_asmap_t *as)
{
    if (!P.have_pend) return;
    P.have_pend = false;
    anon_alone(as, &P.pend);
}

static void classify_rest(ot_asmap_t *as, const map_t *m);

/* An anonymous mapping that holds some of oomtrace's own registered mappings (the kernel merged
 * them with a neighbour of the program's, on either side or both): the own bytes are counted as
 * oomtrace's, and each piece of the program's, in address order, is classified as a mapping of
 * its own, so that an arena merged with one of ours below it still starts on its alignment. */
static bool classify_own(ot_asmap_t *as, const map_t *m)
{
    unsigned lo = 0, hi = P.n_own;
    while (lo < hi) { /* the first range ending after m->start */
        unsigned mid = (lo + hi) / 2;
        if (P.own_hi[mid] <= m->start) lo = mid + 1;
        else hi = mid;
    }
    if (lo >= P.n_own || P.own_lo[lo] >= m->end) return false;
    uint64_t own = 0, at = m->start;
    for (unsigned i = lo; i < P.n_own && P.own_lo[i] < m->end; i++) {
        uint64_t a = P.own_lo[i] > m->start ? P.own_lo[i] : m->start;
        uint64_t b = P.own_hi[i] < m->end ? P.own_hi[i] : m->end;
        if (b <= a) continue;
        if (a > at) {
            map_t r = *m;
            r.start = at;
            r.end = a;
            classify_rest(as, &r);
        }
        pend_flush(as); /* nothing pairs across one of ours */
        own += b - a;
        if (b > at) at = b;
    }
    as->cat[OT_AS_OOMTRACE].bytes += own;
    as->cat[OT_AS_OOMTRACE].count++;
    if (at < m->end) {
        map_t r = *m;
        r.start = at;
        classify_rest(as, &r);
    }
    return true;
}

static void classify(ot_asmap_t *as, const map_t *m)
{
    as->total += m->end - m->start;
    as->mappings++;
    if (m->anon && P.n_own && classify_own(as, m)) return;
    classify_rest(as, m);
}

static void classify_rest(ot_asmap_t *as, const map_t *m)
{
    uint64_t sz = m->end - m->start;
    if (m->anon) {
        if (P.have_pend) {
            const map_t *q = &P.pend;
            /* glibc's thread arena: a HEAP_MAX_SIZE-aligned reservation, its used part rw, the rest
             * PROT_NONE (two fully grown neighbours may have merged: a multiple of HEAP_MAX_SIZE). */
            if (is_rw(q) && is_none(m) && q->end == m->start && aligned(q->start) && aligned(m->end)) {
                P.have_pend = false;
                arena(as, q->start, m->end);
                return;
            }
            /* A thread stack: glibc's guard page(s) right below the stack, which is not aligned the
             * way an arena's start is. */
            if (is_none(q) && q->end - q->start <= GUARD_MAX && is_rw(m) && q->end == m->start && !aligned(m->start) &&
                sz >= STACK_MIN) {
                P.have_pend = false;
                put(as, OT_AS_STACKS, sz + (q->end - q->start), NULL);
                return;
            }
            pend_flush(as);
        }
        /* A library's bss: anonymous, right after its last (writable) segment. */
        if (P.have_group && P.group_exec && P.group_writable && is_rw(m) && m->start == P.group.end) {
            P.group.end = m->end;
            P.group_bytes += sz;
            return;
        }
        group_close(as);
        P.pend = *m;
        P.have_pend = true;
        return;
    }
    pend_flush(as);
    if (m->path[0] == '[') {
        group_close(as);
        if (!ot_strcmp(m->path, "[heap]")) {
            if (!P.heap_start) P.heap_start = m->start;
            P.heap_end = m->end;
            as->cat[OT_AS_HEAP].bytes += sz;
            as->cat[OT_AS_HEAP].count++;
            as->heap_brk = sz;
        } else if (!ot_strncmp(m->path, "[stack", 6)) {
            put(as, OT_AS_STACKS, sz, NULL);
            as->main_stack = sz;
        } else if (!ot_strncmp(m->path, "[anon", 5)) {
            put(as, OT_AS_ANON, sz, m->path);
        } else {
            put(as, OT_AS_OTHER, sz, m->path);
        }
        return;
    }
    if (P.have_group && !ot_strcmp(P.group.path, m->path)) {
        P.group.end = m->end;
        P.group_bytes += sz;
    } else {
        group_close(as);
        P.group = *m;
        P.have_group = true;
        P.group_exec = P.group_writable = false;
        P.group_bytes = sz;
    }
    if (m->perms[2] == 'x') P.group_exec = true;
    P.group_writable = m->perms[1] == 'w';
}

/* ---------------------------------------------------------------- parsing */

static bool hexval(const char **s, uint64_t *out)
{
    const char *p = *s;
    uint64_t v = 0;
    bool any = false;
    for (;; p++) {
        unsigned d;
        if (*p >= '0' && *p <= '9') d = (unsigned)(*p - '0');
        else if (*p >= 'a' && *p <= 'f') d = (unsigned)(*p - 'a' + 10);
        else break;
        v = v << 4 | d;
        any = true;
    }
    *s = p;
    *out = v;
    return any;
}

static const char *skip_field(const char *p, const char *e)
{
    while (p < e && *p != ' ') p++;
    while (p < e && *p == ' ') p++;
    return p;
}

/* "start-end perms offset dev inode   path" */
static void parse_line(ot_asmap_t *as, const char *l, size_t n)
{
    const char *e = l + n, *p = l;
    map_t m;
    if (!hexval(&p, &m.start) || p >= e || *p != '-') return;
    p++;
    if (!hexval(&p, &m.end) || p >= e || *p != ' ' || m.end < m.start) return;
    p++;
    if (e - p < 4) return;
    for (int i = 0; i < 4; i++) m.perms[i] = p[i];
    m.perms[4] = 0;
    p = skip_field(p, e);         /* perms */
    p = skip_field(p, e);         /* offset */
    p = skip_field(p, e);         /* dev */
    const char *ino = p;
    p = skip_field(p, e);         /* inode */
    bool inode0 = ino < e && ino[0] == '0' && (ino + 1 == e || ino[1] == ' ');
    size_t pl = (size_t)(e - p);
    if (pl >= sizeof m.path) pl = sizeof m.path - 1;
    ot_memcpy(m.path, p, pl);
    m.path[pl] = 0;
    m.has_path = pl > 0;
    m.anon = !m.has_path && inode0;
    if (!m.has_path && !inode0) ot_strlcpy(m.path, "(unnamed file)", sizeof m.path);
    classify(as, &m);
}

void ot_asmap_begin(ot_asmap_t *as, const ot_asmap_params_t *prm)
{
    ot_memset(as, 0, sizeof *as);
    ot_memset(&P, 0, sizeof P);
    as->pointer_bits = prm->pointer_bits ? prm->pointer_bits : (int)(sizeof(void *) * 8);
    as->limit = prm->limit;
    as->rss = as->rss_anon = as->rss_file = as->rss_shmem = as->swap = -1;
    P.heap_max = as->pointer_bits == 32 ? (1ull << 20) : (64ull << 20);
    P.cuda = prm->cuda_active;
    P.own_lo = prm->own_lo;
    P.own_hi = prm->own_hi;
    P.n_own = prm->own_lo ? prm->n_own : 0;
}

void ot_asmap_feed(ot_asmap_t *as, const char *text, size_t n)
{
    const char *p = text, *e = text + n;
    while (p < e) {
        const char *nl = p;
        while (nl < e && *nl != '\n') nl++;
        size_t k = (size_t)(nl - p);
        if (P.line_len || nl == e) { /* a line in pieces: gather it */
            if (!P.line_skip && P.line_len + k < sizeof P.line) {
                ot_memcpy(P.line + P.line_len, p, k);
                P.line_len += k;
            } else if (!P.line_skip) {
                /* keep the head (the fields) and cut the path */
                size_t room = sizeof P.line - 1 - P.line_len;
                ot_memcpy(P.line + P.line_len, p, room);
                P.line_len += room;
                P.line_skip = true;
            }
            if (nl == e) return;
            parse_line(as, P.line, P.line_len);
            P.line_len = 0;
            P.line_skip = false;
        } else {
            parse_line(as, p, k);
        }
        p = nl + 1;
    }
}

static range_t *find(range_t *r, unsigned n, uint64_t a)
{
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (r[mid].end <= a) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[lo].start <= a ? &r[lo] : NULL;
}

void ot_asmap_block(ot_asmap_t *as, uint64_t addr, uint64_t size)
{
    as->blocks_known = true;
    if (addr >= P.heap_start && addr < P.heap_end) {
        as->cat[OT_AS_HEAP].live += size;
        return;
    }
    range_t *r = P.narenas ? find(P.arenas, P.narenas, addr) : NULL;
    if (r) {
        as->cat[OT_AS_ARENAS].live += size;
        return;
    }
    r = P.ncands ? find(P.cands, P.ncands, addr) : NULL;
    if (r) r->live += size;
    /* Anywhere else (a mapping the candidates had no room for): still the tracked heap's. */
    as->cat[OT_AS_HEAP].live += size;
}

void ot_asmap_end(ot_asmap_t *as, uint64_t requested)
{
    if (P.line_len) {
        parse_line(as, P.line, P.line_len);
        P.line_len = 0;
    }
    pend_flush(as);
    group_close(as);
    ot_as_cat_t *heap = &as->cat[OT_AS_HEAP];
    for (unsigned i = 0; i < P.ncands; i++) {
        range_t *r = &P.cands[i];
        uint64_t sz = r->end - r->start;
        if (r->live) {
            heap->bytes += sz;
            heap->count++;
            as->heap_mapped += sz;
            as->heap_mappings++;
        } else {
            map_t m = {.start = r->start, .end = r->end, .perms = "rw-p"};
            put_range(as, OT_AS_ANON, &m);
        }
    }
    as->cat[OT_AS_REQUEST].bytes = requested;
    as->cat[OT_AS_REQUEST].count = requested ? 1 : 0;
    as->known = as->mappings > 0;
}

unsigned ot_asmap_order(const ot_asmap_t *as, unsigned *kinds)
{
    unsigned n = 0;
    for (unsigned k = 0; k < OT_AS_KINDS; k++) {
        if (!as->cat[k].bytes) continue;
        unsigned at = n++;
        while (at > 0 && as->cat[kinds[at - 1]].bytes < as->cat[k].bytes) {
            kinds[at] = kinds[at - 1];
            at--;
        }
        kinds[at] = k;
    }
    return n;
}

/* ---------------------------------------------------------------- this process */

static char read_mem[65536];

static void live_visit(uint64_t key, uint64_t val, void *ctx)
{
    if (ot_unpack_kind(val) != OT_KIND_HOST || (key & OT_KEY_VMM_TAG)) return;
    ot_asmap_block(ctx, key, ot_unpack_size(val));
}

static unsigned count_threads(void)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    unsigned n = 0;
    for (;;) {
        long r = syscall(SYS_getdents64, fd, read_mem, sizeof read_mem);
        if (r <= 0) break;
        for (long off = 0; off < r;) {
            const char *d = read_mem + off;
            unsigned short reclen = *(const unsigned short *)(d + 16);
            const char *name = d + 19;
            if (name[0] != '.') n++;
            if (!reclen) break;
            off += reclen;
        }
    }
    syscall(SYS_close, fd);
    return n;
}

static int64_t rollup_field(const char *text, const char *key)
{
    size_t kl = ot_strlen(key);
    for (const char *l = text; *l;) {
        if (!ot_strncmp(l, key, kl) && l[kl] == ':') {
            const char *p = l + kl + 1;
            while (*p == ' ') p++;
            int64_t v = 0;
            while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
            return v * 1024;
        }
        while (*l && *l != '\n') l++;
        if (*l) l++;
    }
    return -1;
}

void ot_asmap_rollup(ot_asmap_t *as, const char *text)
{
    as->rss = rollup_field(text, "Rss");
    as->rss_anon = rollup_field(text, "Anonymous");
    int64_t fa = rollup_field(text, "Shared_Clean"), fb = rollup_field(text, "Private_Clean");
    as->rss_file = fa >= 0 && fb >= 0 ? fa + fb : -1; /* clean pages: file-backed, reclaimable */
    as->rss_shmem = rollup_field(text, "Shared_Dirty");
    as->swap = rollup_field(text, "Swap");
}

#define OWN_MAX 8192
static uintptr_t own_lo[OWN_MAX], own_hi[OWN_MAX];

/* Shell sort by start (no malloc; a few thousand ranges). */
static void sort_ranges(uintptr_t *lo, uintptr_t *hi, unsigned n)
{
    for (unsigned gap = n / 2; gap > 0; gap /= 2)
        for (unsigned i = gap; i < n; i++) {
            uintptr_t l = lo[i], h = hi[i];
            unsigned j = i;
            for (; j >= gap && lo[j - gap] > l; j -= gap) lo[j] = lo[j - gap], hi[j] = hi[j - gap];
            lo[j] = l, hi[j] = h;
        }
}

bool ot_asmap_read_self(ot_asmap_t *as, uint64_t requested, bool cuda_active, bool want_rss)
{
    /* oomtrace's own mappings by address (mmap_alloc.c's registry; a registry that overflowed
     * leaves the rest among the anonymous ones) */
    unsigned n_own = ot_mmap_own_ranges(own_lo, own_hi, OWN_MAX, NULL);
    sort_ranges(own_lo, own_hi, n_own);
    ot_asmap_params_t prm = {.pointer_bits = (int)(sizeof(void *) * 8),
                             .cuda_active = cuda_active,
                             .limit = -1,
                             .own_lo = own_lo,
                             .own_hi = own_hi,
                             .n_own = n_own};
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) prm.limit = (int64_t)rl.rlim_cur;
    ot_asmap_begin(as, &prm);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    for (;;) {
        long r = syscall(SYS_read, fd, read_mem, sizeof read_mem);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        ot_asmap_feed(as, read_mem, (size_t)r);
    }
    syscall(SYS_close, fd);
    ot_live_walk(live_visit, as);
    as->blocks_known = true;
    ot_asmap_end(as, requested);
    as->threads = count_threads();
    if (getrlimit(RLIMIT_STACK, &rl) == 0) as->rlimit_stack = rl.rlim_cur == RLIM_INFINITY ? -1 : (int64_t)rl.rlim_cur;
    if (want_rss && ot_read_file("/proc/self/smaps_rollup", read_mem, sizeof read_mem) > 0) ot_asmap_rollup(as, read_mem);
    return as->known;
}

/* ---------------------------------------------------------------- diagnosis */

static const char *base_name(const char *p)
{
    const char *b = p;
    for (; *p; p++)
        if (*p == '/' && p[1]) b = p + 1;
    return b;
}

bool ot_asmap_diagnose(const ot_asmap_t *as, uint64_t requested, ot_line_sink_t sink, void *ctx, char *line,
                       size_t cap)
{
    if (!as->known || !as->total) return true;
    unsigned order[OT_AS_KINDS];
    unsigned n = ot_asmap_order(as, order);
    const uint64_t total = as->total, fifth = total / 5;
    const ot_as_cat_t *heap = &as->cat[OT_AS_HEAP];
    /* The tracked heap fills it: its mappings are the largest part, or its live blocks (wherever
     * they are, arenas included) are half of all. */
    unsigned first = OT_AS_KINDS;
    for (unsigned i = 0; i < n && first == OT_AS_KINDS; i++)
        if (order[i] != OT_AS_REQUEST) first = order[i];
    uint64_t live = heap->live + as->cat[OT_AS_ARENAS].live;
    bool heap_dominates = first == OT_AS_HEAP || live * 2 >= total;
    ot_buf_t b;
#define LINE_BEGIN() ot_buf_init(&b, line, cap, -1)
#define LINE_END() (ot_buf_cstr(&b), sink(ctx, line))
    for (unsigned i = 0; i < n; i++) {
        const unsigned k = order[i];
        const ot_as_cat_t *c = &as->cat[k];
        /* A cause holds a fifth of the space and at least what was asked for (giving it up would make
         * room). A CUDA reservation is named at any size: no address-space limit leaves room for it. */
        if ((c->bytes < fifth || c->bytes < requested) && k != OT_AS_CUDA) continue;
        LINE_BEGIN();
        switch (k) {
        case OT_AS_ARENAS:
            if (c->count < 2) continue;
            ot_buf_puts(&b, "glibc malloc arenas reserve ");
            ot_buf_bytes(&b, c->bytes);
            ot_buf_printf(&b, " of address space in %llu arenas (", (unsigned long long)c->count);
            ot_buf_bytes(&b, c->live);
            ot_buf_puts(&b, " of live blocks in them): set MALLOC_ARENA_MAX=2 or raise the limit");
            break;
        case OT_AS_CUDA:
            ot_buf_puts(&b, "the CUDA driver maps ");
            ot_buf_bytes(&b, c->bytes);
            ot_buf_puts(&b, " of virtual address space: an address-space limit (ulimit -v, a scheduler's vmem limit) "
                            "cannot work with CUDA \xe2\x80\x94 use a memory (RSS/cgroup) limit instead");
            break;
        case OT_AS_STACKS: {
            ot_buf_printf(&b, "%llu threads' stacks take ", (unsigned long long)c->count);
            ot_buf_bytes(&b, c->bytes);
            ot_buf_puts(&b, " (");
            ot_buf_bytes(&b, c->count ? c->bytes / c->count : 0);
            ot_buf_puts(&b, " each");
            if (as->rlimit_stack > 0) {
                ot_buf_puts(&b, "; RLIMIT_STACK ");
                ot_buf_bytes(&b, (uint64_t)as->rlimit_stack);
                ot_buf_puts(&b, " sets the default");
            }
            ot_buf_puts(&b, "): fewer threads (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS), smaller stacks (ulimit -s), "
                            "or raise the limit");
            break;
        }
        case OT_AS_FILES:
            if (!c->ntop || c->top[0].bytes < fifth) continue;
            ot_buf_printf(&b, "%s is mapped whole (", c->top[0].name);
            ot_buf_bytes(&b, c->top[0].bytes);
            ot_buf_puts(&b, "): map or read only the part in use (LMDB: a smaller map size), or raise the limit");
            break;
        case OT_AS_LIBS:
            ot_buf_printf(&b, "the executable and %llu libraries map ", (unsigned long long)c->count);
            ot_buf_bytes(&b, c->bytes);
            if (c->ntop) {
                ot_buf_printf(&b, " (largest: %s ", base_name(c->top[0].name));
                ot_buf_bytes(&b, c->top[0].bytes);
                ot_buf_puts(&b, ", its bss included)");
            }
            ot_buf_puts(&b, ": load fewer or smaller libraries, or raise the limit");
            break;
        case OT_AS_ANON:
            ot_buf_puts(&b, as->blocks_known ? "anonymous mappings made outside malloc take "
                                             : "anonymous mappings (malloc's large blocks among them: no block "
                                               "records here) take ");
            ot_buf_bytes(&b, c->bytes);
            ot_buf_printf(&b, " in %llu mapping%s", (unsigned long long)c->count, c->count == 1 ? "" : "s");
            if (c->ntop) {
                ot_buf_printf(&b, " (largest %s, ", c->top[0].name);
                ot_buf_bytes(&b, c->top[0].bytes);
                ot_buf_putc(&b, ')');
            }
            ot_buf_puts(&b, ": the program's own pool or a library's buffers (OpenBLAS keeps one per thread: "
                            "OPENBLAS_NUM_THREADS)");
            break;
        case OT_AS_DEVICE:
            ot_buf_puts(&b, "device-driver mappings take ");
            ot_buf_bytes(&b, c->bytes);
            if (c->ntop) ot_buf_printf(&b, " (largest %s)", c->top[0].name);
            break;
        default:
            continue; /* the heap: the caller's call sites; the rest is never the cause */
        }
        LINE_END();
    }
    if (as->pointer_bits == 32 && total + requested >= (2ull << 30)) {
        LINE_BEGIN();
        ot_buf_puts(&b, "a 32-bit process can address at most 3\xe2\x80\x93" "4 GiB, this one has ");
        ot_buf_bytes(&b, total);
        ot_buf_puts(&b, " in use: run a 64-bit build");
        LINE_END();
    }
#undef LINE_BEGIN
#undef LINE_END
    return heap_dominates;
}
