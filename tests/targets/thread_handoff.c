/* e2e target (thread_handoff.sh): 10,000 short-lived threads in two lanes. Each thread joins the
 * thread before it in its lane, takes over the lane's live set (blocks of 8..1000 bytes that
 * exited threads allocated), frees and replaces a third of it at random, starts its successor and
 * exits. The program keeps its own exact account of the live set and prints it beside the
 * oomtrace_get_totals() delta, with VmRSS at a tenth of the threads and at the end; then it frees
 * everything and prints the delta again (every record found: back to zero). Runs without the
 * preload too (the weak API is then absent). usage: thread_handoff [THREADS_PER_LANE] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oomtrace.h"

#define LANES 2
#define LIVE 3000

typedef struct {
    unsigned char *p[LIVE];
    size_t size[LIVE];
    uint64_t rng;
    long left, done_threads;
    pthread_t prev;
    int has_prev;
} lane_t;

static lane_t lanes[LANES];
static pthread_t last[LANES];
static int finished[LANES];
static long per_lane;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long rss_tenth_kib = -1;

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static long rss_kib(void)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/status", "r");
    long kib = -1;
    if (!f) return -1;
    while (fgets(buf, sizeof buf, f))
        if (strncmp(buf, "VmRSS:", 6) == 0) kib = atol(buf + 6);
    fclose(f);
    return kib;
}

static void *worker(void *arg)
{
    lane_t *l = arg;
    if (l->has_prev) pthread_join(l->prev, NULL);
    for (int i = 0; i < LIVE / 3; i++) {
        uint64_t r = rnd(&l->rng);
        int k = (int)(r % LIVE);
        free(l->p[k]);
        l->size[k] = 8 + (r >> 20) % 993;
        l->p[k] = malloc(l->size[k]);
        if (!l->p[k]) {
            fprintf(stderr, "allocation failed\n");
            exit(3);
        }
        l->p[k][0] = (unsigned char)r;
    }
    l->done_threads++;
    pthread_mutex_lock(&mu);
    if (l == &lanes[0] && l->done_threads == per_lane / 10) rss_tenth_kib = rss_kib();
    if (--l->left > 0) {
        l->prev = pthread_self();
        l->has_prev = 1;
        if (pthread_create(&last[l - lanes], NULL, worker, l)) {
            fprintf(stderr, "pthread_create failed\n");
            exit(3);
        }
    } else {
        finished[l - lanes] = 1;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *warm_up(void *arg)
{
    (void)rss_kib();
    return arg;
}

static void delta(const char *what, const oomtrace_totals_t *a)
{
    oomtrace_totals_t b;
    if (oomtrace_get_totals(&b) != 0) {
        printf("%s unavailable\n", what);
        return;
    }
    printf("%s count=%lld bytes=%lld\n", what, (long long)(b.host_count - a->host_count),
           (long long)(b.host_bytes - a->host_bytes));
}

int main(int argc, char **argv)
{
    per_lane = argc > 1 ? atol(argv[1]) : 5000;
    if (per_lane < 10) return 2;
    int have = oomtrace_get_totals != NULL;
    printf("oomtrace available: %s\n", have ? "yes" : "no");
    /* Eight threads at once first, which read VmRSS as the workers do: glibc's allocations for
     * threads (each new stack's TLS vector, kept with the stack in its cache) and for stdio fall
     * before the first measurement, not between the two. At most five run at once below. */
    pthread_t warm[8];
    for (int i = 0; i < 8; i++)
        if (pthread_create(&warm[i], NULL, warm_up, NULL)) return 3;
    for (int i = 0; i < 8; i++) pthread_join(warm[i], NULL);
    oomtrace_totals_t a;
    memset(&a, 0, sizeof a);
    if (have) oomtrace_get_totals(&a);
    for (int n = 0; n < LANES; n++) {
        lane_t *l = &lanes[n];
        l->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(n + 1);
        l->left = per_lane;
        for (int k = 0; k < LIVE; k++) {
            l->size[k] = 100;
            if (!(l->p[k] = malloc(100))) return 3;
        }
    }
    pthread_mutex_lock(&mu);
    for (int n = 0; n < LANES; n++)
        if (pthread_create(&last[n], NULL, worker, &lanes[n])) return 3;
    for (int n = 0; n < LANES; n++) {
        while (!finished[n]) pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    for (int n = 0; n < LANES; n++) pthread_join(last[n], NULL);
    unsigned long long count = 0, bytes = 0;
    for (int n = 0; n < LANES; n++)
        for (int k = 0; k < LIVE; k++) count++, bytes += lanes[n].size[k];
    printf("threads %ld\n", LANES * per_lane);
    printf("expected count=%llu bytes=%llu\n", count, bytes);
    if (have) delta("delta", &a);
    else printf("delta unavailable\n");
    printf("rss_kib tenth=%ld end=%ld\n", rss_tenth_kib, rss_kib());
    for (int n = 0; n < LANES; n++)
        for (int k = 0; k < LIVE; k++) free(lanes[n].p[k]);
    if (have) delta("after_free", &a);
    return 0;
}
