/* The report's data and the interfaces between the report files: report_gather.c fills an
 * ot_report_t from the live process; report_diag.c, report_text.c and report_json.c read only that
 * struct (and the symbolizer), so that a tool outside the process (the launcher's post-mortem) can
 * fill one from a state file and write the same report. Nothing here may call malloc. */
#ifndef OOMTRACE_REPORT_INTERNAL_H
#define OOMTRACE_REPORT_INTERNAL_H

#include <time.h>

#include "internal.h"
#include "recorder_format.h"

#define OT_REPORT_MAX_DEVICES 16
#define OT_REPORT_MAX_SITES 1000 /* top_sites' largest value */

/* Process identity as the report shows it (the live process's ot_state, or a state file's). */
typedef struct {
    int pid;
    const char *exe, *cmdline, *host, *rank; /* rank: NULL when none */
} ot_report_proc_t;

/* The options a report prints. */
typedef struct {
    ot_stacks_mode_t stacks;
    uint64_t sample_bytes, stack_min_bytes;
    unsigned stack_depth, max_reports;
    unsigned top_sites; /* sites listed per kind (the arrays may hold more: the diagnosis reads the first) */
} ot_report_opts_t;

/* A post-mortem (event "killed"): a process that died without a chance to speak, from the state
 * file its recorder left (filled by the launcher, launcher/postmortem.c). */
/* One of the supervisor's own samples of the child (launcher/sampler.c), one per
 * OT_SAMPLE_PERIOD_NS: -1 unknown. */
#define OT_SAMPLE_PERIOD_NS 100000000ull
typedef struct ot_killed_sample {
    uint64_t realtime_ns;
    int64_t rss;          /* /proc/PID/statm resident × page size */
    int64_t cgroup_usage; /* memory.current / memory.usage_in_bytes */
} ot_killed_sample_t;
typedef enum { OT_KILLED_UNKNOWN = 0, OT_KILLED_CGROUP_OOM, OT_KILLED_KERNEL_OOM, OT_KILLED_SIGNAL } ot_killed_by_t;
typedef struct {
    int signal;              /* the signal that killed it; 0: unknown (found later, no supervisor saw it) */
    ot_killed_by_t by;
    const char *why;         /* how `by` was decided */
    int cgroup_version;      /* the cgroup the supervisor watched; 0: none */
    const char *cgroup_path, *limit_file;
    int64_t cgroup_limit, cgroup_peak, cgroup_usage; /* -1 unknown */
    int supervisor_pid;      /* the launcher that saw it die, 0: `oomtrace postmortem` later */
    const char *state_file;
    uint64_t state_realtime_ns; /* when the state was last written */
    uint64_t died_realtime_ns;  /* when the supervisor saw it die, 0: unknown */
    bool torn;               /* the newest update was torn by the kill: this is the one before */
    int forwarded_signal;    /* the last signal the supervisor forwarded before the death, 0 none */
    uint64_t forwarded_realtime_ns;
    const ot_rec_large_t *large; /* the last large allocations, oldest first */
    unsigned n_large;
    const ot_rec_sample_t *hist; /* the memory history, oldest first */
    unsigned n_hist;
    const ot_rec_failure_t *fail; /* the last allocation failures, oldest first (strings terminated) */
    unsigned n_fail;
    unsigned failures_seen, reports_written;
    const char *last_report; /* "" none */
    const ot_killed_sample_t *sv; /* the supervisor's samples while it waited, oldest first */
    unsigned n_sv;                /* 0: none (`oomtrace postmortem`, or it died within one period) */
} ot_report_killed_t;

typedef struct {
    const char *event;  /* "alloc_failure", "snapshot", ... */
    const char *reason; /* snapshots: why; NULL: none */
    const ot_failure_t *f; /* the failed call; NULL for other events */
    const ot_report_killed_t *killed; /* event "killed"; NULL for other events */
    const ot_pressure_event_t *pressure; /* event "pressure": the limit and step; NULL otherwise */
    uintptr_t ips[OT_MAX_FRAMES]; /* the failing call's stack (pressure: the crossing allocation's) */
    unsigned depth;
    ot_report_proc_t proc;
    ot_report_opts_t opt;
    ot_host_mem_t mem;
    ot_totals_t host, device, by_kind[OT_KIND_COUNT];
    ot_device_info_t devices[OT_REPORT_MAX_DEVICES];
    int ndev;
    int focus; /* index into devices[] of the failing device, or -1 */
    /* The top call sites by live bytes, host and device apart (ips point to memory that outlives
     * the report: the call-site table, or the post-mortem's copy of a state file). */
    ot_site_info_t host_sites[OT_REPORT_MAX_SITES], device_sites[OT_REPORT_MAX_SITES];
    unsigned n_host_sites, n_device_sites;
    const ot_asmap_t *as;    /* where the address space went; NULL: not read */
    const ot_cg_usage_t *cg; /* the cgroup's usage when its limit binds or nearly; NULL: not read */
    unsigned report_no;
    unsigned suppressed_failures;
    char json_path[600]; /* where the JSON report went, "" for none */
    long tid;
    time_t when;
    bool in_signal; /* written from a signal handler: nothing may be loaded (NVML) */
    /* event "crash" (report_crash.c): the signal, and the allocation failures before it */
    const ot_crash_t *crash;
    ot_failure_note_t recent[OT_RECENT_FAILURES]; /* oldest first */
    unsigned n_recent;
} ot_report_t;

