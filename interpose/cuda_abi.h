/* The CUDA driver, runtime and NVML ABI as oomtrace uses it: types, constants and one list of every
 * entry point we wrap or call. Self-contained, so the library builds without the CUDA toolkit;
 * scripts/check-cuda-headers.sh compiles the same lists against the official headers (the names
 * here are the official ones) and compares sizes, offsets and constants, so a drift fails there.
 * Nothing here may be used for anything but declaring: no code, no data. */
#ifndef OT_CUDA_ABI_H
#define OT_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

/* The prototype check defines OT_CUDA_OFFICIAL_HEADERS after including cuda.h, cudaTypedefs.h,
 * cuda_runtime_api.h (and nvml.h where installed): then only the lists below are used. */
#ifndef OT_CUDA_OFFICIAL_HEADERS

/* ---------------------------------------------------------------- driver (cuda.h) */
#define CUDAAPI
typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef unsigned int CUdeviceptr_v1; /* the 32-bit ABI of the unsuffixed 2.0 entry points */
typedef unsigned long long CUdeviceptr_v2;
typedef CUdeviceptr_v2 CUdeviceptr;
typedef int CUdevice_v1;
typedef CUdevice_v1 CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef uint64_t cuuint64_t;
typedef unsigned long long CUmemGenericAllocationHandle_v1;
typedef CUmemGenericAllocationHandle_v1 CUmemGenericAllocationHandle;

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

typedef enum CUmemLocationType_enum {
    CU_MEM_LOCATION_TYPE_INVALID = 0x0,
    CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
    CU_MEM_LOCATION_TYPE_HOST = 0x2,
    CU_MEM_LOCATION_TYPE_HOST_NUMA = 0x3,
    CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 0x4,
    CU_MEM_LOCATION_TYPE_MAX = 0x7FFFFFFF
} CUmemLocationType;

typedef enum CUmemAllocationType_enum {
    CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
    CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
    CU_MEM_ALLOCATION_TYPE_MAX = 0x7FFFFFFF
} CUmemAllocationType;

typedef enum CUmemAllocationHandleType_enum {
    CU_MEM_HANDLE_TYPE_NONE = 0x0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
    CU_MEM_HANDLE_TYPE_FABRIC = 0x8,
    CU_MEM_HANDLE_TYPE_MAX = 0x7FFFFFFF
} CUmemAllocationHandleType;

typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;
} CUmemLocation_v1;
typedef CUmemLocation_v1 CUmemLocation;

typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp_v1;
typedef CUmemAllocationProp_v1 CUmemAllocationProp;

typedef enum CUdriverProcAddress_flags_enum {
    CU_GET_PROC_ADDRESS_DEFAULT = 0,
    CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1
} CUdriverProcAddress_flags;

typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;

/* ---------------------------------------------------------------- runtime (cuda_runtime_api.h) */
#define CUDARTAPI
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorCudartUnloading = 4,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorSymbolNotFound = 500,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
};
typedef enum cudaError cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUmemPoolHandle_st *cudaMemPool_t;

struct cudaPitchedPtr {
    void *ptr;
    size_t pitch;
    size_t xsize;
    size_t ysize;
};
struct cudaExtent {
    size_t width;
    size_t height;
    size_t depth;
};
enum cudaDriverEntryPointQueryResult {
    cudaDriverEntryPointSuccess = 0,
    cudaDriverEntryPointSymbolNotFound = 1,
    cudaDriverEntryPointVersionNotSufficent = 2 /* sic: the official spelling */
};
enum cudaGetDriverEntryPointFlags {
    cudaEnableDefault = 0x0,
    cudaEnableLegacyStream = 0x1,
    cudaEnablePerThreadDefaultStream = 0x2
};

/* ---------------------------------------------------------------- NVML (nvml.h) */
#define DECLDIR
typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;
typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;
#define NVML_VALUE_NOT_AVAILABLE (-1)

#endif /* !OT_CUDA_OFFICIAL_HEADERS */

/* ---------------------------------------------------------------- entry point lists
 * X(ret, symbol, base, version, sfx, params, args): `symbol` is the exported name; `base` and
 * `version` are what a cuGetProcAddress caller asks for (the version that introduced this ABI), sfx is
 * empty or _ptsz for the per-thread-default-stream variant. The official typedef of each entry is
 * PFN_<base>_v<version><sfx> in cudaTypedefs.h. */
