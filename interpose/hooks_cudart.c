/* CUDA runtime API hooks (cudaMalloc and friends, the stream-ordered and _ptsz variants, and
 * cudaGetDriverEntryPoint[ByVersion]). A runtime call is recorded here, once: the driver calls it
 * makes underneath run with ot_in_hook held and go unrecorded. A statically linked runtime never
 * reaches these; it is seen at the driver level (hooks_cuda.c via hooks_dlsym.c).
 *
 * Each entry point comes twice. The exported one answers programs bound to a shared libcudart; a
 * process may hold several runtimes (libcudart.so.11 in a plugin, .so.12 in the framework), so its
 * real function is the one the *caller* would have bound to, cached per call site. The "handed" one
 * is what a dlsym of a runtime symbol returns: it calls exactly what that lookup found. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>

#include "cuda_internal.h"

#define OT_RT_DECL(ret, sym, base, params, args) ret ot_rt_x_##sym params; ret ot_rt_h_##sym params; ret sym params;
OT_CUDART_WRAPPED(OT_RT_DECL)
#undef OT_RT_DECL

enum {
#define OT_RT_IDX(ret, sym, base, params, args) E_##sym,
    OT_CUDART_WRAPPED(OT_RT_IDX)
#undef OT_RT_IDX
    E_COUNT
};

#define CACHE_SLOTS 16
typedef struct {
    _Atomic uintptr_t ra;
    _Atomic(void *) real;
} cache_slot_t;

typedef struct {
    const char *symbol;
    void *exported, *handed;
    _Atomic(void *) chain; /* what the dlsym that got `handed` found */
    cache_slot_t cache[CACHE_SLOTS];
} rt_entry_t;

static rt_entry_t E[E_COUNT] = {
#define OT_RT_ENTRY(ret, sym, base, params, args) [E_##sym] = {#sym, (void *)ot_rt_x_##sym, (void *)ot_rt_h_##sym},
    OT_CUDART_WRAPPED(OT_RT_ENTRY)
#undef OT_RT_ENTRY
};

/* ---------------------------------------------------------------- finding the real functions */

/* The definition the code at `ra` would bind to without us: first in its own object's scope (a
 * framework loaded RTLD_LOCAL with its runtime), then the global scope after us. */
static void *resolve_for(const char *symbol, const void *ra)
{
    void *p = NULL;
    void *h = ra && !ot_is_own_address(ra) ? ot_handle_of_address(ra, NULL) : NULL;
    if (h) {
        p = ot_real_dlsym(h, symbol);
        if (p && ot_is_own_address(p)) p = NULL; /* the main program's scope starts with us */
        dlclose(h);
    }
    if (!p) p = ot_next(symbol);
    if (p && ot_is_own_address(p)) p = NULL;
    return p;
}

static inline void *real_exported(rt_entry_t *e, const void *ra)
{
    cache_slot_t *c = &e->cache[((uintptr_t)ra >> 3 ^ (uintptr_t)ra >> 11) & (CACHE_SLOTS - 1)];
    uintptr_t r1 = atomic_load_explicit(&c->ra, memory_order_acquire);
    if (OT_LIKELY(r1 == (uintptr_t)ra)) {
        void *p = atomic_load_explicit(&c->real, memory_order_acquire);
        /* The writer clears ra before changing real: a changed ra means a torn read. */
        if (OT_LIKELY(p && atomic_load_explicit(&c->ra, memory_order_acquire) == r1)) return p;
    }
    void *p = resolve_for(e->symbol, ra);
    if (p) {
        atomic_store_explicit(&c->ra, 0, memory_order_release);
        atomic_store_explicit(&c->real, p, memory_order_release);
        atomic_store_explicit(&c->ra, (uintptr_t)ra, memory_order_release);
    }
    return p;
}

static inline void *real_handed(rt_entry_t *e)
{
    return atomic_load_explicit(&e->chain, memory_order_acquire);
}

static int find_symbol(const char *symbol)
{
    for (int i = 0; i < E_COUNT; i++)
        if (!ot_strcmp(E[i].symbol, symbol)) return i;
    return -1;
}

bool ot_cudart_wraps_symbol(const char *symbol) { return find_symbol(symbol) >= 0; }

