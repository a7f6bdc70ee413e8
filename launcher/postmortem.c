/* Post-mortem reports (event "killed") from the state files of processes that died without a
 * chance to speak: right after the supervised child's death (ot_pm_after_child), and later for any
 * left-over file (`oomtrace postmortem`). Fills the library's ot_report_t from a validated state
 * file and writes it with the library's own writers; never reports on a process that still runs. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"
#include "report_internal.h"
#include "statefile.h"

/* The library's globals the shared files read (options.c's templates); the launcher has no init.c. */
ot_state_t ot_state;
OT_TLS int ot_in_hook;
void ot_warn(const char *fmt, ...)
{
    (void)fmt;
}

static ot_report_t R;
static ot_report_killed_t K;

typedef struct {
    ot_options_t opt;        /* report=, log=, top_sites, stacks ... */
    char state_dir[512];     /* state_dir= (a template), "" default */
    int signal;              /* 0: unknown */
    ot_killed_by_t by;
    const char *why;
    const ot_oom_probe_t *cg; /* the supervisor's reading after the death, or NULL */
    int supervisor_pid;
    uint64_t died_ns;
    int forwarded_signal;
    uint64_t forwarded_ns;
    const ot_killed_sample_t *sv; /* the supervisor's samples of this process, or none */
    unsigned n_sv;
} pm_ctx_t;


/* OOMTRACE_OPTIONS as the child's library reads it; keys this build does not know are left to the
 * library (their messages were the child's to print). state_dir= is read here as the recorder does. */
static void parse_options(const char *s, pm_ctx_t *c)
{
    ot_options_defaults(&c->opt);
    c->state_dir[0] = 0;
    if (!s) return;
    char mem[2048];
    ot_buf_t err;
    ot_buf_init(&err, mem, sizeof mem, -1);
    ot_options_parse(s, &c->opt, &err);
    for (const char *p = s; p && *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 10 && !strncmp(p, "state_dir=", 10) && n - 10 < sizeof c->state_dir)
            snprintf(c->state_dir, sizeof c->state_dir, "%.*s", (int)(n - 10), p + 10);
        p = e ? e + 1 : NULL;
    }
}

/* The recorder's directory (interpose/recorder.c open_state_dir), for the process pid/exe. */
static void state_dir(const pm_ctx_t *c, char *out, size_t cap)
{
    if (c->state_dir[0]) {
        if (!ot_expand_template(c->state_dir, 0, out, cap)) out[0] = 0;
        return;
    }
    struct stat st;
    const char *base = "/dev/shm";
    if (stat(base, &st) != 0 || !S_ISDIR(st.st_mode)) {
        const char *t = getenv("TMPDIR");
        base = t && t[0] == '/' ? t : "/tmp";
    }
    snprintf(out, cap, "%s/oomtrace-%u", base, (unsigned)geteuid());
}

/* The recorder's directory (in dir) and the state file the process pid, started at start_time, makes
 * there (in path), as interpose/recorder.c names it. */
static void child_state_path(const pm_ctx_t *c, pid_t pid, unsigned long long start_time, char *dir, size_t dcap,
                             char *path, size_t pcap)
{
    state_dir(c, dir, dcap);
    snprintf(path, pcap, "%s/%s%d-%llu%s", dir, OT_REC_NAME_PREFIX, (int)pid, start_time, OT_REC_NAME_SUFFIX);
}

static void set_identity(int pid, const char *exe, const char *host)
{
    ot_state.pid = pid;
    snprintf(ot_state.exe, sizeof ot_state.exe, "%s", exe);
    snprintf(ot_state.host, sizeof ot_state.host, "%s", host);
}

/* A new file, never overwriting or following a symlink; name.1, name.2 ... when taken (as the
 * library's reports). */
