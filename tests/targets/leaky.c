/* Blocks held in every place the leak check must look (tests/e2e/leak_check.sh), one mode per
 * run: each keeps one block of a distinct size from a function named after the mode (mk_MODE), so
 * the report's stack says which it was. Stale copies of pointers are scrubbed from dead stack
 * frames and registers before exit.
 *   leaky MODE [STATUS]     modes: see the table in main; exits with STATUS (default 0) */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY 0x5a5a5a5a5a5a5a5aull
#define N __attribute__((noinline))

void *g_held;               /* a global */
char *g_interior;           /* an interior pointer */
__thread void *t_held; /* static TLS (non-static: a store to it must not be optimised away) */
static uintptr_t g_enc;     /* a pointer no scan can recognise */
static int pipefd[2];
static pthread_key_t key;

static void *dec(void) { return (void *)(g_enc ^ KEY); }

N void *mk_global(void) { return g_held = malloc(1001); }
N void mk_lost(void)
{
    void *volatile p = malloc(1002); /* leak_check.sh: the lost site's line */
    p = NULL; /* the last pointer overwritten */
    (void)p;
}
N void mk_interior(void) { g_interior = (char *)malloc(1003) + 500; }
N void *mk_chain_part(size_t n) { return malloc(n); }
N void mk_chain(void)
{
    /* lost head -> a -> b, and a cycle c <-> d hanging off the head: all lost */
    void **head = mk_chain_part(1004), **a = mk_chain_part(1005), **b = mk_chain_part(1006);
    void **c = mk_chain_part(1007), **d = mk_chain_part(1008);
    head[0] = a, a[0] = b, b[0] = NULL, head[1] = c, c[0] = d, d[0] = c;
}
N void mk_tls_static(void) { t_held = malloc(1009); }
N void *mk_for_thread(size_t n) { g_enc = (uintptr_t)malloc(n) ^ KEY; return NULL; }

/* A thread that keeps its block on its own stack and blocks in read() at exit. */
static void *stack_thread(void *arg)
{
    (void)arg;
    void *volatile mine = dec();
    g_enc = 0;
    char c;
    while (read(pipefd[0], &c, 1) < 0) {
    }
    return (void *)mine;
}

/* A thread that keeps its block in a register only, spinning. */
static void *reg_thread(void *arg)
{
    (void)arg;
    uintptr_t p = g_enc ^ KEY;
    g_enc = 0;
    __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
    __asm__ volatile("1: pause\n\tjmp 1b" : : "b"(p) : "memory");
    return NULL;
}

/* A thread whose static TLS holds the block, blocked in read(). */
static void *tls_thread(void *arg)
{
    (void)arg;
    t_held = dec(); /* thread_lost: the kept block; mk_lost's is lost while this thread runs */
    g_enc = 0;
    char c;
    while (read(pipefd[0], &c, 1) < 0) {
    }
    return NULL;
}

static void *spec_thread(void *arg)
{
    (void)arg;
    pthread_setspecific(key, dec());
    g_enc = 0;
    char c;
    while (read(pipefd[0], &c, 1) < 0) {
    }
    return NULL;
}

static void start(void *(*fn)(void *))
{
    static int ready;
    pthread_t t;
    pipe(pipefd);
    pthread_create(&t, NULL, fn, &ready);
    while (__atomic_load_n(&g_enc, __ATOMIC_ACQUIRE)) usleep(1000);
    usleep(20000);
}

N void mk_mmap(void)
{
    void **region = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    region[1000] = malloc(1014);
}

N void mk_tls_dyn(void)
{
    void *h = dlopen(getenv("LEAK_TLS_LIB"), RTLD_NOW);
    if (!h) {
        fprintf(stderr, "leaky: %s\n", dlerror());
        exit(3);
    }
    void *(*hold)(size_t) = (void *(*)(size_t))dlsym(h, "leak_tls_lib_hold");
    hold(1015);
}

