/* e2e target (host_fork_exec.sh): caps its own address space and makes a big malloc fail, then
 * prints its pid and whether the failure was handed back (NULL).
 *   exec_oomchild */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cap_as.h"

static __attribute__((noinline)) void *exec_child_alloc(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    if (cap_address_space(64L << 20)) return 3;
    void *p = exec_child_alloc((size_t)1 << 30);
    printf("exec_oomchild pid %d malloc %s\n", (int)getpid(), p ? "succeeded" : "failed");
    return p ? 4 : 0;
}