static int create_new(const char *path, char *final, size_t cap)
{
    snprintf(final, cap, "%s", path);
    int fd = open(final, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    for (int i = 1; fd < 0 && errno == EEXIST && i < 100; i++) {
        snprintf(final, cap, "%s.%d", path, i);
        fd = open(final, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    return fd;
}

/* The text log: the process's own log file if it made one (appended to: it is the same process's
 * log), else a new one; stderr; or none (-1). */
static int open_log(const char *log, bool *close_it)
{
    *close_it = false;
    if (!strcmp(log, "stderr")) return 2;
    if (!strcmp(log, "none") || !log[0]) return -1;
    char path[600], final[620];
    if (!ot_expand_template(log, 0, path, sizeof path)) return 2;
    int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) fd = create_new(path, final, sizeof final);
    if (fd < 0) return 2;
    *close_it = true;
    return fd;
}

static const char *nonempty(const char *s)
{
    return s && s[0] ? s : NULL;
}

/* Fills R from the state file and writes the text and JSON reports. */
static void write_report(const char *path, const ot_sf_t *sf, const pm_ctx_t *c, const char *json_tmpl)
{
    static ot_module_desc_t mods[OT_REC_MAX_FRAMES * 8 + 512];
    const ot_rec_file_t *id = &sf->id;
    const ot_rec_frame_t *fr = &sf->fr;
    memset(&R, 0, sizeof R);
    memset(&K, 0, sizeof K);
    unsigned nm = sf->n_mods < sizeof mods / sizeof mods[0] ? sf->n_mods : (unsigned)(sizeof mods / sizeof mods[0]);
    for (unsigned i = 0; i < nm; i++) {
        const ot_rec_module_t *m = &sf->mods[i];
        mods[i] = (ot_module_desc_t){(uintptr_t)m->base, (uintptr_t)m->start, (uintptr_t)m->end, m->path,
                                     m->build_id, m->build_id_len};
    }
    ot_symbolize_use_modules(mods, nm);

    static char reason[160];
    snprintf(reason, sizeof reason, "%s%s%s", c->signal ? ot_report_signal_name(c->signal) : "died without a report",
             c->by == OT_KILLED_CGROUP_OOM   ? " by the cgroup OOM killer"
             : c->by == OT_KILLED_KERNEL_OOM ? " by the kernel's OOM killer"
                                             : "",
             c->supervisor_pid ? "" : " (post-mortem)");
    R.event = "killed";
    R.reason = reason;
    R.killed = &K;
    R.proc = (ot_report_proc_t){id->pid, id->exe, id->cmdline, id->host, nonempty(id->rank)};
    R.opt = (ot_report_opts_t){c->opt.stacks, c->opt.sample_bytes, c->opt.stack_min_bytes, c->opt.stack_depth,
                               c->opt.max_reports, c->opt.top_sites};
    const ot_rec_host_mem_t *m = &fr->mem;
    R.mem = (ot_host_mem_t){.mem_total = m->mem_total, .mem_available = m->mem_available,
                            .swap_total = m->swap_total, .swap_free = m->swap_free, .vm_size = m->vm_size,
                            .vm_rss = m->vm_rss, .vm_peak = m->vm_peak, .vm_data = m->vm_data,
                            .rlimit_as = m->rlimit_as, .rlimit_data = m->rlimit_data,
                            .cgroup_limit = m->cgroup_limit, .cgroup_usage = m->cgroup_usage,
                            .cgroup_swap_limit = m->cgroup_swap_limit, .cgroup_version = m->cgroup_version,
                            .ptr_bits = m->ptr_bits, .overcommit_memory = m->overcommit_memory};
    snprintf(R.mem.cgroup_path, sizeof R.mem.cgroup_path, "%s", id->cgroup_path);
    if (R.mem.cgroup_version < 0 || R.mem.cgroup_version > 2) R.mem.cgroup_version = 0;
    R.host = (ot_totals_t){fr->host.bytes, fr->host.count, fr->host.peak_bytes, fr->host.total_bytes, fr->host.total_count};
    R.device = (ot_totals_t){fr->device.bytes, fr->device.count, fr->device.peak_bytes, fr->device.total_bytes,
                             fr->device.total_count};
    for (unsigned k = 0; k < OT_KIND_COUNT && k < OT_REC_KINDS; k++)
        R.by_kind[k] = (ot_totals_t){fr->kind[k].bytes, fr->kind[k].count, fr->kind[k].peak_bytes,
                                     fr->kind[k].total_bytes, fr->kind[k].total_count};
    for (unsigned i = 0; i < sf->n_sites; i++) {
        const ot_rec_site_t *s = &sf->sites[i];
        bool dev = s->kind != OT_KIND_HOST;
        unsigned *n = dev ? &R.n_device_sites : &R.n_host_sites;
        if (*n >= OT_REPORT_MAX_SITES) continue;
        ot_site_info_t *o = dev ? &R.device_sites[(*n)++] : &R.host_sites[(*n)++];
        *o = (ot_site_info_t){s->site_id, s->kind, s->device, s->depth, (const uintptr_t *)s->ips, s->live_bytes,
                              s->live_count, s->peak_bytes, s->total_bytes, s->total_count, s->estimated != 0};
    }
    R.focus = -1;
    R.report_no = fr->reports_written + 1;
    R.suppressed_failures = fr->failures_seen > fr->reports_written ? fr->failures_seen - fr->reports_written : 0;
    R.tid = id->pid;
    R.when = (time_t)((c->died_ns ? c->died_ns : ot_clock_ns(CLOCK_REALTIME)) / 1000000000ull);

    K.signal = c->signal;
    K.by = c->by;
    K.why = c->why;
    if (c->cg && c->cg->version) {
        K.cgroup_version = c->cg->version;
        K.cgroup_path = c->cg->rel;
        K.limit_file = c->cg->limit_file;
        K.cgroup_limit = c->cg->limit;
        K.cgroup_peak = c->cg->peak;
        K.cgroup_usage = c->cg->usage;
    } else {
        K.cgroup_version = R.mem.cgroup_version;
        K.cgroup_path = R.mem.cgroup_path;
        K.limit_file = R.mem.cgroup_version == 2 ? "memory.max" : "memory.limit_in_bytes";
        K.cgroup_limit = R.mem.cgroup_limit;
        K.cgroup_peak = fr->cgroup_peak;
        K.cgroup_usage = R.mem.cgroup_usage;
    }
    K.supervisor_pid = c->supervisor_pid;
    K.state_file = path;
    K.state_realtime_ns = fr->update_realtime_ns;
    K.died_realtime_ns = c->died_ns;
    K.torn = sf->other_torn;
    K.forwarded_signal = c->forwarded_signal;
    K.forwarded_realtime_ns = c->forwarded_ns;
    /* The newest ones only: a crafted file's ring of 100,000 distinct stacks must not make the
     * report symbolize millions of frames (the history has no stacks: all of it, up to a bound). */
    K.n_large = sf->n_large < 64 ? sf->n_large : 64;
    K.large = sf->large + (sf->n_large - K.n_large);
    K.n_hist = sf->n_hist < 16384 ? sf->n_hist : 16384;
    K.hist = sf->hist + (sf->n_hist - K.n_hist);
    K.n_fail = sf->n_fail < 32 ? sf->n_fail : 32;
    K.fail = sf->fail + (sf->n_fail - K.n_fail);
    K.failures_seen = fr->failures_seen;
    K.reports_written = fr->reports_written;
    K.last_report = fr->last_report;
    K.sv = c->sv;
    K.n_sv = c->n_sv;

    set_identity(id->pid, id->exe, id->host);
    int jfd = -1;
    if (json_tmpl && json_tmpl[0]) {
        char p[600];
        if (ot_expand_template(json_tmpl, R.report_no, p, sizeof p)) jfd = create_new(p, R.json_path, sizeof R.json_path);
        if (jfd < 0) {
            fprintf(stderr, "oomtrace: cannot create the killed report %s: %s\n", p, strerror(errno));
            R.json_path[0] = 0;
        }
    }
    bool close_log;
    int lfd = open_log(c->opt.log, &close_log);
    /* The launcher may allocate: its frames get file and line where the files have DWARF. */
    ot_symbolize_lines_use(c->opt.libdw);
    bool lines_were = ot_report_frames_with_lines(true);
    if (lfd >= 0) ot_report_write_text(&R, lfd);
    if (close_log) close(lfd);
    if (jfd >= 0) {
        ot_report_write_json(&R, jfd);
        close(jfd);
    }
    ot_report_frames_with_lines(lines_were);
}

/* Reads, checks and reports one file; removes it once reported. 0 reported, 1 refused / invalid. */
/* exe is a Go program: a 64-bit ELF file with the section the Go linker writes (.go.buildinfo). */
static bool is_go_program(const char *exe)
{
    int fd = open(exe, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool go = false;
    Elf64_Ehdr eh;
    Elf64_Shdr sh, str;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof sh && eh.e_shnum < 4096 &&
        eh.e_shstrndx < eh.e_shnum &&
        pread(fd, &str, sizeof str, (off_t)(eh.e_shoff + (uint64_t)eh.e_shstrndx * sizeof sh)) == (ssize_t)sizeof str) {
        for (unsigned i = 0; i < eh.e_shnum && !go; i++) {
            char name[16] = {0};
            if (pread(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + (uint64_t)i * sizeof sh)) != (ssize_t)sizeof sh) break;
            if (sh.sh_name >= str.sh_size) continue;
            if (pread(fd, name, sizeof name - 1, (off_t)(str.sh_offset + sh.sh_name)) <= 0) continue;
            go = !strcmp(name, ".go.buildinfo");
        }
    }
    close(fd);
    return go;
}

static int report_file(const char *path, pm_ctx_t *c, const char *json_tmpl, bool quiet_if_alive)
{
    ot_sf_t sf;
    char err[256];
    if (!ot_sf_read(path, &sf, err, sizeof err)) {
        fprintf(stderr, "oomtrace: %s: %s; no report\n", path, err);
        return 1;
    }
    int rc = 0;
    if (ot_sf_process_alive(&sf)) {
        if (!quiet_if_alive)
            fprintf(stderr, "oomtrace: %s: pid %d is still running (same start time): no report on a live process\n",
                    path, sf.id.pid);
        rc = 1;
    } else {
        /* Found afterwards, a Go program's file does not tell a death from a normal end: its runtime
         * exits by the exit_group system call, so no exit path of ours removed the file either way. */
        const char *why = c->why;
        if (c->by == OT_KILLED_UNKNOWN && is_go_program(sf.id.exe))
            c->why = "found afterwards, and it is a Go program: the Go runtime ends a program by the exit_group "
                     "system call, which leaves this file behind after a normal exit too, so it may not have died";
        write_report(path, &sf, c, json_tmpl);
        c->why = why;
        if (unlink(path) != 0 && errno != ENOENT)
            fprintf(stderr, "oomtrace: %s: reported, but cannot remove it: %s\n", path, strerror(errno));
    }
    ot_sf_free(&sf);
    return rc;
}

static bool is_state_name(const char *n)
{
    size_t l = strlen(n), pl = strlen(OT_REC_NAME_PREFIX), sl = strlen(OT_REC_NAME_SUFFIX);
    return l > pl + sl && !strncmp(n, OT_REC_NAME_PREFIX, pl) && !strcmp(n + l - sl, OT_REC_NAME_SUFFIX);
}

/* The last signal the supervisor forwarded (supervise.c tells us through these). */
static int g_forwarded_signal;
static uint64_t g_forwarded_ns;
void ot_pm_note_forwarded(int sig)
{
    g_forwarded_signal = sig;
    g_forwarded_ns = ot_clock_ns(CLOCK_REALTIME);
}

/* A state file's pid and start time, from its name (oomtrace-<pid>-<start>.rec); false if it has none. */
static bool name_ids(const char *n, pid_t *pid, unsigned long long *start)
{
    int p;
    unsigned long long st;
    char tail[8];
    if (sscanf(n + strlen(OT_REC_NAME_PREFIX), "%d-%llu%7s", &p, &st, tail) != 3 || strcmp(tail, OT_REC_NAME_SUFFIX))
        return false;
    *pid = p;
    *start = st;
    return true;
}

/* A process under that pid with that start time that is not a zombie (a cheap look before a file
 * is read: ot_sf_process_alive decides). */
static bool maybe_alive(pid_t pid, unsigned long long start)
{
    char state;
    return ot_proc_stat(pid, &state) == start && state != 'Z' && state != 'X';
}

#define PM_MAX_DEAD 64
typedef struct {
    char path[1024];
    int64_t rss;
} pm_dead_t;

static int by_rss_desc(const void *a, const void *b)
{
    int64_t x = ((const pm_dead_t *)a)->rss, y = ((const pm_dead_t *)b)->rss;
    return x < y ? 1 : x > y ? -1 : 0;
}

static pm_dead_t dead[PM_MAX_DEAD]; /* dead_descendants' results, for its two callers */

/* The state files in dir that name this supervisor and whose processes are gone, but skip's (the
 * supervised child's own): at most max, with the RSS each held when it last wrote. */
static unsigned dead_descendants(const char *dir, pid_t skip, pm_dead_t *out, unsigned max)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    unsigned n = 0;
    for (struct dirent *e; n < max && (e = readdir(d));) {
        pid_t pid;
        unsigned long long start;
        if (!is_state_name(e->d_name) || !name_ids(e->d_name, &pid, &start) || pid == skip || maybe_alive(pid, start))
            continue;
        snprintf(out[n].path, sizeof out[n].path, "%s/%s", dir, e->d_name);
        ot_sf_t sf;
        char err[256];
        if (!ot_sf_read(out[n].path, &sf, err, sizeof err)) continue;
        bool ours = sf.id.supervisor_pid == getpid() && !ot_sf_process_alive(&sf);
        out[n].rss = sf.fr.mem.vm_rss;
        ot_sf_free(&sf);
        if (ours) n++;
    }
    closedir(d);
    return n;
}

