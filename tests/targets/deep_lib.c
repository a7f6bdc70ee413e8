/* e2e helper (host_traps.sh, RTLD_DEEPBIND trap), built as build/targets/libdeep.so by
 * tests/targets/cxx.mk. dlopen'ed with RTLD_DEEPBIND, its own references to malloc/free/realloc
 * bind inside its local scope (libc) first, not to a preloaded interposer: pointers cross
 * allocators in both directions. (The generic target rule also builds it as a program: the main()
 * below only says what it is.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returns a fresh block of n bytes, allocated inside the library. */
void *deep_alloc(size_t n)
{
    char *p = malloc(n);
    if (p) memset(p, 'd', n);
    return p;
}

/* Frees a block that the program allocated. */
void deep_free(void *p)
{
    free(p);
}

/* Grows a block that the program allocated; returns the new block. */
void *deep_grow(void *p, size_t n)
{
    return realloc(p, n);
}

/* Allocates, uses and frees internally; returns a checksum. */
unsigned deep_churn(int rounds)
{
    unsigned sum = 0;
    for (int i = 0; i < rounds; i++) {
        unsigned char *p = calloc(1, 100 + (size_t)i);
        if (!p) return 0;
        p[i % 100] = (unsigned char)i;
        unsigned char *q = realloc(p, 300 + (size_t)i);
        if (!q) { free(p); return 0; }
        sum += q[i % 100];
        free(q);
    }
    return sum;
}

#ifndef OT_SHARED_LIB
int main(void)
{
    puts("deep_lib: this is a shared library for host_traps.sh (build/targets/libdeep.so)");
    return 0;
}
#endif
