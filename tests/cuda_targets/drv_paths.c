/* The driver API called directly (a program linked with -lcuda): every allocation entry point,
 * including the virtual memory API's physical allocations (device and host located), with known
 * amounts live at a snapshot, then all freed.
 *   drv_paths        the normal run
 *   drv_paths oom    device, VMM and pool allocations that cannot fit
 *   drv_paths vlimit an address-space limit (ulimit -v) after cuInit: a host malloc fails, and the
 *                    driver's virtual reservation is what fills the address space */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "oomtrace.h"
#include "../targets/cap_as.h"

#define MiB (1ull << 20)
#define CK(x)                                                                 \
    do {                                                                      \
        CUresult e_ = (x);                                                    \
        if (e_ != CUDA_SUCCESS) {                                             \
            printf("FAILED %s: %d\n", #x, (int)e_);                           \
            return 1;                                                         \
        }                                                                     \
    } while (0)

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmemAllocationProp on_dev;
    memset(&on_dev, 0, sizeof on_dev);
    on_dev.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    on_dev.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    on_dev.location.id = 0;
    CUmemAllocationProp on_host = on_dev;
    on_host.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CUmemoryPool pool;
    CK(cuDeviceGetDefaultMemPool(&pool, dev));
    CUstream s = NULL;
    if (argc > 1 && !strcmp(argv[1], "vlimit")) {
        CUdeviceptr d;
        CK(cuMemAlloc(&d, 64 * MiB));
        if (cap_address_space(16 * MiB)) return 2;
        void *p = malloc(64 * MiB);
        printf("malloc(%llu) -> %s\n", 64 * MiB, p ? "ptr" : "NULL");
        free(p);
        CK(cuMemFree(d));
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "oom")) {
        CUdeviceptr d;
        CUmemGenericAllocationHandle h;
        /* PyTorch's expandable segments ask for a fabric handle first and, refused, fall back. */
        CUmemAllocationProp fabric = on_dev;
        fabric.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
        CUresult rf = cuMemCreate(&h, 20 * MiB, &fabric, 0);
        printf("cuMemCreate fabric %d\n", (int)rf);
        if (rf != CUDA_SUCCESS) {
            fabric.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
            CK(cuMemCreate(&h, 20 * MiB, &fabric, 0));
        }
        CK(cuMemRelease(h));
        printf("cuMemAlloc %d\n", (int)cuMemAlloc(&d, 1ull << 46));
        printf("cuMemCreate %d\n", (int)cuMemCreate(&h, 1ull << 46, &on_dev, 0));
        printf("cuMemAllocFromPoolAsync_ptsz %d\n", (int)cuMemAllocFromPoolAsync_ptsz(&d, 1ull << 46, pool, s));
        return 0;
    }
    CUdeviceptr d1, d2, pitched, managed, a1, a2, a3;
    size_t pitch;
    void *h1, *h2;
    CUmemGenericAllocationHandle v1, v2;
    CK(cuMemAlloc(&d1, 64 * MiB));
    CK(cuMemAlloc(&d2, 64 * MiB));
    CK(cuMemFree(d2));
    CK(cuMemAllocPitch(&pitched, &pitch, 1000, 100, 4));
    CK(cuMemAllocManaged(&managed, 16 * MiB, 1));
    CK(cuMemAllocHost(&h1, 8 * MiB));
    CK(cuMemHostAlloc(&h2, 4 * MiB, 0));
    CK(cuMemCreate(&v1, 48 * MiB, &on_dev, 0));
    CK(cuMemCreate(&v2, 4 * MiB, &on_host, 0));
    CK(cuMemAllocAsync(&a1, 8 * MiB, s));
    CK(cuMemAllocAsync_ptsz(&a2, 8 * MiB, s));
    CK(cuMemAllocFromPoolAsync(&a3, 8 * MiB, pool, s));
    if (oomtrace_available()) oomtrace_report("driver paths live");
    CK(cuMemFree(d1));
    CK(cuMemFree(pitched));
    CK(cuMemFree(managed));
    CK(cuMemFreeHost(h1));
    CK(cuMemFreeHost(h2));
    CK(cuMemRelease(v1));
    CK(cuMemRelease(v2));
    CK(cuMemFreeAsync(a1, s));
    CK(cuMemFreeAsync_ptsz(a2, s));
    CK(cuMemFreeAsync(a3, s));
    if (oomtrace_available()) oomtrace_report("driver paths freed");
    printf("done\n");
    return 0;
}
