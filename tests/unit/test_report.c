/* report.c: a failure report is complete (text and JSON), names the limit that was hit, and is
 * written without a single call to malloc. The test binary interposes malloc itself to count. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "report_internal.h"

#include "malloc_counter.h"

static char dir[256];

static char *slurp(const char *path)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void setup(const char *name)
{
    snprintf(dir, sizeof dir, "/tmp/ot-report-test.%d.%s", (int)getpid(), name);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    if (system(cmd) != 0) abort();
    ot_options_defaults(&ot_opt);
    ot_opt.cuda = false;
    snprintf(ot_opt.report, sizeof ot_opt.report, "%s/r.%%p.%%n.json", dir);
    snprintf(ot_opt.log, sizeof ot_opt.log, "%s/log.txt", dir);
}

static __attribute__((noinline)) void fake_hook_failure(uint64_t size)
{
    ot_failure_t f = {0};
    f.api = "malloc";
    f.size = size;
    f.error_code = ENOMEM;
    f.error_name = "ENOMEM";
    f.device_index = -1;
    f.skip = 0;
    ot_report_failure(&f);
}

/* Stands for a malloc hook: the stack ot_live_record takes starts at this function's caller. */
static __attribute__((noinline)) void fake_malloc_hook(uint64_t key, uint64_t size)
{
    ot_live_record(key, size, OT_KIND_HOST, -1);
}

static __attribute__((noinline)) void some_model_layer_allocates(void)
{
    fake_malloc_hook(0x7f0000100000, 150 << 20);
    __asm__ volatile("" ::: "memory");
}

static int python_ok(const char *script, const char *path)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 -c '%s' '%s'", script, path);
    return system(cmd) == 0;
}

