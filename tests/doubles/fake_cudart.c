/* Test double of the CUDA runtime. Like the real libcudart (11.3 and later) it reaches the driver only
 * through cuGetProcAddress: it dlopens libcuda.so.1, dlsyms cuGetProcAddress_v2 (or the 11.3
 * cuGetProcAddress), looks "cuGetProcAddress" up through itself and uses that from then on, then
 * resolves every driver function it needs by base name and CUDA version. Built twice: as a shared
 * library (symbols versioned libcudart.so.13, as the real one) and as a static archive linked into
 * a program, as nvcc does by default. Never calls a driver symbol by name. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_runtime_api.h"

#define API __attribute__((visibility("default")))
#define CUDART_VERSION 13000

static struct {
    pthread_once_t once;
    cudaError_t init_error;
    ot_fn_cuGetProcAddress_v2 gpa;
    ot_fn_cuInit init;
    ot_fn_cuDeviceGetCount count;
    ot_fn_cuDevicePrimaryCtxRetain retain;
    CUresult (*set_current)(CUcontext);
    ot_fn_cuMemGetInfo_v2 mem_info;
    ot_fn_cuMemAlloc_v2 alloc;
    ot_fn_cuMemAllocPitch_v2 alloc_pitch;
    ot_fn_cuMemFree_v2 free_;
    ot_fn_cuMemAllocManaged managed;
    ot_fn_cuMemAllocHost_v2 alloc_host;
    ot_fn_cuMemHostAlloc host_alloc;
    ot_fn_cuMemFreeHost free_host;
    ot_fn_cuMemAllocAsync alloc_async[2];  /* [0] legacy stream, [1] per-thread (_ptsz) */
    ot_fn_cuMemAllocFromPoolAsync alloc_pool[2];
    ot_fn_cuMemFreeAsync free_async[2];
    CUresult (*default_pool)(CUmemoryPool *, CUdevice);
    ot_fn_cuDriverGetVersion driver_version;
} rt = {.once = PTHREAD_ONCE_INIT};

static __thread int cur_device;
static __thread int ctx_device = -1;
static __thread cudaError_t last_error;

static cudaError_t from_driver(CUresult r)
{
    switch ((int)r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return cudaErrorInsufficientDriver;
    default: return cudaErrorUnknown;
    }
}

static void *driver(const char *name, cuuint64_t flags)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    if (rt.gpa(name, &p, CUDART_VERSION, flags, &st) != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS) return NULL;
    return p;
}

static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        rt.init_error = cudaErrorInsufficientDriver;
        return;
    }
    rt.gpa = (ot_fn_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2");
    if (!rt.gpa) {
        rt.init_error = cudaErrorInsufficientDriver;
        return;
    }
    /* The lookup of the lookup: from here on only what the driver hands out is used. */
    void *self = driver("cuGetProcAddress", CU_GET_PROC_ADDRESS_DEFAULT);
    if (self) rt.gpa = (ot_fn_cuGetProcAddress_v2)self;
    const cuuint64_t L = CU_GET_PROC_ADDRESS_LEGACY_STREAM, P = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    rt.init = driver("cuInit", L);
    rt.count = driver("cuDeviceGetCount", L);
    rt.retain = driver("cuDevicePrimaryCtxRetain", L);
    rt.set_current = driver("cuCtxSetCurrent", L);
    rt.mem_info = driver("cuMemGetInfo", L);
    rt.alloc = driver("cuMemAlloc", L);
    rt.alloc_pitch = driver("cuMemAllocPitch", L);
    rt.free_ = driver("cuMemFree", L);
    rt.managed = driver("cuMemAllocManaged", L);
    rt.alloc_host = driver("cuMemAllocHost", L);
    rt.host_alloc = driver("cuMemHostAlloc", L);
    rt.free_host = driver("cuMemFreeHost", L);
    for (int i = 0; i < 2; i++) {
        rt.alloc_async[i] = driver("cuMemAllocAsync", i ? P : L);
        rt.alloc_pool[i] = driver("cuMemAllocFromPoolAsync", i ? P : L);
        rt.free_async[i] = driver("cuMemFreeAsync", i ? P : L);
    }
    rt.default_pool = driver("cuDeviceGetDefaultMemPool", L);
    rt.driver_version = driver("cuDriverGetVersion", L);
    if (!rt.init || !rt.alloc || !rt.free_ || !rt.retain || !rt.set_current) {
        rt.init_error = cudaErrorInsufficientDriver;
        return;
    }
    rt.init_error = from_driver(rt.init(0));
}

