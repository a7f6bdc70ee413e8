/* CUDA driver API hooks: every exported version of every allocation entry point (cuMemAlloc and
 * cuMemAlloc_v2, ..., the _ptsz variants) and the two cuGetProcAddress ABIs through which runtimes
 * and frameworks reach them. Each wrapper forwards to the driver, then records or reports; it must
 * never change a result, and never be handed out around a function the driver lacks.
 * A call made underneath the runtime wrappers (ot_in_hook held) is forwarded unrecorded: a runtime
 * call is recorded once, at the runtime level. */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>

#include "cuda_internal.h"

/* Our definitions must match the official ABI: declaring them from the checked list makes the
 * compiler compare each one. The exported names are aliases of hidden functions, so that taking a
 * wrapper's address from inside the library always yields ours. */
#define OT_CU_DECL(ret, sym, base, ver, sfx, params, args) ret ot_cu_w_##sym params; ret sym params;
OT_CU_WRAPPED(OT_CU_DECL)
#undef OT_CU_DECL

enum {
#define OT_CU_IDX(ret, sym, base, ver, sfx, params, args) V_##sym,
    OT_CU_WRAPPED(OT_CU_IDX)
#undef OT_CU_IDX
    V_COUNT
};

typedef struct {
    const char *symbol, *base;
    int version;
    bool ptds;
    void *wrapper;
    _Atomic(void *) chain;  /* what the program's lookup resolved (never one of ours) */
    _Atomic(void *) direct; /* the driver's export of this exact name */
} variant_t;

