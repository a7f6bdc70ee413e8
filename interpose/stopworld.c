/* Stops every other thread of the process for the leak check at exit, with a signal and a futex as
 * Boehm GC's pthread_stop_world.c does: no ptrace, so it works in containers, under gdb and strace.
 * The handler makes raw system calls only, keeps errno, and never waits without a bound. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"

static ot_world_thread_t *g_threads; /* the stopper's array while a stop is in progress */
static _Atomic unsigned g_nthreads;
static _Atomic int g_release;       /* futex word: 1 once the stopper lets the threads go */
static _Atomic int g_active;        /* a stop is in progress: the handler saves and waits */
static _Atomic unsigned g_inside;   /* handlers that have not returned yet */
static int g_sig;

static long now_ms(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    syscall(SYS_nanosleep, &ts, NULL);
}

static void handler(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    int saved = errno;
    if (!atomic_load(&g_active)) {
        errno = saved;
        return; /* a late signal after the stop: nothing to do */
    }
    atomic_fetch_add(&g_inside, 1);
    pid_t tid = (pid_t)syscall(SYS_gettid);
    ot_world_thread_t *me = NULL;
    unsigned n = atomic_load(&g_nthreads);
    for (unsigned i = 0; i < n; i++)
        if (g_threads[i].tid == tid) me = &g_threads[i];
    if (me) {
        ucontext_t *uc = ucv;
#if defined(__x86_64__)
        me->nregs = NGREG < OT_WORLD_REGS ? NGREG : OT_WORLD_REGS;
        for (unsigned i = 0; i < me->nregs; i++) me->regs[i] = (uintptr_t)uc->uc_mcontext.gregs[i];
        me->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
        me->nregs = 31 < OT_WORLD_REGS ? 31 : OT_WORLD_REGS;
        for (unsigned i = 0; i < me->nregs; i++) me->regs[i] = (uintptr_t)uc->uc_mcontext.regs[i];
        me->sp = (uintptr_t)uc->uc_mcontext.sp;
#else
        me->nregs = 0;
        me->sp = (uintptr_t)__builtin_frame_address(0);
#endif
        me->tp = (uintptr_t)__builtin_thread_pointer();
        atomic_store_explicit(&me->state, OT_WORLD_STOPPED, memory_order_release);
        /* Wait for the release, 100 ms at a time, 60 s at most: a stopper that died must not leave
         * this thread hanging. */
        long deadline = now_ms() + 60000;
        while (!atomic_load(&g_release) && now_ms() < deadline) {
            struct timespec ts = {0, 100 * 1000000};
            syscall(SYS_futex, &g_release, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
        }
    }
    atomic_fetch_sub(&g_inside, 1);
    errno = saved;
}

/* A real-time signal nobody handles: glibc keeps the ones below SIGRTMIN() for itself (SIGCANCEL,
 * SIGSETXID), and a program that uses one usually takes SIGRTMIN+n from the bottom. */
static int pick_signal(void)
{
    for (int s = SIGRTMAX - 1; s > SIGRTMIN + 2; s--) {
        struct sigaction old;
        if (sigaction(s, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) return s;
    }
    return -1;
}

static bool blocks_signal(pid_t tid, int sig)
{
    char path[64], buf[2048];
    ot_buf_t b;
    ot_buf_init(&b, path, sizeof path, -1);
    ot_buf_printf(&b, "/proc/self/task/%d/status", (int)tid);
    ot_buf_cstr(&b);
    if (ot_read_file(path, buf, sizeof buf) <= 0) return false;
    const char *p = ot_strstr(buf, "SigBlk:");
    if (!p) return false;
    p += 7;
    while (*p == ' ' || *p == '\t') p++;
    uint64_t mask = 0;
    for (; *p; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0) break;
        mask = mask << 4 | (uint64_t)d;
    }
    return (mask >> (sig - 1)) & 1;
}

/* The stack pointer of a thread that cannot be signalled, from /proc/self/task/TID/syscall
 * ("nr args... sp pc", or "-1 sp pc" outside a system call); 0 when it is running. */
static uintptr_t sp_from_proc(pid_t tid)
{
    char path[64], buf[512];
    ot_buf_t b;
    ot_buf_init(&b, path, sizeof path, -1);
    ot_buf_printf(&b, "/proc/self/task/%d/syscall", (int)tid);
    ot_buf_cstr(&b);
    ssize_t n = ot_read_file(path, buf, sizeof buf);
    if (n <= 0 || buf[0] == 'r') return 0;
    /* The second-to-last field. */
    const char *tok[16];
    int nt = 0;
    for (char *p = buf; *p && nt < 16;) {
        while (*p == ' ' || *p == '\n') p++;
        if (!*p) break;
        tok[nt++] = p;
        while (*p && *p != ' ' && *p != '\n') p++;
    }
    if (nt < 3) return 0;
    const char *s = tok[nt - 2];
    if (s[0] == '0' && s[1] == 'x') s += 2;
    uintptr_t v = 0;
    for (; *s && *s != ' ' && *s != '\n'; s++) {
        int d = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | (uintptr_t)d;
    }
    return v;
}

static bool known(ot_world_thread_t *t, unsigned n, pid_t tid)
{
    for (unsigned i = 0; i < n; i++)
        if (t[i].tid == tid) return true;
    return false;
}

/* Adds the threads of /proc/self/task not yet in t[]; returns the new count. */
static unsigned enumerate(ot_world_thread_t *t, unsigned n, unsigned max, pid_t self)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return n;
    char buf[4096];
    for (;;) {
        long r = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (r <= 0) break;
        for (long off = 0; off < r;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            pid_t tid = 0;
            const char *s = d->d_name;
            if (*s < '0' || *s > '9') continue;
            for (; *s >= '0' && *s <= '9'; s++) tid = tid * 10 + (*s - '0');
            if (tid == self || known(t, n, tid) || n >= max) continue;
            ot_memset(&t[n], 0, sizeof t[n]);
            t[n].tid = tid;
            n++;
        }
    }
    syscall(SYS_close, fd);
    return n;
}

