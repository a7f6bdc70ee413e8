/* Stack capture for allocation sites and failures: return addresses of the caller's frames.
 * Runs inside malloc hooks and on the failure path: never calls malloc, stdio or the loader itself
 * (but see unwind.c on dl_iterate_phdr).
 *
 * Every path reads DWARF CFI: the programs we attach to (Debian packages, CUDA libraries) are
 * built without frame pointers, so a frame-pointer walk would silently produce wrong stacks there.
 *  - ot_stack_capture: the CFI walker of unwind.c, started from the caller's exact registers (a
 *    few instructions of assembly below), with a shared rule cache and a per-thread cache of the
 *    last stack; ~5 ns per frame, ~1 ns for frames shared with the previous stack. Where it does
 *    not model a frame (signal frames, CFA expressions, code without unwind info) it hands the
 *    whole capture to unw_backtrace, libunwind's x86-64 "fast trace", as before. Not for signal
 *    handlers (a handler could interrupt this thread's own rule-cache or module-table update).
 *  - ot_stack_capture_exact: unw_getcontext + unw_init_local + unw_step, the documented path,
 *    usable from a signal handler (it also walks through the signal frame). ~10-20 us for 20
 *    frames: every step takes libunwind's global cache lock with all signals blocked (two
 *    sigprocmask calls), which is what makes it safe against a handler on the same thread.
 *
 * Loader lock (PITFALLS: libunwind#16): an unwind that misses libunwind's caches calls
 * dl_iterate_phdr, which takes the loader's lock. ot_stack_init warms libunwind up outside any
 * hook (first use initialises it; not unw_backtrace's per-thread trace cache, see
 * stack_warm_leaf), selects
 * UNW_CACHE_GLOBAL explicitly (Debian's libunwind is built without the per-thread DWARF cache and
 * downgrades UNW_CACHE_PER_THREAD to it anyway) and enlarges the register-state cache so that
 * steady-state unwinding rarely reaches dl_iterate_phdr.
 * dlclose: all caches are keyed by address. ot_stack_flush (called by the dlclose hook) flushes
 * libunwind's global cache and the CFI walker's. libunwind's fast trace keeps a per-thread hash
 * that libunwind 1.6 cannot flush: after a library is mapped again at the same address it misreads
 * its frames (tests/e2e/unwind_verify.sh catches it doing so); the CFI walker does not, and is now
 * the path nearly every capture takes.
 * libunwind's TLS (two words) is static TLS because libunwind is loaded with us at start-up,
 * so touching it in a new thread does not allocate. */
#include <errno.h>

#include "internal.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

/* How many frames at most lie between libunwind's first recorded frame and the frame wanted: our
 * caller, or for ot_stack_capture_at a hook's caller (ot_live_record_from, the hook
 * in between; and the checking build's verify). */
#define OT_STACK_SEEK 12

/* Set while this thread is inside libunwind: a crash there (its global lock held) must not unwind
 * again from the signal handler (ot_stack_capture_signal). */
static OT_TLS int in_libunwind;

/* Walks the stack with unw_step. `ret` is the return address into the frame the caller wants as
 * frame 0; everything inside libunwind and this file is dropped by looking for it, so a change in
 * inlining cannot shift the stack. `fallback` is the positional index of that frame if `ret` is
 * not among the first OT_STACK_SEEK frames (it always is on x86-64; belt and braces). */
static OT_NOINLINE unsigned stack_walk_locked(uintptr_t *ips, unsigned max, unsigned skip, uintptr_t ret,
                                              unsigned fallback, unw_context_t *ucp);
static OT_NOINLINE unsigned stack_walk(uintptr_t *ips, unsigned max, unsigned skip, uintptr_t ret,
                                       unsigned fallback)
{
    unw_context_t uc;
    if (max == 0 || unw_getcontext(&uc) != 0) return 0;
    in_libunwind++;
    unsigned n = stack_walk_locked(ips, max, skip, ret, fallback, &uc);
    in_libunwind--;
    return n;
}

static OT_NOINLINE unsigned stack_walk_locked(uintptr_t *ips, unsigned max, unsigned skip, uintptr_t ret,
                                              unsigned fallback, unw_context_t *ucp)
{
    unw_cursor_t cur;
    unw_word_t ip;
    unsigned n = 0, seen = 0;
    bool seeking = true;

    if (unw_init_local(&cur, ucp) != 0) return 0;
    for (;;) {
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0) break;
        if (seeking) {
            if ((uintptr_t)ip == ret) {
                seeking = false;
            } else if (++seen >= OT_STACK_SEEK) {
                /* Not found: restart and count frames instead (or give up: fallback ~0u). */
                if (fallback == ~0u || unw_init_local(&cur, ucp) != 0) return 0;
                for (unsigned i = 0; i < fallback; i++)
                    if (unw_step(&cur) <= 0) return 0;
                seeking = false;
                continue;
            }
        }
        if (!seeking) {
            if (skip) skip--;
            else {
                ips[n++] = (uintptr_t)ip;
                if (n == max) break;
            }
        }
        if (unw_step(&cur) <= 0) break;
    }
    return n;
}

