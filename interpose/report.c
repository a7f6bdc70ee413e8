/* Report entry points: a failure (ot_report_failure), an event (ot_report_event), refusals and the
 * exit summary; one report at a time, the report files and the log. Gathering, the diagnosis and the
 * writers are in report_gather.c, report_diag.c, report_text.c and report_json.c. Never calls malloc
 * and preserves errno, so it can run inside a failing allocation and from a signal handler. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "report_internal.h"

/* One report at a time; the state below is only touched while holding report_busy. */
static atomic_flag report_busy = ATOMIC_FLAG_INIT;
static int log_fd = -2; /* -2: not opened yet */
static pid_t log_pid;
static char log_opened_for[sizeof ot_opt.log]; /* the log= value log_fd was opened for */
static _Atomic unsigned report_counter;
static _Atomic unsigned failures_total, failures_suppressed;
static _Atomic unsigned refusals_total; /* refused requests (f->refused): not failures */
#define REFUSALS_IN_FULL 4                /* lines for the first refusals, then at powers of two */
/* Does the n-th refusal get its line? (Else the exit summary gives the total.) */
static inline bool refusal_has_line(unsigned n) { return n <= REFUSALS_IN_FULL || (n & (n - 1)) == 0; }

static ot_report_t R; /* guarded by report_busy */
static _Atomic long report_owner; /* tid holding report_busy: a signal on that thread must not wait */

