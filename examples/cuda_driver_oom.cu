// The driver API path (no runtime): a program that creates its own context and fills the device in
// 1 GiB blocks with cuMemAlloc until the driver says CUDA_ERROR_OUT_OF_MEMORY. Under oomtrace the
// failure gets a report in which this process holds most of the device, with the call site that
// holds it. Builds with nvcc (-lcuda) for a real GPU and with g++ against the test doubles.
//
//   cuda_driver_oom            fill the device, report the failure, exit 1
//   cuda_driver_oom --leak N   allocate N MiB in 8 blocks, free half, and ask oomtrace for a
//                              snapshot before exiting: the live half is the leak
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "oomtrace.h" // the opt-in API; weak, so the program also runs without oomtrace

#define DRV_CHECK(call)                                                                   \
    do {                                                                                  \
        CUresult r_ = (call);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                         \
            const char *n_ = nullptr;                                                     \
            cuGetErrorName(r_, &n_);                                                      \
            std::fprintf(stderr, "%s failed: %s (%d)\n", #call, n_ ? n_ : "?", (int)r_); \
            std::exit(2);                                                                 \
        }                                                                                 \
    } while (0)

static std::vector<CUdeviceptr> keep;

static CUresult grab(size_t bytes)
{
    CUdeviceptr d;
    CUresult r = cuMemAlloc(&d, bytes);
    if (r == CUDA_SUCCESS) keep.push_back(d);
    return r;
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    DRV_CHECK(cuInit(0));
    DRV_CHECK(cuDeviceGet(&dev, 0));
    // The primary context (what the runtime uses): the same call in every CUDA version, where
    // cuCtxCreate became cuCtxCreate_v4 with a parameter struct in CUDA 13.
    DRV_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    DRV_CHECK(cuCtxSetCurrent(ctx));
    if (argc > 2 && !std::strcmp(argv[1], "--leak")) {
        size_t block = (std::strtoull(argv[2], nullptr, 10) << 20) / 8;
        for (int i = 0; i < 8; i++) DRV_CHECK(grab(block));
        for (int i = 0; i < 8; i += 2) DRV_CHECK(cuMemFree(keep[i]));
        std::printf("leaving %zu MiB allocated\n", (block * 4) >> 20);
        if (oomtrace_available()) oomtrace_report("device leak check at exit");
        return 0;
    }
    size_t free_b = 0, total_b = 0;
    DRV_CHECK(cuMemGetInfo(&free_b, &total_b));
    std::printf("device 0: %zu MiB free of %zu MiB\n", free_b >> 20, total_b >> 20);
    size_t gib = 0;
    for (;;) {
        CUresult r = grab((size_t)1 << 30);
        if (r != CUDA_SUCCESS) {
            const char *name = nullptr;
            cuGetErrorName(r, &name);
            std::printf("cuMemAlloc failed after %zu GiB: %s (%d)\n", gib, name ? name : "?", (int)r);
            return 1;
        }
        gib++;
    }
}
