/* Test double of the CUDA driver (built as libcuda.so.1): simulated devices whose sizes come from the
 * environment, a slice optionally held by a simulated "other process", every allocation entry point
 * oomtrace wraps in each exported version, and a cuGetProcAddress that resolves (name, version,
 * flags) to a variant the way the real driver does. Device memory is never mapped: device
 * addresses are fake and must not be dereferenced. Linked -Bsymbolic, as a real driver behaves:
 * the pointers it hands out are its own functions, whatever is preloaded.
 *
 * Environment (sizes take K/M/G/T suffixes):
 *   OT_FAKE_GPU_COUNT=1            devices
 *   OT_FAKE_GPU_TOTAL=16G          memory of each device
 *   OT_FAKE_GPU_NAME               device name ("oomtrace fake GPU")
 *   OT_FAKE_GPU_OTHER_USED=0       bytes held by another process (read by the NVML double too)
 *   OT_FAKE_GPU_OTHER_DEVICE=0     the device it holds them on
 *   OT_FAKE_GPU_CTX_OVERHEAD=0     bytes a context costs (taken on first use; if they do not fit,
 *                                  that use fails with CUDA_ERROR_OUT_OF_MEMORY)
 *   OT_FAKE_PINNED_LIMIT           pinned host bytes that may be allocated (unlimited)
 *   OT_FAKE_GPU_MAX_BLOCK          largest block that can be found (fragmentation; unlimited)
 *   OT_FAKE_CUDA_INIT_ERROR=N      cuInit returns N (100 = no device, 999, ...)
 *   OT_FAKE_CUDA_DRIVER_VERSION    what cuDriverGetVersion says (13000)
 *   OT_FAKE_CUDA_HIDE=a,b          base names cuGetProcAddress pretends not to know
 *   OT_FAKE_CUDA_TRACE=1           log every cuGetProcAddress lookup to stderr
 *   OT_FAKE_CUDA_VA_RESERVE=4G     virtual address space cuInit reserves, as the real driver does for
 *                                  its unified address range (PROT_NONE, MAP_NORESERVE: no memory);
 *                                  if it cannot (ulimit -v), cuInit fails with OUT_OF_MEMORY as the
 *                                  real one does
 *   OT_FAKE_CUDA_FABRIC=0          1: cuMemCreate grants fabric handles (an IMEX channel); without
 *                                  one the real driver answers CUDA_ERROR_NOT_PERMITTED (H200, 580) */
#define OT_FAKE_CUDA_IMPL 1
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda.h"
#include "fake_env.h"

#define API __attribute__((visibility("default")))
#define MAX_DEV 8
#define MAX_BLOCKS 8192

typedef enum { B_DEVICE, B_MANAGED, B_PINNED, B_VMM_DEV, B_VMM_HOST } block_kind_t;

static struct {
    pthread_once_t once;
    int count;
    unsigned long long total, other_used, ctx_overhead, pinned_limit, max_block;
    int other_device;
    int init_error, driver_version;
    char name[128];
    char hide[512];
    int trace;
    int fabric;
    unsigned long long va_reserve;
} cfg = {.once = PTHREAD_ONCE_INIT};

static _Atomic int initialized;
static _Atomic unsigned long long used[MAX_DEV];    /* this process, per device */
static _Atomic unsigned long long pinned_used;
static _Atomic int ctx_charged[MAX_DEV];
static _Atomic unsigned long long next_addr[MAX_DEV];
static _Atomic unsigned long long next_handle = 0x1000;
static __thread int cur_dev = -1;

static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block {
    unsigned long long key, size;
    int dev;
    block_kind_t kind;
} blocks[MAX_BLOCKS];

