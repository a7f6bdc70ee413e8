/* The malloc family: forward to the real function, record successes, report failures before the
 * error is handed back. Return values and errno are exactly the real function's. Pointers we never
 * saw (allocated before start-up, by ld.so, by a foreign allocator) pass through untouched. */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"
#include "live_fast.h"

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*aligned_fn)(size_t, size_t);
typedef size_t (*usable_fn)(void *);

static struct {
    malloc_fn malloc;
    free_fn free;
    calloc_fn calloc;
    realloc_fn realloc;
    reallocarray_fn reallocarray;
    posix_memalign_fn posix_memalign;
    aligned_fn aligned_alloc, memalign;
    malloc_fn valloc, pvalloc;
    usable_fn malloc_usable_size;
} real;

static _Atomic int resolved; /* 0 no, 1 in progress, 2 done */

/* ---- bootstrap pool: answers the allocations dlsym makes while we look up the real functions ---- */
#define POOL_SIZE (64 * 1024)
static _Alignas(64) char pool[POOL_SIZE];
static _Atomic size_t pool_used;

static inline bool in_pool(const void *p)
{
    return (const char *)p >= pool && (const char *)p < pool + POOL_SIZE;
}

static void *pool_alloc(size_t n, size_t align)
{
    if (align < 16) align = 16;
    /* Each block is preceded by its size (for realloc out of the pool). */
    for (;;) {
        size_t used = atomic_load(&pool_used);
        size_t start = (used + sizeof(size_t) + align - 1) & ~(align - 1);
        if (start + n > POOL_SIZE || n > POOL_SIZE) return NULL;
        if (atomic_compare_exchange_weak(&pool_used, &used, start + n)) {
            ot_memcpy(pool + start - sizeof(size_t), &n, sizeof n);
            return pool + start;
        }
    }
}

static size_t pool_block_size(const void *p)
{
    size_t n;
    ot_memcpy(&n, (const char *)p - sizeof n, sizeof n);
    return n;
}

static void resolve_real(void)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&resolved, &expected, 1)) {
        /* Another thread is resolving: the pool serves us until it is done. */
        return;
    }
    real.malloc = (malloc_fn)ot_next("malloc");
    real.free = (free_fn)ot_next("free");
    real.calloc = (calloc_fn)ot_next("calloc");
    real.realloc = (realloc_fn)ot_next("realloc");
    real.reallocarray = (reallocarray_fn)ot_next("reallocarray");
    real.posix_memalign = (posix_memalign_fn)ot_next("posix_memalign");
    real.aligned_alloc = (aligned_fn)ot_next("aligned_alloc");
    real.memalign = (aligned_fn)ot_next("memalign");
    real.valloc = (malloc_fn)ot_next("valloc");
    real.pvalloc = (malloc_fn)ot_next("pvalloc");
    real.malloc_usable_size = (usable_fn)ot_next("malloc_usable_size");
    if (!real.malloc || !real.free || !real.calloc || !real.realloc) {
        static const char msg[] = "oomtrace: fatal: cannot find the real malloc/free/calloc/realloc (RTLD_NEXT)\n";
        ot_write_all(2, msg, sizeof msg - 1);
        _exit(127);
    }
    atomic_store(&resolved, 2);
}

/* True when the real functions are usable; false while they are being looked up (use the pool). */
static inline bool ready(void)
{
    if (OT_LIKELY(atomic_load_explicit(&resolved, memory_order_acquire) == 2)) return true;
    resolve_real();
    return atomic_load_explicit(&resolved, memory_order_acquire) == 2;
}

/* Tracking happens only once start-up is complete and outside our own nested calls. */
static inline bool track(void)
{
    return OT_LIKELY(ot_in_hook == 0) && OT_LIKELY(ot_state.initialized == 2);
}

static ot_failure_t failure_of(const ot_origin_t *origin, const char *api, uint64_t size, uint64_t align, int err)
{
    ot_failure_t f = {0};
    f.api = api;
    f.size = size;
    f.alignment = align;
    f.error_code = err;
    f.error_name = ot_errno_name(err);
    f.device_index = -1;
    f.origin = origin;
    return f;
}

