/* Shared by the e2e targets that make a malloc fail on purpose (fork_oom, exec_oomchild,
 * new_handler): caps RLIMIT_AS at the current address-space size plus some headroom, so that a
 * larger request fails whatever the machine's memory. C and C++. */
#ifndef OT_TARGETS_CAP_AS_H
#define OT_TARGETS_CAP_AS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* VmSize of this process in bytes, or -1. */
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

/* 0 when the limit is set; -1 (with a message on stderr) when it cannot be. */
static int cap_address_space(long headroom)
{
    long vm = vm_size_bytes();
    if (vm < 0) {
        fprintf(stderr, "cannot read VmSize\n");
        return -1;
    }
    struct rlimit rl = {(rlim_t)(vm + headroom), (rlim_t)(vm + headroom)};
    if (setrlimit(RLIMIT_AS, &rl)) {
        perror("setrlimit");
        return -1;
    }
    return 0;
}
#endif
