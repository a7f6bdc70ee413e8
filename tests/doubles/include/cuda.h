/* Test-double stand-in for the toolkit's cuda.h: the driver API subset that oomtrace's doubles,
 * targets and examples use, declared on oomtrace's own ABI definitions (interpose/cuda_abi.h, checked
 * against the real header by scripts/check-cuda-headers.sh). Used only where the toolkit is absent
 * or a test wants the doubles. */
#ifndef OT_DOUBLES_CUDA_H
#define OT_DOUBLES_CUDA_H
#include "cuda_abi.h"
#ifdef __cplusplus
extern "C" {
#endif
#define OT_DECL7(ret, sym, base, ver, sfx, params, args) ret sym params;
OT_CU_WRAPPED(OT_DECL7)
OT_CU_CALLED(OT_DECL7)
#undef OT_DECL7
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
CUresult cuGetExportTable(const void **table, const void *id);
#ifndef OT_FAKE_CUDA_IMPL
/* What the real header does: programs name the base, the linker sees the current ABI. */
#define cuMemAlloc cuMemAlloc_v2
#define cuMemAllocPitch cuMemAllocPitch_v2
#define cuMemFree cuMemFree_v2
#define cuMemAllocHost cuMemAllocHost_v2
#define cuMemGetInfo cuMemGetInfo_v2
#define cuDeviceTotalMem cuDeviceTotalMem_v2
#define cuCtxCreate cuCtxCreate_v2
#define cuCtxDestroy cuCtxDestroy_v2
#define cuCtxPushCurrent cuCtxPushCurrent_v2
#define cuCtxPopCurrent cuCtxPopCurrent_v2
#define cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease_v2
#define cuMemcpyHtoD cuMemcpyHtoD_v2
#define cuGetProcAddress cuGetProcAddress_v2
#define CUDA_VERSION 13000
#endif
#ifdef __cplusplus
}
#endif
#endif