static void load_cfg(void)
{
    cfg.count = (int)env_size("OT_FAKE_GPU_COUNT", 1);
    if (cfg.count > MAX_DEV) cfg.count = MAX_DEV;
    cfg.total = env_size("OT_FAKE_GPU_TOTAL", 16ull << 30);
    cfg.other_used = env_size("OT_FAKE_GPU_OTHER_USED", 0);
    cfg.other_device = (int)env_size("OT_FAKE_GPU_OTHER_DEVICE", 0);
    cfg.ctx_overhead = env_size("OT_FAKE_GPU_CTX_OVERHEAD", 0);
    cfg.pinned_limit = env_size("OT_FAKE_PINNED_LIMIT", ~0ull);
    cfg.max_block = env_size("OT_FAKE_GPU_MAX_BLOCK", ~0ull);
    cfg.init_error = (int)env_size("OT_FAKE_CUDA_INIT_ERROR", 0);
    cfg.driver_version = (int)env_size("OT_FAKE_CUDA_DRIVER_VERSION", 13000);
    cfg.trace = (int)env_size("OT_FAKE_CUDA_TRACE", 0);
    cfg.fabric = (int)env_size("OT_FAKE_CUDA_FABRIC", 0);
    cfg.va_reserve = env_size("OT_FAKE_CUDA_VA_RESERVE", 4ull << 30);
    const char *n = getenv("OT_FAKE_GPU_NAME");
    snprintf(cfg.name, sizeof cfg.name, "%s", n && *n ? n : "oomtrace fake GPU");
    const char *h = getenv("OT_FAKE_CUDA_HIDE");
    snprintf(cfg.hide, sizeof cfg.hide, ",%s,", h ? h : "");
    for (int i = 0; i < MAX_DEV; i++) next_addr[i] = 0x200000000000ull + ((unsigned long long)i << 40);
}

static void config(void) { pthread_once(&cfg.once, load_cfg); }

/* Read by the NVML double: what this process holds on a device. */
API unsigned long long ot_fake_cuda_used(int dev)
{
    config();
    return dev >= 0 && dev < cfg.count ? used[dev] : 0;
}

static unsigned long long other_on(int dev) { return dev == cfg.other_device ? cfg.other_used : 0; }

