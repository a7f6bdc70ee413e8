/* recorder.c and recorder_read.c: the state file's layout, lazy creation, the alternating frames
 * and their torn-update rule (a torn frame is never read, a hostile file never misread), fork,
 * removal, refused directories; pressure.c's decisions. */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "recorder_read.h"

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

static int load(const char *path, ot_rec_view_t *v, long *len)
{
    char why[128];
    *len = ot_rec_load(path, filebuf, sizeof filebuf, why, sizeof why);
    if (*len < 0) return OT_REC_BAD;
    return ot_rec_parse(filebuf, (size_t)*len, v, why, sizeof why);
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
    ot_rec_view_t v;
    long len;
    ASSERT(load(path, &v, &len) == OT_REC_OK);
    EXPECT_EQ_U(v.file->pid, getpid());
    EXPECT_EQ_U(v.file->start_time, my_start_time());
    EXPECT_STR(v.file->exe, ot_state.exe);
    EXPECT(v.frame->host.bytes >= (24u << 20));
    EXPECT(v.frame->host.peak_bytes >= v.frame->host.bytes);
    EXPECT_EQ_U(v.frame->kind[OT_KIND_HOST].bytes, v.frame->host.bytes);
    /* The top site is grow()'s, with a stack. */
    const ot_rec_site_t *s = ot_rec_entry(&v, OT_REC_SEC_SITES, 0);
    ASSERT(s);
    EXPECT(s->live_bytes >= (20u << 20));
    EXPECT(s->depth > 0 && s->ips[0] != 0);
    EXPECT(!ot_rec_entry(&v, OT_REC_SEC_SITES, v.frame->n_sites));
    /* Every block was >= 1 MiB: all in the large ring, with the site's stack. */
    EXPECT(v.frame->large_head >= 24);
    const ot_rec_large_t *l = ot_rec_entry(&v, OT_REC_SEC_LARGE, v.frame->large_head - 1);
    ASSERT(l);
    EXPECT_EQ_U(l->size, 1 << 20);
    EXPECT(l->site_id != 0 && l->depth > 0 && l->ips[0] == s->ips[0]);
    EXPECT(v.frame->history_head >= 1);
    const ot_rec_sample_t *h = ot_rec_entry(&v, OT_REC_SEC_HISTORY, v.frame->history_head - 1);
    EXPECT(h && h->live_host >= (8u << 20) && h->rss > 0);
    /* The module map holds the test binary, with its build-id, and the address of grow(). */
    bool found = false;
    for (uint32_t i = 0; i < v.frame->n_modules; i++) {
        const ot_rec_module_t *m = ot_rec_entry(&v, OT_REC_SEC_MODULES, i);
        if (m && (uintptr_t)grow >= m->start && (uintptr_t)grow < m->end) {
            found = !strcmp(m->path, ot_state.exe) && m->build_id_len == 20;
        }
    }
    EXPECT(found);
    EXPECT(v.frame->mem.mem_total > 0);
}

TEST(updates_alternate_frames)
{
    const char *path = ot_recorder_path();
    ASSERT(path[0]);
    ot_rec_view_t v;
    long len;
    ot_recorder_update_now();
    ASSERT(load(path, &v, &len) == OT_REC_OK);
    uint64_t no = v.frame->update_no;
    unsigned fi = v.frame_index;
    ot_recorder_update_now();
    ASSERT(load(path, &v, &len) == OT_REC_OK);
    EXPECT_EQ_U(v.frame->update_no, no + 1);
    EXPECT(v.frame_index != fi);
    EXPECT_EQ_U(v.frame_index, (no + 1) & 1);
    /* Both frames are complete: each counter even. */
    for (int i = 0; i < 2; i++) {
        const ot_rec_frame_t *f = (const void *)(filebuf + v.file->frame_offset[i]);
        EXPECT(f->seq && !(f->seq & 1));
    }
}

TEST(torn_update_detected)
{
    const char *path = ot_recorder_path();
    ASSERT(path[0]);
    ot_rec_view_t v;
    long len;
    char why[128];
    ASSERT(load(path, &v, &len) == OT_REC_OK);
    uint64_t no = v.frame->update_no;
    unsigned fi = v.frame_index;
    ot_rec_frame_t *newest = (void *)(filebuf + v.file->frame_offset[fi]);
    ot_rec_frame_t *older = (void *)(filebuf + v.file->frame_offset[!fi]);
    /* A writer killed inside the newest frame: the older one is the state. */
    newest->seq |= 1;
    memset((char *)newest + 64, 0xff, 512); /* half-written garbage */
    ASSERT(ot_rec_parse(filebuf, (size_t)len, &v, why, sizeof why) == OT_REC_OK);
    EXPECT_EQ_U(v.frame_index, !fi);
    EXPECT_EQ_U(v.frame->update_no, no - 1);
    /* Both torn: nothing is read. */
    older->seq |= 1;
    EXPECT(ot_rec_parse(filebuf, (size_t)len, &v, why, sizeof why) == OT_REC_TORN);
    EXPECT_CONTAINS(why, "torn");
    EXPECT(v.frame == NULL);
    ASSERT(load(path, &v, &len) == OT_REC_OK);
    ot_rec_file_t *f = (void *)filebuf;
    f->seq = 3;
    EXPECT(ot_rec_parse(filebuf, (size_t)len, &v, why, sizeof why) == OT_REC_TORN);
}

