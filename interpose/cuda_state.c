/* CUDA family state shared by the hooks and the device probe: the driver's own entry points, the
 * "a CUDA library is in this process" flag, error names and the stream of stream-ordered blocks.
 * Never loads libcuda unless a device-failure report asks to (may_load); never calls a wrapper. */
#include <dlfcn.h>
#include <link.h>
#include <sched.h>
#include <stdatomic.h>

#include "cuda_internal.h"

OT_TLS int ot_cuda_drv_depth;

static _Atomic(void *) drv_handle;
static _Atomic int active;
static ot_cuda_driver_t drv;
static _Atomic int drv_state; /* 0 unresolved, 1 resolving, 2 resolved */

void ot_cuda_mark_active(void)
{
    if (!atomic_load_explicit(&active, memory_order_relaxed)) atomic_store(&active, 1);
}

bool ot_cuda_active(void)
{
    return atomic_load_explicit(&active, memory_order_relaxed) != 0;
}

void *ot_cuda_driver_handle(bool may_load, char *why, size_t why_cap)
{
    void *h = atomic_load_explicit(&drv_handle, memory_order_acquire);
    if (h) return h;
    h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h && may_load) {
        h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (!h && why && why_cap) {
            const char *e = dlerror();
            ot_strlcpy(why, e ? e : "libcuda.so.1 could not be loaded", why_cap);
        }
    }
    if (!h) return NULL;
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(&drv_handle, &expected, h)) dlclose(h); /* another thread won */
    ot_cuda_mark_active();
    return atomic_load_explicit(&drv_handle, memory_order_acquire);
}

const ot_cuda_driver_t *ot_cuda_driver(bool may_load, char *why, size_t why_cap)
{
    if (OT_LIKELY(atomic_load_explicit(&drv_state, memory_order_acquire) == 2)) return &drv;
    void *h = ot_cuda_driver_handle(may_load, why, why_cap);
    if (!h) return NULL;
    int expected = 0;
    if (atomic_compare_exchange_strong(&drv_state, &expected, 1)) {
#define OT_CU_RESOLVE(ret, sym, base, ver, sfx, params, args) drv.sym = (ot_fn_##sym)ot_real_dlsym(h, #sym);
        OT_CU_CALLED(OT_CU_RESOLVE)
#undef OT_CU_RESOLVE
        atomic_store_explicit(&drv_state, 2, memory_order_release);
    }
    /* Another thread is resolving: a handful of dlsym calls. */
    while (atomic_load_explicit(&drv_state, memory_order_acquire) != 2) sched_yield();
    return &drv;
}