N void mk_setspecific_main(void)
{
    pthread_key_create(&key, NULL);
    pthread_setspecific(key, malloc(1016));
}

N void mk_buffered(void)
{
    /* Output the program never flushes itself, and a leak. */
    printf("buffered line one\nbuffered line two (no newline at the end)");
    mk_lost();
}

N void mk_fork(void)
{
    /* Each process checks itself: the child leaks and exits 0 (so 23 under the check); the parent
     * does not leak and exits with its own status. */
    pid_t pid = fork();
    if (pid == 0) {
        mk_lost();
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static pthread_mutex_t many_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t many_cv = PTHREAD_COND_INITIALIZER;
static void *sleep_thread(void *arg)
{
    (void)arg;
    sleep(1000);
    return NULL;
}
static void *cond_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&many_m);
    for (;;) pthread_cond_wait(&many_cv, &many_m);
    return NULL;
}
static void *pipe_thread(void *arg)
{
    (void)arg;
    char c;
    while (read(pipefd[0], &c, 1) < 0) {
    }
    return NULL;
}

N void mk_many(void)
{
    /* Threads blocked in system calls at exit: read, nanosleep, a futex (pthread_cond_wait). */
    pipe(pipefd);
    for (int i = 0; i < 6; i++) {
        pthread_t t;
        pthread_create(&t, NULL, i % 3 == 0 ? pipe_thread : i % 3 == 1 ? sleep_thread : cond_thread, NULL);
    }
    usleep(50000);
    mk_lost();
}

N void scrub(void);
static void exit_handler(int sig)
{
    (void)sig;
    scrub();
    exit(0); /* not async-signal-safe, but programs do it: the check runs inside the handler */
}

N void mk_sigexit(void)
{
    /* exit() from a signal handler, which might have interrupted malloc: no file:line lookups. */
    mk_lost();
    signal(SIGUSR1, exit_handler);
    raise(SIGUSR1);
}

N void scrub(void)
{
    /* Dead frames below main keep copies of pointers: wipe them. */
    volatile char buf[65536];
    memset((char *)buf, 0, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
}

int main(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "";
    if (!strcmp(m, "global")) mk_global();
    else if (!strcmp(m, "lost")) mk_lost();
    else if (!strcmp(m, "interior")) mk_interior();
    else if (!strcmp(m, "chain")) mk_chain();
    else if (!strcmp(m, "tls_static")) mk_tls_static();
    else if (!strcmp(m, "thread_stack")) mk_for_thread(1010), start(stack_thread);
    else if (!strcmp(m, "thread_lost")) mk_lost(), mk_for_thread(1017), start(tls_thread);
    else if (!strcmp(m, "thread_reg")) mk_for_thread(1011), start(reg_thread);
    else if (!strcmp(m, "tls_thread")) mk_for_thread(1012), start(tls_thread);
    else if (!strcmp(m, "setspecific")) {
        pthread_key_create(&key, NULL);
        mk_for_thread(1013), start(spec_thread);
    } else if (!strcmp(m, "mmap")) mk_mmap();
    else if (!strcmp(m, "tls_dyn")) mk_tls_dyn();
    else if (!strcmp(m, "setspecific_main")) mk_setspecific_main();
    else if (!strcmp(m, "buffered")) mk_buffered();
    else if (!strcmp(m, "fork")) mk_fork();
    else if (!strcmp(m, "many")) mk_many();
    else if (!strcmp(m, "sigexit")) mk_sigexit();
    else if (!strcmp(m, "thread_joined")) {
        /* glibc keeps a finished thread's DTV with its cached stack: the built-in suppression's. */
        pthread_t t;
        pthread_create(&t, NULL, sleep_thread, NULL);
        pthread_cancel(t);
        pthread_join(t, NULL);
    } else if (!strcmp(m, "none")) {
    } else {
        fprintf(stderr, "leaky: unknown mode '%s'\n", m);
        return 2;
    }
    scrub();
    return argc > 2 ? atoi(argv[2]) : 0;
}