void ot_pm_after_child(pid_t pid, unsigned long long start_time, const char *prog, int sig,
                       const ot_oom_probe_t *before, const ot_oom_probe_t *after, const char *options)
{
    static pm_ctx_t c;
    parse_options(options, &c);
    c.signal = sig;
    ot_oom_verdict_t v = ot_oom_judge(sig, before, after);
    c.by = v.killer == OT_KILLER_CGROUP ? OT_KILLED_CGROUP_OOM
           : v.killer == OT_KILLER_KERNEL ? OT_KILLED_KERNEL_OOM
                                          : OT_KILLED_SIGNAL;
    c.why = v.why;
    c.cg = after;
    c.supervisor_pid = getpid();
    c.died_ns = ot_clock_ns(CLOCK_REALTIME);
    c.forwarded_signal = g_forwarded_signal;
    c.forwarded_ns = g_forwarded_ns;
    c.sv = ot_sampler_samples(&c.n_sv);
    char dir[600], path[1024];
    /* state_dir='s %e: the program as named (a script's interpreter would differ: rare in a directory) */
    set_identity(pid, prog, "");
    child_state_path(&c, pid, start_time, dir, sizeof dir, path, sizeof path);
    struct stat st;
    if (lstat(path, &st) == 0) report_file(path, &c, c.opt.report, false);
    /* Descendants of the child that died with it (a process group killed together, or an OOM kill
     * of the whole cgroup) and named this supervisor: their files, if their processes are gone. */
    c.signal = 0;
    c.by = OT_KILLED_UNKNOWN;
    c.why = "a descendant of the supervised program, found after it died";
    c.n_sv = 0; /* the samples are the supervised program's, not its descendants' */
    unsigned n = dead_descendants(dir, pid, dead, PM_MAX_DEAD);
    for (unsigned i = 0; i < n; i++) report_file(dead[i].path, &c, c.opt.report, true);
}

