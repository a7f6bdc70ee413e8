/* Crash signals and signal chaining: oomtrace's handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
 * SIGTRAP (and snapshot_signal=), the program's own dispositions for them recorded and emulated (the
 * way libjsig and the sanitizers chain), and an alternate signal stack per thread.
 * In the handler: raw syscalls, atomics, TLS and the report writer's signal path only; no malloc, no
 * stdio, no lock another thread or the interrupted code may hold, every wait bounded. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif
#define KSIGSET_BYTES 8 /* what the kernel keeps of a sigset_t, and all glibc copies back into oldact */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction;

static const int crash_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP};

/* The program's disposition of a managed signal, as the kernel would hold it without us. */
typedef struct {
    void *handler; /* sa_handler or sa_sigaction as given; SIG_DFL / SIG_IGN */
    sigset_t mask;
    int flags;
    void (*restorer)(void);
} prog_act_t;

/* Per signal: written under `lock` with every signal blocked (a handler on the same thread cannot
 * interrupt a write); read by the handler under the sequence counter, retried, never waited on. */
static struct {
    _Atomic unsigned seq;
    atomic_flag lock;
    bool managed;
    prog_act_t prog;
    _Atomic uint64_t dfl_ns; /* when the program last set SIG_DFL itself (CLOCK_MONOTONIC) */
} S[_NSIG];

static int snapshot_sig;
static _Atomic int enabled; /* ot_signals_init has run and found sigaction */
static void (*glibc_restorer)(void);
static sigset_t intr_set; /* siginterrupt(sig, 1) for managed signals: signal() then omits SA_RESTART */
/* Linux 5.11 and later drop the flag bits they do not know (SA_INTERRUPT that sysv_signal passes,
 * SA_UNSUPPORTED); what a program reads back must too. Probed at start-up. */
#define UAPI_SA_FLAGS                                                                              \
    (SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER | SA_RESETHAND | SA_RESTORER)
static int kept_flags = ~0;

/* ---------------------------------------------------------------- names */

static const char *const sig_names[32] = {
    NULL,      "SIGHUP",  "SIGINT",    "SIGQUIT", "SIGILL",    "SIGTRAP", "SIGABRT",  "SIGBUS",
    "SIGFPE",  "SIGKILL", "SIGUSR1",   "SIGSEGV", "SIGUSR2",   "SIGPIPE", "SIGALRM",  "SIGTERM",
    "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP",   "SIGTTIN", "SIGTTOU",  "SIGURG",
    "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH",  "SIGIO",   "SIGPWR",   "SIGSYS"};

const char *ot_signal_name(int sig)
{
    if (sig > 0 && sig < 32) return sig_names[sig];
    return sig >= 32 && sig < _NSIG ? "SIGRT" : "?";
}

int ot_signal_parse(const char *s, size_t n)
{
    if (n == 0) return -1;
    bool digits = true;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') digits = false;
    if (digits) {
        int v = 0;
        for (size_t i = 0; i < n && v < 1000; i++) v = v * 10 + (s[i] - '0');
        return v >= 1 && v < _NSIG ? v : -1;
    }
    if (n > 3 && !ot_strncmp(s, "SIG", 3)) s += 3, n -= 3;
    for (int i = 1; i < 32; i++)
        if (ot_strlen(sig_names[i] + 3) == n && !ot_strncmp(sig_names[i] + 3, s, n)) return i;
    return -1;
}

const char *ot_signal_code_name(int sig, int code)
{
    switch (code) {
    case SI_USER: return "SI_USER";
    case SI_KERNEL: return "SI_KERNEL";
    case SI_QUEUE: return "SI_QUEUE";
    case SI_TIMER: return "SI_TIMER";
    case SI_MESGQ: return "SI_MESGQ";
    case SI_ASYNCIO: return "SI_ASYNCIO";
    case SI_SIGIO: return "SI_SIGIO";
    case SI_TKILL: return "SI_TKILL";
    default: break;
    }
    static const char *const segv[] = {"SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR"};
    static const char *const bus[] = {"BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"};
    static const char *const fpe[] = {"FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF",
                                      "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB"};
    static const char *const ill[] = {"ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP",
                                      "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK"};
    static const char *const trap[] = {"TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT"};
#define PICK(t) return code >= 1 && code <= (int)(sizeof t / sizeof t[0]) ? t[code - 1] : "?"
    switch (sig) {
    case SIGSEGV: PICK(segv);
    case SIGBUS: PICK(bus);
    case SIGFPE: PICK(fpe);
    case SIGILL: PICK(ill);
    case SIGTRAP: PICK(trap);
    default: return "?";
    }
#undef PICK
}

