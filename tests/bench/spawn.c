/* Bench workload: process start-up, as a CI suite or a configure script pays it for every short
 * process it runs. Starts CMD COUNT times, one after another (posix_spawn, then waitpid), each
 * with this process's environment: under a preload set in the environment every child starts
 * with it. Exits non-zero if a child cannot start or does not exit with status 0.
 * usage: spawn COUNT CMD [ARG...]. Prints @per_process_ms (wall time per start, this driver's own
 * start-up left out) and @processes. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "now.h"

extern char **environ;

int main(int argc, char **argv)
{
    long count = argc > 2 ? atol(argv[1]) : 0;
    if (count <= 0) {
        fprintf(stderr, "usage: spawn COUNT CMD [ARG...]\n");
        return 2;
    }
    double t0 = now();
    for (long i = 0; i < count; i++) {
        pid_t pid;
        int st, rc = posix_spawnp(&pid, argv[2], NULL, NULL, argv + 2, environ);
        if (rc != 0) {
            fprintf(stderr, "spawn: cannot start %s (error %d)\n", argv[2], rc);
            return 1;
        }
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "spawn: %s did not exit with status 0 (start %ld)\n", argv[2], i + 1);
            return 1;
        }
    }
    double t = now() - t0;
    printf("@processes %ld\n@per_process_ms %.4f\n", count, t * 1000.0 / (double)count);
    return 0;
}
