// e2e target (host_traps.sh, C++ operator new trap).
//   new_handler recover : caps its address space (RLIMIT_AS), keeps a 64 MiB reserve block and
//                         installs a new-handler that releases it; then asks operator new for
//                         100 MiB, which fails once, calls the handler, and succeeds on the retry.
//   new_handler throw   : new of an impossible size with no handler: std::bad_alloc is thrown and
//                         caught. Prints the same lines with or without oomtrace.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/resource.h>

#include "cap_as.h"

static char *reserve;
static int handler_calls;

static void release_reserve()
{
    handler_calls++;
    if (reserve) {
        delete[] reserve;
        reserve = nullptr;
    } else {
        std::set_new_handler(nullptr); // nothing left to give: let operator new throw
    }
}

static __attribute__((noinline)) char *grow_buffer(std::size_t n)
{
    char *p = new char[n];
    __asm__ volatile("" ::: "memory");
    return p;
}

static __attribute__((noinline)) char *impossible_buffer(std::size_t n)
{
    char *p = new char[n];
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "recover";
    if (!std::strcmp(mode, "recover")) {
        reserve = new char[64 << 20];
        std::memset(reserve, 1, 4096);
        // 60 MiB of headroom: 100 MiB fails; with the 64 MiB reserve given back it fits.
        if (cap_address_space(60L << 20)) return 3;
        std::set_new_handler(release_reserve);
        try {
            char *big = grow_buffer(100u << 20);
            std::memset(big, 2, 4096);
            std::printf("recovered: 100 MiB after %d new-handler call(s), reserve %s\n", handler_calls,
                        reserve ? "kept" : "released");
            delete[] big;
        } catch (const std::bad_alloc &) {
            std::printf("not recovered: bad_alloc after %d new-handler call(s)\n", handler_calls);
            return 1;
        }
        return 0;
    }
    if (!std::strcmp(mode, "throw")) {
        volatile std::size_t huge = (std::size_t)1 << 60;
        try {
            char *p = impossible_buffer(huge);
            std::printf("unexpected: got %p\n", (void *)p);
            return 1;
        } catch (const std::bad_alloc &e) {
            std::printf("caught std::bad_alloc: %s\n", e.what());
        }
        std::fprintf(stderr, "program continues after bad_alloc\n");
        return 7;
    }
    std::fprintf(stderr, "usage: new_handler recover|throw\n");
    return 2;
}