/* ---------------------------------------------------------------- small syscalls */

static long sys_gettid(void) { return syscall(SYS_gettid); }
static void mask_all(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, old, KSIGSET_BYTES);
}
static void mask_set(const sigset_t *m) { syscall(SYS_rt_sigprocmask, SIG_SETMASK, m, NULL, KSIGSET_BYTES); }
static void unblock_one(int sig)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &s, NULL, KSIGSET_BYTES);
}
static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    syscall(SYS_nanosleep, &ts, NULL);
}

/* ---------------------------------------------------------------- the program's dispositions */

static void read_prog(int sig, prog_act_t *out)
{
    for (int tries = 0;; tries++) {
        unsigned s1 = atomic_load_explicit(&S[sig].seq, memory_order_acquire);
        if (!(s1 & 1) || tries > 100000) {
            ot_memcpy(out, &S[sig].prog, sizeof *out);
#if defined(__x86_64__)
            __asm__ volatile("" ::: "memory"); /* x86 keeps loads in order: the copy before the re-read */
#else
            atomic_thread_fence(memory_order_acquire);
#endif
            if (atomic_load_explicit(&S[sig].seq, memory_order_relaxed) == s1 || tries > 100000) return;
        }
    }
}

static void write_prog(int sig, const prog_act_t *p)
{
    atomic_fetch_add_explicit(&S[sig].seq, 1, memory_order_acq_rel);
    ot_memcpy(&S[sig].prog, p, sizeof *p);
    atomic_fetch_add_explicit(&S[sig].seq, 1, memory_order_release);
}

/* Bounded: a handler on another thread (SA_RESETHAND) holds it for a copy. */
static void lock_sig(int sig)
{
    for (long i = 0; atomic_flag_test_and_set_explicit(&S[sig].lock, memory_order_acquire); i++)
        if (i > 50000000) return;
}
static void unlock_sig(int sig) { atomic_flag_clear_explicit(&S[sig].lock, memory_order_release); }

static bool is_fn(const void *h) { return h != (void *)SIG_DFL && h != (void *)SIG_IGN; }

static void ot_signal_handler(int sig, siginfo_t *si, void *uc);

/* What the kernel holds for a managed signal whose program disposition is p: SIG_IGN really
 * (exec'd children inherit it; a kill is dropped by the kernel), else our handler with the
 * program's mask and flags, so the kernel sets the signal mask as it would for the program's
 * handler. SA_RESETHAND is emulated (the kernel would remove ours). */
static void kernel_act(int sig, const prog_act_t *p, struct sigaction *k)
{
    ot_memset(k, 0, sizeof *k);
    if (p->handler == (void *)SIG_IGN && sig != snapshot_sig) {
        k->sa_handler = SIG_IGN;
        k->sa_flags = p->flags & ~SA_RESTORER;
        return;
    }
    k->sa_sigaction = ot_signal_handler;
    if (is_fn(p->handler)) {
        k->sa_mask = p->mask;
        k->sa_flags = (p->flags & ~(SA_RESETHAND | SA_RESTORER)) | SA_SIGINFO | SA_ONSTACK;
    } else {
        /* Our own report, or the snapshot: no EINTR for the program where it gets none without us. */
        sigemptyset(&k->sa_mask);
        k->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    }
}

bool ot_signals_manages(int sig)
{
    return sig > 0 && sig < _NSIG && atomic_load_explicit(&enabled, memory_order_acquire) && S[sig].managed;
}

/* In a vfork child (memory shared with the parent) or a child of a raw fork syscall, the records
 * are the parent's: a change goes to the kernel only. */
static bool own_process(void) { return (pid_t)syscall(SYS_getpid) == ot_state.pid; }