static CUresult ready(void)
{
    config();
    return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult current(int *dev)
{
    CUresult r = ready();
    if (r) return r;
    if (cur_dev < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx_charged[cur_dev] && !atomic_exchange(&ctx_charged[cur_dev], 1)) {
        /* Creating the context takes device memory of its own: on a device too full for it the
         * first call fails with OUT_OF_MEMORY, as a real runtime's first cudaMalloc does. */
        unsigned long long u = used[cur_dev];
        do {
            if (u + other_on(cur_dev) + cfg.ctx_overhead > cfg.total) {
                ctx_charged[cur_dev] = 0;
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
        } while (!atomic_compare_exchange_weak(&used[cur_dev], &u, u + cfg.ctx_overhead));
    }
    *dev = cur_dev;
    return CUDA_SUCCESS;
}

static void remember(unsigned long long key, unsigned long long size, int dev, block_kind_t kind)
{
    pthread_mutex_lock(&blocks_lock);
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (!blocks[i].key) {
            blocks[i] = (struct block){key, size, dev, kind};
            break;
        }
    pthread_mutex_unlock(&blocks_lock);
}

static int forget(unsigned long long key, struct block *out)
{
    int found = 0;
    pthread_mutex_lock(&blocks_lock);
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (blocks[i].key == key) {
            *out = blocks[i];
            blocks[i].key = 0;
            found = 1;
            break;
        }
    pthread_mutex_unlock(&blocks_lock);
    return found;
}

/* Reserve `size` bytes on dev, as a real device would refuse what does not fit. */
static CUresult charge(int dev, unsigned long long size)
{
    unsigned long long u = used[dev];
    if (size > cfg.max_block) return CUDA_ERROR_OUT_OF_MEMORY; /* free, but not in one piece */
    do {
        if (size > cfg.total || u + other_on(dev) > cfg.total - size) return CUDA_ERROR_OUT_OF_MEMORY;
    } while (!atomic_compare_exchange_weak(&used[dev], &u, u + size));
    return CUDA_SUCCESS;
}

static CUresult charge_pinned(unsigned long long size)
{
    unsigned long long u = pinned_used;
    do {
        if (size > cfg.pinned_limit || u > cfg.pinned_limit - size) return CUDA_ERROR_OUT_OF_MEMORY;
    } while (!atomic_compare_exchange_weak(&pinned_used, &u, u + size));
    return CUDA_SUCCESS;
}

static CUresult dev_alloc(CUdeviceptr *dptr, unsigned long long size, block_kind_t kind)
{
    int dev;
    CUresult r = current(&dev);
    if (r) return r;
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    if (!size) return CUDA_ERROR_INVALID_VALUE;
    if ((r = charge(dev, size))) return r;
    unsigned long long addr;
    if (kind == B_MANAGED) {
        /* Managed memory is host-accessible: back it for real. */
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            used[dev] -= size;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        addr = (unsigned long long)(uintptr_t)p;
    } else {
        addr = atomic_fetch_add(&next_addr[dev], (size + 0x1fffff) & ~0x1fffffull);
    }
    remember(addr, size, dev, kind);
    *dptr = addr;
    return CUDA_SUCCESS;
}

static CUresult dev_free(unsigned long long addr)
{
    CUresult r = ready();
    if (r) return r;
    if (!addr) return CUDA_SUCCESS;
    struct block b;
    if (!forget(addr, &b) || (b.kind != B_DEVICE && b.kind != B_MANAGED)) return CUDA_ERROR_INVALID_VALUE;
    used[b.dev] -= b.size;
    if (b.kind == B_MANAGED) munmap((void *)(uintptr_t)addr, b.size);
    return CUDA_SUCCESS;
}

static CUresult host_alloc(void **pp, unsigned long long size)
{
    CUresult r = ready();
    if (r) return r;
    if (!pp || !size) return CUDA_ERROR_INVALID_VALUE;
    if ((r = charge_pinned(size))) return r;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        pinned_used -= size;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    remember((uintptr_t)p, size, -1, B_PINNED);
    *pp = p;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- initialisation and devices */

API CUresult cuInit(unsigned int flags)
{
    config();
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    if (cfg.init_error) return (CUresult)cfg.init_error;
    static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
    static void *reserved;
    pthread_mutex_lock(&init_lock);
    if (!reserved && cfg.va_reserve) {
        void *p = mmap(NULL, cfg.va_reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            pthread_mutex_unlock(&init_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        reserved = p;
    }
    pthread_mutex_unlock(&init_lock);
    initialized = 1;
    return CUDA_SUCCESS;
}

API CUresult cuDriverGetVersion(int *v)
{
    config();
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = cfg.driver_version;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *count)
{
    CUresult r = ready();
    if (r) return r;
    *count = cfg.count;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r = ready();
    if (r) return r;
    if (ordinal < 0 || ordinal >= cfg.count) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

#define CHECK_DEV(d) do { CUresult r_ = ready(); if (r_) return r_; \
    if ((d) < 0 || (d) >= cfg.count) return CUDA_ERROR_INVALID_DEVICE; } while (0)

API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CHECK_DEV(dev);
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", cfg.name);
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice dev)
{
    CHECK_DEV(dev);
    if (!bus || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(bus, (size_t)len, "0000:%02X:00.0", 0x10 + dev);
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    CHECK_DEV(dev);
    for (int i = 0; i < 16; i++) uuid->bytes[i] = (char)(0xa0 + i + 16 * dev);
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid(uuid, dev); }

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CHECK_DEV(dev);
    *bytes = cfg.total;
    return CUDA_SUCCESS;
}

/* Contexts: one per device, made current per thread. */
#define CTX_OF(d) ((CUcontext)(uintptr_t)(0xc0000 + (d)))
#define DEV_OF(c) ((int)((uintptr_t)(c) - 0xc0000))

API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CHECK_DEV(dev);
    *pctx = CTX_OF(dev);
    return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CHECK_DEV(dev);
    return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CHECK_DEV(dev);
    *flags = 0;
    *active = ctx_charged[dev] || cur_dev == dev;
    return CUDA_SUCCESS;
}

API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CHECK_DEV(dev);
    *pctx = CTX_OF(dev);
    cur_dev = dev;
    return CUDA_SUCCESS;
}

API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    if (cur_dev == DEV_OF(ctx)) cur_dev = -1;
    return ready();
}

API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r = ready();
    if (r) return r;
    if (!ctx) {
        cur_dev = -1;
        return CUDA_SUCCESS;
    }
    if (DEV_OF(ctx) < 0 || DEV_OF(ctx) >= cfg.count) return CUDA_ERROR_INVALID_CONTEXT;
    cur_dev = DEV_OF(ctx);
    return CUDA_SUCCESS;
}

API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = ready();
    if (r) return r;
    *pctx = cur_dev < 0 ? NULL : CTX_OF(cur_dev);
    return CUDA_SUCCESS;
}