#define OT_CU_WRAPPED(X)                                                                                      \
    X(CUresult, cuMemAlloc, cuMemAlloc, 2000, , (CUdeviceptr_v1 * dptr, unsigned int bytesize), (dptr, bytesize)) \
    X(CUresult, cuMemAlloc_v2, cuMemAlloc, 3020, , (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))     \
    X(CUresult, cuMemAllocPitch, cuMemAllocPitch, 2000, ,                                                        \
      (CUdeviceptr_v1 * dptr, unsigned int *pPitch, unsigned int WidthInBytes, unsigned int Height,             \
       unsigned int ElementSizeBytes),                                                                          \
      (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                                   \
    X(CUresult, cuMemAllocPitch_v2, cuMemAllocPitch, 3020, ,                                                     \
      (CUdeviceptr * dptr, size_t *pPitch, size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes),  \
      (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                                   \
    X(CUresult, cuMemFree, cuMemFree, 2000, , (CUdeviceptr_v1 dptr), (dptr))                                     \
    X(CUresult, cuMemFree_v2, cuMemFree, 3020, , (CUdeviceptr dptr), (dptr))                                     \
    X(CUresult, cuMemAllocHost, cuMemAllocHost, 2000, , (void **pp, unsigned int bytesize), (pp, bytesize))      \
    X(CUresult, cuMemAllocHost_v2, cuMemAllocHost, 3020, , (void **pp, size_t bytesize), (pp, bytesize))         \
    X(CUresult, cuMemFreeHost, cuMemFreeHost, 2000, , (void *p), (p))                                            \
    X(CUresult, cuMemHostAlloc, cuMemHostAlloc, 2020, , (void **pp, size_t bytesize, unsigned int Flags),        \
      (pp, bytesize, Flags))                                                                                    \
    X(CUresult, cuMemAllocManaged, cuMemAllocManaged, 6000, , (CUdeviceptr * dptr, size_t bytesize, unsigned int flags), \
      (dptr, bytesize, flags))                                                                                  \
    X(CUresult, cuMemCreate, cuMemCreate, 10020, ,                                                               \
      (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop, unsigned long long flags), \
      (handle, size, prop, flags))                                                                              \
    X(CUresult, cuMemRelease, cuMemRelease, 10020, , (CUmemGenericAllocationHandle handle), (handle))            \
    X(CUresult, cuMemAllocAsync, cuMemAllocAsync, 11020, , (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), \
      (dptr, bytesize, hStream))                                                                                \
    X(CUresult, cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, _ptsz,                                             \
      (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream))                       \
    X(CUresult, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, ,                                       \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream), (dptr, bytesize, pool, hStream)) \
    X(CUresult, cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, _ptsz,                             \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream), (dptr, bytesize, pool, hStream)) \
    X(CUresult, cuMemFreeAsync, cuMemFreeAsync, 11020, , (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))  \
    X(CUresult, cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, _ptsz, (CUdeviceptr dptr, CUstream hStream),         \
      (dptr, hStream))                                                                                          \
    X(CUresult, cuGetProcAddress, cuGetProcAddress, 11030, ,                                                     \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags), (symbol, pfn, cudaVersion, flags))   \
    X(CUresult, cuGetProcAddress_v2, cuGetProcAddress, 12000, ,                                                  \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus), \
      (symbol, pfn, cudaVersion, flags, symbolStatus))

