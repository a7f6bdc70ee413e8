/* Start-up and fork handling, and the single path for internal warnings.
 * Start-up runs from a constructor, before the program's own, with the recursion guard held so
 * that whatever libc allocates meanwhile goes straight to the real allocator. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "internal.h"

ot_state_t ot_state;
OT_TLS int ot_in_hook;

static _Atomic unsigned warnings;

void ot_warn(const char *fmt, ...)
{
    /* Capped: a broken environment must not flood the program's stderr. */
    if (atomic_fetch_add(&warnings, 1) >= 20) return;
    char mem[512];
    ot_buf_t b;
    ot_buf_init(&b, mem, sizeof mem, 2);
    ot_buf_puts(&b, "oomtrace: ");
    va_list ap;
    va_start(ap, fmt);
    ot_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    ot_buf_putc(&b, '\n');
    ot_buf_flush(&b);
}

bool ot_ready(void)
{
    return ot_state.initialized == 2;
}

/* The program's arguments as glibc hands them to constructors, while they are still the ones
 * /proc/self/cmdline would show (NULL where ot_init ran first from a hook). */
static int g_argc;
static char **g_argv;

static void read_identity(void)
{
    ot_state.pid = (pid_t)syscall(SYS_getpid);
    ssize_t n = readlink("/proc/self/exe", ot_state.exe, sizeof ot_state.exe - 1);
    ot_state.exe[n > 0 ? n : 0] = 0;
    if (g_argv) {
        /* What /proc/self/cmdline holds, without opening it (12 us of every process's start). */
        size_t at = 0, cap = sizeof ot_state.cmdline - 1;
        for (int i = 0; i < g_argc && g_argv[i] && at < cap; i++) {
            if (i) ot_state.cmdline[at++] = ' ';
            for (const char *a = g_argv[i]; *a && at < cap; a++) ot_state.cmdline[at++] = *a;
        }
        ot_state.cmdline[at] = 0;
    } else {
        ssize_t c = ot_read_file("/proc/self/cmdline", ot_state.cmdline, sizeof ot_state.cmdline);
        for (ssize_t i = 0; i + 1 < c; i++)
            if (!ot_state.cmdline[i]) ot_state.cmdline[i] = ' ';
        if (c > 0 && !ot_state.cmdline[c - 1]) ot_state.cmdline[c - 1] = 0;
    }
    struct utsname u;
    if (uname(&u) == 0) ot_strlcpy(ot_state.host, u.nodename, sizeof ot_state.host);
}

static void atfork_child(void)
{
    /* The child reports under its own pid; a report that another thread of the parent was
     * writing at fork time is abandoned rather than waited for. */
    ot_state.pid = (pid_t)syscall(SYS_getpid);
    ot_report_atfork_child();
    ot_unwind_atfork_child();
    ot_recorder_atfork_child();
    ot_pressure_atfork_child();
}

void ot_init(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&ot_state.initialized, &expected, 1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    ot_in_hook++;
    read_identity();
    ot_options_defaults(&ot_opt);
    const char *opts = ot_getenv("OOMTRACE_OPTIONS");
    if (opts) {
        char mem[1024];
        ot_buf_t err;
        ot_buf_init(&err, mem, sizeof mem, 2);
        ot_options_parse(opts, &ot_opt, &err);
        ot_buf_flush(&err);
    }
    ot_stack_init();
    ot_recorder_init();
    ot_pressure_init();
    pthread_atfork(NULL, NULL, atfork_child);
    ot_signals_init();
    ot_exit_install();
    ot_in_hook--;
    __atomic_store_n(&ot_state.initialized, 2, __ATOMIC_RELEASE);
}

/* glibc calls constructors with the program's argc, argv and envp. */
__attribute__((constructor(101))) static void ot_constructor(int argc, char **argv, char **envp)
{
    (void)envp;
    g_argc = argc;
    g_argv = argv;
    ot_init();
    g_argv = NULL; /* the program may change them from here on */
}

/* Exit is handled in exit.c (the one exit path). */