/* A one-deep stack is all the tests need. */
static __thread int pushed_dev = -2;
API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult r = ready();
    if (r) return r;
    pushed_dev = cur_dev;
    cur_dev = DEV_OF(ctx);
    return CUDA_SUCCESS;
}

API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult r = ready();
    if (r) return r;
    if (pctx) *pctx = cur_dev < 0 ? NULL : CTX_OF(cur_dev);
    cur_dev = pushed_dev == -2 ? -1 : pushed_dev;
    pushed_dev = -2;
    return CUDA_SUCCESS;
}

API CUresult cuCtxGetDevice(CUdevice *device)
{
    CUresult r = ready();
    if (r) return r;
    if (cur_dev < 0) return CUDA_ERROR_INVALID_CONTEXT;
    *device = cur_dev;
    return CUDA_SUCCESS;
}

API CUresult cuMemGetInfo_v2(size_t *free_, size_t *total)
{
    int dev;
    CUresult r = current(&dev);
    if (r) return r;
    unsigned long long u = used[dev] + other_on(dev);
    *free_ = u >= cfg.total ? 0 : cfg.total - u;
    *total = cfg.total;
    return CUDA_SUCCESS;
}

API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CHECK_DEV(dev);
    *pool = (CUmemoryPool)(uintptr_t)(0x900000 + dev);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- allocation, every version */

static _Atomic unsigned int next_low = 0x10000000u;

API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    /* The 32-bit 2.0 ABI: served from a fake region below 4 GiB, so that a wrapper that wrote a
     * 64-bit pointer into the caller's 32-bit slot would be caught by the tests. */
    int dev;
    CUresult r = current(&dev);
    if (r) return r;
    if (!dptr || !bytesize) return CUDA_ERROR_INVALID_VALUE;
    unsigned int step = (bytesize + 0xfffffu) & ~0xfffffu;
    if (next_low + (unsigned long long)step > 0xf0000000ull) return CUDA_ERROR_OUT_OF_MEMORY;
    if ((r = charge(dev, bytesize))) return r;
    unsigned int addr = atomic_fetch_add(&next_low, step);
    remember(addr, bytesize, dev, B_DEVICE);
    *dptr = addr;
    return CUDA_SUCCESS;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) { return dev_alloc(dptr, bytesize, B_DEVICE); }

/* cuMemAllocPitch (the 32-bit 2.0 ABI) is deliberately NOT exported: a wrapped name the driver lacks. */
API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t width, size_t height, unsigned int elem)
{
    if (!pPitch || !width || !height || (elem != 4 && elem != 8 && elem != 16)) {
        CUresult r = ready();
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    }
    size_t pitch = (width + 511) & ~(size_t)511;
    CUresult r = dev_alloc(dptr, (unsigned long long)pitch * height, B_DEVICE);
    if (!r) *pPitch = pitch;
    return r;
}

API CUresult cuMemFree(CUdeviceptr_v1 dptr) { return dev_free(dptr); }
API CUresult cuMemFree_v2(CUdeviceptr dptr) { return dev_free(dptr); }

API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (flags != 1 && flags != 2) {
        CUresult r = ready();
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    }
    return dev_alloc(dptr, bytesize, B_MANAGED);
}

API CUresult cuMemAllocHost(void **pp, unsigned int bytesize) { return host_alloc(pp, bytesize); }
API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) { return host_alloc(pp, bytesize); }
API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) { return host_alloc(pp, bytesize); }

API CUresult cuMemFreeHost(void *p)
{
    CUresult r = ready();
    if (r) return r;
    struct block b;
    if (!forget((uintptr_t)p, &b) || b.kind != B_PINNED) return CUDA_ERROR_INVALID_VALUE;
    pinned_used -= b.size;
    munmap(p, b.size);
    return CUDA_SUCCESS;
}

API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s) { return dev_alloc(dptr, bytesize, B_DEVICE); }
API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s) { return dev_alloc(dptr, bytesize, B_DEVICE); }

API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream s)
{
    if (!pool) {
        CUresult r = ready();
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    }
    return dev_alloc(dptr, bytesize, B_DEVICE);
}

API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream s)
{
    return cuMemAllocFromPoolAsync(dptr, bytesize, pool, s);
}

API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) { return dev_free(dptr); }
API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) { return dev_free(dptr); }