static cudaError_t fail(cudaError_t e)
{
    if (e) last_error = e;
    return e;
}

/* Lazily initialise, and make the current device's primary context current on this thread. */
static cudaError_t enter(void)
{
    pthread_once(&rt.once, load);
    if (rt.init_error) return fail(rt.init_error);
    if (ctx_device != cur_device) {
        CUcontext c;
        CUresult r = rt.retain(&c, cur_device);
        if (!r) r = rt.set_current(c);
        if (r) return fail(from_driver(r));
        ctx_device = cur_device;
    }
    return cudaSuccess;
}

#define ENTER() do { cudaError_t e_ = enter(); if (e_) return e_; } while (0)
#define CALL(expr) return fail(from_driver(expr))

API cudaError_t cudaMalloc(void **p, size_t n)
{
    ENTER();
    if (!p) return fail(cudaErrorInvalidValue);
    CALL(rt.alloc((CUdeviceptr *)p, n));
}

API cudaError_t cudaFree(void *p)
{
    ENTER();
    CALL(rt.free_((CUdeviceptr)(uintptr_t)p));
}

API cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags)
{
    ENTER();
    if (!rt.managed) return fail(cudaErrorNotSupported);
    CALL(rt.managed((CUdeviceptr *)p, n, flags));
}

API cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
    ENTER();
    CALL(rt.alloc_pitch((CUdeviceptr *)p, pitch, width, height, 16));
}

API cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pp, struct cudaExtent e)
{
    ENTER();
    if (!pp) return fail(cudaErrorInvalidValue);
    CUdeviceptr d;
    size_t pitch;
    CUresult r = rt.alloc_pitch(&d, &pitch, e.width, e.height * e.depth, 16);
    if (r) return fail(from_driver(r));
    pp->ptr = (void *)(uintptr_t)d;
    pp->pitch = pitch;
    pp->xsize = e.width;
    pp->ysize = e.height;
    return cudaSuccess;
}

API cudaError_t cudaMallocHost(void **p, size_t n)
{
    ENTER();
    CALL(rt.alloc_host(p, n));
}

API cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
    ENTER();
    CALL(rt.host_alloc(p, n, flags));
}

API cudaError_t cudaFreeHost(void *p)
{
    ENTER();
    CALL(rt.free_host(p));
}

static cudaError_t malloc_async(int ptds, void **p, size_t n, cudaStream_t s)
{
    ENTER();
    if (!rt.alloc_async[ptds]) return fail(cudaErrorNotSupported);
    CALL(rt.alloc_async[ptds]((CUdeviceptr *)p, n, s));
}

static cudaError_t malloc_pool(int ptds, void **p, size_t n, cudaMemPool_t pool, cudaStream_t s)
{
    ENTER();
    if (!rt.alloc_pool[ptds]) return fail(cudaErrorNotSupported);
    CALL(rt.alloc_pool[ptds]((CUdeviceptr *)p, n, pool, s));
}

static cudaError_t free_async(int ptds, void *p, cudaStream_t s)
{
    ENTER();
    if (!rt.free_async[ptds]) return fail(cudaErrorNotSupported);
    CALL(rt.free_async[ptds]((CUdeviceptr)(uintptr_t)p, s));
}

API cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) { return malloc_async(0, p, n, s); }
API cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s) { return malloc_async(1, p, n, s); }
API cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s) { return malloc_pool(0, p, n, pool, s); }
API cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool, cudaStream_t s) { return malloc_pool(1, p, n, pool, s); }
API cudaError_t cudaFreeAsync(void *p, cudaStream_t s) { return free_async(0, p, s); }
API cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s) { return free_async(1, p, s); }

API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    ENTER();
    if (!rt.default_pool) return fail(cudaErrorNotSupported);
    CALL(rt.default_pool((CUmemoryPool *)pool, device));
}

static cudaError_t entry_point(const char *symbol, void **fn, unsigned int version, unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status)
{
    pthread_once(&rt.once, load);
    if (rt.init_error && !rt.gpa) return fail(rt.init_error);
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = rt.gpa(symbol, fn, (int)version, flags, &st);
    if (status) *status = (enum cudaDriverEntryPointQueryResult)st;
    if (r) return fail(from_driver(r));
    return st == CU_GET_PROC_ADDRESS_SUCCESS ? cudaSuccess : fail(cudaErrorSymbolNotFound);
}

API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                        enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, fn, CUDART_VERSION, flags, status);
}
API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, fn, CUDART_VERSION, flags ? flags : cudaEnablePerThreadDefaultStream, status);
}
API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                                 unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, fn, version, flags, status);
}
API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fn, unsigned int version,
                                                      unsigned long long flags,
                                                      enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(symbol, fn, version, flags ? flags : cudaEnablePerThreadDefaultStream, status);
}

API cudaError_t cudaSetDevice(int device)
{
    pthread_once(&rt.once, load);
    if (rt.init_error) return fail(rt.init_error);
    int n = 0;
    rt.count(&n);
    if (device < 0 || device >= n) return fail(cudaErrorInvalidDevice);
    cur_device = device;
    return cudaSuccess;
}

API cudaError_t cudaGetDevice(int *device)
{
    pthread_once(&rt.once, load);
    if (rt.init_error) return fail(rt.init_error);
    *device = cur_device;
    return cudaSuccess;
}

API cudaError_t cudaGetDeviceCount(int *count)
{
    pthread_once(&rt.once, load);
    if (rt.init_error) {
        *count = 0;
        return fail(rt.init_error);
    }
    CALL(rt.count(count));
}

API cudaError_t cudaMemGetInfo(size_t *free_, size_t *total)
{
    ENTER();
    CALL(rt.mem_info(free_, total));
}

API cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

API cudaError_t cudaDriverGetVersion(int *v)
{
    pthread_once(&rt.once, load);
    *v = 0;
    if (rt.driver_version) rt.driver_version(v);
    return cudaSuccess;
}

API cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

API cudaError_t cudaPeekAtLastError(void) { return last_error; }

API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    ENTER();
    if (kind == cudaMemcpyHostToHost) memmove(dst, src, n);
    return cudaSuccess;
}

API cudaError_t cudaMemset(void *p, int v, size_t n)
{
    ENTER();
    return cudaSuccess;
}

API cudaError_t cudaDeviceSynchronize(void)
{
    ENTER();
    return cudaSuccess;
}

API cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    ENTER();
    static int streams;
    *s = (cudaStream_t)(uintptr_t)(0x5000 + __atomic_add_fetch(&streams, 1, __ATOMIC_RELAXED));
    return cudaSuccess;
}

API cudaError_t cudaStreamDestroy(cudaStream_t s) { return cudaSuccess; }
API cudaError_t cudaStreamSynchronize(cudaStream_t s) { return cudaSuccess; }

static const struct {
    int code;
    const char *name, *text;
} errors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {500, "cudaErrorSymbolNotFound", "named symbol not found"},
    {801, "cudaErrorNotSupported", "operation not supported"},
    {999, "cudaErrorUnknown", "unknown error"},
};

API const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)e) return errors[i].name;
    return "cudaErrorUnknown";
}

API const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)e) return errors[i].text;
    return "unknown error";
}
