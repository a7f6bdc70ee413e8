/* launcher/oomkill.c's verdict: who killed the child, from the OOM counters read before it started
 * and after it died (cgroup oom_kill, the limit hits on the way up, /proc/vmstat), and a reading of
 * this process's own cgroup. */
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "launcher.h"

static ot_oom_probe_t cg(int version, const char *path, int64_t oom_kill, int64_t oom, int64_t limit, int64_t vm)
{
    ot_oom_probe_t p;
    memset(&p, 0, sizeof p);
    p.version = version;
    snprintf(p.path, sizeof p.path, "%s", path);
    p.oom_kill = oom_kill;
    p.oom = oom;
    p.limit = limit;
    p.vmstat_oom_kill = vm;
    p.usage = p.peak = p.limit_here = -1;
    return p;
}

TEST(test_cgroup_oom_killer)
{
    ot_oom_probe_t b = cg(1, "/sys/fs/cgroup/memory/a", 0, 5, 64 << 20, 10), a = cg(1, "/sys/fs/cgroup/memory/a", 1, 9, 64 << 20, 11);
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).killer, OT_KILLER_CGROUP);
    a.oom_kill = 3; /* the kills counted, by the cgroup's counter (vmstat's moved by 1) */
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).kills, 3);
    a.oom_kill = 1;
    b.version = a.version = 2;
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).killer, OT_KILLER_CGROUP);
}

TEST(test_kernel_oom_killer)
{
    /* The cgroup counted a kill but no limit on the way up was hit: the global OOM killer. */
    ot_oom_probe_t b = cg(1, "/x", 0, 5, 64 << 20, 10), a = cg(1, "/x", 1, 5, 64 << 20, 11);
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).killer, OT_KILLER_KERNEL);
    /* ... unless its peak reached the limit (v1 counts no failcnt when memory+swap is limited too). */
    a.peak = (64 << 20) - 4096;
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).killer, OT_KILLER_CGROUP);
    /* No cgroup at all: /proc/vmstat alone. */
    b = cg(0, "", -1, -1, -1, 3);
    a = cg(0, "", -1, -1, -1, 4);
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).killer, OT_KILLER_KERNEL);
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).kills, 1);
}

TEST(test_not_an_oom_kill)
{
    ot_oom_probe_t b = cg(2, "/x", 0, 0, 64 << 20, 10), a = b;
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).killer, OT_KILLER_UNKNOWN);
    /* The OOM killer only sends SIGKILL. */
    a.oom_kill = 1, a.oom = 1, a.vmstat_oom_kill = 11;
    EXPECT_EQ_U(ot_oom_judge(15, &b, &a).killer, OT_KILLER_UNKNOWN);
    /* Counters that could not be read before say nothing. */
    b.oom_kill = b.vmstat_oom_kill = -1;
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).killer, OT_KILLER_UNKNOWN);
    /* Another cgroup's counter (the child moved) is not compared. */
    b = cg(2, "/x", 0, 0, 64 << 20, 10);
    a = cg(2, "/y", 1, 1, 64 << 20, 10);
    EXPECT_EQ_U(ot_oom_judge(9, &b, &a).killer, OT_KILLER_UNKNOWN);
}

TEST(test_probe_self)
{
    ot_oom_probe_t p;
    ot_oom_probe(0, &p);
    EXPECT(p.vmstat_oom_kill >= 0);
    if (!p.version) SKIP("no memory cgroup in /proc/self/cgroup (vmstat read: %lld)", (long long)p.vmstat_oom_kill);
    EXPECT(p.oom_kill >= 0);
    EXPECT(p.path[0] == '/');
    EXPECT(p.usage > 0);
    /* The supervisor's sampler reads the same file, opened once and read again and again: the
     * usage follows memory touched between two reads; no file without a cgroup. */
    int fd = ot_oom_usage_open(&p);
    ASSERT(fd >= 0);
    int64_t u0 = ot_oom_usage_read(fd);
    EXPECT(u0 > 0);
    size_t big = 128u << 20;
    char *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(m != MAP_FAILED);
    memset(m, 1, big);
    int64_t u1 = ot_oom_usage_read(fd);
    EXPECT(u1 >= u0 + (int64_t)(big / 4)); /* other processes in the cgroup may free some meanwhile */
    munmap(m, big);
    close(fd);
    EXPECT(ot_oom_usage_read(-1) == -1);
    ot_oom_probe_t none = p;
    none.version = 0;
    EXPECT(ot_oom_usage_open(&none) == -1);
    snprintf(none.path, sizeof none.path, "/nonexistent/cgroup");
    none.version = p.version;
    EXPECT(ot_oom_usage_open(&none) == -1);
}

TEST_MAIN(test_cgroup_oom_killer, test_kernel_oom_killer, test_not_an_oom_kill, test_probe_self)
