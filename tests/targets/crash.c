/* Crash-signal target: `crash MODE` dies, recovers or reports the way MODE says; the e2e tests run it
 * with and without the preload and compare output and wait status (tests/e2e/crash_signals.sh). */
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void say(const char *s) { (void)!write(1, s, strlen(s)); }

/* ---- the six crash signals, each the real way ---- */
static int do_segv(void) { volatile int *p = (int *)(uintptr_t)16; return *p; }
static int do_bus(void)
{
    char path[] = "/tmp/crash-bus-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    volatile char *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0); /* empty file: no page behind it */
    return m[0];
}
static int do_fpe(int argc) { volatile int z = argc - argc; return 7 / z; }
static int do_ill(void) { __builtin_trap(); }
static int do_trap(void) { __asm__ volatile("int3"); return 0; }

static int depth_sink;
#pragma GCC diagnostic ignored "-Winfinite-recursion"
static __attribute__((noinline)) int recurse(int n)
{
    volatile char pad[512];
    pad[0] = (char)n;
    depth_sink += pad[0];
    return recurse(n + 1) + pad[0];
}

/* ---- handlers ---- */
static sigjmp_buf jb;
static volatile sig_atomic_t handled;
static void h_longjmp(int sig) { handled++; siglongjmp(jb, sig); }
static void h_print_exit(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char line[96];
    snprintf(line, sizeof line, "own handler: signal %d code %d\n", sig, si->si_code);
    say(line);
    _exit(42);
}
static void h_return_once(int sig) { say("resethand handler ran\n"); (void)sig; }
/* What glog's failure handler and Python's faulthandler do: print, reset to SIG_DFL, raise. */
static void h_glog(int sig)
{
    say("*** Aborted at 1 (unix time) try \"date -d @1\" ***\n*** SIGSEGV received; stack trace: ***\n");
    signal(sig, SIG_DFL);
    raise(sig);
}
static void h_usr(int sig) { (void)sig; say("program's SIGUSR2 handler\n"); }

static const char *disp(void *h) { return h == (void *)SIG_DFL ? "DFL" : h == (void *)SIG_IGN ? "IGN" : "fn"; }

/* Prints what sigaction reports for each crash signal: with and without the preload it must match. */
static void query(const char *tag)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGUSR2};
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction o;
        memset(&o, 0xa5, sizeof o);
        if (sigaction(sigs[i], NULL, &o) != 0) { printf("%s %d: error %d\n", tag, sigs[i], errno); continue; }
        unsigned long mask0;
        memcpy(&mask0, &o.sa_mask, sizeof mask0);
        printf("%s %d: %s flags=%#x mask=%#lx restorer=%s\n", tag, sigs[i], disp((void *)o.sa_handler),
               (unsigned)o.sa_flags, mask0, o.sa_restorer ? "set" : "null");
    }
    stack_t ss;
    if (sigaltstack(NULL, &ss) == 0) printf("%s altstack: flags=%d size=%zu\n", tag, ss.ss_flags, ss.ss_size);
    fflush(stdout);
}

static void *thread_segv(void *arg) { (void)arg; return (void *)(intptr_t)do_segv(); }
static void *thread_overflow(void *arg) { (void)arg; return (void *)(intptr_t)recurse(0); }
static void *thread_nothing(void *arg) { return arg; }

static int wait_print(pid_t pid, const char *what)
{
    int st;
    if (waitpid(pid, &st, 0) != pid) { printf("%s: waitpid error\n", what); return -1; }
    if (WIFSIGNALED(st)) printf("%s: signal %d\n", what, WTERMSIG(st));
    else printf("%s: exit %d\n", what, WEXITSTATUS(st));
    fflush(stdout);
    return st;
}

int main(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "segv";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(m, "segv")) return do_segv();
    if (!strcmp(m, "bus")) return do_bus();
    if (!strcmp(m, "fpe")) return do_fpe(argc);
    if (!strcmp(m, "ill")) return do_ill();
    if (!strcmp(m, "abrt")) abort();
    if (!strcmp(m, "trap")) return do_trap();
    if (!strcmp(m, "overflow")) return recurse(0);
    if (!strcmp(m, "query")) {
        query("start");
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_sigaction = h_print_exit;
        a.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&a.sa_mask);
        sigaddset(&a.sa_mask, SIGUSR1);
        sigaction(SIGSEGV, &a, NULL);
        signal(SIGBUS, h_return_once);
        sysv_signal(SIGFPE, h_return_once);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        sigset(SIGILL, SIG_IGN);
        siginterrupt(SIGBUS, 1);
