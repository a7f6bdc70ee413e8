/* Bench workload: a malloc-saturated single thread. Many small, short-lived blocks (8..512 bytes,
 * mostly under 128) through a ring of 256 slots, so every step is one free and one malloc and the
 * allocator's fast path is all the program does. usage: small_churn [OPS]; prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 256

static unsigned char *ring[SLOTS];

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 10000000;
    uint64_t rng = 0x2545f4914f6cdd1dull, sum = 0;
    for (long i = 0; i < ops; i++) {
        uint64_t r = xorshift(&rng);
        unsigned slot = (unsigned)(r & (SLOTS - 1));
        /* 7 in 8 blocks are 8..127 bytes, the rest 128..511: the shape of a typical C/C++ heap. */
        size_t size = (r >> 8 & 7) ? 8 + (r >> 16) % 120 : 128 + (r >> 16) % 384;
        if (ring[slot]) {
            sum += ring[slot][0];
            free(ring[slot]);
        }
        unsigned char *p = malloc(size);
        if (!p) {
            fprintf(stderr, "small_churn: malloc(%zu) failed\n", size);
            return 1;
        }
        p[0] = (unsigned char)i;
        p[size - 1] = (unsigned char)r;
        ring[slot] = p;
    }
    for (unsigned i = 0; i < SLOTS; i++) {
        if (ring[i]) sum += ring[i][0];
        free(ring[i]);
    }
    printf("@checksum %llu\n@ops %ld\n", (unsigned long long)sum, ops);
    return 0;
}