API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                         unsigned long long flags)
{
    CUresult r = ready();
    if (r) return r;
    if (!handle || !prop || !size || flags || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    block_kind_t kind;
    int dev = -1;
    if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        dev = prop->location.id;
        if (dev < 0 || dev >= cfg.count) return CUDA_ERROR_INVALID_DEVICE;
        /* A fabric handle needs an IMEX channel; PyTorch asks for one first and falls back. */
        if ((prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) && !cfg.fabric) return CUDA_ERROR_NOT_PERMITTED;
        if ((r = charge(dev, size))) return r;
        kind = B_VMM_DEV;
    } else if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST || prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
        if (prop->requestedHandleTypes) return CUDA_ERROR_INVALID_VALUE; /* host memory is not IPC capable */
        if ((r = charge_pinned(size))) return r;
        kind = B_VMM_HOST;
    } else {
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsigned long long h = atomic_fetch_add(&next_handle, 1);
    remember(h, size, dev, kind);
    *handle = h;
    return CUDA_SUCCESS;
}

API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult r = ready();
    if (r) return r;
    struct block b;
    if (!forget(handle, &b) || (b.kind != B_VMM_DEV && b.kind != B_VMM_HOST)) return CUDA_ERROR_INVALID_VALUE;
    if (b.kind == B_VMM_DEV) used[b.dev] -= b.size;
    else pinned_used -= b.size;
    return CUDA_SUCCESS;
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { return ready(); }
API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return ready(); }
API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return ready(); }

API CUresult cuGetExportTable(const void **table, const void *id)
{
    /* The real runtime asks for private tables; a double has none. */
    if (table) *table = NULL;
    return CUDA_ERROR_NOT_FOUND;
}

/* ---------------------------------------------------------------- errors */

static const struct {
    int code;
    const char *name, *text;
} errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

API CUresult cuGetErrorName(CUresult e, const char **s)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)e) {
            *s = errors[i].name;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

API CUresult cuGetErrorString(CUresult e, const char **s)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)e) {
            *s = errors[i].text;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------- entry point access */

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status);

/* (base name, ABI version, per-thread-stream variant): what a lookup may pick. */
static const struct entry {
    const char *base;
    int version;
    int ptds;
    void *fn;
} table[] = {
#define E(base, ver, ptds, fn) {#base, ver, ptds, (void *)(fn)},
    E(cuInit, 2000, 0, cuInit) E(cuDriverGetVersion, 2020, 0, cuDriverGetVersion)
    E(cuDeviceGetCount, 2000, 0, cuDeviceGetCount) E(cuDeviceGet, 2000, 0, cuDeviceGet)
    E(cuDeviceGetName, 2000, 0, cuDeviceGetName) E(cuDeviceGetPCIBusId, 4010, 0, cuDeviceGetPCIBusId)
    E(cuDeviceGetUuid, 9020, 0, cuDeviceGetUuid) E(cuDeviceGetUuid, 11040, 0, cuDeviceGetUuid_v2)
    E(cuDeviceTotalMem, 3020, 0, cuDeviceTotalMem_v2)
    E(cuDevicePrimaryCtxRetain, 7000, 0, cuDevicePrimaryCtxRetain)
    E(cuDevicePrimaryCtxRelease, 11000, 0, cuDevicePrimaryCtxRelease_v2)
    E(cuDevicePrimaryCtxGetState, 7000, 0, cuDevicePrimaryCtxGetState)
    E(cuCtxCreate, 3020, 0, cuCtxCreate_v2) E(cuCtxDestroy, 4000, 0, cuCtxDestroy_v2)
    E(cuCtxSetCurrent, 4000, 0, cuCtxSetCurrent) E(cuCtxGetCurrent, 4000, 0, cuCtxGetCurrent)
    E(cuCtxPushCurrent, 4000, 0, cuCtxPushCurrent_v2) E(cuCtxPopCurrent, 4000, 0, cuCtxPopCurrent_v2)
    E(cuCtxGetDevice, 2000, 0, cuCtxGetDevice) E(cuMemGetInfo, 3020, 0, cuMemGetInfo_v2)
    E(cuDeviceGetDefaultMemPool, 11020, 0, cuDeviceGetDefaultMemPool)
    E(cuMemAlloc, 2000, 0, cuMemAlloc) E(cuMemAlloc, 3020, 0, cuMemAlloc_v2)
    E(cuMemAllocPitch, 3020, 0, cuMemAllocPitch_v2)
    E(cuMemFree, 2000, 0, cuMemFree) E(cuMemFree, 3020, 0, cuMemFree_v2)
    E(cuMemAllocHost, 2000, 0, cuMemAllocHost) E(cuMemAllocHost, 3020, 0, cuMemAllocHost_v2)
    E(cuMemFreeHost, 2000, 0, cuMemFreeHost) E(cuMemHostAlloc, 2020, 0, cuMemHostAlloc)
    E(cuMemAllocManaged, 6000, 0, cuMemAllocManaged)
    E(cuMemCreate, 10020, 0, cuMemCreate) E(cuMemRelease, 10020, 0, cuMemRelease)
    E(cuMemAllocAsync, 11020, 0, cuMemAllocAsync) E(cuMemAllocAsync, 11020, 1, cuMemAllocAsync_ptsz)
    E(cuMemAllocFromPoolAsync, 11020, 0, cuMemAllocFromPoolAsync)
    E(cuMemAllocFromPoolAsync, 11020, 1, cuMemAllocFromPoolAsync_ptsz)
    E(cuMemFreeAsync, 11020, 0, cuMemFreeAsync) E(cuMemFreeAsync, 11020, 1, cuMemFreeAsync_ptsz)
    E(cuMemcpyHtoD, 3020, 0, cuMemcpyHtoD_v2)
    E(cuMemcpyAsync, 4000, 0, cuMemcpyAsync) E(cuMemcpyAsync, 7000, 1, cuMemcpyAsync_ptsz)
    E(cuGetErrorName, 6000, 0, cuGetErrorName) E(cuGetErrorString, 6000, 0, cuGetErrorString)
    E(cuGetExportTable, 3000, 0, cuGetExportTable)
    E(cuGetProcAddress, 11030, 0, cuGetProcAddress) E(cuGetProcAddress, 12000, 0, cuGetProcAddress_v2)
#undef E
};

