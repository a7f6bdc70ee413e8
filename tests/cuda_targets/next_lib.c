/* Two libraries defining the same function: A finds B's with dlsym(RTLD_NEXT), which must keep
 * working through our dlsym hook (the meaning of RTLD_NEXT depends on the caller). */
#include <dlfcn.h>

#ifdef NEXT_LIB_A
int next_probe(void) { return 1; }
int via_next(void)
{
    int (*f)(void) = (int (*)(void))dlsym(RTLD_NEXT, "next_probe");
    return f ? f() : -1;
}
int via_next_v(void)
{
    /* dlvsym with the base version of an unversioned library. */
    int (*f)(void) = (int (*)(void))dlvsym(RTLD_NEXT, "next_probe", "NONE");
    return f ? f() : -1;
}
#else
int next_probe(void) { return 2; }
#endif
