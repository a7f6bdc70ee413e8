/* Stack capture (stack.c): frames of a known call chain, skip and depth, other threads, signal
 * handlers, agreement of the fast and exact paths, no malloc, and the cost of a 20-frame stack. */
#include "internal.h"
#include "harness.h"
#include "unwind_fast.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

/* ------------------------------------------------------------------ malloc counter
 * The test binary's malloc interposes everyone's; while a thread's flag is set, calls count.
 * Not under sanitizers, which own malloc. */
#include "malloc_counter.h"

/* ------------------------------------------------------------------ a known call chain */
typedef unsigned (*capture_fn)(uintptr_t *, unsigned, unsigned);
static struct {
    capture_fn fn;
    unsigned max, skip, n;
    uintptr_t ips[OT_MAX_FRAMES];
} chain;

#define BARRIER() __asm__ volatile("" ::: "memory")

static OT_NOINLINE void chain_c(void)
{
    chain.n = chain.fn(chain.ips, chain.max, chain.skip);
    BARRIER();
}
static OT_NOINLINE void chain_b(void)
{
    chain_c();
    BARRIER();
}
static OT_NOINLINE void chain_a(void)
{
    chain_b();
    BARRIER();
}

static OT_NOINLINE void run_chain(capture_fn fn, unsigned max, unsigned skip)
{
    chain.fn = fn;
    chain.max = max;
    chain.skip = skip;
    chain.n = 0;
    chain_a();
}

static void name_of(uintptr_t ip, char *out, size_t cap)
{
    ot_frame_t f;
    ot_symbolize(ip - 1, &f); /* return address: look up the call instruction */
    snprintf(out, cap, "%s", f.function);
}

/* Index of the first frame at or after `from` whose function is `fn`, or -1. */
static int find_frame(const uintptr_t *ips, unsigned n, unsigned from, const char *fn)
{
    char name[512];
    for (unsigned i = from; i < n; i++) {
        name_of(ips[i], name, sizeof name);
        if (strcmp(name, fn) == 0) return (int)i;
    }
    return -1;
}

static void dump(const uintptr_t *ips, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        ot_frame_t f;
        ot_symbolize(ips[i] - 1, &f);
        printf("    #%u %#lx %s (%s+%#lx)\n", i, (unsigned long)ips[i], f.function, f.module,
               (unsigned long)f.offset);
    }
}

/* Whether two captures are the same frames; prints both when they are not. */
static bool same_stack(const uintptr_t *a, unsigned na, const uintptr_t *b, unsigned nb)
{
    bool same = na == nb;
    for (unsigned i = 0; same && i < na; i++) same = a[i] == b[i];
    if (!same) {
        printf("  CFI walker / first capture:\n");
        dump(a, na);
        printf("  libunwind / second capture:\n");
        dump(b, nb);
    }
    return same;
}

static void check_chain(capture_fn fn, const char *outer)
{
    run_chain(fn, OT_MAX_FRAMES, 0);
    ASSERT(chain.n >= 4);
    char name[512];
    name_of(chain.ips[0], name, sizeof name);
    EXPECT_STR(name, "chain_c"); /* the capture function itself never shows */
    int b = find_frame(chain.ips, chain.n, 1, "chain_b");
    int a = find_frame(chain.ips, chain.n, 1, "chain_a");
    int o = find_frame(chain.ips, chain.n, 1, outer);
    EXPECT(b == 1);
    EXPECT(a == 2);
    EXPECT(o > a);
    for (unsigned i = 0; i < chain.n; i++) {
        name_of(chain.ips[i], name, sizeof name);
        EXPECT(strncmp(name, "ot_stack_capture", 16) != 0 && strcmp(name, "stack_walk") != 0);
    }
    if (ot_t_failed_) dump(chain.ips, chain.n);
}

TEST(test_init)
{
    ot_stack_init();
    ot_stack_init(); /* idempotent */
    ot_symbolize_begin();
}

TEST(test_chain_exact)
{
    check_chain(ot_stack_capture_exact, "main");
}

TEST(test_chain_fast) { check_chain(ot_stack_capture, "main"); }

/* Comparisons of two captures run them from one call site (a loop), so all frames match. */
TEST(test_fast_equals_exact)
{
    uintptr_t got[2][OT_MAX_FRAMES];
    unsigned n[2];
    for (volatile int k = 0; k < 2; k++) { /* volatile: no unrolling into two call sites */
        run_chain(k ? ot_stack_capture_exact : ot_stack_capture, OT_MAX_FRAMES, 0);
        n[k] = chain.n;
        memcpy(got[k], chain.ips, sizeof got[k]);
    }
    EXPECT(same_stack(got[0], n[0], got[1], n[1]));
}

TEST(test_skip)
{
    capture_fn fns[2] = {ot_stack_capture, ot_stack_capture_exact};
    for (int k = 0; k < 2; k++) {
        uintptr_t full[OT_MAX_FRAMES];
        unsigned nfull = 0;
        for (volatile unsigned skip = 0; skip <= 3; skip++) {
            run_chain(fns[k], OT_MAX_FRAMES, skip);
            if (skip == 0) {
                nfull = chain.n;
                memcpy(full, chain.ips, sizeof full);
                continue;
            }
            EXPECT_EQ_U(chain.n, nfull - skip);
            for (unsigned i = 0; i < chain.n; i++) EXPECT_EQ_U(chain.ips[i], full[i + skip]);
        }
        char name[512];
        run_chain(fns[k], OT_MAX_FRAMES, 2);
        name_of(chain.ips[0], name, sizeof name);
        EXPECT_STR(name, "chain_a");
        run_chain(fns[k], OT_MAX_FRAMES, 1000); /* more than there are */
        EXPECT_EQ_U(chain.n, 0);
    }
}

TEST(test_depth_limit)
{
    capture_fn fns[2] = {ot_stack_capture, ot_stack_capture_exact};
    for (int k = 0; k < 2; k++) {
        uintptr_t full[OT_MAX_FRAMES];
        for (volatile unsigned max = 0; max <= 4; max++) {
            unsigned m = max ? max - 1 : OT_MAX_FRAMES; /* first round: the full stack */
            chain.ips[0] = 0x1234;
            run_chain(fns[k], m, 0);
            if (max == 0) {
                memcpy(full, chain.ips, sizeof full);
                continue;
            }
            EXPECT_EQ_U(chain.n, m);
            for (unsigned i = 0; i < chain.n; i++) EXPECT_EQ_U(chain.ips[i], full[i]);
            if (m == 0) EXPECT_EQ_U(chain.ips[0], 0x1234); /* nothing written */
        }
        run_chain(fns[k], 1, 1);
        EXPECT_EQ_U(chain.n, 1);
        char name[512];
        name_of(chain.ips[0], name, sizeof name);
        EXPECT_STR(name, "chain_b");
    }
}

static OT_NOINLINE void *thread_main(void *arg)
{
    capture_fn fn = (capture_fn)arg;
    run_chain(fn, OT_MAX_FRAMES, 0);
    BARRIER();
    return NULL;
}

TEST(test_other_thread)
{
    capture_fn fns[2] = {ot_stack_capture, ot_stack_capture_exact};
    for (int k = 0; k < 2; k++) {
        pthread_t t;
        ASSERT(pthread_create(&t, NULL, thread_main, (void *)fns[k]) == 0);
        pthread_join(t, NULL);
        ASSERT(chain.n >= 4);
        char name[512];
        name_of(chain.ips[0], name, sizeof name);
        EXPECT_STR(name, "chain_c");
        EXPECT(find_frame(chain.ips, chain.n, 1, "chain_b") == 1);
        EXPECT(find_frame(chain.ips, chain.n, 1, "chain_a") == 2);
        EXPECT(find_frame(chain.ips, chain.n, 3, "thread_main") >= 3);
        EXPECT(find_frame(chain.ips, chain.n, 0, "main") < 0);
        if (ot_t_failed_) dump(chain.ips, chain.n);
    }
}

/* A capture from a signal handler sees the interrupted frames behind the signal frame. */
static volatile sig_atomic_t in_handler;
static void on_signal(int sig)
{
    (void)sig;
    in_handler = 1;
    chain.n = chain.fn(chain.ips, OT_MAX_FRAMES, 0);
}
static OT_NOINLINE void raise_in_chain(void)
{
    raise(SIGUSR1);
    BARRIER();
}