static CUdriverProcAddressQueryResult lookup(const char *symbol, int version, cuuint64_t flags, void **out)
{
    char key[160];
    snprintf(key, sizeof key, ",%s,", symbol);
    *out = NULL;
    if (strstr(cfg.hide, key)) return CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    /* The per-thread flag picks the _ptsz/_ptds variant where the base has one; otherwise (and for
     * DEFAULT, which in the driver means legacy) the plain ones. Among those, the newest ABI not
     * newer than the caller's version. */
    int want_ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0, has_ptds = 0, known = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].base, symbol) && table[i].ptds) has_ptds = 1;
    const struct entry *best = NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const struct entry *e = &table[i];
        if (strcmp(e->base, symbol)) continue;
        known = 1;
        if (e->ptds != (want_ptds && has_ptds)) continue;
        if (e->version <= version && (!best || e->version > best->version)) best = e;
    }
    if (!known) return CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!best) return CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    *out = best->fn;
    return CU_GET_PROC_ADDRESS_SUCCESS;
}

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    config();
    if (!symbol || !pfn || (flags & ~3ull)) return CUDA_ERROR_INVALID_VALUE;
    if (version > cfg.driver_version) {
        /* Documented: a caller newer than the driver gets an error, not a guess. */
        *pfn = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUdriverProcAddressQueryResult st = lookup(symbol, version, flags, pfn);
    if (cfg.trace) {
        /* Who asked: the runtime itself, or an interposer's wrapper in between. */
        Dl_info who;
        const char *from = dladdr(__builtin_return_address(0), &who) && who.dli_fname ? who.dli_fname : "?";
        fprintf(stderr, "fake-cuda: cuGetProcAddress(%s, %d, %llu) -> %p (%d) from %s\n", symbol, version,
                (unsigned long long)flags, *pfn, (int)st, strrchr(from, '/') ? strrchr(from, '/') + 1 : from);
    }
    if (status) *status = st;
    return CUDA_SUCCESS;
}

/* The 11.3 ABI: no status, and a miss is an error. */
API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    CUdriverProcAddressQueryResult st;
    CUresult r = cuGetProcAddress_v2(symbol, pfn, version, flags, &st);
    if (r) return r;
    return st == CU_GET_PROC_ADDRESS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
