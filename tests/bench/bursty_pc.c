/* Bench workload: a bursty producer/consumer. THREADS / 2 producer-consumer pairs; each producer
 * allocates small blocks (16..255 bytes) in bursts of 256..16384 and hands each burst over a queue
 * to its consumer, which frees the whole burst at once. The live count swings between a few
 * hundred and tens of thousands of blocks many times a second, and every free is of a block
 * another thread allocated. usage: bursty_pc [THREADS] [BLOCKS_PER_PRODUCER]; prints a checksum. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "now.h"

#define MAX_PAIRS 32
#define BURST_MAX 16384
#define QB 4 /* bursts in flight per pair (power of two) */

typedef struct {
    unsigned char *p[BURST_MAX];
    long n;
} burst_t;

typedef struct {
    _Alignas(64) _Atomic long head; /* written by the consumer */
    _Alignas(64) _Atomic long tail; /* written by the producer */
    burst_t b[QB];
    uint64_t sum;
} pair_t;

static pair_t *pairs;
static long blocks;

static void *producer(void *arg)
{
    pair_t *q = arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(q - pairs + 1);
    for (long made = 0; made < blocks;) {
        long t = atomic_load_explicit(&q->tail, memory_order_relaxed);
        while (t - atomic_load_explicit(&q->head, memory_order_acquire) == QB) sched_yield();
        burst_t *b = &q->b[t & (QB - 1)];
        long n = 256 + (long)(xorshift(&rng) % (BURST_MAX - 255));
        if (n > blocks - made) n = blocks - made;
        for (long i = 0; i < n; i++) {
            uint64_t r = xorshift(&rng);
            unsigned char *p = malloc(16 + (r >> 20) % 240);
            if (!p) {
                fprintf(stderr, "bursty_pc: malloc failed\n");
                exit(1);
            }
            p[0] = (unsigned char)r;
            b->p[i] = p;
        }
        b->n = n;
        made += n;
        atomic_store_explicit(&q->tail, t + 1, memory_order_release);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    pair_t *q = arg;
    uint64_t sum = 0;
    for (long freed = 0; freed < blocks;) {
        long h = atomic_load_explicit(&q->head, memory_order_relaxed);
        while (h == atomic_load_explicit(&q->tail, memory_order_acquire)) sched_yield();
        burst_t *b = &q->b[h & (QB - 1)];
        for (long i = 0; i < b->n; i++) {
            sum += b->p[i][0];
            free(b->p[i]);
        }
        freed += b->n;
        atomic_store_explicit(&q->head, h + 1, memory_order_release);
    }
    q->sum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    blocks = argc > 2 ? atol(argv[2]) : 5000000;
    if (n < 2 || n % 2 || n / 2 > MAX_PAIRS || blocks < 1) {
        fprintf(stderr, "usage: bursty_pc [THREADS: even, 2..%d] [BLOCKS_PER_PRODUCER]\n", 2 * MAX_PAIRS);
        return 2;
    }
    int np = n / 2;
    pairs = calloc((size_t)np, sizeof *pairs);
    if (!pairs) return 1;
    pthread_t t[2 * MAX_PAIRS];
    double t0 = now();
    for (int i = 0; i < np; i++)
        if (pthread_create(&t[2 * i], NULL, consumer, &pairs[i]) || pthread_create(&t[2 * i + 1], NULL, producer, &pairs[i])) {
            fprintf(stderr, "bursty_pc: pthread_create failed\n");
            return 1;
        }
    uint64_t sum = 0;
    for (int i = 0; i < 2 * np; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < np; i++) sum += pairs[i].sum;
    double s = now() - t0;
    printf("@checksum %llu\n@ops %ld\n@frees_per_s %.0f\n", (unsigned long long)sum, blocks * np, (double)blocks * np / s);
    free(pairs);
    return 0;
}