TEST(test_signal_handler)
{
    capture_fn fns[2] = {ot_stack_capture_exact, ot_stack_capture};
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    ASSERT(sigaction(SIGUSR1, &sa, &old) == 0);
    for (int k = 0; k < 2; k++) {
        chain.fn = fns[k];
        chain.n = 0;
        raise_in_chain();
        EXPECT(in_handler);
        EXPECT(chain.n >= 3);
        char name[512];
        name_of(chain.ips[0], name, sizeof name);
        EXPECT_STR(name, "on_signal");
        EXPECT(find_frame(chain.ips, chain.n, 1, "raise_in_chain") > 0);
        EXPECT(find_frame(chain.ips, chain.n, 1, "main") > 0);
        if (ot_t_failed_) dump(chain.ips, chain.n);
    }
    sigaction(SIGUSR1, &old, NULL);
}

/* ot_stack_in_signal_handler: the leak report's test before it lets libdw allocate. */
static volatile int handler_saw = -1;
static OT_NOINLINE void deeper_in_handler(void)
{
    handler_saw = ot_stack_in_signal_handler();
    BARRIER();
}
static void on_signal_ask(int sig)
{
    (void)sig;
    deeper_in_handler();
}

TEST(test_in_signal_handler)
{
    EXPECT(!ot_stack_in_signal_handler());
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal_ask;
    ASSERT(sigaction(SIGUSR1, &sa, &old) == 0);
    raise_in_chain();
    sigaction(SIGUSR1, &old, NULL);
    EXPECT_EQ_U(handler_saw, 1);
    EXPECT(!ot_stack_in_signal_handler()); /* and out of it again */
}

/* Capturing allocates nothing, not even the first time in a new thread. */
#if HAVE_MALLOC_COUNTER
static int thread_mallocs;
static void *count_thread(void *arg)
{
    (void)arg;
    uintptr_t ips[OT_MAX_FRAMES];
    int before = __atomic_load_n(&mallocs_seen, __ATOMIC_RELAXED);
    count_mallocs = 1;
    for (int i = 0; i < 100; i++) {
        ot_stack_capture(ips, OT_MAX_FRAMES, 0);
        ot_stack_capture_exact(ips, OT_MAX_FRAMES, 0);
    }
    count_mallocs = 0;
    thread_mallocs = __atomic_load_n(&mallocs_seen, __ATOMIC_RELAXED) - before;
    return NULL;
}
#endif

TEST(test_no_malloc)
{
#if !HAVE_MALLOC_COUNTER
    SKIP("malloc belongs to the sanitizer");
#else
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, count_thread, NULL) == 0);
    pthread_join(t, NULL);
    EXPECT_EQ_U(thread_mallocs, 0);
    count_thread(NULL);
    EXPECT_EQ_U(thread_mallocs, 0);
#endif
}

/* ------------------------------------------------------------------ the CFI walker (unwind.c)
 * Frames of every shape the walker models, each checked against libunwind's exact walk from the
 * same call site, with no fallback to libunwind counted: rbp-based CFAs (alloca), frame-pointer
 * code, code that uses rbp as an ordinary register, large frames and recursion. */
static char walk_mem[2][OT_UNWIND_CACHE_BYTES] __attribute__((aligned(64)));

/* Captures with both walkers from one call site; returns true when they agree. */
static OT_NOINLINE bool both_agree(void)
{
    uintptr_t got[2][OT_MAX_FRAMES];
    unsigned n[2];
    for (volatile int k = 0; k < 2; k++) {
        n[k] = (k ? ot_stack_capture_exact : ot_stack_capture)(got[k], OT_MAX_FRAMES, 0);
        BARRIER();
    }
    return n[0] >= 3 && same_stack(got[0], n[0], got[1], n[1]);
}

static __thread volatile unsigned sink; /* per thread: test_cfi_threads */
static OT_NOINLINE bool with_alloca(unsigned n)
{
    volatile char *p = __builtin_alloca(n); /* rbp-based CFA */
    p[0] = 1;
    bool r = both_agree();
    sink += p[0];
    return r;
}
__attribute__((optimize("no-omit-frame-pointer"))) static OT_NOINLINE bool with_fp(unsigned n)
{
    bool r = with_alloca(n);
    BARRIER();
    return r;
}
/* rbp as a plain callee-saved register: many live values across a call. */
__attribute__((optimize("omit-frame-pointer"))) static OT_NOINLINE bool with_rbp_busy(unsigned n)
{
    unsigned a = n * 3, b = n * 5, c = n * 7, d = n * 11, e = n * 13, f = n * 17, g = n * 19;
    bool r = with_fp(n);
    sink += a + b + c + d + e + f + g;
    return r;
}
static OT_NOINLINE bool big_frame(unsigned n)
{
    volatile char buf[70000]; /* a CFA offset beyond 16 bits */
    buf[n % sizeof buf] = 1;
    bool r = with_rbp_busy(n);
    sink += buf[n % sizeof buf];
    return r;
}
static OT_NOINLINE bool recurse(unsigned d, unsigned n)
{
    bool r = d ? recurse(d - 1, n) : big_frame(n);
    BARRIER();
    return r;
}

TEST(test_cfi_frame_kinds)
{
    uint64_t f0, f1;
    ot_unwind_stats(NULL, &f0);
    for (int cached = 0; cached < 2; cached++) {
        ot_unwind_attach(cached ? walk_mem[0] : NULL, sizeof walk_mem[0]);
        for (unsigned i = 0; i < 20; i++) {
            /* Depth and frame sizes change from call to call: the cache must notice. */
            if (!recurse(i % 7, 16 + 48 * (i % 5))) {
                EXPECT(false);
                break;
            }
        }
    }
    ot_unwind_attach(NULL, 0);
    ot_unwind_stats(NULL, &f1);
    EXPECT_EQ_U(f1 - f0, 0); /* every frame above was walked from its CFI, none by libunwind */
}

/* The rule cache keeps four return addresses that map to one set, and a fifth replaces the oldest
 * of them. Direct-mapped, every one of them replaced the one before: gcc's cc1 rebuilt 81,685 rules
 * for the 7,245 it builds with four ways (stacks=all on the bench's big.c). The addresses are taken
 * from this program's own code, where every one has a rule (or a cached "unsupported"). */
extern char __executable_start[], etext[];
TEST(test_cfi_rule_cache_ways)
{
    uintptr_t lo = (uintptr_t)__executable_start, hi = (uintptr_t)etext, ips[5];
    unsigned set = ot_unwind_rule_set_for_test(hi - 1), n = 0;
    for (uintptr_t ip = hi - 2; ip > lo && n < 5; ip--)
        if (ot_unwind_rule_set_for_test(ip) == set) ips[n++] = ip;
    ASSERT(n == 5);
    uint64_t b0, b1, b2, b3, b4;
    ot_unwind_stats(&b0, NULL);
    for (unsigned i = 0; i < 4; i++) ot_unwind_rule_for_test(ips[i]);
    ot_unwind_stats(&b1, NULL);
    for (unsigned i = 0; i < 4; i++) ot_unwind_rule_for_test(ips[i]);
    ot_unwind_stats(&b2, NULL);
    ot_unwind_rule_for_test(ips[4]);
    ot_unwind_stats(&b3, NULL);
    for (unsigned i = 1; i < 5; i++) ot_unwind_rule_for_test(ips[i]);
    ot_unwind_rule_for_test(ips[0]);
    ot_unwind_stats(&b4, NULL);
    printf("  five addresses in one set: %llu, %llu, %llu, %llu rules built\n", (unsigned long long)(b1 - b0),
           (unsigned long long)(b2 - b1), (unsigned long long)(b3 - b2), (unsigned long long)(b4 - b3));
    EXPECT_EQ_U(b1 - b0, 4); /* the first four, each built once */
    EXPECT_EQ_U(b2 - b1, 0); /* all four still there */
    EXPECT_EQ_U(b3 - b2, 1); /* the fifth */
    EXPECT_EQ_U(b4 - b3, 1); /* the last four still there; the first, the oldest, was replaced */
}

/* Deeper than the per-thread cache holds (skip + max beyond its 80 frames): the second capture
 * joins the first at frame 0, uses what the cache holds and steps on from its end. */
static OT_NOINLINE unsigned deep_pair(unsigned d, uintptr_t (*got)[OT_MAX_FRAMES], unsigned *n)
{
    if (d) {
        unsigned r = deep_pair(d - 1, got, n);
        BARRIER();
        return r;
    }
    for (volatile int k = 0; k < 3; k++) {
        n[k] = (k == 2 ? ot_stack_capture_exact : ot_stack_capture)(got[k], OT_MAX_FRAMES, 40);
        BARRIER();
    }
    return n[0];
}