int ot_signals_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!ot_signals_manages(sig)) {
        if (!real_sigaction) real_sigaction = (sigaction_fn)ot_next("sigaction");
        if (!real_sigaction) {
            errno = ENOSYS;
            return -1;
        }
        return real_sigaction(sig, act, old);
    }
    prog_act_t np;
    if (act) {
        /* Read the program's struct before any lock: a bad pointer faults here, as in libc. */
        np.handler = (void *)act->sa_handler;
        ot_memcpy(&np.mask, &act->sa_mask, sizeof np.mask);
        np.flags = (act->sa_flags | SA_RESTORER) & kept_flags; /* what glibc hands the kernel, as it keeps it */
        np.restorer = glibc_restorer;
        sigdelset(&np.mask, SIGKILL);
        sigdelset(&np.mask, SIGSTOP);
    }
    sigset_t saved;
    mask_all(&saved);
    lock_sig(sig);
    prog_act_t prev;
    ot_memcpy(&prev, &S[sig].prog, sizeof prev);
    int rc = 0, err = 0;
    if (act) {
        struct sigaction k;
        kernel_act(sig, &np, &k);
        if (!own_process()) k = *act;
        rc = real_sigaction(sig, &k, NULL);
        err = errno;
        if (rc == 0 && own_process()) {
            write_prog(sig, &np);
            if (np.handler == (void *)SIG_DFL) atomic_store_explicit(&S[sig].dfl_ns, ot_clock_ns(CLOCK_MONOTONIC), memory_order_relaxed);
        }
    }
    unlock_sig(sig);
    mask_set(&saved);
    if (rc != 0) {
        errno = err;
        return rc;
    }
    if (old) {
        old->sa_handler = (void (*)(int))prev.handler;
        /* glibc copies a whole sigset_t of which the kernel filled the first 64 bits. */
        ot_memset(&old->sa_mask, 0, sizeof old->sa_mask);
        ot_memcpy(&old->sa_mask, &prev.mask, KSIGSET_BYTES);
        old->sa_flags = prev.flags;
        old->sa_restorer = prev.restorer;
    }
    return 0;
}

/* glibc's signal()/bsd_signal()/ssignal(): handler with its own signal masked, SA_RESTART unless
 * siginterrupt(sig, 1) was asked. */
void *ot_signals_signal(int sig, void *handler, bool sysv)
{
    if (handler == (void *)SIG_ERR || sig < 1 || sig >= _NSIG) {
        errno = EINVAL;
        return (void *)SIG_ERR;
    }
    struct sigaction a, o;
    ot_memset(&a, 0, sizeof a);
    a.sa_handler = (void (*)(int))handler;
    sigemptyset(&a.sa_mask);
    if (sysv) {
        a.sa_flags = (int)(SA_RESETHAND | SA_NODEFER | 0x20000000 /* SA_INTERRUPT */);
    } else {
        if (sigaddset(&a.sa_mask, sig) < 0) return (void *)SIG_ERR;
        a.sa_flags = sigismember(&intr_set, sig) ? 0 : SA_RESTART;
    }
    if (ot_signals_sigaction(sig, &a, &o) < 0) return (void *)SIG_ERR;
    return (void *)o.sa_handler;
}

/* glibc's sigset(): SIG_HOLD blocks, anything else installs and unblocks; the old disposition, or
 * SIG_HOLD where the signal was blocked. */
void *ot_signals_sigset(int sig, void *disp)
{
    sigset_t one, oset;
    struct sigaction a, o;
    if (sigemptyset(&one) < 0 || sigaddset(&one, sig) < 0) return (void *)SIG_ERR;
    if (disp == (void *)SIG_HOLD) {
        if (pthread_sigmask(SIG_BLOCK, &one, &oset) != 0) return (void *)SIG_ERR;
        if (sigismember(&oset, sig)) return (void *)SIG_HOLD;
        if (ot_signals_sigaction(sig, NULL, &o) < 0) return (void *)SIG_ERR;
        return (void *)o.sa_handler;
    }
    ot_memset(&a, 0, sizeof a);
    a.sa_handler = (void (*)(int))disp;
    sigemptyset(&a.sa_mask);
    if (ot_signals_sigaction(sig, &a, &o) < 0) return (void *)SIG_ERR;
    if (pthread_sigmask(SIG_UNBLOCK, &one, &oset) != 0) return (void *)SIG_ERR;
    return sigismember(&oset, sig) ? (void *)SIG_HOLD : (void *)o.sa_handler;
}

