/* cgstat.c: memory.stat of cgroup v1 and v2 (texts of the test's own, and the real cgroup where
 * there is one), cgroup.procs with each process's RSS, and the diagnosis that names the neighbour
 * who holds the memory. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "report_internal.h"

#include "malloc_counter.h"

static const char v1_stat[] =
    "cache 10080256\nrss 7614464\nrss_huge 0\nshmem 9580544\nmapped_file 8052736\ndirty 45056\nswap 0\n"
    "hierarchical_memory_limit 2147483648\ntotal_cache 283889664\ntotal_rss 16822272\ntotal_rss_huge 0\n"
    "total_shmem 9580544\ntotal_mapped_file 11632640\ntotal_swap 4096\n";
static const char v1_flat[] = "cache 1000\nrss 2000\nshmem 300\nmapped_file 400\nswap 50\n";
static const char v2_stat[] =
    "anon 1610612736\nfile 536870912\nkernel 52428800\nkernel_stack 1048576\npagetables 4194304\n"
    "sec_pagetables 0\npercpu 0\nsock 0\nvmalloc 0\nshmem 104857600\nzswap 0\nzswapped 0\nfile_mapped 8192\n"
    "file_dirty 0\nfile_writeback 0\nswapcached 0\nanon_thp 0\n";
/* before Linux 5.18 there was no "kernel" line: its parts are summed */
static const char v2_old[] = "anon 100\nfile 200\nkernel_stack 10\npagetables 20\npercpu 1\nsock 2\nshmem 5\nslab 40\n";

static ot_cg_usage_t u;

static void reset(void)
{
    memset(&u, 0, sizeof u);
    u.anon = u.file = u.kernel = u.shmem = u.swap = u.file_mapped = -1;
}

TEST(v1_names_hierarchical_totals_first)
{
    reset();
    ot_cg_stat_parse(v1_stat, 1, &u);
    EXPECT_EQ_U(u.anon, 16822272);
    EXPECT_EQ_U(u.file, 283889664);
    EXPECT_EQ_U(u.shmem, 9580544);
    EXPECT_EQ_U(u.file_mapped, 11632640);
    EXPECT_EQ_U(u.swap, 4096);
    reset();
    ot_cg_stat_parse(v1_flat, 1, &u); /* no total_* lines (use_hierarchy off, old kernels) */
    EXPECT_EQ_U(u.anon, 2000);
    EXPECT_EQ_U(u.file, 1000);
    EXPECT_EQ_U(u.shmem, 300);
    EXPECT_EQ_U(u.swap, 50);
}

TEST(v2_names_and_kernel_parts)
{
    reset();
    ot_cg_stat_parse(v2_stat, 2, &u);
    EXPECT_EQ_U(u.anon, 1610612736);
    EXPECT_EQ_U(u.file, 536870912);
    EXPECT_EQ_U(u.kernel, 52428800);
    EXPECT_EQ_U(u.shmem, 104857600);
    EXPECT_EQ_U(u.file_mapped, 8192);
    reset();
    ot_cg_stat_parse(v2_old, 2, &u);
    EXPECT_EQ_U(u.kernel, 10 + 20 + 1 + 2 + 40);
    EXPECT_EQ_U(u.anon, 100);
}