bool ot_cudart_is_wrapper(const void *p)
{
    for (int i = 0; i < E_COUNT; i++)
        if (E[i].exported == p || E[i].handed == p) return true;
    return false;
}

void *ot_cudart_wrap_symbol(const char *symbol, void *real)
{
    int i = find_symbol(symbol);
    if (i < 0 || !real) return NULL;
    if (ot_is_own_address(real)) return real;
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(&E[i].chain, &expected, real) && expected != real)
        return NULL; /* a second runtime looked up by name: hand back its own function, untracked */
    ot_cuda_mark_active();
    return E[i].handed;
}

/* The runtime a real function belongs to, for asking it about a failure it just returned. */
static void *same_runtime(const void *real, const char *symbol)
{
    void *h = ot_handle_of_address(real, NULL);
    if (!h) return NULL;
    void *p = ot_real_dlsym(h, symbol);
    dlclose(h);
    return p && !ot_is_own_address(p) ? p : NULL;
}

/* ---------------------------------------------------------------- recording and reporting */

static inline bool tracking(void)
{
    if (OT_UNLIKELY(ot_state.initialized == 0)) ot_init();
    ot_cuda_mark_active();
    return ot_in_hook == 0 && ot_cuda_drv_depth == 0 && ot_ready() && ot_opt.cuda;
}

static inline __attribute__((always_inline)) void record(const void *key, uint64_t size, unsigned kind)
{
    int e = errno;
    ot_in_hook++;
    ot_live_record((uintptr_t)key, size, kind, ot_cuda_current_device());
    ot_in_hook--;
    errno = e;
}

static OT_NOINLINE cudaError_t missing(const char *api)
{
    ot_warn("%s was called but no CUDA runtime providing it was found", api);
    return cudaErrorInitializationError;
}

static OT_NOINLINE void fail_at(const ot_origin_t *origin, const char *api, cudaError_t r, uint64_t size,
                                const void *real, const char *note)
{
    /* The failing runtime itself names its error and its current device; neither call changes its
     * error state (cudaGetLastError would, and is not called). */
    ot_fn_cudaGetErrorName name_fn = (ot_fn_cudaGetErrorName)same_runtime(real, "cudaGetErrorName");
    ot_fn_cudaGetDevice dev_fn = (ot_fn_cudaGetDevice)same_runtime(real, "cudaGetDevice");
    int dev = -1;
    ot_in_hook++;
    if (!dev_fn || dev_fn(&dev) != cudaSuccess) dev = ot_cuda_current_device();
    const char *name = name_fn ? name_fn(r) : NULL;
    ot_in_hook--;
    ot_failure_t f = {0};
    f.api = api;
    f.size = size;
    f.error_code = (int)r;
    f.error_name = name ? name : ot_cudart_error_name_fallback((int)r);
    f.device = true;
    f.device_index = dev;
    f.refused = ot_cuda_error_is_refusal((int)r);
    f.note = note;
    f.origin = origin;
    ot_report_failure(&f);
}
/* In the wrapper itself (or an always_inline helper of it): the failing stack starts at its caller. */
#define fail(...) OT_CALL_WITH_ORIGIN(fail_at, __VA_ARGS__)

static inline bool worth_report(cudaError_t r, uint64_t size)
{
    return r != cudaSuccess && !(r == cudaErrorInvalidValue && size == 0);
}

/* Each body is inlined into both of its wrappers, whose own frame ot_live_record and fail() read
 * their caller from. */
#define INLINE static inline __attribute__((always_inline))

#define RT_CALL(call)                                                                           \
    if (OT_UNLIKELY(!real)) return missing(api);                                                \
    bool track = tracking();                                                                    \
    if (track) ot_in_hook++;                                                                    \
    cudaError_t r = call;                                                                       \
    if (track) ot_in_hook--

INLINE cudaError_t body_cudaMalloc(const char *api, ot_fn_cudaMalloc real, void **devPtr, size_t size)
{
    RT_CALL(real(devPtr, size));
    if (track) {
        if (r == cudaSuccess && devPtr) record(*devPtr, size, OT_KIND_DEVICE);
        else if (worth_report(r, size)) fail(api, r, size, real, NULL);
    }
    return r;
}

