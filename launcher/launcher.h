/* The launcher's internal interface: what main.c, supervise.c, oomkill.c, statefile.c and
 * postmortem.c share. The launcher is an ordinary program (stdio and malloc are fine here); only
 * statefile.c's reader must treat its input as hostile. */
#ifndef OOMTRACE_LAUNCHER_H
#define OOMTRACE_LAUNCHER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ------------------------------------------------------------------ main.c: subcommands */
int ot_cmd_run(int argc, char **argv);        /* the default: run a program under the preload */
int ot_cmd_postmortem(int argc, char **argv); /* postmortem.c */

/* ------------------------------------------------------------------ oomkill.c
 * Who killed it: the cgroup's and the kernel's OOM-kill counters read before the child starts and
 * after it dies, and the cgroup's limit and peak. -1 = unknown / unlimited. */
typedef struct {
    int version;            /* 0 none found, 1, 2 */
    char path[512];         /* the cgroup's directory under the mount */
    char rel[256];          /* as /proc/PID/cgroup names it */
    int64_t oom_kill;       /* v2 memory.events oom_kill, v1 memory.oom_control oom_kill */
    int64_t oom;            /* v2 memory.events oom; v1 memory.failcnt (the limit was hit) */
    int64_t limit;          /* the tightest limit from this cgroup up (memory.max / limit_in_bytes) */
    int64_t limit_here;     /* this cgroup's own */
    char limit_file[32];    /* "memory.max" / "memory.limit_in_bytes" */
    int64_t usage, peak;    /* memory.current / usage_in_bytes; memory.peak / max_usage_in_bytes */
    int64_t vmstat_oom_kill; /* /proc/vmstat oom_kill: every OOM kill on the host */
} ot_oom_probe_t;
/* pid 0: this process. */
void ot_oom_probe(pid_t pid, ot_oom_probe_t *out);
/* For the supervisor's sampler: the probed cgroup's usage file (memory.current /
 * memory.usage_in_bytes) opened once (-1: no cgroup, or unreadable), and its value now from one
 * pread (-1 unknown). */
int ot_oom_usage_open(const ot_oom_probe_t *p);
int64_t ot_oom_usage_read(int fd);

typedef enum {
    OT_KILLER_UNKNOWN = 0, /* a signal with no OOM kill counted around it */
    OT_KILLER_CGROUP,      /* the cgroup's OOM killer: its limit was hit and it killed */
    OT_KILLER_KERNEL,      /* the kernel's (system-wide) OOM killer */
} ot_killer_t;
typedef struct {
    ot_killer_t killer;
    const char *why; /* one phrase on how that was decided */
    int64_t kills;   /* OOM kills counted from before to after by the counter decided on (0: unknown) */
} ot_oom_verdict_t;
/* Decides from the counters before and after (after read while the child was a zombie). */
ot_oom_verdict_t ot_oom_judge(int sig, const ot_oom_probe_t *before, const ot_oom_probe_t *after);

/* ------------------------------------------------------------------ supervise.c */
typedef struct {
    bool exec_only;       /* --exec: replace the launcher, as before the supervisor existed */
    const char *options;  /* the child's OOMTRACE_OPTIONS (report=, log=, state_dir= for the killed report) */
} ot_sv_opts_t;
/* Runs argv as the launcher's child and returns only if the child exited (its exit code);
 * a child killed by a signal makes the launcher die by the same signal. */
int ot_supervise(char **argv, const ot_sv_opts_t *o);
/* Dies by sig as the child did (core dumps off for the launcher itself); returns only if it cannot. */
void ot_die_by(int sig);

/* ------------------------------------------------------------------ sampler.c
 * While it waits, the supervisor samples the child itself (the state file is only updated from the
 * allocation path, so it does not see page faults, a program's own mmap, tmpfs or page cache charged
 * to the cgroup): every OT_SAMPLE_PERIOD_NS (report_internal.h), the child's RSS (/proc/PID/statm) and the cgroup's usage,
 * into a fixed ring of the last OT_SAMPLE_RING samples. */
#define OT_SAMPLE_RING 1024u
struct ot_killed_sample; /* interpose/report_internal.h */
/* The child to sample and the cgroup (ot_oom_probe's; version 0: none) whose usage to read. */
void ot_sampler_start(pid_t pid, const ot_oom_probe_t *cg);
/* One sample now: two preads of files opened once. A child whose memory is already gone (exiting) adds none. */
void ot_sampler_take(void);
/* The samples, oldest first (a copy, valid until the next take); *n of them. */
const struct ot_killed_sample *ot_sampler_samples(unsigned *n);

/* ------------------------------------------------------------------ postmortem.c */
/* After the supervised child died by sig: a "killed" report from its state file, if it left one. */
void ot_pm_after_child(pid_t pid, unsigned long long start_time, const char *prog, int sig,
                       const ot_oom_probe_t *before, const ot_oom_probe_t *after, const char *options);

/* After the supervised child exited with `code` (no signal): a state file still there means its exit
 * path never ran (the exit_group system call straight from a Go runtime). The file goes, with one
 * line on stderr where a final report or a leak check was asked for (they did not run). */
void ot_pm_after_exit(pid_t pid, unsigned long long start_time, const char *prog, int code, const char *options);

/* The descendants of the supervised child (their state files name this supervisor) that the OOM
 * killer took while the child lived on, as v says (the caller's ot_oom_judge of the counters up to
 * `after`, read once for its own test and for this): a "killed" report for each, at most one per
 * OOM kill counted, the largest (by RSS) first. A silent death with no OOM kill counted (a pool's
 * worker ended by SIGTERM) is left alone. Returns the reports written. */
unsigned ot_pm_oom_descendants(pid_t child, const char *prog, const ot_oom_verdict_t *v, const ot_oom_probe_t *after,
                               const char *options);

/* supervise.c tells the post-mortem which signal it last forwarded (Slurm: SIGTERM, then SIGKILL). */
void ot_pm_note_forwarded(int sig);

/* /proc/PID/stat field 22 (start time in clock ticks since boot); 0 if the process is gone. */
unsigned long long ot_proc_start_time(pid_t pid);
/* Start time and state letter of /proc/PID/stat (0 and state 0: no such process). */
unsigned long long ot_proc_stat(pid_t pid, char *state);

#endif
