/* Bench workload: many live allocations at once (10 million by default), for the tracker's memory
 * per live block. Allocates COUNT blocks of 16..32 bytes, holds them, prints the resident set at
 * that point (and oomtrace's live count when it is preloaded), then frees them all. With IDLE
 * threads that only sleep, started first, the process is multi-threaded as a training job's is
 * (data loaders, BLAS pools), though only the main thread allocates.
 * usage: live_10m [COUNT [IDLE]]. Prints @rss_hold_kib, phase times and a checksum. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "oomtrace.h"
#include "now.h"

static long rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
    fclose(f);
    return kib;
}

static void *idle(void *arg)
{
    (void)arg;
    for (;;) pause();
    return NULL;
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 10000000;
    long idle_threads = argc > 2 ? atol(argv[2]) : 0;
    for (long t = 0; t < idle_threads; t++) {
        pthread_t th;
        if (pthread_create(&th, NULL, idle, NULL) != 0) {
            fprintf(stderr, "live_10m: pthread_create failed\n");
            return 1;
        }
    }
    /* The pointer array comes from mmap so that it is the same memory with and without a tracker. */
    unsigned char **ptr = mmap(NULL, (size_t)count * sizeof *ptr, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptr == MAP_FAILED) {
        perror("live_10m: mmap");
        return 1;
    }
    uint64_t sum = 0;
    long before = rss_kib();
    double t0 = now();
    for (long i = 0; i < count; i++) {
        size_t size = 16 + (size_t)(i % 3) * 8;
        unsigned char *p = malloc(size);
        if (!p) {
            fprintf(stderr, "live_10m: malloc failed after %ld blocks\n", i);
            return 1;
        }
        p[0] = (unsigned char)i;
        ptr[i] = p;
    }
    double t1 = now();
    long hold = rss_kib();
    if (oomtrace_available()) {
        oomtrace_totals_t t;
        if (oomtrace_get_totals(&t) == 0)
            printf("@tracked_live %llu\n@tracked_bytes %llu\n", t.host_count, t.host_bytes);
    }
    for (long i = 0; i < count; i++) {
        sum += ptr[i][0];
        free(ptr[i]);
    }
    double t2 = now();
    printf("@rss_before_kib %ld\n@rss_hold_kib %ld\n@alloc_s %.4f\n@free_s %.4f\n", before, hold, t1 - t0, t2 - t1);
    printf("@checksum %llu\n@ops %ld\n", (unsigned long long)sum, count);
    return 0;
}
