/* Test-double stand-in for the toolkit's cuda_runtime_api.h (see cuda.h beside it). */
#ifndef OT_DOUBLES_CUDA_RUNTIME_API_H
#define OT_DOUBLES_CUDA_RUNTIME_API_H
#include "cuda_abi.h"
#ifdef __cplusplus
extern "C" {
#endif
#define OT_DECL5(ret, sym, base, params, args) ret sym params;
OT_CUDART_WRAPPED(OT_DECL5)
OT_CUDART_CALLED(OT_DECL5)
#undef OT_DECL5
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
#define cudaMemAttachGlobal 0x01
#define cudaHostAllocDefault 0x00
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaMemGetInfo(size_t *free, size_t *total);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t error);

cudaError_t cudaDriverGetVersion(int *driverVersion);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemset(void *devPtr, int value, size_t count);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamCreate(cudaStream_t *pStream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device);
static inline struct cudaExtent make_cudaExtent(size_t w, size_t h, size_t d)
{
    struct cudaExtent e = {w, h, d};
    return e;
}
#ifdef __cplusplus
}
#endif
#endif