/* Driver entry points oomtrace calls but does not wrap (device probe, error names). */
#define OT_CU_CALLED(X)                                                                                       \
    X(CUresult, cuInit, cuInit, 2000, , (unsigned int Flags), (Flags))                                           \
    X(CUresult, cuDriverGetVersion, cuDriverGetVersion, 2020, , (int *driverVersion), (driverVersion))           \
    X(CUresult, cuDeviceGetCount, cuDeviceGetCount, 2000, , (int *count), (count))                               \
    X(CUresult, cuDeviceGet, cuDeviceGet, 2000, , (CUdevice * device, int ordinal), (device, ordinal))           \
    X(CUresult, cuDeviceGetName, cuDeviceGetName, 2000, , (char *name, int len, CUdevice dev), (name, len, dev)) \
    X(CUresult, cuDeviceGetPCIBusId, cuDeviceGetPCIBusId, 4010, , (char *pciBusId, int len, CUdevice dev),       \
      (pciBusId, len, dev))                                                                                     \
    X(CUresult, cuDeviceGetUuid, cuDeviceGetUuid, 9020, , (CUuuid * uuid, CUdevice dev), (uuid, dev))            \
    X(CUresult, cuDeviceGetUuid_v2, cuDeviceGetUuid, 11040, , (CUuuid * uuid, CUdevice dev), (uuid, dev))        \
    X(CUresult, cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, , (size_t * bytes, CUdevice dev), (bytes, dev))     \
    X(CUresult, cuMemGetInfo_v2, cuMemGetInfo, 3020, , (size_t * free, size_t *total), (free, total))            \
    X(CUresult, cuCtxGetDevice, cuCtxGetDevice, 2000, , (CUdevice * device), (device))                           \
    X(CUresult, cuCtxGetCurrent, cuCtxGetCurrent, 4000, , (CUcontext * pctx), (pctx))                            \
    X(CUresult, cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, , (CUcontext ctx), (ctx))                           \
    X(CUresult, cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, , (CUcontext * pctx), (pctx))                         \
    X(CUresult, cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000, ,                                  \
      (CUdevice dev, unsigned int *flags, int *active), (dev, flags, active))                                   \
    X(CUresult, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, , (CUcontext * pctx, CUdevice dev),   \
      (pctx, dev))                                                                                              \
    X(CUresult, cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, , (CUdevice dev), (dev))         \
    X(CUresult, cuGetErrorName, cuGetErrorName, 6000, , (CUresult error, const char **pStr), (error, pStr))      \
    X(CUresult, cuGetErrorString, cuGetErrorString, 6000, , (CUresult error, const char **pStr), (error, pStr))

/* Runtime entry points we wrap: R(ret, symbol, base, params, args); a _ptsz variant has the ABI of
 * its base, which is what the check compares it with. */
#define OT_CUDART_WRAPPED(R)                                                                                  \
    R(cudaError_t, cudaMalloc, cudaMalloc, (void **devPtr, size_t size), (devPtr, size))                         \
    R(cudaError_t, cudaFree, cudaFree, (void *devPtr), (devPtr))                                                 \
    R(cudaError_t, cudaMallocManaged, cudaMallocManaged, (void **devPtr, size_t size, unsigned int flags),       \
      (devPtr, size, flags))                                                                                    \
    R(cudaError_t, cudaMallocPitch, cudaMallocPitch, (void **devPtr, size_t *pitch, size_t width, size_t height), \
      (devPtr, pitch, width, height))                                                                           \
    R(cudaError_t, cudaMalloc3D, cudaMalloc3D, (struct cudaPitchedPtr * pitchedDevPtr, struct cudaExtent extent), \
      (pitchedDevPtr, extent))                                                                                  \
    R(cudaError_t, cudaMallocHost, cudaMallocHost, (void **ptr, size_t size), (ptr, size))                       \
    R(cudaError_t, cudaHostAlloc, cudaHostAlloc, (void **pHost, size_t size, unsigned int flags),                \
      (pHost, size, flags))                                                                                     \
    R(cudaError_t, cudaFreeHost, cudaFreeHost, (void *ptr), (ptr))                                               \
    R(cudaError_t, cudaMallocAsync, cudaMallocAsync, (void **devPtr, size_t size, cudaStream_t hStream),         \
      (devPtr, size, hStream))                                                                                  \
    R(cudaError_t, cudaMallocAsync_ptsz, cudaMallocAsync, (void **devPtr, size_t size, cudaStream_t hStream),    \
      (devPtr, size, hStream))                                                                                  \
    R(cudaError_t, cudaMallocFromPoolAsync, cudaMallocFromPoolAsync,                                             \
      (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream), (ptr, size, memPool, stream))      \
    R(cudaError_t, cudaMallocFromPoolAsync_ptsz, cudaMallocFromPoolAsync,                                        \
      (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream), (ptr, size, memPool, stream))      \
    R(cudaError_t, cudaFreeAsync, cudaFreeAsync, (void *devPtr, cudaStream_t hStream), (devPtr, hStream))        \
    R(cudaError_t, cudaFreeAsync_ptsz, cudaFreeAsync, (void *devPtr, cudaStream_t hStream), (devPtr, hStream))   \
    R(cudaError_t, cudaGetDriverEntryPoint, cudaGetDriverEntryPoint,                                             \
      (const char *symbol, void **funcPtr, unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus), \
      (symbol, funcPtr, flags, driverStatus))                                                                   \
    R(cudaError_t, cudaGetDriverEntryPoint_ptsz, cudaGetDriverEntryPoint,                                        \
      (const char *symbol, void **funcPtr, unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus), \
      (symbol, funcPtr, flags, driverStatus))                                                                   \
    R(cudaError_t, cudaGetDriverEntryPointByVersion, cudaGetDriverEntryPointByVersion,                           \
      (const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,                  \
       enum cudaDriverEntryPointQueryResult *driverStatus),                                                     \
      (symbol, funcPtr, cudaVersion, flags, driverStatus))                                                      \
    R(cudaError_t, cudaGetDriverEntryPointByVersion_ptsz, cudaGetDriverEntryPointByVersion,                      \
      (const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,                  \
       enum cudaDriverEntryPointQueryResult *driverStatus),                                                     \
      (symbol, funcPtr, cudaVersion, flags, driverStatus))

