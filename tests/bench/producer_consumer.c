/* Bench workload: threads that free each other's blocks. THREADS threads stand in a ring; each
 * allocates OPS blocks and hands every one to the next thread over a single-producer/single-consumer
 * queue, and frees what the previous thread hands it. So every malloc is paired with a free on
 * another thread, in the same instants as other threads' mallocs: the case where a tracker with a
 * shared lock or shared counters collapses. usage: producer_consumer [THREADS] [OPS_PER_THREAD]. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define QCAP 1024 /* power of two */
#define MAX_THREADS 64

typedef struct {
    _Alignas(64) _Atomic size_t head; /* written by the consumer */
    _Alignas(64) _Atomic size_t tail; /* written by the producer */
    _Alignas(64) unsigned char *slot[QCAP];
} queue_t;

static queue_t queues[MAX_THREADS]; /* queues[i]: from thread i-1 to thread i */
static int nthreads;
static long ops;

static int push(queue_t *q, unsigned char *p)
{
    size_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    if (t - atomic_load_explicit(&q->head, memory_order_acquire) == QCAP) return 0;
    q->slot[t & (QCAP - 1)] = p;
    atomic_store_explicit(&q->tail, t + 1, memory_order_release);
    return 1;
}

static unsigned char *pop(queue_t *q)
{
    size_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    if (h == atomic_load_explicit(&q->tail, memory_order_acquire)) return NULL;
    unsigned char *p = q->slot[h & (QCAP - 1)];
    atomic_store_explicit(&q->head, h + 1, memory_order_release);
    return p;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    queue_t *out = &queues[(id + 1) % nthreads], *in = &queues[id];
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1), sum = 0;
    long sent = 0, received = 0;
    while (sent < ops || received < ops) {
        int progress = 0;
        for (int k = 0; k < 64 && sent < ops; k++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t size = 16 + (rng >> 20) % 240;
            unsigned char *p = malloc(size);
            if (!p) {
                fprintf(stderr, "producer_consumer: malloc failed\n");
                exit(1);
            }
            p[0] = (unsigned char)sent;
            if (!push(out, p)) {
                free(p);
                break;
            }
            sent++;
            progress = 1;
        }
        for (int k = 0; k < 128; k++) {
            unsigned char *p = pop(in);
            if (!p) break;
            sum += p[0];
            free(p);
            received++;
            progress = 1;
        }
        if (!progress) sched_yield();
    }
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
    nthreads = argc > 1 ? atoi(argv[1]) : 4;
    ops = argc > 2 ? atol(argv[2]) : 2000000;
    if (nthreads < 2 || nthreads > MAX_THREADS) {
        fprintf(stderr, "producer_consumer: THREADS must be 2..%d\n", MAX_THREADS);
        return 2;
    }
    pthread_t t[MAX_THREADS];
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i)) {
            fprintf(stderr, "producer_consumer: pthread_create failed\n");
            return 1;
        }
    uint64_t sum = 0;
    for (int i = 0; i < nthreads; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (uintptr_t)r;
    }
    printf("@checksum %llu\n@ops %ld\n", (unsigned long long)sum, ops * nthreads);
    return 0;
}
