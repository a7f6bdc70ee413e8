/* e2e target (host_fork_exec.sh): caps its own address space and makes a big malloc fail, then
 * prints its pid and whether the failure was handed back (NULL).
 *   exec_oomchild */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static long vm_size_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7)) kb = atol(line + 7);
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

static __attribute__((noinline)) void *exec_child_alloc(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    long vm = vm_size_bytes();
    if (vm < 0) return 3;
    struct rlimit rl = {(rlim_t)vm + (64 << 20), (rlim_t)vm + (64 << 20)};
    if (setrlimit(RLIMIT_AS, &rl)) { perror("setrlimit"); return 3; }
    void *p = exec_child_alloc((size_t)1 << 30);
    printf("exec_oomchild pid %d malloc %s\n", (int)getpid(), p ? "succeeded" : "failed");
    return p ? 4 : 0;
}
