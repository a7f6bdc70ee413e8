/* e2e target (host_traps.sh, RTLD_DEEPBIND trap): dlopens LIB with RTLD_DEEPBIND|RTLD_NOW and passes
 * heap blocks across: the library's blocks freed and reallocated by the program, the program's
 * blocks freed and reallocated by the library. Prints what it did and, when oomtrace is loaded,
 * the oomtrace_get_totals() delta around the exchange (everything is freed again by then: an exact
 * tracker reports 0 blocks and 0 bytes).
 *   deep_main LIB */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oomtrace.h"

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: deep_main LIB\n"); return 2; }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_DEEPBIND);
    if (!h) { printf("dlopen failed: %s\n", dlerror()); return 1; }
    void *(*deep_alloc)(size_t) = (void *(*)(size_t))dlsym(h, "deep_alloc");
    void (*deep_free)(void *) = (void (*)(void *))dlsym(h, "deep_free");
    void *(*deep_grow)(void *, size_t) = (void *(*)(void *, size_t))dlsym(h, "deep_grow");
    unsigned (*deep_churn)(int) = (unsigned (*)(int))dlsym(h, "deep_churn");
    if (!deep_alloc || !deep_free || !deep_grow || !deep_churn) { printf("dlsym failed\n"); return 1; }
    int have = oomtrace_available();
    oomtrace_totals_t t0 = {0}, t1 = {0}, t2 = {0};
    printf("churn %u\n", deep_churn(50)); /* warm-up, and any first-use allocations of stdio */
    if (have) oomtrace_get_totals(&t0);
    unsigned long sum = 0;
    for (int round = 0; round < 200; round++) {
        size_t n = 16 + (size_t)round * 37;
        /* library -> program: allocated in the library, grown and freed here */
        char *a = deep_alloc(n);
        if (!a) return 3;
        sum += (unsigned char)a[n - 1];
        char *a2 = realloc(a, n * 2);
        if (!a2) return 3;
        free(a2);
        /* program -> library: allocated here, grown and freed there */
        char *b = malloc(n);
        if (!b) return 3;
        memset(b, 'm', n);
        char *b2 = deep_grow(b, n * 3);
        if (!b2) return 3;
        sum += (unsigned char)b2[0];
        deep_free(b2);
        /* program -> library: freed there directly */
        char *c = calloc(1, n);
        if (!c) return 3;
        deep_free(c);
        /* library -> program: freed here directly */
        free(deep_alloc(n + 1));
    }
    if (have) oomtrace_get_totals(&t1);
    /* Plain allocations after the exchange: the tracker must still count them exactly. */
    void *keep[100];
    for (int i = 0; i < 100; i++) keep[i] = malloc(1000);
    if (have) oomtrace_get_totals(&t2);
    for (int i = 0; i < 100; i++) free(keep[i]);
    printf("sum %lu churn %u\n", sum, deep_churn(100));
    dlclose(h);
    if (have) {
        fprintf(stderr, "exchange delta count=%lld bytes=%lld\n", (long long)(t1.host_count - t0.host_count),
                (long long)(t1.host_bytes - t0.host_bytes));
        fprintf(stderr, "after delta count=%lld bytes=%lld\n", (long long)(t2.host_count - t1.host_count),
                (long long)(t2.host_bytes - t1.host_bytes));
    }
    return 0;
}
