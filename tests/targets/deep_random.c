/* e2e target (unwind_verify.sh): allocations from random depths of a recursion through four
 * functions (rbp saved as data, rbp as the frame pointer, rbp passed on), 0 to 149 frames deep:
 * deeper than the walker remembers (80 frames) and than the deepest stack kept (64), so
 * consecutive stacks share long runs of frames, join at every depth and get cut at every limit,
 * on the way down and on the way back up. Some blocks live on in a
 * ring, the rest are freed at once.
 * usage: deep_random [ITERATIONS]. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define RING 4096
static void *ring[RING];
static unsigned long rng = 88172645463325252ul;

static unsigned long next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void keep(size_t size)
{
    unsigned k = (unsigned)(next() % RING);
    free(ring[k]);
    ring[k] = malloc(size);
}

__attribute__((noinline, optimize("omit-frame-pointer"))) static int down_a(int d);
__attribute__((noinline, optimize("omit-frame-pointer"))) static int down_d(int d);

/* A frame whose CFA is computed from rbp (a frame pointer, and alloca of a random size, so that no
 * rule from rsp could find its caller), reached through down_d, which leaves rbp alone: a frame's
 * rbp then matters to the walk through the frames that pass it on, and a walk cut among them, or
 * one that ends before them, does not need it. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static int down_c(int d)
{
    volatile char *p = __builtin_alloca(16 + next() % 96);
    p[0] = (char)d;
    int r = d <= 0 ? (keep(48), 1) : down_d(d - 1);
    if (next() % 7 == 0) keep(56);
    return r + p[0];
}

/* rbp passed on: no callee-saved register of its own. */
__attribute__((noinline, optimize("omit-frame-pointer"))) static int down_d(int d)
{
    if (d <= 0) {
        keep(64);
        return 2;
    }
    return (next() & 1 ? down_c(d - 1) : down_a(d - 1)) + 1;
}

/* A frame with locals of its own, so the two functions' frames differ in size. Both functions
 * save rbp (as an ordinary register) with their CFA from rsp: what the walker checks for the step
 * into a frame then depends on whether it has stepped on from that frame. */
__attribute__((noinline, optimize("omit-frame-pointer"))) static int down_b(int d)
{
    volatile char pad[48];
    pad[0] = (char)d;
    __asm__ volatile("" ::: "rbp");
    if (d <= 0) {
        keep(16 + next() % 200);
        return pad[0];
    }
    return down_a(d - 1) + pad[0];
}

__attribute__((noinline, optimize("omit-frame-pointer"))) static int down_a(int d)
{
    __asm__ volatile("" ::: "rbp");
    if (d <= 0) {
        void *p = malloc(24);
        free(p);
        return 1;
    }
    if (next() % 5 == 0) keep(32);
    unsigned long pick = next() % 4;
    int r = pick == 0 ? down_b(d - 1) : pick == 1 ? down_a(d - 1) : pick == 2 ? down_c(d - 1) : down_d(d - 1);
    /* and on the way back up: a stack shallower than the one before, which it joins where that
     * one's frames end (a cut walk) and steps on from there */
    if (next() % 5 == 0) keep(40);
    return r + 1;
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 20000;
    long sum = 0;
    for (long i = 0; i < iterations; i++) sum += down_a((int)(next() % 150));
    for (int k = 0; k < RING; k++) free(ring[k]);
    printf("%ld\n", sum);
    return 0;
}
