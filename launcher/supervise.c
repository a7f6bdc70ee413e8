/* The supervisor: the launcher stays the program's parent (fork, exec, wait), forwards the signals
 * it is sent, keeps job control and the terminal's foreground group right, and ends as the child
 * did: its exit code, or death by its signal. Every forwarding decision is in should_forward(). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"
#include "report_internal.h"

static pid_t child;

/* The signals the launcher takes synchronously (sigtimedwait): every one it can catch. The faults
 * are in the set too, so that `kill -SEGV <launcher>` is forwarded; a real fault in the launcher
 * still kills it (the kernel unblocks a synchronous fault and resets its handler). */
static void catchable(sigset_t *s)
{
    sigfillset(s);
    sigdelset(s, SIGKILL);
    sigdelset(s, SIGSTOP);
}

/* A signal the terminal sends to its whole foreground process group (SI_KERNEL from the tty). */
static bool from_terminal_to_group(int sig)
{
    return sig == SIGINT || sig == SIGQUIT || sig == SIGTSTP || sig == SIGWINCH || sig == SIGHUP ||
           sig == SIGTTIN || sig == SIGTTOU || sig == SIGCONT;
}

/* The child's state letter from /proc/PID/stat ('T' stopped), or 0. */
static char child_state(void)
{
    char st;
    ot_proc_stat(child, &st);
    return st;
}

static bool child_in_our_group(void)
{
    pid_t g = getpgid(child);
    return g < 0 || g == getpgrp(); /* gone: nothing to forward to anyway */
}

/* Should a signal the launcher received be sent on to the child?
 * - From the kernel (si_code > 0, SI_KERNEL above all): the terminal's ^C, ^\, ^Z, window size,
 *   hang-up went to the whole foreground group, and the child, in the launcher's group, has it
 *   already: forwarding would deliver it twice. Other kernel signals are about the launcher itself
 *   (its own timers, CPU limit, a closed pipe) and not the child's business. A child that moved to
 *   a process group of its own does not get the terminal's signals through the launcher's group, so
 *   those are forwarded then.
 * - From the child itself (to its parent, or to its group): not sent back to it.
 * - SIGCONT: the shell's fg/bg continues the whole group (the child too); only a stopped child, or
 *   one in another group, is sent it again.
 * - Everything else sent by a process (kill, Slurm, timeout, systemd, mpirun: SI_USER, SI_QUEUE,
 *   SI_TKILL) was meant for the program: forwarded, a sigqueue value kept. */
static bool should_forward(int sig, const siginfo_t *si)
{
    if (sig == SIGCHLD) return false;
    if (si->si_code > 0) return from_terminal_to_group(sig) && !child_in_our_group();
    if (si->si_pid == child) return false;
    if (sig == SIGCONT) return child_state() == 'T' || !child_in_our_group();
    return true;
}

static void forward(int sig, const siginfo_t *si)
{
    if (sig != SIGCONT && sig != SIGWINCH) ot_pm_note_forwarded(sig);
    if (si->si_code == SI_QUEUE) sigqueue(child, sig, si->si_value);
    else kill(child, sig);
}

/* The controlling terminal, to leave its foreground group as it was and to tell whether a stop
 * of the child is job control (the launcher then stops too, so that the shell sees the job stop). */
static int tty = -1;
static bool tty_was_ours;

static bool foreground(void)
{
    return tty >= 0 && tcgetpgrp(tty) == getpgrp();
}

/* The child stopped by sig: stop the launcher the same way if this is job control, so that the
 * shell's job (the launcher) is seen stopped; fg/bg's SIGCONT to the group continues both. */
static void stop_with_child(int sig)
{
    bool job_control = sig == SIGTTIN || sig == SIGTTOU || foreground();
    if (!job_control) return;
    if (sig == SIGSTOP) {
        kill(getpid(), SIGSTOP);
        return;
    }
    struct sigaction dfl, old;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, &old);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    kill(getpid(), sig); /* pending while blocked; unblocking it stops us here until SIGCONT */
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    sigprocmask(SIG_BLOCK, &one, NULL);
    sigaction(sig, &old, NULL);
}

