/* Stack capture for allocation sites and failures: return addresses of the caller's frames.
 * Runs inside malloc hooks and on the failure path: never calls malloc, stdio or the loader itself.
 *
 * Both paths use libunwind (DWARF CFI): the programs we attach to (Debian packages, CUDA
 * libraries) are built without frame pointers, so a frame-pointer walk would silently produce
 * wrong stacks there.
 *  - ot_stack_capture: unw_backtrace, libunwind's x86-64 "fast trace". It classifies each return
 *    address once into a per-thread hash (mmap'ed) and then walks with a few loads per frame; a
 *    frame it cannot classify makes it fall back to unw_step by itself. ~200 ns for 20 frames.
 *    Not for signal handlers: a handler interrupting an update of this thread's hash would read
 *    it half-written.
 *  - ot_stack_capture_exact: unw_getcontext + unw_init_local + unw_step, the documented path,
 *    usable from a signal handler (it also walks through the signal frame). ~10-20 us for 20
 *    frames: every step takes libunwind's global cache lock with all signals blocked (two
 *    sigprocmask calls), which is what makes it safe against a handler on the same thread.
 *
 * Loader lock (PITFALLS: libunwind#16): an unwind that misses libunwind's caches calls
 * dl_iterate_phdr, which takes the loader's lock. ot_stack_init warms libunwind up outside any
 * hook (first use initialises it, creates the trace-cache key, maps its memory pools), selects
 * UNW_CACHE_GLOBAL explicitly (Debian's libunwind is built without the per-thread DWARF cache and
 * downgrades UNW_CACHE_PER_THREAD to it anyway) and enlarges the register-state cache so that
 * steady-state unwinding rarely reaches dl_iterate_phdr.
 * dlclose: both caches are keyed by address. unw_flush_cache(unw_local_addr_space, 0, 0) must be
 * called by whoever sees a dlclose, for the exact path; the fast path's per-thread hash has no
 * flush in libunwind 1.6 and could misread the frames of code later mapped at the same address.
 * libunwind's TLS (two words) is static TLS because libunwind is loaded with us at start-up,
 * so touching it in a new thread does not allocate. */
#include "internal.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

/* How many frames at most lie between libunwind's first recorded frame and our caller. */
#define OT_STACK_SEEK 6

/* Walks the stack with unw_step. `ret` is the return address into the frame the caller wants as
 * frame 0; everything inside libunwind and this file is dropped by looking for it, so a change in
 * inlining cannot shift the stack. `fallback` is the positional index of that frame if `ret` is
 * not among the first OT_STACK_SEEK frames (it always is on x86-64; belt and braces). */
static OT_NOINLINE unsigned stack_walk(uintptr_t *ips, unsigned max, unsigned skip, uintptr_t ret,
                                       unsigned fallback)
{
    unw_context_t uc;
    unw_cursor_t cur;
    unw_word_t ip;
    unsigned n = 0, seen = 0;
    bool seeking = true;

    if (max == 0 || unw_getcontext(&uc) != 0 || unw_init_local(&cur, &uc) != 0) return 0;
    for (;;) {
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0) break;
        if (seeking) {
            if ((uintptr_t)ip == ret) {
                seeking = false;
            } else if (++seen >= OT_STACK_SEEK) {
                /* Not found: restart and count frames instead. */
                if (unw_init_local(&cur, &uc) != 0) return 0;
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

OT_NOINLINE unsigned ot_stack_capture(uintptr_t *ips, unsigned max, unsigned skip)
{
    /* Room for libunwind's own leading frames and `skip`; larger requests are clipped. */
    void *tmp[2 * OT_MAX_FRAMES + OT_STACK_SEEK + 2];
    const unsigned cap = sizeof tmp / sizeof tmp[0];
    uintptr_t ret = (uintptr_t)__builtin_return_address(0);
    unsigned want, got, first = 0, n = 0;

    if (max == 0) return 0;
    want = max + skip + OT_STACK_SEEK;
    if (want > cap || want < max) want = cap;
    int r = unw_backtrace(tmp, (int)want);
    got = r > 0 ? (unsigned)r : 0;
    while (first < got && first < OT_STACK_SEEK && (uintptr_t)tmp[first] != ret) first++;
    if (first == got || first == OT_STACK_SEEK) {
        /* Our caller is not where it should be: let the exact walk decide. */
        n = stack_walk(ips, max, skip, ret, 2);
    } else {
        for (unsigned i = first + skip; i < got && n < max; i++) ips[n++] = (uintptr_t)tmp[i];
    }
    __asm__ volatile("" ::: "memory");
    return n;
}

static OT_NOINLINE unsigned stack_warm_leaf(unsigned depth)
{
    uintptr_t ips[OT_MAX_FRAMES];
    unsigned n;
    if (depth) n = stack_warm_leaf(depth - 1);
    else n = ot_stack_capture(ips, OT_MAX_FRAMES, 0) +
             ot_stack_capture_exact(ips, OT_MAX_FRAMES, 0);
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
    /* First unwinds initialise libunwind (tdep_init, trace-cache key, page size ...) here, outside
     * any hook, and fill the caches for the start-up path. */
    (void)stack_warm_leaf(3);
    done = 1;
}

void ot_stack_flush(void)
{
    /* After dlclose: libunwind's global cache is keyed by address, and new code may be mapped
     * where the closed library was. */
    unw_flush_cache(unw_local_addr_space, 0, 0);
}