void *ot_handle_of_address(const void *addr, void **lm_out)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (lm_out) *lm_out = NULL;
    if (!addr || !dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return NULL;
    if (lm_out) *lm_out = lm;
    /* A link_map is only a valid dlsym handle once dlopen has built its search list, which it does
     * not for the libraries loaded at start-up: ask for a real handle. */
    return dlopen(lm->l_name && lm->l_name[0] ? lm->l_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
}

int ot_cuda_current_device(void)
{
    const ot_cuda_driver_t *d = ot_cuda_driver(false, NULL, 0);
    CUdevice dev;
    if (d && d->cuCtxGetDevice && d->cuCtxGetDevice(&dev) == CUDA_SUCCESS) return dev;
    return -1;
}

static const struct {
    int code;
    const char *name;
} cu_names[] = {
    {0, "CUDA_SUCCESS"},
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "CUDA_ERROR_DEINITIALIZED"},
    {34, "CUDA_ERROR_STUB_LIBRARY"},
    {100, "CUDA_ERROR_NO_DEVICE"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {500, "CUDA_ERROR_NOT_FOUND"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {800, "CUDA_ERROR_NOT_PERMITTED"},
    {801, "CUDA_ERROR_NOT_SUPPORTED"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {999, "CUDA_ERROR_UNKNOWN"},
};

const char *ot_cuda_error_name(int code)
{
    for (size_t i = 0; i < sizeof cu_names / sizeof cu_names[0]; i++)
        if (cu_names[i].code == code) return cu_names[i].name;
    const ot_cuda_driver_t *d = ot_cuda_driver(false, NULL, 0);
    const char *s = NULL;
    if (d && d->cuGetErrorName && d->cuGetErrorName((CUresult)code, &s) == CUDA_SUCCESS && s) return s;
    return "CUDA_ERROR_(unnamed)";
}

static const struct {
    int code;
    const char *name;
} rt_names[] = {
    {0, "cudaSuccess"},
    {1, "cudaErrorInvalidValue"},
    {2, "cudaErrorMemoryAllocation"},
    {3, "cudaErrorInitializationError"},
    {4, "cudaErrorCudartUnloading"},
    {35, "cudaErrorInsufficientDriver"},
    {34, "cudaErrorStubLibrary"},
    {100, "cudaErrorNoDevice"},
    {101, "cudaErrorInvalidDevice"},
    {500, "cudaErrorSymbolNotFound"},
    {700, "cudaErrorIllegalAddress"},
    {800, "cudaErrorNotPermitted"},
    {801, "cudaErrorNotSupported"},
    {999, "cudaErrorUnknown"},
};

const char *ot_cudart_error_name_fallback(int code)
{
    for (size_t i = 0; i < sizeof rt_names / sizeof rt_names[0]; i++)
        if (rt_names[i].code == code) return rt_names[i].name;
    return "cudaError(unnamed)";
}

bool ot_cuda_error_is_refusal(int code)
{
    /* The same numbers in the driver (CUDA_ERROR_*) and the runtime (cudaError*): invalid value,
     * invalid device, not permitted, not supported. */
    return code == 1 || code == 101 || code == 800 || code == 801;
}

/* ---------------------------------------------------------------- streams of pool blocks
 * Open addressing over a fixed array with a bounded probe window. Slots go empty -> key -> TOMB ->
 * key..., never back to empty, so a probe for a key never stops early. Operations on one key are
 * serialised by the program (a block is freed after its allocation returned); different keys
 * claim slots with CAS. A full window just forgets: the stream is a detail of the report. */
#define STREAM_SLOTS 8192u
#define STREAM_PROBE 64u
#define TOMB UINT64_MAX
static struct {
    _Atomic uint64_t key, stream;
} streams[STREAM_SLOTS];

static unsigned slot_of(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 29;
    return (unsigned)key & (STREAM_SLOTS - 1);
}

static int stream_find(uint64_t key)
{
    unsigned s = slot_of(key);
    for (unsigned i = 0; i < STREAM_PROBE; i++, s = (s + 1) & (STREAM_SLOTS - 1)) {
        uint64_t k = atomic_load_explicit(&streams[s].key, memory_order_acquire);
        if (k == key) return (int)s;
        if (k == 0) return -1;
    }
    return -1;
}

void ot_cuda_stream_put(uint64_t key, uint64_t stream)
{
    if (!key || key == TOMB) return;
    int found = stream_find(key);
    if (found >= 0) {
        atomic_store_explicit(&streams[found].stream, stream, memory_order_release);
        return;
    }
    unsigned s = slot_of(key);
    for (unsigned i = 0; i < STREAM_PROBE; i++, s = (s + 1) & (STREAM_SLOTS - 1)) {
        uint64_t k = atomic_load_explicit(&streams[s].key, memory_order_acquire);
        if (k != 0 && k != TOMB) continue;
        if (atomic_compare_exchange_strong(&streams[s].key, &k, key)) {
            atomic_store_explicit(&streams[s].stream, stream, memory_order_release);
            return;
        }
    }
}

bool ot_cuda_stream_of(uint64_t key, uint64_t *stream)
{
    if (!key || key == TOMB) return false;
    int s = stream_find(key);
    if (s < 0) return false;
    if (stream) *stream = atomic_load_explicit(&streams[s].stream, memory_order_acquire);
    return true;
}

bool ot_cuda_stream_take(uint64_t key, uint64_t *stream)
{
    if (!ot_cuda_stream_of(key, stream)) return false;
    int s = stream_find(key);
    if (s >= 0) atomic_store_explicit(&streams[s].key, TOMB, memory_order_release);
    return true;
}
