/* Driver entry points obtained every documented way, each checked to be the right ABI variant:
 * cudaGetDriverEntryPoint[ByVersion] (default, legacy, per-thread flags; old and new versions),
 * cuGetProcAddress through itself, and names the driver does not have. Prints rc/status per lookup
 * (never addresses) so runs with and without the preload can be compared.
 *   entry_points        lookups, then one allocation through each variant, then a snapshot
 *   entry_points oom    each variant asked for too much: the reports name the variant */
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "cuda_runtime_api.h"
#include "oomtrace.h"

#define MiB (1ull << 20)

static void *lookup(const char *what, const char *sym, int version, unsigned long long flags)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
    cudaError_t r = version ? cudaGetDriverEntryPointByVersion(sym, &fn, (unsigned)version, flags, &st)
                            : cudaGetDriverEntryPoint(sym, &fn, flags, &st);
    printf("%s rc=%d status=%d fn=%s\n", what, (int)r, (int)st, fn ? "found" : "null");
    return fn;
}

int main(int argc, char **argv)
{
    int oom = argc > 1 && !strcmp(argv[1], "oom");
    void *p;
    if (cudaMalloc(&p, 1 * MiB) != cudaSuccess) return 2; /* initialises the runtime */
    cudaFree(p);
    ot_fn_cuMemAlloc_v2 a_new = (ot_fn_cuMemAlloc_v2)lookup("alloc_default", "cuMemAlloc", 0, cudaEnableDefault);
    ot_fn_cuMemAlloc a_old = (ot_fn_cuMemAlloc)lookup("alloc_2000", "cuMemAlloc", 2000, cudaEnableDefault);
    ot_fn_cuMemAllocAsync async_legacy =
        (ot_fn_cuMemAllocAsync)lookup("async_legacy", "cuMemAllocAsync", 12000, cudaEnableLegacyStream);
    ot_fn_cuMemAllocAsync async_ptds =
        (ot_fn_cuMemAllocAsync)lookup("async_ptds", "cuMemAllocAsync", 12000, cudaEnablePerThreadDefaultStream);
    ot_fn_cuGetProcAddress_v2 gpa =
        (ot_fn_cuGetProcAddress_v2)lookup("gpa_self", "cuGetProcAddress", 0, cudaEnableDefault);
    lookup("hidden", "cuMemAllocManaged", 0, cudaEnableDefault);   /* OT_FAKE_CUDA_HIDE'd by the test */
    lookup("unknown", "cuNoSuchFunction", 0, cudaEnableDefault);
    lookup("too_new", "cuMemAlloc", 99000, cudaEnableDefault);       /* newer than the driver */
    lookup("too_old", "cuMemAllocAsync", 11000, cudaEnableDefault);  /* before it existed */
    ot_fn_cuMemAllocFromPoolAsync pool_ptds = NULL;
    if (gpa) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult st;
        CUresult r = gpa("cuMemAllocFromPoolAsync", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
        printf("gpa_pool_ptds rc=%d status=%d fn=%s\n", (int)r, (int)st, fn ? "found" : "null");
        pool_ptds = (ot_fn_cuMemAllocFromPoolAsync)fn;
    }
    if (!a_new || !a_old || !async_legacy || !async_ptds || !pool_ptds) return 3;
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, 0) != cudaSuccess) return 4;
    size_t n = oom ? 1ull << 46 : 4 * MiB;
    CUdeviceptr d;
    /* The 32-bit ABI writes 4 bytes: the canary after them must survive. */
    struct {
        CUdeviceptr_v1 ptr;
        unsigned int canary;
    } old = {0, 0xC0FFEEu};
    /* The call before the look at the canary: a call's arguments are evaluated in no fixed order. */
    CUresult rc_old = a_old(&old.ptr, oom ? 0xF0000000u : 2 * MiB);
    printf("old rc=%d canary=%s\n", (int)rc_old, old.canary == 0xC0FFEEu ? "intact" : "clobbered");
    printf("new rc=%d\n", (int)a_new(&d, n));
    printf("legacy rc=%d\n", (int)async_legacy(&d, n, NULL));
    printf("ptds rc=%d\n", (int)async_ptds(&d, n, NULL));
    printf("pool_ptds rc=%d\n", (int)pool_ptds(&d, n, (CUmemoryPool)pool, NULL));
    if (!oom && oomtrace_available()) oomtrace_report("entry points");
    return 0;
}
