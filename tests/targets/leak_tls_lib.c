/* A library with a dynamic TLS variable (dlopen'ed by leaky's tls_dyn mode: its TLS block is
 * malloc'd by __tls_get_addr and reached only through the DTV). As a program it says what it is. */
#include <stdlib.h>

#ifdef OT_SHARED_LIB
__thread void *leak_tls_lib_held; /* non-static: the store must stay */
__attribute__((noinline)) void *leak_tls_lib_hold(size_t n)
{
    leak_tls_lib_held = malloc(n);
    return NULL;
}
#else
#include <stdio.h>
int main(void)
{
    puts("leak_tls_lib: built as libleak_tls.so for tests/e2e/leak_check.sh");
    return 0;
}
#endif