/* Runtime entry points we call (on a failure, from the runtime that failed). */
#define OT_CUDART_CALLED(R)                                                                                   \
    R(cudaError_t, cudaGetDevice, cudaGetDevice, (int *device), (device))                                        \
    R(cudaError_t, cudaRuntimeGetVersion, cudaRuntimeGetVersion, (int *runtimeVersion), (runtimeVersion))        \
    R(const char *, cudaGetErrorName, cudaGetErrorName, (cudaError_t error), (error))

/* NVML entry points we call: N(ret, symbol, params). Which process-list call and struct, and why:
 * cuda_probe.c, nvml_processes(). */
#define OT_NVML_CALLED(N)                                                                                     \
    N(nvmlReturn_t, nvmlInit_v2, (void))                                                                         \
    N(nvmlReturn_t, nvmlShutdown, (void))                                                                        \
    N(const char *, nvmlErrorString, (nvmlReturn_t result))                                                      \
    N(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char *uuid, nvmlDevice_t *device))                        \
    N(nvmlReturn_t, nvmlDeviceGetHandleByPciBusId_v2, (const char *pciBusId, nvmlDevice_t *device))             \
    N(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t *memory))                        \
    N(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v2,                                                     \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v2_t *infos))                              \
    N(nvmlReturn_t, nvmlDeviceGetGraphicsRunningProcesses_v2,                                                    \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v2_t *infos))                              \
    N(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses,                                                        \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v1_t *infos))                              \
    N(nvmlReturn_t, nvmlDeviceGetGraphicsRunningProcesses,                                                       \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v1_t *infos))                              \
    N(nvmlReturn_t, nvmlSystemGetProcessName, (unsigned int pid, char *name, unsigned int length))

/* Function pointer types: ot_fn_<symbol> (not in the check, which has only the headers it includes). */
#ifndef OT_CUDA_OFFICIAL_HEADERS
#define OT_ABI_FN_TYPE7(ret, sym, base, ver, sfx, params, args) typedef ret (*ot_fn_##sym) params;
#define OT_ABI_FN_TYPE5(ret, sym, base, params, args) typedef ret (*ot_fn_##sym) params;
#define OT_ABI_FN_TYPE3(ret, sym, params) typedef ret (*ot_fn_##sym) params;
OT_CU_WRAPPED(OT_ABI_FN_TYPE7)
OT_CU_CALLED(OT_ABI_FN_TYPE7)
OT_CUDART_WRAPPED(OT_ABI_FN_TYPE5)
OT_CUDART_CALLED(OT_ABI_FN_TYPE5)
OT_NVML_CALLED(OT_ABI_FN_TYPE3)
#endif

#endif