int ot_signals_siginterrupt(int sig, int flag)
{
    struct sigaction a;
    if (ot_signals_sigaction(sig, NULL, &a) < 0) return -1;
    if (flag) {
        sigaddset(&intr_set, sig);
        a.sa_flags &= ~SA_RESTART;
    } else {
        sigdelset(&intr_set, sig);
        a.sa_flags |= SA_RESTART;
    }
    return ot_signals_sigaction(sig, &a, NULL);
}

/* ---------------------------------------------------------------- alternate signal stacks */

#define ALT_GUARD 4096
#define ALT_SIZE (256 * 1024) /* the report, or a program handler that runs there (SA_ONSTACK) */

typedef struct ot_sigthread {
    struct ot_sigthread *next; /* free list */
    char *map;                 /* ALT_GUARD PROT_NONE, then the stack */
    void *(*fn)(void *);
    void *arg;
    bool ours_set; /* our stack is this thread's sigaltstack */
} ot_sigthread_t;

static OT_TLS ot_sigthread_t *thr;
static OT_TLS int crash_reporting; /* this thread is writing a crash report */
/* The last crash signal this thread handed to the program's handler (a few stores per delivery:
 * the JVM takes thousands of them). */
static OT_TLS struct {
    int signo, code;
    bool has_addr;
    uintptr_t addr, pc;
    uint64_t ns;
} last_chained;
static atomic_flag pool_lock = ATOMIC_FLAG_INIT;
static ot_sigthread_t *pool_free;
static pthread_key_t thr_key;
static bool thr_key_ok;
static _Atomic uint64_t stacks_mapped;

static ot_sigthread_t *thr_get(void)
{
    ot_sigthread_t *t = NULL;
    while (atomic_flag_test_and_set_explicit(&pool_lock, memory_order_acquire)) sched_yield();
    if (pool_free) {
        t = pool_free;
        pool_free = t->next;
    }
    atomic_flag_clear_explicit(&pool_lock, memory_order_release);
    if (t) return t;
    t = ot_perm_alloc(sizeof *t);
    if (!t) return NULL;
    t->map = ot_mmap(ALT_GUARD + ALT_SIZE);
    if (!t->map) return NULL; /* the record is lost: bounded, and only when mmap fails */
    mprotect(t->map, ALT_GUARD, PROT_NONE);
    atomic_fetch_add(&stacks_mapped, 1);
    return t;
}

static void thr_put(ot_sigthread_t *t)
{
    t->fn = NULL;
    t->arg = NULL;
    t->ours_set = false;
    while (atomic_flag_test_and_set_explicit(&pool_lock, memory_order_acquire)) sched_yield();
    t->next = pool_free;
    pool_free = t;
    atomic_flag_clear_explicit(&pool_lock, memory_order_release);
}

