/* Bench helper, not a workload: runs a command and appends one line "wall_s user_s sys_s maxrss_kib
 * status" to a file, so the bench script needs neither GNU time nor bash's time format.
 * usage: runstat OUTFILE PROGRAM [ARGS...]. maxrss is the largest resident set of the command or
 * of any descendant it waited for (wait4 rusage), which covers heaptrack's interpreter process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: runstat OUTFILE PROGRAM [ARGS...]\n");
        return 2;
    }
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("runstat: fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        fprintf(stderr, "runstat: cannot run %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("runstat: wait4");
            return 2;
        }
    }
    double wall = now() - t0;
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    FILE *f = fopen(argv[1], "a");
    if (!f) {
        perror("runstat: output file");
        return 2;
    }
    fprintf(f, "%.6f %.6f %.6f %ld %d\n", wall, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
            (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6, ru.ru_maxrss, rc);
    fclose(f);
    return rc;
}
