/* A program that fills memory the way most host OOMs on Linux end: malloc succeeds (overcommit),
 * and the page faults of touching the memory get the process SIGKILLed by the OOM killer. It grows
 * a list of 16 MiB buffers (grow_buffers, called from main) and touches each one.
 *
 *   grow_oom [MAX_MIB]     stops growing at MAX_MIB (default: never) and then waits to be killed
 *
 * `make demo` runs it under oomtrace in a 200 MiB memory cgroup: the launcher writes the "killed"
 * report from the state file the library left behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define BLOCK (16u << 20)

static void *buffers[1 << 16];

static NOINLINE void *grow_buffers(unsigned i)
{
    void *p = malloc(BLOCK);
    if (!p) {
        fprintf(stderr, "grow_oom: malloc(%u) failed\n", BLOCK);
        exit(1);
    }
    memset(p, (int)i, BLOCK); /* the page faults the OOM killer answers */
    buffers[i % (1 << 16)] = p;
    return p;
}

int main(int argc, char **argv)
{
    unsigned long max_mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
    setvbuf(stdout, NULL, _IONBF, 0);
    for (unsigned i = 0;; i++) {
        if (max_mib && (unsigned long)(i + 1) * 16 > max_mib) {
            printf("grow_oom: holding %u MiB; waiting to be killed\n", i * 16);
            for (;;) pause();
        }
        grow_buffers(i);
        usleep(50000); /* a few recorder updates per block */
    }
}
