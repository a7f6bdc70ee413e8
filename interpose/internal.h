/* oomtrace internal interface: everything shared between the files of interpose/.
 * Nothing declared here may call malloc on a failure or signal path; each group names its file. */
#ifndef OOMTRACE_INTERNAL_H
#define OOMTRACE_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>
#include <time.h>

#define OT_VERSION "0.1.0"

#define OT_EXPORT __attribute__((visibility("default")))
/* On the library's own data declared in headers: -fvisibility=hidden hides the definitions, but a
 * plain extern declaration makes the compiler reach the data through the GOT (a load, or a lea the
 * linker relaxes it to, before the access itself), once per use on the hot paths. */
#define OT_HIDDEN __attribute__((visibility("hidden")))
#define OT_TLS __thread __attribute__((tls_model("initial-exec")))
#define OT_LIKELY(x) __builtin_expect(!!(x), 1)
#define OT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define OT_NOINLINE __attribute__((noinline))

/* An add to a counter only its own thread writes: one unlocked instruction on x86-64, which a
 * signal handler of the same thread can only run before or after, never in the middle of (the
 * call-site owner's counters, sites_fast.h; the table's live delta, table.c). */
static inline void ot_own_add(void *v, uint64_t d)
{
#if defined(__x86_64__)
    __asm__ volatile("addq %1, %0" : "+m"(*(uint64_t *)v) : "r"(d) : "memory");
#else
    __atomic_fetch_add((uint64_t *)v, d, __ATOMIC_RELAXED);
#endif
}

/* Allocation kinds, as stored in the live table (4 bits). */
typedef enum {
    OT_KIND_HOST = 0,    /* malloc family */
    OT_KIND_DEVICE = 1,  /* cudaMalloc / cuMemAlloc / pitch / 3D */
    OT_KIND_MANAGED = 2, /* cudaMallocManaged / cuMemAllocManaged */
    OT_KIND_PINNED = 3,  /* cudaMallocHost / cudaHostAlloc / cuMemAllocHost / cuMemHostAlloc */
    OT_KIND_VMM = 4,     /* cuMemCreate physical allocations (key is the handle) */
    OT_KIND_POOL = 5,    /* stream-ordered: cudaMallocAsync / cuMemAllocAsync / FromPool */
    OT_KIND_COUNT = 6
} ot_kind_t;
const char *ot_kind_name(unsigned kind);
static inline bool ot_kind_is_device(unsigned kind) { return kind != OT_KIND_HOST; }

/* Keys of the live table: user addresses are < 2^56, so the top byte tags other namespaces. */
#define OT_KEY_VMM_TAG (1ull << 62)

/* ------------------------------------------------------------------ fmt.c
 * Formatting into caller-provided memory and raw write(2): no malloc, no stdio, no locale. */
typedef struct {
    char *p;
    size_t cap, len;
    int fd;         /* >= 0: flushed to this fd when full; -1: truncates */
    bool truncated; /* something did not fit (fd < 0) */
} ot_buf_t;