OT_NOINLINE unsigned ot_stack_capture_exact(uintptr_t *ips, unsigned max, unsigned skip)
{
    /* frames: 0 stack_walk, 1 this function, 2 our caller */
    unsigned n = stack_walk(ips, max, skip, (uintptr_t)__builtin_return_address(0), 2);
    __asm__ volatile("" ::: "memory"); /* keep this frame: no tail call into stack_walk */
    return n;
}

OT_NOINLINE unsigned ot_stack_capture_exact_at(uintptr_t *ips, unsigned max, const ot_origin_t *origin)
{
    unsigned n = stack_walk(ips, max, 0, origin->ip, ~0u);
    __asm__ volatile("" ::: "memory");
    return n;
}

/* libunwind's fast trace for the whole stack: the fallback of the CFI walker in unwind.c. `ret`
 * is the return address into the frame wanted as frame 0. */
static OT_NOINLINE unsigned stack_backtrace(uintptr_t *ips, unsigned max, unsigned skip, uintptr_t ret)
{
    /* Room for libunwind's own leading frames and `skip`; larger requests are clipped. */
    void *tmp[2 * OT_MAX_FRAMES + OT_STACK_SEEK + 2];
    const unsigned cap = sizeof tmp / sizeof tmp[0];
    unsigned want, got, first = 0, n = 0;

    want = max + skip + OT_STACK_SEEK;
    if (want > cap || want < max) want = cap;
    in_libunwind++;
    int r = unw_backtrace(tmp, (int)want);
    in_libunwind--;
    got = r > 0 ? (unsigned)r : 0;
    while (first < got && first < OT_STACK_SEEK && (uintptr_t)tmp[first] != ret) first++;
    if (first == got || first == OT_STACK_SEEK) {
        /* Our caller is not where it should be: let the exact walk decide.
         * frames: 0 stack_walk, 1 this function, 2 ot_stack_capture_from, 3 the caller */
        n = stack_walk(ips, max, skip, ret, 3);
    } else {
        for (unsigned i = first + skip; i < got && n < max; i++) ips[n++] = (uintptr_t)tmp[i];
    }
    __asm__ volatile("" ::: "memory");
    return n;
}

/* ot_stack_capture: a few instructions of assembly hand the caller's exact register state (its
 * rbp, its stack pointer after our return, the return address) to the C walker, which then
 * starts at the caller's frame without having to unwind its own. */
unsigned ot_stack_capture_from(uintptr_t *ips, unsigned max, unsigned skip, uintptr_t bp, uintptr_t sp,
                               uintptr_t ip);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl ot_stack_capture\n"
        ".hidden ot_stack_capture\n"
        ".type ot_stack_capture,@function\n"
        "ot_stack_capture:\n"
        ".cfi_startproc\n"
        "    mov %rbp, %rcx\n"         /* 4th argument: the caller's rbp */
        "    lea 8(%rsp), %r8\n"       /* 5th: its stack pointer once we return */
        "    mov (%rsp), %r9\n"        /* 6th: the return address */
        "    jmp ot_stack_capture_from\n"
        ".cfi_endproc\n"
        ".size ot_stack_capture, .-ot_stack_capture\n");

#ifdef OT_UNWIND_VERIFY
/* A checking build (build/verify/liboomtrace.so, tests/e2e/verify.mk): every stack the CFI walker
 * returns is compared frame by frame with libunwind's; disagreements go to stderr (the first two
 * symbolized), and a count at exit. */
