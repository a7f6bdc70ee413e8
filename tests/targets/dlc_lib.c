/* e2e helper (host_traps.sh, unwinder vs loader lock), built twice by tests/targets/cxx.mk as
 * build/targets/libdlca.so (DLC_VARIANT=1) and libdlcb.so (DLC_VARIANT=2): different code at the
 * same offsets, so an unwinder cache that survives a dlclose describes the wrong code when the
 * other library is mapped at the same address. Its functions allocate, so that stacks captured
 * inside them run through this library's frames. (The generic target rule also builds it as a
 * program: the main() below only says what it is.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DLC_VARIANT
#define DLC_VARIANT 1
#endif

#if DLC_VARIANT == 2
/* Shifts the code below, and gives this variant a different frame layout. */
__attribute__((noinline)) int dlc_pad(int x)
{
    volatile char buf[512];
    for (int i = 0; i < 512; i++) buf[i] = (char)(x + i);
    return buf[x & 511] + buf[(x * 7) & 511];
}
#endif

static __attribute__((noinline)) void *dlc_inner(size_t n)
{
    volatile char frame[64 * DLC_VARIANT];
    frame[0] = (char)n;
    void *p = malloc(n + (size_t)frame[0] * 0);
    if (p) memset(p, DLC_VARIANT, n < 64 ? n : 64);
    return p;
}

/* Allocates a few blocks (one big enough to always get a stack) and frees them. */
__attribute__((noinline)) int dlc_work(int k)
{
    void *a = dlc_inner(100 + (size_t)k % 50);
    void *b = dlc_inner(70000);
    void *c = calloc(3, 33);
    int ok = a && b && c;
    free(a);
    free(b);
    free(c);
    return ok ? DLC_VARIANT : -1;
}

#ifndef OT_SHARED_LIB
int main(void)
{
    puts("dlc_lib: this is a shared library for host_traps.sh (build/targets/libdlca.so, libdlcb.so)");
    return 0;
}
#endif