#pragma GCC diagnostic pop
        query("after");
        return 0;
    }
    if (!strcmp(m, "own")) { /* a handler installed after the library */
        struct sigaction a, o;
        memset(&a, 0, sizeof a);
        a.sa_sigaction = h_print_exit;
        a.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &a, &o);
        printf("old %s\n", disp((void *)o.sa_handler));
        return do_segv();
    }
    if (!strcmp(m, "before")) { /* sig_early's handler, installed before the library's start-up */
        struct sigaction o;
        sigaction(SIGSEGV, NULL, &o);
        printf("installed before: %s\n", disp((void *)o.sa_handler));
        return do_segv();
    }
    if (!strcmp(m, "longjmp")) {
        signal(SIGSEGV, h_longjmp);
        for (int i = 0; i < 1000; i++)
            if (!sigsetjmp(jb, 1)) do_segv();
        printf("recovered %d times\n", (int)handled);
        return 0;
    }
    if (!strcmp(m, "resethand")) {
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_handler = h_return_once;
        a.sa_flags = SA_RESETHAND;
        sigaction(SIGSEGV, &a, NULL);
        return do_segv(); /* runs the handler once, then the fault repeats with SIG_DFL */
    }
    if (!strcmp(m, "glog")) {
        signal(SIGSEGV, h_glog);
        return do_segv();
    }
    if (!strcmp(m, "ignore")) { /* SIG_IGN: a kill is dropped, an exec'd child inherits it */
        signal(SIGSEGV, SIG_IGN);
        kill(getpid(), SIGSEGV);
        say("alive after kill\n");
        pid_t p = fork();
        if (p == 0) {
            execl(argv[0], argv[0], "query", (char *)NULL);
            _exit(127);
        }
        wait_print(p, "child");
        return 0;
    }
    if (!strcmp(m, "wait")) { /* waits for a signal from outside */
        say("ready\n");
        for (;;) pause();
    }
    if (!strcmp(m, "double_free")) {
        char *volatile p = malloc(64);
        free(p);
        free(p);
        return 0;
    }
    if (!strcmp(m, "fail_abort")) { /* Caffe's CHECK after a failed allocation */
        void *p = malloc((size_t)1 << 46);
        if (!p) {
            fprintf(stderr, "Check failed: error == cudaSuccess (2 vs. 0)  out of memory\n");
            abort();
        }
        return 0;
    }
    if (!strcmp(m, "thread_segv")) {
        pthread_t t;
        pthread_create(&t, NULL, thread_segv, NULL);
        pthread_join(t, NULL);
        return 0;
    }
    if (!strcmp(m, "thread_overflow")) {
        pthread_t t;
        pthread_create(&t, NULL, thread_overflow, NULL);
        pthread_join(t, NULL);
        return 0;
    }
    if (!strcmp(m, "churn")) { /* crash churn N: N thread create/join pairs, the time on stderr */
        int n = argc > 2 ? atoi(argv[2]) : 10000;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < n; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, thread_nothing, NULL) != 0) return 1;
            pthread_join(t, NULL);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        fprintf(stderr, "churn %d threads: %.1f us per create/join\n", n,
                ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n);
        return 0;
    }
    if (!strcmp(m, "fork")) { /* handlers installed; children made every way; each dies or runs its way */
        signal(SIGSEGV, h_longjmp);
        pid_t p = fork();
        if (p == 0) { /* the handler is inherited: it recovers, then the child crashes with SIG_DFL */
            if (!sigsetjmp(jb, 1)) do_segv();
            printf("fork child recovered\n");
            signal(SIGSEGV, SIG_DFL);
            do_segv();
            _exit(0);
        }
        wait_print(p, "fork child");
        p = vfork();
        if (p == 0) {
            execl(argv[0], argv[0], "segv", (char *)NULL);
            _exit(127);
        }
        wait_print(p, "vfork+exec child");
        char *args[] = {argv[0], "abrt", NULL};
        if (posix_spawn(&p, argv[0], NULL, NULL, args, environ) == 0) wait_print(p, "posix_spawn child");
        if (!sigsetjmp(jb, 1)) do_segv(); /* the parent's handler still works */
        printf("parent recovered %d times\n", (int)handled);
        return 0;
    }
    if (!strcmp(m, "snapshot")) { /* snapshot_signal=SIGUSR2 while it runs; the program's handler too */
        int with_handler = argc > 2;
        if (with_handler) signal(SIGUSR2, h_usr);
        void *keep = malloc(1 << 20);
        memset(keep, 1, 1 << 20);
        kill(getpid(), SIGUSR2);
        char buf[16];
        /* An interrupted read must not see EINTR: the snapshot handler restarts it. */
        int fds[2];
        if (pipe(fds) == 0) {
            pid_t p = fork();
            if (p == 0) {
                usleep(600000);
                (void)!write(fds[1], "x", 1);
                _exit(0);
            }
            say("ready\n");
            ssize_t r = read(fds[0], buf, 1);
            printf("read %zd\n", r);
            wait_print(p, "writer");
        }
        printf("done %d\n", ((char *)keep)[7]);
        return 0;
    }
    fprintf(stderr, "crash: unknown mode %s\n", m);
    return 2;
}