static uint64_t v_checked, v_bad, v_fasttrace, v_noted;
static OT_NOINLINE void verify(const uintptr_t *ips, unsigned n, unsigned max, unsigned skip, uintptr_t ip)
{
    uintptr_t ref[OT_MAX_FRAMES];
    if (max > OT_MAX_FRAMES) max = OT_MAX_FRAMES;
    unsigned m = stack_backtrace(ref, max, skip, ip);
    unsigned k = 0;
    while (k < n && k < m && ips[k] == ref[k]) k++;
    __atomic_fetch_add(&v_checked, 1, __ATOMIC_RELAXED);
    if (k == n && k == m) return;
    /* libunwind's fast trace keeps a per-thread cache that dlclose cannot flush (see the top of the
     * file): after code is mapped again at the same address it can be the one that is wrong. Its
     * exact walk, whose cache is flushed, is the referee. */
    m = stack_walk(ref, max, skip, ip, 3);
    k = 0;
    while (k < n && k < m && ips[k] == ref[k]) k++;
    if (k == n && k == m) {
        __atomic_fetch_add(&v_fasttrace, 1, __ATOMIC_RELAXED);
        return;
    }
    if (__atomic_fetch_add(&v_bad, 1, __ATOMIC_RELAXED) < 20) {
        char mem[256];
        ot_buf_t b;
        ot_buf_init(&b, mem, sizeof mem, 2);
        ot_buf_printf(&b, "oomtrace-verify: frames differ from #%u: cfi %u frames (0x%lx), libunwind %u (0x%lx)\n", k, n,
                      (unsigned long)(k < n ? ips[k] : 0), m, (unsigned long)(k < m ? ref[k] : 0));
        if (v_bad < 2) { /* the first two in full */
            static ot_frame_t fr;
            ot_symbolize_begin();
            for (unsigned w = 0; w < 2; w++) {
                const uintptr_t *x = w ? ref : ips;
                for (unsigned i = 0; i < (w ? m : n); i++) {
                    ot_symbolize(x[i] - 1, &fr);
                    ot_buf_printf(&b, "  %s #%u 0x%lx %s (%s)\n", w ? "libunwind" : "cfi", i, (unsigned long)x[i],
                                  fr.function, fr.module);
                }
            }
        }
        ot_buf_flush(&b);
    }
    __asm__ volatile("" ::: "memory");
}

/* A note that hit: the walker wrote no frames and handed back a value instead. The only user of
 * notes (live.c) notes call-site ids, so the site's stack must be the one libunwind finds here. */
