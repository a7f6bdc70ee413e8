/* e2e target (host_fork_exec.sh): holds some heap, prints its pid, then execs the program given
 * in argv[1] (with the rest of argv) in the same process; the environment, LD_PRELOAD included,
 * is kept.
 *   exec_parent PROGRAM [ARGS...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: exec_parent PROGRAM [ARGS...]\n"); return 2; }
    /* 40 MiB live at exec time: none of it may show up in the new program's report. */
    for (int i = 0; i < 40; i++) {
        char *p = malloc(1 << 20);
        if (!p) return 3;
        memset(p, i, 4096);
    }
    printf("exec_parent pid %d\n", (int)getpid());
    fflush(stdout);
    execv(argv[1], argv + 1);
    perror("execv");
    return 127;
}