/* Sets our stack where the thread has none (a program's own, Go's or the JVM's, is kept). */
static void thr_attach(ot_sigthread_t *t)
{
    thr = t;
    stack_t cur;
    if (syscall(SYS_sigaltstack, NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;
    stack_t ss = {.ss_sp = t->map + ALT_GUARD, .ss_flags = 0, .ss_size = ALT_SIZE};
    t->ours_set = syscall(SYS_sigaltstack, &ss, NULL) == 0;
}

static void thr_exit(void *v)
{
    ot_sigthread_t *t = v;
    if (!t) return;
    int saved = errno;
    if (t->ours_set) {
        stack_t cur;
        if (syscall(SYS_sigaltstack, NULL, &cur) == 0 && cur.ss_sp == t->map + ALT_GUARD &&
            !(cur.ss_flags & SS_ONSTACK)) {
            stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
            syscall(SYS_sigaltstack, &off, NULL);
        } else if (cur.ss_sp == t->map + ALT_GUARD) {
            errno = saved;
            return; /* still running on it: keep it out of the pool */
        }
    }
    if (thr == t) thr = NULL;
    thr_put(t);
    errno = saved;
}

void *ot_signals_thread_prepare(void *(*fn)(void *), void *arg)
{
    if (!atomic_load_explicit(&enabled, memory_order_acquire) || !thr_key_ok || !ot_opt.crash_signals) return NULL;
    ot_sigthread_t *t = thr_get();
    if (!t) return NULL;
    t->fn = fn;
    t->arg = arg;
    return t;
}

void ot_signals_thread_abandon(void *v)
{
    if (v) thr_put(v);
}

/* A new thread's first code: its stack, then the program's start routine as a tail call (this frame
 * does not stay on the thread's stack); the key's destructor gives the stack back at thread exit. */
void *ot_signals_thread_start(void *v)
{
    ot_sigthread_t *t = v;
    void *(*fn)(void *) = t->fn;
    void *arg = t->arg;
    thr_attach(t);
    pthread_setspecific(thr_key, t); /* a key below 32: no allocation */
    return fn(arg);
}

/* The program's sigaltstack: our stack is invisible (it sees none), and one it sets replaces ours. */
int ot_signals_sigaltstack(const stack_t *ss, stack_t *old)
{
    stack_t o;
    long rc = syscall(SYS_sigaltstack, ss, &o);
    if (rc != 0) return -1; /* errno set by syscall() */
    ot_sigthread_t *t = thr;
    bool was_ours = t && t->ours_set && o.ss_sp == t->map + ALT_GUARD;
    if (was_ours && !(o.ss_flags & SS_ONSTACK)) {
        o.ss_sp = NULL;
        o.ss_size = 0;
        o.ss_flags = SS_DISABLE;
    }
    if (ss && t && was_ours) t->ours_set = false;
    if (old) *old = o;
    return 0;
}

uint64_t ot_signals_stacks_mapped(void) { return atomic_load(&stacks_mapped); }

/* ---------------------------------------------------------------- the handler */

static _Atomic long crash_owner; /* tid of the thread writing a crash report */
#define OT_CRASH_WATCHDOG_S 30 /* a crash report that takes longer is abandoned: the process dies */

static bool synchronous_fault(int sig, const siginfo_t *si)
{
    /* The kernel raised it for an instruction that runs again when we return (int3 does not: rip is
     * past it; abort() raises). */
    return si && si->si_code > 0 && sig != SIGTRAP && sig != SIGABRT;
}

/* Dies the way the program would have: SIG_DFL, the signal unblocked, then the faulting instruction
 * runs again (the kernel kills with the same siginfo and core) or the signal is raised again. */
static void die_now(int sig, siginfo_t *si, ucontext_t *uc)
{
    struct sigaction dfl;
    ot_memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    if (real_sigaction) real_sigaction(sig, &dfl, NULL);
    else syscall(SYS_rt_sigaction, sig, &dfl, NULL, KSIGSET_BYTES); /* SIG_DFL needs no restorer */
    if (uc) sigdelset(&uc->uc_sigmask, sig);
    if (synchronous_fault(sig, si)) {
        unblock_one(sig);
        return;
    }
    unblock_one(sig);
    syscall(SYS_tgkill, (pid_t)syscall(SYS_getpid), (pid_t)sys_gettid(), sig);
    /* Still here (a pending copy was merged): returning delivers it with SIG_DFL. */
}

static void crash(int sig, siginfo_t *si, ucontext_t *uc)
{
    if (crash_reporting) {
        /* A second fault while reporting: die at once, the program's way. */
        die_now(sig, si, uc);
        return;
    }
    long me = sys_gettid();
    long expected = 0;
    if (!atomic_compare_exchange_strong(&crash_owner, &expected, me) && expected != me) {
        /* Another thread is reporting (it kills the process when done): wait a bounded time, unless
         * that thread is gone (a vfork child's report left in shared memory, a fork). */
        for (int i = 0; i < 1000; i++) {
            long owner = atomic_load(&crash_owner);
            if (owner == 0 || syscall(SYS_tgkill, (pid_t)syscall(SYS_getpid), (pid_t)owner, 0) != 0) {
                long o = owner;
                if (atomic_compare_exchange_strong(&crash_owner, &o, me)) goto report;
            }
            sleep_ms(1);
        }
        die_now(sig, si, uc);
        return;
    }
report:;
    /* A process passing on the death of a child (timeout, a supervisor: signal(sig, SIG_DFL), then
     * raise(sig)) dies without a report: the signal is its own, just set to SIG_DFL, and no handler
     * of its own ran first (glog and faulthandler do the same after theirs: those get one). */
    uint64_t now = ot_clock_ns(CLOCK_MONOTONIC), dfl = atomic_load_explicit(&S[sig].dfl_ns, memory_order_relaxed);
    bool handler_ran = last_chained.signo == sig && now - last_chained.ns < 1000000000ull;
    if (si && si->si_code <= 0 && si->si_pid == (pid_t)syscall(SYS_getpid) && dfl && now - dfl < 1000000000ull &&
        !handler_ran) {
        die_now(sig, si, uc);
        return;
    }
    crash_reporting = 1;
    sigset_t saved;
    mask_all(&saved);
    /* Only this signal may come in while reporting (a fault in the report, or the watchdog): the
     * handler then dies at once. The watchdog is a timer that sends this signal to this thread
     * should the report ever hang. */
    unblock_one(sig);
    int timer = -1;
    struct sigevent sev;
    ot_memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = sig;
    sev._sigev_un._tid = (pid_t)me;
    if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &sev, &timer) == 0) {
        struct itimerspec its = {{0, 0}, {OT_CRASH_WATCHDOG_S, 0}};
        syscall(SYS_timer_settime, timer, 0, &its, NULL);
    } else {
        timer = -1;
    }
    static ot_crash_t c; /* one report at a time (crash_owner) */
    ot_memset(&c, 0, sizeof c);
    c.signo = sig;
    c.code = si ? si->si_code : SI_USER;
    c.signame = ot_signal_name(sig);
    c.codename = ot_signal_code_name(sig, c.code);
    c.tid = me;
    c.mono_ns = ot_clock_ns(CLOCK_MONOTONIC);
    if (si && c.code <= 0) {
        c.sent = true;
        c.sender_pid = si->si_pid;
        c.sender_uid = si->si_uid;
    } else if (si && sig != SIGABRT) {
        c.has_addr = true;
        c.addr = (uintptr_t)si->si_addr;
    }
#if defined(__x86_64__)
    if (uc && c.has_addr && sig == SIGSEGV) {
        uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
        /* The push or the frame that crossed into the guard: just below the stack pointer. */
        if (c.addr + 65536 >= sp && c.addr < sp + 256) c.stack_overflow = true;
    }
#endif
    if (last_chained.signo && c.mono_ns - last_chained.ns < 1000000000ull) {
        c.chained = true;
        c.first_signo = last_chained.signo;
        c.first_code = last_chained.code;
        c.first_has_addr = last_chained.has_addr;
        c.first_addr = last_chained.addr;
        c.first_pc = last_chained.pc;
        c.first_ns = last_chained.ns;
    }
    c.depth = uc ? ot_stack_capture_signal(c.ips, ot_opt.stack_depth ? ot_opt.stack_depth : OT_MAX_FRAMES, uc) : 0;
    ot_in_hook++;
    ot_report_crash(&c);
    ot_in_hook--;
    if (timer >= 0) syscall(SYS_timer_delete, timer);
    mask_set(&saved);
    die_now(sig, si, uc);
}

