/* e2e target (killed.sh): memory that grows without allocation calls, as in most real OOM kills.
 *   touch_grow malloc MIB STEP_MIB DELAY_MS   one malloc of MIB from grow_buffers (the recorder sees
 *                                             it at once), then touches it STEP_MIB every DELAY_MS
 *   touch_grow mmap HEAP_MIB STEP_MIB DELAY_MS  mallocs and touches HEAP_MIB (so the recorder makes
 *                                             its state file), then grows by mmap(MAP_ANONYMOUS) of
 *                                             STEP_MIB touched every DELAY_MS: no malloc at all
 * Either way it holds (sleeps) at the end, until it is killed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *volatile keep;

__attribute__((noinline)) static char *grow_buffers(size_t bytes)
{
    char *p = malloc(bytes);
    if (!p) { fprintf(stderr, "malloc failed\n"); exit(3); }
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 5) { fprintf(stderr, "usage: touch_grow malloc|mmap MIB STEP_MIB DELAY_MS\n"); return 2; }
    size_t mib = strtoul(argv[2], NULL, 10) << 20, step = strtoul(argv[3], NULL, 10) << 20;
    useconds_t delay = (useconds_t)strtoul(argv[4], NULL, 10) * 1000;
    if (!strcmp(argv[1], "malloc")) {
        keep = grow_buffers(mib);
        for (size_t off = 0; off < mib; off += step) {
            memset(keep + off, 1, off + step <= mib ? step : mib - off);
            usleep(delay);
        }
    } else {
        keep = grow_buffers(mib);
        memset(keep, 1, mib);
        for (;;) {
            char *p = mmap(NULL, step, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) { perror("mmap"); return 3; }
            memset(p, 1, step);
            usleep(delay);
        }
    }
    for (;;) pause();
}