static OT_NOINLINE void fail_at(const ot_origin_t *origin, const char *api, uint64_t size, uint64_t align, int err)
{
    ot_failure_t f = failure_of(origin, api, size, align, err);
    ot_report_failure(&f);
}
/* In the hook itself (or an always_inline helper of it): the failing stack starts at its caller. */
#define fail(...) OT_CALL_WITH_ORIGIN(fail_at, __VA_ARGS__)

/* calloc and reallocarray: the report shows the call as the program made it (nmemb, size), and the
 * total (UINT64_MAX where nmemb * size overflows). */
static OT_NOINLINE void fail_array_at(const ot_origin_t *origin, const char *api, uint64_t nmemb, uint64_t size,
                                      int err)
{
    ot_failure_t f = failure_of(origin, api, size && nmemb > SIZE_MAX / size ? UINT64_MAX : nmemb * size, 0, err);
    f.count = nmemb;
    f.elem_size = size;
    ot_report_failure(&f);
}
#define fail_array(...) OT_CALL_WITH_ORIGIN(fail_array_at, __VA_ARGS__)

/* ot_live_record keeps errno and holds the recursion guard itself on its slow paths (stack
 * capture, table growth): the fast path touches neither. */
static inline __attribute__((always_inline)) void record(void *p, size_t n)
{
    /* record() is always_inline: the origin is the hook's own frame. Each mode tries only its own
     * fast path. */
    if (OT_LIKELY(ot_opt.stacks == OT_STACKS_SAMPLED) && OT_LIKELY(ot_live_record_host_fast((uintptr_t)p, n)))
        return;
    if (ot_opt.stacks == OT_STACKS_ALL &&
        OT_LIKELY(ot_live_record_all_fast(__builtin_frame_address(0), (uintptr_t)p, n)))
        return;
    OT_CALL_WITH_ORIGIN(ot_live_record_host_from, (uintptr_t)p, n);
}

OT_EXPORT void *malloc(size_t n)
{
    if (OT_UNLIKELY(!ready())) return pool_alloc(n, 16);
    if (!track()) return real.malloc(n);
    void *p = real.malloc(n);
    if (OT_LIKELY(p != NULL)) record(p, n);
    else fail("malloc", n, 0, errno);
    return p;
}

OT_EXPORT void free(void *p)
{
    if (OT_UNLIKELY(!p)) return;
    /* Forget before the real free: afterwards another thread may be handed the same address.
     * Done even inside our own nested calls (e.g. a CUDA runtime freeing, during cudaMalloc, a
     * block it allocated earlier): forgetting allocates nothing, and a miss is harmless. A block
     * found in this thread's nursery came from the real malloc (pool blocks are never recorded),
     * so the real functions are known. */
    if (OT_LIKELY(ot_state.initialized == 2) && OT_LIKELY(ot_live_forget_host_fast((uintptr_t)p))) {
        real.free(p);
        return;
    }
    if (OT_UNLIKELY(in_pool(p))) return;
    if (OT_UNLIKELY(!ready())) return; /* cannot happen: only pool pointers exist before */
    if (OT_LIKELY(ot_state.initialized == 2)) ot_live_forget_host((uintptr_t)p); /* keeps errno */
    real.free(p);
}

OT_EXPORT void *calloc(size_t nmemb, size_t size)
{
    if (OT_UNLIKELY(!ready())) {
        if (size && nmemb > SIZE_MAX / size) return NULL;
        return pool_alloc(nmemb * size, 16); /* static memory is already zero */
    }
    if (!track()) return real.calloc(nmemb, size);
    void *p = real.calloc(nmemb, size);
    if (OT_LIKELY(p != NULL)) record(p, nmemb * size);
    else fail_array("calloc", nmemb, size, errno);
    return p;
}

static void *pool_realloc(void *p, size_t n)
{
    void *q = ready() ? real.malloc(n) : pool_alloc(n, 16);
    if (q) {
        size_t old = pool_block_size(p);
        ot_memcpy(q, p, old < n ? old : n);
    }
    return q;
}

