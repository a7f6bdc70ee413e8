/* The supervisor's own samples of the child while it waits (supervise.c calls ot_sampler_take every
 * OT_SAMPLE_EVERY_NS): its RSS from /proc/PID/statm and its cgroup's usage, in a fixed ring. They
 * see what the state file cannot: pages faulted in without an allocation call, a program's own
 * mmap, tmpfs and page cache charged to the cgroup, other processes in it. Two small reads a sample,
 * no allocation. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"
#include "report_internal.h"

static ot_killed_sample_t ring[OT_SAMPLE_RING], linear[OT_SAMPLE_RING];
static uint64_t taken;
static const ot_oom_probe_t *g_cg;
static char statm[48];
static int64_t page;

void ot_sampler_start(pid_t pid, const ot_oom_probe_t *cg)
{
    g_cg = cg;
    snprintf(statm, sizeof statm, "/proc/%d/statm", (int)pid);
    long p = sysconf(_SC_PAGESIZE);
    page = p > 0 ? p : 4096;
    taken = 0;
}

void ot_sampler_take(void)
{
    if (!statm[0]) return;
    char buf[160];
    int64_t rss = -1;
    if (ot_read_small(statm, buf, sizeof buf) > 0) {
        /* "size resident shared text lib data dt" in pages; a process whose memory is gone (it is
         * exiting, or a zombie) reads all zeros: its sample would be no reading of the program. */
        char *e;
        strtoull(buf, &e, 10);
        unsigned long long res = strtoull(e, &e, 10);
        if (!res) return;
        rss = (int64_t)res * page;
    }
    ring[taken % OT_SAMPLE_RING] = (ot_killed_sample_t){ot_clock_ns(CLOCK_REALTIME), rss,
                                                        g_cg ? ot_oom_usage_now(g_cg) : -1};
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
