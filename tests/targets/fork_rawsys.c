/* e2e target (host_fork_exec.sh): like fork_oom, but the child is made with the raw fork system
 * call, so no pthread_atfork handler runs in it (as with programs that call clone themselves). The
 * child makes a malloc fail and prints its pid; its report must still carry the child's pid.
 *   fork_rawsys */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static __attribute__((noinline)) void *raw_child_alloc(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    printf("parent pid %d\n", (int)getpid());
    fflush(stdout);
    long pid = syscall(SYS_fork);
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        void *p = raw_child_alloc((size_t)1 << 50);
        printf("child pid %d malloc %s\n", (int)syscall(SYS_getpid), p ? "succeeded" : "failed");
        fflush(stdout);
        _exit(p ? 4 : 0);
    }
    int st;
    if (waitpid((pid_t)pid, &st, 0) != pid) { perror("waitpid"); return 1; }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
