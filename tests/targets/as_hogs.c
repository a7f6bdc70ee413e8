/* Target for the address-space breakdown (tests/e2e/asmap.sh): each mode fills the address space
 * with one kind of mapping, caps RLIMIT_AS a little above what is in use, then asks malloc for
 * 64 MiB, which fails. The report must name that kind first.
 *   as_hogs arenas | stacks | file PATH | pool | bss LIB | heap | cgroup
 * cgroup: 32 MiB of heap touched, then the same failure, run in a cgroup whose limit the failure
 * crosses (tests/e2e/asmap.sh puts a neighbour that holds more in the same cgroup). */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cap_as.h"

#define NOINLINE __attribute__((noinline))
#define MiB (1ul << 20)

static pthread_barrier_t started, done;
static void *volatile kept[64]; /* so that the compiler cannot drop a malloc/free pair */
static volatile int next_kept;

/* Each thread's first malloc gives it an arena of its own (glibc makes up to 8 per CPU). */
static void *arena_thread(void *arg)
{
    void *p = malloc(1000);
    kept[__atomic_fetch_add(&next_kept, 1, __ATOMIC_RELAXED) & 63] = p;
    pthread_barrier_wait(&started);
    pthread_barrier_wait(&done);
    free(p);
    return arg;
}

static void *idle_thread(void *arg)
{
    pthread_barrier_wait(&started);
    pthread_barrier_wait(&done);
    return arg;
}

static void start_threads(int n, void *(*fn)(void *), pthread_t *t)
{
    pthread_barrier_init(&started, NULL, (unsigned)n + 1);
    pthread_barrier_init(&done, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, fn, NULL)) {
            perror("pthread_create");
            exit(2);
        }
    pthread_barrier_wait(&started);
}

static void stop_threads(int n, pthread_t *t)
{
    pthread_barrier_wait(&done);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

static NOINLINE void *allocate_batch(size_t n)
{
    void *p = malloc(n);
    printf("malloc(%zu) -> %s\n", n, p ? "ptr" : "NULL");
    return p;
}

static void fail_now(void)
{
    if (cap_address_space(16 * MiB)) exit(2);
    free(allocate_batch(64 * MiB));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    pthread_t t[64];
    if (!strcmp(mode, "arenas")) {
        start_threads(8, arena_thread, t);
        fail_now();
        stop_threads(8, t);
    } else if (!strcmp(mode, "stacks")) {
        start_threads(40, idle_thread, t);
        fail_now();
        stop_threads(40, t);
    } else if (!strcmp(mode, "file") && argc > 2) {
        /* a data file mapped whole, as LMDB or a model loader does */
        int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || ftruncate(fd, 1024 * MiB)) return 2;
        void *m = mmap(NULL, 1024 * MiB, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) return 2;
        fail_now();
        munmap(m, 1024 * MiB);
        close(fd);
    } else if (!strcmp(mode, "pool")) {
        /* the program's own pool, straight from mmap */
        void *pool = mmap(NULL, 512 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (pool == MAP_FAILED) return 2;
        fail_now();
        munmap(pool, 512 * MiB);
    } else if (!strcmp(mode, "bss") && argc > 2) {
        void *h = dlopen(argv[2], RTLD_NOW);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 2;
        }
        fail_now();
        dlclose(h);
    } else if (!strcmp(mode, "cgroup")) {
        char *p = malloc(32 * MiB);
        memset(p, 1, 32 * MiB);
        kept[0] = p;
        fail_now();
        free(kept[0]);
    } else if (!strcmp(mode, "heap")) {
        void *blocks[8];
        for (int i = 0; i < 8; i++) memset(blocks[i] = malloc(64 * MiB), 1, 64 * MiB);
        fail_now();
        for (int i = 0; i < 8; i++) free(blocks[i]);
    } else {
        fprintf(stderr, "usage: %s arenas|stacks|file PATH|pool|bss LIB|heap|cgroup\n", argv[0]);
        return 2;
    }
    return 0;
}