unsigned ot_world_stop(ot_world_thread_t *t, unsigned max)
{
    pid_t self = (pid_t)syscall(SYS_gettid), pid = (pid_t)syscall(SYS_getpid);
    g_sig = pick_signal();
    unsigned n = enumerate(t, 0, max, self);
    if (g_sig < 0) {
        for (unsigned i = 0; i < n; i++) {
            t[i].state = OT_WORLD_NO_SIGNAL;
            t[i].sp = sp_from_proc(t[i].tid);
        }
        return n;
    }
    struct sigaction sa;
    ot_memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigfillset(&sa.sa_mask);
    sigaction(g_sig, &sa, NULL);
    g_threads = t;
    atomic_store(&g_release, 0);
    atomic_store(&g_active, 1);
    /* Signal everyone, then look again for threads created meanwhile, a few rounds (as Boehm GC). */
    unsigned signalled = 0;
    for (int round = 0; round < 8; round++) {
        atomic_store(&g_nthreads, n);
        for (unsigned i = signalled; i < n; i++) {
            if (blocks_signal(t[i].tid, g_sig)) {
                t[i].state = OT_WORLD_BLOCKED;
                t[i].sp = sp_from_proc(t[i].tid);
                continue;
            }
            /* SIGNALLED before the signal: its handler may answer before tgkill returns. */
            atomic_store(&t[i].state, OT_WORLD_SIGNALLED);
            if (syscall(SYS_tgkill, pid, t[i].tid, g_sig) != 0) atomic_store(&t[i].state, OT_WORLD_GONE); /* exited */
        }
        signalled = n;
        unsigned m = enumerate(t, n, max, self);
        if (m == n) break;
        n = m;
    }
    atomic_store(&g_nthreads, n);
    /* Wait for the answers, 2 s at most: a thread in an uninterruptible sleep answers late. */
    long deadline = now_ms() + 2000;
    for (;;) {
        unsigned waiting = 0;
        for (unsigned i = 0; i < n; i++)
            if (atomic_load_explicit(&t[i].state, memory_order_acquire) == OT_WORLD_SIGNALLED) waiting++;
        if (!waiting || now_ms() > deadline) break;
        pause_ms(1);
    }
    for (unsigned i = 0; i < n; i++)
        if (atomic_load(&t[i].state) == OT_WORLD_SIGNALLED) {
            t[i].state = OT_WORLD_NO_ANSWER;
            t[i].sp = sp_from_proc(t[i].tid);
        }
    return n;
}

void ot_world_resume(void)
{
    if (g_sig < 0) return;
    atomic_store(&g_release, 1);
    syscall(SYS_futex, &g_release, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    /* Let the handlers leave before the array they read goes away (1 s at most). The handler stays
     * installed: a late signal finds g_active clear and returns, where the default would kill. */
    long deadline = now_ms() + 1000;
    while (atomic_load(&g_inside) && now_ms() < deadline) pause_ms(1);
    atomic_store(&g_active, 0);
    if (!atomic_load(&g_inside)) g_threads = NULL;
}

int ot_world_signal(void) { return g_sig; }
