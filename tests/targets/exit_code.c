/* e2e target (host_traps.sh, launcher.sh): prints one line on stdout, saying whether oomtrace is
 * loaded, then exits with the status given, or aborts, or ends by the exit_group system call with
 * status 5 (as the Go runtime ends a program: no exit handler runs).
 *   exit_code [STATUS|abort|exit_group] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "oomtrace.h"

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "0";
    char *p = malloc(100);
    printf("exit_code %s: oomtrace %s\n", what, oomtrace_available() ? "loaded" : "absent");
    fflush(stdout);
    free(p);
    if (!strcmp(what, "abort")) abort();
    if (!strcmp(what, "exit_group")) syscall(SYS_exit_group, 5);
    return atoi(what);
}
