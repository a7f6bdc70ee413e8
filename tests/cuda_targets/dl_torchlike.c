/* PyTorch's way to the driver: dlopen("libcuda.so.1", RTLD_LOCAL) and dlsym(handle, "cuMemAlloc_v2")
 * (and friends), plus the cuGetProcAddress it finds the same way. Prints what each lookup answered
 * (found/null, never addresses), so that a run with the preload can be compared with one without.
 *   dl_torchlike        allocates 3 x 100 MiB (frees one) and 50 MiB, then snapshots
 *   dl_torchlike oom    one allocation that cannot fit */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "oomtrace.h"

#define MiB (1ull << 20)
#define SAY(name, p) printf("%s=%s\n", name, (p) ? "found" : "null")

int main(int argc, char **argv)
{
    SAY("default_before_dlopen", dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("no libcuda: %s\n", dlerror());
        return 2;
    }
    SAY("default_after_dlopen", dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    ot_fn_cuInit init = (ot_fn_cuInit)dlsym(h, "cuInit");
    ot_fn_cuDevicePrimaryCtxRetain retain = (ot_fn_cuDevicePrimaryCtxRetain)dlsym(h, "cuDevicePrimaryCtxRetain");
    CUresult (*set_current)(CUcontext) = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
    ot_fn_cuMemAlloc_v2 alloc = (ot_fn_cuMemAlloc_v2)dlsym(h, "cuMemAlloc_v2");
    ot_fn_cuMemFree_v2 release = (ot_fn_cuMemFree_v2)dlsym(h, "cuMemFree_v2");
    ot_fn_cuGetProcAddress_v2 gpa = (ot_fn_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2");
    SAY("cuMemAlloc_v2", alloc);
    SAY("cuMemFree_v2", release);
    SAY("cuGetProcAddress_v2", gpa);
    /* A name we wrap that this driver does not export: must stay NULL. */
    SAY("cuMemAllocPitch_v1", dlsym(h, "cuMemAllocPitch"));
    SAY("cuMemFree_dlvsym", dlvsym(h, "cuMemFree_v2", "ANY_VERSION"));
    SAY("not_a_symbol", dlsym(h, "cuMemAllocNoSuchThing"));
    if (!init || !retain || !set_current || !alloc || !release || !gpa) return 3;
    CUcontext ctx;
    if (init(0) || retain(&ctx, 0) || set_current(ctx)) return 4;
    /* The lookup of the lookup, then an allocation function through it. */
    void *gpa2 = NULL, *alloc2 = NULL;
    /* Each call is made before its status is printed (the order in which a call's arguments are
     * evaluated is unspecified), and a status the lookup did not write prints as -1. */
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    CUresult rc = gpa("cuGetProcAddress", &gpa2, 12000, 0, &st);
    printf("gpa_self rc=%d st=%d\n", (int)rc, (int)st);
    if (!gpa2) return 5;
    st = (CUdriverProcAddressQueryResult)-1;
    rc = ((ot_fn_cuGetProcAddress_v2)gpa2)("cuMemAlloc", &alloc2, 12000, 0, &st);
    printf("gpa_alloc rc=%d st=%d\n", (int)rc, (int)st);
    if (!alloc2) return 6;
    if (argc > 1 && !strcmp(argv[1], "oom")) {
        CUdeviceptr d;
        printf("oom rc=%d\n", (int)alloc(&d, 1ull << 46));
        return 0;
    }
    CUdeviceptr d[4];
    for (int i = 0; i < 3; i++)
        if (alloc(&d[i], 100 * MiB)) return 7;
    if (((ot_fn_cuMemAlloc_v2)alloc2)(&d[3], 50 * MiB)) return 8;
    if (release(d[1])) return 9;
    if (oomtrace_available()) oomtrace_report("torch-like");
    printf("done\n");
    return 0;
}