/* ---------------------------------------------------------------- report_gather.c */
/* Fills r from the live process (everything but report_no and json_path). */
void ot_report_gather(ot_report_t *r, const char *event, const ot_failure_t *f, const char *reason);

/* ---------------------------------------------------------------- report_diag.c */
typedef void (*ot_diag_sink_t)(void *ctx, const char *line);
/* Hands each diagnosis line to sink, most important first. */
void ot_report_diagnose(const ot_report_t *r, ot_diag_sink_t sink, void *ctx);

/* ---------------------------------------------------------------- report_killed.c: event "killed" */
void ot_report_diagnose_killed(const ot_report_t *r, ot_diag_sink_t sink, void *ctx);
void ot_report_text_killed(ot_buf_t *b, const ot_report_t *r);
void ot_report_json_killed(ot_buf_t *b, const ot_report_t *r); /* ",\"killed\":{...}" */

/* ---------------------------------------------------------------- report_pressure.c: event "pressure" */
void ot_report_text_pressure(ot_buf_t *b, const ot_report_t *r);
void ot_report_json_pressure(ot_buf_t *b, const ot_report_t *r); /* ",\"pressure\":{...}" */

/* ---------------------------------------------------------------- report_text.c, report_json.c */
void ot_report_write_text(const ot_report_t *r, int fd);
void ot_report_write_json(const ot_report_t *r, int fd);

/* ---------------------------------------------------------------- report_crash.c
 * The crash section of each writer (r->crash set): the signal, the story with the failures before
 * it, the crashing thread's stack. */
void ot_report_crash_text(const ot_report_t *r, ot_buf_t *b);
void ot_report_crash_json(const ot_report_t *r, ot_buf_t *b); /* ,"crash":{...} */

/* ---------------------------------------------------------------- report_fmt.c
 * Pieces the writers share. Not thread-safe: one report at a time (report.c's lock, or the
 * launcher, which writes one at a time). */
/* Symbolizes a stack entry, a return address (looked up at ip - 1, so that the frame is named after
 * the call and `addr2line -e module offset` prints the line of the call); the result is valid until
 * the next call. */
const ot_frame_t *ot_report_frame(uintptr_t ret_addr);
/* On: this thread's frames also get file and line from DWARF (ot_symbolize_line: it calls malloc,
 * so only where that is safe: the leak report, the launcher). Returns the previous setting. */
bool ot_report_frames_with_lines(bool on);
/* Is module (a path) one of the C and C++ runtimes, the loader or oomtrace, not the program's code? */
bool ot_report_runtime_module(const char *module);
/* "function (module+0xoffset)" of a frame. */
void ot_report_put_where(ot_buf_t *b, const ot_frame_t *fr);
void ot_report_text_stack(ot_buf_t *b, const uintptr_t *ips, unsigned depth);
void ot_report_json_stack(ot_buf_t *b, const uintptr_t *ips, unsigned depth);
/* Every JSON report's first members, up to and including "process" (the report's object left
 * open), and every text report's first words ("oomtrace: ==== pid N (exe) "): the failure, crash,
 * kill and pressure reports' (report_json.c, report_text.c) and the leak check's (leak_report.c). */
ot_report_proc_t ot_report_process(void); /* this process as reports name it (its pid asked of the kernel) */
void ot_report_json_head(ot_buf_t *b, const char *event, unsigned report_no, time_t when, const ot_report_proc_t *p);
void ot_report_text_head(ot_buf_t *b, const ot_report_proc_t *p);
void ot_report_put_time_utc(ot_buf_t *b, time_t t);
void ot_report_put_bytes_or(ot_buf_t *b, int64_t v, const char *unknown); /* v < 0: unknown */
void ot_report_put_pct(ot_buf_t *b, uint64_t part, uint64_t whole);       /* " (N%)" */
const char *ot_report_stacks_name(ot_stacks_mode_t m);
const char *ot_report_signal_name(int sig); /* "SIGKILL"; "signal N" for others (static buffer) */
/* "f0 ← f1" of a stack's first two frames into out (the site a diagnosis names). */
void ot_report_put_site_name(ot_buf_t *b, const uintptr_t *ips, unsigned depth);

#endif