static OT_NOINLINE void verify_noted(uint32_t site, unsigned n, unsigned max, unsigned skip, uintptr_t ip)
{
    uintptr_t ref[OT_MAX_FRAMES];
    ot_site_info_t si = {0};
    if (max > OT_MAX_FRAMES) max = OT_MAX_FRAMES;
    unsigned m = stack_walk(ref, max, skip, ip, 3);
    bool ok = ot_sites_get(site, &si) && si.depth == m && n == m;
    for (unsigned k = 0; ok && k < m; k++) ok = si.ips[k] == ref[k];
    __atomic_fetch_add(&v_checked, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&v_noted, 1, __ATOMIC_RELAXED);
    if (ok) return;
    if (__atomic_fetch_add(&v_bad, 1, __ATOMIC_RELAXED) < 20) {
        char mem[256];
        ot_buf_t b;
        ot_buf_init(&b, mem, sizeof mem, 2);
        ot_buf_printf(&b, "oomtrace-verify: frames differ: noted site %u (%u frames) for a stack of %u frames (depth %u)\n",
                      site, si.depth, m, n);
        ot_buf_flush(&b);
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((destructor)) static void verify_summary(void)
{
    uint64_t builds, falls;
    char mem[256];
    ot_buf_t b;
    ot_unwind_stats(&builds, &falls);
    ot_buf_init(&b, mem, sizeof mem, 2);
    ot_buf_printf(&b, "oomtrace-verify: %lu stacks compared, %lu differ; %lu libunwind fallbacks, %lu rules built; "
                  "%lu where only libunwind's exact walk agreed; %lu noted sites\n", (unsigned long)v_checked,
                  (unsigned long)v_bad, (unsigned long)falls, (unsigned long)builds, (unsigned long)v_fasttrace,
                  (unsigned long)v_noted);
    ot_buf_flush(&b);
}
#endif

/* The CFI walker from frame (ip, sp, bp), checked against libunwind in the checking build;
 * libunwind's fast trace where the walker declines. Inlined into both entries below, so the frames
 * stack_backtrace steps over stay the same. */
static inline __attribute__((always_inline)) unsigned capture(uintptr_t *ips, unsigned max, unsigned skip,
                                                              uintptr_t ip, uintptr_t sp, uintptr_t bp,
                                                              ot_stack_note_t *note)
{
    if (max == 0) return 0;
    int n = ot_unwind_from(ips, max, skip, ip, sp, bp, note);
#ifdef OT_UNWIND_VERIFY
    if (n >= 0 && note && note->hit) verify_noted(note->value, (unsigned)n, max, skip, ip);
    else if (n >= 0) verify(ips, (unsigned)n, max, skip, ip);
#endif
    if (OT_LIKELY(n >= 0)) return (unsigned)n;
    return stack_backtrace(ips, max, skip, ip);
}

OT_NOINLINE unsigned ot_stack_capture_from(uintptr_t *ips, unsigned max, unsigned skip, uintptr_t bp,
                                           uintptr_t sp, uintptr_t ip)
{
    unsigned r = capture(ips, max, skip, ip, sp, bp, NULL);
    __asm__ volatile("" ::: "memory"); /* keep this frame: stack_backtrace counts on it */
    return r;
}

OT_NOINLINE unsigned ot_stack_capture_at(uintptr_t *ips, unsigned max, const ot_origin_t *origin,
                                         ot_stack_note_t *note)
{
    note->hit = 0;
    note->walk = 0;
    unsigned r = capture(ips, max, 0, origin->ip, origin->sp, origin->bp, note);
    __asm__ volatile("" ::: "memory");
    return r;
}

#ifdef OT_UNWIND_VERIFY
uint32_t ot_stack_noted_at(unsigned max, const ot_origin_t *origin, uint32_t tag, unsigned *depth)
{
    uint32_t site = ot_unwind_noted(origin->ip, origin->sp, origin->bp, max, tag, depth);
    if (site) {
        /* The record path asks this outside its recursion guard and without keeping errno:
         * libunwind may allocate and set it. */
        int e = errno;
        ot_in_hook++;
        verify_noted(site, *depth, max, 0, origin->ip);
        ot_in_hook--;
        errno = e;
    }
    return site;
}
#endif

/* Both walks take only the warm-up's own frames (WARM_DEPTH + 1 of them). Past ot_init lie the
 * loader's start-up frames: the CFI walker does not model them and hands the capture to
 * unw_backtrace, whose first call on a thread maps and fills a 16,384-frame trace cache (78 of the
 * 260 page faults of `/bin/true` under oomtrace, and 0.21 of the 0.66 ms oomtrace added to it),
 * and the exact walk steps through them with two to four sigprocmask calls a step (45 system
 * calls, 0.05 ms). A few steps initialise libunwind's unw_step path (tdep_init, its memory
 * validation, the register-state cache) as well as all of them; the frames of the program's own
 * allocations were never among these anyway. A thread that needs unw_backtrace creates its cache
 * the first time it does, inside a hook, as every thread but this one always has. */
#define WARM_DEPTH 3
static OT_NOINLINE unsigned stack_warm_leaf(unsigned depth)
{
    uintptr_t ips[OT_MAX_FRAMES];
    unsigned n;
    if (depth) n = stack_warm_leaf(depth - 1);
    else n = ot_stack_capture(ips, WARM_DEPTH + 1, 0) + ot_stack_capture_exact(ips, WARM_DEPTH + 1, 0);
    __asm__ volatile("" ::: "memory");
    return n;
}

void ot_stack_init(void)
{
    static volatile int done;
    if (done) return;
    /* Default is already GLOBAL; say so explicitly (see the top of the file for why). */
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_GLOBAL);
    /* 1024 register-state entries (mmap'ed by libunwind) instead of 128: fewer dl_iterate_phdr. */
    unw_set_cache_size(unw_local_addr_space, 1024, 0);
    /* First unwinds initialise libunwind (tdep_init, page size ...) and the CFI walker here,
     * outside any hook. */
    ot_unwind_init();
    (void)stack_warm_leaf(WARM_DEPTH);
    done = 1;
}

unsigned ot_stack_capture_signal(uintptr_t *ips, unsigned max, void *ucontext)
{
    unw_cursor_t cur;
    unw_word_t ip;
    unsigned n = 0;
    if (max == 0 || in_libunwind) return 0;
    in_libunwind++;
    /* On x86-64 unw_context_t is the ucontext_t itself: the signal frame's registers. */
    if (unw_init_local2(&cur, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME) == 0) {
        while (n < max && unw_get_reg(&cur, UNW_REG_IP, &ip) == 0 && ip != 0) {
            ips[n] = (uintptr_t)ip + (n == 0); /* frame 0: the pc itself, not a return address */
            n++;
            if (unw_step(&cur) <= 0) break;
        }
    }
    in_libunwind--;
    return n;
}

bool ot_stack_in_signal_handler(void)
{
    unw_context_t uc;
    unw_cursor_t cur;
    bool in = false;
    if (in_libunwind || unw_getcontext(&uc) != 0) return false;
    in_libunwind++;
    if (unw_init_local(&cur, &uc) == 0)
        for (unsigned i = 0; i < 256 && !in; i++) {
            in = unw_is_signal_frame(&cur) > 0;
            if (unw_step(&cur) <= 0) break;
        }
    in_libunwind--;
    return in;
}

void ot_stack_flush(void)
{
    /* After dlclose: libunwind's global cache is keyed by address, and new code may be mapped
     * where the closed library was. */
    in_libunwind++;
    unw_flush_cache(unw_local_addr_space, 0, 0);
    in_libunwind--;
    ot_unwind_flush();
}