TEST(failure_report_contents_without_malloc)
{
    setup("basic");
    ot_opt.stack_min_bytes = 1; /* every block gets a stack */
    some_model_layer_allocates();
    errno = 1234;
#if HAVE_MALLOC_COUNTER
    mallocs_seen = 0;
    count_mallocs = 1;
#endif
    fake_hook_failure(3763200);
#if HAVE_MALLOC_COUNTER
    count_mallocs = 0;
    EXPECT_EQ_U(mallocs_seen, 0);
#endif
    EXPECT_EQ_U(errno, 1234);
    char path[400];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    char *text = slurp(path);
    ASSERT(text);
    EXPECT_CONTAINS(text, "malloc(3763200) failed: ENOMEM");
    EXPECT_CONTAINS(text, "requested 3.6 MiB (3763200 bytes)");
    EXPECT_CONTAINS(text, "diagnosis:");
    EXPECT_CONTAINS(text, "fake_hook_failure");
    EXPECT_CONTAINS(text, "failure_report_contents_without_malloc");
    EXPECT_CONTAINS(text, "MemTotal");
    EXPECT_CONTAINS(text, "some_model_layer_allocates");
    EXPECT_CONTAINS(text, "150.0 MiB");
    EXPECT_CONTAINS(text, "oomtrace: address space: ");
    EXPECT_CONTAINS(text, "oomtrace:   executable and libraries ");
    snprintf(path, sizeof path, "%s/r.%d.1.json", dir, (int)ot_state.pid);
    EXPECT(python_ok("import json,sys; r=json.load(open(sys.argv[1])); "
                     "assert r[\"schema_version\"]==1 and r[\"event\"]==\"alloc_failure\"; "
                     "f=r[\"failure\"]; assert f[\"api\"]==\"malloc\" and f[\"size\"]==3763200 and f[\"error\"]==\"ENOMEM\" and f[\"error_code\"]==12; "
                     "assert f[\"stack\"][0][\"function\"]==\"fake_hook_failure\", f[\"stack\"][0]; "
                     "assert set(f[\"stack\"][0])>={\"ip\",\"function\",\"module\",\"offset\",\"file\",\"line\"}; "
                     "h=r[\"host_memory\"]; assert h[\"total\"]>0 and h[\"vm_size\"]>0; "
                     "assert all(k in h for k in (\"available\",\"swap_total\",\"swap_free\",\"rlimit_as\",\"rlimit_data\",\"cgroup_limit\",\"cgroup_usage\",\"vm_rss\",\"vm_peak\")); "
                     "assert r[\"live\"][\"host\"][\"bytes\"]>=150<<20; "
                     "assert r[\"sites\"][0][\"bytes\"]==150<<20 and r[\"sites\"][0][\"kind\"]==\"host\"; "
                     "assert any(fr[\"function\"]==\"some_model_layer_allocates\" for fr in r[\"sites\"][0][\"stack\"]); "
                     "assert isinstance(r[\"diagnosis\"],list) and r[\"diagnosis\"]; "
                     "assert r[\"process\"][\"pid\"]>0 and \"rank\" in r[\"process\"] and r[\"devices\"]==[]; "
                     "a=r[\"address_space\"]; k=[c[\"kind\"] for c in a[\"categories\"]]; "
                     "assert a[\"total\"]>0 and \"libraries\" in k and \"requested\" in k, a; "
                     "assert [c[\"bytes\"] for c in a[\"categories\"]]==sorted([c[\"bytes\"] for c in a[\"categories\"]], reverse=True); "
                     "assert \"cgroup_usage\" in r",
                     path));
    struct stat st;
    EXPECT(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    uint64_t size;
    unsigned kind;
    EXPECT(ot_live_forget(0x7f0000100000, &size, &kind) && size == 150u << 20 && kind == OT_KIND_HOST);
}

TEST(rlimit_as_diagnosis)
{
    setup("rlimit");
    pid_t pid = fork();
    if (pid == 0) {
        ot_state.pid = getpid();
        struct rlimit rl = {256u << 20, 256u << 20};
        setrlimit(RLIMIT_AS, &rl);
        fake_hook_failure(1ull << 30);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    char path[400];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    char *text = slurp(path);
    ASSERT(text);
    EXPECT_CONTAINS(text, "RLIMIT_AS 256.0 MiB: ");
    EXPECT_CONTAINS(text, "of address space in use + 1.0 GiB requested");
    EXPECT_CONTAINS(text, "ulimit -v");
}

TEST(overflow_and_absurd_sizes)
{
    setup("overflow");
    ot_failure_t f = {0};
    f.api = "calloc";
    f.size = UINT64_MAX;
    f.count = 1ull << 62;
    f.error_code = ENOMEM;
    f.error_name = "ENOMEM";
    ot_report_failure(&f);
    f.api = "malloc";
    f.count = 0;
    f.size = (uint64_t)-16;
    ot_report_failure(&f);
    char path[400];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    char *text = slurp(path);
    ASSERT(text);
    EXPECT_CONTAINS(text, "calloc(4611686018427387904, overflow) failed");
    EXPECT_CONTAINS(text, "overflows size_t");
    EXPECT_CONTAINS(text, "negative or overflowed size");
}

/* The header shows calloc as the program called it (nmemb, size), as hooks_libc.c fills the record;
 * the JSON keeps size as the total and adds element_size. */
static void calloc_failure(uint64_t nmemb, uint64_t size)
{
    ot_failure_t f = {0};
    f.api = "calloc";
    f.count = nmemb;
    f.elem_size = size;
    f.size = size && nmemb > UINT64_MAX / size ? UINT64_MAX : nmemb * size;
    f.error_code = ENOMEM;
    f.error_name = "ENOMEM";
    f.device_index = -1;
    ot_report_failure(&f);
}

TEST(calloc_header_is_the_call)
{
    setup("calloc");
    ot_opt.max_reports = 10;
    calloc_failure(3763200, 1);
    calloc_failure(1, 3763200);
    calloc_failure(1000, 3763);
    calloc_failure(1ull << 62, 8);
    char path[400];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    char *text = slurp(path);
    ASSERT(text);
    EXPECT_CONTAINS(text, "calloc(3763200, 1) failed: ENOMEM (12)");
    EXPECT_CONTAINS(text, "calloc(1, 3763200) failed: ENOMEM (12)");
    EXPECT_CONTAINS(text, "calloc(1000, 3763) failed: ENOMEM (12)");
    EXPECT_CONTAINS(text, "requested 3.6 MiB (3763000 bytes)");
    EXPECT_CONTAINS(text, "calloc(4611686018427387904, 8) failed: ENOMEM (12)");
    EXPECT(!strstr(text, "calloc(3763200, 3763200)"));
    EXPECT(python_ok("import json,sys,glob; got=sorted([tuple(json.load(open(p))[\"failure\"][k] for k in (\"size\",\"count\",\"element_size\")) "
                     "for p in glob.glob(sys.argv[1]+\"/r.*.json\")], key=str); "
                     "want=sorted([(3763200,3763200,1),(3763200,1,3763200),(3763000,1000,3763),(None,1<<62,8)], key=str); "
                     "assert got==want, got", dir));
}

TEST(flood_is_summarised)
{
    setup("flood");
    ot_opt.max_reports = 2;
    unsigned before = ot_report_failures_total();
    for (int i = 0; i < 40; i++) fake_hook_failure(1 << 20);
    EXPECT_EQ_U(ot_report_failures_total() - before, 40);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test $(ls %s/*.json 2>/dev/null | wc -l) -le 2", dir);
    EXPECT(system(cmd) == 0);
    char path[400];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    char *text = slurp(path);
    ASSERT(text);
    EXPECT_CONTAINS(text, "more allocation failures not reported in full");
}

static __attribute__((noinline)) void fake_refused_request(void)
{
    ot_failure_t f = {0};
    f.api = "cuMemCreate";
    f.size = 20 << 20;
    f.error_code = 800;
    f.error_name = "CUDA_ERROR_NOT_PERMITTED";
    f.device = true;
    f.device_index = 0;
    f.refused = true;
    ot_report_failure(&f);
}

/* A refused request (PyTorch's fabric-handle probe) is not a shortage: a line for the first four,
 * then at powers of two, and a count at exit; no report, not counted as a failure, no malloc. */
TEST(refusals_get_a_line_not_a_report)
{
    setup("refused");
    unsigned before = ot_report_failures_total();
    errno = 4321;
#if HAVE_MALLOC_COUNTER
    mallocs_seen = 0;
    count_mallocs = 1;
#endif
    for (int i = 0; i < 10; i++) fake_refused_request();
#if HAVE_MALLOC_COUNTER
    count_mallocs = 0;
    EXPECT_EQ_U(mallocs_seen, 0);
#endif
    EXPECT_EQ_U(errno, 4321);
    EXPECT_EQ_U(ot_report_failures_total(), before);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test $(ls %s/*.json 2>/dev/null | wc -l) -eq 0", dir);
    EXPECT(system(cmd) == 0);
    ot_report_exit_summary();
    char path[400];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    char *text = slurp(path);
    ASSERT(text);
    /* No origin and skip 0: the stack starts at the function that stands for the hook. */
    EXPECT_CONTAINS(text, "oomtrace: cuMemCreate(20971520) returned CUDA_ERROR_NOT_PERMITTED (800) on GPU 0 in "
                          "fake_refused_request");
    unsigned lines = 0;
    for (const char *p = text; (p = strstr(p, "the request was refused, not short of memory; no report")); p++) lines++;
    EXPECT_EQ_U(lines, 5); /* refusals 1, 2, 3, 4 and 8 */
    EXPECT_CONTAINS(text, "(8 refused requests so far)");
    EXPECT_CONTAINS(text, "at exit: 10 refused requests in all (not shortages of memory)");
    EXPECT(strstr(text, "====") == NULL);
}

TEST(report_file_never_follows_symlinks)
{
    setup("symlink");
    char target[400], link[400];
    snprintf(target, sizeof target, "%s/precious", dir);
    FILE *f = fopen(target, "w");
    ASSERT(f);
    fputs("keep", f);
    fclose(f);
    snprintf(ot_opt.report, sizeof ot_opt.report, "%s/snap.json", dir);
    snprintf(link, sizeof link, "%s/snap.json", dir);
    ASSERT(symlink(target, link) == 0);
    int n = ot_report_event("snapshot", "unit test");
    EXPECT(n > 0);
    EXPECT_STR(slurp(target), "keep");
    char alt[420];
    snprintf(alt, sizeof alt, "%s/snap.json.1", dir);
    EXPECT(access(alt, R_OK) == 0);
    EXPECT(python_ok("import json,sys; r=json.load(open(sys.argv[1])); assert r[\"event\"]==\"snapshot\" and r[\"failure\"] is None and r[\"reason\"]==\"unit test\"", alt));
}

/* File and line are the leak report's and the launcher's (libdw allocates): a failure report has
 * none, and makes no malloc, even with the library named and the frames it would name known. */
TEST(failure_report_without_file_line)
{
    setup("nolines");
    ot_opt.max_reports = 1000; /* a full report, after the other tests' */
    ot_symbolize_lines_use("libdw.so.1");
    ot_symbolize_begin();
    bool was = ot_report_frames_with_lines(true);
    const ot_frame_t *fr = ot_report_frame((uintptr_t)__builtin_return_address(0));
    bool known = fr->file[0] != 0;
    ot_report_frames_with_lines(was);
    EXPECT(!ot_report_frame((uintptr_t)__builtin_return_address(0))->file[0]); /* off again */
#if HAVE_MALLOC_COUNTER
    mallocs_seen = 0;
    count_mallocs = 1;
#endif
    fake_hook_failure(4242);
#if HAVE_MALLOC_COUNTER
    count_mallocs = 0;
    EXPECT_EQ_U(mallocs_seen, 0);
#endif
    EXPECT(python_ok("import glob,json,sys; r=json.load(open(glob.glob(sys.argv[1] + \"/r.*.json\")[0])); "
                     "s=r[\"failure\"][\"stack\"]; "
                     "assert s[0][\"function\"]==\"fake_hook_failure\", s[0]; "
                     "assert all(f[\"file\"] is None and f[\"line\"] is None for f in s), s",
                     dir));
    ot_symbolize_lines_use(NULL);
    if (!known) SKIP("no file:line with lines on either (%s)", ot_symbolize_lines_note() ? ot_symbolize_lines_note() : "no DWARF?");
}

/* report_killed.c: what the supervisor's samples add to a killed report's diagnosis. */
static char diag[4096];
static void collect(void *ctx, const char *line)
{
    (void)ctx;
    size_t n = strlen(diag);
    snprintf(diag + n, sizeof diag - n, "%s\n", line);
}

TEST(killed_supervisor_samples_diagnosis)
{
    static ot_report_t r;
    static ot_report_killed_t k;
    const uint64_t MiB = 1ull << 20, s0 = 1000000000000ull, ms = 1000000ull;
    static ot_killed_sample_t sv[12];
    static ot_rec_sample_t hist[1];
    memset(&r, 0, sizeof r);
    memset(&k, 0, sizeof k);
    r.killed = &k;
    k.signal = 9;
    k.by = OT_KILLED_CGROUP_OOM;
    k.cgroup_limit = 64 * MiB;
    k.cgroup_peak = k.cgroup_usage = -1;
    k.limit_file = "memory.max";
    /* 12 samples 100 ms apart, RSS and usage 8 MiB ... 63 MiB; died 40 ms after the last */
    for (unsigned i = 0; i < 12; i++) sv[i] = (ot_killed_sample_t){s0 + i * 100 * ms, (int64_t)(8 + 5 * i) * (int64_t)MiB, (int64_t)(8 + 5 * i) * (int64_t)MiB};
    k.sv = sv;
    k.n_sv = 12;
    k.died_realtime_ns = s0 + 1140 * ms;
    k.state_realtime_ns = s0 - 10 * ms;
    hist[0] = (ot_rec_sample_t){s0 - 10 * ms, 0, 0, 0, -1, -1};
    k.hist = hist;
    k.n_hist = 1;

    /* A 128 MiB block malloc'd before the samples, then touched: no claim that it was not malloc. */
    r.host.bytes = hist[0].live_host = 128 * MiB;
    diag[0] = 0;
    ot_report_diagnose_killed(&r, collect, NULL);
    EXPECT_CONTAINS(diag, "the supervisor's last sample, 40 ms before it died: RSS 63.0 MiB, cgroup usage 63.0 MiB (98% of the limit); the state file's last update was 1110 ms before that");
    EXPECT_CONTAINS(diag, "the cgroup usage grew by 55.0 MiB in the last 1100 ms of the samples, the tracked live memory by 0 B: pages of memory allocated earlier being touched");
    EXPECT(!strstr(diag, "never allocated"));

    /* A 12 MiB heap and the rest from elsewhere (mmap, tmpfs ...): named as not through malloc. */
    r.host.bytes = hist[0].live_host = 12 * MiB;
    diag[0] = 0;
    ot_report_diagnose_killed(&r, collect, NULL);
    EXPECT_CONTAINS(diag, "and 51.0 MiB of the cgroup's usage was never allocated through malloc/cudaMalloc: the program's own mmap, files in tmpfs");
    EXPECT(!strstr(diag, "being touched"));
    /* A cgroup without a limit (a session's, the root) is mostly other processes: the RSS is judged. */
    k.cgroup_limit = -1;
    for (unsigned i = 0; i < 12; i++) sv[i].cgroup_usage = (int64_t)(900 + 50 * i) * (int64_t)MiB;
    diag[0] = 0;
    ot_report_diagnose_killed(&r, collect, NULL);
    EXPECT_CONTAINS(diag, "the RSS grew by 55.0 MiB");
    EXPECT_CONTAINS(diag, "of the RSS was never allocated through malloc/cudaMalloc: the program's own mmap, or files it mapped");
    EXPECT(!strstr(diag, "cgroup usage grew"));
    k.cgroup_limit = 64 * MiB;
    for (unsigned i = 0; i < 12; i++) sv[i].cgroup_usage = sv[i].rss;

    /* The heap grew as much as the usage (malloc'd and touched as it went): neither claim. */
    hist[0].live_host = 0;
    r.host.bytes = 60 * MiB;
    diag[0] = 0;
    ot_report_diagnose_killed(&r, collect, NULL);
    EXPECT_CONTAINS(diag, "the supervisor's last sample");
    EXPECT(!strstr(diag, "grew by"));

    /* No samples (oomtrace postmortem): no sample lines at all. */
    k.n_sv = 0;
    diag[0] = 0;
    ot_report_diagnose_killed(&r, collect, NULL);
    EXPECT(!strstr(diag, "supervisor"));
}

TEST_MAIN(killed_supervisor_samples_diagnosis, failure_report_contents_without_malloc, rlimit_as_diagnosis, overflow_and_absurd_sizes, calloc_header_is_the_call, flood_is_summarised,
          refusals_get_a_line_not_a_report, report_file_never_follows_symlinks, failure_report_without_file_line)
