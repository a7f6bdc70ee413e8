/* Target for host failure tests: each mode makes one kind of allocation fail and prints what the
 * program observed (return value, errno), which must be the same with and without the preload. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "oomtrace.h"

#define NOINLINE __attribute__((noinline))

static void cap_address_space(unsigned long mib)
{
    struct rlimit rl = {mib << 20, mib << 20};
    setrlimit(RLIMIT_AS, &rl);
}

static NOINLINE void *load_model_weights(size_t n)
{
    void *p = malloc(n);
    printf("malloc(%zu) -> %s errno=%s\n", n, p ? "ptr" : "NULL", p ? "-" : strerror(errno));
    return p;
}

static NOINLINE void mode_rlimit(void)
{
    cap_address_space(256);
    void *keep = load_model_weights(64 << 20); /* fits */
    memset(keep, 1, 64 << 20);
    load_model_weights(512u << 20); /* cannot fit */
    free(keep);
}

static NOINLINE void mode_calloc_overflow(void)
{
    errno = 0;
    void *p = calloc(SIZE_MAX / 2, 4);
    printf("calloc overflow -> %s errno=%s\n", p ? "ptr" : "NULL", strerror(errno));
}

/* calloc(n, 1), calloc(1, n), calloc(n, m) that cannot fit, and one whose product overflows. */
static NOINLINE void mode_calloc_calls(void)
{
    cap_address_space(256);
    size_t calls[4][2] = {{512u << 20, 1}, {1, 512u << 20}, {65536, 8192}, {SIZE_MAX / 2, 4}};
    for (int i = 0; i < 4; i++) {
        errno = 0;
        void *p = calloc(calls[i][0], calls[i][1]);
        printf("calloc(%zu, %zu) -> %s errno=%s\n", calls[i][0], calls[i][1], p ? "ptr" : "NULL", strerror(errno));
        free(p);
    }
}

static NOINLINE void grow_buffer(char **buf, size_t n)
{
    errno = 0;
    char *q = realloc(*buf, n);
    printf("realloc(%zu) -> %s errno=%s\n", n, q ? "ptr" : "NULL", q ? "-" : strerror(errno));
    if (q) *buf = q;
}

static NOINLINE void mode_realloc(void)
{
    oomtrace_totals_t before = {0}, during = {0}, after = {0};
    if (oomtrace_available()) oomtrace_get_totals(&before);
    char *buf = malloc(1000);
    strcpy(buf, "still here");
    cap_address_space(256);
    grow_buffer(&buf, 1ull << 40);
    printf("old block: %s\n", buf); /* must still be valid */
    if (oomtrace_available()) oomtrace_get_totals(&during);
    free(buf);
    if (oomtrace_available()) {
        oomtrace_get_totals(&after);
        fprintf(stderr, "delta during=%lld/%lld after=%lld/%lld\n", (long long)(during.host_count - before.host_count),
                (long long)(during.host_bytes - before.host_bytes), (long long)(after.host_count - before.host_count),
                (long long)(after.host_bytes - before.host_bytes));
    }
}

static NOINLINE void mode_memalign(void)
{
    void *p = (void *)1;
    errno = 777;
    int rc = posix_memalign(&p, 3, 64);
    printf("posix_memalign(align 3) rc=%d errno=%d p_unchanged=%d\n", rc, errno, p == (void *)1);
    errno = 777;
    rc = posix_memalign(&p, 64, SIZE_MAX - 4096);
    printf("posix_memalign(huge) rc=%d errno=%d\n", rc, errno);
    rc = posix_memalign(&p, 4096, 100);
    printf("posix_memalign(4096) rc=%d aligned=%d\n", rc, rc == 0 && ((uintptr_t)p & 4095) == 0);
    free(p);
    void *a = aligned_alloc(256, 1024);
    printf("aligned_alloc(256) aligned=%d\n", a && ((uintptr_t)a & 255) == 0);
    free(a);
    errno = 0;
    a = aligned_alloc(64, SIZE_MAX - 8192);
    printf("aligned_alloc(huge) -> %s errno=%s\n", a ? "ptr" : "NULL", strerror(errno));
    void *m = memalign(128, 10);
    printf("memalign(128) aligned=%d\n", m && ((uintptr_t)m & 127) == 0);
    free(m);
    void *v = valloc(10);
    printf("valloc aligned=%d\n", v && ((uintptr_t)v & 4095) == 0);
    free(v);
    void *pv = pvalloc(10);
    printf("pvalloc aligned=%d usable>=4096=%d\n", pv && ((uintptr_t)pv & 4095) == 0, malloc_usable_size(pv) >= 4096);
    free(pv);
    errno = 0;
    void *r = reallocarray(NULL, SIZE_MAX / 2, 3);
    printf("reallocarray overflow -> %s errno=%s\n", r ? "ptr" : "NULL", strerror(errno));
}