TEST(test_cfi_deeper_than_cache)
{
    uintptr_t got[3][OT_MAX_FRAMES];
    unsigned n[3];
    ot_unwind_attach(walk_mem[0], sizeof walk_mem[0]);
    deep_pair(120, got, n);
    ot_unwind_attach(NULL, 0);
    EXPECT_EQ_U(n[0], OT_MAX_FRAMES);
    for (int k = 0; k < 2; k++) {
        EXPECT(same_stack(got[k], n[k], got[2], n[2]));
    }
}

/* Two callers reach one capture function at the same stack depth: the capture's own frame is the
 * same (ip, sp) both times, the frames above it are not. */
static OT_NOINLINE unsigned leaf_capture(uintptr_t *ips)
{
    unsigned n = ot_stack_capture(ips, OT_MAX_FRAMES, 0);
    BARRIER();
    return n;
}
/* noipa: identical functions would otherwise be folded into one. */
__attribute__((noipa)) static unsigned caller_one(uintptr_t *ips)
{
    unsigned n = leaf_capture(ips);
    sink += 1;
    return n;
}
__attribute__((noipa)) static unsigned caller_two(uintptr_t *ips)
{
    unsigned n = leaf_capture(ips);
    sink += 2;
    return n;
}

TEST(test_cfi_cache_parts)
{
    uintptr_t ips[OT_MAX_FRAMES];
    char name[512];
    ot_unwind_attach(walk_mem[1], sizeof walk_mem[1]);
    for (volatile int i = 0; i < 6; i++) {
        unsigned n = (i & 1) ? caller_two(ips) : caller_one(ips);
        ASSERT(n >= 3);
        name_of(ips[0], name, sizeof name);
        EXPECT_STR(name, "leaf_capture");
        name_of(ips[1], name, sizeof name);
        EXPECT_STR(name, (i & 1) ? "caller_two" : "caller_one");
        EXPECT(find_frame(ips, n, 2, "main") > 1);
        if (ot_t_failed_) { dump(ips, n); break; }
        /* A shallower request after a deeper one, and the reverse, from the cache. */
        unsigned m = ot_stack_capture(ips, 2, 0);
        EXPECT_EQ_U(m, 2);
        name_of(ips[0], name, sizeof name);
        EXPECT_STR(name, "test_cfi_cache_parts");
    }
    /* A walk steps only where its stack differs from the last one: the capture's own frame holds,
     * the caller's is another (same sp, another ip), and from this function's caller on the two
     * meet again and are checked, not stepped. The first walk after attaching steps every frame. */
    ot_unwind_attach(walk_mem[1], sizeof walk_mem[1]);
    unsigned full = caller_one(ips), first = ot_unwind_last_stepped();
    caller_two(ips);
    unsigned joined = ot_unwind_last_stepped();
    caller_one(ips);
    unsigned back = ot_unwind_last_stepped();
    printf("  frames stepped: %u of %u on the first walk, then %u and %u\n", first, full, joined, back);
    EXPECT(first + 1 >= full && full >= 6);
    EXPECT(joined <= 3 && back <= 3);
    ot_unwind_attach(NULL, 0);
}

/* Keeps a walk's frames (ips, OT_MAX_FRAMES of them) in dst for later comparisons; returns n. */
static unsigned keep_frames(uintptr_t *dst, const uintptr_t *ips, unsigned n)
{
    memcpy(dst, ips, OT_MAX_FRAMES * sizeof *ips);
    return n;
}

/* Notes (ot_stack_capture_at): a value attached to a walk comes back only for that very stack,
 * under the same tag, and never once another stack was walked in between. The stack starts at
 * noted_leaf's caller, as a record's starts at the hook's. */
static volatile int probe_first; /* ask ot_stack_noted_at first, as live.c does; 2: ask only the walks
                                  * other than the last (ot_unwind_noted_others), nothing else */
static uint32_t probe_searched; /* what that said of the walk that would follow */
static volatile unsigned leaf_max = OT_MAX_FRAMES;  /* the depth noted_leaf asks the walker for */
static volatile unsigned probe_max = OT_MAX_FRAMES; /* and the probes before it */
static unsigned probe_hits;
static OT_NOINLINE unsigned noted_leaf(uintptr_t *ips, uint32_t tag, ot_stack_note_t *note)
{
    note->tag = tag;
    ot_origin_t origin = OT_ORIGIN();
    unsigned n = 0;
    if (probe_first == 2) {
        note->hit = 0;
        note->value = ot_unwind_noted_others(origin.ip, origin.sp, origin.bp, probe_max, tag, &n, &probe_searched);
        BARRIER();
        return note->value ? n : 0;
    }
    uint32_t v = probe_first ? ot_stack_noted_at(probe_max, &origin, tag, &n) : 0;
    if (v) {
        probe_hits++;
        note->hit = 1;
        note->value = v;
        BARRIER();
        return n;
    }
    n = ot_stack_capture_at(ips, leaf_max, &origin, note);
    BARRIER();
    return n;
}
/* A function that calls `callee` and does some work of its own after it, so that the call is no
 * tail call and no two such functions fold into one: each is a frame with its own return address. */
#define NOTED_CALLER_ATTR(attrs, name, callee, k)                                                      \
    __attribute__(attrs) static unsigned name(uintptr_t *ips, uint32_t tag, ot_stack_note_t *note)    \
    {                                                                                                  \
        unsigned n = callee(ips, tag, note);                                                           \
        sink += k;                                                                                     \
        return n;                                                                                      \
    }
#define NOTED_CALLER(name, callee, k) NOTED_CALLER_ATTR((noipa), name, callee, k)
typedef unsigned (*noted_fn)(uintptr_t *, uint32_t, ot_stack_note_t *);
/* Twelve callers of callee, name_0..name_11 (the work after the call k0..k0 + 11), and the array
 * name_callers of them: twelve stacks that share callee's frames and differ from the caller out. */
