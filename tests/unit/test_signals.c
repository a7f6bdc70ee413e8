/* signals.c without the preload: names and codes, a handler installed before start-up becomes the
 * program's and is called, what sigaction hands back, SA_RESETHAND, SIG_IGN installed for real,
 * the alternate stacks (hidden from the program, reused by later threads). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "report_internal.h"

static sigjmp_buf jb;
static volatile int ran, ran_info;
static void h_plain(int sig) { ran = sig; }
static void h_jump(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    ran_info = si->si_code;
    siglongjmp(jb, sig);
}
/* The kernel's own view (its struct, not glibc's): what is really installed. */
static void real_query(int sig, struct sigaction *o)
{
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } k;
    syscall(SYS_rt_sigaction, sig, NULL, &k, 8);
    ot_memset(o, 0, sizeof *o);
    o->sa_handler = (void (*)(int))k.handler;
    o->sa_flags = (int)k.flags;
    ot_memcpy(&o->sa_mask, &k.mask, 8);
}

TEST(names)
{
    EXPECT_STR(ot_signal_name(SIGSEGV), "SIGSEGV");
    EXPECT_STR(ot_signal_code_name(SIGSEGV, SEGV_MAPERR), "SEGV_MAPERR");
    EXPECT_STR(ot_signal_code_name(SIGBUS, BUS_ADRALN), "BUS_ADRALN");
    EXPECT_STR(ot_signal_code_name(SIGFPE, FPE_INTDIV), "FPE_INTDIV");
    EXPECT_STR(ot_signal_code_name(SIGABRT, SI_TKILL), "SI_TKILL");
    EXPECT_STR(ot_signal_code_name(SIGSEGV, SI_USER), "SI_USER");
    EXPECT_STR(ot_signal_code_name(SIGSEGV, 99), "?");
    EXPECT(ot_signal_parse("SIGUSR2", 7) == SIGUSR2);
    EXPECT(ot_signal_parse("USR2", 4) == SIGUSR2);
    EXPECT(ot_signal_parse("12", 2) == 12);
    EXPECT(ot_signal_parse("SIGNOPE", 7) == -1);
    EXPECT(ot_signal_parse("0", 1) == -1);
    EXPECT(ot_signal_parse("65", 2) == -1);
}

/* Start-up (again: the core's constructor ran it) with a handler already there. */
TEST(installed_before_start)
{
    ot_signals_reset_for_test();
    ot_state.pid = getpid();
    ot_options_defaults(&ot_opt);
    struct sigaction a, o;
    ot_memset(&a, 0, sizeof a);
    a.sa_sigaction = h_jump;
    a.sa_flags = SA_SIGINFO;
    sigemptyset(&a.sa_mask);
    ASSERT(sigaction(SIGSEGV, &a, NULL) == 0); /* libc's: the test has no shim */
    ot_signals_init();
    ASSERT(ot_signals_manages(SIGSEGV));
    real_query(SIGSEGV, &o);
    EXPECT((void *)o.sa_sigaction != (void *)h_jump);   /* ours is in the kernel */
    EXPECT(o.sa_flags & SA_ONSTACK);
    ASSERT(ot_signals_sigaction(SIGSEGV, NULL, &o) == 0);
    EXPECT((void *)o.sa_sigaction == (void *)h_jump);   /* the program sees its own */
    EXPECT(o.sa_flags & SA_SIGINFO);
    ran_info = -1;
    if (!sigsetjmp(jb, 1)) {
        volatile int *volatile p = (int *)(uintptr_t)8;
        (void)*p;
    }
    EXPECT(ran_info == SEGV_MAPERR); /* it was called, with the kernel's siginfo */
}

TEST(old_disposition_and_errors)
{
    struct sigaction a, o;
    ot_memset(&a, 0, sizeof a);
    a.sa_handler = h_plain;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGUSR1);
    a.sa_flags = SA_RESTART | SA_NODEFER;
    ASSERT(ot_signals_sigaction(SIGFPE, &a, &o) == 0);
    EXPECT(o.sa_handler == SIG_DFL);
    ASSERT(ot_signals_sigaction(SIGFPE, NULL, &o) == 0);
    EXPECT(o.sa_handler == h_plain);
    EXPECT(sigismember(&o.sa_mask, SIGUSR1) && !sigismember(&o.sa_mask, SIGUSR2));
    EXPECT((o.sa_flags & (SA_RESTART | SA_NODEFER)) == (SA_RESTART | SA_NODEFER));
    struct sigaction k;
    real_query(SIGFPE, &k);
    /* ours, with the program's mask and flags plus SA_SIGINFO|SA_ONSTACK */
    EXPECT((k.sa_flags & (SA_RESTART | SA_NODEFER | SA_SIGINFO | SA_ONSTACK)) ==
           (SA_RESTART | SA_NODEFER | SA_SIGINFO | SA_ONSTACK));
    EXPECT(sigismember(&k.sa_mask, SIGUSR1));
    /* Not managed: straight through, errors included. */
    errno = 0;
    EXPECT(ot_signals_sigaction(SIGKILL, &a, NULL) == -1 && errno == EINVAL);
    errno = 0;
    EXPECT(ot_signals_sigaction(0, NULL, &o) == -1 && errno == EINVAL);
    EXPECT(ot_signals_signal(SIGFPE, (void *)SIG_ERR, false) == (void *)SIG_ERR && errno == EINVAL);
    /* signal(): the old handler back */
    EXPECT(ot_signals_signal(SIGFPE, (void *)SIG_DFL, false) == (void *)h_plain);
}