void ot_buf_init(ot_buf_t *b, char *mem, size_t cap, int fd);
void ot_buf_putn(ot_buf_t *b, const char *s, size_t n);
void ot_buf_puts(ot_buf_t *b, const char *s);
void ot_buf_putc(ot_buf_t *b, char c);
void ot_buf_u64(ot_buf_t *b, uint64_t v);
void ot_buf_i64(ot_buf_t *b, int64_t v);
void ot_buf_hex(ot_buf_t *b, uint64_t v); /* 0x... */
void ot_buf_bytes(ot_buf_t *b, uint64_t v); /* human: "3.6 MiB", "512 B" */
void ot_buf_json_str(ot_buf_t *b, const char *s); /* quoted and escaped; NULL -> null */
void ot_buf_json_i64_or_null(ot_buf_t *b, int64_t v); /* v < 0 -> null */
/* printf subset: %s %c %d %i %u %x %p %% with l/ll/z modifiers and width/zero-pad for numbers. */
void ot_buf_printf(ot_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ot_buf_vprintf(ot_buf_t *b, const char *fmt, va_list ap);
void ot_buf_flush(ot_buf_t *b);
const char *ot_buf_cstr(ot_buf_t *b); /* NUL-terminates (within cap) and returns p */

ssize_t ot_write_all(int fd, const void *p, size_t n); /* raw syscall, retries EINTR/short writes */
size_t ot_strlen(const char *s);
int ot_strcmp(const char *a, const char *b);
int ot_strncmp(const char *a, const char *b, size_t n);
size_t ot_strlcpy(char *dst, const char *src, size_t cap);
/* clock_gettime(c) in nanoseconds (vDSO: no system call for the usual clocks). */
static inline uint64_t ot_clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
const char *ot_strstr(const char *h, const char *n);
void ot_memset(void *p, int c, size_t n);
void ot_memcpy(void *d, const void *s, size_t n);
/* mathx.c: ln x and e^y - 1 without libm (the sampler's). */
double ot_log(double x);
double ot_expm1(double y);
/* Parse an unsigned integer with optional K/M/G/T (binary) suffix. Returns false on bad syntax. */
bool ot_parse_size(const char *s, size_t n, uint64_t *out);
/* Reads a whole small file (e.g. /proc/...) into buf with raw syscalls. Returns bytes or -1. */
ssize_t ot_read_file(const char *path, char *buf, size_t cap);
/* Environment lookup that works before libc is fully up (walks environ). */
const char *ot_getenv(const char *name);
const char *ot_errno_name(int err); /* "ENOMEM" */

/* ------------------------------------------------------------------ mmap_alloc.c
 * Internal memory: mmap-backed, never from the malloc we wrap. */
void *ot_mmap(size_t bytes);                 /* zeroed, NULL on failure */
void ot_prefault(void *p, size_t bytes);     /* faults p..p+bytes in for writing now (keeps errno) */
void ot_munmap(void *p, size_t bytes);
/* Bump allocator over mmap'd chunks for small permanent objects (per-thread state, strings). */
void *ot_perm_alloc(size_t bytes);
/* The library's own mappings, for the leak check to leave alone (table.c maps its own and registers
 * them here). ot_mmap_own_ranges copies up to max [lo, hi) ranges; *complete: all of them fitted. */
void ot_mmap_register(void *p, size_t bytes);
void ot_mmap_unregister(void *p);
unsigned ot_mmap_own_ranges(uintptr_t *lo, uintptr_t *hi, unsigned max, bool *complete);

/* ------------------------------------------------------------------ table.c
 * Lock-free hash table keyed by a 64-bit key (0 and a few top values reserved), value 64 bits.
 * The program serialises operations on one key (a block is freed only after its malloc returned),
 * so the table only has to be safe across different keys. Memory comes from mmap; it grows with the
 * number of live keys and gives memory back as they are removed. */
bool ot_table_insert(uint64_t key, uint64_t val);        /* false only if out of memory */
/* As insert; returns 1 inserted, 0 replaced a present key (its value in *old), -1 out of memory.
 * A present key means a free we never saw (a library bound straight to libc's free). */
int ot_table_insert_replace(uint64_t key, uint64_t val, uint64_t *old);
bool ot_table_remove(uint64_t key, uint64_t *val_out);   /* false: key unknown */
bool ot_table_lookup(uint64_t key, uint64_t *val_out);
/* A hint that key will soon be inserted or looked up: starts fetching its line. Never faults, never
 * waits, safe anywhere (a stale view of the table only wastes the fetch). */
void ot_table_prefetch(uint64_t key);
/* Replace the value of a present key (used by realloc-in-place). */
bool ot_table_update(uint64_t key, uint64_t val);
typedef void (*ot_table_visit_fn)(uint64_t key, uint64_t val, void *ctx);
/* Visits every live entry. Safe from a signal handler and concurrently with updates
 * (entries changed during the walk may or may not be seen). No malloc. */
void ot_table_walk(ot_table_visit_fn fn, void *ctx);
typedef struct {
    uint64_t live;         /* keys present */
    uint64_t capacity;     /* slots over all generations */
    uint64_t mapped_bytes; /* bytes currently mapped (RSS upper bound) */
    unsigned generations;
    /* Migration passes over a chunk: closing its EMPTY and TOMB slots (an operation older than the
     * migration was in flight), or only reading them. */
    uint64_t closing_passes, reading_passes;
    uint64_t alone_passes; /* of those, passes made alone: one thread, signals blocked, plain stores */
    uint64_t mask_ns;      /* what blocking and restoring signals was measured to cost (0: not yet) */
    uint64_t maps, unmaps; /* mmap and munmap calls the table made so far (its records' chunks too) */
    uint64_t floor;        /* live count below which no shrink sizes the table now (0: none) */
    uint64_t rescues;      /* targets that filled while the table before them still migrated */
} ot_table_stats_t;
void ot_table_stats(ot_table_stats_t *st);
void ot_table_reset_for_test(void); /* unit tests only: drop everything */
#ifdef OT_TABLE_TEST_HOOKS
/* test_table's own build of table.c only: called by an insert between its last look for a newer
 * table and its CAS into the slot it found (the late-insert window of the migration protocol). */
extern OT_HIDDEN void (*ot_table_test_late_insert)(uint64_t key);
uint64_t ot_table_test_home(uint64_t key, uint64_t cap); /* where key's search starts in cap slots */
void ot_table_test_root_map(void **addr, size_t *bytes);  /* the oldest table's mapping */
extern OT_HIDDEN int ot_table_test_never_alone; /* set: every migration pass takes the CAS way */
extern OT_HIDDEN uint64_t ot_table_test_mask_ns; /* set: what blocking signals costs, instead of measuring it */
/* Added to the live count a migration's start reads (the sum of the threads' counts, which a
 * preempted reader can get wrong by what other threads did meanwhile). */
extern OT_HIDDEN int64_t ot_table_test_live_error;
/* Called by a pass made alone between finding new[slot] EMPTY and its store there. */
extern OT_HIDDEN void (*ot_table_test_alone_store)(uint64_t slot, uint64_t cap);
#endif

/* Value packing (live.c): size 40 bits, kind 4 bits, site 20 bits. Sizes >= 2^40 go to a side
 * table and store OT_SIZE_BIG here. */
#define OT_SITE_BITS 20
#define OT_MAX_SITES ((1u << OT_SITE_BITS) - 1)
#define OT_SIZE_BITS 40
#define OT_SIZE_BIG ((1ull << OT_SIZE_BITS) - 1)
#define OT_KIND_BITS 4
#define OT_KIND_MASK ((1u << OT_KIND_BITS) - 1)
#define OT_SITE_SHIFT (OT_SIZE_BITS + OT_KIND_BITS)
static inline uint64_t ot_pack(uint64_t size, unsigned kind, uint32_t site)
{
    if (size >= OT_SIZE_BIG) size = OT_SIZE_BIG;
    return size | ((uint64_t)(kind & OT_KIND_MASK) << OT_SIZE_BITS) | ((uint64_t)site << OT_SITE_SHIFT);
}
static inline uint64_t ot_unpack_size(uint64_t v) { return v & OT_SIZE_BIG; }
static inline unsigned ot_unpack_kind(uint64_t v) { return (unsigned)(v >> OT_SIZE_BITS) & OT_KIND_MASK; }
static inline uint32_t ot_unpack_site(uint64_t v) { return (uint32_t)(v >> OT_SITE_SHIFT); }

/* ------------------------------------------------------------------ stack.c
 * Stack capture. ot_stack_capture may use a fast path; ot_stack_capture_exact always uses
 * libunwind. Both return the number of return addresses written, skipping `skip` innermost frames
 * of the caller. Neither calls malloc. */
#define OT_MAX_FRAMES 64
unsigned ot_stack_capture(uintptr_t *ips, unsigned max, unsigned skip);
unsigned ot_stack_capture_exact(uintptr_t *ips, unsigned max, unsigned skip);
/* Where a hook was called from: the return address into its caller, the stack pointer once it
 * returns, and rbp there. Read from the hook's own frame (OT_ORIGIN in the hook, or in an
 * always_inline helper of it: __builtin_frame_address(0) gives it a frame pointer), before any
 * call, so a stack taken from it starts exactly at the hook's caller whatever is inlined or
 * tail-called in between. */
typedef struct {
    uintptr_t ip, sp, bp;
} ot_origin_t;
static inline __attribute__((always_inline)) ot_origin_t ot_origin_of(const void *frame)
{
    const uintptr_t *f = (const uintptr_t *)frame;
    return (ot_origin_t){f[1], (uintptr_t)(f + 2), f[0]};
}
#define OT_ORIGIN() ot_origin_of(__builtin_frame_address(0))
/* fn(&origin, ...) with the origin of the hook this expands in. */
#define OT_CALL_WITH_ORIGIN(fn, ...)                                                               \
    do {                                                                                           \
        ot_origin_t ot_origin_ = OT_ORIGIN();                                                       \
        fn(&ot_origin_, __VA_ARGS__);                                                               \
    } while (0)
/* A stack from an origin, for a caller that maps stacks to something of its own (live.c: a call
 * site) and calls from the same place over and over. note->tag (nonzero) names what the caller
 * maps under (anything that changes its answer for the same stack). When this stack is exactly one
 * of the thread's remembered walks (up to the last 16: ot_unwind_attach) and ot_unwind_note_set
 * attached a value to that walk under the same tag, note->hit is set, note->value returned and ips
 * left unwritten; else ips are written and note->walk names the walk (0: none) for
 * ot_unwind_note_set. Returns the depth either way. */
typedef struct ot_stack_note {
    uint32_t tag;   /* in */
    uint32_t hit;   /* out */
    uint32_t value; /* out when hit */
    uint32_t walk;  /* out when not hit */
    /* In, optional (NULL: none): handed a new walk's frames (those returned) as soon as all are
     * known: where a join with the last walk ends it, before their copy; else before the walker files
     * the walk away for later stacks (its checks: a few hundred instructions), so that the caller
     * can start its own lookup of them and that work overlaps its cache misses. live.c hashes them
     * and prefetches the call-site index there (early_hash). Not called where no frames are
     * walked: a note that hits, a remembered stack, libunwind's walk. */
    void (*early)(struct ot_stack_note *note, const uintptr_t *ips, unsigned n);
    uint64_t early_hash; /* for early's use; the walker leaves it alone */
    /* In: the caller compared the remembered walks with this stack already (ot_unwind_noted_others)
     * and none is it, so the walker does not compare them again. A shortcut only: a stale claim
     * costs a walk, never a wrong stack. */
    uint32_t searched;
} ot_stack_note_t;
unsigned ot_stack_capture_at(uintptr_t *ips, unsigned max, const ot_origin_t *origin, ot_stack_note_t *note);
/* libunwind's exact walk from an origin (failure reports): no frames rather than a guess if the
 * origin is not among the first frames of the walk. */
unsigned ot_stack_capture_exact_at(uintptr_t *ips, unsigned max, const ot_origin_t *origin);
/* The stack of a signal's interrupted context (the ucontext_t a SA_SIGINFO handler gets), with
 * libunwind's signal-safe unw_init_local2(UNW_INIT_SIGNAL_FRAME). ips[0] is the interrupted pc + 1
 * (the writers look a return address up at ip - 1), the rest return addresses. 0 where this thread
 * was inside libunwind already (its lock may be held). */
unsigned ot_stack_capture_signal(uintptr_t *ips, unsigned max, void *ucontext);
void ot_stack_init(void); /* warms the unwinder up (called once at start-up, outside hooks) */
/* Is this thread running a signal handler (a signal frame among its callers)? For code that may
 * call malloc only outside one: exit() called from a handler that interrupted malloc. */
bool ot_stack_in_signal_handler(void);
void ot_stack_flush(void); /* after dlclose: drop cached unwind info keyed by address */
/* unwind.c: the DWARF-CFI walker behind ot_stack_capture. Frame 0 is (ip, sp, bp); returns the
 * frames written, or -1 where it does not model a frame and libunwind must walk instead. */
int ot_unwind_from(uintptr_t *ips, unsigned max, unsigned skip, uintptr_t ip, uintptr_t sp, uintptr_t bp,
                   ot_stack_note_t *note);
/* Attaches value (nonzero) to walk under tag (nonzero), if that walk is still the thread's last one. */
void ot_unwind_note_set(uint32_t walk, uint32_t tag, uint32_t value);
/* ot_stack_noted_at's test: the value noted for a remembered walk (the last one, then the others)
 * that is this stack, else 0. */
uint32_t ot_unwind_noted(uintptr_t ip, uintptr_t sp, uintptr_t bp, unsigned max, uint32_t tag, unsigned *depth);
/* Asked first by a caller of ot_stack_capture_at with a note: the value noted under tag if the
 * stack from origin is one of the thread's remembered walks (and its depth), else 0, walking
 * nothing. The verifying build (stack.c) checks every answer against libunwind; the others ask
 * the walker directly. The allocation path asks with the last walk's test inlined, then the others
 * out of line (live_fast.h, unwind_fast.h). */
#ifdef OT_UNWIND_VERIFY
uint32_t ot_stack_noted_at(unsigned max, const ot_origin_t *origin, uint32_t tag, unsigned *depth);
#else
static inline uint32_t ot_stack_noted_at(unsigned max, const ot_origin_t *origin, uint32_t tag, unsigned *depth)
{
    return ot_unwind_noted(origin->ip, origin->sp, origin->bp, max, tag, depth);
}
#endif
void ot_unwind_init(void);
/* Per-thread memory for the walk cache, owned by the caller (NULL: none). OT_UNWIND_CACHE_BYTES
 * remembers the last 16 walks (stacks=all: a stack seen again among them is not walked again, and
 * its noted call site comes back); OT_UNWIND_CACHE_SAMPLED_BYTES six buffers, the last five walks
 * and the next one's (sampled stacks: an interpreter loop that makes large blocks from a few stacks
 * in turn, as numpy and PyTorch code does, finds them again); OT_UNWIND_CACHE_MIN_BYTES two, the
 * last walk and the next one's. */
#define OT_UNWIND_CACHE_BYTES 114688
#define OT_UNWIND_CACHE_SAMPLED_BYTES 45056
#define OT_UNWIND_CACHE_MIN_BYTES 14336
/* stacks=all attaches this much more after OT_UNWIND_CACHE_BYTES: the stack memo (unwind.c), 8,192
 * noted stacks beyond the 16 walks, for programs that allocate from hundreds or thousands of stacks
 * in turn (recursive code: tests/bench/recursive_stacks.c). Touched as it fills. */
#define OT_UNWIND_MEMO_BYTES ((6656u << 10) + (48u << 10)) /* 1,024 sets of 6.5 KiB, their fingerprints, the step cache */
void ot_unwind_attach(void *mem, size_t bytes);
void ot_unwind_flush(void);
void ot_unwind_stats(uint64_t *rule_builds, uint64_t *fallbacks);
/* Frames this thread's last walk stepped with a CFI rule; the rest it checked against its previous
 * walk (tests: that a walk joins the one before where they share frames). */
unsigned ot_unwind_last_stepped(void);
/* Remembered walks that the last search beyond the last walk (ot_unwind_noted_others) compared with
 * its stack (tests: that a loop over a few stacks finds each one first time). */
unsigned ot_unwind_last_asked(void);
/* Tests: the rule cache's set for an ip (return address), and a lookup through the cache. */
unsigned ot_unwind_rule_set_for_test(uintptr_t ip);
void ot_unwind_rule_for_test(uintptr_t ip);
/* In a fork child: a module-table rebuild another thread had in progress is abandoned. */
void ot_unwind_atfork_child(void);

/* ------------------------------------------------------------------ symbolize.c
 * Address -> module, offset, function (demangled without malloc). Safe on failure paths: reads
 * /proc/self/maps and ELF symbol tables with raw syscalls and mmap. */
typedef struct {
    uintptr_t ip;
    const char *module;  /* path, points into a static cache valid until the next refresh */
    uintptr_t offset;    /* ip - module load base (addr2line -e module offset) */
    char function[512];  /* demangled where possible; "" if unknown */
    char file[256];      /* "" if unknown (ot_symbolize_line fills it) */
    int line;            /* 0 if unknown */
    bool module_file;    /* module is a file whose build is the one loaded: its DWARF may be read */
    /* Why file and line are unknown where they were looked for (a static string; NULL: found, or
     * not looked for): "libdw_unavailable", "module_not_file", "module_unreadable", "no_line_info",
     * "runtime_not_looked_up", "symbolizer_busy". */
    const char *line_note;
} ot_frame_t;
void ot_symbolize_begin(void);  /* refresh the module map (once per report) */
void ot_symbolize(uintptr_t ip, ot_frame_t *out);
/* symbolize_line.c, the slow path: file and line of fr (from ot_symbolize) from its module's DWARF
 * through elfutils' libdwfl, dlopen'ed. It calls malloc and opens files: only where malloc is safe
 * (the leak report, the launcher), never on a failure or signal path. ot_symbolize_lines_use names
 * the library ("libdw.so.1"; "none", "" or NULL: off), loaded by the first lookup that needs it
 * (once loaded it stays, whatever is named later, until "none");
 * ot_symbolize_lines_note says why it could not be (NULL: nothing went wrong). ot_symbolize_line:
 * false when no line is known, or when another lookup is in progress (it never waits). */
void ot_symbolize_lines_use(const char *lib);
const char *ot_symbolize_lines_note(void);
bool ot_symbolize_line(ot_frame_t *fr);
/* Symbolize against a module map given by the caller instead of /proc/self/maps (the launcher: a
 * dead process's modules from its state file) until the next ot_symbolize_begin. A file whose
 * build-id differs from build_id (when given), or that is gone, keeps module+offset frames but no
 * function names. Returns the modules whose symbols are used. */
typedef struct {
    uintptr_t base, start, end; /* load bias; span of its segments */
    const char *path;
    const unsigned char *build_id;
    unsigned build_id_len; /* 0: not checked */
} ot_module_desc_t;
unsigned ot_symbolize_use_modules(const ot_module_desc_t *mods, unsigned n);
/* Demangle an Itanium C++ name into out without allocating; returns false (out = copy) if unsupported. */
bool ot_demangle(const char *mangled, char *out, size_t cap);

/* ------------------------------------------------------------------ sites.c
 * Call-site table: stacks deduplicated into ids 1..OT_MAX_SITES with per-site statistics. */
typedef struct {
    uint32_t id;
    unsigned kind;
    int device;     /* CUDA ordinal, -1 for host */
    unsigned depth;
    const uintptr_t *ips;
    uint64_t live_bytes, live_count, peak_bytes, total_bytes, total_count;
    bool estimated; /* totals scaled up from byte sampling */
} ot_site_info_t;
uint32_t ot_sites_intern(const uintptr_t *ips, unsigned depth, unsigned kind, int device); /* 0: full */
/* ot_sites_intern in two steps, for a caller that learns a stack some time before it needs its id:
 * the stack's hash, with the index slots it will look at prefetched; then the intern with that hash
 * (h must be ot_sites_prefetch's for the same stack, kind and device). */
uint64_t ot_sites_prefetch(const uintptr_t *ips, unsigned depth, unsigned kind, int device);
uint32_t ot_sites_intern_hashed(uint64_t h, const uintptr_t *ips, unsigned depth, unsigned kind, int device);
void ot_sites_on_alloc(uint32_t id, uint64_t weight_bytes, bool estimated);
void ot_sites_on_free(uint32_t id, uint64_t weight_bytes);
/* Per-thread pending site counts (sites.c): mem, ot_sites_pend_bytes() of zeroed memory owned by
 * the caller, becomes this thread's (NULL: none); the previous block's counts are moved to the
 * sites first. A block may be attached again by a later thread once detached. */
size_t ot_sites_pend_bytes(void);
void ot_sites_attach(void *mem);
bool ot_sites_get(uint32_t id, ot_site_info_t *out);
uint32_t ot_sites_count(void);
/* Does this thread own the sites' unlocked counters (the first thread to count at a site without
 * per-thread pending counts does, for good)? Asking decides it. For tests. */
bool ot_sites_owned_here(void);
/* Fills ids[] with up to max site ids of the given kind class (host / device) by live bytes desc. */
unsigned ot_sites_top(uint32_t *ids, unsigned max, bool device);
void ot_sites_reset_for_test(void);

/* ------------------------------------------------------------------ options.c */
typedef enum { OT_STACKS_SAMPLED = 0, OT_STACKS_ALL = 1, OT_STACKS_NONE = 2 } ot_stacks_mode_t;
typedef struct {
    char report[512];      /* JSON path template, "" = none */
    char log[512];         /* "stderr", "none" or a path template */
    ot_stacks_mode_t stacks;
    unsigned stack_depth;
    uint64_t sample_bytes;     /* mean bytes between sampled small allocations */
    uint64_t stack_min_bytes;  /* allocations at least this big always get a stack */
    unsigned max_reports;      /* full reports per process; later failures are counted */
    unsigned top_sites;        /* sites listed per report */
    bool cuda;                 /* intercept CUDA */
    bool verbose;
    bool crash_signals;        /* report on SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP (signals.c) */
    int snapshot_signal;       /* a snapshot report on this signal; 0 = off */
    bool recorder;             /* the flight recorder's state file (recorder.c) */
    uint64_t recorder_bytes;   /* its size bound */
    uint64_t recorder_min_bytes; /* live host + device bytes before a process gets a state file */
    char state_dir[512];       /* directory template of state files, "" = per-user tmpfs default */
    double pressure;           /* pressure watch threshold, fraction of the tightest limit; 0 = off */
    bool report_at_exit;       /* a final "exit" report at normal exit (exit.c) */
    /* Leak check at exit (exit.c, leak.c, leak_report.c). leak_check implies stacks=all. */
    bool leak_check;
    bool leak_report_reachable;      /* list reachable sites in full (else totals only) */
    bool leak_builtin_suppressions;  /* the built-in one-time allocations of glibc, libstdc++, CUDA */
    unsigned leak_exitcode;          /* exit status when unsuppressed lost memory remains (23) */
    uint64_t leak_min_bytes;         /* sites with fewer lost bytes are not listed */
    char suppressions[512];          /* LSan-format suppression file, "" = none */
    char junit[512];                 /* JUnit XML path template, "" = none */
    char libdw[256];                 /* elfutils' libdw for the leak report's file:line, "none" = off */
} ot_options_t;
extern OT_HIDDEN ot_options_t ot_opt;
void ot_options_defaults(ot_options_t *o);
/* Parses "k=v:k=v". Errors are written as one line each to err (prefix "oomtrace: "). Returns the
 * number of errors; on error the bad key keeps its default. */
int ot_options_parse(const char *s, ot_options_t *o, ot_buf_t *err);
/* Expands %p %h %e %r %n %% into out. Returns false if the result does not fit. */
bool ot_expand_template(const char *tmpl, unsigned report_no, char *out, size_t cap);
const char *ot_rank_string(void); /* RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK, or NULL */

/* ------------------------------------------------------------------ memprobe.c */
typedef struct {
    int64_t mem_total, mem_available, swap_total, swap_free; /* -1 unknown */
    int64_t vm_size, vm_rss, vm_peak, vm_data;
    int64_t rlimit_as, rlimit_data;   /* -1 unlimited */
    int64_t cgroup_limit, cgroup_usage, cgroup_swap_limit; /* -1 unlimited/unknown */
    int cgroup_version;               /* 0 none found, 1, 2 */
    char cgroup_path[256];
    int ptr_bits;
    int64_t overcommit_memory;        /* /proc/sys/vm/overcommit_memory, -1 unknown */
    char cgroup_dir[400];             /* the directory usage was read from ("" none) */
} ot_host_mem_t;
void ot_probe_host(ot_host_mem_t *m);
/* A cgroup value file: the number, -1 for "max" (or v1's near-2^63 unlimited), -2 absent or unreadable. */
int64_t ot_read_cg_value(const char *path);

/* ------------------------------------------------------------------ cgstat.c
 * The cgroup's usage broken down (memory.stat, v1 and v2 names) and its processes by RSS, for a
 * report where the cgroup's limit binds. Static buffers, raw reads. Bytes; -1 unknown. */
/* The value of a "key value" line of a memory.stat text, -1 where absent. */
int64_t ot_cgstat_field(const char *text, const char *key);
#define OT_CG_PROCS 8        /* processes listed, largest RSS first */
#define OT_CG_PROCS_READ 256 /* /proc/PID/status files read at most */
typedef struct {
    bool known;
    int version;
    int64_t anon, file, kernel, shmem, swap, file_mapped; /* file (page cache) includes shmem */
    unsigned procs_total, procs_read, nprocs;
    int64_t self_rss, others_rss; /* others: of the processes read */
    struct {
        int pid;
        char name[32];
        int64_t rss;
        bool self;
    } procs[OT_CG_PROCS];
} ot_cg_usage_t;
void ot_cg_stat_parse(const char *memory_stat, int version, ot_cg_usage_t *u);
void ot_cg_procs_parse(const char *cgroup_procs, int self_pid, ot_cg_usage_t *u);
bool ot_cg_usage_read(const char *dir, int version, int self_pid, ot_cg_usage_t *u);

/* ------------------------------------------------------------------ asmap.c
 * Where the address space went, from /proc/self/maps (streamed through a static buffer, no
 * malloc): a plain struct the report writers read. The parser takes any text in any pieces
 * (ot_asmap_begin / feed / block / end), so tests hand it a maps text of their own. */
typedef void (*ot_line_sink_t)(void *ctx, const char *line);
typedef enum {
    OT_AS_HEAP,     /* [heap] and the anonymous mappings that hold tracked blocks (mmap'd large ones) */
    OT_AS_ARENAS,   /* glibc thread arenas: HEAP_MAX_SIZE-aligned rw + ---p reservations */
    OT_AS_STACKS,   /* [stack] and thread stacks (a guard page below a rw mapping) */
    OT_AS_LIBS,     /* files with an executable segment, with the bss right after them */
    OT_AS_FILES,    /* other file mappings (a model or data file mapped whole) */
    OT_AS_ANON,     /* other anonymous mappings (a pool of the program's own, OpenBLAS buffers) */
    OT_AS_DEVICE,   /* /dev/nvidia* and other device files */
    OT_AS_CUDA,     /* large PROT_NONE anonymous ranges once CUDA is active: the driver's reservations */
    OT_AS_OOMTRACE, /* oomtrace's own (ot_mmap and the live table) */
    OT_AS_OTHER,    /* [vdso], [vvar], ... */
    OT_AS_REQUEST,  /* the failed request (not part of total) */
    OT_AS_KINDS
} ot_as_kind_t;
#define OT_AS_TOP 5
typedef struct {
    uint64_t bytes, count; /* count: mappings; arenas for OT_AS_ARENAS, stacks for OT_AS_STACKS */
    uint64_t live;         /* tracked live host bytes inside (heap, arenas) */
    unsigned ntop;
    struct {
        char name[112];
        uint64_t bytes;
    } top[OT_AS_TOP];      /* largest by name (libraries, files, devices) or range (anonymous) */
} ot_as_cat_t;
typedef struct {
    bool known;
    bool blocks_known;        /* the live blocks were looked up (else malloc's large blocks count as anonymous) */
    int pointer_bits;
    uint64_t total, mappings; /* bytes and lines of maps */
    int64_t limit;            /* RLIMIT_AS, -1 none */
    unsigned threads;         /* /proc/self/task entries, 0 unknown */
    int64_t rlimit_stack;     /* the default thread stack size, -1 unlimited */
    uint64_t heap_brk, heap_mapped, heap_mappings, main_stack;
    int64_t rss, rss_anon, rss_file, rss_shmem, swap; /* smaps_rollup, -1 unknown */
    ot_as_cat_t cat[OT_AS_KINDS];
} ot_asmap_t;
typedef struct {
    int pointer_bits;    /* 0: this process's */
    bool cuda_active;
    int64_t limit;
    /* oomtrace's own mappings as ranges [own_lo[i], own_hi[i]), sorted by start (mmap_alloc.c's
     * registry): what of an anonymous mapping lies in them is oomtrace's. */
    const uintptr_t *own_lo, *own_hi;
    unsigned n_own;
} ot_asmap_params_t;
void ot_asmap_begin(ot_asmap_t *as, const ot_asmap_params_t *p);
void ot_asmap_feed(ot_asmap_t *as, const char *text, size_t n); /* lines may be split anywhere */
void ot_asmap_block(ot_asmap_t *as, uint64_t addr, uint64_t size); /* a live host block, after feed */
void ot_asmap_end(ot_asmap_t *as, uint64_t requested);
void ot_asmap_rollup(ot_asmap_t *as, const char *smaps_rollup_text);
/* All of it for this process: maps, the live blocks, threads, smaps_rollup when want_rss. */
bool ot_asmap_read_self(ot_asmap_t *as, uint64_t requested, bool cuda_active, bool want_rss);
unsigned ot_asmap_order(const ot_asmap_t *as, unsigned *kinds); /* nonzero kinds, largest first */
const char *ot_as_kind_name(unsigned k);  /* JSON: "heap", "malloc_arenas", ... */
const char *ot_as_kind_label(unsigned k); /* text: "glibc malloc arenas", ... */
/* The address space's diagnoses (arenas, CUDA, stacks, a file mapped whole, libraries, anonymous,
 * 32-bit), one line each into sink, largest cause first. Returns true when the tracked heap is
 * what fills it (then the caller's call sites and batch-size advice apply). */
bool ot_asmap_diagnose(const ot_asmap_t *as, uint64_t requested, ot_line_sink_t sink, void *ctx, char *line,
                       size_t cap);

/* ------------------------------------------------------------------ live.c
 * Exact live totals, recording and forgetting allocations, sampling decisions. */
typedef struct {
    uint64_t bytes, count, peak_bytes, total_bytes, total_count;
} ot_totals_t;
void ot_live_totals(bool device, ot_totals_t *out);      /* host, or all device kinds together */
void ot_live_totals_kind(unsigned kind, ot_totals_t *out);
/* The approximate running level of a class (0 host, 1 device; within 256 KiB per thread). */
int64_t ot_live_approx_level(int cls);
/* Record a successful allocation made by the hook that expands this (or an always_inline helper of
 * it): the stack, when one is taken, starts at the hook's caller (OT_ORIGIN). device: CUDA
 * ordinal, -1 for host memory. Device kinds always get a call site; host allocations get one by
 * the sampling policy. The malloc hooks try ot_live_record_host_fast (live_fast.h) first. */
void ot_live_record_from(const ot_origin_t *origin, uint64_t key, uint64_t size, unsigned kind, int device);
#define ot_live_record(...) OT_CALL_WITH_ORIGIN(ot_live_record_from, __VA_ARGS__)
/* The same for host memory (kind OT_KIND_HOST, device -1): the malloc family's hooks. */
void ot_live_record_host_from(const ot_origin_t *origin, uint64_t key, uint64_t size);
#define ot_live_record_host(...) OT_CALL_WITH_ORIGIN(ot_live_record_host_from, __VA_ARGS__)
/* Forget an allocation; returns true and fills size/kind if it was known. */
bool ot_live_forget(uint64_t key, uint64_t *size, unsigned *kind);
/* ot_live_forget(key, NULL, NULL) for a host free that ot_live_forget_host_fast (live_fast.h)
 * declined: it does not look in this thread's nursery again. */
bool ot_live_forget_host(uint64_t key);
bool ot_live_lookup(uint64_t key, uint64_t *size, unsigned *kind);
/* Visits every recorded block (per-thread nurseries and the shared table); values are packed as in
 * the table. Signal-safe, no malloc; for leak checks and snapshots. */
void ot_live_walk(ot_table_visit_fn fn, void *ctx);
/* realloc: the old record is taken out of the table before the real call (so that no other thread
 * can be handed the same address while it is still recorded), then either put back unchanged (the
 * call failed: the old block stays valid and tracked) or released (its bytes leave the totals). */
bool ot_live_take(uint64_t key, uint64_t *val);
void ot_live_put_back(uint64_t key, uint64_t val);
void ot_live_release(uint64_t key, uint64_t val);

/* ------------------------------------------------------------------ report.c */
typedef struct {
    int index;
    char name[128];
    char pci_bus_id[32];
    char uuid[80];
    bool mem_known;
    uint64_t total, free;
    char unavailable[200]; /* driver's reason when memory is unknown */
    struct {
        uint32_t pid;
        char name[64];
        uint64_t used;   /* UINT64_MAX: unknown */
        bool is_self;
    } procs[32];
    int nprocs;
    bool procs_known;
    char procs_note[240]; /* "NVML not found", "pids are host pids; this process not identified", ... */
} ot_device_info_t;

typedef struct {
    const char *api;        /* "malloc", "cudaMalloc", ... */
    uint64_t size;          /* bytes requested (for calloc: nmemb*size, saturated) */
    uint64_t count;         /* calloc nmemb / reallocarray nmemb, else 0 */
    uint64_t elem_size;     /* with count: the element size as the program passed it */
    uint64_t alignment;     /* 0 if none */
    int error_code;         /* errno or CUDA error number */
    const char *error_name; /* "ENOMEM", "cudaErrorMemoryAllocation", ... */
    bool device;            /* a device allocation failed */
    int device_index;       /* -1 unknown */
    bool may_recover;       /* e.g. operator new will call the new-handler and retry */
    bool refused;           /* the request's arguments or properties were refused, not a shortage of
                             * memory: one line in the log, no report, not counted as a failure */
    const char *note;       /* extra line, or NULL */
    const ot_origin_t *origin; /* where the hook was called from: the failing stack starts there */
    unsigned skip;          /* without an origin: frames of the hook to drop from the failing stack */
} ot_failure_t;

/* The process's recent allocation failures (failures.c): one lock-free ring, filled before each
 * failure's error goes back and read by the crash report ("aborted 0.3 ms after cudaMalloc(837538000)
 * failed, report PATH": the last OT_RECENT_FAILURES) and the flight recorder (all it has room for). */
#define OT_RECENT_FAILURES 4
typedef struct {
    uint64_t mono_ns;       /* CLOCK_MONOTONIC when it failed */
    uint64_t realtime_ns;   /* CLOCK_REALTIME, the same moment */
    const char *api;        /* a string literal of the hook */
    uint64_t size;
    int error_code;         /* errno or CUDA error number */
    const char *error_name; /* a static string */
    bool device;
    int device_index;
    char report[600];       /* its JSON report, "" when none (max_reports, report=none) */
} ot_failure_note_t;
#define OT_FAILURE_RING 32
void ot_failures_note(const ot_failure_t *f, const char *report_path); /* any thread, no lock */
uint64_t ot_failures_head(void); /* how many were ever noted: entries [head - OT_FAILURE_RING, head) */
/* Entry i: false while it is being written, or once a later lap has replaced it. */
bool ot_failures_get(uint64_t i, ot_failure_note_t *out);
/* The last max complete ones, oldest first; their number. */
unsigned ot_failures_recent(ot_failure_note_t *out, unsigned max);

/* Called by hooks before they hand an error back. Never calls malloc; errno is preserved. A refused
 * request (f->refused) gets one line in the log, for the first few and then at powers of two. */
void ot_report_failure(const ot_failure_t *f);
/* A pressure report's own section (pressure.c): the limit crossed and the step. */
typedef struct {
    const char *limit_name, *usage_name; /* "RLIMIT_AS", "VmSize" ... */
    int64_t limit, usage;
    double fraction, step, next_step; /* next_step 0: the last step */
} ot_pressure_event_t;
/* Writes an event "pressure" report now, with the stack of the allocation being made (the frames
 * of the library itself dropped); returns the report number or -1. */
int ot_report_pressure(const ot_pressure_event_t *p, const char *reason);
/* Writes a report of the given event ("snapshot", ...) now; returns the report number or -1. */
int ot_report_event(const char *event, const char *reason);
/* The report= and log= places for a writer of its own (the leak check): this process's log fd
 * (report.c keeps it open: never close it), and a new file from a path template numbered from the
 * same counter as every report (its number in *no); -1 where none could be made. */
int ot_report_log_fd(void);
int ot_report_open_file(const char *tmpl, char *final, size_t cap, unsigned *no);
unsigned ot_report_failures_total(void);
void ot_report_exit_summary(void); /* one line to the log if failures were suppressed */
/* After fork, in the child: a report that another thread was writing is abandoned. */
void ot_report_atfork_child(void);
/* From signals.c's handler: the crash report (event "crash"), and a snapshot (snapshot_signal=).
 * Signal-safe: never waits on a report this thread was writing, at most ~1 s on another's; no dlopen. */
struct ot_crash;
void ot_report_crash(const struct ot_crash *c);
void ot_report_snapshot_signal(const char *reason);
/* Filled by the CUDA family when it is active (cuda_probe.c); returns number of devices written
 * (focus_device first when >= 0). may_load: false on a host-allocation failure, where the heap
 * may be exhausted: then nothing may be dlopen'ed (NVML is used only if already loaded). */
int ot_cuda_probe_devices(ot_device_info_t *out, int max, int focus_device, bool may_load);
bool ot_cuda_active(void);

/* ------------------------------------------------------------------ recorder.c
 * The flight recorder: a state file per process, mapped MAP_SHARED so that it outlives a SIGKILL
 * (layout: recorder_format.h). Created once the process holds OT_RECORDER_MIN_BYTES (live host +
 * device); rewritten from the level flush at most every ~100 ms or 4 MiB of change, by one thread
 * at a time (a try-lock: the others skip); no malloc, no lock waited on, on the allocation path. */
#define OT_RECORDER_MIN_BYTES (8ll << 20)
#define OT_RECORDER_LARGE_BYTES (1ull << 20) /* allocations this big go into the large ring */
/* The smallest allocation that goes into the large ring; OT_SIZE_BIG while the recorder is off (a
 * block that big calls ot_recorder_large, which then does nothing), never above it: stacks=all's
 * inline path (live_fast.h) takes only blocks below it, so every large one reaches record_body. */
extern OT_HIDDEN uint64_t ot_recorder_large_min;
void ot_recorder_init(void);                     /* after the options; creates nothing */
void ot_recorder_on_level(int cls, int64_t level); /* live.c's level flush: class 0 host, 1 device */
void ot_recorder_large(uint64_t size, unsigned kind, int device, uint32_t site);
void ot_recorder_failure(void); /* one was noted (ot_failures_note): into the file soon */
void ot_recorder_note_report(const char *path); /* a report this process wrote */
void ot_recorder_update_now(void);  /* rewrite the file now if it exists (a snapshot, tests) */
void ot_recorder_close(void);       /* normal exit or final report written: the file goes */
void ot_recorder_before_exec(void); /* the exec family's hooks: the new image starts afresh */
void ot_recorder_exec_failed(void);
void ot_recorder_atfork_child(void);
/* The state file's path, "" if none (tests, verbose). */
const char *ot_recorder_path(void);
/* Tests: the file size and section capacities recorder_bytes= gives. */
uint64_t ot_recorder_layout_for_test(uint64_t bytes, uint32_t caps[5]);

/* ------------------------------------------------------------------ pressure.c
 * The pressure watch (a report at pressure= of the tightest limit, and further steps) and the cheap
 * usage readings it shares with the recorder. */
extern OT_HIDDEN int64_t ot_pressure_trigger; /* host live level that makes live.c call in; INT64_MAX off */
void ot_pressure_init(void);
void ot_pressure_crossed(int64_t host_level);
void ot_pressure_poll(int64_t host_level); /* the recorder's periodic look */
void ot_pressure_atfork_child(void);
typedef struct {
    int64_t vm_size, rss, cgroup_usage; /* -1 unknown */
} ot_usage_t;
void ot_usage_setup(const ot_host_mem_t *m); /* where the cgroup usage is read */
void ot_usage_read(ot_usage_t *u);           /* /proc/self/statm and the cgroup's usage file */
typedef struct {
    double threshold, next_step;
    unsigned limit_kind, steps_reported; /* OT_REC_LIMIT_* (recorder_format.h) */
    int64_t limit, usage;
} ot_pressure_info_t;
void ot_pressure_info(ot_pressure_info_t *out);
/* The decisions, for tests: the steps of a threshold; the limit (1-based index, 0 none) nearest
 * to its usage and that fraction; the host level at which to look again. */
void ot_pressure_steps(double p, double out[3]);
unsigned ot_pressure_tightest(const int64_t limit[3], const int64_t usage[3], double *frac);
int64_t ot_pressure_next_trigger(int64_t host_level, const int64_t limit[3], const int64_t usage[3], double step);

/* ------------------------------------------------------------------ init.c / hooks */
typedef struct {
    volatile int initialized;   /* 0 no, 1 in progress, 2 done */
    pid_t pid;
    char exe[256];
    char cmdline[1024];
    char host[128];
    unsigned reports_written;
    unsigned failures_seen;
} ot_state_t;
extern OT_HIDDEN ot_state_t ot_state;
void ot_init(void);          /* idempotent */
bool ot_ready(void);
/* Per-thread recursion guard: hooks called while it is held go straight to the real functions. */
extern OT_TLS int ot_in_hook;
/* Single path for internal warnings (capped, raw write to stderr). */
void ot_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ signals.c
 * Crash signals and signal chaining (see the file's top comment). The hooks of hooks_signal.c call
 * these; each behaves as the libc function it stands for (errno, return value, old disposition). */
typedef struct ot_crash {
    int signo, code;
    const char *signame;  /* "SIGSEGV" */
    const char *codename; /* "SEGV_MAPERR", "SI_USER", "?" */
    bool has_addr;        /* a fault: addr is si_addr */
    uintptr_t addr;
    bool sent;            /* sent by a process (si_code <= 0): sender_pid/uid */
    int sender_pid, sender_uid;
    bool stack_overflow;  /* the fault address lies just below the stack pointer */
    long tid;
    uint64_t mono_ns;     /* CLOCK_MONOTONIC at delivery */
    uintptr_t ips[OT_MAX_FRAMES]; /* the interrupted context's stack (ot_stack_capture_signal) */
    unsigned depth;
    /* The program's own handler ran on this thread shortly before (glog, faulthandler: print, reset
     * to SIG_DFL, raise again): what it was handed. */
    bool chained;
    int first_signo, first_code;
    bool first_has_addr;
    uintptr_t first_addr, first_pc;
    uint64_t first_ns; /* CLOCK_MONOTONIC */
} ot_crash_t;
void ot_signals_init(void); /* from ot_init: our handlers, the main thread's alternate stack */
bool ot_signals_manages(int sig);
struct sigaction;
int ot_signals_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
void *ot_signals_signal(int sig, void *handler, bool sysv); /* signal/bsd_signal/ssignal, sysv_signal */
void *ot_signals_sigset(int sig, void *disp);
int ot_signals_siginterrupt(int sig, int flag);
int ot_signals_sigaltstack(const stack_t *ss, stack_t *old);
/* pthread_create: a record for the new thread (NULL: start fn directly), its start routine, and the
 * record given back where pthread_create failed. */
void *ot_signals_thread_prepare(void *(*fn)(void *), void *arg);
void *ot_signals_thread_start(void *rec);
void ot_signals_thread_abandon(void *rec);
uint64_t ot_signals_stacks_mapped(void); /* alternate stacks mapped so far (reuse: tests) */
void ot_signals_reset_for_test(void);     /* unit tests: as before start-up */
const char *ot_signal_name(int sig);                 /* "SIGSEGV"; "SIGRT" for real-time ones */
const char *ot_signal_code_name(int sig, int code);  /* "SEGV_MAPERR", "SI_USER", "?" */
int ot_signal_parse(const char *s, size_t n);        /* "SIGUSR2", "USR2", "12" -> 12; -1 bad */
/* ------------------------------------------------------------------ stopworld.c
 * Stops the other threads with a signal (no ptrace) for the leak check; each saves its registers. */
#define OT_WORLD_REGS 32
enum { OT_WORLD_NEW = 0, OT_WORLD_SIGNALLED, OT_WORLD_STOPPED, OT_WORLD_BLOCKED, OT_WORLD_NO_ANSWER,
       OT_WORLD_NO_SIGNAL, OT_WORLD_GONE };
typedef struct {
    pid_t tid;
    _Atomic int state;  /* OT_WORLD_*: only STOPPED has registers */
    uintptr_t sp;       /* STOPPED: from its registers; else from /proc (0: unknown) */
    uintptr_t tp;       /* STOPPED: its thread pointer (glibc's thread descriptor); else 0 */
    unsigned nregs;
    uintptr_t regs[OT_WORLD_REGS];
} ot_world_thread_t;
/* Fills t (the caller's memory, which must outlive the process: a late handler may read it) with
 * every other thread and stops them; returns how many. */
unsigned ot_world_stop(ot_world_thread_t *t, unsigned max);
void ot_world_resume(void);
int ot_world_signal(void); /* the signal used (-1: none free) */

/* ------------------------------------------------------------------ leak.c
 * Lost versus reachable at exit: stops the world, scans the roots, marks through the live blocks. */
typedef struct {
    uintptr_t addr;
    uint64_t size;
    uint32_t site;
    uint8_t kind;
    uint8_t reachable;
} ot_leak_block_t;
typedef struct {
    ot_leak_block_t *blocks; /* sorted by address */
    size_t n;
    unsigned threads, threads_with_regs, threads_without_regs; /* other threads */
    uint64_t roots_modules, roots_stacks, roots_maps, roots_regs; /* bytes scanned per root set */
    unsigned maps_scanned;
    uint64_t scanned_block_bytes;
    uint64_t ns;          /* the check's time, stop to resume */
    bool incomplete;      /* something could not be looked at: see note */
    char note[256];
} ot_leak_scan_t;
/* Runs the scan; false when it could not run at all (out of memory). The arrays stay mapped. */
bool ot_leak_scan(ot_leak_scan_t *out);
extern OT_HIDDEN bool ot_leak_plain_scan; /* tests: the scan's plain word loop even where the CPU has AVX2 */

/* ------------------------------------------------------------------ leak_report.c
 * Groups the scan by call site, applies suppressions, writes text, JSON and JUnit. */
/* Runs the whole check (leak_check=1); returns true when unsuppressed lost memory remains. */
bool ot_leak_check_run(void);
void ot_leak_set_status(int status); /* the status the program exits with (exit.c) */
/* LSan's template match: `*` wildcards, ^ and $ anchors, else a substring (tests). */
bool ot_leak_template_match(const char *templ, size_t tlen, const char *s);

/* ------------------------------------------------------------------ exit.c
 * The one exit path: final report, leak check, recorder close, exit summary, exit status. */
void ot_exit_install(void);

/* ------------------------------------------------------------------ resolve.c
 * The real dlsym, found with dlvsym so that our own exported dlsym wrapper (hooks_dlsym.c) is never
 * what we call. ot_next(name) = real dlsym(RTLD_NEXT, name) as seen from liboomtrace.so. */
void *ot_real_dlsym(void *handle, const char *name);
void *ot_real_dlvsym(void *handle, const char *name, const char *version);
void *ot_next(const char *name);

#endif