static variant_t V[V_COUNT] = {
#define OT_CU_ENTRY(ret, sym, base, ver, sfx, params, args) \
    [V_##sym] = {#sym, #base, ver, sizeof(#sfx) > 1, (void *)ot_cu_w_##sym, NULL, NULL},
    OT_CU_WRAPPED(OT_CU_ENTRY)
#undef OT_CU_ENTRY
};

/* ---------------------------------------------------------------- finding the real functions */

static void *direct_of(variant_t *v)
{
    void *p = atomic_load_explicit(&v->direct, memory_order_acquire);
    if (OT_LIKELY(p != NULL)) return p;
    void *h = ot_cuda_driver_handle(false, NULL, 0);
    if (h) p = ot_real_dlsym(h, v->symbol);
    if (!p) p = ot_next(v->symbol);
    if (!p || ot_is_own_address(p)) return NULL;
    atomic_store_explicit(&v->direct, p, memory_order_release);
    return p;
}

static inline void *real_of(variant_t *v)
{
    void *p = atomic_load_explicit(&v->chain, memory_order_acquire);
    return OT_LIKELY(p != NULL) ? p : direct_of(v);
}

/* Beneath another driver wrapper on this thread: straight to the driver, so that a second
 * interposer handing our wrapper back to us cannot make a loop. */
static inline void *nested_real(variant_t *v)
{
    void *p = direct_of(v);
    return p ? p : atomic_load_explicit(&v->chain, memory_order_acquire);
}

static void set_chain(variant_t *v, void *real)
{
    if (real && !ot_is_own_address(real)) atomic_store_explicit(&v->chain, real, memory_order_release);
}

static OT_NOINLINE CUresult missing(variant_t *v)
{
    /* Only reachable through our exported symbol in a process whose driver lacks it: the dynamic
     * linker would have refused the call; the nearest driver answer is "not found". */
    ot_warn("%s was called but the CUDA driver in this process does not provide it", v->symbol);
    return CUDA_ERROR_NOT_FOUND;
}

bool ot_cu_is_wrapper(const void *p)
{
    for (int i = 0; i < V_COUNT; i++)
        if (V[i].wrapper == p) return true;
    return false;
}

static int find_symbol(const char *symbol)
{
    for (int i = 0; i < V_COUNT; i++)
        if (!ot_strcmp(V[i].symbol, symbol)) return i;
    return -1;
}

bool ot_cu_wraps_symbol(const char *symbol) { return find_symbol(symbol) >= 0; }

void *ot_cu_wrap_symbol(const char *symbol, void *real)
{
    int i = find_symbol(symbol);
    if (i < 0 || !real) return NULL;
    if (ot_is_own_address(real)) return real;
    set_chain(&V[i], real);
    ot_cuda_mark_active();
    return V[i].wrapper;
}

void *ot_cu_wrap_lookup(const char *base, int version, uint64_t flags, void *real)
{
    if (!base || !real || ot_is_own_address(real)) return real;
    bool known = false, has_ptds = false;
    for (int i = 0; i < V_COUNT; i++)
        if (!ot_strcmp(V[i].base, base)) {
            known = true;
            has_ptds |= V[i].ptds;
        }
    if (!known) return real; /* not an entry point we wrap */
    /* The driver's rule: the per-thread-stream flag selects the _ptsz/_ptds variant where there is
     * one; among the rest, the newest ABI not newer than the caller's version. */
    bool want_ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && has_ptds;
    int pick = -1;
    if (version >= 0)
        for (int i = 0; i < V_COUNT; i++) {
            if (ot_strcmp(V[i].base, base) || V[i].ptds != want_ptds || V[i].version > version) continue;
            if (pick < 0 || V[i].version > V[pick].version) pick = i;
        }
    /* The driver knows which function it handed out: when that is one of its exports, its name
     * settles the ABI, whatever our table says (an older driver may lack the newest variant). */
    for (int i = 0; i < V_COUNT; i++)
        if (!ot_strcmp(V[i].base, base) && direct_of(&V[i]) == real) {
            pick = i;
            break;
        }
    if (pick < 0) return real; /* cannot tell the ABI: hand back the driver's own pointer */
    set_chain(&V[pick], real);
    ot_cuda_mark_active();
    return V[pick].wrapper;
}

/* ---------------------------------------------------------------- recording and reporting */

static inline bool tracking(void)
{
    if (OT_UNLIKELY(ot_state.initialized == 0)) ot_init();
    return ot_cuda_drv_depth == 0 && ot_in_hook == 0 && ot_ready() && ot_opt.cuda;
}

/* Always inlined: ot_live_record takes the wrapper's own frame as where the stack starts. It keeps errno
 * and holds the recursion guard around its own slow paths, so nothing more is needed here. */
static inline __attribute__((always_inline)) void record(uint64_t key, uint64_t size, unsigned kind, int dev)
{
    ot_live_record(key, size, kind, dev);
}

static inline __attribute__((always_inline)) void forget_before(uint64_t key, uint64_t *val, bool *had)
{
    ot_in_hook++;
    *had = key && ot_live_take(key, val);
    ot_in_hook--;
}

static inline __attribute__((always_inline)) void forget_after(uint64_t key, uint64_t val, bool had, bool ok)
{
    if (!had) return;
    ot_in_hook++;
    if (ok) ot_live_release(key, val);
    else ot_live_put_back(key, val); /* the block is still allocated */
    ot_in_hook--;
}

static OT_NOINLINE void fail_at(const ot_origin_t *origin, const char *api, CUresult r, uint64_t size, int dev,
                                const char *note)
{
    ot_failure_t f = {0};
    f.api = api;
    f.size = size;
    f.error_code = (int)r;
    f.error_name = ot_cuda_error_name((int)r);
    f.device = true;
    f.device_index = dev;
    f.refused = ot_cuda_error_is_refusal((int)r);
    f.note = note;
    f.origin = origin;
    ot_report_failure(&f);
}
/* In the wrapper itself (or an always_inline helper of it): the failing stack starts at its caller. */
#define fail(...) OT_CALL_WITH_ORIGIN(fail_at, __VA_ARGS__)

/* Allocation failures worth a report: not a zero-size request refused as invalid. */
static inline bool worth_report(CUresult r, uint64_t size)
{
    return r != CUDA_SUCCESS && !(r == CUDA_ERROR_INVALID_VALUE && size == 0);
}

static uint64_t vmm_key(CUmemGenericAllocationHandle h) { return OT_KEY_VMM_TAG | (h & (OT_KEY_VMM_TAG - 1)); }

/* Wrapper prologue/epilogue: the real function, whether this call is recorded, and the depth guard. */
#define DRV_BEGIN(sym)                                                                          \
    variant_t *v_ = &V[V_##sym];                                                                \
    bool track_ = tracking();                                                                   \
    ot_fn_##sym real_ = (ot_fn_##sym)(ot_cuda_drv_depth ? nested_real(v_) : real_of(v_));       \
    if (OT_UNLIKELY(!real_)) return missing(v_);                                                \
    ot_cuda_drv_depth++
#define DRV_END() ot_cuda_drv_depth--
/* After the real call of an allocation: record the block (`ok`: its pointer may be read) or report
 * the failure. A macro like the others: record() and fail() read the caller from the hook's own frame. */
#define DRV_ALLOC_DONE(api, ok, keyexpr, rec_size, fail_size, kind, note)                       \
    do {                                                                                        \
        if (track_) {                                                                           \
            if (r == CUDA_SUCCESS && (ok))                                                      \
                record((keyexpr), (rec_size), (kind), ot_cuda_current_device());               \
            else if (worth_report(r, (fail_size)))                                              \
                fail((api), r, (fail_size), ot_cuda_current_device(), (note));                  \
        }                                                                                       \
    } while (0)
#define OT_HOOK __attribute__((visibility("hidden")))
#define OT_ALIAS(sym) extern __typeof__(ot_cu_w_##sym) sym __attribute__((alias("ot_cu_w_" #sym), visibility("default")))

/* ---------------------------------------------------------------- device memory */

OT_HOOK CUresult ot_cu_w_cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    DRV_BEGIN(cuMemAlloc);
    CUresult r = real_(dptr, bytesize);
    DRV_END();
    DRV_ALLOC_DONE("cuMemAlloc", dptr, *dptr, bytesize, bytesize, OT_KIND_DEVICE, NULL);
    return r;
}
OT_ALIAS(cuMemAlloc);

OT_HOOK CUresult ot_cu_w_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    DRV_BEGIN(cuMemAlloc_v2);
    CUresult r = real_(dptr, bytesize);
    DRV_END();
    DRV_ALLOC_DONE("cuMemAlloc_v2", dptr, *dptr, bytesize, bytesize, OT_KIND_DEVICE, NULL);
    return r;
}
OT_ALIAS(cuMemAlloc_v2);

