/* e2e target (host_threads.sh): 8 threads allocate, reallocate and free at random, and a producer
 * hands blocks to a consumer that frees most of them. The program keeps its own exact account of
 * what is still live; it prints that account and the oomtrace_get_totals() delta around the work,
 * which must agree exactly. Runs without the preload too (the weak API is then absent).
 *
 * Every thread is created before the first measurement and parked on a barrier after the work, so
 * no thread start-up or tear-down allocation (glibc's dtv, stack cache) falls between the two
 * measurements: only the program's own calls below do. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oomtrace.h"

#define WORKERS 6
#define SLOTS 64
#define OPS 6000
#define ITEMS 4000
#define QCAP 64

typedef struct {
    void *p;
    size_t size;
} slot_t;

static pthread_barrier_t start_bar, done_bar;

/* Per-thread results, summed by main after the work (written only by their thread). */
static unsigned long long live_count[WORKERS + 2], live_bytes[WORKERS + 2];
static slot_t kept_slots[WORKERS][SLOTS];

/* Producer/consumer ring: static memory, so the queue itself allocates nothing. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    slot_t items[QCAP];
    unsigned head, tail, n;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, {{0, 0}}, 0, 0, 0};

static slot_t consumer_kept[ITEMS];
static unsigned consumer_nkept;

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static size_t rnd_size(uint64_t *s)
{
    /* Mostly small, sometimes above the 64K stack threshold and the mmap threshold. */
    uint64_t r = rnd(s) % 100;
    if (r < 80) return 1 + rnd(s) % 512;
    if (r < 97) return 513 + rnd(s) % 16384;
    return 65536 + rnd(s) % 200000;
}

static void fill(void *p, size_t n, unsigned char v)
{
    memset(p, v, n < 64 ? n : 64);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
    slot_t *sl = kept_slots[id];
    pthread_barrier_wait(&start_bar);
    for (int i = 0; i < OPS; i++) {
        slot_t *x = &sl[rnd(&s) % SLOTS];
        unsigned op = (unsigned)(rnd(&s) % 10);
        if (!x->p) {
            size_t n = rnd_size(&s);
            switch (op % 5) {
            case 0: x->p = malloc(n); x->size = n; break;
            case 1: {
                size_t nm = 1 + n / 16;
                x->p = calloc(nm, 16);
                x->size = nm * 16;
                break;
            }
            case 2: x->p = realloc(NULL, n); x->size = n; break;
            case 3: if (posix_memalign(&x->p, 64, n)) x->p = NULL; x->size = n; break;
            default: x->p = aligned_alloc(32, (n + 31) & ~(size_t)31); x->size = (n + 31) & ~(size_t)31; break;
            }
            if (!x->p) { fprintf(stderr, "allocation failed\n"); exit(3); }
            fill(x->p, x->size, (unsigned char)id);
        } else if (op < 4) {
            size_t n = rnd_size(&s);
            void *np = realloc(x->p, n);
            if (!np) { fprintf(stderr, "realloc failed\n"); exit(3); }
            x->p = np;
            x->size = n;
            fill(x->p, x->size, (unsigned char)id);
        } else {
            free(x->p);
            x->p = NULL;
            x->size = 0;
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (sl[i].p) live_count[id]++, live_bytes[id] += sl[i].size;
    pthread_barrier_wait(&done_bar);
    return NULL;
}

static void *producer(void *arg)
{
    uint64_t s = 12345;
    pthread_barrier_wait(&start_bar);
    for (unsigned i = 0; i < ITEMS; i++) {
        slot_t it;
        it.size = rnd_size(&s);
        it.p = (i % 3) ? malloc(it.size) : calloc(1, it.size);
        if (!it.p) { fprintf(stderr, "producer: allocation failed\n"); exit(3); }
        fill(it.p, it.size, 0x5a);
        pthread_mutex_lock(&q.mu);
        while (q.n == QCAP) pthread_cond_wait(&q.not_full, &q.mu);
        q.items[q.tail] = it;
        q.tail = (q.tail + 1) % QCAP;
        q.n++;
        pthread_cond_signal(&q.not_empty);
        pthread_mutex_unlock(&q.mu);
    }
    pthread_barrier_wait(&done_bar);
    return NULL;
}

static void *consumer(void *arg)
{
    pthread_barrier_wait(&start_bar);
    for (unsigned i = 0; i < ITEMS; i++) {
        pthread_mutex_lock(&q.mu);
        while (q.n == 0) pthread_cond_wait(&q.not_empty, &q.mu);
        slot_t it = q.items[q.head];
        q.head = (q.head + 1) % QCAP;
        q.n--;
        pthread_cond_signal(&q.not_full);
        pthread_mutex_unlock(&q.mu);
        if (i % 10 == 0) {
            consumer_kept[consumer_nkept++] = it; /* stays live: the producer's block */
        } else if (i % 10 == 1) {
            /* Grow a block another thread allocated, then free it. */
            void *np = realloc(it.p, it.size + 100);
            if (!np) { fprintf(stderr, "consumer: realloc failed\n"); exit(3); }
            free(np);
        } else {
            free(it.p);
        }
    }
    for (unsigned i = 0; i < consumer_nkept; i++) live_count[WORKERS + 1]++, live_bytes[WORKERS + 1] += consumer_kept[i].size;
    pthread_barrier_wait(&done_bar);
    return NULL;
}

int main(void)
{
    pthread_t th[WORKERS + 2];
    oomtrace_totals_t before = {0}, after = {0};
    int have = oomtrace_available() && oomtrace_get_totals;
    printf("oomtrace available: %s\n", have ? "yes" : "no");
    fflush(stdout);
    pthread_barrier_init(&start_bar, NULL, WORKERS + 3);
    pthread_barrier_init(&done_bar, NULL, WORKERS + 3);
    for (int i = 0; i < WORKERS; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    pthread_create(&th[WORKERS], NULL, producer, NULL);
    pthread_create(&th[WORKERS + 1], NULL, consumer, NULL);
    if (have && oomtrace_get_totals(&before) != 0) { printf("get_totals failed\n"); return 1; }
    pthread_barrier_wait(&start_bar);
    pthread_barrier_wait(&done_bar);
    if (have && oomtrace_get_totals(&after) != 0) { printf("get_totals failed\n"); return 1; }
    for (int i = 0; i < WORKERS + 2; i++) pthread_join(th[i], NULL);
    unsigned long long ec = 0, eb = 0;
    for (int i = 0; i < WORKERS + 2; i++) ec += live_count[i], eb += live_bytes[i];
    printf("expected count=%llu bytes=%llu\n", ec, eb);
    if (have)
        printf("delta count=%lld bytes=%lld\n", (long long)(after.host_count - before.host_count),
               (long long)(after.host_bytes - before.host_bytes));
    else
        printf("delta unavailable\n");
    /* Clean up so that a leak checker would be happy; not measured. */
    for (int w = 0; w < WORKERS; w++)
        for (int i = 0; i < SLOTS; i++) free(kept_slots[w][i].p);
    for (unsigned i = 0; i < consumer_nkept; i++) free(consumer_kept[i].p);
    return 0;
}
