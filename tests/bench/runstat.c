/* Bench helper, not a workload: runs a command and appends one line "wall_s user_s sys_s maxrss_kib
 * status" to a file, so the bench script needs neither GNU time nor bash's time format.
 * usage: runstat [-w MIB] OUTFILE PROGRAM [ARGS...]. maxrss is the largest resident set of the
 * command or of any descendant it waited for (wait4 rusage), which covers heaptrack's interpreter.
 *
 * -w MIB: before the clock starts, write MIB MiB of fresh memory and give it back. On a virtual
 * machine whose balloon reports free pages to the host (virtio free page reporting: pages free for
 * about 2 s are handed back), memory freed by the run before is gone from the guest, and the next
 * program pays the host for every page it touches again. Measured here, live_10m under the ideal
 * table (tests/bench/ref) started 4 s after the run before took 1.36-1.64 s, 0.76-1.03 s of it
 * system time; after `-w 1536` it took 0.88-1.13 s (0.29-0.42 s system). Every run starts alike. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "now.h"

/* Writes one byte per page of `mib` MiB of fresh anonymous memory, then unmaps it. In huge pages
 * where THP allows: one fault per 2 MiB instead of 512, and 1.5 GiB took 0.15-0.25 s here instead
 * of 1.1-2.8 s in 4 KiB pages (right after another run; from cold memory both take seconds). */
static void warm(long mib)
{
    size_t n = (size_t)mib << 20;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        perror("runstat: warm-up mmap");
        return;
    }
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < n; i += 4096) ((volatile char *)p)[i] = 1;
    munmap(p, n);
}

int main(int argc, char **argv)
{
    long warm_mib = 0;
    if (argc > 2 && strcmp(argv[1], "-w") == 0) {
        char *end;
        warm_mib = strtol(argv[2], &end, 10);
        if (*argv[2] == '\0' || *end != '\0' || warm_mib < 0 || warm_mib > (1L << 20)) {
            fprintf(stderr, "runstat: -w wants a size in MiB (0..1048576), not '%s'\n", argv[2]);
            return 2;
        }
        argc -= 2;
        argv += 2;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: runstat [-w MIB] OUTFILE PROGRAM [ARGS...]\n");
        return 2;
    }
    if (warm_mib > 0) warm(warm_mib); /* without it the run is only less steady: go on */
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("runstat: fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        fprintf(stderr, "runstat: cannot run %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("runstat: wait4");
            return 2;
        }
    }
    double wall = now() - t0;
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    FILE *f = fopen(argv[1], "a");
    if (!f) {
        perror("runstat: output file");
        return 2;
    }
    fprintf(f, "%.6f %.6f %.6f %ld %d\n", wall, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
            (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6, ru.ru_maxrss, rc);
    fclose(f);
    return rc;
}