unsigned ot_pm_oom_descendants(pid_t child, const char *prog, const ot_oom_verdict_t *vp, const ot_oom_probe_t *after,
                               const char *options)
{
    const ot_oom_verdict_t v = *vp;
    if (v.killer == OT_KILLER_UNKNOWN || v.kills <= 0) return 0;
    static pm_ctx_t c;
    parse_options(options, &c);
    char dir[600];
    set_identity(child, prog, "");
    state_dir(&c, dir, sizeof dir);
    unsigned n = dead_descendants(dir, child, dead, PM_MAX_DEAD);
    if (n == 0) return 0;
    /* The OOM killer takes the process with the largest footprint, RSS above all: where fewer kills
     * were counted than descendants were found dead, those that held the most when they last wrote. */
    qsort(dead, n, sizeof dead[0], by_rss_desc);
    unsigned take = (int64_t)n < v.kills ? n : (unsigned)v.kills;
    static char why[400];
    snprintf(why, sizeof why,
             "a descendant of the supervised program, dead with its state file left (no exit path of its own ran), "
             "found when the OOM-kill counters moved: %s%s",
             v.why, take < n ? "; of the descendants found dead, the ones that held the most RSS, as the OOM killer chooses" : "");
    c.signal = 9; /* the OOM killer's signal */
    c.by = v.killer == OT_KILLER_CGROUP ? OT_KILLED_CGROUP_OOM : OT_KILLED_KERNEL_OOM;
    c.why = why;
    c.cg = after;
    c.supervisor_pid = getpid();
    c.died_ns = ot_clock_ns(CLOCK_REALTIME);
    c.forwarded_signal = 0;
    c.forwarded_ns = 0;
    c.sv = NULL;
    c.n_sv = 0; /* the supervisor samples its child, not the child's descendants */
    unsigned done = 0;
    for (unsigned i = 0; i < take; i++) done += report_file(dead[i].path, &c, c.opt.report, true) == 0;
    return done;
}