void ot_die_by(int sig)
{
    /* The launcher's own death must not leave a core file where the child's would have been. */
    struct rlimit no = {0, 0};
    setrlimit(RLIMIT_CORE, &no);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    kill(getpid(), sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    /* Still here: a signal whose default is not to die (it could not have killed the child). */
    fflush(NULL);
    _exit(128 + sig);
}

/* Descendants of the child that the OOM killer takes while the child lives on (a DataLoader
 * worker, a forked helper: the child sees a worker "killed by signal 9" and goes on or exits
 * normally). Once a second the OOM-kill counters are read; where they grew, the dead descendants'
 * state files are reported (ot_pm_oom_descendants). The window of counted kills stays open until
 * reports account for them, or DESC_WINDOW_NS passed: a victim may take a moment to die, and a
 * kill of a process outside the program's tree is never matched. */
#define DESC_EVERY 10u /* samples (OT_SAMPLE_PERIOD_NS each) between two looks */
#define DESC_WINDOW_NS 5000000000ull
static ot_oom_probe_t desc_since;
static uint64_t desc_since_ns;

/* A counter of the window's start moved on by the kills reported, but not past where it is now (a
 * kernel-wide kill moves /proc/vmstat's, not the cgroup's). */
static void advance(int64_t *since, int64_t now, unsigned got)
{
    if (*since < 0 || now <= *since) return;
    *since += now - *since < (int64_t)got ? now - *since : (int64_t)got;
}

static void watch_descendants(const char *prog, const char *options, const ot_oom_probe_t *now)
{
    uint64_t t = ot_clock_ns(CLOCK_MONOTONIC);
    const ot_oom_verdict_t v = ot_oom_judge(9, &desc_since, now);
    bool counted = v.kills > 0;
    unsigned got = counted ? ot_pm_oom_descendants(child, prog, &v, now, options) : 0;
    if (!counted || t - desc_since_ns > DESC_WINDOW_NS) {
        desc_since = *now;
        desc_since_ns = t;
    } else if (got) { /* those kills are accounted for: any others stay in the window */
        advance(&desc_since.oom_kill, now->oom_kill, got);
        advance(&desc_since.vmstat_oom_kill, now->vmstat_oom_kill, got);
    }
}

static void exec_child(char **argv, const sigset_t *mask, const struct sigaction *chld)
{
    sigaction(SIGCHLD, chld, NULL);
    sigprocmask(SIG_SETMASK, mask, NULL);
    execvp(argv[0], argv);
    int e = errno;
    fprintf(stderr, "oomtrace: cannot run %s: %s\n", argv[0], strerror(e));
    _exit(e == ENOENT ? 127 : 126);
}

int ot_supervise(char **argv, const ot_sv_opts_t *o)
{
    char me[32];
    snprintf(me, sizeof me, "%d", (int)getpid());
    setenv("OOMTRACE_SUPERVISOR", me, 1);
    if (o->exec_only) {
        unsetenv("OOMTRACE_SUPERVISOR");
        execvp(argv[0], argv);
        int e = errno;
        fprintf(stderr, "oomtrace: cannot run %s: %s\n", argv[0], strerror(e));
        return e == ENOENT ? 127 : 126;
    }
    /* Everything blocked before fork: no signal is lost between the fork and the wait loop. The
     * child gets back the mask and the SIGCHLD disposition it would have had without us. */
    sigset_t all, old;
    catchable(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    struct sigaction dfl, old_chld;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL; /* SIG_IGN would reap the child for us and lose its status */
    sigaction(SIGCHLD, &dfl, &old_chld);

    tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    tty_was_ours = foreground();

    ot_oom_probe_t before, after;
    ot_oom_probe(0, &before);
    fflush(NULL);
    child = fork();
    if (child < 0) {
        fprintf(stderr, "oomtrace: fork: %s\n", strerror(errno));
        return 126;
    }
    if (child == 0) exec_child(argv, &old, &old_chld);
    unsigned long long start = ot_proc_start_time(child);
    ot_sampler_start(child, &before);
    desc_since = before;
    desc_since_ns = ot_clock_ns(CLOCK_MONOTONIC);
    unsigned ticks = 0;

    /* The wait is sigtimedwait with the time left to the next sample: a sample is due every
     * OT_SAMPLE_PERIOD_NS however many signals arrive, and between them the launcher sleeps. */
    int status = 0;
    uint64_t next = ot_clock_ns(CLOCK_MONOTONIC) + OT_SAMPLE_PERIOD_NS;
    for (bool done = false; !done;) {
        uint64_t now = ot_clock_ns(CLOCK_MONOTONIC);
        if (now >= next) {
            ot_sampler_take();
            if (++ticks % DESC_EVERY == 0) {
                ot_oom_probe(0, &after);
                watch_descendants(argv[0], o->options, &after);
            }
            next = now + OT_SAMPLE_PERIOD_NS;
        }
        uint64_t left = next - now;
        struct timespec wait = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        siginfo_t si;
        int sig = sigtimedwait(&all, &si, &wait);
        if (sig < 0) continue; /* EAGAIN: a sample is due; EINTR: continued after a stop */
        if (sig != SIGCHLD) {
            if (should_forward(sig, &si)) forward(sig, &si);
            continue;
        }
        for (;;) {
            int st;
            pid_t w = waitpid(child, &st, WNOHANG | WUNTRACED);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            if (WIFSTOPPED(st)) {
                stop_with_child(WSTOPSIG(st));
                continue;
            }
            status = st;
            done = true;
            break;
        }
    }
    if (tty >= 0 && tty_was_ours && !foreground()) tcsetpgrp(tty, getpgrp());
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        ot_oom_probe(0, &after);
        ot_pm_after_child(child, start, argv[0], sig, &before, &after, o->options);
        fflush(NULL);
        ot_die_by(sig);
    }
    if (WIFEXITED(status)) {
        /* The last of the descendants the OOM killer took (the child itself was not killed) */
        ot_oom_probe(0, &after);
        const ot_oom_verdict_t v = ot_oom_judge(9, &desc_since, &after);
        (void)ot_pm_oom_descendants(child, argv[0], &v, &after, o->options);
        ot_pm_after_exit(child, start, argv[0], WEXITSTATUS(status), o->options);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
