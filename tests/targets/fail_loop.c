/* e2e target (host_traps.sh, launcher.sh): makes N allocations fail (a request larger than any
 * address space, so it fails everywhere without limits), prints how many were handed back as NULL
 * with errno ENOMEM, and exits 0.
 *   fail_loop [N] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static __attribute__((noinline)) void *try_huge(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        errno = 0;
        void *p = try_huge(((size_t)1 << 50) + (size_t)i);
        if (!p && errno == ENOMEM) failed++;
        free(p);
    }
    printf("%d of %d allocations failed with ENOMEM\n", failed, n);
    return 0;
}