/* cgroup.procs: every process with its RSS, this one marked, the largest first. */
TEST(procs_with_their_rss)
{
    int fds[2];
    ASSERT(pipe(fds) == 0);
    pid_t child = fork();
    if (child == 0) {
        static char hog[64 << 20];
        memset(hog, 1, sizeof hog);
        if (write(fds[1], "r", 1) != 1) _exit(1);
        pause();
        _exit(0);
    }
    close(fds[1]);
    /* Its byte says the 64 MiB are resident (no sleep a loaded machine can outrun); a child that died
     * closes the pipe, one that hangs runs out the minute. */
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    char byte;
    int resident = poll(&pfd, 1, 60000) == 1 && read(fds[0], &byte, 1) == 1;
    close(fds[0]);
    if (!resident) {
        printf("  the child did not say within 60 s that its 64 MiB were resident\n");
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    ASSERT(resident);
    char pids[64];
    snprintf(pids, sizeof pids, "%d\n%d\n999999999\n", (int)getpid(), (int)child);
    reset();
#if HAVE_MALLOC_COUNTER
    mallocs_seen = 0;
    count_mallocs = 1;
#endif
    ot_cg_procs_parse(pids, (int)getpid(), &u);
#if HAVE_MALLOC_COUNTER
    count_mallocs = 0;
    EXPECT_EQ_U(mallocs_seen, 0);
#endif
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    EXPECT_EQ_U(u.procs_total, 3);
    EXPECT_EQ_U(u.nprocs, 2); /* the third is gone */
    ASSERT(u.nprocs == 2);
    EXPECT_EQ_U(u.procs[0].pid, child);
    EXPECT(u.procs[0].rss >= 64 << 20);
    EXPECT(!u.procs[0].self && u.procs[1].self);
    EXPECT_STR(u.procs[0].name, "test_cgstat");
    EXPECT(u.others_rss >= 64 << 20 && u.self_rss > 0);
}

/* The real cgroup of this process, where there is one with a memory controller. */
TEST(real_cgroup)
{
    ot_host_mem_t m;
    ot_probe_host(&m);
    if (!m.cgroup_version || !m.cgroup_dir[0]) SKIP("no memory cgroup found for this process");
    ot_cg_usage_t r;
    ASSERT(ot_cg_usage_read(m.cgroup_dir, m.cgroup_version, (int)getpid(), &r));
    EXPECT(r.anon > 0);
    EXPECT(r.file >= 0);
    EXPECT(r.procs_total >= 1 || m.cgroup_version == 1); /* v1 in a container: the root lists its own */
    printf("  cgroup v%d %s: anon %lld file %lld shmem %lld kernel %lld swap %lld, %u processes\n", m.cgroup_version,
           m.cgroup_dir, (long long)r.anon, (long long)r.file, (long long)r.shmem, (long long)r.kernel,
           (long long)r.swap, r.procs_total);
}

static char lines[8][1024];
static unsigned nlines;
static void sink(void *ctx, const char *l)
{
    (void)ctx;
    if (nlines < 8) snprintf(lines[nlines++], sizeof lines[0], "%s", l);
}
static ot_report_t rep;

/* The diagnosis names the neighbour: a failure where the cgroup limit binds and another process of
 * the cgroup holds most of it (seed 000's "other processes hold the GPU", on the host side). */
TEST(diagnosis_names_the_neighbour)
{
    memset(&rep, 0, sizeof rep);
    ot_failure_t f = {0};
    f.api = "malloc";
    f.size = 64 << 20;
    f.error_code = ENOMEM;
    f.error_name = "ENOMEM";
    rep.f = &f;
    rep.mem.mem_total = rep.mem.mem_available = 64ll << 30;
    rep.mem.swap_total = rep.mem.swap_free = 0;
    rep.mem.rlimit_as = rep.mem.rlimit_data = -1;
    rep.mem.vm_size = rep.mem.vm_data = 600ll << 20;
    rep.mem.cgroup_version = 2;
    rep.mem.cgroup_limit = 2ll << 30;
    rep.mem.cgroup_usage = (2ll << 30) - (10 << 20);
    rep.mem.ptr_bits = 64;
    rep.mem.overcommit_memory = 0;
    reset();
    ot_cg_stat_parse(v2_stat, 2, &u);
    u.swap = 0;
    u.procs_total = 2;
    u.nprocs = 2;
    u.procs[0] = (typeof(u.procs[0])){4242, "python3", 1500ll << 20, false};
    u.procs[1] = (typeof(u.procs[1])){77, "caffe", 500ll << 20, true};
    u.others_rss = 1500ll << 20;
    u.self_rss = 500ll << 20;
    rep.cg = &u;
    nlines = 0;
    ot_report_diagnose(&rep, sink, NULL);
    char all[8192] = "";
    for (unsigned i = 0; i < nlines; i++) strcat(strcat(all, lines[i]), "\n");
    EXPECT_CONTAINS(all, "cgroup memory.max reached");
    EXPECT_CONTAINS(all, "the cgroup's memory: anonymous 1.5 GiB, page cache 512.0 MiB (shared memory 100.0 MiB of it), "
                         "kernel 50.0 MiB, swap 0 B");
    EXPECT_CONTAINS(all, "other processes in the cgroup hold 1.5 GiB of RSS (this one 500.0 MiB): pid 4242 (python3) 1.5 GiB");
}

TEST_MAIN(v1_names_hierarchical_totals_first, v2_names_and_kernel_parts, procs_with_their_rss, real_cgroup,
          diagnosis_names_the_neighbour)