void ot_pm_after_exit(pid_t pid, unsigned long long start_time, const char *prog, int code, const char *options)
{
    static pm_ctx_t c;
    parse_options(options, &c);
    char dir[600], path[1024];
    child_state_path(&c, pid, start_time, dir, sizeof dir, path, sizeof path);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || unlink(path) != 0) return;
    if (c.opt.leak_check || c.opt.report_at_exit)
        fprintf(stderr,
                "oomtrace: %s (pid %d) exited with status %d by the exit_group system call, without libc's exit "
                "(as the Go runtime ends a program): its %s did not run\n",
                prog, (int)pid, code,
                c.opt.leak_check && c.opt.report_at_exit ? "final report and leak check"
                : c.opt.leak_check                       ? "leak check"
                                                         : "final report");
}

static void pm_usage(FILE *out)
{
    fprintf(out,
            "usage: oomtrace postmortem [--report=TEMPLATE] [--log=DEST] [STATE_FILE | DIR]...\n"
            "Writes a \"killed\" report for each state file whose process is gone (it died without writing\n"
            "a report of its own: SIGKILL, the OOM killer, a launcher killed with it), then removes the file.\n"
            "A file whose process still runs (same pid and start time) is left alone. Default DIR: the\n"
            "recorder's default state directory (/dev/shm/oomtrace-UID).\n"
            "\n"
            "  -o, --report=TEMPLATE  JSON report path (default: beside the state file,\n"
            "                         DIR/oomtrace.%%e.%%p.%%n.json; none = off)\n"
            "  -l, --log=DEST         text report: stderr (default), none, or a path template\n"
            "Exit status: 0 when every file named got a report, 1 when one was refused or unreadable.\n");
}

