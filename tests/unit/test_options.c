/* options.c: OOMTRACE_OPTIONS parsing, one clear line per bad item, and path templates. */
#include <unistd.h>

#include "harness.h"
#include "internal.h"

static int parse(const char *s, ot_options_t *o, char *err, size_t cap)
{
    ot_buf_t b;
    ot_buf_init(&b, err, cap, -1);
    ot_options_defaults(o);
    int n = ot_options_parse(s, o, &b);
    ot_buf_cstr(&b);
    return n;
}

TEST(defaults)
{
    ot_options_t o;
    ot_options_defaults(&o);
    EXPECT_STR(o.report, "oomtrace.%e.%p.%n.json");
    EXPECT_STR(o.log, "stderr");
    EXPECT(o.stacks == OT_STACKS_SAMPLED);
    EXPECT_EQ_U(o.stack_min_bytes, 64 * 1024);
    EXPECT(o.cuda);
}

TEST(valid_items)
{
    ot_options_t o;
    char err[512];
    int n = parse("report=/tmp/r.%p.json:log=none:stacks=all:stack_depth=16:sample_bytes=1M:"
                  "stack_min_bytes=4K:max_reports=7:cuda=0::verbose=1", &o, err, sizeof err);
    EXPECT_EQ_U(n, 0);
    EXPECT_STR(err, "");
    EXPECT_STR(o.report, "/tmp/r.%p.json");
    EXPECT_STR(o.log, "none");
    EXPECT(o.stacks == OT_STACKS_ALL);
    EXPECT_EQ_U(o.stack_depth, 16);
    EXPECT_EQ_U(o.sample_bytes, 1 << 20);
    EXPECT_EQ_U(o.stack_min_bytes, 4096);
    EXPECT_EQ_U(o.max_reports, 7);
    EXPECT(!o.cuda && o.verbose);
    parse("report=none", &o, err, sizeof err);
    EXPECT_STR(o.report, "");
}

TEST(bad_items_named_and_defaults_kept)
{
    ot_options_t o;
    char err[1024];
    int n = parse("stacks=bogus:stack_depth=0:nonsense=1:cuda=maybe:sample_bytes=12Q:justakey", &o, err, sizeof err);
    EXPECT_EQ_U(n, 6);
    EXPECT_CONTAINS(err, "'stacks=bogus'");
    EXPECT_CONTAINS(err, "valid values are sampled, all, none");
    EXPECT_CONTAINS(err, "'stack_depth=0'");
    EXPECT_CONTAINS(err, "'nonsense'");
    EXPECT_CONTAINS(err, "valid keys are");
    EXPECT_CONTAINS(err, "'cuda=maybe'");
    EXPECT_CONTAINS(err, "'sample_bytes=12Q'");
    EXPECT_CONTAINS(err, "'justakey'");
    int lines = 0;
    for (const char *p = err; *p; p++) lines += *p == '\n';
    EXPECT_EQ_U(lines, 6);
    EXPECT(o.stacks == OT_STACKS_SAMPLED);
    EXPECT_EQ_U(o.stack_depth, 32);
    EXPECT(o.cuda);
}

TEST(leak_items)
{
    ot_options_t o;
    char err[1024];
    ot_options_defaults(&o);
    EXPECT(!o.leak_check && o.leak_builtin_suppressions && o.leak_exitcode == 23 && !o.report_at_exit);
    int n = parse("leak_check=1:leak_exitcode=42:leak_min_bytes=1K:leak_report_reachable=1:"
                  "leak_builtin_suppressions=0:suppressions=/tmp/s.supp:junit=/tmp/j.%p.xml:report_at_exit=1",
                  &o, err, sizeof err);
    EXPECT_EQ_U(n, 0);
    EXPECT_STR(err, "");
    EXPECT(o.leak_check && o.leak_report_reachable && !o.leak_builtin_suppressions && o.report_at_exit);
    EXPECT(o.stacks == OT_STACKS_ALL); /* the leak check groups every block by its stack */
    EXPECT_EQ_U(o.leak_exitcode, 42);
    EXPECT_EQ_U(o.leak_min_bytes, 1024);
    EXPECT_STR(o.suppressions, "/tmp/s.supp");
    EXPECT_STR(o.junit, "/tmp/j.%p.xml");
    n = parse("leak_exitcode=256:leak_check=maybe:suppressions=", &o, err, sizeof err);
    EXPECT_EQ_U(n, 3);
    EXPECT_CONTAINS(err, "'leak_exitcode=256'");
    EXPECT_CONTAINS(err, "'leak_check=maybe'");
    EXPECT_CONTAINS(err, "suppression file");
    EXPECT_EQ_U(o.leak_exitcode, 23);
    EXPECT(!o.leak_check);
    /* The library that gives frames file and line: libdw.so.1 by default, a path, or none. */
    EXPECT_STR(o.libdw, "libdw.so.1");
    EXPECT_EQ_U(parse("libdw=/opt/elfutils/lib/libdw.so.1", &o, err, sizeof err), 0);
    EXPECT_STR(o.libdw, "/opt/elfutils/lib/libdw.so.1");
    EXPECT_EQ_U(parse("libdw=none", &o, err, sizeof err), 0);
    EXPECT_STR(o.libdw, "none");
    EXPECT_EQ_U(parse("libdw=", &o, err, sizeof err), 1);
    EXPECT_CONTAINS(err, "or none");
    EXPECT_STR(o.libdw, "libdw.so.1"); /* the default kept */
}

