/* e2e target (host_traps.sh, dlsym trap): 4 threads call dlopen/dlsym/dlvsym/dlerror/dlclose at the
 * same time, first from a constructor (during start-up) and again from main. dlsym and dlerror
 * allocate (calloc/malloc) through whatever malloc is interposed.
 *   dlsym_threads
 * Prints "constructor: ok" and "main: ok" (or what went wrong); exit status 0 only if both are ok. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_int errors;

static void *lookups(void *arg)
{
    for (int i = 0; i < 40; i++) {
        void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
        if (!h) { atomic_fetch_add(&errors, 1); continue; }
        double (*cosp)(double) = (double (*)(double))dlsym(h, "cos");
        if (!cosp || cosp(0.0) != 1.0) atomic_fetch_add(&errors, 1);
        if (!dlsym(RTLD_DEFAULT, "malloc") || !dlsym(RTLD_NEXT, "free")) atomic_fetch_add(&errors, 1);
        if (!dlvsym(RTLD_DEFAULT, "calloc", "GLIBC_2.2.5")) atomic_fetch_add(&errors, 1);
        /* A failing lookup: dlerror() hands back a malloc'ed message. */
        if (dlsym(h, "no_such_symbol_oomtrace") || !dlerror()) atomic_fetch_add(&errors, 1);
        void *p = malloc(16 + (size_t)i);
        free(p);
        dlclose(h);
    }
    return NULL;
}

static int run_threads(void)
{
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&th[i], NULL, lookups, (void *)(intptr_t)i)) return -1;
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    return atomic_exchange(&errors, 0);
}

static int ctor_result = -2;

__attribute__((constructor)) static void early(void)
{
    ctor_result = run_threads();
}

int main(void)
{
    int m = run_threads();
    if (ctor_result) printf("constructor: %d errors\n", ctor_result);
    else printf("constructor: ok\n");
    if (m) printf("main: %d errors\n", m);
    else printf("main: ok\n");
    return ctor_result || m ? 1 : 0;
}
