/* e2e helper (launcher.sh), built as build/targets/libpreload_hello.so by tests/targets/cxx.mk: a
 * library that says hello on stderr from a constructor, to see that an existing LD_PRELOAD is kept.
 * (The generic target rule also builds it as a program: the main() below only says what it is.) */
#include <stdio.h>

__attribute__((constructor)) static void preload_hello(void)
{
    fprintf(stderr, "preload_hello: constructor ran\n");
}

#ifndef OT_SHARED_LIB
int main(void)
{
    puts("preload_hello: this is a shared library for launcher.sh (build/targets/libpreload_hello.so)");
    return 0;
}
#endif