TEST(hostile_file_never_misread)
{
    const char *path = ot_recorder_path();
    ASSERT(path[0]);
    ot_rec_view_t v;
    long len;
    char why[128];
    ASSERT(load(path, &v, &len) == OT_REC_OK);
    static uint8_t good[8 << 20];
    memcpy(good, filebuf, (size_t)len);
    EXPECT(ot_rec_parse(filebuf, (size_t)len - 1, &v, why, sizeof why) == OT_REC_BAD);
    EXPECT(ot_rec_parse(filebuf, 100, &v, why, sizeof why) == OT_REC_BAD);
    EXPECT_CONTAINS(why, "truncated");
    ot_rec_file_t *f = (void *)filebuf;
    f->magic[0] = 'X';
    EXPECT(ot_rec_parse(filebuf, (size_t)len, &v, why, sizeof why) == OT_REC_BAD);
    memcpy(filebuf, good, (size_t)len);
    f->sections[OT_REC_SEC_HISTORY].capacity = 0xffffff;
    EXPECT(ot_rec_parse(filebuf, (size_t)len, &v, why, sizeof why) == OT_REC_BAD);
    memcpy(filebuf, good, (size_t)len);
    f->frame_offset[1] = (uint64_t)len - 8;
    EXPECT(ot_rec_parse(filebuf, (size_t)len, &v, why, sizeof why) == OT_REC_BAD);
    memcpy(filebuf, good, (size_t)len);
    ASSERT(ot_rec_parse(filebuf, (size_t)len, &v, why, sizeof why) == OT_REC_OK);
    ((ot_rec_frame_t *)(void *)(filebuf + f->frame_offset[v.frame_index]))->n_sites = 1000000;
    EXPECT(ot_rec_parse(filebuf, (size_t)len, &v, why, sizeof why) == OT_REC_BAD);
    /* Random damage to the header and frame heads: parse never faults, and whatever it accepts
     * hands out only entries inside the buffer. */
    uint64_t r = 88172645463325252ull;
    unsigned ok = 0, bad = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(filebuf, good, 2048);
        for (int i = 0; i < 2; i++) memcpy(filebuf + f->frame_offset[i], good + ((ot_rec_file_t *)(void *)good)->frame_offset[i], 1024);
        f = (void *)filebuf;
        uint64_t fo0 = ((ot_rec_file_t *)(void *)good)->frame_offset[0], fo1 = ((ot_rec_file_t *)(void *)good)->frame_offset[1];
        for (int k = 0; k < 4; k++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            unsigned where = (unsigned)(r % 3), at = (unsigned)((r >> 8) % (where ? 1024 : 2048));
            uint8_t val = (uint8_t)(r >> 40);
            if (where == 0 && at < 8) continue; /* magic: covered above */
            (where == 0 ? filebuf : filebuf + (where == 1 ? fo0 : fo1))[at] = val;
        }
        int rc = ot_rec_parse(filebuf, (size_t)len, &v, why, sizeof why);
        if (rc != OT_REC_OK) {
            bad++;
            continue;
        }
        ok++;
        for (int sec = 0; sec < 5; sec++) {
            uint64_t first = sec == 0 || sec == 4 ? 0 : ot_rec_ring_first(&v, sec);
            for (uint64_t i = first; i < first + 4; i++) {
                const uint8_t *e = ot_rec_entry(&v, sec, i);
                if (e && (e < filebuf || e + v.sec[sec].entry_size > filebuf + len)) {
                    EXPECT(!"entry outside the buffer");
                    return;
                }
            }
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
    ot_rec_view_t v;
    long len;
    ot_recorder_update_now();
    ASSERT(load(parent_path, &v, &len) == OT_REC_OK);
    uint64_t parent_no = v.frame->update_no;
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
        else if (load(cp, &v, &len) != OT_REC_OK || v.file->pid != getpid()) code = 2;
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
    ASSERT(load(parent_path, &v, &len) == OT_REC_OK);
    EXPECT_EQ_U(v.file->pid, getpid());
    EXPECT_EQ_U(v.frame->update_no, parent_no);
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
