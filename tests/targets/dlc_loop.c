/* e2e target (host_traps.sh, unwinder vs loader lock): one thread dlopens and dlcloses two small
 * libraries alternately (calling into each, which allocates) while 3 threads allocate without
 * pause. Under stacks=all every allocation unwinds, so unwinding (libunwind, dl_iterate_phdr)
 * races with the loader's lock and with code being unmapped.
 *   dlc_loop LIB_A LIB_B [ITERATIONS]
 * Prints "dlopen/dlclose N ok" and the allocator threads' work; exit status 0 when all went well. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int stop;
static atomic_long allocs;

static __attribute__((noinline)) void *alloc_leaf(size_t n, int big)
{
    return big ? malloc(65536 + n) : malloc(n);
}

static void *churn(void *arg)
{
    uint64_t s = 0x2545F4914F6CDD1Dull * ((uintptr_t)arg + 1);
    void *slots[16] = {0};
    long n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        unsigned i = (unsigned)(s % 16);
        free(slots[i]);
        slots[i] = alloc_leaf(1 + (s >> 16) % 1000, (s >> 40) % 8 == 0);
        n++;
    }
    for (int i = 0; i < 16; i++) free(slots[i]);
    atomic_fetch_add(&allocs, n);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: dlc_loop LIB_A LIB_B [ITERATIONS]\n"); return 2; }
    int iters = argc > 3 ? atoi(argv[3]) : 200;
    pthread_t th[3];
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, churn, (void *)(intptr_t)i);
    int ok = 0;
    for (int k = 0; k < iters; k++) {
        const char *lib = argv[1 + (k & 1)];
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!h) { printf("dlopen %s: %s\n", lib, dlerror()); break; }
        int (*work)(int) = (int (*)(int))dlsym(h, "dlc_work");
        int r = work ? work(k) : -2;
        if (r == 1 + (k & 1)) ok++;
        else printf("iteration %d: dlc_work returned %d\n", k, r);
        if (dlclose(h)) { printf("dlclose: %s\n", dlerror()); break; }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    printf("dlopen/dlclose %d of %d ok\n", ok, iters);
    printf("allocator threads: %s\n", atomic_load(&allocs) > 0 ? "allocated" : "did nothing");
    return ok == iters ? 0 : 1;
}
