/* waitstatus CMD ARGS...: runs CMD and prints its wait status on the last line of stderr
 * ("waitstatus: exit N" or "waitstatus: signal S core C"), core bit included, for the crash tests. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    pid_t p = fork();
    if (p == 0) {
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    int st;
    if (waitpid(p, &st, 0) != p) return 3;
    if (WIFSIGNALED(st)) fprintf(stderr, "waitstatus: signal %d core %d\n", WTERMSIG(st), WCOREDUMP(st) ? 1 : 0);
    else fprintf(stderr, "waitstatus: exit %d\n", WEXITSTATUS(st));
    return 0;
}