int ot_cmd_postmortem(int argc, char **argv)
{
    static const struct option longopts[] = {{"report", required_argument, 0, 'o'},
                                             {"log", required_argument, 0, 'l'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    static pm_ctx_t c;
    parse_options(getenv("OOMTRACE_OPTIONS"), &c);
    snprintf(c.opt.log, sizeof c.opt.log, "stderr");
    const char *report = NULL;
    optind = 1;
    for (int o; (o = getopt_long(argc, argv, "o:l:h", longopts, NULL)) != -1;) {
        switch (o) {
        case 'o': report = optarg; break;
        case 'l': snprintf(c.opt.log, sizeof c.opt.log, "%s", optarg); break;
        case 'h': pm_usage(stdout); return 0;
        default: pm_usage(stderr); return 2;
        }
    }
    if (report && !strcmp(report, "none")) report = "";
    c.signal = 0;
    c.by = OT_KILLED_UNKNOWN;
    c.why = "found afterwards by oomtrace postmortem: no supervisor saw it die";
    struct utsname u;
    if (uname(&u) == 0) snprintf(ot_state.host, sizeof ot_state.host, "%s", u.nodename);
    char defdir[600];
    char *def[] = {defdir, NULL};
    char **args = argv + optind;
    if (optind >= argc) {
        set_identity(0, "program", "");
        state_dir(&c, defdir, sizeof defdir);
        args = def;
    }
    int rc = 0, done = 0;
    for (; *args; args++) {
        struct stat st;
        if (stat(*args, &st) != 0) {
            fprintf(stderr, "oomtrace: %s: %s\n", *args, strerror(errno));
            rc = 1;
            continue;
        }
        bool isdir = S_ISDIR(st.st_mode);
        char dir[600], tmpl[700], path[1024];
        if (isdir) snprintf(dir, sizeof dir, "%s", *args);
        else {
            snprintf(dir, sizeof dir, "%s", *args);
            char *s = strrchr(dir, '/');
            if (s) *s = 0;
            else snprintf(dir, sizeof dir, ".");
        }
        snprintf(tmpl, sizeof tmpl, "%s/oomtrace.%%e.%%p.%%n.json", dir);
        const char *json = report ? report : tmpl;
        if (!isdir) {
            rc |= report_file(*args, &c, json, false);
            done++;
            continue;
        }
        DIR *d = opendir(dir);
        if (!d) {
            fprintf(stderr, "oomtrace: %s: %s\n", dir, strerror(errno));
            rc = 1;
            continue;
        }
        unsigned live = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (!is_state_name(e->d_name)) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            int r = report_file(path, &c, json, true);
            if (r) {
                ot_sf_t sf;
                char err[8];
                if (ot_sf_read(path, &sf, err, sizeof err)) {
                    if (ot_sf_process_alive(&sf)) live++, r = 0; /* a running process: not an error in a scan */
                    ot_sf_free(&sf);
                }
            } else {
                done++;
            }
            rc |= r;
        }
        closedir(d);
        if (live) fprintf(stderr, "oomtrace: %s: %u state files of running processes left alone\n", dir, live);
    }
    if (!done && !rc) fprintf(stderr, "oomtrace: postmortem: no state file of a process that is gone\n");
    return rc;
}
