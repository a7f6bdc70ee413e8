/* Bench workload: large blocks (64 KiB .. 1 MiB, all at or above the default stack_min_bytes, so
 * oomtrace takes a full stack for each) requested ~30 frames deep, where unwinding cost shows.
 * A few blocks stay live in a small ring. usage: deep_large [OPS]; prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LIVE 32
#define BATCH 64

static unsigned char *ring[LIVE];
static uint64_t sum, rng = 0x853c49e6748fea9bull;
static long done;

static __attribute__((noinline)) void allocate_batch(long n)
{
    for (long i = 0; i < n; i++, done++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        size_t size = (64 * 1024) << (rng >> 40) % 5;       /* 64K, 128K, 256K, 512K, 1M */
        size += (rng >> 20) % 4096;
        unsigned slot = (unsigned)(rng & (LIVE - 1));
        if (ring[slot]) {
            sum += ring[slot][0];
            free(ring[slot]);
        }
        unsigned char *p = malloc(size);
        if (!p) {
            fprintf(stderr, "deep_large: malloc(%zu) failed\n", size);
            exit(1);
        }
        p[0] = (unsigned char)done;
        ring[slot] = p;
    }
}

/* Recursion that the compiler can neither flatten nor turn into a loop. */
static __attribute__((noinline)) uint64_t descend(int depth, long n)
{
    if (depth == 0) {
        allocate_batch(n);
        return 1;
    }
    uint64_t r = descend(depth - 1, n) + (uint64_t)depth;
    __asm__ volatile("" : "+r"(r)::"memory");
    return r;
}

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 200000;
    uint64_t frames = 0;
    for (long b = 0; done < ops; b++) {
        long n = ops - done < BATCH ? ops - done : BATCH;
        frames += descend(28 + (int)(b % 5), n); /* depth 28..32: a handful of distinct sites */
    }
    for (unsigned i = 0; i < LIVE; i++) {
        if (ring[i]) sum += ring[i][0];
        free(ring[i]);
    }
    printf("@checksum %llu\n@ops %ld\n", (unsigned long long)(sum + frames), ops);
    return 0;
}
