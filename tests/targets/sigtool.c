/* A program for the supervisor's signal tests:
 *   sigtool raise N        dies by signal N (its default action)
 *   sigtool count SIG MS   counts SIG (a number) for MS ms after "ready", then prints "got N" and exits 0
 *   sigtool ignint         ignores SIGINT, prints "ready", exits 7 on SIGUSR1 (or 3 after 10 s)
 *   sigtool tellparent     sends SIGUSR1 to its parent, then exits 0 (a parent that sends it back kills it)
 *   sigtool env            prints OOMTRACE_SUPERVISOR and its parent's pid */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_sig(int s)
{
    (void)s;
    got++;
}
static void on_usr1(int s)
{
    (void)s;
    _exit(7);
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0) {}
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc >= 3 && !strcmp(argv[1], "raise")) {
        int s = atoi(argv[2]);
        signal(s, SIG_DFL);
        raise(s);
        return 99;
    }
    if (argc >= 4 && !strcmp(argv[1], "count")) {
        int s = atoi(argv[2]);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sig;
        sigaction(s, &sa, NULL);
        printf("ready\n");
        long ms = atol(argv[3]);
        for (long i = 0; i < ms / 10 && !got; i++) sleep_ms(10);
        sleep_ms(300); /* a second delivery would come now */
        printf("got %d\n", (int)got);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "ignint")) {
        signal(SIGINT, SIG_IGN);
        signal(SIGUSR1, on_usr1);
        printf("ready\n");
        for (int i = 0; i < 1000; i++) sleep_ms(10);
        return 3;
    }
    if (argc >= 2 && !strcmp(argv[1], "tellparent")) {
        kill(getppid(), SIGUSR1);
        sleep_ms(300);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "env")) {
        const char *s = getenv("OOMTRACE_SUPERVISOR");
        printf("supervisor=%s ppid=%d pid=%d\n", s ? s : "", (int)getppid(), (int)getpid());
        return 0;
    }
    fprintf(stderr, "sigtool: bad arguments\n");
    return 2;
}
