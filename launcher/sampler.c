/* The supervisor's own samples of the child while it waits (supervise.c calls ot_sampler_take every
 * OT_SAMPLE_EVERY_NS): its RSS from /proc/PID/statm and its cgroup's usage, in a fixed ring. They
 * see what the state file cannot: pages faulted in without an allocation call, a program's own
 * mmap, tmpfs and page cache charged to the cgroup, other processes in it. Two preads a sample (the
 * files are opened once), no allocation. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"
#include "report_internal.h"

static ot_killed_sample_t ring[OT_SAMPLE_RING], linear[OT_SAMPLE_RING];
static uint64_t taken;
static int statm_fd = -1, cg_fd = -1; /* opened once, read with pread: no open/close per sample */
static bool started;
static int64_t page;

/* Called in the parent after the fork: the child never inherits these descriptors. */
void ot_sampler_start(pid_t pid, const ot_oom_probe_t *cg)
{
    char path[48];
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    statm_fd = open(path, O_RDONLY | O_CLOEXEC);
    cg_fd = cg ? ot_oom_usage_open(cg) : -1;
    long p = sysconf(_SC_PAGESIZE);
    page = p > 0 ? p : 4096;
    taken = 0;
    started = true;
}

void ot_sampler_take(void)
{
    if (!started) return;
    char buf[160];
    int64_t rss = -1;
    ssize_t n = statm_fd >= 0 ? pread(statm_fd, buf, sizeof buf - 1, 0) : -1;
    if (n > 0) {
        buf[n] = 0;
        /* "size resident shared text lib data dt" in pages; a process whose memory is gone (it is
         * exiting, or a zombie) reads all zeros: its sample would be no reading of the program. */
        char *e;
        strtoull(buf, &e, 10);
        unsigned long long res = strtoull(e, &e, 10);
        if (!res) return;
        rss = (int64_t)res * page;
    }
    ring[taken % OT_SAMPLE_RING] = (ot_killed_sample_t){ot_clock_ns(CLOCK_REALTIME), rss, ot_oom_usage_read(cg_fd)};
    taken++;
}

const ot_killed_sample_t *ot_sampler_samples(unsigned *n)
{
    uint64_t first = taken > OT_SAMPLE_RING ? taken - OT_SAMPLE_RING : 0;
    unsigned k = 0;
    for (uint64_t i = first; i < taken; i++) linear[k++] = ring[i % OT_SAMPLE_RING];
    *n = k;
    return linear;
}