INLINE cudaError_t body_cudaMallocManaged(const char *api, ot_fn_cudaMallocManaged real, void **devPtr, size_t size,
                                          unsigned int flags)
{
    RT_CALL(real(devPtr, size, flags));
    if (track) {
        if (r == cudaSuccess && devPtr) record(*devPtr, size, OT_KIND_MANAGED);
        else if (worth_report(r, size)) fail(api, r, size, real, "managed (unified) memory");
    }
    return r;
}

INLINE cudaError_t body_cudaMallocPitch(const char *api, ot_fn_cudaMallocPitch real, void **devPtr, size_t *pitch,
                                        size_t width, size_t height)
{
    RT_CALL(real(devPtr, pitch, width, height));
    if (track) {
        /* What the device holds is pitch x height: the padded rows. */
        if (r == cudaSuccess && devPtr && pitch) record(*devPtr, (uint64_t)*pitch * height, OT_KIND_DEVICE);
        else if (worth_report(r, (uint64_t)width * height))
            fail(api, r, (uint64_t)width * height, real, "pitched: width x height, before row padding");
    }
    return r;
}

INLINE cudaError_t body_cudaMalloc3D(const char *api, ot_fn_cudaMalloc3D real, struct cudaPitchedPtr *pp,
                                     struct cudaExtent extent)
{
    RT_CALL(real(pp, extent));
    if (track) {
        uint64_t asked = (uint64_t)extent.width * extent.height * extent.depth;
        if (r == cudaSuccess && pp) record(pp->ptr, (uint64_t)pp->pitch * extent.height * extent.depth, OT_KIND_DEVICE);
        else if (worth_report(r, asked)) fail(api, r, asked, real, "3D: width x height x depth, before row padding");
    }
    return r;
}

INLINE cudaError_t body_cudaMallocHost(const char *api, ot_fn_cudaMallocHost real, void **ptr, size_t size)
{
    RT_CALL(real(ptr, size));
    if (track) {
        if (r == cudaSuccess && ptr) record(*ptr, size, OT_KIND_PINNED);
        else if (worth_report(r, size)) fail(api, r, size, real, "page-locked host memory");
    }
    return r;
}

INLINE cudaError_t body_cudaHostAlloc(const char *api, ot_fn_cudaHostAlloc real, void **pHost, size_t size,
                                      unsigned int flags)
{
    RT_CALL(real(pHost, size, flags));
    if (track) {
        if (r == cudaSuccess && pHost) record(*pHost, size, OT_KIND_PINNED);
        else if (worth_report(r, size)) fail(api, r, size, real, "page-locked host memory");
    }
    return r;
}

INLINE cudaError_t body_cudaMallocAsync(const char *api, ot_fn_cudaMallocAsync real, void **devPtr, size_t size,
                                        cudaStream_t s)
{
    RT_CALL(real(devPtr, size, s));
    if (track) {
        if (r == cudaSuccess && devPtr) {
            record(*devPtr, size, OT_KIND_POOL);
            ot_cuda_stream_put((uintptr_t)*devPtr, (uintptr_t)s);
        } else if (worth_report(r, size)) {
            fail(api, r, size, real, "stream-ordered allocation (the device's current memory pool)");
        }
    }
    return r;
}

INLINE cudaError_t body_cudaMallocFromPoolAsync(const char *api, ot_fn_cudaMallocFromPoolAsync real, void **ptr,
                                                size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    RT_CALL(real(ptr, size, pool, s));
    if (track) {
        if (r == cudaSuccess && ptr) {
            record(*ptr, size, OT_KIND_POOL);
            ot_cuda_stream_put((uintptr_t)*ptr, (uintptr_t)s);
        } else if (worth_report(r, size)) {
            fail(api, r, size, real, "stream-ordered allocation from an explicit memory pool");
        }
    }
    return r;
}

/* Frees: the block leaves the table before the runtime can hand its address to another thread, and
 * comes back if the runtime refused to free it. */