OT_HOOK CUresult ot_cu_w_cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                         unsigned int Height, unsigned int ElementSizeBytes)
{
    DRV_BEGIN(cuMemAllocPitch);
    CUresult r = real_(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    DRV_END();
    /* The size recorded is what the driver padded each row to, not what was asked for. */
    DRV_ALLOC_DONE("cuMemAllocPitch", dptr && pPitch, *dptr, (uint64_t)*pPitch * Height,
                   (uint64_t)WidthInBytes * Height, OT_KIND_DEVICE, "pitched: width x height");
    return r;
}
OT_ALIAS(cuMemAllocPitch);

OT_HOOK CUresult ot_cu_w_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                            unsigned int ElementSizeBytes)
{
    DRV_BEGIN(cuMemAllocPitch_v2);
    CUresult r = real_(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    DRV_END();
    DRV_ALLOC_DONE("cuMemAllocPitch_v2", dptr && pPitch, *dptr, (uint64_t)*pPitch * Height,
                   (uint64_t)WidthInBytes * Height, OT_KIND_DEVICE, "pitched: width x height");
    return r;
}
OT_ALIAS(cuMemAllocPitch_v2);

OT_HOOK CUresult ot_cu_w_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    DRV_BEGIN(cuMemAllocManaged);
    CUresult r = real_(dptr, bytesize, flags);
    DRV_END();
    DRV_ALLOC_DONE("cuMemAllocManaged", dptr, *dptr, bytesize, bytesize, OT_KIND_MANAGED, NULL);
    return r;
}
OT_ALIAS(cuMemAllocManaged);

/* A free forgets the block before the driver can hand its address to another thread, and puts it
 * back if the driver refused the free. */
#define DRV_FREE(sym, keyexpr, ...)                                                             \
    DRV_BEGIN(sym);                                                                             \
    uint64_t val_ = 0;                                                                          \
    bool had_ = false;                                                                          \
    if (track_) forget_before((keyexpr), &val_, &had_);                                         \
    CUresult r = real_(__VA_ARGS__);                                                            \
    DRV_END();                                                                                  \
    forget_after((keyexpr), val_, had_, r == CUDA_SUCCESS);                                     \
    return r

OT_HOOK CUresult ot_cu_w_cuMemFree(CUdeviceptr_v1 dptr) { DRV_FREE(cuMemFree, dptr, dptr); }
OT_ALIAS(cuMemFree);
OT_HOOK CUresult ot_cu_w_cuMemFree_v2(CUdeviceptr dptr) { DRV_FREE(cuMemFree_v2, dptr, dptr); }
OT_ALIAS(cuMemFree_v2);

/* ---------------------------------------------------------------- pinned host memory */

