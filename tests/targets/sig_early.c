/* A library preloaded before oomtrace whose constructor installs a SIGSEGV handler: oomtrace's
 * start-up finds it "installed before us" and must still call it (libsig_early.so). As a program
 * (the generic target rule) it only says what it is. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void early_handler(int sig, siginfo_t *si, void *uc)
{
    (void)si, (void)uc;
    static const char m[] = "early handler ran\n";
    (void)!write(1, m, sizeof m - 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

#ifdef OT_SHARED_LIB
__attribute__((constructor)) static void early_install(void)
{
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = early_handler;
    a.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &a, NULL);
}
#else
int main(void)
{
    static const char m[] = "sig_early: build/targets/libsig_early.so is the library\n";
    (void)!write(1, m, sizeof m - 1);
    (void)early_handler;
    return 0;
}
#endif
