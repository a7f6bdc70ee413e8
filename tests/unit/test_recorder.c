/* recorder.c: the state file's layout, lazy creation, the alternating frames and their torn-update
 * rule (a torn frame is never read: checked through the launcher's reader, launcher/statefile.c),
 * fork, removal, refused directories; pressure.c's decisions. */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "statefile.h"

static char dir[256];
static uint64_t next_key = 1ull << 40;
static uint8_t filebuf[8 << 20];

/* Host blocks of 1 MiB (each gets a stack and flushes the level), never freed. */
static __attribute__((noinline)) void grow(unsigned mib)
{
    for (unsigned i = 0; i < mib; i++) {
        ot_live_record(next_key, 1 << 20, OT_KIND_HOST, -1);
        next_key += 1 << 20;
    }
}

static uint64_t my_start_time(void)
{
    char b[1024];
    ssize_t n = ot_read_file("/proc/self/stat", b, sizeof b);
    char *p = strrchr(b, ')');
    if (n <= 0 || !p) return 0;
    p += 2;
    for (int f = 3; f < 22; f++) p = strchr(p, ' ') + 1;
    return strtoull(p, NULL, 10);
}

static ot_sf_t sf;
static char why[200];

/* The file's bytes into filebuf; its length, or -1. */
static long slurp(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW);
    if (fd < 0) return -1;
    long n = read(fd, filebuf, sizeof filebuf);
    close(fd);
    return n;
}

/* Parses filebuf[0, len) into sf (freed first). */
static bool parse(long len)
{
    ot_sf_free(&sf);
    return len > 0 && ot_sf_parse(filebuf, (size_t)len, &sf, why, sizeof why);
}

static bool load(const char *path, long *len)
{
    *len = slurp(path);
    return parse(*len);
}

static const ot_rec_frame_t *frame_in_buf(unsigned i)
{
    return (const void *)(filebuf + ((const ot_rec_file_t *)(const void *)filebuf)->frame_offset[i]);
}

static unsigned files_in(const char *d)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^oomtrace-.*\\.rec$'", d);
    FILE *f = popen(cmd, "r");
    unsigned n = 0;
    if (f && fscanf(f, "%u", &n) != 1) n = 0;
    if (f) pclose(f);
    return n;
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/ot-rec-unit.%d", (int)getpid());
    mkdir(dir, 0700);
    ot_options_defaults(&ot_opt);
    ot_strlcpy(ot_opt.state_dir, dir, sizeof ot_opt.state_dir);
    ot_opt.pressure = 0;
    ot_state.pid = getpid();
    ot_strlcpy(ot_state.exe, "/proc/self/exe", sizeof ot_state.exe);
    readlink("/proc/self/exe", ot_state.exe, sizeof ot_state.exe - 1);
    ot_strlcpy(ot_state.host, "unit", sizeof ot_state.host);
    ot_recorder_init();
}

TEST(layout_bounds)
{
    uint64_t sizes[] = {256 << 10, 1 << 20, 4 << 20, 64ull << 20};
    for (unsigned i = 0; i < 4; i++) {
        uint32_t caps[5];
        uint64_t total = ot_recorder_layout_for_test(sizes[i], caps);
        EXPECT(total <= sizes[i]);
        EXPECT(total >= sizes[i] / 2);
        EXPECT_EQ_U(caps[OT_REC_SEC_SITES], 64);
        EXPECT(caps[OT_REC_SEC_HISTORY] >= 16 && caps[OT_REC_SEC_LARGE] >= 16 && caps[OT_REC_SEC_MODULES] >= 16);
    }
    uint32_t caps[5];
    EXPECT(ot_recorder_layout_for_test(1 << 20, caps) <= (1 << 20));
    EXPECT(caps[OT_REC_SEC_HISTORY] >= 3000); /* 12+ minutes at one sample per 250 ms */
    EXPECT_EQ_U(caps[OT_REC_SEC_MODULES], 512);
}

TEST(no_file_below_threshold)
{
    setup();
    grow(4);
    EXPECT_STR(ot_recorder_path(), "");
    EXPECT_EQ_U(files_in(dir), 0);
}