OT_HOOK CUresult ot_cu_w_cuMemAllocHost(void **pp, unsigned int bytesize)
{
    DRV_BEGIN(cuMemAllocHost);
    CUresult r = real_(pp, bytesize);
    DRV_END();
    DRV_ALLOC_DONE("cuMemAllocHost", pp, (uintptr_t)*pp, bytesize, bytesize, OT_KIND_PINNED,
                   "page-locked host memory");
    return r;
}
OT_ALIAS(cuMemAllocHost);

OT_HOOK CUresult ot_cu_w_cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    DRV_BEGIN(cuMemAllocHost_v2);
    CUresult r = real_(pp, bytesize);
    DRV_END();
    DRV_ALLOC_DONE("cuMemAllocHost_v2", pp, (uintptr_t)*pp, bytesize, bytesize, OT_KIND_PINNED,
                   "page-locked host memory");
    return r;
}
OT_ALIAS(cuMemAllocHost_v2);

OT_HOOK CUresult ot_cu_w_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    DRV_BEGIN(cuMemHostAlloc);
    CUresult r = real_(pp, bytesize, Flags);
    DRV_END();
    DRV_ALLOC_DONE("cuMemHostAlloc", pp, (uintptr_t)*pp, bytesize, bytesize, OT_KIND_PINNED,
                   "page-locked host memory");
    return r;
}
OT_ALIAS(cuMemHostAlloc);

OT_HOOK CUresult ot_cu_w_cuMemFreeHost(void *p) { DRV_FREE(cuMemFreeHost, (uintptr_t)p, p); }
OT_ALIAS(cuMemFreeHost);

/* ---------------------------------------------------------------- virtual memory management */

OT_HOOK CUresult ot_cu_w_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                                     unsigned long long flags)
{
    DRV_BEGIN(cuMemCreate);
    CUresult r = real_(handle, size, prop, flags);
    DRV_END();
    if (track_) {
        /* Physical memory on a device is VMM; on the host (what some allocators reserve for
         * offloading) it is page-locked host memory. */
        bool on_dev = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
        int dev = on_dev ? prop->location.id : -1;
        if (r == CUDA_SUCCESS && handle)
            record(vmm_key(*handle), size, on_dev ? OT_KIND_VMM : OT_KIND_PINNED, dev);
        else if (worth_report(r, size))
            fail("cuMemCreate", r, size, on_dev ? dev : ot_cuda_current_device(),
                 on_dev ? "physical memory for the virtual memory API (e.g. PyTorch expandable segments)"
                        : "physical host memory for the virtual memory API");
    }
    return r;
}
OT_ALIAS(cuMemCreate);

OT_HOOK CUresult ot_cu_w_cuMemRelease(CUmemGenericAllocationHandle handle)
{
    DRV_FREE(cuMemRelease, vmm_key(handle), handle);
}
OT_ALIAS(cuMemRelease);

/* ---------------------------------------------------------------- stream-ordered allocation */

static inline __attribute__((always_inline)) void pool_record(CUdeviceptr p, size_t n, CUstream s)
{
    record(p, n, OT_KIND_POOL, ot_cuda_current_device());
    ot_cuda_stream_put(p, (uint64_t)(uintptr_t)s);
}

static OT_NOINLINE void pool_fail_at(const ot_origin_t *origin, const char *api, CUresult r, size_t n, CUstream s,
                                     CUmemoryPool pool)
{
    char note[96];
    ot_buf_t b;
    ot_buf_init(&b, note, sizeof note, -1);
    ot_buf_printf(&b, "stream-ordered, stream %p", (void *)s);
    if (pool) ot_buf_printf(&b, ", pool %p", (void *)pool);
    ot_buf_cstr(&b);
    ot_failure_t f = {0};
    f.api = api;
    f.size = n;
    f.error_code = (int)r;
    f.error_name = ot_cuda_error_name((int)r);
    f.device = true;
    f.device_index = ot_cuda_current_device();
    f.refused = ot_cuda_error_is_refusal((int)r);
    f.note = note;
    f.origin = origin;
    ot_report_failure(&f);
}
#define pool_fail(...) OT_CALL_WITH_ORIGIN(pool_fail_at, __VA_ARGS__)