TEST(templates)
{
    char out[256], want[256];
    ot_state.pid = 4242;
    ot_strlcpy(ot_state.exe, "/opt/caffe/build/tools/caffe", sizeof ot_state.exe);
    ot_strlcpy(ot_state.host, "gpu07", sizeof ot_state.host);
    unsetenv("RANK");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("PMI_RANK");
    unsetenv("PMIX_RANK");
    setenv("SLURM_PROCID", "3", 1);
    EXPECT(ot_expand_template("oomtrace.%e.%p.%n.json", 2, out, sizeof out));
    EXPECT_STR(out, "oomtrace.caffe.4242.2.json");
    EXPECT(ot_expand_template("/r/%h-%r-%%-%x", 1, out, sizeof out));
    EXPECT_STR(out, "/r/gpu07-3-%-%x");
    setenv("RANK", "5", 1); /* torchrun's RANK wins over the scheduler's */
    EXPECT(ot_expand_template("%r", 1, out, sizeof out));
    EXPECT_STR(out, "5");
    setenv("RANK", "a/b", 1); /* substituted values never add directories */
    EXPECT(ot_expand_template("%r", 1, out, sizeof out));
    EXPECT_STR(out, "a_b");
    char tiny[8];
    EXPECT(!ot_expand_template("a-very-long-name-%p", 1, tiny, sizeof tiny));
    snprintf(want, sizeof want, "%d", 4242);
    EXPECT(ot_expand_template("%p", 1, out, sizeof out));
    EXPECT_STR(out, want);
}

TEST(signal_options)
{
    ot_options_t o;
    char err[512];
    EXPECT(parse("", &o, err, sizeof err) == 0);
    EXPECT(o.crash_signals && o.snapshot_signal == 0); /* crash reports on, snapshots off */
    EXPECT(parse("snapshot_signal=SIGUSR2:crash_signals=0", &o, err, sizeof err) == 0);
    EXPECT(o.snapshot_signal == SIGUSR2 && !o.crash_signals);
    EXPECT(parse("snapshot_signal=USR1", &o, err, sizeof err) == 0 && o.snapshot_signal == SIGUSR1);
    EXPECT(parse("snapshot_signal=12", &o, err, sizeof err) == 0 && o.snapshot_signal == 12);
    EXPECT(parse("snapshot_signal=off", &o, err, sizeof err) == 0 && o.snapshot_signal == 0);
    const char *bad[] = {"snapshot_signal=SIGSEGV", "snapshot_signal=KILL", "snapshot_signal=99",
                         "snapshot_signal=SIGFOO", "snapshot_signal="};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        EXPECT(parse(bad[i], &o, err, sizeof err) == 1);
        EXPECT_CONTAINS(err, bad[i]);
        EXPECT(o.snapshot_signal == 0); /* default kept */
        EXPECT(strchr(err, '\n') == strrchr(err, '\n')); /* one line */
    }
    EXPECT(parse("crash_signals=maybe", &o, err, sizeof err) == 1 && o.crash_signals);
}

TEST(recorder_and_pressure)
{
    ot_options_t o;
    char err[1024];
    ot_options_defaults(&o);
    EXPECT(o.recorder);
    EXPECT_EQ_U(o.recorder_bytes, 1024 * 1024);
    EXPECT_STR(o.state_dir, "");
    EXPECT(o.pressure == 0.9);
    EXPECT_EQ_U(o.recorder_min_bytes, 8 << 20);
    EXPECT_EQ_U(parse("recorder_min_bytes=0", &o, err, sizeof err), 0);
    EXPECT_EQ_U(o.recorder_min_bytes, 0);
    EXPECT_EQ_U(parse("recorder=0:recorder_bytes=4M:state_dir=/data/ot-%h:pressure=0.95", &o, err, sizeof err), 0);
    EXPECT_STR(err, "");
    EXPECT(!o.recorder);
    EXPECT_EQ_U(o.recorder_bytes, 4 << 20);
    EXPECT_STR(o.state_dir, "/data/ot-%h");
    EXPECT(o.pressure > 0.9499 && o.pressure < 0.9501);
    EXPECT_EQ_U(parse("pressure=0", &o, err, sizeof err), 0);
    EXPECT(o.pressure == 0);
    EXPECT_EQ_U(parse("pressure=.5", &o, err, sizeof err), 0);
    EXPECT(o.pressure == 0.5);
    int n = parse("pressure=1.2:pressure=0.1:pressure=9x:recorder_bytes=1K:recorder=maybe:state_dir=", &o, err, sizeof err);
    EXPECT_EQ_U(n, 6);
    EXPECT_CONTAINS(err, "'pressure=1.2'");
    EXPECT_CONTAINS(err, "'pressure=0.1'");
    EXPECT_CONTAINS(err, "'pressure=9x'");
    EXPECT_CONTAINS(err, "'recorder_bytes=1K'");
    EXPECT_CONTAINS(err, "expected a size from 256K to 64M");
    EXPECT_CONTAINS(err, "'recorder=maybe'");
    EXPECT_CONTAINS(err, "'state_dir='");
    EXPECT(o.pressure == 0.9 && o.recorder && o.recorder_bytes == 1024 * 1024); /* defaults kept */
}

TEST_MAIN(defaults, valid_items, bad_items_named_and_defaults_kept, templates, signal_options, recorder_and_pressure, leak_items)