#define RT_FREE(key, call)                                                                      \
    if (OT_UNLIKELY(!real)) return missing(api);                                                \
    bool track = tracking();                                                                    \
    uint64_t val = 0;                                                                           \
    bool had = false;                                                                           \
    if (track) {                                                                                \
        ot_in_hook++;                                                                           \
        had = (key) && ot_live_take((uintptr_t)(key), &val);                                    \
    }                                                                                           \
    cudaError_t r = call;                                                                       \
    if (track) {                                                                                \
        if (had && r == cudaSuccess) ot_live_release((uintptr_t)(key), val);                    \
        else if (had) ot_live_put_back((uintptr_t)(key), val);                                  \
        ot_in_hook--;                                                                           \
    }

INLINE cudaError_t body_cudaFree(const char *api, ot_fn_cudaFree real, void *devPtr)
{
    RT_FREE(devPtr, real(devPtr));
    return r;
}

INLINE cudaError_t body_cudaFreeHost(const char *api, ot_fn_cudaFreeHost real, void *ptr)
{
    RT_FREE(ptr, real(ptr));
    return r;
}

INLINE cudaError_t body_cudaFreeAsync(const char *api, ot_fn_cudaFreeAsync real, void *devPtr, cudaStream_t s)
{
    RT_FREE(devPtr, real(devPtr, s));
    if (had && r == cudaSuccess) ot_cuda_stream_take((uintptr_t)devPtr, NULL);
    return r;
}

/* Driver entry points handed out by the runtime: the runtime normally asks the driver through
 * the cuGetProcAddress it got from us, so its answer is already our wrapper; if it found the
 * driver some other way, swap the answer here. The version is the one the runtime used: given
 * (ByVersion) or its own. */
static void *swap_entry(const char *api, const void *real, const char *symbol, int version, unsigned long long flags,
                        void *found)
{
    if (!found || !symbol || !ot_ready() || !ot_opt.cuda || ot_is_own_address(found)) return found;
    if (version < 0) {
        ot_fn_cudaRuntimeGetVersion v = (ot_fn_cudaRuntimeGetVersion)same_runtime(real, "cudaRuntimeGetVersion");
        int rv = 0;
        if (v && v(&rv) == cudaSuccess && rv > 0) version = rv;
    }
    /* A _ptsz entry point with default flags means the per-thread default stream. */
    size_t n = ot_strlen(api);
    if (flags == cudaEnableDefault && n > 5 && !ot_strcmp(api + n - 5, "_ptsz")) flags = cudaEnablePerThreadDefaultStream;
    return ot_cu_wrap_lookup(symbol, version, flags, found);
}

INLINE cudaError_t body_cudaGetDriverEntryPoint(const char *api, ot_fn_cudaGetDriverEntryPoint real,
                                                const char *symbol, void **funcPtr, unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (OT_UNLIKELY(!real)) return missing(api);
    cudaError_t r = real(symbol, funcPtr, flags, driverStatus);
    if (r == cudaSuccess && funcPtr) *funcPtr = swap_entry(api, (const void *)real, symbol, -1, flags, *funcPtr);
    return r;
}

INLINE cudaError_t body_cudaGetDriverEntryPointByVersion(const char *api, ot_fn_cudaGetDriverEntryPointByVersion real,
                                                         const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                         unsigned long long flags,
                                                         enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (OT_UNLIKELY(!real)) return missing(api);
    cudaError_t r = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
    if (r == cudaSuccess && funcPtr)
        *funcPtr = swap_entry(api, (const void *)real, symbol, (int)cudaVersion, flags, *funcPtr);
    return r;
}

/* ---------------------------------------------------------------- the wrappers */

#define OT_HOOK __attribute__((visibility("hidden")))
#define OT_UNPAREN(...) __VA_ARGS__
#define OT_RT_GEN(ret, sym, base, params, args)                                                          \
    OT_HOOK ret ot_rt_x_##sym params                                                                     \
    {                                                                                                    \
        return body_##base(#sym, (ot_fn_##base)real_exported(&E[E_##sym], __builtin_return_address(0)), \
                           OT_UNPAREN args);                                                             \
    }                                                                                                    \
    OT_HOOK ret ot_rt_h_##sym params                                                                     \
    {                                                                                                    \
        return body_##base(#sym, (ot_fn_##base)real_handed(&E[E_##sym]), OT_UNPAREN args);              \
    }                                                                                                    \
    extern __typeof__(ot_rt_x_##sym) sym __attribute__((alias("ot_rt_x_" #sym), visibility("default")));
OT_CUDART_WRAPPED(OT_RT_GEN)
