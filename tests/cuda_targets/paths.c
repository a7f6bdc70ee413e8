/* Every runtime allocation path (device, managed, pitch, 3D, pinned, stream-ordered and the _ptsz
 * variants), leaving known amounts live, then a snapshot report; then everything freed and a second
 * snapshot. Built against the shared runtime double (recorded at the runtime level) and the static
 * one (recorded at the driver level, reached through cuGetProcAddress).
 *   paths          the normal run (expected live bytes: tests/e2e/cuda_paths.sh)
 *   paths oom      every path asks for more than the device has; prints each error */
#include <stdio.h>
#include <string.h>

#include "cuda_runtime_api.h"
#include "oomtrace.h"

#define MiB (1ull << 20)
#define CK(x)                                                                 \
    do {                                                                      \
        cudaError_t e_ = (x);                                                 \
        if (e_ != cudaSuccess) {                                              \
            printf("FAILED %s: %d\n", #x, (int)e_);                           \
            return 1;                                                         \
        }                                                                     \
    } while (0)

static int oom(void)
{
    const size_t huge = 1ull << 46; /* 64 TiB: more than any device */
    void *p;
    size_t pitch;
    struct cudaPitchedPtr pp;
    cudaStream_t s = NULL;
    cudaMemPool_t pool = NULL;
    /* Without a driver these fail too: go on, each allocation must still return the error. */
    printf("cudaStreamCreate %d\n", (int)cudaStreamCreate(&s));
    printf("cudaDeviceGetDefaultMemPool %d\n", (int)cudaDeviceGetDefaultMemPool(&pool, 0));
    printf("cudaMalloc %d\n", (int)cudaMalloc(&p, huge));
    printf("cudaMallocManaged %d\n", (int)cudaMallocManaged(&p, huge, cudaMemAttachGlobal));
    printf("cudaMallocPitch %d\n", (int)cudaMallocPitch(&p, &pitch, 1ull << 24, 1ull << 22));
    printf("cudaMalloc3D %d\n", (int)cudaMalloc3D(&pp, make_cudaExtent(1ull << 20, 1ull << 13, 1ull << 13)));
    printf("cudaMallocHost %d\n", (int)cudaMallocHost(&p, huge << 4));
    printf("cudaMallocAsync_ptsz %d\n", (int)cudaMallocAsync_ptsz(&p, huge, s));
    printf("cudaMallocFromPoolAsync %d\n", (int)cudaMallocFromPoolAsync(&p, huge, pool, s));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "oom")) return oom();
    void *d1, *d2, *m, *pitched, *h1, *h2, *a1, *a2, *a3;
    size_t pitch;
    struct cudaPitchedPtr pp;
    cudaStream_t s;
    cudaMemPool_t pool;
    CK(cudaFree(0)); /* the usual "initialise the context" idiom: nothing to forget */
    CK(cudaStreamCreate(&s));
    CK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CK(cudaMalloc(&d1, 64 * MiB));
    CK(cudaMalloc(&d2, 64 * MiB));
    CK(cudaFree(d2));
    CK(cudaMallocPitch(&pitched, &pitch, 1000, 100)); /* 1024 x 100 on the double */
    CK(cudaMalloc3D(&pp, make_cudaExtent(1000, 10, 10)));
    CK(cudaMallocManaged(&m, 32 * MiB, cudaMemAttachGlobal));
    memset(m, 1, 4096); /* managed memory is host-accessible */
    CK(cudaMallocHost(&h1, 8 * MiB));
    CK(cudaHostAlloc(&h2, 4 * MiB, cudaHostAllocDefault));
    CK(cudaMallocAsync(&a1, 16 * MiB, s));
    CK(cudaMallocAsync_ptsz(&a2, 16 * MiB, s));
    CK(cudaMallocFromPoolAsync(&a3, 8 * MiB, pool, s));
    CK(cudaFreeAsync_ptsz(a2, s));
    printf("pitch %zu pitched3d %zu\n", pitch, pp.pitch);
    if (oomtrace_available()) oomtrace_report("all paths live");
    CK(cudaFree(d1));
    CK(cudaFree(pitched));
    CK(cudaFree(pp.ptr));
    CK(cudaFree(m));
    CK(cudaFreeHost(h1));
    CK(cudaFreeHost(h2));
    CK(cudaFreeAsync(a1, s));
    CK(cudaFreeAsync(a3, s));
    if (oomtrace_available()) oomtrace_report("all freed");
    printf("done\n");
    return 0;
}
