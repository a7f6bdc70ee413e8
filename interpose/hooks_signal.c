/* The signal shim: every libc entry a program installs or queries a handler through, plus
 * sigaltstack and pthread_create (a new thread's alternate stack); each forwards to signals.c, which
 * behaves as the libc function would. Before start-up (a constructor that ran first) they go to libc. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "internal.h"

typedef void (*sighandler_fn)(int);
/* Exported by glibc, declared by no header (or only under old feature macros). */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
sighandler_fn bsd_signal(int sig, sighandler_fn h);
typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static void *next_or_die(void **slot, const char *name)
{
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!p) {
        p = ot_next(name);
        __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    }
    return p;
}
#define REAL(type, name) ((type)next_or_die(&real_##name, #name))
static void *real_signal, *real_sysv_signal, *real_sigset, *real_sigignore, *real_siginterrupt, *real_pthread_create;

OT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return ot_signals_sigaction(sig, act, old);
}

OT_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return ot_signals_sigaction(sig, act, old);
}

OT_EXPORT sighandler_fn signal(int sig, sighandler_fn h)
{
    if (!ot_signals_manages(sig)) return REAL(sighandler_fn(*)(int, sighandler_fn), signal)(sig, h);
    return (sighandler_fn)ot_signals_signal(sig, (void *)h, false);
}

OT_EXPORT sighandler_fn bsd_signal(int sig, sighandler_fn h) { return signal(sig, h); }
OT_EXPORT sighandler_fn ssignal(int sig, sighandler_fn h) { return signal(sig, h); }

OT_EXPORT sighandler_fn sysv_signal(int sig, sighandler_fn h)
{
    if (!ot_signals_manages(sig)) return REAL(sighandler_fn(*)(int, sighandler_fn), sysv_signal)(sig, h);
    return (sighandler_fn)ot_signals_signal(sig, (void *)h, true);
}

OT_EXPORT sighandler_fn __sysv_signal(int sig, sighandler_fn h) { return sysv_signal(sig, h); }

OT_EXPORT sighandler_fn sigset(int sig, sighandler_fn disp)
{
    if (!ot_signals_manages(sig)) return REAL(sighandler_fn(*)(int, sighandler_fn), sigset)(sig, disp);
    return (sighandler_fn)ot_signals_sigset(sig, (void *)disp);
}

OT_EXPORT int sigignore(int sig)
{
    if (!ot_signals_manages(sig)) return REAL(int (*)(int), sigignore)(sig);
    struct sigaction a = {0};
    a.sa_handler = SIG_IGN;
    sigemptyset(&a.sa_mask);
    return ot_signals_sigaction(sig, &a, NULL);
}

OT_EXPORT int siginterrupt(int sig, int flag)
{
    if (!ot_signals_manages(sig)) return REAL(int (*)(int, int), siginterrupt)(sig, flag);
    return ot_signals_siginterrupt(sig, flag);
}

OT_EXPORT int sigaltstack(const stack_t *ss, stack_t *old)
{
    return ot_signals_sigaltstack(ss, old);
}

OT_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    pthread_create_fn real = REAL(pthread_create_fn, pthread_create);
    void *rec = ot_signals_thread_prepare(fn, arg);
    if (!rec) return real(t, attr, fn, arg);
    int rc = real(t, attr, ot_signals_thread_start, rec);
    if (rc != 0) ot_signals_thread_abandon(rec);
    return rc;
}