#define TWELVE_CALLERS(attrs, name, callee, k0)                                                        \
    NOTED_CALLER_ATTR(attrs, name##_0, callee, k0)                                                     \
    NOTED_CALLER_ATTR(attrs, name##_1, callee, k0 + 1)                                                 \
    NOTED_CALLER_ATTR(attrs, name##_2, callee, k0 + 2)                                                 \
    NOTED_CALLER_ATTR(attrs, name##_3, callee, k0 + 3)                                                 \
    NOTED_CALLER_ATTR(attrs, name##_4, callee, k0 + 4)                                                 \
    NOTED_CALLER_ATTR(attrs, name##_5, callee, k0 + 5)                                                 \
    NOTED_CALLER_ATTR(attrs, name##_6, callee, k0 + 6)                                                 \
    NOTED_CALLER_ATTR(attrs, name##_7, callee, k0 + 7)                                                 \
    NOTED_CALLER_ATTR(attrs, name##_8, callee, k0 + 8)                                                 \
    NOTED_CALLER_ATTR(attrs, name##_9, callee, k0 + 9)                                                 \
    NOTED_CALLER_ATTR(attrs, name##_10, callee, k0 + 10)                                               \
    NOTED_CALLER_ATTR(attrs, name##_11, callee, k0 + 11)                                               \
    static const noted_fn name##_callers[12] = {                                                       \
        name##_0, name##_1, name##_2, name##_3, name##_4,  name##_5,                                   \
        name##_6, name##_7, name##_8, name##_9, name##_10, name##_11};
NOTED_CALLER(noted_one, noted_leaf, 1)
NOTED_CALLER(noted_two, noted_leaf, 2)
NOTED_CALLER(noted_three, noted_leaf, 3)

/* One function reached at growing depths: a new stack each time (another sp for frame 0). */
__attribute__((noipa)) static unsigned noted_deep(unsigned d, uintptr_t *ips, uint32_t tag, ot_stack_note_t *note)
{
    unsigned n = d ? noted_deep(d - 1, ips, tag, note) : noted_leaf(ips, tag, note);
    sink += d;
    return n;
}
/* Two stacks that share frame 0 (noted_mid's, same ip and sp) and part above it. */
NOTED_CALLER(noted_mid, noted_leaf, 3)
NOTED_CALLER(noted_via_a, noted_mid, 4)
NOTED_CALLER(noted_via_b, noted_mid, 5)
NOTED_CALLER(noted_via_c, noted_mid, 6)
NOTED_CALLER(noted_via_d, noted_mid, 7)

/* rbp as optimised code uses it, a callee-saved register holding data: rbp_varies loads another
 * value into it for each call (saving its caller's, as the ABI wants) and calls rbp_passes, which
 * leaves rbp alone. Frame 0 (rbp_passes) passes rbp on unsaved, but no frame of the stack computes
 * its CFA from rbp, so the same stack with another rbp is still the same stack. */
__attribute__((noipa, optimize("omit-frame-pointer"))) static unsigned rbp_passes(uintptr_t *ips,
                                                                                  ot_stack_note_t *note)
{
    unsigned n = noted_leaf(ips, 7, note);
    sink += 6;
    return n;
}
__attribute__((noipa, optimize("omit-frame-pointer"))) static unsigned rbp_varies(uintptr_t value, uintptr_t *ips,
                                                                                  ot_stack_note_t *note)
{
    register uintptr_t in_rbp __asm__("rbp") = value;
    __asm__ volatile("" : "+r"(in_rbp));
    unsigned n = rbp_passes(ips, note);
    __asm__ volatile("" : "+r"(in_rbp));
    sink += in_rbp;
    return n;
}

/* rbp as data of an outer function (deep_large's main keeps its loop counter there) and passed on,
 * unsaved, by the frames between it and the first function that saves it: rbp_holder loads a value
 * into rbp (saving its caller's) and calls down through two functions that leave rbp alone to
 * rbp_saver, which saves it. rbp_saver's slot then holds rbp_holder's value, and no frame computes
 * its CFA from it: rbp_holder saves rbp itself, and a walk cut before it computes nothing from its
 * last frame. The same stack with another value there is the same stack. */
__attribute__((noipa, optimize("omit-frame-pointer"))) static unsigned rbp_saver(uintptr_t *ips, uint32_t tag,
                                                                                 ot_stack_note_t *note)
{
    __asm__ volatile("" ::: "rbp");
    unsigned n = noted_leaf(ips, tag, note);
    sink += 8;
    return n;
}
__attribute__((noipa, optimize("omit-frame-pointer"))) static unsigned rbp_pass_1(uintptr_t *ips, uint32_t tag,
                                                                                  ot_stack_note_t *note)
{
    unsigned n = rbp_saver(ips, tag, note);
    sink += 9;
    return n;
}
__attribute__((noipa, optimize("omit-frame-pointer"))) static unsigned rbp_pass_2(uintptr_t *ips, uint32_t tag,
                                                                                  ot_stack_note_t *note)
{
    unsigned n = rbp_pass_1(ips, tag, note);
    sink += 10;
    return n;
}
__attribute__((noipa, optimize("omit-frame-pointer"))) static unsigned rbp_holder(uintptr_t value, uintptr_t *ips,
                                                                                  uint32_t tag, ot_stack_note_t *note)
{
    register uintptr_t in_rbp __asm__("rbp") = value;
    __asm__ volatile("" : "+r"(in_rbp));
    unsigned n = rbp_pass_2(ips, tag, note);
    __asm__ volatile("" : "+r"(in_rbp));
    sink += in_rbp;
    return n;
}

TEST(test_cfi_rbp_passed_on)
{
    static const char *const names[] = {"rbp_saver", "rbp_pass_1", "rbp_pass_2", "rbp_holder"};
    uintptr_t ips[OT_MAX_FRAMES];
    char name[512];
    ot_stack_note_t note = {0};
    /* the whole stack; cut at rbp_pass_1 and at rbp_pass_2, frames that pass rbp on */
    static const unsigned depths[] = {OT_MAX_FRAMES, 2, 3};
    probe_first = 0;
    for (unsigned d = 0; d < 3; d++) {
        leaf_max = depths[d];
        ot_unwind_attach(walk_mem[1], sizeof walk_mem[1]);
        unsigned hits = 0;
        for (volatile unsigned i = 0; i < 6; i++) {
            memset(ips, 0, sizeof ips);
            unsigned n = rbp_holder(0x7000 + 16 * i, ips, 7, &note);
            if (note.hit) {
                hits++;
                EXPECT_EQ_U(note.value, 400 + d);
                continue;
            }
            if (depths[d] < 4) EXPECT_EQ_U(n, depths[d]); /* cut there */
            ASSERT(n >= (depths[d] < 4 ? depths[d] : 5));
            for (unsigned f = 0; f < n && f < 4; f++) {
                name_of(ips[f], name, sizeof name);
                EXPECT_STR(name, names[f]);
            }
            ot_unwind_note_set(note.walk, 7, 400 + d);
        }
        printf("  depth %u: %u of 6 found again with another value in rbp\n", depths[d], hits);
        EXPECT_EQ_U(hits, 5);
    }
    leaf_max = OT_MAX_FRAMES;
    ot_unwind_attach(NULL, 0);
}

/* A walk cut where rbp passes on unsaved does not check that rbp, so a walk that joins it and goes
 * on past its last frame must take rbp from this stack, not from the remembered frame. cut_fp
 * computes its CFA from rbp (alloca); cut_pad above it makes room so that the two stacks put
 * cut_pass and cut_capture at the same sp while cut_fp's rbp differs between them. Neither of
 * those two touches rbp, so the join at frame 0 is itself one that ignores a different rbp. */
static volatile unsigned cut_max;
static uintptr_t cut_ips[2][OT_MAX_FRAMES], cut_sp;
static unsigned cut_n[2];
__attribute__((noipa, optimize("omit-frame-pointer"))) static void cut_capture(int k)
{
    volatile char here = 0;
    cut_sp = (uintptr_t)&here;
    cut_n[k] = (k ? ot_stack_capture_exact : ot_stack_capture)(cut_ips[k], k ? OT_MAX_FRAMES : cut_max, 0);
    sink += here;
}
__attribute__((noipa, optimize("omit-frame-pointer"))) static void cut_pass(void)
{
    for (volatile int k = 0; k < 2; k++) cut_capture(k);
}
__attribute__((noipa, optimize("no-omit-frame-pointer"))) static void cut_fp(unsigned n)
{
    volatile char *p = __builtin_alloca(n);
    p[0] = 1;
    cut_pass();
    sink += p[0];
}
__attribute__((noipa, optimize("no-omit-frame-pointer"))) static void cut_pad(unsigned k, unsigned n)
{
    volatile char *q = __builtin_alloca(k);
    q[0] = 1;
    cut_fp(n);
    sink += q[0];
}

/* Zeroes the stack below the caller's frame, where the last calls left their frames: a walk that
 * read a slot of the earlier stack would then find no frames there, rather than that stack's own. */
static OT_NOINLINE void scrub_stack(void)
{
    volatile char buf[8192];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = 0;
}

TEST(test_cfi_join_past_cut)
{
    uint64_t f0, f1;
    ot_unwind_stats(NULL, &f0);
    ot_unwind_attach(walk_mem[1], sizeof walk_mem[1]);
    cut_max = 2;
    cut_pad(32, 256);
    uintptr_t sp_a = cut_sp;
    ASSERT(cut_n[0] == 2 && cut_n[1] > 4);
    EXPECT(same_stack(cut_ips[0], 2, cut_ips[1], 2));
    cut_max = OT_MAX_FRAMES;
    unsigned stepped[2], n[2];
    for (volatile int round = 0; round < 2; round++) { /* one call site: the same stack twice */
        scrub_stack();
        cut_pad(256, 32);
        stepped[round] = ot_unwind_last_stepped();
        n[round] = cut_n[0];
        if (round == 0 && cut_sp != sp_a) break;
        EXPECT(same_stack(cut_ips[0], cut_n[0], cut_ips[1], cut_n[1]));
    }
    ot_unwind_attach(NULL, 0);
    if (cut_sp != sp_a)
        SKIP("the two stacks did not meet at one sp (%#lx, %#lx)", (unsigned long)sp_a, (unsigned long)cut_sp);
    /* frame 0 joined, the rest stepped from cut_pass on with this stack's rbp */
    printf("  second stack: %u frames, %u stepped; the same again: %u stepped\n", n[0], stepped[0], stepped[1]);
    EXPECT(stepped[0] < n[0]);
    /* That walk keeps this stack's rbp in the frames it took over, where it matters to it now (to
     * cut_fp's CFA): the same stack again is the remembered one, nothing stepped. */
    EXPECT_EQ_U(stepped[1], 0);
    EXPECT_EQ_U(n[1], n[0]);
    ot_unwind_stats(NULL, &f1);
    EXPECT_EQ_U(f1 - f0, 0);
}

/* The same stack again means the same rbp too wherever rbp matters: this function keeps rbp as its
 * frame pointer, so that no loop variable of its own lives there and makes every step a new stack. */
__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_notes_body(void);
/* Twice: the second time noted_leaf asks ot_stack_noted_at first, as the record path does, which
 * must answer exactly as the walk's own same-stack case (and does answer some of them). */
TEST(test_cfi_notes)
{
    for (probe_first = 0; probe_first < 2; probe_first++) {
        probe_hits = 0;
        cfi_notes_body();
        if (probe_first) printf("  ot_stack_noted_at answered %u of the notes\n", probe_hits);
        EXPECT(probe_first ? probe_hits >= 3 : probe_hits == 0);
    }
}

__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_notes_body(void)
{
    uintptr_t ips[OT_MAX_FRAMES], first[OT_MAX_FRAMES], other[OT_MAX_FRAMES];
    unsigned n0 = 0;
    uint32_t first_walk = 0;
    char name[512];
    ot_stack_note_t note = {0}, note2 = {0};
    ot_unwind_attach(walk_mem[1], sizeof walk_mem[1]);
    for (volatile unsigned step = 0; step < 9; step++) {
        memset(ips, 0, sizeof ips);
        unsigned n = noted_one(ips, step == 5 ? 8 : 7, &note); /* one call site: one stack */
        switch (step) {
        case 0: /* a first walk: no note yet */
            ASSERT(n >= 3);
            EXPECT(!note.hit && note.walk != 0);
            name_of(ips[0], name, sizeof name);
            EXPECT_STR(name, "noted_one");
            n0 = keep_frames(first, ips, n);
            first_walk = note.walk;
            ot_unwind_note_set(note.walk, 7, 1234);
            break;
        case 1: /* the same stack and tag: the note, the depth, and no frames written */
            EXPECT(note.hit && note.value == 1234);
            EXPECT_EQ_U(n, n0);
            EXPECT_EQ_U(ips[0], 0);
            /* Another stack in between replaces the walk. A note set with an id that is not the
             * last walk's is ignored; one with the right id holds. */
            for (volatile int r = 0; r < 3; r++) {
                unsigned m = noted_two(other, 7, &note2);
                if (r == 0) {
                    EXPECT(!note2.hit);
                    name_of(other[0], name, sizeof name);
                    EXPECT_STR(name, "noted_two");
                    ot_unwind_note_set(first_walk, 7, 555); /* a walk that is no longer the last */
                    ot_unwind_note_set(note2.walk, 0, 555); /* tag 0: never noted */
                    ot_unwind_note_set(note2.walk, 7, 0);   /* value 0: never noted */
                } else if (r == 1) {
                    EXPECT(!note2.hit);
                    EXPECT(m >= 3 && other[0] != first[0]);
                    ot_unwind_note_set(note2.walk, 7, 77);
                } else {
                    EXPECT(note2.hit && note2.value == 77);
                }
            }
            break;
        case 2: /* one other stack in between: the first is still among the walks remembered */
            EXPECT(note.hit && note.value == 1234);
            EXPECT_EQ_U(n, n0);
            /* Sixteen other stacks push it out. */
            for (volatile unsigned d = 0; d < 16; d++) {
                noted_deep(d, other, 7, &note2);
                EXPECT(!note2.hit);
            }
            break;
        case 3: /* so the first note is gone: the frames again */
            EXPECT(!note.hit);
            EXPECT(same_stack(ips, n, first, n0));
            ot_unwind_note_set(note.walk, 7, 4321);
            break;
        case 4:
            EXPECT(note.hit && note.value == 4321);
            break;
        case 5: /* another tag: no note, the frames; the walk and its note stay */
            EXPECT(!note.hit);
            EXPECT(same_stack(ips, n, first, n0));
            break;
        case 6:
            EXPECT(note.hit && note.value == 4321);
            ot_stack_flush(); /* what a dlclose does: remembered walks no longer join */
            break;
        case 7:
            EXPECT(!note.hit);
            EXPECT(same_stack(ips, n, first, n0));
            ot_unwind_note_set(note.walk, 7, 99);
            break;
        case 8:
            EXPECT(note.hit && note.value == 99);
            break;
        }
        if (ot_t_failed_) {
            printf("  failed at step %u\n", (unsigned)step);
            break;
        }
    }
    ot_unwind_attach(NULL, 0);
}

/* Stacks taken in turn (python3 allocates from two): each is found among the remembered walks
 * with its own note, also when two of them share frame 0 and part above it; with only the last
 * two walks remembered (the size for sampled stacks), three in turn are walked every time. */
__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_memo_body(void);
TEST(test_cfi_memo)
{
    for (probe_first = 0; probe_first < 2; probe_first++) {
        probe_hits = 0;
        cfi_memo_body();
        EXPECT(probe_first ? probe_hits >= 3 : probe_hits == 0);
    }
}

__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_memo_body(void)
{
    uintptr_t ips[OT_MAX_FRAMES];
    ot_stack_note_t note = {0};
    char name[512];
    /* Two buffers remember one walk; six (sampled stacks) five; sixteen (stacks=all) fifteen. */
    static const size_t sizes[] = {sizeof walk_mem[1], OT_UNWIND_CACHE_SAMPLED_BYTES, OT_UNWIND_CACHE_MIN_BYTES};
    static const char *const said[] = {"sixteen walks remembered", "six walks remembered", "two walks remembered"};
    for (volatile int size = 0; size < 3; size++) {
        bool small = size == 2;
        ot_unwind_attach(walk_mem[1], sizes[size]);
        unsigned hits = 0;
        for (volatile unsigned i = 0; i < 13; i++) {
            unsigned which = i % 3, n;
            memset(ips, 0, sizeof ips);
            /* After a dlclose no remembered walk is taken (via_a's is not the last one). */
            if (i == 12) ot_stack_flush();
            if (which == 0) n = noted_via_a(ips, 7, &note);
            else if (which == 1) n = noted_via_b(ips, 7, &note);
            else n = noted_one(ips, 7, &note);
            ASSERT(n >= 3);
            if (note.hit) {
                hits++;
                EXPECT(i < 12);
                EXPECT_EQ_U(note.value, 100 + which); /* its own note, never the other's */
                EXPECT_EQ_U(ot_unwind_last_stepped(), 0);
            } else {
                name_of(ips[1], name, sizeof name);
                EXPECT_STR(name, which == 0 ? "noted_via_a" : which == 1 ? "noted_via_b" : name);
                ot_unwind_note_set(note.walk, 7, 100 + which);
            }
        }
        printf("  %s: %u of 12 stacks taken in turn found with their note\n", said[size], hits);
        EXPECT_EQ_U(hits, small ? 0 : 9);
        /* The same stack with another value in rbp each time: found again (the last walk, then a
         * remembered one after another stack in between). */
        unsigned rbp_hits = 0;
        for (volatile unsigned i = 0; i < 6; i++) {
            unsigned n = rbp_varies(0x5000 + 16 * i, ips, &note);
            ASSERT(n >= 3);
            if (note.hit) {
                rbp_hits++;
                EXPECT_EQ_U(note.value, 300);
            } else {
                name_of(ips[0], name, sizeof name);
                EXPECT_STR(name, "rbp_passes");
                ot_unwind_note_set(note.walk, 7, 300);
            }
            if (i == 3) noted_one(ips, 7, &note); /* another stack in between */
        }
        EXPECT_EQ_U(rbp_hits, small ? 4 : 5);
        ot_unwind_attach(NULL, 0);
        if (ot_t_failed_) break;
    }
}

/* Four stacks in a cycle that share frame 0 (noted_mid's) and the frames above it but one: a loop
 * over a few operations that all allocate through one function (np_loop.py: numpy's allocation).
 * The probe asked before any walk (ot_stack_noted_at) finds each among the six walks remembered
 * for sampled stacks; from the second round on it compares the last walk's successor first and
 * finds the stack there, where the most recently used order alone would compare the three others
 * before it. */
__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_cycle_body(void);
TEST(test_cfi_cycle) { cfi_cycle_body(); }

__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_cycle_body(void)
{
    typedef unsigned (*caller_fn)(uintptr_t *, uint32_t, ot_stack_note_t *);
    static const caller_fn via[4] = {noted_via_a, noted_via_b, noted_via_c, noted_via_d};
    uintptr_t ips[OT_MAX_FRAMES];
    ot_stack_note_t note = {0};
    unsigned first_time = 0;
    probe_first = 1;
    probe_hits = 0;
    ot_unwind_attach(walk_mem[1], OT_UNWIND_CACHE_SAMPLED_BYTES);
    for (volatile unsigned i = 0; i < 16; i++) {
        unsigned k = i % 4;
        memset(ips, 0, sizeof ips);
        unsigned n = via[k](ips, 7, &note);
        ASSERT(n >= 3);
        if (i < 4) { /* the first round is walked */
            EXPECT(!note.hit);
            ot_unwind_note_set(note.walk, 7, 200 + k);
            continue;
        }
        EXPECT(note.hit);
        EXPECT_EQ_U(note.value, 200 + k); /* its own note, never another's */
        if (i >= 8) first_time += ot_unwind_last_asked() == 1;
    }
    printf("  %u of 12 found by the probe, %u of the last 8 the first compared\n", probe_hits, first_time);
    EXPECT_EQ_U(probe_hits, 12);
    EXPECT_EQ_U(first_time, 8);
    ot_unwind_attach(NULL, 0);
    probe_first = 0;
}

/* note.searched, which ot_unwind_noted_others sets where no remembered walk is the stack, makes the
 * walker skip its own comparison with them: a remembered stack is then walked (frames stepped, the
 * same frames) instead of handed back. So a stale claim costs a walk, never a wrong stack. */
__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_searched_body(void);
TEST(test_cfi_searched) { cfi_searched_body(); }

__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_searched_body(void)
{
    typedef unsigned (*caller_fn)(uintptr_t *, uint32_t, ot_stack_note_t *);
    uintptr_t ips[OT_MAX_FRAMES], first[OT_MAX_FRAMES];
    unsigned n0 = 0;
    ot_stack_note_t note = {0};
    ot_unwind_attach(walk_mem[1], OT_UNWIND_CACHE_SAMPLED_BYTES);
    /* From one call site: via_a and via_b in turn, step 4 (via_a) with searched set; then, asking
     * ot_unwind_noted_others alone (probe 2), via_a, and via_c under two tags. */
    for (volatile unsigned step = 0; step < 9; step++) {
        caller_fn f = step < 7 ? (step % 2 ? noted_via_b : noted_via_a) : noted_via_c;
        probe_first = step < 6 ? 0 : 2;
        note.searched = step == 4;
        memset(ips, 0, sizeof ips);
        unsigned n = f(ips, step == 8 ? 8 : 7, &note);
        switch (step) {
        case 0: /* walked, noted */
        case 1:
            ASSERT(n >= 3);
            EXPECT(!note.hit);
            if (step == 0) n0 = keep_frames(first, ips, n);
            ot_unwind_note_set(note.walk, 7, 100 + step);
            break;
        case 2: /* remembered: its note, nothing stepped */
        case 3:
        case 5:
            EXPECT(note.hit && note.value == 100 + step % 2);
            EXPECT_EQ_U(ot_unwind_last_stepped(), 0);
            break;
        case 4: /* walked although remembered: the same frames, some stepped */
            EXPECT(!note.hit);
            EXPECT(same_stack(ips, n, first, n0));
            EXPECT(ot_unwind_last_stepped() > 0);
            ot_unwind_note_set(note.walk, 7, 100);
            break;
        /* ot_unwind_noted_others says "searched" only where it compared every walk that may be the
         * stack: via_c shares frame 0 with the three remembered (via_a twice, via_b), which have
         * notes under 7, none under 8. */
        case 6: /* via_a (the last walk is via_b's): found, so nothing to say */
            EXPECT_EQ_U(note.value, 100);
            EXPECT_EQ_U(n, n0);
            EXPECT_EQ_U(probe_searched, 0);
            break;
        case 7: /* via_c under 7: none is it */
            EXPECT_EQ_U(note.value, 0);
            EXPECT_EQ_U(probe_searched, 1);
            break;
        case 8: /* under 8: none was compared */
            EXPECT_EQ_U(note.value, 0);
            EXPECT_EQ_U(probe_searched, 0);
            break;
        }
    }
    probe_first = 0;
    ot_unwind_attach(NULL, 0);
}

/* A note's early step gets exactly the frames the walk returns, before the walk is filed, and only
 * where frames were walked: not for a note that hits, nor for a remembered stack. */
static struct {
    unsigned calls, n;
    uintptr_t ips[OT_MAX_FRAMES];
} early_seen;
static void early_record(ot_stack_note_t *note, const uintptr_t *ips, unsigned n)
{
    early_seen.calls++;
    early_seen.n = n;
    memcpy(early_seen.ips, ips, n * sizeof *ips);
    note->early_hash = 0x5eed;
}

__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_early_body(void);
TEST(test_cfi_early) { cfi_early_body(); }

__attribute__((optimize("no-omit-frame-pointer"))) static void cfi_early_body(void)
{
    uintptr_t ips[OT_MAX_FRAMES], first[OT_MAX_FRAMES];
    unsigned n0 = 0;
    ot_stack_note_t note = {.early = early_record};
    probe_first = 0; /* every call goes to the walker */
    ot_unwind_attach(walk_mem[1], sizeof walk_mem[1]);
    memset(&early_seen, 0, sizeof early_seen);
    for (volatile unsigned step = 0; step < 6; step++) {
        unsigned before = early_seen.calls;
        note.early_hash = 0;
        memset(ips, 0, sizeof ips);
        leaf_max = step == 5 ? 3 : OT_MAX_FRAMES;
        unsigned n = step == 2   ? noted_two(ips, 7, &note)
                     : step == 5 ? noted_three(ips, 7, &note)
                                 : noted_one(ips, step == 4 ? 8 : 7, &note);
        leaf_max = OT_MAX_FRAMES;
        ASSERT(n >= 3);
        switch (step) {
        case 5: /* a third caller under a 3-frame limit: the join with the last walk fills it */
            EXPECT_EQ_U(n, 3);
            /* fall through */
        case 0: /* a new walk */
        case 2: /* another stack, ended by a join with the first (the early step comes there) */
            EXPECT_EQ_U(early_seen.calls, before + 1);
            EXPECT_EQ_U(early_seen.n, n);
            EXPECT(same_stack(early_seen.ips, early_seen.n, ips, n));
            EXPECT_EQ_U(note.early_hash, 0x5eed);
            EXPECT(!note.hit);
            if (step == 0) n0 = keep_frames(first, ips, n);
            ot_unwind_note_set(note.walk, 7, 40 + step);
            break;
        case 1: /* its note: no frames, no early step */
        case 3: /* noted_one's walk, still remembered with its note */
            EXPECT(note.hit && note.value == 40);
            EXPECT_EQ_U(early_seen.calls, before);
            EXPECT_EQ_U(note.early_hash, 0);
            break;
        case 4: /* the remembered stack under another tag: its frames, nothing walked */
            EXPECT(!note.hit);
            EXPECT_EQ_U(early_seen.calls, before);
            EXPECT(same_stack(ips, n, first, n0));
            break;
        }
        if (ot_t_failed_) {
            printf("  failed at step %u\n", (unsigned)step);
            break;
        }
    }
    ot_unwind_attach(NULL, 0);
}

/* A thread with its own cache, and the same stacks again from threads racing on the shared rule
 * cache. */
static OT_NOINLINE void *cfi_thread(void *arg)
{
    static OT_TLS char mem[OT_UNWIND_CACHE_BYTES] __attribute__((aligned(64)));
    bool ok = true;
    ot_unwind_attach(arg ? mem : NULL, sizeof mem);
    for (unsigned i = 0; i < 200 && ok; i++) ok = recurse(i % 5, 32 + i);
    ot_unwind_attach(NULL, 0);
    return ok ? arg : (void *)0x1;
}

TEST(test_cfi_threads)
{
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) ASSERT(pthread_create(&t[i], NULL, cfi_thread, (void *)(uintptr_t)(i & 1 ? 0x10 : 0)) == 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        EXPECT(r != (void *)0x1);
    }
}

/* ------------------------------------------------------------------ cost */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static OT_NOINLINE unsigned deep(unsigned d, capture_fn fn, unsigned iters, uint64_t *ns)
{
    unsigned n = 0;
    if (d) {
        n = deep(d - 1, fn, iters, ns);
        BARRIER();
        return n;
    }
    uintptr_t ips[20];
    uint64_t t0 = now_ns();
    for (unsigned i = 0; i < iters; i++) n = fn(ips, 20, 0);
    *ns = (now_ns() - t0) / iters;
    return n;
}

/* The stack memo (stacks=all: OT_UNWIND_MEMO_BYTES past the walk buffers): more stacks in turn than
 * the sixteen buffers hold are each found again with their own note, by the probe asked before any
 * walk; a stack that shares frame 0 with a noted one is not taken for it; after a dlclose none is
 * taken. Without the memo's memory, the same cycle finds nothing (the buffers' LRU order loses every
 * stack before it comes round again). The stacks are walked to their end, through libc's start-up
 * frames: return addresses in two modules, so an entry's checks use both its bases for them (frame
 * 0's ip and its far base). */
#define MEMO_STACKS 28
NOTED_CALLER(memo_outer_a, noted_via_a, 8)
NOTED_CALLER(memo_outer_b, noted_via_a, 9)
static char memo_mem[OT_UNWIND_CACHE_BYTES + OT_UNWIND_MEMO_BYTES] __attribute__((aligned(64)));
/* An empty memo attached (no entry of the tests before), asked before any walk as live.c asks it;
 * memo_done detaches it. */
static const walk_t *memo_fresh(void)
{
    probe_first = 1;
    memset(memo_mem, 0, sizeof memo_mem);
    ot_unwind_attach(memo_mem, sizeof memo_mem);
    return ot_walk_cache;
}
static void memo_done(void)
{
    ot_unwind_attach(NULL, 0);
    probe_first = 0;
}
static unsigned memo_round(ot_stack_note_t *note, bool set)
{
    uintptr_t ips[OT_MAX_FRAMES];
    unsigned hits = 0;
    for (volatile unsigned d = 0; d < MEMO_STACKS; d++) {
        memset(ips, 0, sizeof ips);
        unsigned n = noted_deep(d, ips, 7, note);
        EXPECT(n >= 3);
        if (note->hit) {
            hits++;
            EXPECT_EQ_U(note->value, 1000 + d); /* its own note, never another depth's */
        } else if (set) {
            ot_unwind_note_set(note->walk, 7, 1000 + d);
        }
    }
    return hits;
}

TEST(test_cfi_stack_memo)
{
    ot_stack_note_t note = {0};
    uintptr_t ips[OT_MAX_FRAMES];
    probe_first = 1;
    for (volatile int with = 0; with < 2; with++) {
        ot_unwind_attach(memo_mem, with ? sizeof memo_mem : OT_UNWIND_CACHE_BYTES);
        unsigned hits[3] = {0};
        for (volatile int r = 0; r < (with ? 3 : 2); r++) {
            if (r == 2) {
                /* memo_outer_b's stack has memo_outer_a's first two frames (noted_mid's and
                 * noted_via_a's: same ips and sp), the memo's set key: only a's note comes back for
                 * a, and b is walked, also once the buffers forgot both. */
                for (volatile int k = 0; k < 2; k++) {
                    memset(ips, 0, sizeof ips);
                    memo_outer_a(ips, 7, &note); /* one call site: the same stack both times */
                    EXPECT(note.hit == (k == 1));
                    if (k == 1) {
                        EXPECT_EQ_U(note.value, 500);
                        break;
                    }
                    ot_unwind_note_set(note.walk, 7, 500);
                    (void)memo_round(&note, false);
                    memo_outer_b(ips, 7, &note);
                    EXPECT(!note.hit);
                    (void)memo_round(&note, false);
                }
                /* After a dlclose no remembered stack is taken. */
                ot_stack_flush();
            }
            hits[r] = memo_round(&note, r < 2); /* one call site: the same stacks each round */
        }
        printf("  %s: %u of %u stacks in turn found again%s\n", with ? "with the memo" : "sixteen walks only", hits[1],
               MEMO_STACKS, with ? (hits[2] ? ", and after a dlclose (wrong)" : ", none after a dlclose") : "");
        EXPECT_EQ_U(hits[0], 0); /* each walked once */
        EXPECT_EQ_U(hits[1], with ? MEMO_STACKS : 0);
        EXPECT_EQ_U(hits[2], 0);
    }
    ot_unwind_attach(NULL, 0);
    probe_first = 0;
}

/* Frames past 1 in the memo's key (unwind.c, memo_key): more stacks than a set has ways, which
 * share frames 0 and 1 (noted_mid's, noted_via_a's: the same ip and sp) and differ from frame 2 out,
 * are all found again, each with its own note, whole and cut at 3 frames (where the probe steps to
 * frame 2 and no further, as the walk did). With frame 1 alone in the key they share one set and
 * crowd each other out. Cut at 2 frames they are one stack: the probe stops at frame 1, and all of
 * them find that stack's one note. Between two calls, other stacks push the walk buffers' copies
 * out, so that only the memo can answer. */
#define F2_STACKS 12
TWELVE_CALLERS((noipa), f2, noted_via_a, 10)
/* The same with frame pointers in every frame but noted_leaf's: the key's steps take each CFA from
 * rbp, read from the slots where the frames saved it (the checks an entry keeps for them). */
#define NOTED_CALLER_FP(name, callee, k) \
    NOTED_CALLER_ATTR((noipa, optimize("no-omit-frame-pointer")), name, callee, k)
NOTED_CALLER_FP(fp_mid, noted_leaf, 3)
NOTED_CALLER_FP(fp_via, fp_mid, 4)
TWELVE_CALLERS((noipa, optimize("no-omit-frame-pointer")), fp2, fp_via, 10)

/* Twelve stacks from callers, which differ from frame `differ` out, twice round: whole for a limit
 * past that frame, and one stack cut at a limit up to it. */
static void memo_frame2_round(const noted_fn *callers, unsigned differ, const char *what)
{
    static const unsigned limits[] = {OT_MAX_FRAMES, 3, 2};
    ot_stack_note_t note = {0};
    uintptr_t ips[OT_MAX_FRAMES];
    for (volatile unsigned l = 0; l < 3; l++) {
        bool whole = limits[l] > differ; /* the stacks differ within the limit */
        (void)memo_fresh();
        leaf_max = probe_max = limits[l];
        unsigned walked[2] = {0}, hits[2] = {0};
        for (volatile unsigned r = 0; r < 2; r++) {
            for (volatile unsigned i = 0; i < F2_STACKS; i++) {
                memset(ips, 0, sizeof ips);
                note.hit = 0;
                unsigned n = callers[i](ips, 7, &note);
                if (limits[l] < OT_MAX_FRAMES) EXPECT_EQ_U(n, limits[l]);
                else EXPECT(n >= 5); /* noted_mid, noted_via_a or fp_via, the caller, this and its callers */
                if (note.hit) {
                    hits[r]++;
                    EXPECT_EQ_U(note.value, 600 + (whole ? i : 0)); /* its own note, never another's */
                } else {
                    walked[r]++;
                    ot_unwind_note_set(note.walk, 7, 600 + (whole ? i : 0));
                }
                for (volatile unsigned d = 0; d < 20; d++) (void)noted_deep(d, ips, 7, &note); /* not noted */
            }
        }
        printf("  %s, limit %u frames: %u walked, then %u and %u of %u found again\n", what, limits[l], walked[0],
               hits[0], hits[1], F2_STACKS);
        EXPECT_EQ_U(walked[0], whole ? F2_STACKS : 1);
        EXPECT_EQ_U(hits[0], whole ? 0 : F2_STACKS - 1);
        EXPECT_EQ_U(hits[1], F2_STACKS);
        EXPECT_EQ_U(walked[1], 0);
    }
    leaf_max = probe_max = OT_MAX_FRAMES;
    memo_done();
}

TEST(test_cfi_stack_memo_frame2)
{
    memo_frame2_round(f2_callers, 2, "no frame pointers");
    memo_frame2_round(fp2_callers, 2, "frame pointers");
}

/* A deep stack built with frame pointers: each frame's CFA comes from rbp, so an entry keeps a check
 * for each frame's saved rbp as well as for its return address, about two a frame (unwind.c: an
 * entry holds 73 checks; at 59 such stacks were not kept and were walked every time). Noted once,
 * it is found again by the memo after other stacks pushed it out of the walk buffers. */
__attribute__((noipa, optimize("no-omit-frame-pointer"))) static unsigned fp_deep(unsigned d, uintptr_t *ips,
                                                                                  uint32_t tag, ot_stack_note_t *note)
{
    unsigned n = d ? fp_deep(d - 1, ips, tag, note) : fp_via(ips, tag, note);
    sink += d;
    return n;
}

TEST(test_cfi_memo_deep_fp)
{
    ot_stack_note_t note = {0};
    uintptr_t ips[OT_MAX_FRAMES];
    (void)memo_fresh();
    bool hit[3];
    unsigned n = 0;
    for (volatile unsigned r = 0; r < 3; r++) {
        memset(ips, 0, sizeof ips);
        note.hit = 0;
        n = fp_deep(28, ips, 7, &note);
        hit[r] = note.hit;
        if (note.hit) EXPECT_EQ_U(note.value, 900);
        else ot_unwind_note_set(note.walk, 7, 900);
        for (volatile unsigned d = 0; d < 20; d++) (void)noted_deep(d, ips, 7, &note); /* not noted */
    }
    printf("  %u frames with frame pointers: %s, then %s and %s\n", n, hit[0] ? "found" : "walked",
           hit[1] ? "found again" : "walked again", hit[2] ? "found again" : "walked again");
    EXPECT(n >= 31); /* fp_mid, fp_via, 29 of fp_deep, this test and its callers, within OT_MAX_FRAMES */
    EXPECT(!hit[0]);
    EXPECT(hit[1]);
    EXPECT(hit[2]);
    memo_done();
}

/* More stacks than a set has ways with one key (unwind.c, memo_keep and memo_find_noted's buddy
 * set): twelve stacks that share frames 0 to 4 (noted_mid's, noted_via_a's and ks_2..ks_4's: the
 * same ips and sp) and differ from frame 5 out fall in one set with one fingerprint. Kept there
 * alone, in a cycle, each is crowded out by the four kept after it before it comes round again:
 * none is ever found again, and each walk crowds out the next stack due (recursive_stacks 60000,
 * stacks=all: 25,008 of 27,175 keeps evicted an entry). A full set places the rest in its buddy,
 * where the probe asks next: all twelve are found again, each with its own note. Between two
 * stacks, other stacks push the walk buffers' copies out, so that only the memo can answer. Cut at
 * 3 or 2 frames they are one stack. */
NOTED_CALLER(ks_2, noted_via_a, 30)
NOTED_CALLER(ks_3, ks_2, 31)
NOTED_CALLER(ks_4, ks_3, 32)
TWELVE_CALLERS((noipa), ks5, ks_4, 40)

TEST(test_cfi_memo_full_set)
{
    memo_frame2_round(ks5_callers, 5, "one key");
}

/* The memo's successor guess (unwind.c, memo_succ). Stacks that the memo answers one after another,
 * in an order that repeats, are answered by the guess, each with its own note. Where the order
 * changes, the guessed entry is not taken and the probe answers: after deep(i) comes f2_j where the
 * guess is f2_i, which has f2_j's frames 0 and 1 (noted_mid's, noted_via_a's: the same ips and sp)
 * and differs from frame 2 out, so only the entry's checks of the key frames tell them apart. The
 * guess that came before (succ2) is asked second: back in the first order, it answers again. Each
 * round is 24 stacks, more than the walk buffers hold, and 16 walks of unnoted stacks after the
 * first round leave none of them there, so the memo answers every one. */
static unsigned memo_succ_round(unsigned r, ot_stack_note_t *note)
{
    uintptr_t ips[OT_MAX_FRAMES];
    unsigned hits = 0;
    for (volatile unsigned i = 0; i < F2_STACKS; i++) {
        unsigned j = r == 2 || r == 3 ? (i * 5 + 1) % F2_STACKS : i; /* never i */
        for (volatile unsigned half = 0; half < 2; half++) {
            uint32_t own = half ? 600 + j : 1000 + i;
            memset(ips, 0, sizeof ips);
            note->hit = 0;
            unsigned n = half ? f2_callers[j](ips, 7, note) : noted_deep(i, ips, 7, note);
            EXPECT(n >= 3);
            if (note->hit) {
                hits++;
                EXPECT_EQ_U(note->value, own); /* its own note, never the guessed one's */
            } else {
                ot_unwind_note_set(note->walk, 7, own);
            }
        }
    }
    return hits;
}

TEST(test_cfi_memo_successor)
{
    ot_stack_note_t note = {0};
    uintptr_t ips[OT_MAX_FRAMES];
    const walk_t *w = memo_fresh();
    unsigned hits[5], guessed[5];
    for (volatile unsigned r = 0; r < 5; r++) {
        uint32_t g0 = w->guessed;
        hits[r] = memo_succ_round(r, &note);
        guessed[r] = w->guessed - g0;
        if (r == 0)
            for (volatile unsigned d = 40; d < 56; d++) (void)noted_deep(d, ips, 7, &note); /* not noted */
    }
    printf("  rounds of %u stacks: found again %u, %u, %u, %u, %u; by the guess %u, %u, %u, %u, %u\n",
           2 * F2_STACKS, hits[0], hits[1], hits[2], hits[3], hits[4], guessed[0], guessed[1], guessed[2],
           guessed[3], guessed[4]);
    EXPECT_EQ_U(hits[0], 0); /* each walked once */
    for (unsigned r = 1; r < 5; r++) EXPECT_EQ_U(hits[r], 2 * F2_STACKS);
    EXPECT_EQ_U(guessed[1], 0);                /* the probe answers, and each answer links the one before */
    EXPECT_EQ_U(guessed[2], 0);                /* another order: every guess wrong, none taken */
    EXPECT_EQ_U(guessed[3], 2 * F2_STACKS - 1); /* that order again: all but the first */
    EXPECT(guessed[4] >= 2 * F2_STACKS - 1);  /* the first order, through the guesses before (succ2) */
    memo_done();
}

/* A stack the memo answers twice in a row is walked once more and becomes the last walk, which then
 * answers it inline (unwind.c, ot_unwind_noted_others): a thread that took over another's walk
 * cache, whose buffers hold none of its stacks, would otherwise ask the memo for every allocation
 * from its one stack. The walk's note is the memo's; every answer is that note. */
TEST(test_cfi_memo_answer_becomes_last)
{
    ot_stack_note_t note = {0};
    uintptr_t ips[OT_MAX_FRAMES];
    (void)memo_fresh();
    /* walked; the memo; the memo again: walked; then the last walk */
    static const bool want_hit[7] = {false, true, false, true, true, true, true};
    bool hit[7];
    for (volatile unsigned i = 0; i < 7; i++) {
        note.hit = 0;
        (void)noted_one(ips, 7, &note); /* one call site: the same stack every time */
        hit[i] = note.hit;
        if (note.hit) EXPECT_EQ_U(note.value, 700);
        else ot_unwind_note_set(note.walk, 7, 700); /* as the allocation path notes its walk */
        if (i == 0)
            for (volatile unsigned d = 0; d < 20; d++) (void)noted_deep(d, ips, 7, &note); /* the buffers forget it */
    }
    printf("  answered:");
    for (unsigned i = 0; i < 7; i++) printf(" %s", hit[i] ? "noted" : "walked");
    printf("\n");
    for (unsigned i = 0; i < 7; i++) EXPECT(hit[i] == want_hit[i]);
    memo_done();
}

TEST(test_cost_20_frames)
{
    uint64_t fast = 0, exact = 0;
    unsigned nf = deep(24, ot_stack_capture, 20000, &fast);
    unsigned ne = deep(24, ot_stack_capture_exact, 2000, &exact);
    EXPECT_EQ_U(nf, 20);
    EXPECT_EQ_U(ne, 20);
    printf("  ns per 20-frame capture: ot_stack_capture %llu, ot_stack_capture_exact %llu\n",
           (unsigned long long)fast, (unsigned long long)exact);
}

TEST_MAIN(test_init, test_chain_exact, test_chain_fast, test_fast_equals_exact, test_skip,
          test_depth_limit, test_other_thread, test_signal_handler, test_in_signal_handler, test_no_malloc,
          test_cfi_frame_kinds, test_cfi_rule_cache_ways, test_cfi_deeper_than_cache, test_cfi_cache_parts,
          test_cfi_notes, test_cfi_memo, test_cfi_rbp_passed_on, test_cfi_join_past_cut, test_cfi_cycle, test_cfi_searched, test_cfi_early, test_cfi_threads,
          test_cfi_stack_memo, test_cfi_stack_memo_frame2, test_cfi_memo_full_set, test_cfi_memo_deep_fp, test_cfi_memo_successor, test_cfi_memo_answer_becomes_last,
          test_cost_20_frames)
