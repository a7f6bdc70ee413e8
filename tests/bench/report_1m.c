/* Bench workload: the cost of writing a failure report in a big process. Makes ALLOCS live blocks
 * spread evenly over SITES distinct call stacks (each stack is a path through 16 never-inlined
 * functions, 5 levels deep: 16^5 paths), then asks for 1 PiB, which fails, and prints how long that
 * one failing malloc took: under oomtrace that is the report (run with stacks=all so that every
 * block has its site). usage: report_1m [ALLOCS] [SITES]. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "now.h"

#define LEVELS 5

typedef void (*level_fn)(unsigned level, unsigned site, unsigned n);
static const level_fn table[16];
static void **ptrs;
static long nptrs;
static volatile uint64_t sink;

/* Each function differs (its own constant and block size) so identical-code folding cannot merge
 * them: the return address inside each must stay distinct. The asm after the call keeps the call
 * from becoming a tail call, which would drop the frame. */
#define LEVEL_FN(k)                                                                                  \
    static __attribute__((noinline)) void f##k(unsigned level, unsigned site, unsigned n)           \
    {                                                                                                \
        sink += k;                                                                                   \
        if (level == LEVELS) {                                                                       \
            for (unsigned i = 0; i < n; i++) {                                                       \
                unsigned char *p = malloc(24 + k);                                                   \
                if (!p) abort();                                                                     \
                p[0] = (unsigned char)(k + i);                                                       \
                ptrs[nptrs++] = p;                                                                   \
            }                                                                                        \
        } else {                                                                                     \
            table[(site >> (4 * level)) & 15](level + 1, site, n);                                   \
        }                                                                                            \
        __asm__ volatile("" ::: "memory");                                                           \
    }
LEVEL_FN(0) LEVEL_FN(1) LEVEL_FN(2) LEVEL_FN(3) LEVEL_FN(4) LEVEL_FN(5) LEVEL_FN(6) LEVEL_FN(7)
LEVEL_FN(8) LEVEL_FN(9) LEVEL_FN(10) LEVEL_FN(11) LEVEL_FN(12) LEVEL_FN(13) LEVEL_FN(14) LEVEL_FN(15)
static const level_fn table[16] = {f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15};

int main(int argc, char **argv)
{
    long allocs = argc > 1 ? atol(argv[1]) : 1000000;
    long sites = argc > 2 ? atol(argv[2]) : 100000;
    if (sites < 1 || sites > (1l << (4 * LEVELS)) || allocs < sites) {
        fprintf(stderr, "report_1m: need 1 <= SITES <= %ld and ALLOCS >= SITES\n", 1l << (4 * LEVELS));
        return 2;
    }
    ptrs = mmap(NULL, (size_t)allocs * sizeof *ptrs, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptrs == MAP_FAILED) {
        perror("report_1m: mmap");
        return 1;
    }
    /* Site s is the path whose digit at level l is bit group l of s (level 0 picks the first
     * function); allocations are spread so that sites get ALLOCS/SITES blocks each, +1 for some. */
    double t0 = now();
    for (long s = 0; s < sites; s++) {
        unsigned n = (unsigned)(allocs / sites + (s < allocs % sites));
        table[s & 15](1, (unsigned)s, n);
    }
    double t1 = now();
    errno = 0;
    void *big = malloc((size_t)1 << 50); /* 1 PiB: fails on every machine */
    int err = errno;
    double t2 = now();
    if (big) {
        fprintf(stderr, "report_1m: a 1 PiB malloc succeeded?\n");
        free(big);
    }
    uint64_t sum = 0;
    for (long i = 0; i < nptrs; i++) {
        sum += *(unsigned char *)ptrs[i];
        free(ptrs[i]);
    }
    printf("@failing_malloc_ms %.3f\n@failing_errno %d\n@alloc_s %.4f\n@live %ld\n@sites %ld\n", (t2 - t1) * 1e3, err,
           t1 - t0, nptrs, sites);
    printf("@checksum %llu\n@ops %ld\n", (unsigned long long)(sum + sink), nptrs);
    return 0;
}