static NOINLINE void mode_ok(void)
{
    size_t total = 0;
    for (int i = 0; i < 100000; i++) {
        char *p = malloc((size_t)(i % 1000) + 1);
        p[0] = (char)i;
        total += (size_t)p[0] & 1;
        p = realloc(p, (size_t)(i % 3000) + 1);
        free(p);
    }
    void *big = malloc(10 << 20);
    free(big);
    printf("ok %zu\n", total);
}

/* Successful calls leave errno as the program set it. Each call is made with errno set to a value
 * of its own, from call sites reached through 1..6 nested frames, so that under the preload the
 * first walk of a stack, a walk joining an earlier one, and a stack recognised as a remembered walk
 * (stacks=all) each come after some of them. Prints how many calls changed errno (0 with glibc). */
static unsigned errno_changed, errno_calls;
static NOINLINE void expect_errno(int want)
{
    errno_calls++;
    if (errno != want) errno_changed++;
}
static NOINLINE void errno_leaf(int i)
{
    int tag = 1000 + i % 50;
    errno = tag;
    char *p = malloc((size_t)(i % 700) + 1);
    expect_errno(tag);
    p[0] = 1;
    errno = tag + 1;
    p = realloc(p, (size_t)(i % 5000) + 1);
    expect_errno(tag + 1);
    errno = tag + 2;
    void *q = calloc((size_t)(i % 7) + 1, 24);
    expect_errno(tag + 2);
    void *a = NULL;
    errno = tag + 3;
    int rc = posix_memalign(&a, 64, (size_t)(i % 300) + 1);
    expect_errno(tag + 3);
    errno = tag + 4;
    free(p);
    free(q);
    if (rc == 0) free(a);
    expect_errno(tag + 4);
    errno = tag + 5;
    void *big = malloc((size_t)(96 + i % 64) << 10); /* above stack_min_bytes: a stack by default */
    expect_errno(tag + 5);
    errno = tag + 6;
    free(big);
    expect_errno(tag + 6);
}
static NOINLINE void errno_nest(int depth, int i)
{
    if (depth == 0) errno_leaf(i);
    else errno_nest(depth - 1, i);
    __asm__ volatile("" ::: "memory"); /* not a tail call: each level keeps its frame */
}
static NOINLINE void mode_errno_kept(void)
{
    for (int i = 0; i < 20000; i++) errno_nest(i % 6, i);
    printf("errno changed by %u of %u successful calls\n", errno_changed, errno_calls);
}

/* Known figures at two call sites, each reached many times from the same stack (the record path's
 * noted-stack case after the first walk), then a failing malloc whose report lists them:
 *   make_token: 1000 x 48 B allocated, every other one freed: live 24000 B in 500, peak 48000,
 *               total 48000 B in 1000;
 *   make_node:  500 x 100 B (calloc), all kept: live, peak and total 50000 B in 500;
 *   make_token from another line: 250 x 48 B allocated and freed at once: nothing live, not listed. */
static NOINLINE void *make_token(void)
{
    void *p = malloc(48);
    __asm__ volatile("" ::: "memory"); /* a call, not a jump: make_token stays on the stack */
    return p;
}
static NOINLINE void *make_node(void)
{
    void *p = calloc(1, 100);
    __asm__ volatile("" ::: "memory");
    return p;
}

static NOINLINE void *site_figures(void *unused)
{
    static void *tok[1000], *node[500];
    (void)unused;
    for (int i = 0; i < 1000; i++) tok[i] = make_token();
    for (int i = 0; i < 500; i++) node[i] = make_node();
    for (int i = 0; i < 1000; i += 2) free(tok[i]);
    for (int i = 0; i < 250; i++) free(make_token());
    void *x = malloc((size_t)1 << 50);
    printf("malloc(1 PiB) -> %s\n", x ? "ptr" : "NULL");
    free(x);
    for (int i = 1; i < 1000; i += 2) free(tok[i]);
    for (int i = 0; i < 500; i++) free(node[i]);
    return NULL;
}

/* The same on a second thread, after the main thread counted at sites: it counts through its
 * pending entries rather than as the sites' owner. */
static NOINLINE void mode_site_figures_thread(void)
{
    free(make_node());
    pthread_t t;
    if (pthread_create(&t, NULL, site_figures, NULL) == 0) pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(mode, "rlimit")) mode_rlimit();
    else if (!strcmp(mode, "calloc_overflow")) mode_calloc_overflow();
    else if (!strcmp(mode, "calloc_calls")) mode_calloc_calls();
    else if (!strcmp(mode, "realloc")) mode_realloc();
    else if (!strcmp(mode, "memalign")) mode_memalign();
    else if (!strcmp(mode, "ok")) mode_ok();
    else if (!strcmp(mode, "errno_kept")) mode_errno_kept();
    else if (!strcmp(mode, "site_figures")) site_figures(NULL);
    else if (!strcmp(mode, "site_figures_thread")) mode_site_figures_thread();
    else return 2;
    return 0;
}