TEST(file_past_threshold)
{
    grow(20); /* 24 MiB in all */
    const char *path = ot_recorder_path();
    ASSERT(path[0]);
    char want[128];
    snprintf(want, sizeof want, "/oomtrace-%d-%llu.rec", (int)getpid(), (unsigned long long)my_start_time());
    EXPECT_CONTAINS(path, want);
    struct stat st;
    ASSERT(lstat(path, &st) == 0);
    EXPECT(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
    EXPECT(st.st_size <= (1 << 20));
    ot_recorder_update_now();
    long len;
    ASSERT(load(path, &len));
    EXPECT_EQ_U(sf.id.pid, getpid());
    EXPECT_EQ_U(sf.id.start_time, my_start_time());
    EXPECT_STR(sf.id.exe, ot_state.exe);
    EXPECT(sf.fr.host.bytes >= (24u << 20));
    EXPECT(sf.fr.host.peak_bytes >= sf.fr.host.bytes);
    EXPECT_EQ_U(sf.fr.kind[OT_KIND_HOST].bytes, sf.fr.host.bytes);
    /* The top site is grow()'s, with a stack. */
    ASSERT(sf.n_sites >= 1);
    const ot_rec_site_t *s = &sf.sites[0];
    EXPECT(s->live_bytes >= (20u << 20));
    EXPECT(s->depth > 0 && s->ips[0] != 0);
    /* Every block was >= 1 MiB: all in the large ring, with the site's stack. */
    EXPECT(sf.fr.large_head >= 24);
    ASSERT(sf.n_large >= 24);
    const ot_rec_large_t *l = &sf.large[sf.n_large - 1];
    EXPECT_EQ_U(l->size, 1 << 20);
    EXPECT(l->site_id != 0 && l->depth > 0 && l->ips[0] == s->ips[0]);
    ASSERT(sf.n_hist >= 1);
    const ot_rec_sample_t *h = &sf.hist[sf.n_hist - 1];
    EXPECT(h->live_host >= (8u << 20) && h->rss > 0);
    /* The module map holds the test binary, with its build-id, and the address of grow(). */
    bool found = false;
    for (unsigned i = 0; i < sf.n_mods; i++) {
        const ot_rec_module_t *m = &sf.mods[i];
        if ((uintptr_t)grow >= m->start && (uintptr_t)grow < m->end)
            found = !strcmp(m->path, ot_state.exe) && m->build_id_len == 20;
    }
    EXPECT(found);
    EXPECT(sf.fr.mem.mem_total > 0 && sf.fr.mem.vm_rss > 0); /* the records are fake: no RSS to speak of */
}

TEST(updates_alternate_frames)
{
    const char *path = ot_recorder_path();
    ASSERT(path[0]);
    long len;
    ot_recorder_update_now();
    ASSERT(load(path, &len));
    uint64_t no = sf.fr.update_no;
    unsigned fi = sf.frame;
    ot_recorder_update_now();
    ASSERT(load(path, &len));
    EXPECT_EQ_U(sf.fr.update_no, no + 1);
    EXPECT(sf.frame != fi);
    EXPECT_EQ_U(sf.frame, (no + 1) & 1);
    EXPECT(!sf.other_torn);
    /* Both frames are complete: each counter even. */
    for (unsigned i = 0; i < 2; i++) EXPECT(frame_in_buf(i)->seq && !(frame_in_buf(i)->seq & 1));
}

TEST(torn_update_detected)
{
    const char *path = ot_recorder_path();
    ASSERT(path[0]);
    long len;
    ASSERT(load(path, &len));
    uint64_t no = sf.fr.update_no;
    unsigned fi = sf.frame;
    ot_rec_frame_t *newest = (void *)(uintptr_t)frame_in_buf(fi), *older = (void *)(uintptr_t)frame_in_buf(!fi);
    /* A writer killed inside the newest frame: the older one is the state. */
    newest->seq |= 1;
    memset((char *)newest + 64, 0xff, 512); /* half-written garbage */
    ASSERT(parse(len));
    EXPECT_EQ_U(sf.frame, !fi);
    EXPECT_EQ_U(sf.fr.update_no, no - 1);
    EXPECT(sf.other_torn);
    /* Both torn: nothing is read. */
    older->seq |= 1;
    EXPECT(!parse(len));
    EXPECT_CONTAINS(why, "torn");
    EXPECT_EQ_U(sf.n_sites, 0);
    /* The identity block torn (the writer was creating the file). */
    ASSERT(load(path, &len));
    ((ot_rec_file_t *)(void *)filebuf)->seq = 3;
    EXPECT(!parse(len));
}

TEST(hostile_file_never_misread)
{
    const char *path = ot_recorder_path();
    ASSERT(path[0]);
    long len;
    ASSERT(load(path, &len));
    static uint8_t good[8 << 20];
    memcpy(good, filebuf, (size_t)len);
    EXPECT(!parse(len - 1));
    EXPECT(!parse(100));
    EXPECT_CONTAINS(why, "truncated");
    ot_rec_file_t *f = (void *)filebuf;
    f->magic[0] = 'X';
    EXPECT(!parse(len));
    memcpy(filebuf, good, (size_t)len);
    f->sections[OT_REC_SEC_HISTORY].capacity = 0xffffff;
    EXPECT(!parse(len));
    memcpy(filebuf, good, (size_t)len);
    f->frame_offset[1] = (uint64_t)len - 8;
    EXPECT(!parse(len));
    memcpy(filebuf, good, (size_t)len);
    ASSERT(parse(len));
    ((ot_rec_frame_t *)(void *)(uintptr_t)frame_in_buf(sf.frame))->n_sites = 1000000;
    EXPECT(!parse(len) || sf.n_sites <= f->sections[OT_REC_SEC_SITES].capacity);
    /* Random damage to the header and frame heads: the reader never faults (ASan and the fuzzer
     * check that more closely), and never hands out more entries than the sections hold. */
    const ot_rec_file_t *g = (const void *)good;
    uint64_t r = 88172645463325252ull;
    unsigned ok = 0, bad = 0;
    for (int it = 0; it < 2000; it++) {
        memcpy(filebuf, good, 2048);
        for (int i = 0; i < 2; i++) memcpy(filebuf + g->frame_offset[i], good + g->frame_offset[i], 1024);
        for (int k = 0; k < 4; k++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            unsigned where = (unsigned)(r % 3), at = (unsigned)((r >> 8) % (where ? 1024 : 2048));
            if (where == 0 && at < 8) continue; /* magic: covered above */
            (where == 0 ? filebuf : filebuf + g->frame_offset[where - 1])[at] = (uint8_t)(r >> 40);
        }
        if (!parse(len)) {
            bad++;
            continue;
        }
        ok++;
        if (sf.n_sites > g->sections[OT_REC_SEC_SITES].capacity || sf.n_mods > g->sections[OT_REC_SEC_MODULES].capacity) {
            EXPECT(!"more entries than the section holds");
            return;
        }
    }
    EXPECT(ok > 0 && bad > 0);
}

/* In a child: the fork handler gives it a recorder of its own. */
TEST(fork_child_own_file)
{
    const char *ppath = ot_recorder_path();
    ASSERT(ppath[0]);
    char parent_path[700];
    ot_strlcpy(parent_path, ppath, sizeof parent_path);
    long len;
    ot_recorder_update_now();
    ASSERT(load(parent_path, &len));
    uint64_t parent_no = sf.fr.update_no;
    int fds[2];
    ASSERT(pipe(fds) == 0);
    pid_t c = fork();
    if (c == 0) {
        ot_state.pid = getpid();
        ot_recorder_atfork_child();
        grow(16);
        const char *cp = ot_recorder_path();
        char msg[800];
        snprintf(msg, sizeof msg, "%s", cp);
        write(fds[1], msg, strlen(msg) + 1);
        ot_recorder_update_now();
        int code = 0;
        if (!cp[0] || !strcmp(cp, parent_path)) code = 1;
        else if (!load(cp, &len) || sf.id.pid != getpid()) code = 2;
        ot_recorder_close();
        if (access(cp, F_OK) == 0) code = 3;
        _exit(code);
    }
    close(fds[1]);
    char child_path[800] = "";
    ssize_t n = read(fds[0], child_path, sizeof child_path - 1);
    close(fds[0]);
    int st = 0;
    waitpid(c, &st, 0);
    EXPECT(n > 0);
    char want[64];
    snprintf(want, sizeof want, "/oomtrace-%d-", (int)c);
    EXPECT_CONTAINS(child_path, want);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* The parent's file is untouched by the child. */
    ASSERT(load(parent_path, &len));
    EXPECT_EQ_U(sf.id.pid, getpid());
    EXPECT_EQ_U(sf.fr.update_no, parent_no);
}

/* A child with state_dir= set up by `prepare`; returns its exit code: 0 refused and nothing
 * created, 1 a file was made anyway. */
static int refused_in_child(void (*prepare)(const char *d), const char *d)
{
    pid_t c = fork();
    if (c == 0) {
        ot_state.pid = getpid();
        ot_recorder_atfork_child();
        ot_strlcpy(ot_opt.state_dir, d, sizeof ot_opt.state_dir);
        prepare(d);
        grow(16);
        _exit(ot_recorder_path()[0] ? 1 : 0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

static void other_owner(const char *d) { mkdir(d, 0700); chown(d, 65534, 65534); }
static void world_writable(const char *d) { mkdir(d, 0700); chmod(d, 0777); }
static char planted_target[300];
static void planted_link(const char *d)
{
    mkdir(d, 0700);
    char name[400];
    snprintf(name, sizeof name, "%s/oomtrace-%d-%llu.rec", d, (int)getpid(), (unsigned long long)my_start_time());
    symlink(planted_target, name);
}

TEST(hostile_directories_refused)
{
    if (geteuid() != 0) SKIP("needs root to make a directory owned by another user");
    ASSERT(ot_recorder_path()[0]); /* the children start from a live recorder */
    char d1[300], d2[300], d3[300];
    snprintf(d1, sizeof d1, "%s/other", dir);
    snprintf(d2, sizeof d2, "%s/open", dir);
    snprintf(d3, sizeof d3, "%s/planted", dir);
    snprintf(planted_target, sizeof planted_target, "%s/target", dir);
    EXPECT_EQ_U(refused_in_child(other_owner, d1), 0);
    EXPECT_EQ_U(files_in(d1), 0);
    EXPECT_EQ_U(refused_in_child(world_writable, d2), 0);
    EXPECT_EQ_U(files_in(d2), 0);
    EXPECT_EQ_U(refused_in_child(planted_link, d3), 0);
    EXPECT(access(planted_target, F_OK) != 0); /* never followed */
}

TEST(close_removes_and_stays_closed)
{
    char path[700];
    ot_strlcpy(path, ot_recorder_path(), sizeof path);
    ASSERT(path[0]);
    ot_recorder_close();
    EXPECT(access(path, F_OK) != 0);
    EXPECT_STR(ot_recorder_path(), "");
    grow(16);
    EXPECT_STR(ot_recorder_path(), "");
    EXPECT_EQ_U(files_in(dir), 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    EXPECT(system(cmd) == 0);
}

TEST(pressure_decisions)
{
    double s[3];
    ot_pressure_steps(0.9, s);
    EXPECT(s[0] == 0.9 && s[1] > 0.9499 && s[1] < 0.9501 && s[2] > 0.9899 && s[2] < 0.9901);
    int64_t lim[3] = {200 << 20, -1, 16ll << 30}, use[3] = {150 << 20, 4ll << 30, 1ll << 30};
    double frac;
    EXPECT_EQ_U(ot_pressure_tightest(lim, use, &frac), OT_REC_LIMIT_CGROUP);
    EXPECT(frac == 0.75);
    /* 0.9 * 200 MiB - 150 MiB = 30 MiB of room: the watch looks again 30 MiB of heap further on. */
    EXPECT_EQ_U(ot_pressure_next_trigger(100 << 20, lim, use, 0.9), (100 << 20) + (int64_t)(0.9 * (200 << 20)) - (150 << 20));
    /* Far from every limit: at most 64 MiB later; already past: a small step on. */
    int64_t far[3] = {-1, -1, 1ll << 40};
    EXPECT_EQ_U(ot_pressure_next_trigger(0, far, use, 0.9), 64 << 20);
    use[0] = 199 << 20;
    EXPECT_EQ_U(ot_pressure_next_trigger(0, lim, use, 0.9), 256 << 10);
    int64_t none[3] = {-1, -1, -1};
    EXPECT_EQ_U(ot_pressure_tightest(none, use, &frac), OT_REC_LIMIT_NONE);
}

TEST_MAIN(layout_bounds, no_file_below_threshold, file_past_threshold, updates_alternate_frames, torn_update_detected,
          hostile_file_never_misread, fork_child_own_file, hostile_directories_refused, close_removes_and_stays_closed,
          pressure_decisions)