TEST(resethand_emulated)
{
    struct sigaction a, o;
    ot_memset(&a, 0, sizeof a);
    a.sa_handler = h_plain;
    a.sa_flags = SA_RESETHAND;
    sigemptyset(&a.sa_mask);
    ASSERT(ot_signals_sigaction(SIGTRAP, &a, NULL) == 0);
    ran = 0;
    raise(SIGTRAP);
    EXPECT(ran == SIGTRAP);
    ASSERT(ot_signals_sigaction(SIGTRAP, NULL, &o) == 0);
    EXPECT(o.sa_handler == SIG_DFL);
    struct sigaction k;
    real_query(SIGTRAP, &k);
    EXPECT(k.sa_handler != SIG_DFL); /* ours stays, to report the next one */
}

TEST(sig_ign_for_real)
{
    struct sigaction a, k;
    ot_memset(&a, 0, sizeof a);
    a.sa_handler = SIG_IGN;
    ASSERT(ot_signals_sigaction(SIGBUS, &a, NULL) == 0);
    real_query(SIGBUS, &k);
    EXPECT(k.sa_handler == SIG_IGN);
    raise(SIGBUS); /* ignored by the kernel */
    EXPECT(ot_signals_sigset(SIGBUS, (void *)SIG_DFL) == (void *)SIG_IGN);
    real_query(SIGBUS, &k);
    EXPECT(k.sa_handler != SIG_IGN && k.sa_handler != SIG_DFL);
}

static void *thread_body(void *arg)
{
    stack_t seen, kernel;
    int *out = arg;
    out[0] = ot_signals_sigaltstack(NULL, &seen) == 0 && (seen.ss_flags & SS_DISABLE);
    out[1] = syscall(SYS_sigaltstack, NULL, &kernel) == 0 && !(kernel.ss_flags & SS_DISABLE);
    return NULL;
}

TEST(thread_stacks)
{
    int res[2] = {0, 0};
    void *rec = ot_signals_thread_prepare(thread_body, res);
    if (!rec) SKIP("no pthread key or no memory for an alternate stack");
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, ot_signals_thread_start, rec) == 0);
    pthread_join(t, NULL);
    EXPECT(res[0]); /* the program sees no alternate stack */
    EXPECT(res[1]); /* but the thread has ours */
    uint64_t before = ot_signals_stacks_mapped();
    for (int i = 0; i < 200; i++) {
        rec = ot_signals_thread_prepare(thread_body, res);
        ASSERT(rec && pthread_create(&t, NULL, ot_signals_thread_start, rec) == 0);
        pthread_join(t, NULL);
    }
    /* Exited threads' stacks are reused: churn maps none (one may be in flight at a join). */
    EXPECT(ot_signals_stacks_mapped() - before <= 1);
}

TEST(program_stack_kept)
{
    static char mine[65536];
    stack_t ss = {.ss_sp = mine, .ss_flags = 0, .ss_size = sizeof mine}, o;
    ASSERT(ot_signals_sigaltstack(&ss, &o) == 0);
    ASSERT(ot_signals_sigaltstack(NULL, &o) == 0);
    EXPECT(o.ss_sp == mine && o.ss_size == sizeof mine); /* the program's own is what it sees */
    stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
    ot_signals_sigaltstack(&off, NULL);
}

/* The crash section's story line, as the Caffe example must read. */
TEST(crash_story_text)
{
    static ot_report_t r;
    static ot_crash_t c;
    static char mem[4096];
    ot_memset(&r, 0, sizeof r);
    ot_memset(&c, 0, sizeof c);
    c.signo = SIGABRT;
    c.signame = "SIGABRT";
    c.codename = "SI_TKILL";
    c.mono_ns = 5000000000ull;
    r.crash = &c;
    r.n_recent = 2;
    r.recent[0] = (ot_failure_note_t){.mono_ns = c.mono_ns - 2500000000ull, .api = "malloc", .size = 64};
    r.recent[1] = (ot_failure_note_t){.mono_ns = c.mono_ns - 300000, .api = "cudaMalloc", .size = 837538000,
                                      .device = true, .device_index = 0};
    ot_strlcpy(r.recent[1].report, "/tmp/oomtrace.1.json", sizeof r.recent[1].report);
    ot_buf_t b;
    ot_buf_init(&b, mem, sizeof mem, -1);
    ot_report_crash_text(&r, &b);
    const char *t = ot_buf_cstr(&b);
    EXPECT_CONTAINS(t, "oomtrace: aborted 0.3 ms after cudaMalloc(837538000) failed on GPU 0, report /tmp/oomtrace.1.json\n");
    EXPECT_CONTAINS(t, "oomtrace:   and 2.5 s before it: malloc(64) failed\n");
    ot_buf_init(&b, mem, sizeof mem, -1);
    ot_report_crash_json(&r, &b);
    t = ot_buf_cstr(&b);
    EXPECT_CONTAINS(t, "\"us_before\":300,\"report\":\"/tmp/oomtrace.1.json\"");
    EXPECT_CONTAINS(t, "\"signal\":\"SIGABRT\"");
}

TEST_MAIN(names, crash_story_text, installed_before_start, old_disposition_and_errors, resethand_emulated, sig_ign_for_real, thread_stacks,
          program_stack_kept)