static void ot_signal_handler(int sig, siginfo_t *si, void *ucv)
{
    int saved_errno = errno;
    ucontext_t *uc = ucv;
    if (crash_reporting && sig != snapshot_sig) {
        die_now(sig, si, uc); /* a fault in the report, or its watchdog */
        return;
    }
    prog_act_t p;
    read_prog(sig, &p);
    if (sig == snapshot_sig && !crash_reporting) {
        char reason[64];
        ot_buf_t b;
        ot_buf_init(&b, reason, sizeof reason, -1);
        ot_buf_printf(&b, "%s (snapshot_signal)", ot_signal_name(sig));
        ot_report_snapshot_signal(ot_buf_cstr(&b));
        errno = saved_errno;
        if (!is_fn(p.handler)) return; /* SIG_DFL (terminate) is what snapshot_signal replaces */
    }
    if (is_fn(p.handler)) {
        if (p.flags & SA_RESETHAND) {
            /* What the kernel does on delivery: only the handler is reset. */
            lock_sig(sig);
            prog_act_t q;
            ot_memcpy(&q, &S[sig].prog, sizeof q);
            if (q.handler == p.handler) {
                q.handler = (void *)SIG_DFL;
                write_prog(sig, &q);
            }
            unlock_sig(sig);
        }
        if (sig != snapshot_sig) {
            last_chained.signo = sig;
            last_chained.code = si ? si->si_code : 0;
            last_chained.has_addr = si && si->si_code > 0 && sig != SIGABRT;
            last_chained.addr = si ? (uintptr_t)si->si_addr : 0;
#if defined(__x86_64__)
            last_chained.pc = uc ? (uintptr_t)uc->uc_mcontext.gregs[REG_RIP] : 0;
#endif
            last_chained.ns = ot_clock_ns(CLOCK_MONOTONIC);
        }
        errno = saved_errno;
        if (p.flags & SA_SIGINFO) ((void (*)(int, siginfo_t *, void *))p.handler)(sig, si, ucv);
        else ((void (*)(int))p.handler)(sig);
        return;
    }
    if (p.handler == (void *)SIG_IGN || sig == snapshot_sig) {
        /* SIG_IGN set while this one was on its way: ignored, as the kernel would. */
        errno = saved_errno;
        return;
    }
    crash(sig, si, uc);
    errno = saved_errno;
}

