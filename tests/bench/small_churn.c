/* Bench workload: a malloc-saturated thread. Many small, short-lived blocks (8..512 bytes, mostly
 * under 128) through a ring of 256 slots, so every step is one free and one malloc and the
 * allocator's fast path is all the program does. With THREADS > 1, that many threads each do
 * OPS / THREADS steps on rings of their own at once (thread_churn: the many threads of an ML
 * program, each allocating for itself). usage: small_churn [OPS] [THREADS]; prints a checksum. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "now.h"

#define SLOTS 256
#define MAX_THREADS 256

typedef struct {
    long ops;
    uint64_t seed, sum;
    int failed;
} churn_t;

static void *churn(void *arg)
{
    churn_t *c = arg;
    unsigned char *ring[SLOTS] = {0};
    uint64_t rng = c->seed, sum = 0;
    for (long i = 0; i < c->ops; i++) {
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
            c->failed = 1;
            return NULL;
        }
        p[0] = (unsigned char)i;
        p[size - 1] = (unsigned char)r;
        ring[slot] = p;
    }
    for (unsigned i = 0; i < SLOTS; i++) {
        if (ring[i]) sum += ring[i][0];
        free(ring[i]);
    }
    c->sum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 10000000;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "small_churn: THREADS must be 1..%d\n", MAX_THREADS);
        return 2;
    }
    static churn_t c[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    uint64_t sum = 0;
    for (int t = 0; t < threads; t++) {
        c[t].ops = ops / threads;
        c[t].seed = 0x2545f4914f6cdd1dull + 0x9e3779b97f4a7c15ull * (uint64_t)t;
    }
    if (threads == 1) {
        churn(&c[0]); /* the single-thread workload stays on the main thread */
    } else {
        for (int t = 0; t < threads; t++)
            if (pthread_create(&th[t], NULL, churn, &c[t])) {
                fprintf(stderr, "small_churn: pthread_create failed\n");
                return 1;
            }
        for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    }
    long done = 0;
    for (int t = 0; t < threads; t++) {
        if (c[t].failed) return 1;
        sum += c[t].sum;
        done += c[t].ops;
    }
    printf("@checksum %llu\n@ops %ld\n", (unsigned long long)sum, done);
    return 0;
}
