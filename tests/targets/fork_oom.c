/* e2e target (host_fork_exec.sh): the parent forks; the child caps its address space and makes a
 * big malloc fail, so only the child writes a report. Prints both pids.
 *   fork_oom */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cap_as.h"

static __attribute__((noinline)) void *child_big_alloc(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    printf("parent pid %d\n", (int)getpid());
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        if (cap_address_space(64L << 20)) _exit(3);
        void *p = child_big_alloc((size_t)1 << 30);
        printf("child pid %d malloc %s\n", (int)getpid(), p ? "succeeded" : "failed");
        fflush(stdout);
        exit(p ? 4 : 0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) { perror("waitpid"); return 1; }
    printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