/* ---------------------------------------------------------------- start-up, fork */

static void manage(int sig)
{
    struct sigaction cur;
    if (real_sigaction(sig, NULL, &cur) != 0) return;
    if (!glibc_restorer && (cur.sa_flags & SA_RESTORER)) glibc_restorer = cur.sa_restorer;
    if ((void *)cur.sa_sigaction == (void *)ot_signal_handler) { /* ours already (tests start again) */
        ot_memset(&cur, 0, sizeof cur);
        cur.sa_handler = SIG_DFL;
    }
    prog_act_t p;
    p.handler = (void *)cur.sa_handler;
    ot_memset(&p.mask, 0, sizeof p.mask);
    ot_memcpy(&p.mask, &cur.sa_mask, KSIGSET_BYTES);
    p.flags = cur.sa_flags;
    p.restorer = cur.sa_restorer;
    /* Installed before us (another preloaded library, an earlier constructor): now the program's. */
    struct sigaction k;
    kernel_act(sig, &p, &k);
    if (k.sa_handler != SIG_IGN || cur.sa_handler != SIG_IGN) {
        if (real_sigaction(sig, &k, NULL) != 0) return;
    }
    S[sig].prog = p;
    S[sig].managed = true;
}

static void atfork_child(void)
{
    atomic_store(&crash_owner, 0);
    atomic_flag_clear(&pool_lock);
    for (int i = 0; i < _NSIG; i++) atomic_flag_clear(&S[i].lock);
}

void ot_signals_init(void)
{
    if (atomic_load(&enabled)) return;
    real_sigaction = (sigaction_fn)ot_next("sigaction");
    if (!real_sigaction) return;
    snapshot_sig = ot_opt.snapshot_signal;
    /* glibc's restorer, for the sa_restorer a program reads back: from any handler it installed. */
    struct sigaction probe, prev;
    if (!ot_opt.crash_signals && !snapshot_sig) return;
    if (real_sigaction(SIGWINCH, NULL, &prev) == 0) {
        struct sigaction t = prev;
        t.sa_flags |= 0x20000000; /* SA_INTERRUPT: a bit no kernel knows */
        if (real_sigaction(SIGWINCH, &t, NULL) == 0 && real_sigaction(SIGWINCH, NULL, &probe) == 0) {
            if (probe.sa_flags & SA_RESTORER) glibc_restorer = probe.sa_restorer;
            if (!(probe.sa_flags & 0x20000000)) kept_flags = UAPI_SA_FLAGS;
        }
        real_sigaction(SIGWINCH, &prev, NULL);
    }
    sigset_t saved;
    mask_all(&saved);
    if (ot_opt.crash_signals)
        for (unsigned i = 0; i < sizeof crash_sigs / sizeof crash_sigs[0]; i++) manage(crash_sigs[i]);
    if (snapshot_sig) manage(snapshot_sig);
    mask_set(&saved);
    static bool once;
    if (!once) {
        once = true;
        thr_key_ok = pthread_key_create(&thr_key, thr_exit) == 0;
        pthread_atfork(NULL, NULL, atfork_child);
    }
    atomic_store_explicit(&enabled, 1, memory_order_release);
    /* The main thread's stack, where it has none. */
    if (ot_opt.crash_signals && !thr) {
        ot_sigthread_t *t = thr_get();
        if (t) thr_attach(t);
    }
}

/* Unit tests: forget every record, as before start-up (the kernel keeps what it has). */
void ot_signals_reset_for_test(void)
{
    atomic_store(&enabled, 0);
    for (int i = 0; i < _NSIG; i++) S[i].managed = false;
}
