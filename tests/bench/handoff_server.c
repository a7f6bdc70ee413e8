/* Bench workload: a thread-recycling server. LANES chains of short-lived threads run at once; each
 * thread receives its lane's live set (LIVE blocks of 8..1000 bytes) from the thread before it,
 * replaces OPS blocks of it at random (free one, malloc another), then starts its successor with the
 * set and exits; the successor joins it first. So every thread frees blocks that other, mostly
 * exited, threads allocated, and threads come and go all the time. usage:
 * handoff_server [LANES] [GENERATIONS_PER_LANE] [OPS_PER_THREAD] [LIVE]; prints a checksum. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "now.h"

#define MAX_LANES 64

typedef struct {
    unsigned char **set;
    uint64_t rng, sum;
    long gens_left;
    pthread_t prev; /* the thread to join (0: none) */
    int has_prev;
} lane_t;

static long ops_per_thread, live;
static lane_t lanes[MAX_LANES];
static pthread_t last[MAX_LANES];
static int done[MAX_LANES];
static pthread_mutex_t last_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static unsigned char *block(uint64_t r)
{
    size_t size = 8 + (r >> 24) % 993; /* 8..1000 */
    unsigned char *p = malloc(size);
    if (!p) {
        fprintf(stderr, "handoff_server: malloc failed\n");
        exit(1);
    }
    p[0] = (unsigned char)r;
    return p;
}

static void *worker(void *arg)
{
    lane_t *l = arg;
    if (l->has_prev) pthread_join(l->prev, NULL);
    for (long i = 0; i < ops_per_thread; i++) {
        uint64_t r = xorshift(&l->rng);
        long k = (long)(r % (uint64_t)live);
        l->sum += l->set[k][0];
        free(l->set[k]);
        l->set[k] = block(r);
    }
    if (--l->gens_left > 0) {
        l->prev = pthread_self();
        l->has_prev = 1;
        pthread_t t;
        pthread_mutex_lock(&last_mu); /* main joins the lane's newest thread */
        if (pthread_create(&t, NULL, worker, l)) {
            fprintf(stderr, "handoff_server: pthread_create failed\n");
            exit(1);
        }
        last[l - lanes] = t;
        pthread_mutex_unlock(&last_mu);
    } else { /* the lane's last thread: main joins it (last[] names it by now: see the lock above) */
        pthread_mutex_lock(&last_mu);
        done[l - lanes] = 1;
        pthread_cond_signal(&done_cv);
        pthread_mutex_unlock(&last_mu);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    long gens = argc > 2 ? atol(argv[2]) : 1000;
    ops_per_thread = argc > 3 ? atol(argv[3]) : 10000;
    live = argc > 4 ? atol(argv[4]) : 4000;
    if (n < 1 || n > MAX_LANES || gens < 1 || ops_per_thread < 0 || live < 1) {
        fprintf(stderr, "usage: handoff_server [LANES 1..%d] [GENERATIONS] [OPS_PER_THREAD] [LIVE]\n", MAX_LANES);
        return 2;
    }
    double t0 = now();
    for (int i = 0; i < n; i++) {
        lane_t *l = &lanes[i];
        l->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        l->gens_left = gens;
        l->set = malloc(sizeof *l->set * (size_t)live);
        if (!l->set) return 1;
        for (long k = 0; k < live; k++) l->set[k] = block(xorshift(&l->rng));
    }
    pthread_mutex_lock(&last_mu);
    for (int i = 0; i < n; i++)
        if (pthread_create(&last[i], NULL, worker, &lanes[i])) {
            fprintf(stderr, "handoff_server: pthread_create failed\n");
            return 1;
        }
    pthread_mutex_unlock(&last_mu);
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&last_mu);
        while (!done[i]) pthread_cond_wait(&done_cv, &last_mu);
        pthread_t t = last[i];
        pthread_mutex_unlock(&last_mu);
        pthread_join(t, NULL);
    }
    for (int i = 0; i < n; i++) {
        for (long k = 0; k < live; k++) free(lanes[i].set[k]);
        free(lanes[i].set);
        sum += lanes[i].sum;
    }
    double t = now() - t0;
    printf("@checksum %llu\n@ops %ld\n@threads %ld\n@ops_per_s %.0f\n", (unsigned long long)sum,
           (long)n * gens * ops_per_thread, (long)n * gens, (double)n * (double)gens * (double)ops_per_thread / t);
    return 0;
}