/* realloc and reallocarray share this: the old record is taken out before the real call. */
static inline __attribute__((always_inline)) void *realloc_common(const char *api, void *p, size_t nmemb, size_t size, bool is_array)
{
    size_t n = nmemb * size;
    uint64_t old_val = 0;
    bool had = p && (ot_live_take_host_fast((uintptr_t)p, &old_val) || ot_live_take((uintptr_t)p, &old_val));
    void *q = is_array ? real.reallocarray(p, nmemb, size) : real.realloc(p, size);
    int e = errno;
    if (q) {
        if (had) ot_live_release_host_fast((uintptr_t)p, old_val);
        record(q, n);
        errno = e;
    } else if (p && n == 0 && !is_array) {
        /* glibc: realloc(p, 0) frees p and returns NULL. */
        if (had) ot_live_release((uintptr_t)p, old_val);
        errno = e;
    } else {
        /* Failed: the old block is still valid, and still tracked. */
        if (had) ot_live_put_back((uintptr_t)p, old_val);
        errno = e;
        if (is_array) fail_array(api, nmemb, size, e);
        else fail(api, n, 0, e);
    }
    return q;
}

OT_EXPORT void *realloc(void *p, size_t n)
{
    if (OT_UNLIKELY(in_pool(p))) return pool_realloc(p, n);
    if (OT_UNLIKELY(!ready())) return pool_alloc(n, 16); /* p is NULL or from the pool here */
    if (!track()) return real.realloc(p, n);
    ot_in_hook++;
    void *q = realloc_common("realloc", p, 1, n, false);
    ot_in_hook--;
    return q;
}

OT_EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
{
    if (OT_UNLIKELY(in_pool(p) || !ready())) {
        if (size && nmemb > SIZE_MAX / size) {
            errno = ENOMEM;
            return NULL;
        }
        return realloc(p, nmemb * size);
    }
    if (!real.reallocarray) return realloc(p, nmemb * size); /* glibc < 2.26 */
    if (!track()) return real.reallocarray(p, nmemb, size);
    ot_in_hook++;
    void *q = realloc_common("reallocarray", p, nmemb, size, true);
    ot_in_hook--;
    return q;
}

OT_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (OT_UNLIKELY(!ready())) {
        void *p = pool_alloc(n, align);
        if (!p) return ENOMEM;
        *out = p;
        return 0;
    }
    if (!track()) return real.posix_memalign(out, align, n);
    ot_in_hook++;
    int rc = real.posix_memalign(out, align, n);
    if (OT_LIKELY(rc == 0)) record(*out, n);
    else fail("posix_memalign", n, align, rc); /* errno untouched, as posix_memalign itself */
    ot_in_hook--;
    return rc;
}

static inline __attribute__((always_inline)) void *aligned_common(const char *api, aligned_fn fn, size_t align, size_t n)
{
    if (!track()) return fn(align, n);
    ot_in_hook++;
    void *p = fn(align, n);
    if (OT_LIKELY(p != NULL)) record(p, n);
    else fail(api, n, align, errno);
    ot_in_hook--;
    return p;
}

OT_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (OT_UNLIKELY(!ready())) return pool_alloc(n, align);
    return aligned_common("aligned_alloc", real.aligned_alloc, align, n);
}

OT_EXPORT void *memalign(size_t align, size_t n)
{
    if (OT_UNLIKELY(!ready())) return pool_alloc(n, align);
    return aligned_common("memalign", real.memalign, align, n);
}

static inline __attribute__((always_inline)) void *page_common(const char *api, malloc_fn fn, size_t n)
{
    if (!track()) return fn(n);
    ot_in_hook++;
    void *p = fn(n);
    if (OT_LIKELY(p != NULL)) record(p, n);
    else fail(api, n, 4096, errno);
    ot_in_hook--;
    return p;
}

OT_EXPORT void *valloc(size_t n)
{
    if (OT_UNLIKELY(!ready())) return pool_alloc(n, 4096);
    return page_common("valloc", real.valloc, n);
}

OT_EXPORT void *pvalloc(size_t n)
{
    if (OT_UNLIKELY(!ready())) return pool_alloc((n + 4095) & ~(size_t)4095, 4096);
    return page_common("pvalloc", real.pvalloc, n);
}

OT_EXPORT size_t malloc_usable_size(void *p)
{
    if (OT_UNLIKELY(in_pool(p))) return pool_block_size(p);
    if (OT_UNLIKELY(!ready()) || !real.malloc_usable_size) return 0;
    return real.malloc_usable_size(p);
}