#define DRV_ALLOC_ASYNC(sym, pool, ...)                                                         \
    DRV_BEGIN(sym);                                                                             \
    CUresult r = real_(__VA_ARGS__);                                                            \
    DRV_END();                                                                                  \
    if (track_) {                                                                               \
        if (r == CUDA_SUCCESS && dptr) pool_record(*dptr, bytesize, hStream);                   \
        else if (worth_report(r, bytesize)) pool_fail(#sym, r, bytesize, hStream, pool);        \
    }                                                                                           \
    return r

OT_HOOK CUresult ot_cu_w_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    DRV_ALLOC_ASYNC(cuMemAllocAsync, NULL, dptr, bytesize, hStream);
}
OT_ALIAS(cuMemAllocAsync);
OT_HOOK CUresult ot_cu_w_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    DRV_ALLOC_ASYNC(cuMemAllocAsync_ptsz, NULL, dptr, bytesize, hStream);
}
OT_ALIAS(cuMemAllocAsync_ptsz);
OT_HOOK CUresult ot_cu_w_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    DRV_ALLOC_ASYNC(cuMemAllocFromPoolAsync, pool, dptr, bytesize, pool, hStream);
}
OT_ALIAS(cuMemAllocFromPoolAsync);
OT_HOOK CUresult ot_cu_w_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                      CUstream hStream)
{
    DRV_ALLOC_ASYNC(cuMemAllocFromPoolAsync_ptsz, pool, dptr, bytesize, pool, hStream);
}
OT_ALIAS(cuMemAllocFromPoolAsync_ptsz);

/* The pool may keep the memory (release threshold): the block is gone for the program, which is
 * what the live table describes; the pool's reserve shows up as free memory that is not free. */
#define DRV_FREE_ASYNC(sym)                                                                     \
    DRV_BEGIN(sym);                                                                             \
    uint64_t val_ = 0;                                                                          \
    bool had_ = false;                                                                          \
    if (track_) forget_before(dptr, &val_, &had_);                                              \
    CUresult r = real_(dptr, hStream);                                                          \
    DRV_END();                                                                                  \
    if (had_ && r == CUDA_SUCCESS) ot_cuda_stream_take(dptr, NULL);                             \
    forget_after(dptr, val_, had_, r == CUDA_SUCCESS);                                          \
    return r

OT_HOOK CUresult ot_cu_w_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) { DRV_FREE_ASYNC(cuMemFreeAsync); }
OT_ALIAS(cuMemFreeAsync);
OT_HOOK CUresult ot_cu_w_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) { DRV_FREE_ASYNC(cuMemFreeAsync_ptsz); }
OT_ALIAS(cuMemFreeAsync_ptsz);

/* ---------------------------------------------------------------- entry point access */

/* What a lookup through the driver answered, with our wrappers in place of the driver's allocation
 * functions (and of cuGetProcAddress itself). The driver's status and error are passed on as they
 * are; a NULL answer stays NULL. */
static inline void *swap_answer(const char *symbol, int version, cuuint64_t flags, void *found)
{
    if (!found || !symbol || !ot_opt.cuda || !ot_ready()) return found;
    return ot_cu_wrap_lookup(symbol, version, flags, found);
}

OT_HOOK CUresult ot_cu_w_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    variant_t *v = &V[V_cuGetProcAddress];
    ot_fn_cuGetProcAddress real = (ot_fn_cuGetProcAddress)(ot_cuda_drv_depth ? nested_real(v) : real_of(v));
    if (OT_UNLIKELY(!real)) return missing(v);
    ot_cuda_drv_depth++;
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    ot_cuda_drv_depth--;
    if (r == CUDA_SUCCESS && pfn) *pfn = swap_answer(symbol, cudaVersion, flags, *pfn);
    return r;
}
OT_ALIAS(cuGetProcAddress);

OT_HOOK CUresult ot_cu_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                             CUdriverProcAddressQueryResult *symbolStatus)
{
    variant_t *v = &V[V_cuGetProcAddress_v2];
    ot_fn_cuGetProcAddress_v2 real = (ot_fn_cuGetProcAddress_v2)(ot_cuda_drv_depth ? nested_real(v) : real_of(v));
    if (OT_UNLIKELY(!real)) return missing(v);
    ot_cuda_drv_depth++;
    CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    ot_cuda_drv_depth--;
    if (r == CUDA_SUCCESS && pfn) *pfn = swap_answer(symbol, cudaVersion, flags, *pfn);
    return r;
}
OT_ALIAS(cuGetProcAddress_v2);