static int open_new_file(const char *path)
{
    return (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* Creates the report file; never overwrites and never follows a symlink. If the expanded name is
 * taken, tries name.1, name.2, ... */
static int create_report_file(const char *path, char *final, size_t cap)
{
    ot_strlcpy(final, path, cap);
    int fd = open_new_file(final);
    for (int i = 1; fd < 0 && errno == EEXIST && i < 100; i++) {
        ot_buf_t b;
        ot_buf_init(&b, final, cap, -1);
        ot_buf_printf(&b, "%s.%d", path, i);
        ot_buf_cstr(&b);
        fd = open_new_file(final);
    }
    return fd;
}

static int get_log_fd(void)
{
    pid_t pid = ot_state.pid;
    if (log_fd != -2 && log_pid == pid && !ot_strcmp(log_opened_for, ot_opt.log)) return log_fd;
    if (log_fd > 2 && log_pid == pid) syscall(SYS_close, log_fd); /* log= changed (tests) */
    log_pid = pid;                                                 /* forked: a file of its own */
    ot_strlcpy(log_opened_for, ot_opt.log, sizeof log_opened_for);
    if (!ot_strcmp(ot_opt.log, "stderr")) return log_fd = 2;
    if (!ot_strcmp(ot_opt.log, "none")) return log_fd = -1;
    char path[600], final[620];
    if (!ot_expand_template(ot_opt.log, 0, path, sizeof path)) return log_fd = 2;
    log_fd = create_report_file(path, final, sizeof final);
    if (log_fd < 0) log_fd = 2;
    return log_fd;
}


/* ---------------------------------------------------------------- entry points */

static bool lock_report(bool wait)
{
    /* Another thread may be writing a report; wait a little (never from a signal handler). */
    for (int i = 0; atomic_flag_test_and_set_explicit(&report_busy, memory_order_acquire); i++) {
        if (!wait || i > 20000) return false;
        sched_yield();
    }
    atomic_store_explicit(&report_owner, (long)syscall(SYS_gettid), memory_order_relaxed);
    return true;
}

static void unlock_report(void)
{
    atomic_store_explicit(&report_owner, 0, memory_order_relaxed);
    atomic_flag_clear_explicit(&report_busy, memory_order_release);
}

/* From a signal handler: never on a report this thread was writing (it would wait on itself), at
 * most wait_ms on another thread's, sleeping (that thread may be the one the signal interrupts
 * last, on one CPU). */
static bool lock_report_signal(long wait_ms)
{
    if (atomic_load_explicit(&report_owner, memory_order_relaxed) == (long)syscall(SYS_gettid)) return false;
    for (long i = 0; atomic_flag_test_and_set_explicit(&report_busy, memory_order_acquire); i++) {
        if (i >= wait_ms) return false;
        struct timespec ts = {0, 1000000};
        syscall(SYS_nanosleep, &ts, NULL);
    }
    atomic_store_explicit(&report_owner, (long)syscall(SYS_gettid), memory_order_relaxed);
    return true;
}



/* A new report file from a path template, numbered (%n) from the one counter of this process's
 * reports; never overwrites, never follows a symlink. -1 where none could be made. */
static int open_numbered(const char *tmpl, unsigned no, char *final, size_t cap)
{
    char path[600];
    final[0] = 0;
    int fd = ot_expand_template(tmpl, no, path, sizeof path) ? create_report_file(path, final, cap) : -1;
    if (fd < 0) final[0] = 0;
    return fd;
}

static void emit(void)
{
    int jfd = ot_opt.report[0] ? open_numbered(ot_opt.report, R.report_no, R.json_path, sizeof R.json_path) : -1;
    if (jfd < 0) R.json_path[0] = 0;
    int lfd = get_log_fd();
    if (lfd >= 0) ot_report_write_text(&R, lfd);
    if (jfd >= 0) {
        ot_report_write_json(&R, jfd);
        syscall(SYS_close, jfd);
    }
    ot_recorder_note_report(R.json_path); /* the flight recorder counts it and keeps its path */
}

/* Under report_busy, with R's stack and the event's own section set: the report's number, its data
 * and both files. */
static int gather_emit(const char *event, const ot_failure_t *f, const char *reason)
{
    R.report_no = atomic_fetch_add(&report_counter, 1) + 1;
    ot_report_gather(&R, event, f, reason);
    R.suppressed_failures = atomic_load(&failures_suppressed);
    emit();
    return (int)R.report_no;
}

int ot_report_log_fd(void)
{
    if (!lock_report(true)) return 2;
    int fd = get_log_fd();
    unlock_report();
    return fd;
}

int ot_report_open_file(const char *tmpl, char *final, size_t cap, unsigned *no)
{
    unsigned n = atomic_fetch_add(&report_counter, 1) + 1;
    if (no) *no = n;
    return open_numbered(tmpl, n, final, cap);
}

/* A request the driver or runtime refused (invalid value, not permitted, ...): not a shortage of
 * memory, and often a probe the program falls back from, so one line in the log names the call and
 * its caller, and no report is written or counted against max_reports. */
static void note_refusal(const ot_failure_t *f)
{
    unsigned n = atomic_fetch_add(&refusals_total, 1) + 1;
    if (!refusal_has_line(n)) return;
    if (!lock_report(true)) return;
    ot_in_hook++;
    ot_state.pid = (pid_t)syscall(SYS_getpid);
    int lfd = get_log_fd();
    if (lfd >= 0) {
        uintptr_t ip[1];
        unsigned depth = f->origin ? ot_stack_capture_exact_at(ip, 1, f->origin)
                                   : ot_stack_capture_exact(ip, 1, f->skip + 1);
        char line[1024];
        ot_buf_t b;
        ot_buf_init(&b, line, sizeof line, lfd);
        ot_buf_printf(&b, "oomtrace: %s(%llu) returned %s (%d)", f->api, (unsigned long long)f->size,
                      f->error_name ? f->error_name : "?", f->error_code);
        if (f->device && f->device_index >= 0) ot_buf_printf(&b, " on GPU %d", f->device_index);
        if (depth) {
            ot_symbolize_begin();
            const ot_frame_t *fr = ot_report_frame(ip[0]);
            ot_buf_puts(&b, " in ");
            ot_report_put_where(&b, fr);
        }
        ot_buf_puts(&b, ": the request was refused, not short of memory; no report");
        if (n > 1) ot_buf_printf(&b, " (%u refused requests so far)", n);
        ot_buf_putc(&b, '\n');
        ot_buf_flush(&b);
    }
    ot_in_hook--;
    unlock_report();
}

void ot_report_failure(const ot_failure_t *f)
{
    int saved = errno;
    if (f->refused) {
        note_refusal(f);
        errno = saved;
        return;
    }
    unsigned seen = atomic_fetch_add(&failures_total, 1) + 1;
    if (seen > ot_opt.max_reports) {
        unsigned s = atomic_fetch_add(&failures_suppressed, 1) + 1;
        /* Count, and say so at 1, 2, 4, 8, ... suppressed failures: a failing loop cannot flood. */
        if ((s & (s - 1)) == 0) {
            int lfd = get_log_fd();
            if (lfd >= 0) {
                char line[256];
                ot_buf_t b;
                ot_buf_init(&b, line, sizeof line, lfd);
                ot_buf_printf(&b, "oomtrace: %u more allocation failures not reported in full (latest: %s of ",
                              s, f->api);
                ot_buf_bytes(&b, f->size);
                ot_buf_puts(&b, ")\n");
                ot_buf_flush(&b);
            }
        }
        ot_failures_note(f, "");
        ot_recorder_failure();
        errno = saved;
        return;
    }
    if (!lock_report(true)) {
        atomic_fetch_add(&failures_suppressed, 1);
        errno = saved;
        return;
    }
    ot_in_hook++;
    R.report_no = atomic_fetch_add(&report_counter, 1) + 1;
    R.depth = f->origin ? ot_stack_capture_exact_at(R.ips, ot_opt.stack_depth, f->origin)
                        : ot_stack_capture_exact(R.ips, ot_opt.stack_depth, f->skip + 1);
    ot_report_gather(&R, "alloc_failure", f, NULL);
    R.suppressed_failures = atomic_load(&failures_suppressed);
    /* libstdc++'s operator new loops: malloc fails, the new-handler runs, malloc is retried; only
     * when there is no handler does it throw. So a failure seen from operator new may yet succeed. */
    ot_failure_t fcopy;
    if (!f->may_recover && R.depth > 0) {
        if (!ot_strncmp(ot_report_frame(R.ips[0])->function, "operator new", 12)) {
            fcopy = *f;
            fcopy.may_recover = true;
            R.f = &fcopy;
        }
    }
    emit();
    ot_failures_note(f, R.json_path);
    ot_in_hook--;
    unlock_report();
    /* Into the flight recorder (after the lock: its update may look at the pressure, which reports). */
    ot_recorder_failure();
    errno = saved;
}

/* The stack of the allocation being made, from inside the library: the leading frames that lie in
 * the library's own module are dropped (all are kept if nothing else is left: a static test). */
static unsigned caller_stack(uintptr_t *ips, unsigned max)
{
    unsigned n = ot_stack_capture_exact(ips, max, 1);
    ot_symbolize_begin();
    char own[512];
    ot_strlcpy(own, ot_report_frame((uintptr_t)&caller_stack + 1)->module, sizeof own);
    unsigned drop = 0;
    while (drop < n && own[0] && !ot_strcmp(ot_report_frame(ips[drop])->module, own)) drop++;
    if (drop == n) return n;
    for (unsigned i = drop; i < n; i++) ips[i - drop] = ips[i];
    return n - drop;
}

int ot_report_pressure(const ot_pressure_event_t *p, const char *reason)
{
    int saved = errno;
    if (!lock_report(true)) {
        errno = saved;
        return -1;
    }
    ot_in_hook++;
    R.depth = caller_stack(R.ips, ot_opt.stack_depth);
    R.pressure = p;
    int n = gather_emit("pressure", NULL, reason);
    R.pressure = NULL;
    ot_in_hook--;
    unlock_report();
    errno = saved;
    return n;
}

int ot_report_event(const char *event, const char *reason)
{
    int saved = errno;
    if (!lock_report(true)) {
        errno = saved;
        return -1;
    }
    ot_in_hook++;
    R.depth = 0;
    int n = gather_emit(event, NULL, reason);
    ot_in_hook--;
    unlock_report();
    errno = saved;
    return n;
}

void ot_report_crash(const ot_crash_t *c)
{
    int saved = errno;
    if (!lock_report_signal(1000)) {
        errno = saved;
        return;
    }
    ot_in_hook++;
    /* A signal path: no file:line lookups (they allocate), even where the signal interrupted the
     * leak report on this thread. */
    bool lines = ot_report_frames_with_lines(false);
    static char reason[160];
    ot_buf_t b;
    ot_buf_init(&b, reason, sizeof reason, -1);
    ot_buf_printf(&b, "%s (signal %d, %s)", c->signame, c->signo, c->codename);
    if (c->has_addr) {
        ot_buf_puts(&b, " at address ");
        ot_buf_hex(&b, c->addr);
    }
    if (c->sent && c->sender_pid == (int)syscall(SYS_getpid)) ot_buf_puts(&b, " raised by this process");
    else if (c->sent) ot_buf_printf(&b, " sent by pid %d (uid %d)", c->sender_pid, c->sender_uid);
    ot_buf_cstr(&b);
    R.depth = c->depth;
    ot_memcpy(R.ips, c->ips, sizeof R.ips);
    R.in_signal = true;
    R.crash = c;
    R.n_recent = ot_failures_recent(R.recent, OT_RECENT_FAILURES);
    gather_emit("crash", NULL, reason);
    /* The process has spoken for itself: its state file goes, so the supervisor adds no "killed"
     * report for the same death. */
    ot_recorder_close();
    R.crash = NULL;
    R.in_signal = false;
    R.n_recent = 0;
    ot_report_frames_with_lines(lines);
    ot_in_hook--;
    unlock_report();
    errno = saved;
}

void ot_report_snapshot_signal(const char *reason)
{
    int saved = errno;
    if (!lock_report_signal(100)) {
        errno = saved;
        return;
    }
    ot_in_hook++;
    bool lines = ot_report_frames_with_lines(false); /* as for crashes */
    R.depth = 0;
    R.in_signal = true;
    gather_emit("snapshot", NULL, reason);
    R.in_signal = false;
    ot_report_frames_with_lines(lines);
    ot_in_hook--;
    unlock_report();
    errno = saved;
}

void ot_report_exit_summary(void)
{
    unsigned suppressed = atomic_load(&failures_suppressed), refused = atomic_load(&refusals_total);
    bool refusals_unsaid = !refusal_has_line(refused); /* false for 0: nothing to say */
    if ((!suppressed && !refusals_unsaid) || !lock_report(false)) return;
    ot_state.pid = (pid_t)syscall(SYS_getpid);
    int fd = get_log_fd();
    if (fd >= 0) {
        char line[256];
        ot_buf_t b;
        ot_buf_init(&b, line, sizeof line, fd);
        if (suppressed)
            ot_buf_printf(&b, "oomtrace: at exit: %u allocation failures in all, %u of them not reported in full "
                              "(max_reports=%u)\n", atomic_load(&failures_total), suppressed, ot_opt.max_reports);
        if (refusals_unsaid)
            ot_buf_printf(&b, "oomtrace: at exit: %u refused requests in all (not shortages of memory)\n", refused);
        ot_buf_flush(&b);
    }
    unlock_report();
}

unsigned ot_report_failures_total(void) { return atomic_load(&failures_total); }

void ot_report_atfork_child(void)
{
    atomic_store(&report_owner, 0);
    atomic_flag_clear(&report_busy);
    if (log_fd > 2) syscall(SYS_close, log_fd); /* the child writes to a file of its own */
    log_fd = -2;
}
